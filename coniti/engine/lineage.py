"""Lineage: what a note came from, what came from it, and :func:`explain` / :func:`blame`.

A note's :attr:`~coniti.actor.Note.derived_from` lists source references, each one of:

* ``note:ID`` (the note ``ID`` of the same namespace) or ``note:ID@VERSION`` (that version, a seq);
* ``seq:N`` (the record written by event ``N``);
* ``supersedes:ID@VERSION`` (written by :func:`coniti.engine.validity.supersede`: the fact this
  note replaced);
* anything else: an external reference (a URL, a file, a message id), kept as given.

:class:`LineageIndex` is the projection of those references both ways for one namespace, folded from
the store's events (every version ever written, not only live notes), incrementally by seq, and
cached per store and namespace; over a backend without an event feed it is built from the live
notes. An erased note's own references leave the index (its content is gone); a reference *to* an
erased note stays, and :func:`explain` shows the source's id and its erasure receipt, not its text.
Reads never write.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic

from coniti.contracts import Contract
from coniti.errors import ContractError, RecordNotFound, namespace_text
from coniti.memory import GetRequest, MemoryBackend, MemoryRecord

__all__ = ["Explanation", "LineageIndex", "Source", "Version", "blame", "explain", "index_of", "parse_ref"]

MAX_DEPTH = 16
"""How deep :func:`explain` follows sources of sources."""

RefKind = Literal["note", "seq", "supersedes", "external"]


def parse_ref(ref: str) -> tuple[RefKind, str | None, int | None]:
    """``(kind, id, version or seq)`` of a source reference (see the module docstring)."""
    for prefix in ("note:", "supersedes:"):
        if ref.startswith(prefix):
            body = ref[len(prefix) :]
            rid, at, version = body.rpartition("@")
            if at and rid and version.isdigit():
                return ("note" if prefix == "note:" else "supersedes"), rid, int(version)
            return ("note" if prefix == "note:" else "supersedes"), body, None
    if ref.startswith("seq:") and ref[4:].isdigit():
        return "seq", None, int(ref[4:])
    return "external", None, None


class Version(Contract):
    """One event of a note's history: a put (``text`` None once erased), delete, clear or erase."""

    model_config = pydantic.ConfigDict(frozen=True)

    seq: int
    at: float
    kind: str
    actor: str | None = None
    reason: str | None = None
    text: str | None = None
    valid_from: float | None = None
    valid_to: float | None = None
    erased: bool = False


class Source(Contract):
    """A resolved source reference: the note (``id``, ``version``) it names, its ``text`` (None when
    erased or external), ``erased`` with the erasure ``receipt`` seq, and its own ``sources``."""

    model_config = pydantic.ConfigDict(frozen=True)

    ref: str
    kind: RefKind
    id: str | None = None
    version: int | None = None
    text: str | None = None
    erased: bool = False
    missing: bool = False
    receipt: int | None = None
    sources: list[Source] = pydantic.Field(default_factory=list)


class Explanation(Contract):
    """Everything :func:`explain` says about one note."""

    model_config = pydantic.ConfigDict(frozen=True)

    id: str
    namespace: tuple[str, ...] = ()
    live: bool
    text: str | None = None
    versions: list[Version]
    sources: list[Source]
    supersedes: list[Source]
    superseded_by: list[str]
    derived: list[str]


