"""Conversations: turns stored as notes, read back as windows, recalled, and folded into state.

A :class:`Turn` is one utterance: ``id``, ``speaker``, ``text``, ``timestamp``, and optionally a
``role`` (one of :data:`ROLES`), a ``session`` and metadata. A :class:`Conversation` (from
:meth:`Container.conversation <coniti.container.Container.conversation>` or
``Conversation(engine, name)``) keeps its turns as notes of kind ``"message"`` in the namespace
``(*namespace, "conversations", name)`` (:func:`conversation_namespace`), the turn's speaker, role
and session under the metadata key ``"turn"`` (``{"turn": {"speaker": ..., "role": ..., "session":
...}}``, role and session only when set). So every read of notes works on turns: ``get``,
``scan``, ``history``, ``at(seq)``, ``erase``, ``export``; and ``engine.ask(query,
prefix=(*namespace, "conversations"))`` asks across every conversation under ``namespace``.

Order. A conversation's turns are in chronological order: by timestamp, then write order (the
order of a scan). Its *write order* is the order of its writes (the seq of the event that wrote
each turn, or the in-memory backend's counter): what :meth:`Conversation.state` folds in.

Windows. :meth:`Conversation.window` applies, in this order, the filters (``roles``, ``speakers``,
``sessions``), the point (``until``: a turn id, the window then ends before that turn, or a seq,
the turns written at or before it), then ``last`` (the last N matching turns), then
``token_budget`` (the newest turns whose lines fit, always the newest one). The same steps are
values (:class:`LastN`, :class:`RoleFilter`, :class:`SpeakerFilter`, :class:`SessionFilter`,
:class:`TokenBudget`, :class:`Chain`) for ``window(policy)``. :meth:`Conversation.context` renders
a window as a prompt block under the rules of :func:`~coniti.recall.to_context_block`, newest
first in priority: ``[... N earlier turns omitted ...]`` heads the block when older turns did not
fit, and the newest turn always renders (so the budget is an estimate).

State. :meth:`Conversation.state` folds ``fold(state, turn)`` over the conversation's writes
(:meth:`Conversation.written`) in write order from ``init``, under a bound: :class:`Full`,
:class:`Last` ``(n)`` (the last ``n`` turns written), :class:`FromSeq` ``(s)`` (turns of version
``>= s``), :class:`FromCheckpoint` ``(cp)`` (resume from a :class:`Checkpoint`'s state with the
turns written after it) or :class:`At` ``(cp)`` (the state as of the checkpoint, folded again from
``init``). A checkpoint is a value (``to_dict`` /
``from_dict``; keep it in a :class:`~coniti.state.StateStore`) that names its conversation and
store, the next version to read and the JSON state reached: a fold from it equals the full fold.
On a backend with an event feed (LogBackend) the writes folded are the conversation's ``put``
events, an append-only sequence: a turn rewritten later is folded again at its new version, a turn
deleted or expired since is still folded, by a full fold as by a fold from a checkpoint, so the two
stay equal whatever happens to the live turns (an erased write, its content gone, is left out of
folds made after the erasure). On a backend without one (in memory, a view of the past) they are
the live turns by version: the same while turns are only appended.

Reads are linear in the conversation's turns (a scan of its namespace; a fold on a log store reads
the namespace's events); nothing here writes but
:meth:`Conversation.append`. Bad input raises :class:`~coniti.errors.ContractError` (one line,
naming the field) and writes nothing; a fold that raises gives :class:`~coniti.errors.FoldError`.
"""

from __future__ import annotations

import copy
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Self, cast

import pydantic

from coniti.actor import Note, Query, to_stored_time
from coniti.contracts import Contract, NonEmptyText, check_json_value, text_problem
from coniti.errors import ContractError, FoldError, NotSupported
from coniti.memory import (
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    Namespace,
    ScanRequest,
    as_namespace,
    audited,
    event_feed,
    time_travel,
)
from coniti.recall import ContextBlock, Hit, estimate_tokens
from coniti.scope import Scope, check_metadata

if TYPE_CHECKING:
    from coniti.engine import ContinuityEngine
    from coniti.scoped import ScopedEngine

