"""Conversation and state commands: say (append a turn), window (the last turns), state (a StateStore).

A conversation is named by CONVERSATION under ``--ns`` (its turns live in the namespace
``NS/conversations/CONVERSATION``; see :mod:`coniti.conversation`). ``state`` reads and writes the
:class:`~coniti.state.StateStore` of namespace ``--ns`` (default ``state``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import CliError, common_options, ns_option, settings
from coniti.cli.parse import format_namespace, format_time, iso_time
from coniti.cli.types import META, TIME

if TYPE_CHECKING:
    from coniti.conversation import Turn

__all__ = ["say", "state", "window"]

_ROLES = ("user", "assistant", "system", "tool")  # coniti.conversation.ROLES, without importing it here


def turn_json(turn: Turn, namespace: tuple[str, ...]) -> dict[str, Any]:
    """A turn for ``--json``: its fields, its version, its time as ISO 8601 and the namespace."""
    return {
        "id": turn.id, "speaker": turn.speaker, "role": turn.role, "session": turn.session,
        "text": turn.text, "timestamp": turn.timestamp, "time": iso_time(turn.timestamp),
        "metadata": turn.metadata, "version": turn.version, "namespace": list(namespace),
    }  # fmt: skip


@click.command()
@click.argument("conversation")
@click.argument("text")
@click.option("--speaker", required=True, help="Who said it (non-empty).")
@click.option("--role", type=click.Choice(_ROLES), default=None, help="The speaker's role.")
@click.option("--session", default=None, help="The session the turn belongs to.")
@click.option("--id", "turn_id", default=None, help="The turn's id (default: a random one).")
@click.option("--time", "when", type=TIME, default=None, help="When it was said (default: now).")
@click.option("--meta", "meta", type=META, multiple=True, help="Metadata KEY=VALUE (repeatable).")
@ns_option("Namespace the conversation lives under, e.g. alice ('/' is the root).")
@common_options
def say(
    conversation: str,
    text: str,
    speaker: str,
    role: str | None,
    session: str | None,
    turn_id: str | None,
    when: float | None,
    meta: tuple[tuple[str, Any], ...],
    namespace: tuple[str, ...],
) -> None:
    """Append one turn, TEXT said by --speaker, to CONVERSATION (one atomic write)."""
    from coniti.conversation import Conversation, Turn

    s = settings()
    turn = Turn(
        id=uuid.uuid4().hex if turn_id is None else turn_id, speaker=speaker, text=text,
        timestamp=time.time() if when is None else when, role=role, session=session, metadata=dict(meta),
    )  # fmt: skip
    s.check_new_store_model(None)
    with s.open_store("create") as store, s.open_engine(store) as engine, s.stamp(store):
        conv = Conversation(engine, conversation, namespace=namespace)
        version = conv.append([turn])[0]
    if s.json:
        s.out.json({"id": turn.id, "conversation": conversation, "namespace": list(conv.namespace), "version": version})
    else:
        s.out.line(f"said {turn.id} in {conversation} ({format_namespace(conv.namespace)}, version {version})")


@click.command()
@click.argument("conversation")
@click.option("--last", type=click.IntRange(min=0), default=None, help="The last N matching turns.")
@click.option("--budget", "budget", type=click.IntRange(min=1), default=None,
              help="Keep the newest turns that fit this many tokens (about four bytes a token).")
@click.option("--role", "roles", type=click.Choice(_ROLES), multiple=True, help="Only turns of this role (repeatable).")
@click.option("--speaker", "speakers", multiple=True, help="Only turns of this speaker (repeatable).")
@click.option("--session", "sessions", multiple=True, help="Only turns of this session (repeatable).")
@click.option("--until", default=None, metavar="TURN|SEQ",
              help="End before this turn id; a number is a sequence number: the conversation as of it.")
@click.option("--context", "as_context", is_flag=True, help="Print the window as a prompt-ready block.")
@ns_option("Namespace the conversation lives under, e.g. alice ('/' is the root).")
@common_options
def window(
    conversation: str,
    last: int | None,
    budget: int | None,
    roles: tuple[str, ...],
    speakers: tuple[str, ...],
    sessions: tuple[str, ...],
    until: str | None,
    as_context: bool,
    namespace: tuple[str, ...],
) -> None:
    """Show the turns of CONVERSATION in time order: filters first, then --last, then --budget."""
    from coniti.conversation import Conversation

    s = settings()
    point: str | int | None = int(until) if until is not None and until.isdigit() else until
    kwargs: dict[str, Any] = {
        "last": last, "roles": roles or None, "speakers": speakers or None, "sessions": sessions or None,
        "until": point,
    }  # fmt: skip
    with s.open_store() as store:
        conv = Conversation(store, conversation, namespace=namespace)
        if as_context:
            block = conv.context(token_budget=budget or 2000, **kwargs)
            if s.json:
                s.out.json({"text": block.text, "omitted": block.omitted, "tokens": block.tokens, "seq": block.seq})
            else:
                s.out.line(block.text)
            return
        turns = conv.window(token_budget=budget, **kwargs)
    if s.json:
        s.out.json_lines(turn_json(t, conv.namespace) for t in turns)
        return
    s.out.table(
        ["time (UTC)", "speaker", "role", "id", "version", "text"],
        ([format_time(t.timestamp), t.speaker, t.role, t.id, t.version, t.text] for t in turns),
        wrap=["text"],
    )


@click.group()
def state() -> None:
    """Read and write the state store: JSON values by key, each change an audited event."""


def _store_ns(namespace: tuple[str, ...] | None) -> tuple[str, ...]:
    return namespace if namespace else ("state",)


_STATE_NS_HELP = "Namespace of the state store (default, and for the root: state)."


@state.command(name="get")
@click.argument("key")
@ns_option(_STATE_NS_HELP, default=None)
@common_options
def state_get(key: str, namespace: tuple[str, ...] | None) -> None:
    """Print KEY's value (JSON) and version; exit status 1 when it is not set."""
    from coniti.state import StateStore

    s = settings()
    with s.open_store() as store:
        entry = StateStore(store, namespace=_store_ns(namespace)).entry(key)
    if entry is None:
        raise CliError(f"state key {key!r} is not set")
    if s.json:
        s.out.json({"key": key, "value": entry.value, "version": entry.version})
    else:
        s.out.line(f"{json.dumps(entry.value, ensure_ascii=False)}  (version {entry.version})")


