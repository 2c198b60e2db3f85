"""coniti as an MCP server on the official SDK (``pip install 'coniti[mcp]'``; ``coniti mcp`` runs it).

:func:`create_server` returns an :class:`mcp.server.mcpserver.MCPServer` over one engine whose memory
is a :class:`~coniti.impl.log.LogBackend`; run it with ``server.run()`` (stdio) or
``server.run("streamable-http", host=..., port=...)``. It holds no memory logic of its own: each tool
is one call of the engine or the store, with typed (pydantic) arguments and a structured result.

=============  ===================================================================================
``remember``   ingest one note (the strategy admits it: non-blank text, new id, not a duplicate)
``recall``     the notes that best answer a query, from a namespace or every namespace under a
               prefix; filter, note-time window, minimum score, ``as_of`` a past point
``get``        notes by id (``as_of`` a past point)
``update``     change only what is given of a note (text, time, metadata, a merge patch)
``forget``     delete notes; their history stays readable
``erase``      erase every version's content, for a privacy request (only with ``allow_erase``);
               returns the receipt (one ``erase`` event per id)
``history``    every event that touched one note, oldest first
``changes``    the audit trail after a sequence number, in pages
``diff``       note ids added, removed and changed between two points, per namespace (every
               namespace served, a prefix, or one namespace)
``verify``     check the hash chain and the projections
``append_turns``  append turns to a conversation in one atomic write (:mod:`coniti.conversation`)
``window``     a conversation's turns in time order: filters, ``until``, the last N, a token budget
=============  ===================================================================================

``recall`` with ``conversation`` answers from that conversation's turns (under ``namespace``, default
the served prefix), each hit naming its turn's speaker, role and session.

Resources: ``coniti://head`` (the last event's ``seq`` and ``hash``) and
``coniti://notes{/namespace*}/{id}`` (one live note, e.g. ``coniti://notes/alice/work/n1``; a note
of the root namespace is ``coniti://notes/n1``; parts are percent-encoded).

**Vocabulary.** A namespace is a list of non-empty strings (``["alice", "work"]``; ``[]`` is the
root). A time (``timestamp``, ``start``, ``end``) is epoch seconds or an ISO 8601 string (UTC
unless it names a zone). A point (``as_of``, ``a``, ``b``) is a sequence number (an integer, 0 is
the empty memory) or an ISO 8601 time (the last event recorded at or before it).

**Who and why.** Every write runs in ``store.audit(actor, reason)``: the actor is ``actor`` when
given, else the name the client sent in its ``clientInfo``; the reason is the tool's ``reason``
argument, else ``reason``. A write with no reason at all is refused.

**Scope.** ``prefix`` confines every tool and resource to that namespace and those under it.
Namespaces stay absolute (as stored); one outside the prefix is refused. A tool's default namespace
is the prefix itself; ``recall``, ``changes`` and ``diff`` default to the whole subtree.

``scope`` (a :class:`~coniti.scope.Scope`; ``coniti mcp --scope user=alice``) serves through the
scoped handle ``engine.scoped(scope)`` (:mod:`coniti.scoped`): the prefix is the scope's root, the
default namespace its home (``["@scope", "user=alice", "@"]``), the engine's calls (remember, recall,
get, update, forget) go through the handle, which refuses the reserved metadata key ``scope`` in
``remember``/``update`` and in a ``recall`` filter. Give ``prefix`` or ``scope``, not both.

**Refusals.** ``read_only`` refuses every write tool with a tool error that says so. Bad input is a
tool error (``is_error``) naming the argument, and changes nothing: a value of the wrong type or
range, an argument the tool does not take (a misspelt ``namespace`` must not write elsewhere), a bad
filter or time; so is every coniti error (a version conflict, a note not found). Anything else is
reported as the SDK does for a crash (the text stays in the server's log).

**Retries.** ``remember`` and ``update`` take an ``op_id``: a retry of the same call writes nothing
and returns the first result. For ``remember`` with an ``op_id``, the default id is derived from it
and the default timestamp is the first call's, so a plain retry is the same request.

**Freshness and cost.** ``recall`` and ``remember`` first bring the engine up to date with writes
of other handles and processes (:meth:`~coniti.engine.ContinuityEngine.refresh`); the other tools
read the store itself. ``recall`` with ``as_of`` builds the structures of that point (a scan of
the namespaces it reads). ``changes`` on a server confined to a prefix reads the log from ``after``
until ``limit`` events of the subtree are found. The SDK runs each tool on a worker thread; the
engine's lock serialises them.
"""

from __future__ import annotations

import inspect
import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

import pydantic
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations

from coniti.actor import Note, Query, TimeRange, to_timestamp
from coniti.contracts import Contract
from coniti.engine import ContinuityEngine
from coniti.errors import ConitiError, ContractError
from coniti.events import Event
from coniti.impl.log import LogBackend, LogView
from coniti.integrations.mcp_errors import contract_message, describe
from coniti.integrations.mcp_turns import (
    Appended,
    TurnArg,
    TurnFields,
    TurnInfo,
    Window,
    turn_fields,
    turn_info,
)
from coniti.memory import MemoryRecord, as_namespace
from coniti.scope import Scope, check_metadata
from coniti.scoped import ScopedEngine
from coniti.times import in_horizon, iso_time, parse_iso_time

