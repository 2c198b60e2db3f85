"""The ContinuityEngine: notes in, answers out, memory underneath.

The engine runs the handshake of the layers spec:

* **ingest**: embed (one batch) -> the strategy admits -> insert into every structure -> write to
  memory last. If a structure fails, the namespace's structures are reindexed from memory (which was
  not written yet) and the error is raised; if the memory write fails, the rows just inserted are taken out
  of the structures again. Either way a failed ingest changes nothing.
* **ask**: embed the query text (if any) -> the strategy queries the structures -> hits are resolved
  to notes with one memory ``get`` -> :class:`Answer`.
* **remove**: delete from memory, then bring the structures in line (the deleted ids are taken out;
  if that fails, the structures are reindexed from memory).

The engine keeps no copy of notes or vectors it cannot rebuild. Per namespace it holds derived data
only: the structures and, when the strategy asks for one, a content index (content key -> ids). The
engine cannot list a backend's namespaces, so it loads a namespace lazily the first time a call
touches it: it checks the namespace's ``embedding_id`` metadata, then fills fresh structures with one
``scan`` of the namespace (``iter_all``). The root namespace ``()`` is checked when the engine opens.

**The embedding id travels with the memory.** Every record is written with the embedder's
``spec_id``; the first write to a namespace sets its ``embedding_id`` metadata, in the same
all-or-nothing step as the records on a backend that declares ``supports_put_with_meta`` (a failed
ingest then records nothing; elsewhere the claim is set first and unset again on failure). A namespace whose
stored id (or any record's) differs from the engine's raises :class:`EmbeddingMismatch` naming both.

**Following a log.** :meth:`ContinuityEngine.refresh` catches up with writes made through other
handles or processes. On a backend that declares ``supports_event_feed`` (an
:class:`~coniti.memory.EventFeed`, as :class:`~coniti.impl.log.LogBackend` is), it reads only the
events after the last sequence number it has seen and re-reads just the records they touch;
elsewhere it rescans the loaded namespaces. :meth:`ContinuityEngine.at` returns a read-only engine
over ``memory.at(seq, time=...)``, for backends that declare ``supports_time_travel``. The engine
reads capabilities only from these declarations (and ``memory.read_only``), never by probing.

An engine is thread-safe: every public method holds one re-entrant lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import EllipsisType
from typing import Any, Self

import numpy as np
import pydantic

from coniti.actor import Note, Query, to_timestamp
from coniti.batch import NoteBatch, RecordBatch
from coniti.contracts import Contract
from coniti.embedding import Embedder
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    NotSupported,
    ReadOnlyError,
    namespace_text,
)
from coniti.filters import Predicate, compile_filter
from coniti.memory import (
    DeleteRequest,
    DeleteResult,
    EventFeed,
    GetRequest,
    GetResult,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    Namespace,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
    WriteResult,
    as_namespace,
    event_feed,
    time_travel,
    to_thread,
)
from coniti.recall import ContextBlock, Hit, HitLike, to_context_block
from coniti.strategy import Strategy, StrategyContext
from coniti.structure import Structure, StructureHit

__all__ = ["Answer", "ContinuityEngine", "Hit", "IngestResult", "Snapshot"]
# Hit lives in coniti.recall (what recall returns); it is re-exported here, where answers are made.

EMBEDDING_KEY = "embedding_id"
"""The metadata key holding a namespace's embedding spec id."""

_REBUILD_BATCH = 65_536


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


_ingest_result = IngestResult.constructor()
_hit = Hit.constructor()
_answer = Answer.constructor()


@dataclass
class _Derived:
    """Derived state of one namespace."""

    structures: list[Structure]
    keys: dict[str, list[str]] = field(default_factory=dict)
    key_of: dict[str, str] = field(default_factory=dict)
    seq: int | None = None
    meta_checked: bool = False