__all__ = [
    "ROLES",
    "TURN_KEY",
    "At",
    "Bound",
    "Chain",
    "Checkpoint",
    "Conversation",
    "ConversationState",
    "FromCheckpoint",
    "FromSeq",
    "Full",
    "Last",
    "LastN",
    "Policy",
    "RoleFilter",
    "SessionFilter",
    "SpeakerFilter",
    "TokenBudget",
    "Turn",
    "TurnHit",
    "conversation_namespace",
    "render_turn",
]

ROLES = ("user", "assistant", "system", "tool")
"""The roles a turn may have (or None)."""

TURN_KEY = "turn"
"""The metadata key under which a turn's note keeps its speaker, role and session."""

MESSAGE = "message"
"""The kind of a turn's note."""


def _name(value: Any, field: str) -> str:
    """A non-blank string of valid Unicode (a speaker, a session, a conversation name)."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not value or value.isspace():
        raise ValueError(f"{field} must be a non-blank string, got {value!r}")
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{field}: {problem}")
    return value


def _role(value: Any, field: str = "role") -> str:
    if value not in ROLES:
        raise ValueError(f"{field} must be one of {', '.join(ROLES)}, got {value!r}")
    return str(value)


class Turn(Contract):
    """One utterance of a conversation. Frozen; validated like :class:`~coniti.actor.Note`: ``id``
    non-empty, ``speaker`` and ``text`` non-blank, ``timestamp`` within the horizon, ``role`` one
    of :data:`ROLES` or None, ``session`` a non-blank string or None, ``metadata`` JSON without
    the key ``"turn"`` (:data:`TURN_KEY`, where the note keeps the turn's fields). ``version`` is
    filled on reads (the version of the note), ignored on writes, not serialised."""

    model_config = pydantic.ConfigDict(frozen=True)

    id: NonEmptyText
    speaker: str
    text: str
    timestamp: float
    role: str | None = None
    session: str | None = None
    metadata: dict[str, Any] = pydantic.Field(default_factory=dict)
    version: int | None = pydantic.Field(default=None, exclude=True)

    def __eq__(self, other: object) -> bool:
        """Equal fields; the version (where it was read from) is not compared."""
        if not isinstance(other, Turn):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def _fields(self) -> tuple[Any, ...]:
        return (self.id, self.speaker, self.text, self.timestamp, self.role, self.session, self.metadata)

    @pydantic.field_validator("speaker", "text", "session", mode="before")
    @classmethod
    def _names(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if value is None and info.field_name == "session":
            return None
        return _name(value, str(info.field_name))

    @pydantic.field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> float:
        return to_stored_time(value)

    @pydantic.field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> str | None:
        return None if value is None else _role(value)

    @pydantic.field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"metadata must be a dict, got {type(value).__name__}")
        if TURN_KEY in value:
            raise ValueError(f"metadata must not hold the key {TURN_KEY!r} (the turn's own fields live there)")
        copied: dict[str, Any] = check_json_value(value, "metadata")
        return copied

    @classmethod
    def create(
        cls,
        speaker: str,
        text: str,
        *,
        role: str | None = None,
        session: str | None = None,
        timestamp: float | datetime | None = None,
        **metadata: Any,
    ) -> Self:
        """A new turn with a random id; ``timestamp`` defaults to now."""
        return cls(
            id=uuid.uuid4().hex, speaker=speaker, text=text,
            timestamp=time.time() if timestamp is None else timestamp,
            role=role, session=session, metadata=metadata,
        )  # fmt: skip

    def to_note(self) -> Note:
        """The note that stores this turn (kind ``"message"``; see the module docstring)."""
        fields: dict[str, Any] = {"speaker": self.speaker}
        if self.role is not None:
            fields["role"] = self.role
        if self.session is not None:
            fields["session"] = self.session
        return Note(
            id=self.id, text=self.text, timestamp=self.timestamp,
            metadata={**self.metadata, TURN_KEY: fields}, kind=MESSAGE,
        )  # fmt: skip

    @classmethod
    def from_record(cls, record: MemoryRecord) -> Turn:
        """The turn a stored note holds; :class:`ContractError` naming the record when it is not a
        turn (kind ``"message"`` with a ``"turn"`` object holding a speaker)."""
        note = record.note
        fields = note.metadata.get(TURN_KEY)
        if note.kind != MESSAGE or not isinstance(fields, dict) or "speaker" not in fields:
            raise ContractError(f"record {note.id!r} is not a turn (a note of kind 'message' with metadata 'turn')")
        metadata = {k: v for k, v in note.metadata.items() if k != TURN_KEY}
        return _turn({
            "id": note.id, "speaker": fields["speaker"], "text": note.text, "timestamp": note.timestamp,
            "role": fields.get("role"), "session": fields.get("session"), "metadata": metadata,
            "version": record.version,
        })  # fmt: skip


_turn = Turn.constructor()


class TurnHit(Contract):
    """A turn recalled: the turn (with its version), its score and the signals behind it."""

    model_config = pydantic.ConfigDict(frozen=True)

    turn: Turn
    score: float
    hit: Hit

    @property
    def id(self) -> str:
        return self.turn.id

    @property
    def speaker(self) -> str:
        return self.turn.speaker

    @property
    def session(self) -> str | None:
        return self.turn.session


def render_turn(turn: Turn) -> str:
    """The default line of a turn in a context block: ``[YYYY-MM-DD HH:MM] speaker (role): text``
    (role only when set; line breaks in the text become spaces)."""
    when = datetime.fromtimestamp(turn.timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M")
    who = turn.speaker if turn.role is None else f"{turn.speaker} ({turn.role})"
    text = " ".join(turn.text.splitlines())
    return f"[{when}] {who}: {text}"


def omitted_turns_line(count: int) -> str:
    """The first line of a block that left ``count`` older turns out."""
    return f"[... {count} earlier turns omitted ...]"


# -- window policies -------------------------------------------------------------------------------


class Policy(ABC):
    """A step of a window: turns in chronological order in, a chronological sublist out."""

    @abstractmethod
    def apply(self, turns: list[Turn]) -> list[Turn]:
        """The turns this step keeps, in the order given."""


def _names_of(values: Any, field: str, check: Callable[[Any, str], str]) -> frozenset[str]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ContractError(f"{field} must be a list of strings, got {type(values).__name__}")
    out = []
    for i, value in enumerate(values):
        try:
            out.append(check(value, f"{field}[{i}]"))
        except ValueError as exc:
            raise ContractError(str(exc)) from None
    if not out:
        raise ContractError(f"{field} must name at least one value (leave it out to keep every turn)")
    return frozenset(out)


@dataclass(frozen=True, init=False)
class RoleFilter(Policy):
    """Keep the turns whose role is one of ``roles`` (each one of :data:`ROLES`)."""

    roles: frozenset[str]

    def __init__(self, roles: Iterable[str]) -> None:
        object.__setattr__(self, "roles", _names_of(roles, "roles", _role))

    def apply(self, turns: list[Turn]) -> list[Turn]:
        return [t for t in turns if t.role in self.roles]


@dataclass(frozen=True, init=False)
class SpeakerFilter(Policy):
    """Keep the turns of the speakers named."""

    speakers: frozenset[str]

    def __init__(self, speakers: Iterable[str]) -> None:
        object.__setattr__(self, "speakers", _names_of(speakers, "speakers", _name))

    def apply(self, turns: list[Turn]) -> list[Turn]:
        return [t for t in turns if t.speaker in self.speakers]


@dataclass(frozen=True, init=False)
class SessionFilter(Policy):
    """Keep the turns of the sessions named."""

    sessions: frozenset[str]

    def __init__(self, sessions: Iterable[str]) -> None:
        object.__setattr__(self, "sessions", _names_of(sessions, "sessions", _name))

    def apply(self, turns: list[Turn]) -> list[Turn]:
        return [t for t in turns if t.session in self.sessions]


def _count(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ContractError(f"{field} must be an int >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True, init=False)
class LastN(Policy):
    """Keep the last ``n`` turns (``n >= 0``)."""

    n: int

    def __init__(self, n: int) -> None:
        object.__setattr__(self, "n", _count(n, "last", 0))

    def apply(self, turns: list[Turn]) -> list[Turn]:
        return turns[max(0, len(turns) - self.n) :] if self.n else []


@dataclass(frozen=True, init=False)
class TokenBudget(Policy):
    """Keep the newest turns whose lines (:func:`render_turn`, one per line) fit ``tokens``
    estimated tokens (``estimator(text) -> int``, default :func:`~coniti.recall.estimate_tokens`);
    the newest turn is always kept."""

    tokens: int
    estimator: Callable[[str], int] | None

    def __init__(self, tokens: int, estimator: Callable[[str], int] | None = None) -> None:
        object.__setattr__(self, "tokens", _count(tokens, "token_budget", 1))
        if estimator is not None and not callable(estimator):
            raise ContractError(f"estimator must be a function text -> int, got {type(estimator).__name__}")
        object.__setattr__(self, "estimator", estimator)

    def apply(self, turns: list[Turn]) -> list[Turn]:
        return _fit(turns, self.tokens, _counter(self.estimator), render_turn)[0]


@dataclass(frozen=True, init=False)
class Chain(Policy):
    """The policies in order, each applied to what the one before kept."""

    policies: tuple[Policy, ...]

    def __init__(self, *policies: Policy) -> None:
        for i, policy in enumerate(policies):
            if not isinstance(policy, Policy):
                raise ContractError(f"policies[{i}] must be a window policy, got {type(policy).__name__}")
        object.__setattr__(self, "policies", tuple(policies))

    def apply(self, turns: list[Turn]) -> list[Turn]:
        for policy in self.policies:
            turns = policy.apply(turns)
        return turns


def _counter(estimator: Callable[[str], int] | None) -> Callable[[str], int]:
    if estimator is None:
        return estimate_tokens

    def count(text: str) -> int:
        n = estimator(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ContractError(f"estimator must return a non-negative int, got {n!r}")
        return n

    return count


def _fit(
    turns: list[Turn], budget: int, count: Callable[[str], int], draw: Callable[[Turn], str]
) -> tuple[list[Turn], list[str], int]:
    """``(kept turns, their lines, omitted)``: newest first, a turn is kept while the block with it
    (and the omitted line for the older ones) fits ``budget``; the newest always."""
    lines: list[str] = []
    kept: list[Turn] = []
    for i in range(len(turns) - 1, -1, -1):
        line = draw(turns[i])
        if not isinstance(line, str):
            raise ContractError(f"render must return a string, got {type(line).__name__} for turn {turns[i].id!r}")
        older = i
        candidate = "\n".join([*([omitted_turns_line(older)] if older else []), line, *reversed(lines)])
        if lines and count(candidate) > budget:
            break
        lines.append(line)
        kept.append(turns[i])
    kept.reverse()
    lines.reverse()
    return kept, lines, len(turns) - len(kept)


# -- state ---------------------------------------------------------------------------------------


class Checkpoint(Contract):
    """Where a fold of one conversation stopped: the conversation's namespace, the store's
    identity, ``next_seq`` (the first version not folded yet), ``state`` (the JSON state reached)
    and ``turns`` (how many turns were folded). A value: ``to_dict``/``from_dict`` keep it
    anywhere (a :class:`~coniti.state.StateStore`, a file)."""

    model_config = pydantic.ConfigDict(frozen=True)

    conversation: Namespace
    store: str
    next_seq: int = pydantic.Field(ge=1, strict=True)
    state: Any = None
    turns: int = pydantic.Field(default=0, ge=0, strict=True)

    @pydantic.field_validator("state", mode="before")
    @classmethod
    def _state(cls, value: Any) -> Any:
        return check_json_value(value, "state")


@dataclass(frozen=True)
class Full:
    """Fold every turn."""


@dataclass(frozen=True, init=False)
class Last:
    """Fold the last ``n`` turns written (``n >= 0``)."""

    n: int

    def __init__(self, n: int) -> None:
        object.__setattr__(self, "n", _count(n, "bound.n", 0))


@dataclass(frozen=True, init=False)
class FromSeq:
    """Fold the turns of version ``>= seq`` (``seq >= 1``, at most the conversation's head + 1)."""

    seq: int

    def __init__(self, seq: int) -> None:
        object.__setattr__(self, "seq", _count(seq, "bound.seq", 1))


@dataclass(frozen=True)
class FromCheckpoint:
    """Resume from ``checkpoint``: its state, then the turns written after it."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class At:
    """The state as of ``checkpoint``: the turns written before it, folded from ``init``."""

    checkpoint: Checkpoint


Bound = Full | Last | FromSeq | FromCheckpoint | At
"""A replay bound of :meth:`Conversation.state`."""


@dataclass(frozen=True)
class ConversationState:
    """A fold's result: ``value``, ``next_seq`` (the first version not folded), ``turns`` (how many
    turns the state has seen, counting those of a checkpoint resumed from), and what it names."""

    value: Any
    next_seq: int
    turns: int
    conversation: tuple[str, ...]
    store: str

    def checkpoint(self) -> Checkpoint:
        """A :class:`Checkpoint` of this state; :class:`ContractError` naming ``state`` unless the
        value is JSON."""
        return Checkpoint(
            conversation=self.conversation, store=self.store, next_seq=self.next_seq, state=self.value,
            turns=self.turns,
        )  # fmt: skip


def store_identity(memory: MemoryBackend) -> str:
    """The identity a checkpoint names: a :class:`~coniti.impl.log.LogBackend`'s store id, or, for a
    backend without one, an identity of this backend object (valid while it lives)."""
    store_id = getattr(memory, "store_id", None)
    if isinstance(store_id, str):
        return store_id
    return f"{type(memory).__name__}:{id(memory):x}"


def conversation_namespace(name: str, namespace: Sequence[str] = ()) -> tuple[str, ...]:
    """Where the conversation ``name`` under ``namespace`` keeps its turns:
    ``(*namespace, "conversations", name)``."""
    try:
        _name(name, "conversation")
    except ValueError as exc:
        raise ContractError(str(exc)) from None
    return as_namespace((*as_namespace(namespace), "conversations", name))


# -- the handle ----------------------------------------------------------------------------------


class Conversation:
    """One conversation of an engine's memory (see the module docstring)."""

    def __init__(
        self,
        source: ContinuityEngine | ScopedEngine | MemoryBackend,
        name: str,
        *,
        namespace: Sequence[str] = (),
    ) -> None:
        """``source``: the engine (every method), a scoped handle (every method, confined to its
        scope: ``namespace`` is relative to the scope's home, an absolute one must lie under the
        scope, else :class:`~coniti.scope.ScopeError`; appends go through the handle's write path
        and recall through its ``ask``), or a memory backend alone (the reads: turns, window,
        context and state; append and recall then raise :class:`~coniti.errors.NotSupported`)."""
        self.namespace: tuple[str, ...] = conversation_namespace(name, namespace)
        """The namespace holding the turns (absolute: under the scope's home for a scoped handle)."""
        self._scoped: ScopedEngine | None = None
        if isinstance(getattr(source, "scope", None), Scope):  # a ScopedEngine (not imported: a cycle)
            handle = cast("ScopedEngine", source)
            self._scoped = handle
            self.namespace = handle.namespace(self.namespace, field="conversation namespace")
            source = handle._engine
        if isinstance(source, MemoryBackend):
            self._engine: ContinuityEngine | None = None
            self.memory: MemoryBackend = source
        else:
            memory = getattr(source, "memory", None)
            if not isinstance(memory, MemoryBackend):
                raise ContractError(
                    f"source must be an engine, a scoped handle or a memory backend, got {type(source).__name__}"
                )
            self._engine, self.memory = cast("ContinuityEngine", source), memory
        self.name = name

    @property
    def engine(self) -> ContinuityEngine:
        """The engine (:class:`~coniti.errors.NotSupported` for a conversation over memory alone,
        and for one opened through a scoped handle: its writes and recall go through the handle)."""
        if self._scoped is not None:
            raise NotSupported(
                f"conversation {self.name!r} was opened through a scoped handle: use the handle, not the engine"
            )
        return self._writer()

    def _writer(self) -> ContinuityEngine:
        """The engine under the conversation (also under a scoped handle), for append and recall."""
        if self._engine is None:
            raise NotSupported(f"conversation {self.name!r} was opened over memory alone: append and recall need an engine")
        return self._engine

    @property
    def scope(self) -> Scope | None:
        """The scope of the handle this conversation was opened through (None for an engine or a
        memory backend)."""
        return None if self._scoped is None else self._scoped.scope

    def __repr__(self) -> str:
        return f"Conversation({self.name!r}, namespace={self.namespace!r})"

    # -- writing -----------------------------------------------------------------------------------

    def append(
        self, turns: Turn | Iterable[Turn], *, actor: str | None = None, reason: str | None = None
    ) -> list[int]:
        """Write ``turns`` (ids kept as given) as one atomic put of notes of kind ``"message"``,
        stamped with ``actor`` and ``reason`` (backends with an audit trail); returns each turn's
        version, in order. Raises :class:`ContractError` for a value that is not a Turn (naming
        ``turns[i]``), :class:`~coniti.errors.DuplicateRecord` for an id stored already or
        repeated; nothing is written then. The strategy's admission is not consulted: every turn
        is kept (a conversation is what was said). Through a scoped handle the put is the handle's
        :meth:`~coniti.scoped.ScopedEngine.restore` (its checks: a turn's metadata must not hold
        ``"scope"``, a read-only handle refuses)."""
        listed = [turns] if isinstance(turns, Turn) else _listed(turns)
        notes = [t.to_note() for t in listed]
        if not notes:
            return []
        from coniti.engine.results import Snapshot

        engine = self._writer()
        if self._scoped is not None:
            for i, turn in enumerate(listed):
                check_metadata(turn.metadata, f"turns[{i}].metadata")
        vectors = engine.embedder.embed([n.text for n in notes])
        spec = engine.spec_id
        records = [
            MemoryRecord.trusted(note, vectors[i].copy(), spec, self.namespace) for i, note in enumerate(notes)
        ]
        snapshot = Snapshot(namespace=self.namespace, embedding_id=spec, records=records)
        with audited(self.memory, actor, reason):
            if self._scoped is not None:
                self._scoped.restore(snapshot, namespace=self.namespace)
            else:
                engine.restore(snapshot)
        got = self.memory.get(GetRequest(ids=[n.id for n in notes], namespace=self.namespace)).records
        versions = {r.id: r.version for r in got}
        return [int(versions[n.id] or 0) for n in notes]

    extend = append


    # -- reading -----------------------------------------------------------------------------------

    def _source(self, until: int | None) -> tuple[MemoryBackend, int | None]:
        """The memory to read and a version limit (for a backend without time travel)."""
        if until is None:
            return self.memory, None
        _count(until, "until", 0)
        head = getattr(self.memory, "head", None)
        if not isinstance(head, int):  # no store head: the conversation's newest version
            head = max((r.version or 0 for r in self._records()), default=0)
        if until > head:
            raise ContractError(f"until={until} is past the head ({head})")
        travel = time_travel(self.memory)
        if travel is not None:
            return travel.at(until), None
        return self.memory, until

    def _records(self, memory: MemoryBackend | None = None) -> list[MemoryRecord]:
        source = self.memory if memory is None else memory
        return source.scan(ScanRequest(namespace=self.namespace, filter={"$kind": MESSAGE})).records

    def turns(self) -> list[Turn]:
        """Every turn, in chronological order (timestamp, then write order), each with its version."""
        return [Turn.from_record(r) for r in self._records()]

    def __len__(self) -> int:
        return len(self._records())

    def window(
        self,
        policy: Policy | None = None,
        *,
        last: int | None = None,
        token_budget: int | None = None,
        roles: Iterable[str] | None = None,
        speakers: Iterable[str] | None = None,
        sessions: Iterable[str] | None = None,
        until: str | int | None = None,
        estimator: Callable[[str], int] | None = None,
    ) -> list[Turn]:
        """The turns of the window, in chronological order (module docstring): the filters, then
        ``until`` (a turn id: the turns before it; an int: the memory as of that seq), then ``last``,
        then ``token_budget`` (with ``estimator``), then ``policy``. With nothing given, every turn.
        Raises :class:`ContractError` naming the argument at fault (an unknown role, an empty
        speaker, ``until`` naming no turn of this conversation or past the head)."""
        chain = _chain(policy, last, token_budget, roles, speakers, sessions, estimator)
        return chain.apply(self._until(until))

    def _until(self, until: str | int | None) -> list[Turn]:
        """The turns before ``until`` (all of them for None), in chronological order."""
        if isinstance(until, str):
            turns = self.turns()
            for i, turn in enumerate(turns):
                if turn.id == until:
                    return turns[:i]
            raise ContractError(f"until={until!r} names no turn of conversation {self.name!r}")
        if until is not None and (isinstance(until, bool) or not isinstance(until, int)):
            raise ContractError(f"until must be a turn id or a seq, got {type(until).__name__}")
        memory, limit = self._source(until)
        turns = [Turn.from_record(r) for r in self._records(memory)]
        if limit is not None:
            turns = [t for t in turns if (t.version or 0) <= limit]
        return turns

    def context(
        self,
        policy: Policy | None = None,
        *,
        token_budget: int = 2000,
        last: int | None = None,
        roles: Iterable[str] | None = None,
        speakers: Iterable[str] | None = None,
        sessions: Iterable[str] | None = None,
        until: str | int | None = None,
        estimator: Callable[[str], int] | None = None,
        render: Callable[[Turn], str] | None = None,
    ) -> ContextBlock:
        """The window (:meth:`window` without its budget) rendered as a prompt block of about
        ``token_budget`` tokens: one line per turn (``render``, default :func:`render_turn`) in
        chronological order, the newest kept first (:func:`~coniti.recall.to_context_block`'s
        rules, the omitted line ``[... N earlier turns omitted ...]`` at the top). The block's
        hits are the rendered turns' notes (score 0.0, with their versions); its ``seq`` is the
        point read (``until`` when it is a seq, else the store's head when the backend has one;
        None for ``until`` a turn id)."""
        _count(token_budget, "token_budget", 1)
        turns = self.window(
            policy, last=last, roles=roles, speakers=speakers, sessions=sessions, until=until
        )
        count = _counter(estimator)
        kept, lines, omitted = _fit(turns, token_budget, count, render_turn if render is None else render)
        text = "\n".join([*([omitted_turns_line(omitted)] if omitted else []), *lines])
        hits = [
            Hit(note=t.to_note(), score=0.0, namespace=self.namespace, version=t.version) for t in kept
        ]
        head = getattr(self.memory, "head", None)
        point = until if isinstance(until, int) else head if until is None else None
        return ContextBlock(
            text=text, hits=hits, omitted=omitted, tokens=count(text), seq=point if isinstance(point, int) else None
        )

    def recall(
        self,
        query: str,
        k: int = 10,
        *,
        roles: Iterable[str] | None = None,
        speakers: Iterable[str] | None = None,
        sessions: Iterable[str] | None = None,
        strategy: Literal["auto", "semantic", "keyword", "hybrid", "recent"] = "auto",
    ) -> list[TurnHit]:
        """The turns best matching ``query``, best first: the engine's :meth:`ask
        <coniti.engine.ContinuityEngine.ask>` on this conversation's namespace (so the same ranking
        as asking those notes directly), restricted to the roles, speakers and sessions given."""
        where: dict[str, Any] = {"$kind": MESSAGE}
        for field, values, check in (
            ("role", roles, _role), ("speaker", speakers, _name), ("session", sessions, _name)
        ):
            if values is not None:
                where[f"{TURN_KEY}.{field}"] = {"$in": sorted(_names_of(values, f"{field}s", check))}
        asked = Query(text=query, k=k, filter=where, strategy=strategy)
        if self._scoped is not None:
            answer = self._scoped.ask(asked, namespace=self.namespace)
        else:
            answer = self._writer().ask(asked, namespace=self.namespace)
        out = []
        for hit in answer.hits:
            record = MemoryRecord.trusted(hit.note, None, None, self.namespace, hit.version)
            out.append(TurnHit(turn=Turn.from_record(record), score=hit.score, hit=hit))
        return out

    # -- state -------------------------------------------------------------------------------------

    def written(self) -> list[Turn]:
        """The turns in write order, as :meth:`state` folds them, each with ``version`` the seq of
        its write. On a backend with an event feed (LogBackend): every turn the conversation's
        ``put`` events wrote, once per write, so a turn rewritten later appears at each version and
        a turn deleted or expired since stays (an erased write, its content gone, is left out).
        Elsewhere (the in-memory backend, a view of the past): the live turns by version."""
        feed = event_feed(self.memory)
        if feed is None:
            return sorted(self.turns(), key=lambda t: t.version or 0)
        out: list[Turn] = []
        for event in feed.events(0, namespace=self.namespace):
            record = event.record
            if event.kind != "put" or record is None or record.note.kind != MESSAGE:
                continue
            out.append(Turn.from_record(record).model_copy(update={"version": event.seq}))
        return out

    def state(self, init: Any, fold: Callable[[Any, Turn], Any], bound: Bound | None = None) -> ConversationState:
        """``fold(state, turn)`` over :meth:`written` (the conversation's writes, in order) under
        ``bound`` (default :class:`Full`; module docstring). Raises :class:`ContractError` naming ``bound`` for a bound
        past the head or a checkpoint of another conversation or store, and
        :class:`~coniti.errors.FoldError` naming the turn when ``fold`` raises. Writes nothing."""
        if not callable(fold):
            raise ContractError(f"fold must be a function (state, turn) -> state, got {type(fold).__name__}")
        bound = Full() if bound is None else bound
        written = self.written()
        head = (written[-1].version or 0) if written else 0
        store = store_identity(self.memory)
        value, turns, start, stop = init, 0, 1, head + 1
        if isinstance(bound, Full):
            pass
        elif isinstance(bound, Last):
            if bound.n < len(written):
                start = (written[len(written) - bound.n].version or 0) if bound.n else head + 1
        elif isinstance(bound, FromSeq):
            if bound.seq > head + 1:
                raise ContractError(f"bound.seq {bound.seq} is past the head of conversation {self.name!r} ({head})")
            start = bound.seq
        elif isinstance(bound, FromCheckpoint | At):
            cp = bound.checkpoint
            if not isinstance(cp, Checkpoint):
                raise ContractError(f"bound.checkpoint must be a Checkpoint, got {type(cp).__name__}")
            if cp.conversation != self.namespace:
                raise ContractError(
                    f"bound.checkpoint is of conversation {'/'.join(cp.conversation)!r}, "
                    f"not {'/'.join(self.namespace)!r}"
                )
            if cp.store != store:
                raise ContractError(f"bound.checkpoint is of store {cp.store!r}, not this store ({store!r})")
            if cp.next_seq > head + 1:
                raise ContractError(
                    f"bound.checkpoint.next_seq {cp.next_seq} is past the head of conversation {self.name!r} ({head})"
                )
            if isinstance(bound, FromCheckpoint):
                value, turns, start = copy.deepcopy(cp.state), cp.turns, cp.next_seq
            else:
                stop = cp.next_seq
        else:
            raise ContractError(f"bound must be Full, Last, FromSeq, FromCheckpoint or At, got {type(bound).__name__}")
        for turn in written:
            version = turn.version or 0
            if start <= version < stop:
                try:
                    value = fold(value, turn)
                except Exception as exc:
                    raise FoldError(
                        f"fold raised {type(exc).__name__} on turn {turn.id!r} (version {version}): {exc}"
                    ) from exc
                turns += 1
        return ConversationState(value, stop, turns, self.namespace, store)


def _listed(turns: Any) -> list[Turn]:
    if isinstance(turns, str | bytes | dict) or not isinstance(turns, Iterable):
        raise ContractError(f"turns must be a Turn or a list of turns, got {type(turns).__name__}")
    out = list(turns)
    for i, turn in enumerate(out):
        if not isinstance(turn, Turn):
            raise ContractError(f"turns[{i}] must be a Turn, got {type(turn).__name__}")
    return out


def _chain(
    policy: Policy | None,
    last: int | None,
    token_budget: int | None,
    roles: Iterable[str] | None,
    speakers: Iterable[str] | None,
    sessions: Iterable[str] | None,
    estimator: Callable[[str], int] | None,
) -> Chain:
    steps: list[Policy] = []
    if roles is not None:
        steps.append(RoleFilter(roles))
    if speakers is not None:
        steps.append(SpeakerFilter(speakers))
    if sessions is not None:
        steps.append(SessionFilter(sessions))
    if last is not None:
        steps.append(LastN(last))
    if token_budget is not None:
        steps.append(TokenBudget(token_budget, estimator))
    elif estimator is not None:
        raise ContractError("estimator is given without token_budget")
    if policy is not None:
        if not isinstance(policy, Policy):
            raise ContractError(f"policy must be a window policy, got {type(policy).__name__}")
        steps.append(policy)
    return Chain(*steps)