__all__ = [
    "Appended",
    "Changes",
    "DiffResult",
    "Erased",
    "EventInfo",
    "Forgotten",
    "Head",
    "History",
    "HitInfo",
    "NamespaceChanges",
    "NoteInfo",
    "Notes",
    "Recalled",
    "Remembered",
    "TurnArg",
    "TurnFields",
    "TurnInfo",
    "Updated",
    "Verified",
    "Window",
    "create_server",
]

# -- argument types ---------------------------------------------------------------------------

Part = Annotated[str, pydantic.Field(min_length=1)]
NamespaceArg = Annotated[
    list[Part] | None,
    pydantic.Field(
        description='A namespace as its parts, e.g. ["alice", "work"]; [] is the root. '
        "Default: the namespace this server serves."
    ),
]
TimeArg = Annotated[float, pydantic.Strict()] | str
"""Epoch seconds, or an ISO 8601 date or date-time (UTC unless it names a zone)."""
PointArg = Annotated[int, pydantic.Strict(), pydantic.Field(ge=0)] | str
"""A sequence number (0: the empty memory), or an ISO 8601 time: the last event recorded at or
before it."""
Ids = Annotated[list[Part], pydantic.Field(min_length=1, max_length=1000, description="Note ids.")]
Reason = Annotated[
    str | None,
    pydantic.Field(description="Why this change is made; kept in the audit trail."),
]
_OP_IDS = uuid.UUID("5f0c6a8e-3d7b-4c1e-9a2f-6b8d0e4c2a17")
"""The uuid5 namespace of note ids derived from op ids (``remember`` with an op id and no id)."""
_POINT = "a sequence number, or an ISO 8601 time (the last event at or before it)"
_POINT_TEXT = "an ISO 8601 time (a sequence number is given as an integer)"
_TIME = "epoch seconds or an ISO 8601 date/time (UTC unless it names a zone)"

# -- results ----------------------------------------------------------------------------------


class NoteInfo(Contract):
    """A note as a tool returns it: its content, namespace, version (the sequence number of the
    event that wrote it) and expiry, without its vector. ``time`` is ``timestamp`` in ISO 8601."""

    id: str
    namespace: list[str]
    text: str
    timestamp: float
    time: str | None
    metadata: dict[str, Any]
    version: int | None
    expires_at: float | None = None
    kind: str | None = None


class HitInfo(NoteInfo):
    """A recalled note, its score (higher is closer; the ranking's own scale) and its relevance
    (the score read on a 0-1 scale, :attr:`coniti.recall.Hit.relevance`; None for ``recent``);
    ``turn`` for a turn of a conversation; ``superseded`` True for a note no longer (or not yet)
    valid, shown only by ``include_superseded``."""

    score: float
    relevance: float | None = None
    turn: TurnFields | None = None
    superseded: bool = False


class Remembered(Contract):
    """The outcome of ``remember``: ``admitted``, or refused with a ``refused`` reason."""

    id: str
    namespace: list[str]
    admitted: bool
    refused: str | None = None
    version: int | None = None


class Recalled(Contract):
    """The hits of ``recall``, best first, and the point read (``seq``: ``as_of``, or the head
    when the call began): ``recall`` with ``as_of=seq`` answers the same again. ``receipt``: the
    seq of the recall receipt kept (``receipt=true``), else None."""

    seq: int
    namespace: list[str] | None
    prefix: list[str] | None
    hits: list[HitInfo]
    receipt: int | None = None


class Notes(Contract):
    """The notes ``get`` found, in the order asked, and the ids not live at that point."""

    seq: int
    notes: list[NoteInfo]
    missing: list[str]


class Updated(Contract):
    """The outcome of ``update``: the note's live version after it, whether it wrote nothing
    (``unchanged``) and whether it was the stored result of an earlier call with its ``op_id``."""

    id: str
    namespace: list[str]
    version: int
    unchanged: bool
    replayed: bool


class Forgotten(Contract):
    """The ids ``forget`` deleted and those that were not live."""

    namespace: list[str]
    deleted: list[str]
    missing: list[str]


class Erased(Contract):
    """The receipt of ``erase``: ids erased and the sequence number of each one's ``erase`` event,
    and ids the namespace never held."""

    namespace: list[str]
    erased: list[str]
    receipts: list[int]
    missing: list[str]


class EventInfo(Contract):
    """One event of the audit trail. ``kind``: put, delete, meta, clear, erase or op; ``at`` is
    when the store recorded it (``time`` in ISO 8601), never the note's own timestamp; ``note`` is
    the note a put wrote (None once erased); ``replaces`` the version a put replaced."""

    seq: int
    at: float
    time: str | None
    kind: str
    namespace: list[str]
    id: str | None
    actor: str | None
    reason: str | None
    erased: bool
    replaces: int | None = None
    op_id: str | None = None
    key: str | None = None
    value: Any = None
    note: NoteInfo | None = None


class History(Contract):
    """Every event that touched one note, oldest first."""

    id: str
    namespace: list[str]
    events: list[EventInfo]


class Changes(Contract):
    """A page of the audit trail: events after ``after``, oldest first. Ask again with
    ``after=next_after`` for the next page; ``head`` is the last event when the page was read."""

    after: int
    next_after: int
    head: int
    events: list[EventInfo]


