"""The ContinuityEngine: notes in, answers out, memory underneath.

The engine runs the handshake of the layers spec:

* **ingest**: embed (one batch) -> the strategy admits -> insert into every structure -> write to
  memory last. If a structure fails, the namespace's structures are reindexed from memory (which was
  not written yet) and the error is raised; if the memory write fails, the rows just inserted are taken out
  of the structures again. Either way a failed ingest changes nothing.
* **ask**: embed the query text (if any) -> the query's recall strategy ranks candidates
  (:mod:`coniti.hybrid`: the strategy over the structures, the keyword index, or both fused with
  feedback) -> hits are resolved to notes with one memory ``get`` -> optional MMR and reranker
  stages -> :class:`Answer`.
* **remove**: delete from memory, then bring the structures in line (the deleted ids are taken out;
  if that fails, the structures are reindexed from memory).

The engine keeps no copy of notes or vectors it cannot rebuild. Per namespace it holds derived data
only: the structures, the keyword index (:mod:`coniti.keyword`) and, when the strategy asks for
one, a content index (content key -> ids). The
engine cannot list a backend's namespaces, so it loads a namespace lazily the first time a call
touches it: it checks the namespace's ``embedding_id`` metadata, then fills fresh structures with one
``scan`` of the namespace (``iter_all``). The root namespace ``()`` is checked when the engine opens.

**The embedding id travels with the memory.** Every record is written with the embedder's
``spec_id``; the first write to a namespace sets its ``embedding_id`` metadata, in the same
all-or-nothing step as the records on a backend that declares ``supports_put_with_meta`` (a failed
ingest then records nothing; elsewhere the claim is set first and unset again on failure). A namespace whose
stored id (or any record's) differs from the engine's raises :class:`EmbeddingMismatch` naming both.
**A memory holds one embedding**: the first write into a namespace without an id is refused (before
anything is written) when another namespace records a different one, so that one engine answers
every namespace (``prefix`` asks included).

**Following a log.** :meth:`ContinuityEngine.refresh` catches up with writes made through other
handles or processes. On a backend that declares ``supports_event_feed`` (an
:class:`~coniti.memory.EventFeed`, as :class:`~coniti.impl.log.LogBackend` is), it reads only the
events after the last sequence number it has seen and re-reads just the records they touch;
elsewhere it rescans the loaded namespaces. :meth:`ContinuityEngine.at` returns a read-only engine
over ``memory.at(seq, time=...)``, for backends that declare ``supports_time_travel``. The engine
reads capabilities only from these declarations (and ``memory.read_only``), never by probing.

**Versioned rows and persisted indexes.** Over a backend with an event feed the structures are a
fold of the events (:meth:`ContinuityEngine._fold`): every row knows the sequence numbers between
which it was live (``born``, ``died``); a delete or replacement ends the row and keeps it, an erasure
drops every row of the id, records without a vector are skipped. So :meth:`ContinuityEngine.at`
answers from the same rows masked by sequence number (no rebuild), and the rows can be kept on disk:
over a backend that declares ``supports_derived_state`` (LogBackend), each namespace's structures
and content index are saved as a snapshot (:mod:`coniti.derived`, ``log/DERIVED.md``) tagged with
the event they reflect, at :meth:`~ContinuityEngine.close`, :meth:`~ContinuityEngine.persist` and
after a full build. Opening a namespace restores its snapshot (vectors memory mapped) and folds only
the events after it; a snapshot that fails a check (another store, another configuration, an event
hash that differs, a torn or altered file) is ignored and the namespace is rebuilt from the events.
:meth:`~ContinuityEngine.reindex` rebuilds and rewrites it; :meth:`~ContinuityEngine.verify` proves
it equals a fresh build. Rows kept for history cost memory: every version ever written stays.
Elsewhere (InMemoryBackend) structures are built by scan at open and hold live rows only.

An engine is thread-safe: every public method holds one re-entrant lock (an engine from
:meth:`~ContinuityEngine.at` shares its parent's lock and rows).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import EllipsisType
from typing import Any, Self

import numpy as np
import pydantic

from coniti import derived
from coniti.actor import Note, Query, to_stored_time
from coniti.batch import NoteBatch, RecordBatch
from coniti.contracts import Contract
from coniti.dates import read_question
from coniti.embedding import Embedder
from coniti.embedding import tokenize as word_tokens
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    NotSupported,
    ReadOnlyError,
    namespace_text,
)
from coniti.events import Event
from coniti.filters import Predicate, compile_filter
from coniti.fusion import Fusion, mmr
from coniti.hybrid import Ranked, candidates, depth, fuse_hits
from coniti.keyword import Corpus, KeywordIndex, question_text, thread_of, tokens_of
from coniti.memory import (
    DeleteRequest,
    DeleteResult,
    EventFeed,
    FeedbackRequest,
    FeedbackResult,
    GetRequest,
    GetResult,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    Namespace,
    PatchOp,
    PutRequest,
    PutResult,
    UpsertOp,
    WriteRequest,
    WriteResult,
    as_namespace,
    derived_home,
    event_feed,
    time_travel,
    to_thread,
)
from coniti.packed import LOOKUP_BUDGET, PackedStrings
from coniti.passages import PASSAGE_MARK, passage_rows, purge_rows, remove_rows, with_passages
from coniti.recall import ContextBlock, Hit, HitLike, to_context_block, trusted_signals
from coniti.rerank import Reranker, apply_reranker
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import Structure, unit_rows

__all__ = ["Answer", "ContinuityEngine", "DerivedReport", "Hit", "IngestResult", "Snapshot"]
# Hit lives in coniti.recall (what recall returns); it is re-exported here, where answers are made.

EMBEDDING_KEY = "embedding_id"
"""The metadata key holding a namespace's embedding spec id."""

_REBUILD_BATCH = 65_536

_PERSIST_AFTER_BUILD = 1_000
"""A namespace built from scratch with at least this many rows is saved at once (not only at
close), so the next open restores it."""

_SAVE_AT_CLOSE = 1_000
"""``close()`` saves a namespace whose snapshot lags by at least this many events (or by a tenth
of its rows, for small ones): a short session that writes a few notes into a large memory does not
rewrite its whole snapshot, and the next open folds those few events instead."""

_CONTENT_FIELDS = ("id_bytes", "id_ends", "key_bytes", "key_ends")
"""The arrays of a snapshot's ``content`` part (the content index as packed pairs)."""

_KEY_FORMAT = 2
"""The engine's own part of a snapshot's key: bump it when what the engine saves changes."""

MAX_QUERY_CHARS = 100_000
"""The default of :attr:`ContinuityEngine.max_query_chars`: the longest query text :meth:`~ContinuityEngine.ask`
takes (characters)."""


def pool_size(k: int) -> int:
    """The candidates gathered for the MMR and reranker stages of a query for ``k`` hits:
    ``max(4 * k, 32)``."""
    return max(4 * k, 32)


class IngestResult(Contract):
    """The outcome of ingesting one note: admitted, or refused with a ``reason``."""

    model_config = pydantic.ConfigDict(frozen=True)

    admitted: bool
    id: str
    reason: str | None = None


class Answer(Contract):
    """The hits for a query, best first: from ``namespace``, or from every namespace under
    ``prefix`` when the query spanned them (each hit names its own namespace)."""

    model_config = pydantic.ConfigDict(frozen=True)

    query: Query
    namespace: Namespace = ()
    prefix: Namespace | None = None
    hits: list[Hit]


class Snapshot(Contract):
    """Every record of one namespace, read by scan; :meth:`ContinuityEngine.restore` writes it back."""

    namespace: Namespace = ()
    embedding_id: str | None = None
    records: list[MemoryRecord]


class DerivedReport(Contract):
    """:meth:`ContinuityEngine.verify` of one namespace: ``ok`` when the structures (and the
    snapshot on disk, if any) equal a fresh build from memory; ``problems`` says what differs.
    ``snapshot``: ``"none"`` (nothing persisted here), ``"current"`` (on disk, checked and equal
    after its catch-up) or the reason it is refused."""

    model_config = pydantic.ConfigDict(frozen=True)

    namespace: Namespace = ()
    seq: int | None = None
    rows: int
    ok: bool
    snapshot: str
    problems: list[str]


_ingest_result = IngestResult.constructor()
_hit = Hit.constructor()
_answer = Answer.constructor()


@dataclass
class _Derived:
    """Derived state of one namespace."""

    structures: list[Structure]
    keyword: KeywordIndex = field(default_factory=KeywordIndex)
    keys: dict[str, str | list[str]] = field(default_factory=dict)
    """The content index by key: the id of its one holder, or the ids of its holders in order when
    there are several (:func:`_hold`). A lone holder is kept as its id, not as a one-item list, so
    that neither this dict nor ``key_of`` holds an object the cyclic garbage collector tracks: with
    a list per note, each full collection walked a million lists at 1M notes."""
    key_of: dict[str, str] = field(default_factory=dict)
    seq: int | None = None
    meta_checked: bool = False
    changed: int = 0
    """Events folded since the snapshot on disk was written (or since the build)."""
    content: tuple[PackedStrings, PackedStrings] | None = None
    """The snapshot's content index, packed (ids, and the key of each), loaded into ``keys`` on
    first use that needs it whole (a save, many admissions); a few admissions search it."""
    deferred: list[tuple[str, str | None]] = field(default_factory=list)
    """While ``content`` is still packed: the index changes folded since, in order, as ``(id,
    key)`` (key None: the id left the index), applied when it is unpacked. An ask never unpacks."""
    checks: dict[str, derived.BlockCheck] = field(default_factory=dict)
    """The snapshot's CRC-32 checks run on first touch, by ``part/field``: the structures' vector
    blocks as they are read, the content index's before it is unpacked."""