class ContinuityEngine:
    """Ingest notes, ask questions, remove notes: over one memory backend; see the module docstring.

    ``structures``: one structure or a sequence of them; each is a prototype, ``spawn()``-ed once per
    namespace. ``read_only``: refuse writes (always so over a read-only backend such as a time-travel
    view). Raises :class:`EmbeddingMismatch` if the root namespace holds another embedding's vectors.
    """

    def __init__(
        self,
        memory: MemoryBackend,
        embedder: Embedder,
        structures: Structure | Sequence[Structure],
        strategy: Strategy,
        *,
        read_only: bool = False,
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
        self.memory = memory
        self.embedder = embedder
        self.strategy = strategy
        self._prototypes = protos
        self._spec_id = embedder.spec_id
        self._read_only = read_only or memory.read_only
        self._lock = threading.RLock()
        self._spaces: dict[tuple[str, ...], _Derived] = {}
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
        if isinstance(notes, NoteBatch):
            columns, batch = notes, notes.notes()
        else:
            batch = [_as_note(n, i) for i, n in enumerate(notes)]
        ns = as_namespace(namespace)
        with self._lock:
            self._refuse_writes()
            space = self._space(ns)
            if op_id is not None:
                replayed = self._replay_ingest(ns, space, batch, op_id)
                if replayed is not None:
                    return replayed
            if not batch:
                return []
            texts = list(columns.texts) if columns is not None else [n.text for n in batch]
            vectors = self.embedder.embed(texts)
            decisions = self.strategy.admit(batch, vectors, self._context(ns, space))
            if len(decisions) != len(batch):
                raise ContractError(
                    f"strategy {self.strategy.name!r} returned {len(decisions)} decisions "
                    f"for {len(batch)} notes"
                )
            chosen = [i for i, d in enumerate(decisions) if d.admitted]
            if op_id is None:
                if columns is None:
                    columns = NoteBatch.from_notes(batch)
                every = len(chosen) == len(batch)
                rows = RecordBatch.trusted(
                    columns if every else columns.take(chosen),
                    vectors if every else vectors[chosen],
                    self._spec_id,
                    ns,
                )
                self._write_batch(ns, space, rows, batch if every else [batch[i] for i in chosen])
            else:
                records = [
                    MemoryRecord.trusted(batch[i], vectors[i].copy(), self._spec_id, ns)
                    for i in chosen
                ]
                self._apply(ns, space, _ingest_request(records, ns, op_id))
            return [
                _ingest_result({"admitted": d.admitted, "id": n.id, "reason": d.reason})
                for n, d in zip(batch, decisions, strict=True)
            ]

    def _write(self, ns: tuple[str, ...], space: _Derived, records: list[MemoryRecord]) -> None:
        """:meth:`_store` of ``records`` (those without a vector stay out of the structures)."""
        if not records:
            return
        indexed, vectors = _with_vectors(records)
        request = PutRequest(records=records)

        def put(claim: MetaSetRequest | None) -> object:
            if claim is None:
                return self.memory.put(request)
            return self.memory.put_with_meta(request, claim)

        self._store(
            ns, space, [r.note.id for r in indexed], np.stack(vectors) if indexed else None,
            np.array([r.note.timestamp for r in indexed], dtype=np.float64),
            [r.note for r in indexed], len(records), put,
        )  # fmt: skip

    def _write_batch(
        self, ns: tuple[str, ...], space: _Derived, batch: RecordBatch, notes: list[Note]
    ) -> None:
        """:meth:`_store` of the columns of ``batch`` (``notes``: the same notes, for the content
        index), memory written by :meth:`MemoryBackend.put_batch`."""
        if not len(batch):
            return
        self._store(
            ns, space, list(batch.ids), batch.vectors, batch.notes.timestamps, notes, len(batch),
            lambda claim: self.memory.put_batch(batch, claim),
        )  # fmt: skip

    def _store(
        self,
        ns: tuple[str, ...],
        space: _Derived,
        ids: list[str],
        matrix: np.ndarray | None,
        times: np.ndarray,
        notes: list[Note],
        count: int,
        put: Callable[[MetaSetRequest | None], object],
    ) -> None:
        """Structures first (the rows ``ids``/``matrix``/``times``; None: no row), memory last by
        ``put(claim)`` (``claim``: the metadata to set in the same step, or None); undo the
        structures if memory refuses. ``count``: the records written."""
        try:
            if matrix is not None:
                for structure in space.structures:
                    structure.add(ids, matrix, times)
        except BaseException:
            self._recover(ns)
            raise
        before = self._head()
        try:
            claim = self._claim(ns, space)
            if claim is None or self.memory.supports_put_with_meta:
                put(claim)
            else:
                self._put_claiming(lambda: put(None), claim)
        except BaseException:
            self._undo_add(ns, space, ids)
            raise
        space.meta_checked = True
        self._index(space, notes)
        self._advance(space, before, count + (claim is not None))

    def _undo_add(self, ns: tuple[str, ...], space: _Derived, ids: list[str]) -> None:
        try:
            for structure in space.structures:
                structure.remove(ids)
        except BaseException:
            self._recover(ns)

    def _claim(self, ns: tuple[str, ...], space: _Derived) -> MetaSetRequest | None:
        """The metadata write that claims ``ns`` for this embedding, if its first write is due;
        raises :class:`EmbeddingMismatch` if another embedding holds it."""
        if space.meta_checked:
            return None
        stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
        if stored is None:
            return MetaSetRequest(key=EMBEDDING_KEY, value=self._spec_id, namespace=ns)
        self._refuse_mismatch(stored, ns)
        space.meta_checked = True
        return None

    def _put_claiming(self, put: Callable[[], object], claim: MetaSetRequest) -> None:
        """For a backend without ``put_with_meta``: claim, put, and unset the claim if the put fails
        (two more metadata writes on record there)."""
        self.memory.set_meta(claim)
        try:
            put()
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

        ``query.filter`` keeps only notes whose metadata it matches and ``query.min_score`` drops
        hits scoring below it; the answer still holds the ``k`` best that pass, in the structures'
        order. Across namespaces hits are merged by score, then the newer note, then the smaller id,
        then the namespace (one total order). Raises :class:`~coniti.errors.AnchorNotFound` when
        ``query.near`` is not stored, and :class:`ContractError` for ``near`` with a ``prefix`` (an
        anchor belongs to one namespace) or for both ``namespace`` and ``prefix``. A hit whose record
        vanished from memory since the structures last saw it (a write by another process not yet
        picked up by :meth:`refresh`) is left out.
        """
        query = _as_query(query)
        ns, scope = self._scope(namespace, prefix)
        if scope is not None and query.near is not None:
            raise ContractError("a query with near answers from one namespace; give namespace, not prefix")
        with self._lock:
            vector = None if query.text is None else self.embedder.embed([query.text])[0]
            if scope is None:
                hits = self._answer(ns, query, vector)
            else:
                found = [h for n in self.memory.namespaces(scope) for h in self._answer(n, query, vector)]
                found.sort(key=_merge_key)
                hits = found[: query.k]
            return _answer({"query": query, "namespace": ns, "prefix": scope, "hits": hits})

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

    def _answer(self, ns: tuple[str, ...], query: Query, vector: np.ndarray | None) -> list[Hit]:
        """The ``query.k`` best hits of ``ns`` that pass the query's filter and minimum score.

        Without either, one strategy call. With them, the strategy is asked for more candidates
        (4x, then 4x again) until ``k`` pass or the candidates run out, so the answer equals a
        filtered exact search, at the cost of re-asking for selective filters.
        """
        space = self._space(ns)
        context = self._context(ns, space)
        match: Predicate | None = None if query.filter is None else compile_filter(query.filter)
        narrowed = match is not None or query.min_score is not None
        want = query.k
        fetch = max(4 * want, 32) if narrowed else want
        notes: dict[str, Note] = {}
        versions: dict[str, int | None] = {}
        while True:
            asked = query if fetch == want else query.model_copy(update={"k": fetch})
            raw = self.strategy.answer(asked, vector, context)
            missing = [h.id for h in raw if h.id not in notes]
            if missing:
                for record in self.memory.get(GetRequest(ids=missing, namespace=ns)).records:
                    notes[record.note.id] = record.note
                    versions[record.note.id] = record.version
            hits = [
                _hit(
                    {"note": notes[h.id], "score": float(h.score), "namespace": ns, "version": versions[h.id]}
                )
                for h in raw
                if h.id in notes and _passes(h, notes[h.id], match, query.min_score)
            ]
            exhausted = len(raw) < fetch or fetch >= len(space.structures[0])
            below = query.min_score is not None and bool(raw) and raw[-1].score < query.min_score
            if len(hits) >= want or exhausted or below:
                return hits[:want]
            fetch *= 4

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
            space = self._space(ns)
            before = self._head()
            result = self.memory.delete(DeleteRequest(ids=id_list, namespace=ns))
            self._forget(ns, space, result.deleted)
            self._advance(space, before, len(result.deleted))
            return result

    def _forget(self, ns: tuple[str, ...], space: _Derived, ids: list[str]) -> None:
        try:
            for structure in space.structures:
                structure.remove(ids)
        except BaseException:
            self._recover(ns)
            raise
        self._unindex(space, ids)

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
        ns = as_namespace(namespace)
        when = None if expires_at is None else _expiry(expires_at)
        with self._lock:
            self._refuse_writes()
            self._require_write()
            space = self._space(ns)
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
        re-embedded only when it differs from the stored text. Raises
        :class:`~coniti.errors.RecordNotFound` when ``id`` is not live, and
        :class:`~coniti.errors.VersionConflict` when ``expected_version`` is not the live version.
        Needs a backend with ``supports_write``.
        """
        ns = as_namespace(namespace)
        with self._lock:
            self._refuse_writes()
            self._require_write()
            space = self._space(ns)
            vector = None
            if text is not None:
                live = self._live(ns, id)
                if live is not None and live.note.text != text:
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
        claim = self._claim(ns, space)
        before = self._head()
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
        ids = [op.record.id if isinstance(op, UpsertOp) else op.id for op in request.ops]
        self._reconcile(ns, space, ids)
        if not result.replayed:
            written = len(result.versions) - len(result.unchanged) + len(result.deleted)
            self._advance(space, before, written + (request.op_id is not None) + (claim is not None))
        return result

    def _replay_ingest(
        self, ns: tuple[str, ...], space: _Derived, batch: list[Note], op_id: str
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
            space = self._space(ns)
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
            feed = event_feed(self.memory)
            if feed is None:
                for ns in list(self._spaces):
                    self._reindex(ns)
                return 0
            return self._catch_up(feed)

    def _head(self) -> int | None:
        """The backend's last sequence number, if it declares an event feed."""
        feed = event_feed(self.memory)
        return None if feed is None else feed.head

    def _advance(self, space: _Derived, before: int | None, written: int) -> None:
        """Skip our own events on the next refresh when nobody else wrote meanwhile.

        Holds when the namespace had seen everything up to ``before`` and the head moved by exactly
        the events this call wrote (one per record put or id deleted, one per metadata write: what
        :attr:`~coniti.memory.MemoryBackend.supports_event_feed` declares). Otherwise refresh
        re-reads them, which is harmless.
        """
        if before is None or space.seq != before or written == 0:
            return
        after = self._head()
        if after is not None and after == before + written:
            space.seq = after

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
            if event.kind == "clear":
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
                structure.remove(ids)
            self._unindex(space, ids)
            records = [r for r in found if r.embedding_id in (None, self._spec_id)]
            if len(records) != len(found):
                bad = next(r for r in found if r.embedding_id not in (None, self._spec_id))
                self._refuse_mismatch(bad.embedding_id or "", ns, what=f"record {bad.id!r}")
            records, vectors = _with_vectors(records)
            if records:
                matrix = np.stack(vectors)
                times = np.array([r.note.timestamp for r in records], dtype=np.float64)
                for structure in space.structures:
                    structure.add([r.id for r in records], matrix, times)
                self._index(space, [r.note for r in records])
        except BaseException:
            self._recover(ns)
            raise

    # -- time travel -----------------------------------------------------------------------------

    def at(self, seq: int | None = None, *, time: float | datetime | None = None) -> ContinuityEngine:
        """A read-only engine answering from memory as it was after event ``seq`` (or at ``time``).

        Needs a backend that declares ``supports_time_travel`` (e.g. LogBackend); others raise
        :class:`NotSupported`. The new engine has fresh structures, filled from the past view.
        """
        past = time_travel(self.memory)
        if past is None:
            raise NotSupported(
                f"at() needs a memory backend with time travel (e.g. LogBackend); "
                f"{self.memory.kind!r} has none"
            )
        view = past.at(seq, time=time)
        return ContinuityEngine(
            view,
            self.embedder,
            [s.spawn() for s in self._prototypes],
            self.strategy,
            read_only=True,
        )

    # -- loading and reindexing ---------------------------------------------------------------

    def reindex(self, namespace: Sequence[str] = ()) -> None:
        """Refill the structures and content index of ``namespace`` from memory now (memory itself is
        not touched; compare :meth:`LogBackend.rebuild <coniti.impl.log.LogBackend.rebuild>`, which
        refolds a store's projections)."""
        ns = as_namespace(namespace)
        with self._lock:
            if ns in self._spaces:
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
        self._spaces[ns] = self._load(ns)

    def _recover(self, ns: tuple[str, ...]) -> None:
        """After a failure: reindex ``ns`` from memory, or, if that fails too, unload it (the next
        call that touches it loads it again). Never raises, so the original error propagates."""
        try:
            self._reindex(ns)
        except Exception:
            self._spaces.pop(ns, None)

    def _load(self, ns: tuple[str, ...]) -> _Derived:
        """Fresh structures and content index for ``ns``, filled by one scan of memory."""
        space = _Derived(structures=[p.spawn() for p in self._prototypes])
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
            if matrix.shape[1] != self.embedder.dim:
                raise EmbeddingMismatch(
                    f"namespace {namespace_text(ns)} holds vectors of length {matrix.shape[1]}; "
                    f"{self._spec_id!r} gives {self.embedder.dim}"
                )
            times = np.array([r.note.timestamp for r in chunk], dtype=np.float64)
            for structure in space.structures:
                structure.add(ids, matrix, times)
            self._index(space, [r.note for r in chunk])
        return space

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

    def _context(self, ns: tuple[str, ...], space: _Derived) -> StrategyContext:
        first = space.structures[0]
        return StrategyContext(
            namespace=ns,
            structures=tuple(space.structures),
            stored_with_key=lambda key: list(space.keys.get(key, ())),
            is_stored=first.__contains__,
        )

    def _index(self, space: _Derived, notes: Iterable[Note]) -> None:
        key_of = self.strategy.content_key
        for note in notes:
            key = key_of(note)
            if key is not None:
                space.keys.setdefault(key, []).append(note.id)
                space.key_of[note.id] = key

    def _unindex(self, space: _Derived, ids: Iterable[str]) -> None:
        for id_ in ids:
            key = space.key_of.pop(id_, None)
            if key is None:
                continue
            holders = space.keys.get(key)
            if holders is not None:
                holders.remove(id_)
                if not holders:
                    del space.keys[key]

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
        """Drop the derived state. The memory backend is not closed (its owner closes it)."""
        with self._lock:
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


def _expect(id: str, expected: int | None | EllipsisType) -> dict[str, int | None]:
    """The ``expect`` map of a one-id write: empty for ``...`` (no expectation)."""
    if expected is ...:
        return {}
    if expected is not None and (type(expected) is not int or expected < 1):
        raise ContractError(f"expected_version must be a positive int, None or ..., got {expected!r}")
    return {id: expected}


def _expiry(value: float | datetime) -> float:
    try:
        return to_timestamp(value, "expires_at")
    except ValueError as exc:
        raise ContractError(str(exc)) from None


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


def _passes(hit: StructureHit, note: Note, match: Predicate | None, min_score: float | None) -> bool:
    return (min_score is None or hit.score >= min_score) and (match is None or match(note.metadata))


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