class NamespaceChanges(Contract):
    """Note ids added, removed and changed in one namespace."""

    namespace: list[str]
    added: list[str]
    removed: list[str]
    changed: list[str]


class DiffResult(Contract):
    """What changed between the memory right after event ``a`` and right after event ``b``: in
    ``namespace`` alone, or in every namespace under ``prefix``; ``changes`` holds one entry per
    namespace with a change, sorted (empty: no change)."""

    a: int
    b: int
    namespace: list[str] | None
    prefix: list[str] | None
    changes: list[NamespaceChanges]


class Verified(Contract):
    """What ``verify`` found: ``ok`` when ``problems`` is empty."""

    ok: bool
    events_checked: int
    head_seq: int
    head_hash: str
    problems: list[str]


class Head(Contract):
    """The last event of the store: its sequence number and hash (the head of the hash chain)."""

    seq: int
    hash: str


# -- the server -------------------------------------------------------------------------------

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
coniti is durable, auditable memory. remember stores a note; recall finds the notes that answer a \
question (by meaning), optionally as of an earlier point; update corrects a note (a new version, the \
old one stays in its history); forget deletes notes (history kept). Every write needs a reason, kept \
in the audit trail. history, changes and diff show what changed, when, by whom and why."""


def create_server(
    engine: ContinuityEngine,
    *,
    prefix: Sequence[str] = (),
    scope: Scope | str | None = None,
    read_only: bool = False,
    allow_erase: bool = False,
    actor: str | None = None,
    reason: str | None = None,
    name: str = "coniti",
) -> MCPServer[Any]:
    """An MCP server over ``engine``, whose memory must be a :class:`LogBackend` (see the module
    docstring for the tools, resources and rules). ``prefix``: the namespace subtree it serves.
    ``scope``: serve through ``engine.scoped(scope)`` instead (a Scope or ``"user=alice,..."``).
    ``read_only``: refuse every write. ``allow_erase``: offer the ``erase`` tool (not listed
    otherwise; refused with ``read_only``). ``actor``: stamped on every write instead of the
    client's name. ``reason``: the reason of a write whose call gives none.

    Raises :class:`ContractError` for memory that is not a LogBackend, a bad ``prefix`` or
    ``scope``, both of them, or ``allow_erase`` with ``read_only``. The engine and its store stay the caller's to close.
    """
    memory = engine.memory
    if not isinstance(memory, LogBackend):
        raise ContractError(
            f"the MCP server needs memory with an audit trail (a LogBackend), got {memory.kind!r}"
        )
    if allow_erase and read_only:
        raise ContractError("allow_erase and read_only contradict each other: give one of them")
    served = as_namespace(prefix)
    if scope is None:
        tools = _Tools(engine, memory, served, served, read_only, actor, reason)
    else:
        if served:
            raise ContractError("prefix and scope: give one of them, not both")
        handle = engine.scoped(scope)
        tools = _Tools(handle, memory, handle.scope.root, handle.home, read_only, actor, reason, engine)
    server = _Server(name=name, instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")
    server.add_checked_tool(tools.remember, annotations=_WRITE)
    server.add_checked_tool(tools.recall, annotations=_READ)
    server.add_checked_tool(tools.get, annotations=_READ)
    server.add_checked_tool(tools.update, annotations=_WRITE)
    server.add_checked_tool(tools.forget, annotations=_DELETE)
    if allow_erase:
        server.add_checked_tool(tools.erase, annotations=_DELETE)
    server.add_checked_tool(tools.history, annotations=_READ)
    server.add_checked_tool(tools.changes, annotations=_READ)
    server.add_checked_tool(tools.diff, annotations=_READ)
    server.add_checked_tool(tools.verify, annotations=_READ)
    server.add_checked_tool(tools.append_turns, annotations=_WRITE)
    server.add_checked_tool(tools.window, annotations=_READ)
    server.resource("coniti://head", name="head", mime_type="application/json",
                    description="The last event: its sequence number and hash.")(tools.head)
    server.resource(
        "coniti://notes{/namespace*}/{id}", name="note", mime_type="application/json",
        description="One live note, by namespace parts and id (percent-encoded).",
        security=ResourceSecurity(exempt_params={"namespace", "id"}),
    )(tools.note)  # fmt: skip
    return server


class _Server(MCPServer[Any]):
    """MCPServer whose anticipated failures read in the user's terms: an argument the tool does not
    take is refused (a misspelt ``namespace`` must not write elsewhere), argument validation reads
    as one line per argument, coniti's errors keep their own message (instead of a generic crash).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._arguments: dict[str, list[str]] = {}

    def add_checked_tool(self, fn: Callable[..., Any], annotations: ToolAnnotations) -> None:
        """Register ``fn`` as a tool named after it; its parameters but ``ctx`` are its arguments."""
        self.add_tool(fn, annotations=annotations)
        self._arguments[fn.__name__] = [p for p in inspect.signature(fn).parameters if p != "ctx"]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self._arguments.get(name)
        unknown = [] if known is None else [a for a in arguments if a not in known]
        if known is not None and unknown:
            raise ToolError(
                f"Error executing tool {name}: {', '.join(unknown)}: not an argument of this tool "
                f"(it takes {', '.join(known) or 'none'})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            if isinstance(exc.__cause__, ConitiError):
                raise ToolError(f"Error executing tool {name}: {exc.__cause__}") from exc.__cause__
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, pydantic.ValidationError):
                problems = describe(exc.__cause__)
                raise ToolError(f"Error executing tool {name}: {problems}") from exc.__cause__
            raise