class ContinuityEngine:
    """Ingest notes, ask questions, remove notes: over one memory backend; see the module docstring.

    ``structures``: one structure or a sequence of them; each is a prototype, ``spawn()``-ed once per
    namespace. ``read_only``: refuse writes (always so over a read-only backend such as a time-travel
    view). ``keyword``: the keyword index prototype (its ``k1`` and ``b``), spawned per namespace.
    ``reranker``: a :class:`~coniti.rerank.Reranker` applied to every ask but ``recent`` ones.
    ``max_query_chars``: the longest query text an ask takes (:data:`MAX_QUERY_CHARS` by
    default; the attribute of that name may be changed); a longer one is refused before any work.
    Raises :class:`EmbeddingMismatch` if the root namespace holds another embedding's vectors.
    """

    def __init__(
        self,
        memory: MemoryBackend,
        embedder: Embedder,
        structures: Structure | Sequence[Structure],
        strategy: Strategy,
        *,
        read_only: bool = False,
        keyword: KeywordIndex | None = None,
        reranker: Reranker | None = None,
        max_query_chars: int = MAX_QUERY_CHARS,
    ) -> None:
        if not isinstance(memory, MemoryBackend):
            raise ContractError(f"memory must be a MemoryBackend, got {type(memory).__name__}")
        if not isinstance(embedder, Embedder):
            raise ContractError(f"embedder must be an Embedder, got {type(embedder).__name__}")
        protos = [structures] if isinstance(structures, Structure) else list(structures)
        if not protos or not all(isinstance(s, Structure) for s in protos):
            raise ContractError("structures must be a Structure or a non-empty sequence of them")
        if not isinstance(strategy, Strategy):
            raise ContractError(f"strategy must be a Strategy, got {type(strategy).__name__}")
        if keyword is not None and not isinstance(keyword, KeywordIndex):
            raise ContractError(f"keyword must be a KeywordIndex, got {type(keyword).__name__}")
        if reranker is not None and not isinstance(reranker, Reranker):
            raise ContractError(f"reranker must have rerank(query, hits), got {type(reranker).__name__}")
        if type(max_query_chars) is not int or max_query_chars < 1:
            raise ContractError(f"max_query_chars must be a positive int, got {max_query_chars!r}")
        self._keyword = KeywordIndex() if keyword is None else keyword
        self.reranker = reranker
        self.max_query_chars = max_query_chars
        self.memory = memory
        self.embedder = embedder
        self.strategy = strategy
        self._prototypes = protos
        self._spec_id = embedder.spec_id
        self._read_only = read_only or memory.read_only
        self._lock = threading.RLock()
        self._spaces: dict[tuple[str, ...], _Derived] = {}
        self._one_embedding = False  # True once _claim found no other embedding in the memory
        self._source: ContinuityEngine | None = None
        self._history = event_feed(memory) is not None and all(p.supports_as_of for p in protos)
        home = derived_home(memory)
        persistable = self._history and home is not None and all(p.persistent for p in protos)
        self._derived = (
            derived.DerivedDir(home.derived_path, home.store_id) if persistable and home else None
        )
        self._check_meta(())

    # -- properties ------------------------------------------------------------------------------

    @property
    def spec_id(self) -> str:
        """The embedding spec id this engine writes and accepts."""
        return self._spec_id

    @property
    def read_only(self) -> bool:
        """True when writes are refused (time-travel engines, read-only backends)."""
        return self._read_only

    @property
    def namespaces(self) -> list[tuple[str, ...]]:
        """The namespaces loaded so far (touched by a call), sorted."""
        with self._lock:
            return sorted(self._spaces)

    def structures(self, namespace: Sequence[str] = ()) -> list[Structure]:
        """The structures of ``namespace`` (loaded if needed). Read them; do not modify them."""
        with self._lock:
            return list(self._space(as_namespace(namespace)).structures)

    def keyword_index(self, namespace: Sequence[str] = ()) -> KeywordIndex:
        """The keyword index of ``namespace`` (loaded if needed). Read it; do not modify it."""
        with self._lock:
            return self._space(as_namespace(namespace)).keyword

    # -- ingest ----------------------------------------------------------------------------------

    def ingest(self, note: Note | str, *, namespace: Sequence[str] = ()) -> IngestResult:
        """Ingest one note (a plain string becomes ``Note.create(text)``); see :meth:`ingest_many`."""
        return self.ingest_many([note], namespace=namespace)[0]

    def ingest_many(
        self,
        notes: Iterable[Note | str] | NoteBatch,
        *,
        namespace: Sequence[str] = (),
        op_id: str | None = None,
    ) -> list[IngestResult]:
        """Ingest a batch atomically: one embedding call, one strategy call, one memory ``put``.

        ``notes``: notes (a plain string becomes ``Note.create(text)``), or a columnar
        :class:`~coniti.batch.NoteBatch` (validated when it was made: the same notes ingest the same
        way, without a Note object built and validated per note by the caller). Returns one
        :class:`IngestResult` per note, in order. Refused notes are not written. If any step fails,
        nothing of the batch is written and the structures equal memory again. The admitted notes
        go to memory as one :class:`~coniti.batch.RecordBatch` (:meth:`MemoryBackend.put_batch`).

        With ``op_id`` (backends with ``supports_write``) the batch is one idempotent write: a retry
        of the same batch with the same op id writes nothing and returns the first call's
        admissions (see :meth:`_replay_ingest`); another batch under that op id raises
        :class:`~coniti.errors.IdempotencyConflict`.
        """
        columns: NoteBatch | None = None
        batch: Sequence[Note]
        if isinstance(notes, NoteBatch):
            columns = batch = notes  # a sequence of its notes, built only if something reads them
        else:
            batch = [_as_note(n, i) for i, n in enumerate(notes)]
        ns = as_namespace(namespace)
        self._refuse_marked(columns.ids if columns is not None else [n.id for n in batch])
        with self._lock:
            self._refuse_writes()
            space = self._writable(ns)
            if op_id is not None:
                replayed = self._replay_ingest(ns, space, batch, op_id)
                if replayed is not None:
                    return replayed
            if not batch:
                return []
            if columns is None:
                columns = NoteBatch.from_notes(batch)
            texts = columns.texts
            # for the embedder and the keyword index; as tuples, which the garbage collector stops
            # tracking, so that a batch's 500 token lists do not outlive collections into the
            # oldest generation and bring on its full collections (4 times fewer at 300,000 notes)
            words = [tuple(word_tokens(text)) for text in texts]
            vectors = self.embedder.embed_words(texts, words)
            keys = self.strategy.content_keys(batch)  # for admission and the content index
            context = self._context(ns, space, keys, columns.ids)
            decisions = self.strategy.admit(batch, vectors, context)
            if len(decisions) != len(batch):
                raise ContractError(
                    f"strategy {self.strategy.name!r} returned {len(decisions)} decisions "
                    f"for {len(batch)} notes"
                )
            chosen = [i for i, d in enumerate(decisions) if d.admitted]
            if op_id is None:
                every = len(chosen) == len(batch)
                rows = RecordBatch.trusted(
                    columns if every else columns.take(chosen),
                    vectors if every else vectors[chosen],
                    self._spec_id,
                    ns,
                )
                if not every:
                    keys, words = [keys[i] for i in chosen], [words[i] for i in chosen]
                tokens = [tokens_of(t, w) for t, w in zip(rows.notes.texts, words, strict=True)]
                self._write_batch(ns, space, rows, keys, tokens)
            else:
                records = [
                    MemoryRecord.trusted(batch[i], vectors[i].copy(), self._spec_id, ns)
                    for i in chosen
                ]
                self._apply(ns, space, _ingest_request(records, ns, op_id))
            return _ingest_results(columns.ids, decisions)

    def _refuse_marked(self, ids: Iterable[str]) -> None:
        """Refuse a note id holding the passage mark when the embedder has passages
        (:mod:`coniti.passages`): it could name another note's passage row."""
        if self.embedder.passage_chars is None:
            return
        for id_ in ids:
            if PASSAGE_MARK in id_:
                raise ContractError(
                    f"note id {id_!r} holds the character U+001F, which names passage rows here "
                    f"(the {self.embedder.spec.name} embedder splits long notes into passages)"
                )

    def _write(self, ns: tuple[str, ...], space: _Derived, records: list[MemoryRecord]) -> None:
        """:meth:`_store` of ``records`` (those without a vector stay out of the structures)."""
        if not records:
            return
        indexed, vectors = _with_vectors(records)
        request = PutRequest(records=records)

        def put(claim: MetaSetRequest | None) -> PutResult:
            if claim is None:
                return self.memory.put(request)
            return self.memory.put_with_meta(request, claim)

        notes = [r.note for r in indexed]
        self._store(
            ns, space, [n.id for n in notes], np.stack(vectors) if indexed else None,
            np.array([n.timestamp for n in notes], dtype=np.float64),
            [n.text for n in notes], self.strategy.content_keys(notes), put,
            positions=[i for i, r in enumerate(records) if r.vector is not None],
            expires=[r.expires_at for r in indexed], threads=[thread_of(n.metadata) for n in notes],
        )  # fmt: skip

    def _write_batch(
        self,
        ns: tuple[str, ...],
        space: _Derived,
        batch: RecordBatch,
        keys: Sequence[str | None],
        tokens: Sequence[Sequence[str]],
    ) -> None:
        """:meth:`_store` of the columns of ``batch`` (``keys``: their content keys; ``tokens``:
        their keyword tokens), memory written by :meth:`MemoryBackend.put_batch`."""
        if not len(batch):
            return
        self._store(
            ns, space, list(batch.ids), batch.vectors, batch.notes.timestamps, batch.notes.texts,
            keys, lambda claim: self.memory.put_batch(batch, claim),
            positions=list(range(len(batch))) if batch.vectors is not None else [], tokens=tokens,
            threads=[thread_of(m) for m in batch.notes.metadata],
        )  # fmt: skip

    def _store(
        self,
        ns: tuple[str, ...],
        space: _Derived,
        ids: list[str],
        matrix: np.ndarray | None,
        times: np.ndarray,
        texts: Sequence[str],
        keys: Sequence[str | None],
        put: Callable[[MetaSetRequest | None], PutResult],
        *,
        positions: list[int],
        expires: list[float | None] | None = None,
        tokens: Sequence[Sequence[str]] | None = None,
        threads: Sequence[str | None] | None = None,
    ) -> None:
        """Structures first (the rows ``ids``/``matrix``/``times``; None: no row), memory last by
        ``put(claim)`` (``claim``: the metadata to set in the same step, or None); undo the
        structures if memory refuses. ``texts``, ``keys`` and ``tokens`` (None: made from the
        texts): each row's text, content key and keyword tokens; ``positions``: each row's place
        among the records written (its event follows the claim's in that order);
        ``expires``: each row's expiry, and ``threads`` each row's thread, for the keyword index.
        The rows are added before memory assigns their seqs, so with history they are added at the
        seqs the put takes when its events follow ``before`` directly; :meth:`_settle` checks them
        against the seqs the put returns."""
        before = self._caught_up(ns, space)
        claim = self._claim(ns, space)
        born = None
        if self._history and before is not None:
            born = before + (claim is not None) + 1 + np.asarray(positions, dtype=np.int64)
        try:
            if matrix is not None:
                extra = passage_rows(self.embedder, ids, texts, times, born)
                rows = with_passages(ids, matrix, times, born, extra)
                for structure in space.structures:
                    structure.add(rows[0], rows[1], rows[2], born=rows[3])
        except BaseException:
            self._recover(ns)
            raise
        try:
            if claim is None or self.memory.supports_put_with_meta:
                written, apart = put(claim), 0
            else:  # the claim is an event of its own, just before the put's
                written, apart = self._put_claiming(lambda: put(None), claim), 1
        except BaseException:
            self._undo_add(ns, space, ids)
            raise
        space.meta_checked = True
        self._index(space, ids, keys)
        if matrix is not None:
            space.keyword.add(
                ids, texts, times, born if born is not None else (self._head() or 0),
                expires=expires, tokens=tokens, threads=threads,
            )  # fmt: skip
        self._settle(ns, space, before, written, born, positions, apart, ids)

    def _undo_add(self, ns: tuple[str, ...], space: _Derived, ids: list[str]) -> None:
        try:
            for structure in space.structures:
                remove_rows(structure, ids)
        except BaseException:
            self._recover(ns)

    def _claim(self, ns: tuple[str, ...], space: _Derived) -> MetaSetRequest | None:
        """The metadata write that claims ``ns`` for this embedding, if its first write is due;
        raises :class:`EmbeddingMismatch` if another embedding holds it."""
        if space.meta_checked:
            return None
        stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
        if stored is None:
            self._refuse_second_embedding(ns)
            return MetaSetRequest(key=EMBEDDING_KEY, value=self._spec_id, namespace=ns)
        self._refuse_mismatch(stored, ns)
        space.meta_checked = True
        return None

    def _refuse_second_embedding(self, target: tuple[str, ...]) -> None:
        """Before the first write into ``target``, a namespace with no embedding id yet: raise
        :class:`EmbeddingMismatch` when the memory already records another one (the root
        namespace's, else the first live namespace's in sorted order, as
        :func:`~coniti.container.stored_embedding` reads it): a memory holds one embedding, so that
        every namespace stays answerable by one engine. Looked up once per engine."""
        if self._one_embedding:
            return
        for ns in [(), *self.memory.namespaces()]:
            stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
            if stored is None:
                continue
            if stored != self._spec_id:
                raise EmbeddingMismatch(
                    f"this memory is embedded with {stored!r} (namespace {namespace_text(ns)}); "
                    f"this engine uses {self._spec_id!r} ({self.embedder.name}). A memory holds one "
                    f"embedding, so namespace {namespace_text(target)} is not written with another; "
                    "nothing was written. Write with the embedding that wrote it, or to another memory."
                )
            break
        self._one_embedding = True

    def _put_claiming(self, put: Callable[[], PutResult], claim: MetaSetRequest) -> PutResult:
        """For a backend without ``put_with_meta``: claim, put (its result returned), and unset the
        claim if the put fails (two more metadata writes on record there)."""
        self.memory.set_meta(claim)
        try:
            return put()
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the original error is being raised
                self.memory.set_meta(
                    MetaSetRequest(key=EMBEDDING_KEY, value=None, namespace=claim.namespace)
                )
            raise

    # -- ask ---------------------------------------------------------------------------------------

    def ask(
        self,
        query: Query | str,
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
    ) -> Answer:
        """Answer ``query`` (a plain string becomes ``Query(text=...)``) from ``namespace``, or with
        ``prefix`` from every live namespace under it (``prefix=()``: all of them) in one ranking.

        ``query.strategy`` chooses the ranking (:class:`~coniti.actor.Query`, :mod:`coniti.hybrid`);
        each hit carries its :class:`~coniti.recall.Signals`. ``query.filter`` keeps only notes
        whose metadata it matches and ``query.min_score`` drops hits scoring below it; the answer
        still holds the ``k`` best that pass, in the strategy's order. Across namespaces hits are
        merged by score, then the newer note, then the smaller id, then the namespace (one total
        order). With ``query.mmr`` or a reranker, :func:`pool_size` candidates are gathered this
        way, re-ranked by MMR (:func:`coniti.fusion.mmr` on the hits' scores and the notes' vectors),
        then given to the reranker (:mod:`coniti.rerank`; not for ``recent``), and the first ``k``
        are the answer. Raises :class:`~coniti.errors.AnchorNotFound` when
        ``query.near`` is not stored, and :class:`ContractError` for ``near`` with a ``prefix`` (an
        anchor belongs to one namespace) or for both ``namespace`` and ``prefix``, and (before any
        work) for a query text longer than :attr:`max_query_chars`. A hit whose record vanished
        from memory since the structures last saw it (a write by another process not yet picked up
        by :meth:`refresh`) is left out.
        """
        query = _as_query(query)
        self._check_text(query)
        ns, scope = self._scope(namespace, prefix)
        self._check_query(query, scope)
        with self._lock:
            vector = self._vectors([query])[0]
            return self._ask_healing(query, ns, scope, vector)

    def ask_many(
        self,
        queries: Iterable[Query | str],
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
    ) -> list[Answer]:
        """:meth:`ask` for each of ``queries`` (plain strings become ``Query(text=...)``), in
        order, from the same ``namespace`` or ``prefix``: the question texts that need a vector
        are embedded in one embedder call (a batch costs about a third per text of single calls),
        then each is answered as :meth:`ask` answers it. Every query is checked before any is
        answered; the first bad one raises :class:`ContractError` naming ``queries[i]``."""
        if isinstance(queries, str | bytes):
            raise ContractError("queries must be a sequence of queries, not one string")
        items = list(queries)
        asked: list[Query] = []
        for i, item in enumerate(items):
            try:
                asked.append(_as_query(item))
                self._check_text(asked[-1])
            except ContractError as exc:
                raise ContractError(f"queries[{i}]: {exc}") from None
        ns, scope = self._scope(namespace, prefix)
        for i, query in enumerate(asked):
            try:
                self._check_query(query, scope)
            except ContractError as exc:
                raise ContractError(f"queries[{i}]: {exc}") from None
        with self._lock:
            vectors = self._vectors(asked)
            return [self._ask_healing(q, ns, scope, v) for q, v in zip(asked, vectors, strict=True)]

    def _check_text(self, query: Query) -> None:
        """Refuse a query text longer than :attr:`max_query_chars`, before any work."""
        if query.text is not None and len(query.text) > self.max_query_chars:
            raise ContractError(
                f"query text is {len(query.text):,} characters, more than max_query_chars "
                f"({self.max_query_chars:,}); nothing was asked"
            )

    def _check_query(self, query: Query, scope: tuple[str, ...] | None) -> None:
        """Refuse ``near`` with a prefix and a ``vector`` of another dimension than the embedder's."""
        if scope is not None and query.near is not None:
            raise ContractError("a query with near answers from one namespace; give namespace, not prefix")
        if query.vector is not None and len(query.vector) != self.embedder.dim:
            raise ContractError(
                f"Query.vector has {len(query.vector)} numbers; this memory's embedder "
                f"({self._spec_id}) makes vectors of {self.embedder.dim}"
            )

    def _vectors(self, queries: Sequence[Query]) -> list[np.ndarray | None]:
        """The question vector of each query: its ``vector``, or its text embedded (all such texts
        in one call) when its strategy reads vectors; None when it needs none."""
        out: list[np.ndarray | None] = [None] * len(queries)
        texts: dict[str, list[int]] = {}
        for i, query in enumerate(queries):
            if query.resolved_strategy not in ("semantic", "hybrid"):
                continue
            if query.vector is not None:
                out[i] = np.asarray(query.vector, dtype=np.float32)
            elif query.text is not None:
                texts.setdefault(query.text, []).append(i)
        if texts:
            embedded = self.embedder.embed(list(texts))
            for row, places in zip(embedded, texts.values(), strict=True):
                for i in places:
                    out[i] = row
        return out

    def _ask_healing(
        self, query: Query, ns: tuple[str, ...], scope: tuple[str, ...] | None, vector: np.ndarray | None
    ) -> Answer:
        """:meth:`_ask`, once more after healing a snapshot block that failed its check."""
        try:
            return self._ask(query, ns, scope, vector)
        except derived.StaleSnapshot:  # a block of a snapshot failed its check on first touch
            if not self._heal():
                raise
            return self._ask(query, ns, scope, vector)

    def _ask(
        self, query: Query, ns: tuple[str, ...], scope: tuple[str, ...] | None,
        vector: np.ndarray | None,
    ) -> Answer:
        """The body of :meth:`ask`, under the lock, the question embedded. Hybrid with
        ``Fusion(method="auto")`` fuses by score when a namespace asked holds conversation turns
        (:attr:`coniti.keyword.KeywordIndex.threaded`), else by rank; fusing by score, its keyword
        side reads the question without its function words (:func:`coniti.keyword.question_text`).
        The keyword strategy searches the text as written."""
        pool = self._pool(query)
        spaces = [ns] if scope is None else self.memory.namespaces(scope)
        asked = query
        if query.resolved_strategy == "hybrid":
            fusion = query.fusion or Fusion()
            if fusion.method == "auto":  # by score over conversation turns, by rank over plain notes
                turns = any(self._space(n).keyword.threaded for n in spaces)
                fusion = fusion.model_copy(update={"method": "score" if turns else "rank"})
            update: dict[str, Any] = {"fusion": fusion}
            if query.text is not None and fusion.method == "score":
                update["text"] = question_text(query.text)
            asked = query.model_copy(update=update)
        corpus = self._corpus(spaces, asked.text)
        if query.resolved_strategy == "hybrid":
            found = self._hybrid(spaces, asked, vector, pool, corpus, query.text)
        else:
            found = [h for n in spaces for h in self._answer(n, asked, vector, pool, corpus)]
            if scope is not None:
                found.sort(key=lambda item: _merge_key(item[0]))
                del found[pool:]
                found = _reranked(found, query.resolved_strategy)
            del found[pool:]
        hits = self._second_stage(query, found)
        return _answer({"query": query, "namespace": ns, "prefix": scope, "hits": hits})

    def _corpus(self, spaces: list[tuple[str, ...]], text: str | None) -> Corpus | None:
        """The keyword statistics of several namespaces together (None for one, or no text)."""
        if text is None or len(spaces) < 2:
            return None
        return Corpus.merge(self._space(n).keyword.corpus(text) for n in spaces)

    def _hybrid(
        self,
        spaces: list[tuple[str, ...]],
        query: Query,
        vector: np.ndarray | None,
        want: int,
        corpus: Corpus | None,
        question: str | None,
    ) -> list[tuple[Hit, np.ndarray]]:
        """:func:`coniti.hybrid.fuse_hits` of :func:`~coniti.hybrid.depth` semantic and keyword
        hits over ``spaces``, then the query's filter: the fused ranking with the non-matching
        notes removed (the sides are asked 4x deeper, then 4x again, until ``want`` pass or the
        sides run out). ``min_score`` applies to the fused score. ``question``: the question as
        asked, whose dates (:func:`coniti.dates.read_question`) give the ``date`` signal."""
        match: Predicate | None = None if query.filter is None else compile_filter(query.filter)
        times = None
        if question is not None:
            times = read_question(question, now=time.time() if query.asked_at is None else query.asked_at)
        floor = (query.fusion or Fusion()).keyword_floor
        ceiling = 0.0
        if query.text is not None and spaces:
            ceiling = self._space(spaces[0]).keyword.ceiling(query.text, corpus=corpus)
        wide = depth(want)
        while True:
            side = {"k": wide, "min_score": None, "filter": None}
            deeper = False
            semantic: list[tuple[Hit, np.ndarray]] = []
            lexical: list[tuple[Hit, np.ndarray]] = []
            if vector is not None or query.near is not None:
                asked = query.model_copy(update={**side, "strategy": "semantic"})
                for n in spaces:
                    part = self._answer(n, asked, vector, wide, corpus)
                    deeper = deeper or len(part) == wide
                    semantic.extend(part)
            if query.text is not None:
                asked = query.model_copy(update={**side, "strategy": "keyword", "near": None})
                for n in spaces:
                    part = self._answer(n, asked, vector, wide, corpus)
                    deeper = deeper or len(part) == wide
                    lexical.extend(part)
                if floor and lexical:
                    bar = floor * ceiling
                    lexical = [item for item in lexical if item[0].score >= bar]
            if len(spaces) > 1:
                semantic.sort(key=lambda item: _merge_key(item[0]))
                lexical.sort(key=lambda item: _merge_key(item[0]))
            fused = fuse_hits(
                query, semantic[:wide], lexical[:wide], self.feedback, question=times, ceiling=ceiling
            )
            kept = fused if match is None else [item for item in fused if match(item[0].note.metadata)]
            if len(kept) >= want or not deeper or match is None:
                return kept[:want]
            wide *= 4

    def _pool(self, query: Query) -> int:
        staged = query.mmr is not None or (self.reranker is not None and query.resolved_strategy != "recent")
        return pool_size(query.k) if staged else query.k

    def _second_stage(self, query: Query, found: list[tuple[Hit, np.ndarray]]) -> list[Hit]:
        """MMR, then the reranker, then the first ``k`` (see :meth:`ask`)."""
        hits = [h for h, _ in found]
        if query.mmr is not None and hits:
            rows = unit_rows(np.stack([v for _, v in found]))
            order = mmr([h.score for h in hits], rows, query.mmr, len(hits))
            hits = [hits[i] for i in order]
        if self.reranker is not None and query.resolved_strategy != "recent" and hits:
            hits = apply_reranker(self.reranker, query, hits)
        return hits[: query.k]

    def context(
        self,
        query: Query | str,
        *,
        token_budget: int,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        estimator: Callable[[str], int] | None = None,
        render: Callable[[HitLike], str] | None = None,
    ) -> ContextBlock:
        """The answer to ``query`` rendered for a prompt: :func:`coniti.recall.to_context_block` of
        :meth:`ask`'s hits within about ``token_budget`` tokens (an estimate: the first hit always
        renders). ``seq`` is the memory point read (the ``as_of`` of a time-travel view, else
        ``head`` of a backend with an event feed, else None): ``engine.at(seq).context(...)`` gives the same block again."""
        to_context_block([], token_budget, estimator=estimator, render=render)  # check arguments first
        with self._lock:
            seq = self.memory.as_of if self.memory.as_of is not None else self._head()
            hits = self.ask(query, namespace=namespace, prefix=prefix).hits
        return to_context_block(hits, token_budget, estimator=estimator, render=render, seq=seq)

    def _scope(
        self, namespace: Sequence[str], prefix: Sequence[str] | None
    ) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        ns = as_namespace(namespace)
        if prefix is None:
            return ns, None
        if ns:
            raise ContractError("give namespace or prefix, not both")
        try:
            return ns, as_namespace(prefix)
        except ContractError as exc:
            raise ContractError(f"prefix: {exc}") from None

    def _answer(
        self,
        ns: tuple[str, ...],
        query: Query,
        vector: np.ndarray | None,
        want: int,
        corpus: Corpus | None = None,
    ) -> list[tuple[Hit, np.ndarray]]:
        """The ``want`` best hits of ``ns`` (with their notes' vectors) that pass the query's
        filter and minimum score.

        Without either, one ranking call. With them, the ranking is asked for more candidates
        (4x, then 4x again) until ``want`` pass or the candidates run out, so the answer equals a
        filtered exact search, at the cost of re-asking for selective filters.
        """
        space = self._space(ns)
        context = self._context(ns, space)
        match: Predicate | None = None if query.filter is None else compile_filter(query.filter)
        narrowed = match is not None or query.min_score is not None
        fetch = max(4 * want, 32) if narrowed else want
        records: dict[str, MemoryRecord] = {}
        while True:
            asked = query if fetch == query.k else query.model_copy(update={"k": fetch})
            raw = candidates(
                asked, vector, strategy=self.strategy, context=context, keyword=space.keyword, corpus=corpus
            )
            missing = [h.id for h in raw if h.id not in records]
            if missing:
                for record in self.memory.get(GetRequest(ids=missing, namespace=ns)).records:
                    records[record.note.id] = record
            kept = [h for h in raw if h.id in records and _passes(h, records[h.id].note, match, query.min_score)]
            hits = self._hits(space, query, vector, kept, records, ns, corpus)
            if len(hits) >= want:
                return hits[:want]
            # len() of a view as of an event counts its rows (O(rows)): asked only when short
            exhausted = len(raw) < fetch or fetch >= len(space.structures[0])
            below = query.min_score is not None and bool(raw) and raw[-1].score < query.min_score
            if exhausted or below:
                return hits[:want]
            fetch *= 4

    def _hits(
        self,
        space: _Derived,
        query: Query,
        vector: np.ndarray | None,
        kept: list[Ranked],
        records: dict[str, MemoryRecord],
        ns: tuple[str, ...],
        corpus: Corpus | None,
    ) -> list[tuple[Hit, np.ndarray]]:
        """Hits of ``kept`` with their signals completed: the semantic and keyword scores of every
        hit when the query has text (computed for the ones their ranking did not score)."""
        lexical: dict[str, float] = {}
        if query.text is not None and any("keyword" not in r.signals for r in kept):
            lexical = space.keyword.score(
                query.text, [r.id for r in kept if "keyword" not in r.signals], corpus=corpus
            )
        cosine: dict[str, float] = {}
        # A record replaced by one without a vector since the index was read is no longer a hit.
        vectors = {r.id: v for r in kept if (v := records[r.id].vector) is not None}
        unscored = [r.id for r in kept if "semantic" not in r.signals and r.id in vectors]
        if vector is not None and query.text is not None and unscored:
            unit = unit_rows(np.asarray(vector)[None, :])[0].astype(np.float64)
            rows = unit_rows(np.stack([vectors[i] for i in unscored])).astype(np.float64)
            cosine = dict(zip(unscored, (rows @ unit).tolist(), strict=True))
        out = []
        for r in kept:
            if r.id not in vectors:
                continue
            record = records[r.id]
            signals = dict(r.signals)
            if query.text is not None:
                signals.setdefault("keyword", lexical.get(r.id, 0.0))
                if r.id in cosine:
                    signals["semantic"] = cosine[r.id]
            hit = _hit({
                "note": record.note, "score": float(r.score), "namespace": ns, "version": record.version,
                "signals": trusted_signals(signals),
            })
            out.append((hit, vectors[r.id]))
        return out

    # -- feedback ----------------------------------------------------------------------------------

    def improve(
        self, id: str, weight: float, *, namespace: Sequence[str] = (), reason: str | None = None
    ) -> FeedbackResult:
        """Record feedback ``weight`` on the live note ``id`` (positive promotes it in hybrid
        recall, negative demotes it; weights add up): one audited ``feedback`` event on a log
        (stamped with ``reason``), read back by hybrid ranking as of any point
        (:func:`coniti.fusion.fuse` says how much it moves). Raises
        :class:`~coniti.errors.RecordNotFound` when ``id`` is not live, :class:`ContractError`
        for a weight that is not a finite number, and :class:`NotSupported` on a backend without
        :attr:`~coniti.memory.MemoryBackend.supports_feedback`."""
        request = FeedbackRequest(id=id, weight=weight, namespace=as_namespace(namespace), reason=reason)
        with self._lock:
            self._refuse_writes()
            if not self.memory.supports_feedback:
                raise NotSupported(f"the {self.memory.kind!r} memory backend records no feedback")
            space = self._space(request.namespace)
            before = self._head()
            result = self.memory.feedback(request)
            self._advance(space, before, [] if result.seq is None else [result.seq])
            return result

    def feedback(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        """The feedback weights of ``namespace`` (id -> summed weight; as of the view's point for
        an engine from :meth:`at`); empty on a backend without feedback."""
        ns = as_namespace(namespace)
        with self._lock:
            return self.memory.feedback_weights(ns) if self.memory.supports_feedback else {}

    # -- remove ------------------------------------------------------------------------------------

    def remove(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> DeleteResult:
        """Delete ``ids`` from memory, then from the structures; unknown ids come back in ``missing``."""
        id_list = list(ids)
        for i, id_ in enumerate(id_list):
            if not isinstance(id_, str):
                raise ContractError(f"ids[{i}] must be a string, got {type(id_).__name__}")
        ns = as_namespace(namespace)
        with self._lock:
            self._refuse_writes()
            space = self._writable(ns)
            before = self._caught_up(ns, space)
            result = self.memory.delete(DeleteRequest(ids=id_list, namespace=ns))
            if self._history and before is not None:
                self._ended(ns, space, before, result)
            else:
                self._forget(ns, space, result.deleted)
                self._advance(space, before, result.seqs)
            return result

    def _ended(self, ns: tuple[str, ...], space: _Derived, before: int, result: DeleteResult) -> None:
        """After a delete (one event per deleted id, in order, at the seqs it returned): end the
        rows at those seqs when its events follow ``before`` directly, else fold the namespace's
        events."""
        deleted, seqs = result.deleted, result.seqs
        if not deleted:
            return
        if _own(before, seqs) is None or len(seqs) != len(deleted):
            self._fold_namespace(ns, space)
            return
        try:
            for seq, id_ in zip(seqs, deleted, strict=True):
                for structure in space.structures:
                    remove_rows(structure, [id_], seq=seq)
                space.keyword.remove([id_], died=seq)
        except BaseException:
            self._recover(ns)
            raise
        self._unindex(space, deleted)
        space.seq = seqs[-1]
        space.changed += len(deleted)

    def _forget(self, ns: tuple[str, ...], space: _Derived, ids: list[str]) -> None:
        try:
            for structure in space.structures:
                remove_rows(structure, ids)
        except BaseException:
            self._recover(ns)
            raise
        self._unindex(space, ids)
        space.keyword.remove(ids, died=self._head() or space.keyword.seq)

    # -- facts that change ----------------------------------------------------------------------
    #
    # Memory is written first (one atomic ``write``), then the structures are brought in line with
    # it from memory (reindexed from memory if that fails): a refused write changes nothing, and
    # the structures always end equal to memory.

    def get(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> GetResult:
        """Read notes by id, as records with their ``version``; unknown or expired ids in ``missing``."""
        ns = as_namespace(namespace)
        with self._lock:
            return self.memory.get(GetRequest(ids=list(ids), namespace=ns))

    def upsert(
        self,
        note: Note | str,
        *,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
        expires_at: float | datetime | None = None,
    ) -> WriteResult:
        """Create ``note`` or replace the live note of its id whole (one new version).

        The text is embedded unless the live note has the same text and this engine's embedding
        (its vector is kept). ``expected_version``: the live version the write requires (``None``:
        the id must not exist; ``...``, the default: no expectation); a mismatch raises
        :class:`~coniti.errors.VersionConflict`. ``op_id`` makes the call idempotent; ``expires_at``
        hides the note from reads from then on. The strategy's admission is not consulted: an upsert
        is an explicit correction. Needs a backend with ``supports_write``.
        """
        note = _as_note(note, 0)
        self._refuse_marked([note.id])
        ns = as_namespace(namespace)
        when = None if expires_at is None else _expiry(expires_at)
        with self._lock:
            self._refuse_writes()
            self._require_write()
            space = self._writable(ns)
            live = self._live(ns, note.id)
            if live is not None and live.note.text == note.text and live.embedding_id == self._spec_id:
                vector = live.vector
            else:
                vector = self.embedder.embed([note.text])[0].copy()
            record = MemoryRecord.trusted(note, vector, self._spec_id, ns, None, when)
            request = WriteRequest(
                ops=[UpsertOp(record=record)], namespace=ns, expect=_expect(note.id, expected_version),
                op_id=op_id,
            )
            return self._apply(ns, space, request)

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        timestamp: float | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        metadata_patch: dict[str, Any] | None = None,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
    ) -> WriteResult:
        """Change only what is given of the live note ``id`` (a :class:`~coniti.memory.PatchOp`):
        ``metadata`` replaces the metadata, ``metadata_patch`` merges into it (RFC 7386). The text is
        re-embedded only when it differs from the stored text. ``op_id`` makes the call
        idempotent: with ``text``, the patch then always carries the text's vector (the stored one
        when the text is unchanged), so a retry sends the same request as the first call and
        replays it. Raises :class:`~coniti.errors.RecordNotFound` when ``id`` is not live, and
        :class:`~coniti.errors.VersionConflict` when ``expected_version`` is not the live version.
        Needs a backend with ``supports_write``.
        """
        ns = as_namespace(namespace)
        with self._lock:
            self._refuse_writes()
            self._require_write()
            space = self._writable(ns)
            vector = None
            if text is not None:
                live = self._live(ns, id)
                if live is not None and live.note.text == text:
                    vector = None if op_id is None else live.vector
                elif live is not None or op_id is not None:
                    vector = self.embedder.embed([text])[0].copy()
            op = PatchOp(
                id=id, text=text, timestamp=timestamp, metadata=metadata, metadata_patch=metadata_patch,
                vector=vector,
            )
            request = WriteRequest(ops=[op], namespace=ns, expect=_expect(id, expected_version), op_id=op_id)
            return self._apply(ns, space, request)

    def _require_write(self) -> None:
        if not self.memory.supports_write:
            raise NotSupported(
                f"the {self.memory.kind!r} memory backend has no write (upsert, update, op ids)"
            )

    def _live(self, ns: tuple[str, ...], id: str) -> MemoryRecord | None:
        found = self.memory.get(GetRequest(ids=[id], namespace=ns)).records
        return found[0] if found else None

    def _apply(self, ns: tuple[str, ...], space: _Derived, request: WriteRequest) -> WriteResult:
        """Write ``request`` to memory (claiming the namespace's embedding id if due), then bring
        the structures in line for the ids it names."""
        before = self._caught_up(ns, space)
        claim = self._claim(ns, space)
        if claim is not None:
            self.memory.set_meta(claim)
        try:
            result = self.memory.write(request)
        except BaseException:
            if claim is not None:
                with contextlib.suppress(Exception):  # best effort: the original error is raised
                    self.memory.set_meta(MetaSetRequest(key=EMBEDDING_KEY, value=None, namespace=ns))
            raise
        space.meta_checked = True
        if self._history:
            self._fold_namespace(ns, space)
            return result
        ids = [op.record.id if isinstance(op, UpsertOp) else op.id for op in request.ops]
        self._reconcile(ns, space, ids)
        if not result.replayed:
            self._advance(space, before, result.seqs, int(claim is not None))
        return result

    def _replay_ingest(
        self, ns: tuple[str, ...], space: _Derived, batch: Sequence[Note], op_id: str
    ) -> list[IngestResult] | None:
        """The results of an earlier :meth:`ingest_many` under ``op_id``, or None if there was none.

        The earlier call's write is rebuilt from the notes it wrote (its recorded result names them;
        their vectors are embedded again, which a deterministic embedder reproduces) and sent again
        with the op id: memory then compares it with the recorded request, so a different batch
        raises :class:`~coniti.errors.IdempotencyConflict`. Notes the first call refused are
        reported refused, with that as the reason.
        """
        self._require_write()
        recorded = self.memory.op_result(op_id, ns)
        if recorded is None:
            return None
        written = [n for n in batch if n.id in recorded.versions]
        vectors = self.embedder.embed([n.text for n in written]) if written else None
        records = [
            MemoryRecord.trusted(n, vectors[i].copy(), self._spec_id, ns)
            for i, n in enumerate(written)
            if vectors is not None
        ]
        self._apply(ns, space, _ingest_request(records, ns, op_id))
        refused = f"not admitted when op id {op_id!r} first ran"
        results = []
        for n in batch:
            admitted = n.id in recorded.versions
            results.append(
                _ingest_result({"admitted": admitted, "id": n.id, "reason": None if admitted else refused})
            )
        return results

    # -- snapshot / restore --------------------------------------------------------------------

    def snapshot(self, namespace: Sequence[str] = ()) -> Snapshot:
        """Every record of ``namespace`` (by scan) with the namespace's embedding id."""
        ns = as_namespace(namespace)
        with self._lock:
            self._space(ns)
            records = list(self.memory.iter_all(namespace=ns))
            stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
            return Snapshot.constructor()(
                {"namespace": ns, "embedding_id": stored, "records": records}
            )

    def restore(self, snapshot: Snapshot, *, namespace: Sequence[str] | None = None) -> int:
        """Write a snapshot's records through ``put`` (into ``namespace`` if given); returns the count.

        All or nothing. Raises :class:`EmbeddingMismatch` if the snapshot or a record carries another
        embedding id, :class:`DuplicateRecord` if an id is already stored (or repeats), and
        :class:`ContractError` for a vector of the wrong length.
        """
        if not isinstance(snapshot, Snapshot):
            raise ContractError(f"expected a Snapshot, got {type(snapshot).__name__}")
        ns = snapshot.namespace if namespace is None else as_namespace(namespace)
        if snapshot.embedding_id is not None:
            self._refuse_mismatch(snapshot.embedding_id, ns, what="the snapshot")
        records: list[MemoryRecord] = []
        seen: set[str] = set()
        for record in snapshot.records:
            if record.embedding_id is not None and record.embedding_id != self._spec_id:
                raise EmbeddingMismatch(
                    f"record {record.id!r} of the snapshot was embedded with "
                    f"{record.embedding_id!r}; this engine uses {self._spec_id!r}"
                )
            vector = record.vector
            if vector is not None and vector.shape != (self.embedder.dim,):
                raise ContractError(
                    f"record {record.id!r} has a vector of length {vector.shape[0]}, "
                    f"the embedder gives {self.embedder.dim}"
                )
            if record.id in seen:
                raise DuplicateRecord(f"record id {record.id!r} appears twice in the snapshot")
            seen.add(record.id)
            records.append(
                MemoryRecord.trusted(
                    record.note, vector, None if vector is None else self._spec_id, ns, None, None,
                    record.blob,
                )
            )
        with self._lock:
            self._refuse_writes()
            space = self._writable(ns)
            for record in records:
                if record.id in space.structures[0]:
                    raise DuplicateRecord(
                        f"record id {record.id!r} already exists in namespace {namespace_text(ns)}; nothing restored"
                    )
            self._write(ns, space, records)
            return len(records)

    # -- following the log ---------------------------------------------------------------------

    def refresh(self) -> int:
        """Catch up with writes made through other handles; returns the number of events read.

        With an event feed, reads only events after the last sequence number seen, per loaded
        namespace, and re-reads the records they touch (a ``clear`` rescans its namespace).
        Without one, rescans every loaded namespace and returns 0. Raises
        :class:`EmbeddingMismatch` if another writer set a different embedding id.
        """
        with self._lock:
            if self._source is not None:
                return 0  # a view as of an event never changes
            feed = event_feed(self.memory)
            if feed is None:
                for ns in list(self._spaces):
                    self._reindex(ns)
                return 0
            if self._history:
                try:
                    return self._fold_all(feed)
                except derived.StaleSnapshot:  # a fold touched a failed block: rebuilt (_recover)
                    return 0
            return self._catch_up(feed)

    def _head(self) -> int | None:
        """The backend's last sequence number, if it declares an event feed."""
        feed = event_feed(self.memory)
        return None if feed is None else feed.head

    def _advance(
        self, space: _Derived, before: int | None, seqs: Sequence[int], apart: int = 0
    ) -> None:
        """Skip our own events on the next refresh when nobody else wrote before them.

        Holds when the namespace had seen everything up to ``before`` and the call's events (the
        ``seqs`` its result returned, after ``apart`` events of its own written just before them)
        follow ``before`` directly. Otherwise refresh re-reads them, which is harmless.
        """
        last = _own(before, seqs, apart)
        if last is not None and space.seq == before:
            space.seq = space.keyword.seq = last

    def _catch_up(self, feed: EventFeed) -> int:
        if not self._spaces:
            return 0
        head = self._head() or 0
        after = min(space.seq or 0 for space in self._spaces.values())
        if after >= head:
            return 0
        touched: dict[tuple[str, ...], set[str]] = {}
        cleared: set[tuple[str, ...]] = set()
        count = 0
        for event in feed.events(after=after):
            count += 1
            ns = tuple(event.namespace)
            space = self._spaces.get(ns)
            if space is None or event.seq <= (space.seq or 0):
                continue
            if event.kind == "feedback":  # changes no record; hybrid reads the weights at ask
                pass
            elif event.kind == "clear":
                cleared.add(ns)
            elif event.kind == "meta":
                if event.key == EMBEDDING_KEY and event.value is not None:
                    self._refuse_mismatch(event.value, ns)
            elif event.id is not None:
                touched.setdefault(ns, set()).add(event.id)
            head = max(head, int(event.seq))
        for ns in cleared:
            self._reindex(ns)
        for ns, ids in touched.items():
            if ns not in cleared:
                self._reconcile(ns, self._spaces[ns], sorted(ids))
        for space in self._spaces.values():
            space.seq = max(space.seq or 0, head)
        return count

    def _reconcile(self, ns: tuple[str, ...], space: _Derived, ids: list[str]) -> None:
        """Make the structures agree with memory for ``ids``."""
        try:
            found = self.memory.get(GetRequest(ids=ids, namespace=ns)).records
            for structure in space.structures:
                remove_rows(structure, ids)
            self._unindex(space, ids)
            space.keyword.remove(ids, died=self._head() or space.keyword.seq)
            records = [r for r in found if r.embedding_id in (None, self._spec_id)]
            if len(records) != len(found):
                bad = next(r for r in found if r.embedding_id not in (None, self._spec_id))
                self._refuse_mismatch(bad.embedding_id or "", ns, what=f"record {bad.id!r}")
            records, vectors = _with_vectors(records)
            if records:
                matrix = np.stack(vectors)
                times = np.array([r.note.timestamp for r in records], dtype=np.float64)
                ids_ = [r.id for r in records]
                extra = passage_rows(self.embedder, ids_, [r.note.text for r in records], times, None)
                rows = with_passages(ids_, matrix, times, None, extra)
                for structure in space.structures:
                    structure.add(rows[0], rows[1], rows[2], born=rows[3])
                self._index_notes(space, [r.note for r in records])
                self._keyword_add(space, records, None)
        except BaseException:
            self._recover(ns)
            raise

    # -- time travel -----------------------------------------------------------------------------

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> ContinuityEngine:
        """A read-only engine answering from memory as it was after event ``seq`` (or at ``time``).

        Needs a backend that declares ``supports_time_travel`` (e.g. LogBackend); others raise
        :class:`NotSupported`. Over an event feed the new engine reads this engine's versioned rows
        masked by ``seq`` (no rebuild; it shares this engine's lock, and this engine catches up first
        when it has not yet seen ``seq``); otherwise it has fresh structures filled from the view.
        """
        past = time_travel(self.memory)
        if past is None:
            raise NotSupported(
                f"at() needs a memory backend with time travel (e.g. LogBackend); "
                f"{self.memory.kind!r} has none"
            )
        view = past.at(seq, time=time)
        if not self._history or view.as_of is None:
            return ContinuityEngine(
                view, self.embedder, [s.spawn() for s in self._prototypes], self.strategy,
                read_only=True, keyword=self._keyword.spawn(), reranker=self.reranker,
                max_query_chars=self.max_query_chars,
            )
        engine = ContinuityEngine(
            view, self.embedder, self._prototypes, self.strategy, read_only=True,
            keyword=self._keyword, reranker=self.reranker, max_query_chars=self.max_query_chars,
        )
        engine._source = self
        engine._lock = self._lock
        engine._history = False
        engine._derived = None
        return engine

    # -- loading and reindexing ---------------------------------------------------------------

    def reindex(self, namespace: Sequence[str] = ()) -> None:
        """Refill the structures and content index of ``namespace`` from memory now (memory itself is
        not touched; compare :meth:`LogBackend.rebuild <coniti.impl.log.LogBackend.rebuild>`, which
        refolds a store's projections). Over an event feed this is the rebuild of the derived
        state: a fold of every event, whose snapshot replaces the one on disk."""
        ns = as_namespace(namespace)
        with self._lock:
            if self._history and self._source is None:
                self._spaces.pop(ns, None)
                self._check_meta(ns)
                space = self._event_build(ns)
                self._spaces[ns] = space
                with contextlib.suppress(OSError):
                    self._save(ns, space)
            elif ns in self._spaces:
                self._reindex(ns)
            else:
                self._space(ns)

    def _space(self, ns: tuple[str, ...]) -> _Derived:
        space = self._spaces.get(ns)
        if space is None:
            self._check_meta(ns)
            space = self._load(ns)
            self._spaces[ns] = space
        return space

    def _reindex(self, ns: tuple[str, ...]) -> None:
        self._spaces.pop(ns, None)
        if self._history and self._source is None:
            self._spaces[ns] = self._event_build(ns)
        else:
            self._spaces[ns] = self._load(ns)

    def _recover(self, ns: tuple[str, ...]) -> None:
        """After a failure: reindex ``ns`` from memory, or, if that fails too, unload it (the next
        call that touches it loads it again). Never raises, so the original error propagates."""
        try:
            self._reindex(ns)
        except Exception:
            self._spaces.pop(ns, None)

    def _load(self, ns: tuple[str, ...]) -> _Derived:
        """The derived state of ``ns``: a past engine's view of its parent's rows; else the
        snapshot caught up from the events, or a fold of every event of ``ns`` (saved when large);
        without an event feed, one scan of memory."""
        if self._source is not None:
            return self._load_past(ns)
        if not self._history:
            return self._scan_build(ns)
        space = self._restore(ns)
        if space is None:
            space = self._event_build(ns)
            self._save_large(ns, space)
        return space

    def _save_large(self, ns: tuple[str, ...], space: _Derived) -> None:
        """After a build from scratch: save it when it holds :data:`_PERSIST_AFTER_BUILD` rows."""
        if len(space.structures[0]) >= _PERSIST_AFTER_BUILD:
            with contextlib.suppress(OSError):  # derived state is optional
                self._save(ns, space)

    def _scan_build(self, ns: tuple[str, ...]) -> _Derived:
        """Fresh structures and content index for ``ns``, filled by one scan of memory."""
        space = _Derived(structures=[p.spawn() for p in self._prototypes], keyword=self._keyword.spawn())
        space.seq = self._head()
        for chunk in _chunks(self.memory.iter_all(namespace=ns, page_size=1000), _REBUILD_BATCH):
            for record in chunk:
                if record.embedding_id is not None and record.embedding_id != self._spec_id:
                    self._refuse_mismatch(record.embedding_id, ns, what=f"record {record.id!r}")
            chunk, vectors = _with_vectors(chunk)
            if not chunk:
                continue
            ids = [r.note.id for r in chunk]
            matrix = np.stack(vectors)
            self._check_dim(ns, matrix)
            times = np.array([r.note.timestamp for r in chunk], dtype=np.float64)
            born = np.array([r.version or 0 for r in chunk], dtype=np.int64)
            extra = passage_rows(self.embedder, ids, [r.note.text for r in chunk], times, born)
            rows = with_passages(ids, matrix, times, born, extra)
            for structure in space.structures:
                structure.add(rows[0], rows[1], rows[2], born=rows[3])
            self._index_notes(space, [r.note for r in chunk])
            self._keyword_add(space, chunk, None)
        space.keyword.seq = space.seq or 0
        return space

    def _check_dim(self, ns: tuple[str, ...], matrix: np.ndarray) -> None:
        if matrix.shape[1] != self.embedder.dim:
            raise EmbeddingMismatch(
                f"namespace {namespace_text(ns)} holds vectors of length {matrix.shape[1]}; "
                f"{self._spec_id!r} gives {self.embedder.dim}"
            )

    def _event_build(self, ns: tuple[str, ...], until: int | None = None) -> _Derived:
        """Fresh structures and content index for ``ns``: a fold of every event of ``ns`` (up to
        event ``until``; None: the head)."""
        space = _Derived(
            structures=[p.spawn() for p in self._prototypes], keyword=self._keyword.spawn(), seq=0
        )
        self._fold_namespace(ns, space, until)
        space.changed = max(space.changed, 1)  # nothing on disk reflects it yet
        return space

    def _load_past(self, ns: tuple[str, ...]) -> _Derived:
        """A past engine's state of ``ns``: its parent's rows masked by the view's seq."""
        source = self._source
        seq = self.memory.as_of
        assert source is not None and seq is not None
        parent = source._space(ns)
        if (parent.seq or 0) < seq:
            source._fold_namespace(ns, parent)
        feed = event_feed(source.memory)
        clock = 0.0
        if feed is not None and seq > 0:
            clock = next(iter(feed.events(after=seq - 1, until=seq))).at
        return _Derived(
            structures=[s.at(seq) for s in parent.structures],
            keyword=parent.keyword.at(seq, clock=clock), seq=seq, meta_checked=True,
        )

    # -- the fold of events (backends with an event feed) -----------------------------------------

    def _writable(self, ns: tuple[str, ...]) -> _Derived:
        """The state of ``ns`` for a write: loaded, and caught up with what others wrote to it, so
        admission sees it and the write's events follow the rows' seq directly."""
        space = self._checked(ns)
        self._caught_up(ns, space)
        return space

    def _caught_up(self, ns: tuple[str, ...], space: _Derived) -> int | None:
        """Before a write: fold what others wrote to ``ns`` since the rows last saw it, so the
        write's own events follow directly; returns the head (None without an event feed)."""
        head = self._head()
        if self._history and head is not None and (space.seq or 0) < head:
            self._fold_namespace(ns, space)
        return head

    def _settle(
        self,
        ns: tuple[str, ...],
        space: _Derived,
        before: int | None,
        result: PutResult,
        born: np.ndarray | None,
        positions: list[int],
        apart: int,
        ids: list[str],
    ) -> None:
        """After a put of ``ids`` (``result``: what it wrote, ``apart`` events of its own just
        before it) whose rows were added at ``born`` (their places among the put's records:
        ``positions``): keep the rows when they are the versions the put returned and its events
        follow ``before`` directly, else drop them and fold the events."""
        if not self._history or before is None:
            self._advance(space, before, result.seqs, apart)
            return
        last = _own(before, result.seqs, apart)
        versions = np.asarray(result.versions, dtype=np.int64)
        if (
            last is not None
            and born is not None
            and len(versions) > (positions[-1] if positions else -1)
            and np.array_equal(born, versions[positions])
        ):
            space.seq = last
            space.changed += last - before
            return
        try:  # drop only the rows just added (purge would drop the ids' earlier versions too)
            for structure in space.structures:
                remove_rows(structure, ids)
            space.keyword.retract(ids)
            self._unindex(space, ids)
            self._fold_namespace(ns, space)
        except BaseException:
            self._recover(ns)
            raise

    def _fold_namespace(self, ns: tuple[str, ...], space: _Derived, until: int | None = None) -> int:
        """Fold the events of ``ns`` after ``space.seq`` up to event ``until`` (None: the head);
        returns how many."""
        feed = event_feed(self.memory)
        assert feed is not None
        head = feed.head if until is None else until
        folder = _Folder(self, ns, space)
        count = 0
        try:
            for event in feed.events(after=space.seq or 0, until=head, namespace=ns):
                folder.event(event)
                count += 1
            folder.flush()
        except BaseException:
            self._recover(ns)
            raise
        space.seq = space.keyword.seq = max(space.seq or 0, head)
        space.changed += count
        return count

    def _fold_all(self, feed: EventFeed) -> int:
        """Fold, in one pass, the events after the oldest loaded namespace's seq into every
        loaded namespace; returns the number of events read."""
        if not self._spaces:
            return 0
        head = feed.head
        after = min(space.seq or 0 for space in self._spaces.values())
        if after >= head:
            return 0
        folders = {ns: _Folder(self, ns, space) for ns, space in self._spaces.items()}
        count = 0
        try:
            for event in feed.events(after=after, until=head):
                count += 1
                folder = folders.get(tuple(event.namespace))
                if folder is not None and event.seq > (folder.space.seq or 0):
                    folder.event(event)
                    folder.space.changed += 1
            for folder in folders.values():
                folder.flush()
        except BaseException:
            for ns in folders:
                self._recover(ns)
            raise
        for space in self._spaces.values():
            space.seq = space.keyword.seq = max(space.seq or 0, head)
        return count

    # -- derived state on disk ----------------------------------------------------------------

    def _snapshot_key(self) -> dict[str, Any]:
        return {
            "engine": _KEY_FORMAT,
            "embedding": self._spec_id,
            "structures": [[p.name, p.options] for p in self._prototypes],
            "strategy": [self.strategy.name, self.strategy.options],
            "keyword": self._keyword.options,
        }

    def _restore(self, ns: tuple[str, ...]) -> _Derived | None:
        """The snapshot of ``ns`` restored and caught up, or None when there is none usable. The
        structures' vector blocks are checked on first touch (:mod:`coniti.derived`)."""
        try:
            loaded = self._loaded_snapshot(ns, deferred=True)
        except derived.StaleSnapshot:
            return None
        try:
            return self._restored(ns, loaded)
        except derived.StaleSnapshot:  # the catch-up touched a block that failed: rebuilt by _recover
            space = self._spaces.pop(ns, None)
            if space is not None:
                self._save_large(ns, space)
            return space

    def _restored(
        self, ns: tuple[str, ...], loaded: derived.Loaded, until: int | None = None
    ) -> _Derived | None:
        """``loaded`` restored and caught up (to event ``until``; None: the head); None when its
        arrays do not fit."""
        space = _Derived(
            structures=[p.spawn() for p in self._prototypes], seq=loaded.seq,
            checks=dict(loaded.checks),
        )
        try:
            for i, structure in enumerate(space.structures):
                part = f"structure.{i}"
                structure.restore_derived_state(loaded.parts[part], loaded.part_checks(part))
            space.keyword = KeywordIndex.from_state(loaded.parts["keyword"])
            if space.keyword.seq != loaded.seq or space.keyword.options != self._keyword.options:
                return None
            content = loaded.parts.get("content")
            if content is not None and not set(_CONTENT_FIELDS) <= set(content):
                return None
            if content is not None:
                space.content = (
                    PackedStrings(content["id_bytes"], content["id_ends"]),
                    PackedStrings(content["key_bytes"], content["key_ends"]),
                )
                if len(space.content[0]) != len(space.content[1]):
                    return None
        except (KeyError, ContractError, ValueError):
            return None
        space.meta_checked = True
        self._fold_namespace(ns, space, until)
        return space

    def _loaded_snapshot(self, ns: tuple[str, ...], *, deferred: bool = False) -> derived.Loaded:
        """The snapshot of ``ns`` checked; with ``deferred``, the structures' vectors
        (:attr:`Structure.checked_on_touch`) and the content index are checked block by block on
        first touch instead (``space.checks``)."""
        home = derived_home(self.memory)
        if self._derived is None or home is None:
            raise derived.StaleSnapshot("this engine keeps no derived state on disk")
        defer = [
            *(f"content/{name}" for name in _CONTENT_FIELDS),
            *(f"structure.{i}/{name}" for i, p in enumerate(self._prototypes) for name in p.checked_on_touch),
        ] if deferred else []  # fmt: skip
        return self._derived.load(
            derived.snapshot_name(ns, self._snapshot_key()), key=self._snapshot_key(),
            head=self._head() or 0, hash_at=home.event_hash, defer=defer,
        )

    def _checked(self, ns: tuple[str, ...]) -> _Derived:
        """The state of ``ns`` with every block of its snapshot checked (before a write, a save or
        a verify): one that fails rebuilds ``ns`` from the events, as an open that found it would."""
        space = self._space(ns)
        try:
            for check in space.checks.values():
                check.all()
        except derived.StaleSnapshot:
            return self._rebuilt(ns)
        space.checks = {}
        return space

    def _rebuilt(self, ns: tuple[str, ...]) -> _Derived:
        """``ns`` rebuilt from its events (a snapshot block failed its check), saved when large."""
        self._spaces.pop(ns, None)
        space = self._event_build(ns)
        self._spaces[ns] = space
        self._save_large(ns, space)
        return space

    def _heal(self) -> bool:
        """After :class:`~coniti.derived.StaleSnapshot` from a read: rebuild the namespaces whose
        snapshot blocks failed (in the engine that owns the rows) and drop a past engine's views of
        them; True when a retry can succeed."""
        owner = self._source or self
        damaged = [
            ns for ns, space in owner._spaces.items()
            if any(c.failure is not None for c in space.checks.values())
        ]  # fmt: skip
        for ns in damaged:
            owner._rebuilt(ns)
        if self._source is not None:
            self._spaces.clear()  # views of the rows they read; made again from the owner's
            return True
        return bool(damaged)

    def _save(self, ns: tuple[str, ...], space: _Derived) -> bool:
        """Write the snapshot of ``ns`` (tagged with ``space.seq``); False when nothing is kept."""
        home = derived_home(self.memory)
        if self._derived is None or home is None or space.seq is None:
            return False
        parts: dict[str, dict[str, np.ndarray]] = {
            f"structure.{i}": s.derived_state() for i, s in enumerate(space.structures)
        }
        pairs = sorted(self._content(space).items())
        id_bytes, id_ends = derived.pack_strings([i for i, _ in pairs])
        key_bytes, key_ends = derived.pack_strings([k for _, k in pairs])
        parts["content"] = {
            "id_bytes": id_bytes, "id_ends": id_ends, "key_bytes": key_bytes, "key_ends": key_ends,
        }
        space.keyword.seq = space.seq
        parts["keyword"] = {k: np.asarray(v) for k, v in space.keyword.state().items()}
        self._derived.save(
            derived.snapshot_name(ns, self._snapshot_key()), seq=space.seq,
            seq_hash=home.event_hash(space.seq), key=self._snapshot_key(), parts=parts,
        )
        space.changed = 0
        return True

    def persist(self) -> int:
        """Save the snapshot of every loaded namespace that changed since its last one (backends
        that declare ``supports_derived_state``); returns how many were written. :meth:`close`
        calls it. Raises what the file system raises (``OSError``); the old snapshot then stays."""
        return self._persist(1)

    def _persist(self, least: int) -> int:
        with self._lock:
            self.refresh()
            written = 0
            for ns, space in list(self._spaces.items()):
                due = min(least, max(1, len(space.structures[0]) // 10))
                if space.changed >= due:
                    space = self._checked(ns)  # a rebuild (a block failed) is saved at once
                    if space.changed >= due and self._save(ns, space):
                        written += 1
            return written

    def verify(self, namespace: Sequence[str] = ()) -> DerivedReport:
        """Prove the derived state of ``namespace`` equals a fresh build from memory: after a
        :meth:`refresh`, the rows (id, version, end, time, vector bits) and the content index of
        the loaded structures, and of the snapshot on disk once restored and caught up, are
        compared with a fold of every event (or a scan, without an event feed). Reads; writes
        nothing. O(events of the namespace). Over an event feed the three are compared at one
        event: the loaded rows' after the refresh, or the snapshot's if another writer saved a
        later one meanwhile (the loaded rows are caught up to it)."""
        ns = as_namespace(namespace)
        with self._lock:
            self.refresh()
            space = self._checked(ns)
            status = "none"
            loaded: derived.Loaded | None = None
            if self._derived is not None:
                try:
                    loaded = self._loaded_snapshot(ns)
                except derived.StaleSnapshot as exc:
                    status = str(exc)
            if self._history:  # other writers may append meanwhile: fold no further than one event
                at = max(space.seq or 0, 0 if loaded is None else loaded.seq)
                if (space.seq or 0) < at:
                    self._fold_namespace(ns, space, at)
                fresh = self._event_build(ns, at)
            else:
                fresh = self._scan_build(ns)
            problems = [f"loaded: {p}" for p in _differences(self, space, fresh)]
            if loaded is not None:
                restored = self._restored(ns, loaded, space.seq)
                if restored is None:
                    status = "refused: its arrays do not fit"
                    problems.append("snapshot: its arrays do not fit")
                else:
                    status = "current"
                    problems += [f"snapshot: {p}" for p in _differences(self, restored, fresh)]
            return DerivedReport.constructor()(
                {
                    "namespace": ns, "seq": space.seq, "rows": len(space.structures[0]),
                    "ok": not problems, "snapshot": status, "problems": problems,
                }
            )


    def _keyword_add(
        self,
        space: _Derived,
        records: Sequence[MemoryRecord],
        head: int | None,
        born: np.ndarray | None = None,
    ) -> None:
        """Add ``records`` to the keyword index, born at ``born`` (the seqs their put takes), else
        at their version, else at ``head``, else 0: as the structures' rows are."""
        space.keyword.add(
            [r.note.id for r in records],
            [r.note.text for r in records],
            [r.note.timestamp for r in records],
            born.tolist() if born is not None
            else [r.version if r.version is not None else (head or 0) for r in records],
            expires=[r.expires_at for r in records],
            threads=[thread_of(r.note.metadata) for r in records],
        )

    def _check_meta(self, ns: tuple[str, ...]) -> None:
        stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
        if stored is not None:
            self._refuse_mismatch(stored, ns)

    def _refuse_mismatch(self, stored: Any, ns: tuple[str, ...], what: str = "memory") -> None:
        if stored != self._spec_id:
            raise EmbeddingMismatch(
                f"{what} in namespace {namespace_text(ns)} was embedded with {stored!r}; this engine uses "
                f"{self._spec_id!r} ({self.embedder.name}). Open it with the embedding that wrote it."
            )

    def _refuse_writes(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"this engine is read-only (memory: {self.memory.kind})")

    # -- content index --------------------------------------------------------------------------

    def _context(
        self,
        ns: tuple[str, ...],
        space: _Derived,
        keys: Sequence[str | None] | None = None,
        ids: Sequence[str] | None = None,
    ) -> StrategyContext:
        """What the strategy consults for ``ns`` (``keys``: the content keys of the notes it is to
        admit, when computed; ``ids``: their ids, whose membership is then looked up at once)."""
        first = space.structures[0]
        is_stored: Callable[[str], bool] = first.__contains__
        if ids is not None:
            asked = set(ids)
            found = first.stored_among(asked)

            def is_stored(id_: str) -> bool:
                return id_ in found if id_ in asked else first.__contains__(id_)

        def stored_with_key(key: str) -> list[str]:
            packed = space.content
            if packed is None:  # the usual case: unpacked
                return _holders(space.keys.get(key))
            if packed[0].finds + packed[1].finds + len(space.deferred) < LOOKUP_BUDGET:
                _check_content(space)
                return _packed_holders(packed, space.deferred, key)
            self._content(space)
            return _holders(space.keys.get(key))

        return StrategyContext(
            namespace=ns,
            structures=tuple(space.structures),
            stored_with_key=stored_with_key,
            is_stored=is_stored,
            keys=keys,
        )

    def _content(self, space: _Derived) -> dict[str, str]:
        """The content index (id -> key), loaded from the snapshot's pairs on first use."""
        if space.content is not None:
            _check_content(space)
            (id_column, key_column), space.content = space.content, None
            ids, keys = id_column.tolist(), key_column.tolist()
            by_key, key_of = space.keys, space.key_of
            for id_, key in zip(ids, keys, strict=True):
                _hold(by_key, key, id_)
                key_of[id_] = key
            deferred, space.deferred = space.deferred, []
            for id_, change in deferred:
                if change is None:
                    self._unindex(space, [id_])
                else:
                    self._add_key(space, id_, change)
        return space.key_of

    def _index_notes(self, space: _Derived, notes: Sequence[Note]) -> None:
        self._index(space, [n.id for n in notes], self.strategy.content_keys(notes))

    def _index(self, space: _Derived, ids: Sequence[str], keys: Sequence[str | None]) -> None:
        """Add ``ids`` to the content index under their content ``keys`` (None: not indexed)."""
        if space.content is not None:
            space.deferred.extend((id_, key) for id_, key in zip(ids, keys, strict=True) if key is not None)
            return
        for id_, key in zip(ids, keys, strict=True):
            if key is not None:
                self._add_key(space, id_, key)

    @staticmethod
    def _add_key(space: _Derived, id_: str, key: str) -> None:
        _hold(space.keys, key, id_)
        space.key_of[id_] = key

    def _unindex(self, space: _Derived, ids: Iterable[str]) -> None:
        if space.content is not None:
            space.deferred.extend((id_, None) for id_ in ids)
            return
        for id_ in ids:
            key = space.key_of.pop(id_, None)
            if key is None:
                continue
            holders = space.keys.get(key)
            if isinstance(holders, str):
                if holders == id_:
                    del space.keys[key]
            elif holders is not None:
                holders.remove(id_)
                if len(holders) == 1:  # a lone holder again: kept as its id (see _Derived.keys)
                    space.keys[key] = holders[0]

    def __repr__(self) -> str:
        return (
            f"ContinuityEngine(memory={self.memory.kind}, embedding={self._spec_id}, "
            f"structures={[p.name for p in self._prototypes]}, strategy={self.strategy.name})"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Save the snapshots that lag by at least 1,000 events or a tenth of their rows (as
        :meth:`persist` does, where derived state is kept; a failure to save is ignored: the next
        open rebuilds or catches up), then drop the derived state. The memory backend is not closed
        (its owner closes it)."""
        with self._lock:
            if self._derived is not None and not self.memory.read_only:
                with contextlib.suppress(Exception):  # derived state is optional; memory is intact
                    self._persist(_SAVE_AT_CLOSE)
            self._spaces.clear()

    # -- async twins: the sync call on a worker thread (the engine's lock serialises them) ---------

    async def aingest(self, note: Note | str, *, namespace: Sequence[str] = ()) -> IngestResult:
        """:meth:`ingest` on a worker thread."""
        return await to_thread(self.ingest, note, namespace=namespace)

    async def aingest_many(
        self, notes: Iterable[Note | str], *, namespace: Sequence[str] = (), op_id: str | None = None
    ) -> list[IngestResult]:
        """:meth:`ingest_many` on a worker thread (``notes`` is read there)."""
        return await to_thread(self.ingest_many, notes, namespace=namespace, op_id=op_id)

    async def aask(
        self,
        query: Query | str,
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
    ) -> Answer:
        """:meth:`ask` on a worker thread."""
        return await to_thread(self.ask, query, namespace=namespace, prefix=prefix)

    async def aask_many(
        self,
        queries: Iterable[Query | str],
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
    ) -> list[Answer]:
        """:meth:`ask_many` on a worker thread."""
        return await to_thread(self.ask_many, queries, namespace=namespace, prefix=prefix)

    async def acontext(
        self,
        query: Query | str,
        *,
        token_budget: int,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        estimator: Callable[[str], int] | None = None,
        render: Callable[[HitLike], str] | None = None,
    ) -> ContextBlock:
        """:meth:`context` on a worker thread (``estimator`` and ``render`` run there too)."""
        return await to_thread(
            self.context,
            query,
            token_budget=token_budget,
            namespace=namespace,
            prefix=prefix,
            estimator=estimator,
            render=render,
        )

    async def aimprove(
        self, id: str, weight: float, *, namespace: Sequence[str] = (), reason: str | None = None
    ) -> FeedbackResult:
        """:meth:`improve` on a worker thread."""
        return await to_thread(self.improve, id, weight, namespace=namespace, reason=reason)

    async def aremove(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> DeleteResult:
        """:meth:`remove` on a worker thread."""
        return await to_thread(self.remove, ids, namespace=namespace)

    async def aget(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> GetResult:
        """:meth:`get` on a worker thread."""
        return await to_thread(self.get, ids, namespace=namespace)

    async def aupsert(
        self,
        note: Note | str,
        *,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
        expires_at: float | datetime | None = None,
    ) -> WriteResult:
        """:meth:`upsert` on a worker thread."""
        return await to_thread(
            self.upsert, note, namespace=namespace, expected_version=expected_version, op_id=op_id,
            expires_at=expires_at,
        )

    async def aupdate(
        self,
        id: str,
        *,
        text: str | None = None,
        timestamp: float | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        metadata_patch: dict[str, Any] | None = None,
        namespace: Sequence[str] = (),
        expected_version: int | None | EllipsisType = ...,
        op_id: str | None = None,
    ) -> WriteResult:
        """:meth:`update` on a worker thread."""
        return await to_thread(
            self.update, id, text=text, timestamp=timestamp, metadata=metadata,
            metadata_patch=metadata_patch, namespace=namespace, expected_version=expected_version,
            op_id=op_id,
        )


class _Folder:
    """Folds the events of one namespace into its derived state, in sequence order: a put ends the
    id's live row (a replacement) and adds the new one (consecutive puts are added as one batch),
    a delete ends the live row, a clear ends every live row, an erase drops every row of the id,
    a metadata write of the embedding id is checked. Puts whose content was erased, and records
    without a vector, add no row."""

    def __init__(self, engine: ContinuityEngine, ns: tuple[str, ...], space: _Derived) -> None:
        self.engine = engine
        self.ns = ns
        self.space = space
        self._reset()

    def _reset(self) -> None:
        self.ids: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.times: list[float] = []
        self.born: list[int] = []
        self.notes: list[Note] = []
        self.expires: list[float | None] = []
        self.pending: set[str] = set()

    def event(self, event: Event) -> None:
        engine, space = self.engine, self.space
        kind = event.kind
        if kind == "meta":
            if event.key == EMBEDDING_KEY and event.value is not None:
                engine._refuse_mismatch(event.value, self.ns)
            return
        if kind in ("op", "feedback"):  # feedback changes no record (hybrid reads weights at ask)
            return
        if kind == "clear":
            self.flush()
            live = space.structures[0].live_ids()
            for structure in space.structures:
                structure.remove(live, seq=event.seq)
            space.keyword.remove(live, died=event.seq)
            engine._unindex(space, live)
            return
        id_ = event.id
        if id_ is None:
            return
        if id_ in self.pending:
            self.flush()
        if kind == "erase":
            for structure in space.structures:
                purge_rows(structure, [id_])
            space.keyword.purge([id_])
            engine._unindex(space, [id_])
            return
        if id_ in space.structures[0]:  # a delete, or a put that replaces the live version
            for structure in space.structures:
                remove_rows(structure, [id_], seq=event.seq)
            space.keyword.remove([id_], died=event.seq)
            engine._unindex(space, [id_])
        record = event.record
        if kind != "put" or record is None or record.vector is None:
            return
        if record.embedding_id is not None and record.embedding_id != engine._spec_id:
            engine._refuse_mismatch(record.embedding_id, self.ns, what=f"record {id_!r}")
        self.ids.append(id_)
        self.vectors.append(record.vector)
        self.times.append(record.note.timestamp)
        self.born.append(event.seq)
        self.notes.append(record.note)
        self.expires.append(record.expires_at)
        self.pending.add(id_)
        if len(self.ids) >= _REBUILD_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.ids:
            return
        matrix = np.stack(self.vectors)
        self.engine._check_dim(self.ns, matrix)
        times = np.array(self.times, dtype=np.float64)
        born = np.array(self.born, dtype=np.int64)
        extra = passage_rows(self.engine.embedder, self.ids, [n.text for n in self.notes], times, born)
        rows = with_passages(self.ids, matrix, times, born, extra)
        for structure in self.space.structures:
            structure.add(rows[0], rows[1], rows[2], born=rows[3])
        self.space.keyword.add(
            self.ids, [n.text for n in self.notes], self.times, self.born, expires=self.expires,
            threads=[thread_of(n.metadata) for n in self.notes],
        )
        self.engine._index_notes(self.space, self.notes)
        self._reset()


def _check_content(space: _Derived) -> None:
    """Check the snapshot's content-index blocks not checked yet (before any of their bytes is
    read, packed or unpacked); a failed block raises :class:`~coniti.derived.StaleSnapshot`."""
    for label, check in space.checks.items():
        if label.startswith("content/"):
            check.all()


def _hold(keys: dict[str, str | list[str]], key: str, id_: str) -> None:
    """Add ``id_`` after the holders of ``key`` in the content index ``keys`` (see
    :attr:`_Derived.keys`: one holder is its id, several a list)."""
    held = keys.get(key)
    if held is None:
        keys[key] = id_
    elif isinstance(held, str):
        keys[key] = [held, id_]
    else:
        held.append(id_)


def _holders(held: str | list[str] | None) -> list[str]:
    """The holders of a key as a new list, from its entry ``held`` in :attr:`_Derived.keys`."""
    if held is None:
        return []
    return [held] if isinstance(held, str) else list(held)


def _packed_holders(
    content: tuple[PackedStrings, PackedStrings], deferred: list[tuple[str, str | None]], key: str
) -> list[str]:
    """The ids ``keys[key]`` would hold once ``content`` is unpacked and ``deferred`` applied (see
    :meth:`ContinuityEngine._content`), found by searching the packed columns."""
    ids, keys = content
    holders = [ids[r] for r in keys.find(key).tolist()]
    touched: dict[str, str | None] = {}
    for id_, change in deferred:
        if change is not None:  # _add_key
            touched[id_] = change
            if change == key:
                holders.append(id_)
            continue
        if id_ in touched:  # _unindex
            old = touched[id_]
        else:
            rows = ids.find(id_)
            old = keys[int(rows[0])] if rows.shape[0] else None
        if old is not None:
            touched[id_] = None
            if old == key:
                holders.remove(id_)
    return holders


def _rows(structure: Structure) -> dict[tuple[str, int], tuple[float, int, bytes]]:
    """Every row of a structure as ``(id, born) -> (time, died, vector bits)``."""
    state = structure.derived_state()
    ids = derived.unpack_strings(state["id_bytes"], state["id_ends"])
    return {
        (id_, int(born)): (float(t), int(died), vector.tobytes())
        for id_, born, t, died, vector in zip(
            ids, state["born"].tolist(), state["times"].tolist(), state["died"].tolist(),
            state["vecs"], strict=True,
        )
    }


def _differences(engine: ContinuityEngine, a: _Derived, b: _Derived) -> list[str]:
    """What differs between two derived states of one namespace (empty: equal)."""
    out: list[str] = []
    for i, (left, right) in enumerate(zip(a.structures, b.structures, strict=True)):
        rows_a, rows_b = _rows(left), _rows(right)
        if rows_a != rows_b:
            extra = sorted(set(rows_a) - set(rows_b))[:3]
            missing = sorted(set(rows_b) - set(rows_a))[:3]
            changed = sorted(k for k in set(rows_a) & set(rows_b) if rows_a[k] != rows_b[k])[:3]
            out.append(
                f"structure {i} ({left.name}): rows not in a fresh build {extra}, rows missing "
                f"{missing}, rows that differ {changed}"
            )
    if engine._content(a) != engine._content(b):
        out.append("the content index differs from a fresh build")
    words_a, words_b = a.keyword.rows_state(), b.keyword.rows_state()
    if words_a != words_b:
        out.append(
            f"keyword index: rows not in a fresh build {sorted(words_a - words_b)[:3]}, rows missing "
            f"{sorted(words_b - words_a)[:3]}"
        )
    return out


def _own(before: int | None, seqs: Sequence[int], apart: int = 0) -> int | None:
    """The last of ``seqs`` (a write's events, as its result returned them: consecutive) when every
    event after ``before`` up to it is the caller's own, ``apart`` of them written just before
    ``seqs``; else None (someone else wrote in between, no feed, or nothing written)."""
    if before is None or not seqs or seqs[0] != before + apart + 1:
        return None
    return seqs[-1]


def _expect(id: str, expected: int | None | EllipsisType) -> dict[str, int | None]:
    """The ``expect`` map of a one-id write: empty for ``...`` (no expectation)."""
    if expected is ...:
        return {}
    if expected is not None and (type(expected) is not int or expected < 1):
        raise ContractError(f"expected_version must be a positive int, None or ..., got {expected!r}")
    return {id: expected}


def _expiry(value: float | datetime) -> float:
    try:
        return to_stored_time(value, "expires_at")
    except ValueError as exc:
        raise ContractError(str(exc)) from None


def _ingest_results(ids: Sequence[str], decisions: Sequence[Any]) -> list[IngestResult]:
    """One :class:`IngestResult` per note, built without validating again."""
    return [
        _ingest_result({"admitted": d.admitted, "id": id_, "reason": d.reason})
        for id_, d in zip(ids, decisions, strict=True)
    ]


def _ingest_request(records: list[MemoryRecord], ns: tuple[str, ...], op_id: str) -> WriteRequest:
    """An ingest as one write: each record created, none may exist yet."""
    return WriteRequest(
        ops=[UpsertOp(record=r) for r in records],
        namespace=ns,
        expect={r.id: None for r in records},
        op_id=op_id,
    )


def _as_query(value: Any) -> Query:
    if isinstance(value, str):
        return Query(text=value)
    if not isinstance(value, Query):
        raise ContractError(f"query must be a Query or a string, got {type(value).__name__}")
    return value


def _passes(hit: Ranked, note: Note, match: Predicate | None, min_score: float | None) -> bool:
    return (min_score is None or hit.score >= min_score) and (match is None or match(note.metadata))


_RANKING = {"semantic": "semantic", "keyword": "keyword", "recent": "recency"}


def _reranked(found: list[tuple[Hit, np.ndarray]], strategy: str) -> list[tuple[Hit, np.ndarray]]:
    """Hits merged from several namespaces with ``signals.ranks`` set to the merged position."""
    name = _RANKING[strategy]
    out = []
    for r, (hit, vector) in enumerate(found, start=1):
        signals = None if hit.signals is None else trusted_signals({**hit.signals.__dict__, "ranks": {name: r}})
        out.append((_hit({**hit.__dict__, "signals": signals}), vector))
    return out


def _merge_key(hit: Hit) -> tuple[float, float, str, tuple[str, ...]]:
    """Hits of several namespaces in one order: best score, then newer note, then smaller id, then
    namespace (the structures' own tie rule, extended by the namespace)."""
    return (-hit.score, -hit.note.timestamp, hit.note.id, hit.namespace)


def _as_note(value: Any, index: int) -> Note:
    if isinstance(value, Note):
        return value
    if isinstance(value, str):
        return Note.create(value)
    raise ContractError(f"notes[{index}] must be a Note or a string, got {type(value).__name__}")


def _with_vectors(records: Iterable[MemoryRecord]) -> tuple[list[MemoryRecord], list[np.ndarray]]:
    """The records that have a vector, and their vectors: a record without one is in no structure
    (never a semantic hit)."""
    kept: list[MemoryRecord] = []
    vectors: list[np.ndarray] = []
    for record in records:
        if record.vector is not None:
            kept.append(record)
            vectors.append(record.vector)
    return kept, vectors


def _chunks(records: Iterator[MemoryRecord], size: int) -> Iterator[list[MemoryRecord]]:
    chunk: list[MemoryRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