@state.command(name="set")
@click.argument("key")
@click.argument("value")
@click.option("--expect", "expect", default=None, metavar="VERSION|none",
              help="Set only if KEY's live version is VERSION ('none': only if KEY is not set).")
@ns_option(_STATE_NS_HELP, default=None)
@common_options
def state_set(key: str, value: str, expect: str | None, namespace: tuple[str, ...] | None) -> None:
    """Set KEY to VALUE, a JSON text (compare-and-set with --expect)."""
    from coniti.state import StateStore

    s = settings()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc.msg}", param_hint="'VALUE'") from None
    expected: Any = ...
    if expect is not None:
        if expect == "none":
            expected = None
        elif expect.isdigit():
            expected = int(expect)
        else:
            raise click.BadParameter("a version number or 'none'", param_hint="'--expect'")
    with s.open_store("create") as store, s.stamp(store):
        version = StateStore(store, namespace=_store_ns(namespace)).set(key, parsed, expected_version=expected)
    if s.json:
        s.out.json({"key": key, "version": version})
    else:
        s.out.line(f"set {key} (version {version})")


@state.command(name="rm")
@click.argument("key")
@ns_option(_STATE_NS_HELP, default=None)
@common_options
def state_rm(key: str, namespace: tuple[str, ...] | None) -> None:
    """Delete KEY; exit status 1 when it was not set."""
    from coniti.state import StateStore

    s = settings()
    with s.open_store("write") as store, s.stamp(store):
        deleted = StateStore(store, namespace=_store_ns(namespace)).delete(key)
    if not deleted:
        raise CliError(f"state key {key!r} is not set")
    if s.json:
        s.out.json({"key": key, "deleted": True})
    else:
        s.out.line(f"deleted {key}")


@state.command(name="ls")
@click.argument("prefix", required=False, default="")
@ns_option(_STATE_NS_HELP, default=None)
@common_options
def state_ls(prefix: str, namespace: tuple[str, ...] | None) -> None:
    """List the keys set (those starting with PREFIX), sorted."""
    from coniti.state import StateStore

    s = settings()
    with s.open_store() as store:
        keys = StateStore(store, namespace=_store_ns(namespace)).keys(prefix)
    if s.json:
        s.out.json_lines({"key": k} for k in keys)
    else:
        for k in keys:
            s.out.line(k)