class _Tools:
    """The tools and resources of one server, as plain methods over the engine and its store."""

    def __init__(
        self,
        engine: ContinuityEngine | ScopedEngine,
        store: LogBackend,
        prefix: tuple[str, ...],
        home: tuple[str, ...],
        read_only: bool,
        actor: str | None,
        reason: str | None,
        base: ContinuityEngine | None = None,
    ) -> None:
        self._engine = engine
        self._base = engine if isinstance(engine, ContinuityEngine) else base
        """The engine under a scoped handle (the conversation tools write through it, into
        namespaces checked to lie under the served prefix, the scope's root)."""
        self._store = store
        self._prefix = prefix
        self._home = home
        self._read_only = read_only
        self._actor = actor
        self._reason = reason

    # -- writes --------------------------------------------------------------------------------

    def remember(
        self,
        text: Annotated[str, pydantic.Field(description="What to remember.")],
        ctx: Context[Any, Any],
        reason: Reason = None,
        namespace: NamespaceArg = None,
        id: Annotated[str | None, pydantic.Field(
            min_length=1, description="The note's id (default: a random one).")] = None,
        timestamp: Annotated[TimeArg | None, pydantic.Field(
            description=f"When it happened: {_TIME}. Default: now.")] = None,
        metadata: Annotated[dict[str, Any] | None, pydantic.Field(
            description="JSON metadata, e.g. {\"topic\": \"travel\"}; recall can filter on it.")] = None,
        op_id: Annotated[str | None, pydantic.Field(
            min_length=1, description="Idempotency key: a retry with the same key and text writes "
            "nothing (its id and timestamp default to the first call's).",
        )] = None,
        kind: Annotated[str | None, pydantic.Field(
            min_length=1, description="What the note is: message, fact, summary, preference, event or "
            "your own word; recall filters on it with {\"$kind\": ...}.")] = None,
    ) -> Remembered:  # fmt: skip
        """Remember one note: embed it and store it. The memory's strategy may refuse it (blank
        text, an id already used, an exact duplicate): the result says so and why."""
        ns = self._namespace(namespace)
        if id is None:
            id = uuid.uuid4().hex if op_id is None else uuid.uuid5(_OP_IDS, op_id).hex
        if timestamp is not None:
            when = _seconds(timestamp, "timestamp")
        else:
            first = None if op_id is None else self._first_timestamp(op_id, ns, id)
            when = time.time() if first is None else first
        note = _note(id, text, when, metadata, kind)
        self._engine.refresh()  # the strategy's duplicate check sees other processes' notes
        with self._writing("remember", ctx, reason):
            result = self._engine.ingest_many([note], namespace=ns, op_id=op_id)[0]
        found = self._engine.get([result.id], namespace=ns).records if result.admitted else []
        return Remembered(
            id=result.id, namespace=list(ns), admitted=result.admitted, refused=result.reason,
            version=found[0].version if found else None,
        )  # fmt: skip

    def append_turns(
        self,
        conversation: Annotated[str, pydantic.Field(min_length=1, description="The conversation's name.")],
        turns: Annotated[list[TurnArg], pydantic.Field(min_length=1, max_length=1000, description="The turns, in order.")],
        ctx: Context[Any, Any],
        reason: Reason = None,
        namespace: NamespaceArg = None,
    ) -> Appended:  # fmt: skip
        """Append turns to a conversation, all or none (one atomic write), each a note of kind
        message; ids already stored are refused and nothing is written."""
        from coniti.conversation import Conversation, Turn

        ns = self._conversation(conversation, namespace)
        now = time.time()
        made = []
        for i, arg in enumerate(turns):
            try:
                if not isinstance(self._engine, ContinuityEngine):
                    check_metadata(arg.metadata, "metadata")
                made.append(Turn(
                    id=uuid.uuid4().hex if arg.id is None else arg.id, speaker=arg.speaker, text=arg.text,
                    timestamp=now if arg.timestamp is None else _seconds(arg.timestamp, f"turns.{i}.timestamp"),
                    role=arg.role, session=arg.session, metadata=arg.metadata or {},
                ))  # fmt: skip
            except ContractError as exc:
                raise ToolError(f"turns.{i}: {contract_message(exc, 'Turn')}") from None
        assert self._base is not None
        self._base.refresh()
        conv = Conversation(self._base, conversation, namespace=ns[:-2])
        with self._writing("append_turns", ctx, reason):
            versions = conv.append(made)
        return Appended(conversation=conversation, namespace=list(ns), ids=[t.id for t in made], versions=versions)

    def update(
        self,
        id: Annotated[str, pydantic.Field(min_length=1, description="The note to change.")],
        ctx: Context[Any, Any],
        reason: Reason = None,
        namespace: NamespaceArg = None,
        text: Annotated[str | None, pydantic.Field(description="The new text (re-embedded).")] = None,
        timestamp: Annotated[TimeArg | None, pydantic.Field(
            description=f"The note's new time: {_TIME}.")] = None,
        metadata: Annotated[dict[str, Any] | None, pydantic.Field(
            description="New metadata, replacing all of it.")] = None,
        metadata_patch: Annotated[dict[str, Any] | None, pydantic.Field(
            description="An RFC 7386 merge patch of the metadata: keys given are set, null removes one.",
        )] = None,
        expected_version: Annotated[int | None, pydantic.Field(
            ge=1, strict=True, description="Write only if the live version is this (compare-and-set).",
        )] = None,
        op_id: Annotated[str | None, pydantic.Field(
            min_length=1, description="Idempotency key: a retry with the same key writes nothing.",
        )] = None,
    ) -> Updated:  # fmt: skip
        """Correct a note: change only what is given (text, time, metadata), as a new version.
        The old version stays in the note's history and in the memory as of earlier points."""
        ns = self._namespace(namespace)
        if text is None and timestamp is None and metadata is None and metadata_patch is None:
            raise ToolError("nothing to update: give text, timestamp, metadata or metadata_patch")
        when = None if timestamp is None else _seconds(timestamp, "timestamp")
        with self._writing("update", ctx, reason):
            result = self._engine.update(
                id, text=text, timestamp=when, metadata=metadata, metadata_patch=metadata_patch,
                namespace=ns, expected_version=... if expected_version is None else expected_version,
                op_id=op_id,
            )  # fmt: skip
        return Updated(
            id=id, namespace=list(ns), version=result.versions[id],
            unchanged=id in result.unchanged, replayed=result.replayed,
        )  # fmt: skip

    def forget(
        self, ids: Ids, ctx: Context[Any, Any], reason: Reason = None, namespace: NamespaceArg = None
    ) -> Forgotten:
        """Delete notes. Their history stays: history, changes and recall with as_of still show
        them. Ids that are not live come back in missing."""
        ns = self._namespace(namespace)
        with self._writing("forget", ctx, reason):
            result = self._engine.remove(ids, namespace=ns)
        return Forgotten(namespace=list(ns), deleted=result.deleted, missing=result.missing)

    def erase(
        self,
        ids: Ids,
        reason: Annotated[str, pydantic.Field(
            min_length=1, description="Why (e.g. the privacy request); kept in the erase event.")],
        ctx: Context[Any, Any],
        namespace: NamespaceArg = None,
    ) -> Erased:  # fmt: skip
        """Erase the content (text, vector, metadata) of every version of these notes from the whole
        history, for a privacy request; the record that a change happened stays, and one erase event
        per id is the receipt. Cannot be undone. The freed bytes leave the store's file only with
        `coniti compact`, run while no server has the store open."""
        ns = self._namespace(namespace)
        with self._writing("erase", ctx, reason):
            result = self._store.erase(ids, namespace=ns, reason=reason)
        self._engine.refresh()
        return Erased(
            namespace=list(ns), erased=result.erased, receipts=result.receipts, missing=result.missing
        )

    # -- reads ---------------------------------------------------------------------------------

    def recall(
        self,
        query: Annotated[str | None, pydantic.Field(
            description="The question or topic, matched by meaning.")] = None,
        namespace: Annotated[list[Part] | None, pydantic.Field(
            description='Answer from this one namespace, e.g. ["alice", "work"].')] = None,
        prefix: Annotated[list[Part] | None, pydantic.Field(
            description="Answer from every namespace under this one, ranked together "
            "(default: every namespace this server serves).")] = None,
        k: Annotated[int, pydantic.Field(ge=1, le=1000, strict=True, description="How many notes.")] = 10,
        filter: Annotated[dict[str, Any] | None, pydantic.Field(
            description='Only notes whose metadata match, e.g. {"kind": "fact"} or '
            '{"priority": {"$lte": 2}} (operators $eq $ne $gt $gte $lt $lte $in $nin $exists '
            "$contains $and $or $not; dotted paths).")] = None,
        start: Annotated[TimeArg | None, pydantic.Field(
            description=f"Only notes from this time on: {_TIME}.")] = None,
        end: Annotated[TimeArg | None, pydantic.Field(
            description=f"Only notes before this time: {_TIME}.")] = None,
        as_of: Annotated[PointArg | None, pydantic.Field(
            description=f"Answer from the memory as it was at this point: {_POINT}.")] = None,
        min_score: Annotated[float | None, pydantic.Field(
            allow_inf_nan=False, description="Drop notes scoring below this (the ranking's raw score).")] = None,
        min_relevance: Annotated[float | None, pydantic.Field(
            ge=0.0, le=1.0, description="Drop notes whose relevance (0 to 1: semantic the cosine, keyword 1 "
            "when every word matches once, hybrid the fused score on the same scale) is below this.")] = None,
        strategy: Annotated[Literal["auto", "semantic", "keyword", "hybrid", "recent"], pydantic.Field(
            description="How to rank: auto (hybrid for a query, recent for a time window), semantic "
            "(by meaning), keyword (BM25 on the words: codes, names, rare words), hybrid (both "
            "fused: by score over conversation turns, by reciprocal rank over plain notes), recent "
            "(newest first).")] = "auto",
        conversation: Annotated[str | None, pydantic.Field(
            min_length=1, description="Answer from the turns of this conversation (under namespace, "
            "default the namespace this server serves); each hit names its speaker and session.",
        )] = None,
        valid_at: Annotated[TimeArg | None, pydantic.Field(
            description=f"Answer with the facts valid in the world at this time: {_TIME} "
            "(default: leave out those whose validity ended).")] = None,
        include_superseded: Annotated[bool, pydantic.Field(
            strict=True, description="Also return facts no longer valid, marked superseded.")] = False,
        receipt: Annotated[bool, pydantic.Field(strict=True, description="Keep a recall receipt of the answer "
            "in the log (the query's digest, the point read, every hit and score: `coniti receipt SEQ` "
            "replays it); the result's receipt is its seq. Not with as_of; refused by a read-only server.")] = False,
        ctx: Context[Any, Any] | None = None,
    ) -> Recalled:  # fmt: skip
        """Recall the notes that best answer a query, best first: from one namespace, or from
        every namespace under a prefix, or from one conversation's turns. Give a query, or
        start/end for the notes of a time window (most recent first); as_of answers from the
        memory as it was at an earlier point. Facts whose validity ended are left out unless
        include_superseded; valid_at answers about another moment of the world."""
        window = _window(start, end)
        moment = None if valid_at is None else _seconds(valid_at, "valid_at")
        if query is None and window is None:
            raise ToolError("query: give a query, or start/end for the notes of a time window")
        if receipt and (valid_at is not None or include_superseded):
            raise ToolError("receipt: a receipt keeps answers about the present: leave out valid_at and include_superseded")
        if receipt and (self._read_only or as_of is not None):
            raise ToolError("receipt: a read-only server keeps no receipt" if self._read_only
                            else "receipt, as_of: a receipt keeps answers about the present: leave out as_of")
        if namespace is not None and prefix is not None:
            raise ToolError("namespace, prefix: give one of them, not both")
        if conversation is not None:
            if prefix is not None:
                raise ToolError("conversation, prefix: a conversation lives under one namespace: give namespace")
            namespace = list(self._conversation(conversation, namespace))
            filter = {"$kind": "message"} if filter is None else {"$and": [filter, {"$kind": "message"}]}
        ns = () if namespace is None else self._inside(namespace, "namespace")
        scope = None if namespace is not None else (
            self._prefix if prefix is None else self._inside(prefix, "prefix"))  # fmt: skip
        try:
            question = Query(
                text=query, time_range=window, k=k, filter=filter, min_score=min_score,
                min_relevance=min_relevance, strategy=strategy,
            )
        except ContractError as exc:
            raise ToolError(contract_message(exc, "Query")) from None
        self._engine.refresh()
        seq = self._store.head if as_of is None else self._view(as_of, "as_of").seq
        engine = self._engine if as_of is None else self._engine.at(seq)
        try:
            with self._store.audit(actor=self._actor or (None if ctx is None else _client_name(ctx)), reason=self._reason):
                answer = engine.ask(
                    question, namespace=ns, prefix=scope, valid_at=moment, include_superseded=include_superseded,
                    receipt=receipt,
                )  # fmt: skip
        finally:
            if engine is not self._engine:
                engine.close()
        hits = [
            HitInfo(
                **_note_fields(h.note, h.namespace, h.version),
                score=h.score, relevance=h.relevance, turn=turn_fields(h.note), superseded=h.superseded,
            )
            for h in answer.hits
        ]
        return Recalled(
            seq=seq, namespace=None if scope is not None else list(ns),
            prefix=None if scope is None else list(scope), hits=hits, receipt=answer.receipt,
        )  # fmt: skip

    def window(
        self,
        conversation: Annotated[str, pydantic.Field(min_length=1, description="The conversation's name.")],
        namespace: NamespaceArg = None,
        last: Annotated[int | None, pydantic.Field(ge=0, strict=True, description="The last N matching turns.")] = None,
        token_budget: Annotated[int | None, pydantic.Field(
            ge=1, strict=True, description="Keep the newest turns that fit this many tokens (about four bytes "
            "a token; the newest always).")] = None,
        roles: Annotated[list[Literal["user", "assistant", "system", "tool"]] | None, pydantic.Field(
            min_length=1, description="Only turns of these roles.")] = None,
        speakers: Annotated[list[Part] | None, pydantic.Field(min_length=1, description="Only turns of these speakers.")] = None,
        sessions: Annotated[list[Part] | None, pydantic.Field(min_length=1, description="Only turns of these sessions.")] = None,
        until: Annotated[str | int | None, pydantic.Field(
            description="End before this turn id (a string), or read as of this sequence number (an integer).")] = None,
    ) -> Window:  # fmt: skip
        """A conversation's turns, oldest first, for a prompt: filters (roles, speakers, sessions)
        first, then until, then the last N, then the token budget."""
        from coniti.conversation import Conversation

        ns = self._conversation(conversation, namespace)
        conv = Conversation(self._store, conversation, namespace=ns[:-2])
        try:
            turns = conv.window(
                last=last, token_budget=token_budget, roles=roles, speakers=speakers, sessions=sessions, until=until
            )
        except ContractError as exc:
            raise ToolError(str(exc)) from None
        return Window(
            conversation=conversation, namespace=list(ns), seq=self._store.head,
            turns=[turn_info(t) for t in turns],
        )  # fmt: skip

    def get(
        self,
        ids: Ids,
        namespace: NamespaceArg = None,
        as_of: Annotated[PointArg | None, pydantic.Field(
            description=f"Read the notes as they were at this point: {_POINT}.")] = None,
    ) -> Notes:  # fmt: skip
        """Read notes by id, with their version; ids not live (at that point) come back in missing."""
        ns = self._namespace(namespace)
        if as_of is None:
            seq, result = self._store.head, self._store.get(self._store.get_request(ids, ns))
        else:
            view = self._view(as_of, "as_of")
            seq, result = view.seq, view.get(view.get_request(ids, ns))
        return Notes(seq=seq, notes=[_note_info(r) for r in result.records], missing=result.missing)

    def history(
        self,
        id: Annotated[str, pydantic.Field(min_length=1, description="The note's id.")],
        namespace: NamespaceArg = None,
    ) -> History:
        """Every event that touched one note, oldest first: each version written (who, when, why,
        the version it replaced) and the delete or erase that ended it."""
        ns = self._namespace(namespace)
        events = self._store.history(id, ns)
        if not events:
            raise ToolError(f"id: no event ever touched {id!r} in namespace {list(ns)}")
        return History(id=id, namespace=list(ns), events=[_event_info(e) for e in events])

    def changes(
        self,
        after: Annotated[int, pydantic.Field(
            ge=0, strict=True, description="Only events after this sequence number.")] = 0,
        namespace: Annotated[list[Part] | None, pydantic.Field(
            description="Only events of this namespace (default: every namespace this server "
            "serves).")] = None,
        limit: Annotated[int, pydantic.Field(
            ge=1, le=1000, strict=True, description="At most this many.")] = 100,
    ) -> Changes:  # fmt: skip
        """The audit trail: the events after a sequence number, oldest first, each with who made
        the change, when and why. Page with after=next_after."""
        head = self._store.head
        if namespace is not None:
            events: Iterator[Event] = self._store.events(
                after, namespace=self._inside(namespace, "namespace"), limit=limit)  # fmt: skip
        elif not self._prefix:
            events = self._store.events(after, limit=limit)
        else:
            n = len(self._prefix)
            under = (e for e in self._store.events(after) if e.namespace[:n] == self._prefix)
            events = itertools.islice(under, limit)
        page = [_event_info(e) for e in events]
        return Changes(after=after, next_after=page[-1].seq if page else after, head=head, events=page)

    def diff(
        self,
        a: Annotated[PointArg, pydantic.Field(description=f"The earlier point: {_POINT}.")],
        b: Annotated[PointArg, pydantic.Field(description=f"The later point: {_POINT}.")],
        namespace: Annotated[list[Part] | None, pydantic.Field(
            description='Compare only this namespace, e.g. ["alice", "work"].')] = None,
        prefix: Annotated[list[Part] | None, pydantic.Field(
            description="Compare every namespace under this one (default: every namespace this "
            "server serves).")] = None,
    ) -> DiffResult:
        """The note ids added, removed and changed between two points, per namespace: in every
        namespace this server serves, or under a prefix, or in one namespace."""
        if namespace is not None and prefix is not None:
            raise ToolError("namespace, prefix: give one of them, not both")
        seq_a, seq_b = self._view(a, "a").seq, self._view(b, "b").seq
        if namespace is not None:
            ns = self._inside(namespace, "namespace")
            diffs = [self._store.diff(seq_a, seq_b, namespace=ns)]
        else:
            scope = self._prefix if prefix is None else self._inside(prefix, "prefix")
            diffs = self._store.diff_all(seq_a, seq_b, prefix=scope)
        changes = [
            NamespaceChanges(namespace=list(d.namespace), added=d.added, removed=d.removed,
                             changed=d.changed)
            for d in diffs if not d.empty
        ]  # fmt: skip
        return DiffResult(
            a=seq_a, b=seq_b, namespace=None if namespace is None else list(ns),
            prefix=None if namespace is not None else list(scope), changes=changes,
        )  # fmt: skip

    def verify(self) -> Verified:
        """Check the whole store: every event decodes, the hash chain holds, and the indexes equal
        a fresh fold of the log."""
        report = self._store.verify()
        return Verified(
            ok=report.ok, events_checked=report.events_checked, head_seq=report.head_seq,
            head_hash=report.head_hash, problems=list(report.problems),
        )  # fmt: skip

    # -- resources -----------------------------------------------------------------------------

    def head(self) -> str:
        """``coniti://head``: the last event's sequence number and hash, as JSON."""
        return Head(seq=self._store.head, hash=self._store.head_hash).to_json()

    def note(self, namespace: list[str], id: str) -> str:
        """``coniti://notes{/namespace*}/{id}``: one live note as JSON."""
        try:
            ns = self._inside(namespace, "namespace")
        except ToolError as exc:
            raise ResourceError(str(exc)) from None
        found = self._store.get(self._store.get_request([id], ns)).records
        if not found:
            raise ResourceNotFoundError(f"no note {id!r} in namespace {list(ns)}")
        return _note_info(found[0]).to_json()

    # -- helpers -------------------------------------------------------------------------------

    def _writing(self, tool: str, ctx: Context[Any, Any], reason: str | None) -> AbstractContextManager[None]:
        """The audit block of one write, after the read-only and reason checks."""
        if self._read_only:
            raise ToolError(f"{tool} is refused: this server is read-only (started with --read-only)")
        why = self._reason if reason is None else reason
        if why is None or not why.strip():
            raise ToolError("reason: say why this change is made; it is kept in the audit trail")
        return self._store.audit(actor=self._actor or _client_name(ctx), reason=why)

    def _first_timestamp(self, op_id: str, ns: tuple[str, ...], id: str) -> float | None:
        """The note timestamp that the write recorded under ``op_id`` gave ``id``, if any."""
        recorded = self._store.op_result(op_id, ns)
        version = None if recorded is None else recorded.versions.get(id)
        if version is None:
            return None
        return next((e.timestamp for e in self._store.history(id, ns) if e.seq == version), None)

    def _conversation(self, name: str, namespace: list[str] | None) -> tuple[str, ...]:
        """The namespace of conversation ``name`` under ``namespace`` (default: the prefix)."""
        from coniti.conversation import conversation_namespace

        under = self._namespace(namespace)
        try:
            return conversation_namespace(name, under)
        except ContractError as exc:
            raise ToolError(str(exc)) from None

    def _namespace(self, value: list[str] | None) -> tuple[str, ...]:
        return self._home if value is None else self._inside(value, "namespace")

    def _inside(self, value: Sequence[str], field: str) -> tuple[str, ...]:
        try:
            ns = as_namespace(value)
        except ContractError as exc:
            raise ToolError(f"{field}: {exc}") from None
        if ns[: len(self._prefix)] != self._prefix:
            raise ToolError(
                f"{field}: {list(ns)} is outside what this server serves "
                f"({list(self._prefix)} and the namespaces under it)"
            )
        return ns

    def _view(self, point: int | str, field: str) -> LogView:
        """The store at a point; a sequence number beyond the head or a bad time names ``field``."""
        try:
            if isinstance(point, int):
                return self._store.at(point)
            return self._store.at(time=_seconds(point, field, _POINT_TEXT))
        except ContractError as exc:
            raise ToolError(f"{field}: {str(exc).removeprefix('seq ')}") from None


