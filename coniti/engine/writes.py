"""The write path of a current engine (:class:`Writes`): ingest, restore, upsert, update, remove and
feedback, each one handshake between memory and the namespace's index.

* **A put of new records** (ingest, restore): the strategy admits (ingest), the rows go into every
  structure first, memory is written last. If a structure fails, the namespace is rebuilt from
  memory (not written yet); if memory refuses, the rows are taken out again. Either way nothing
  changed. Then the index is completed with what memory says it wrote (the put's result: the
  sequence numbers of its events and the version of each record): the rows are stamped with their
  versions and the keyword and content indexes take the notes. Nothing is predicted: when the
  put's events do not directly follow what the index has seen (another writer came in between),
  the rows are taken out again and the namespace's events are folded.
* **A write** (upsert, update, an ingest with an op id) goes to memory first (one atomic
  :meth:`~coniti.memory.MemoryBackend.write`), then the index is brought in line with it.
* **A delete** goes to memory first; the index ends the deleted rows at the sequence numbers the
  delete returned.

The first write to a namespace claims it for this embedding (its ``embedding_id`` metadata), in the
same all-or-nothing step as the records on a backend that declares ``supports_put_with_meta``;
elsewhere the claim is set first and unset again on failure. A memory holds one embedding: that
first write is refused, before anything is written, when another namespace records another one. Memory is the truth: whenever the
index cannot follow a write exactly, the namespace is rebuilt or refolded from memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from types import EllipsisType
from typing import Any

import numpy as np

from coniti.actor import Note, to_stored_time
from coniti.batch import NoteBatch, RecordBatch
from coniti.embedding import Embedder, tokenize_rows
from coniti.engine.index import NamespaceIndex, Recipe, with_vectors
from coniti.engine.indexes import CurrentIndexes, PutRows, Wrote
from coniti.engine.results import (
    EMBEDDING_KEY,
    IngestResult,
    ingest_result,
    ingest_results,
)
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    NotSupported,
    namespace_text,
)
from coniti.keyword import thread_of, tokens_of
from coniti.memory import (
    DeleteRequest,
    DeleteResult,
    FeedbackRequest,
    FeedbackResult,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    PutResult,
    UpsertOp,
    WriteRequest,
    WriteResult,
)
from coniti.passages import PASSAGE_MARK
from coniti.strategy import Admission
from coniti.windows import threads_of

__all__ = ["Writes", "expiry"]


class Writes:
    """The write path over ``memory`` and ``indexes`` (see the module docstring). Holds no lock:
    the engine calls it under its own."""

    def __init__(
        self, memory: MemoryBackend, embedder: Embedder, recipe: Recipe, indexes: CurrentIndexes
    ) -> None:
        self.memory = memory
        self.embedder = embedder
        self.recipe = recipe
        self.indexes = indexes
        self._one_embedding = False  # True once _claim found no other embedding in the memory

    # -- ingest and restore: a put of new records -------------------------------------------------

    def ingest(
        self,
        ns: tuple[str, ...],
        batch: Sequence[Note],
        columns: NoteBatch | None,
        op_id: str | None,
        dedup: bool = False,
    ) -> list[IngestResult]:
        """Embed, admit, write (see :meth:`ContinuityEngine.ingest_many
        <coniti.engine.ContinuityEngine.ingest_many>`)."""
        self._refuse_marked(columns.ids if columns is not None else [n.id for n in batch])
        index = self.indexes.writable(ns)
        if op_id is not None:
            replayed = self._replay_ingest(ns, index, batch, op_id)
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
        words = tokenize_rows(texts)
        vectors = self.embedder.embed_words(texts, words)
        strategy = self.recipe.strategy
        keys = strategy.content_keys(batch)  # for admission and the content index
        decisions = strategy.admit(batch, vectors, index.context(ns, keys, columns.ids))
        if len(decisions) != len(batch):
            raise ContractError(
                f"strategy {strategy.name!r} returned {len(decisions)} decisions for {len(batch)} notes"
            )
        if dedup:
            decisions = self._dedup(ns, batch, decisions)
        chosen = [i for i, d in enumerate(decisions) if d.admitted]
        kinded = not isinstance(batch, NoteBatch) and any(
            batch[i].kind is not None or batch[i].facts() is not None for i in chosen
        )
        if kinded and op_id is None:  # a batch's columns carry no kind or facts: the records keep them
            eid = self.recipe.spec_id
            self._put(ns, index, [MemoryRecord.trusted(batch[i], vectors[i].copy(), eid, ns) for i in chosen])
        elif op_id is None:
            every = len(chosen) == len(batch)
            rows = RecordBatch.trusted(
                columns if every else columns.take(chosen),
                vectors if every else vectors[chosen],
                self.recipe.spec_id,
                ns,
            )
            if not every:
                keys, words = [keys[i] for i in chosen], [words[i] for i in chosen]
            if all(map(str.isascii, rows.notes.texts)):  # tokens_of gives the words themselves
                tokens: Sequence[Sequence[str]] = words
            else:
                tokens = [tokens_of(t, w) for t, w in zip(rows.notes.texts, words, strict=True)]
            self._put_batch(ns, index, rows, keys, tokens)
        else:
            records = [
                MemoryRecord.trusted(batch[i], vectors[i].copy(), self.recipe.spec_id, ns)
                for i in chosen
            ]
            self._apply(ns, index, _ingest_request(records, ns, op_id))
        return ingest_results(columns.ids, decisions)

    def _dedup(self, ns: tuple[str, ...], batch: Sequence[Note], decisions: Sequence[Admission]) -> list[Admission]:
        """``decisions`` with each admitted note whose :meth:`~coniti.actor.Note.content_id` is
        that of a live note of ``ns``, or of a note admitted earlier in the batch, refused with the
        reason naming the content id and that note. Reads the live notes of ``ns`` of the kinds in
        the batch (a scan filtered by kind: linear in their number)."""
        wanted = {batch[i].kind for i, d in enumerate(decisions) if d.admitted}
        seen: dict[str, str] = {}
        for kind in wanted:
            where = {"$kind": kind} if kind is not None else {"$kind": {"$exists": False}}
            for record in self.memory.iter_all(namespace=ns, filter=where):
                seen.setdefault(record.note.content_id(ns), record.id)
        out: list[Admission] = []
        earlier: dict[str, str] = {}
        for i, decision in enumerate(decisions):
            if decision.admitted:
                note = batch[i]
                cid = note.content_id(ns)
                if cid in seen:
                    decision = Admission(False, f"duplicate content {cid} of stored note {seen[cid]!r}")
                elif cid in earlier:
                    why = f"duplicate content {cid} of note {earlier[cid]!r} earlier in this batch"
                    decision = Admission(False, why)
                else:
                    earlier[cid] = note.id
            out.append(decision)
        return out

    def restore(self, ns: tuple[str, ...], records: list[MemoryRecord]) -> None:
        """Put ``records`` (checked by the caller) into ``ns``; raises
        :class:`~coniti.errors.DuplicateRecord` when one is stored already."""
        index = self.indexes.writable(ns)
        for record in records:
            if record.id in index:
                raise DuplicateRecord(
                    f"record id {record.id!r} already exists in namespace {namespace_text(ns)}; nothing restored"
                )
        self._put(ns, index, records)

    def _put(self, ns: tuple[str, ...], index: NamespaceIndex, records: list[MemoryRecord]) -> None:
        """:meth:`_store` of ``records`` (those without a vector stay out of the structures)."""
        if not records:
            return
        indexed = with_vectors(records)
        request = PutRequest(records=records)

        def put(claim: MetaSetRequest | None) -> PutResult:
            if claim is None:
                return self.memory.put(request)
            return self.memory.put_with_meta(request, claim)

        notes = [r.note for r in indexed]
        rows = PutRows(
            ids=[n.id for n in notes],
            positions=[i for i, r in enumerate(records) if r.vector is not None],
            texts=[n.text for n in notes],
            times=np.array([n.timestamp for n in notes], dtype=np.float64),
            keys=self.recipe.content_keys(notes),
            rows=bool(indexed),
            expires=[r.expires_at for r in indexed],
            threads=[thread_of(n.metadata) for n in notes],
        )
        matrix = np.stack([r.vector for r in indexed if r.vector is not None]) if indexed else None
        self._store(ns, index, rows, matrix, put)

    def _put_batch(
        self,
        ns: tuple[str, ...],
        index: NamespaceIndex,
        batch: RecordBatch,
        keys: Sequence[str | None],
        tokens: Sequence[Sequence[str]],
    ) -> None:
        """:meth:`_store` of the columns of ``batch`` (``keys``: their content keys; ``tokens``:
        their keyword tokens), memory written by :meth:`MemoryBackend.put_batch`."""
        if not len(batch):
            return
        rows = PutRows(
            ids=list(batch.ids),
            positions=range(len(batch)) if batch.vectors is not None else [],
            texts=batch.notes.texts,
            times=batch.notes.timestamps,
            keys=keys,
            rows=batch.vectors is not None,
            tokens=tokens,
            threads=threads_of(batch.notes.metadata),
        )
        self._store(ns, index, rows, batch.vectors, lambda claim: self.memory.put_batch(batch, claim))

    def _store(
        self,
        ns: tuple[str, ...],
        index: NamespaceIndex,
        rows: PutRows,
        matrix: np.ndarray | None,
        put: Callable[[MetaSetRequest | None], PutResult],
    ) -> None:
        """Structures first (``rows`` with ``matrix``; None: no row), memory last by ``put(claim)``
        (``claim``: the metadata to set in the same step, or None), undone if memory refuses; then
        the index completed with what the put returned."""
        claim = self._claim(ns, index)
        try:
            if matrix is not None:
                index.add_rows(rows.ids, matrix, rows.times, texts=rows.texts)
        except BaseException:
            self.indexes.recover(ns)
            raise
        try:
            if claim is None or self.memory.supports_put_with_meta:
                result, apart = put(claim), 0
            else:  # the claim is a change of its own, just before the put's
                result, apart = self._put_claiming(lambda: put(None), claim), 1
        except BaseException:
            self._undo_rows(ns, index, rows.ids)
            raise
        index.meta_checked = True
        self.indexes.put(ns, index, rows, Wrote(result.seqs, apart, result.versions))

    def _undo_rows(self, ns: tuple[str, ...], index: NamespaceIndex, ids: Sequence[str]) -> None:
        try:
            index.take_rows(ids)
        except BaseException:
            self.indexes.recover(ns)

    def _claim(self, ns: tuple[str, ...], index: NamespaceIndex) -> MetaSetRequest | None:
        """The metadata write that claims ``ns`` for this embedding, if its first write is due;
        raises :class:`~coniti.errors.EmbeddingMismatch` if another embedding holds it."""
        if index.meta_checked:
            return None
        stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
        if stored is None:
            self._refuse_second_embedding(ns)
            return MetaSetRequest(key=EMBEDDING_KEY, value=self.recipe.spec_id, namespace=ns)
        self.recipe.refuse_mismatch(stored, ns)
        index.meta_checked = True
        return None

    def _refuse_second_embedding(self, target: tuple[str, ...]) -> None:
        """Before the first write into ``target``, a namespace with no embedding id yet: raise
        :class:`~coniti.errors.EmbeddingMismatch` when the memory already records another one (the
        root namespace's, else the first live namespace's in sorted order, as
        :func:`~coniti.container.stored_embedding` reads it): a memory holds one embedding, so that
        every namespace stays answerable by one engine. Looked up once per engine."""
        if self._one_embedding:
            return
        spec_id = self.recipe.spec_id
        for ns in [(), *self.memory.namespaces()]:
            stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
            if stored is None:
                continue
            if stored != spec_id:
                raise EmbeddingMismatch(
                    f"this memory is embedded with {stored!r} (namespace {namespace_text(ns)}); "
                    f"this engine uses {spec_id!r} ({self.recipe.embedder}). A memory holds one "
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

    # -- facts that change: memory first, then the index ------------------------------------------

    def _refuse_marked(self, ids: Iterable[str]) -> None:
        """Refuse a note id holding the passage mark when the embedder splits long notes
        (:mod:`coniti.passages`): it could name another note's passage row. Nothing is written."""
        if self.recipe.passages is None:
            return
        for id_ in ids:
            if PASSAGE_MARK in id_:
                raise ContractError(
                    f"note id {id_!r} holds the character U+001F, which names passage rows here "
                    f"(the {self.recipe.embedder} embedder splits long notes into passages)"
                )

    def upsert(
        self,
        ns: tuple[str, ...],
        note: Note,
        when: float | None,
        expected_version: int | None | EllipsisType,
        op_id: str | None,
    ) -> WriteResult:
        """See :meth:`ContinuityEngine.upsert <coniti.engine.ContinuityEngine.upsert>` (``when``:
        the expiry, checked by :func:`expiry`)."""
        self.require_write()
        self._refuse_marked([note.id])
        index = self.indexes.writable(ns)
        live = self._live(ns, note.id)
        if live is not None and live.note.text == note.text and live.embedding_id == self.recipe.spec_id:
            vector = live.vector
        else:
            vector = self.embedder.embed([note.text])[0].copy()
        record = MemoryRecord.trusted(note, vector, self.recipe.spec_id, ns, None, when)
        request = WriteRequest(
            ops=[UpsertOp(record=record)], namespace=ns, expect=_expect(note.id, expected_version),
            op_id=op_id,
        )
        return self._apply(ns, index, request)

    def update(
        self,
        ns: tuple[str, ...],
        id: str,
        changes: dict[str, Any],
        expected_version: int | None | EllipsisType,
        op_id: str | None,
    ) -> WriteResult:
        """See :meth:`ContinuityEngine.update <coniti.engine.ContinuityEngine.update>`;
        ``changes``: the fields of the :class:`~coniti.memory.PatchOp` given."""
        self.require_write()
        index = self.indexes.writable(ns)
        vector = None
        text = changes.get("text")
        if text is not None:  # with an op id, always the text's vector: a retry sends the same request
            live = self._live(ns, id)
            if live is not None and live.note.text == text:
                vector = None if op_id is None else live.vector
            elif live is not None or op_id is not None:
                vector = self.embedder.embed([text])[0].copy()
        op = PatchOp(id=id, **changes, vector=vector)
        request = WriteRequest(ops=[op], namespace=ns, expect=_expect(id, expected_version), op_id=op_id)
        return self._apply(ns, index, request)

    def require_write(self) -> None:
        if not self.memory.supports_write:
            raise NotSupported(
                f"the {self.memory.kind!r} memory backend has no write (upsert, update, op ids)"
            )

    def _live(self, ns: tuple[str, ...], id: str) -> MemoryRecord | None:
        found = self.memory.get(GetRequest(ids=[id], namespace=ns)).records
        return found[0] if found else None

    def _apply(self, ns: tuple[str, ...], index: NamespaceIndex, request: WriteRequest) -> WriteResult:
        """Write ``request`` to memory (claiming the namespace's embedding id if due), then bring
        the index in line for the ids it names."""
        claim = self._claim(ns, index)
        if claim is not None:
            self.memory.set_meta(claim)
        try:
            result, changes = self.memory.write_changes(request)
        except BaseException:
            if claim is not None:
                with contextlib.suppress(Exception):  # best effort: the original error is raised
                    self.memory.set_meta(MetaSetRequest(key=EMBEDDING_KEY, value=None, namespace=ns))
            raise
        index.meta_checked = True
        ids = [op.record.id if isinstance(op, UpsertOp) else op.id for op in request.ops]
        seqs = [] if result.replayed else result.seqs  # a replay wrote nothing now: its seqs are the first write's
        wrote = Wrote(seqs, int(claim is not None), changes=changes, receipt=bool(seqs) and request.op_id is not None)
        self.indexes.written(ns, index, ids, wrote)
        return result

    def _replay_ingest(
        self, ns: tuple[str, ...], index: NamespaceIndex, batch: Sequence[Note], op_id: str
    ) -> list[IngestResult] | None:
        """The results of an earlier ingest under ``op_id``, or None if there was none.

        The earlier call's write is rebuilt from the notes it wrote (its recorded result names them;
        their vectors are embedded again, which a deterministic embedder reproduces) and sent again
        with the op id: memory then compares it with the recorded request, so a different batch
        raises :class:`~coniti.errors.IdempotencyConflict`. Notes the first call refused are
        reported refused, with that as the reason.
        """
        self.require_write()
        recorded = self.memory.op_result(op_id, ns)
        if recorded is None:
            return None
        written = [n for n in batch if n.id in recorded.versions]
        vectors = self.embedder.embed([n.text for n in written]) if written else None
        records = [
            MemoryRecord.trusted(n, vectors[i].copy(), self.recipe.spec_id, ns)
            for i, n in enumerate(written)
            if vectors is not None
        ]
        self._apply(ns, index, _ingest_request(records, ns, op_id))
        refused = f"not admitted when op id {op_id!r} first ran"
        results = []
        for n in batch:
            admitted = n.id in recorded.versions
            results.append(
                ingest_result({"admitted": admitted, "id": n.id, "reason": None if admitted else refused})
            )
        return results

    # -- delete and feedback ----------------------------------------------------------------------

    def remove(self, ns: tuple[str, ...], ids: list[str]) -> DeleteResult:
        """Delete ``ids`` from memory, then end their rows."""
        index = self.indexes.writable(ns)
        result = self.memory.delete(DeleteRequest(ids=ids, namespace=ns))
        self.indexes.deleted(ns, index, result.deleted, Wrote(result.seqs))
        return result

    def improve(self, request: FeedbackRequest) -> FeedbackResult:
        """Record feedback (one event; no row changes)."""
        if not self.memory.supports_feedback:
            raise NotSupported(f"the {self.memory.kind!r} memory backend records no feedback")
        index = self.indexes.get(request.namespace)
        result = self.memory.feedback(request)
        self.indexes.advance(index, Wrote([] if result.seq is None else [result.seq]))
        return result


def _expect(id: str, expected: int | None | EllipsisType) -> dict[str, int | None]:
    """The ``expect`` map of a one-id write: empty for ``...`` (no expectation)."""
    if expected is ...:
        return {}
    if expected is not None and (type(expected) is not int or expected < 1):
        raise ContractError(f"expected_version must be a positive int, None or ..., got {expected!r}")
    return {id: expected}


def expiry(value: float | datetime) -> float:
    """``expires_at`` as epoch seconds; :class:`ContractError` naming it when it is not a time."""
    try:
        return to_stored_time(value, "expires_at")
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
