"""Commands that correct memory: set (upsert), update (patch) and sweep (expiry)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import CliError, common_options, ns_option, settings
from coniti.cli.parse import format_namespace, read_stdin_text
from coniti.cli.types import EXPIRY, JSON_OBJECT, META, TIME

if TYPE_CHECKING:
    from coniti.memory import WriteResult

__all__ = ["set_cmd", "sweep", "update"]

_IF_VERSION = click.option(
    "--if-version", "if_version", type=click.IntRange(min=1), default=None,
    help="Write only if the live version is N (compare-and-set).",
)
_OP_ID = click.option(
    "--op-id", "op_id", default=None,
    help="Idempotency key: a retry with the same key and request writes nothing.",
)


@click.command(name="set")
@click.argument("note_id", metavar="ID")
@click.argument("text")
@ns_option()
@click.option("--time", "when", type=TIME, default=None, help="When it happened (default: now).")
@click.option("--meta", "meta", type=META, multiple=True, help="Metadata KEY=VALUE (repeatable).")
@click.option("--expires", "expires", type=EXPIRY, default=None,
              help="Hide the note from then on: a duration (30m, 12h, 7d) or a time.")
@click.option("--embedding", "embedding", default=None, metavar="NAME",
              help="Embedder of a new store (default: $CONITI_EMBEDDING, else minilm); a store "
                   "holds one embedder: another is refused.")  # fmt: skip
@_IF_VERSION
@_OP_ID
@common_options
def set_cmd(
    note_id: str,
    text: str,
    namespace: tuple[str, ...],
    when: float | None,
    meta: tuple[tuple[str, Any], ...],
    expires: float | None,
    embedding: str | None,
    if_version: int | None,
    op_id: str | None,
) -> None:
    """Create ID or replace it whole with TEXT (use - to read it from stdin): a new version.

    What is not given is not kept: the time defaults to now, the metadata to none (use 'update' to
    change only some fields)."""
    from coniti.actor import Note

    s = settings()
    if text == "-":
        text = read_stdin_text()
    note = Note(id=note_id, text=text, timestamp=time.time() if when is None else when, metadata=dict(meta))
    s.check_new_store_model(embedding)
    with s.open_store("create") as store, s.open_engine(store, embedding) as engine, s.stamp(store):
        result = engine.upsert(
            note,
            namespace=namespace,
            expected_version=... if if_version is None else if_version,
            op_id=op_id,
            expires_at=expires,
        )
    _report(note_id, namespace, result)


@click.command()
@click.argument("note_id", metavar="ID")
@ns_option()
@click.option("--text", "text", default=None, help="The new text (re-embedded).")
@click.option("--time", "when", type=TIME, default=None, help="The new time of the note.")
@click.option("--meta", "meta", type=META, multiple=True,
              help="Set metadata KEY=VALUE (repeatable); other keys are kept. VALUE null removes KEY.")
@click.option("--patch", "patch", type=JSON_OBJECT, default=None,
              help="An RFC 7386 merge patch of the metadata, as a JSON object.")
@_IF_VERSION
@_OP_ID
@common_options
def update(
    note_id: str,
    namespace: tuple[str, ...],
    text: str | None,
    when: float | None,
    meta: tuple[tuple[str, Any], ...],
    patch: dict[str, Any] | None,
    if_version: int | None,
    op_id: str | None,
) -> None:
    """Change only what is given of ID (text, time, metadata keys); the rest is kept."""
    merged: dict[str, Any] | None = None
    if patch is not None or meta:
        merged = {**(patch or {}), **dict(meta)}
    if text is None and when is None and merged is None:
        raise CliError("nothing to update: give --text, --time, --meta or --patch")
    s = settings()
    with s.open_store("write") as store, s.open_engine(store) as engine, s.stamp(store):
        result = engine.update(
            note_id,
            text=text,
            timestamp=when,
            metadata_patch=merged,
            namespace=namespace,
            expected_version=... if if_version is None else if_version,
            op_id=op_id,
        )
    _report(note_id, namespace, result)


@click.command()
@common_options
def sweep() -> None:
    """Delete every expired record (each one a delete event, actor coniti-ttl, reason expired)."""
    s = settings()
    with s.open_store("write") as store:
        result = store.sweep()
    if s.json:
        s.out.json({"deleted": result.deleted})
    else:
        s.out.line(f"swept {result.deleted} expired record{'' if result.deleted == 1 else 's'}")


def _report(note_id: str, namespace: tuple[str, ...], result: WriteResult) -> None:
    s = settings()
    version = result.versions.get(note_id)
    unchanged = note_id in result.unchanged
    if s.json:
        s.out.json(
            {
                "id": note_id,
                "namespace": list(namespace),
                "version": version,
                "unchanged": unchanged,
                "replayed": result.replayed,
            }
        )
        return
    how = "replayed" if result.replayed else ("unchanged" if unchanged else "written")
    s.out.line(f"{note_id} in {format_namespace(namespace)}: version {version} ({how})")