def _client_name(ctx: Context[Any, Any]) -> str | None:
    """The name the client gave in its ``clientInfo``, if any."""
    try:
        params = ctx.session.client_params
    except ValueError:  # no request (a direct call of MCPServer.call_tool)
        return None
    name = None if params is None else params.client_info.name
    return name if isinstance(name, str) and name else None


def _seconds(value: float | str, field: str, expected: str = _TIME) -> float:
    """A time argument as epoch seconds, within the horizon (years 1 to 9999 UTC); a bad one
    raises ToolError naming ``field`` and saying what is ``expected`` there."""
    if isinstance(value, str):
        try:
            seconds = parse_iso_time(value)
        except ValueError:
            raise ToolError(f"{field}: {value!r} is not {expected}") from None
    else:
        try:
            seconds = to_timestamp(value, field)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
    if not in_horizon(seconds):
        raise ToolError(f"{field}: {value!r} is outside years 1 to 9999 (UTC)")
    return seconds


def _window(start: float | str | None, end: float | str | None) -> TimeRange | None:
    if start is None and end is None:
        return None
    low = None if start is None else _seconds(start, "start")
    high = None if end is None else _seconds(end, "end")
    if low is not None and high is not None and low > high:
        raise ToolError(f"start, end: start ({start}) is after end ({end}): the window is empty")
    return TimeRange(start=low, end=high)