@dataclass
class LineageIndex:
    """The references of one namespace both ways: ``forward[id]`` the references of each version
    (seq -> refs), ``backward[id]`` the ``(citing id, its seq, ref)`` that name ``id``."""

    head: int = 0
    forward: dict[str, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    backward: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    writer: dict[int, str] = field(default_factory=dict)  # seq -> id of the put, for seq: refs

    def add(self, rid: str, seq: int, refs: Iterable[str]) -> None:
        refs = tuple(refs)
        self.writer[seq] = rid
        if not refs:
            return
        self.forward.setdefault(rid, {})[seq] = refs
        for ref in refs:
            kind, target, at = parse_ref(ref)
            if kind == "seq" and at is not None:
                target = self.writer.get(at)
            if target is not None:
                self.backward.setdefault(target, []).append((rid, seq, ref))

    def drop(self, rid: str) -> None:
        """Forget the references of every version of ``rid`` (erased)."""
        for seq, refs in self.forward.pop(rid, {}).items():
            for ref in refs:
                for cited in self.backward.values():
                    cited[:] = [c for c in cited if not (c[0] == rid and c[1] == seq and c[2] == ref)]

    def citing(self, rid: str) -> list[tuple[str, int, str]]:
        return list(self.backward.get(rid, ()))


_cache: weakref.WeakKeyDictionary[Any, dict[tuple[Any, tuple[str, ...]], LineageIndex]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def index_of(memory: MemoryBackend, ns: tuple[str, ...]) -> LineageIndex:
    """The :class:`LineageIndex` of ``ns``: folded from the events after the cached one's head when
    ``memory`` has an event feed (``events``), else built from its live notes."""
    events = getattr(memory, "events", None)
    if events is None:
        built = LineageIndex()
        for r in memory.iter_all(namespace=ns):
            built.add(r.id, r.version or 0, r.note.derived_from)
        return built
    key = (getattr(memory, "as_of", None), ns)
    with _lock:
        try:
            held = _cache.setdefault(memory, {})
        except TypeError:  # not weakly referable: no cache
            held = {}
        index = held.get(key)
        if index is None:
            index = held[key] = LineageIndex()
        for event in events(index.head, namespace=ns):
            index.head = event.seq
            if event.id is None:
                continue
            if event.kind == "put":
                refs = () if event.record is None else event.record.note.derived_from
                index.add(event.id, event.seq, refs)
            elif event.kind == "erase":
                index.drop(event.id)
        return index


def _history(memory: MemoryBackend, rid: str, ns: tuple[str, ...]) -> list[Any]:
    history = getattr(memory, "history", None)
    return [] if history is None else list(history(rid, ns))


def _versions(memory: MemoryBackend, rid: str, ns: tuple[str, ...], live: MemoryRecord | None) -> list[Version]:
    out = []
    for e in _history(memory, rid, ns):
        note = None if e.record is None else e.record.note
        out.append(Version(
            seq=e.seq, at=e.at, kind=e.kind, actor=e.actor, reason=e.reason,
            text=None if note is None else note.text,
            valid_from=None if note is None else note.valid_from,
            valid_to=None if note is None else note.valid_to, erased=e.erased,
        ))  # fmt: skip
    if not out and live is not None:  # a backend without history: the live version alone
        note = live.note
        out.append(Version(seq=live.version or 0, at=note.timestamp, kind="put", text=note.text,
                           valid_from=note.valid_from, valid_to=note.valid_to))  # fmt: skip
    return out


def _source(
    memory: MemoryBackend, ns: tuple[str, ...], index: LineageIndex, ref: str, depth: int, seen: set[str]
) -> Source:
    kind, rid, at = parse_ref(ref)
    if kind == "external":
        return Source(ref=ref, kind=kind)
    if kind == "seq":
        rid = index.writer.get(at or 0)
        if rid is None:
            return Source(ref=ref, kind=kind, version=at, missing=True)
    assert rid is not None
    history = _history(memory, rid, ns)
    receipt = next((e.seq for e in history if e.kind == "erase"), None)
    puts = [e for e in history if e.kind == "put"]
    chosen = None
    if at is not None:
        chosen = next((e for e in puts if e.seq == at), None)
    elif puts:
        chosen = puts[-1]
    text, version = None, at
    refs: tuple[str, ...] = ()
    if chosen is not None:
        version = chosen.seq
        if chosen.record is not None:
            text, refs = chosen.record.note.text, chosen.record.note.derived_from
    elif not history:  # no event feed: the live note
        found = memory.get(GetRequest(ids=[rid], namespace=ns)).records
        if found:
            text, refs, version = found[0].note.text, found[0].note.derived_from, found[0].version
    missing = chosen is None and text is None and receipt is None
    nested: list[Source] = []
    token = f"{rid}@{version}"
    if depth < MAX_DEPTH and token not in seen:
        seen = seen | {token}
        nested = [_source(memory, ns, index, r, depth + 1, seen) for r in refs]
    return Source(ref=ref, kind=kind, id=rid, version=version, text=text, erased=receipt is not None,
                  missing=missing, receipt=receipt, sources=nested)  # fmt: skip


def explain(memory: MemoryBackend, rid: str, namespace: Sequence[str] = ()) -> Explanation:
    """What is known of note ``rid`` of ``namespace``: its versions (who, when, why), its sources
    (recursively, at most :data:`MAX_DEPTH` deep, each version once), what it superseded, what
    superseded it, and the notes derived from it. RecordNotFound when no event ever touched it
    (and it is not live)."""
    if not isinstance(rid, str) or not rid:
        raise ContractError(f"id must be a non-empty string, got {rid!r}")
    ns = tuple(namespace)
    found = memory.get(GetRequest(ids=[rid], namespace=ns)).records
    live = found[0] if found else None
    versions = _versions(memory, rid, ns, live)
    if not versions:
        raise RecordNotFound(f"no note {rid!r} ever in namespace {namespace_text(ns)}")
    index = index_of(memory, ns)
    refs: tuple[str, ...] = ()
    if live is not None:
        refs = live.note.derived_from
    else:
        own = index.forward.get(rid, {})
        refs = own[max(own)] if own else ()
    sources = [_source(memory, ns, index, r, 1, {f"{rid}@{versions[-1].seq}"}) for r in refs]
    superseded_by: list[str] = []
    derived: list[str] = []
    for citing, _seq, ref in index.citing(rid):
        target = superseded_by if ref.startswith("supersedes:") else derived
        if citing not in target:
            target.append(citing)
    return Explanation(
        id=rid, namespace=ns, live=live is not None, text=None if live is None else live.note.text,
        versions=versions, sources=[s for s in sources if s.kind != "supersedes"],
        supersedes=[s for s in sources if s.kind == "supersedes"], superseded_by=superseded_by, derived=derived,
    )  # fmt: skip


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def blame(explanation: Explanation) -> str:
    """The one-line form of an explanation: the last version's seq, time, actor and reason, then
    the sources, what it superseded and what superseded it."""
    e = explanation
    last = next((v for v in reversed(e.versions) if v.kind == "put"), e.versions[-1])
    parts = [f"{e.id} @{last.seq} {_iso(last.at)} by {last.actor or '-'}: {last.reason or '-'}"]
    if not e.live:
        parts.append("not live")
    if e.sources:
        parts.append("from " + ", ".join(_name(s) for s in e.sources))
    if e.supersedes:
        parts.append("supersedes " + ", ".join(_name(s) for s in e.supersedes))
    if e.superseded_by:
        parts.append("superseded by " + ", ".join(e.superseded_by))
    if e.derived:
        parts.append("derived into " + ", ".join(e.derived))
    return " · ".join(parts)


def _name(s: Source) -> str:
    if s.kind == "external":
        return s.ref
    name = s.id or s.ref
    if s.version is not None:
        name += f"@{s.version}"
    return name + (" (erased)" if s.erased else "")