def _note(id: str, text: str, when: float, metadata: dict[str, Any] | None, kind: str | None = None) -> Note:
    try:
        return Note(id=id, text=text, timestamp=when, metadata={} if metadata is None else metadata, kind=kind)
    except ContractError as exc:
        raise ToolError(contract_message(exc, "Note")) from None


def _iso(seconds: float) -> str | None:
    """:func:`~coniti.times.iso_time`, or None beyond what a datetime holds."""
    try:
        return iso_time(seconds)
    except (OverflowError, OSError, ValueError):
        return None


def _note_fields(note: Note, namespace: Sequence[str], version: int | None) -> dict[str, Any]:
    return {
        "id": note.id, "namespace": list(namespace), "text": note.text, "timestamp": note.timestamp,
        "time": _iso(note.timestamp), "metadata": note.metadata, "version": version, "kind": note.kind,
    }  # fmt: skip


def _note_info(record: MemoryRecord) -> NoteInfo:
    return NoteInfo(**_note_fields(record.note, record.namespace, record.version),
                    expires_at=record.expires_at)  # fmt: skip


def _event_info(event: Event) -> EventInfo:
    return EventInfo(
        seq=event.seq, at=event.at, time=_iso(event.at), kind=event.kind,
        namespace=list(event.namespace), id=event.id, actor=event.actor, reason=event.reason,
        erased=event.erased, replaces=event.replaces, op_id=event.op_id, key=event.key,
        value=event.value, note=None if event.record is None else _note_info(event.record),
    )  # fmt: skip


def _version() -> str:
    try:
        return version("coniti")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"
