"""The ContinuityEngine: notes in, answers out, memory underneath.

:class:`ContinuityEngine` is the facade: it checks the arguments, holds the one lock, and hands each
call to the part that does it. Data flows down; no part calls back up into the engine.

* **ingest** (:mod:`coniti.engine.writes`): embed (one batch) -> the strategy admits -> insert into
  every structure -> write to memory last -> stamp the rows with the events memory says it wrote.
  If a structure fails, the namespace's structures are rebuilt from memory (which was not written
  yet) and the error is raised; if the memory write fails, the rows just inserted are taken out of
  the structures again. Either way a failed ingest changes nothing.
* **ask** (:mod:`coniti.engine.recall`): embed the query text (if any) -> the query's strategy ranks
  candidates in each namespace of the scope (:mod:`coniti.hybrid`: the strategy over the structures,
  the keyword index, or both fused with feedback), the filter kept where candidates are made -> hits
  resolved to notes with memory ``get`` -> optional MMR and reranker stages -> :class:`Answer`.
* **remove**: delete from memory, then end the deleted rows.

Every write path refuses a namespace of a scope (:mod:`coniti.scope`) unless it runs for a scoped
handle (:meth:`ContinuityEngine.scoped`) whose scope holds it.

The engine keeps no copy of notes or vectors it cannot rebuild. Per namespace it holds derived data
only (:class:`~coniti.engine.index.NamespaceIndex`): the structures, the keyword index
(:mod:`coniti.keyword`) and, when the strategy asks for one, a content index (content key -> ids).
The engine cannot list a backend's namespaces, so it loads a namespace lazily the first time a call
touches it: it checks the namespace's ``embedding_id`` metadata, then makes its index in one of
three ways (:mod:`coniti.engine.indexes`):

* over a backend that declares ``supports_event_feed`` (LogBackend), with structures that keep
  versions: a fold of the namespace's events (:mod:`coniti.engine.fold`), every row knowing the
  sequence numbers between which it was live; kept on disk as a snapshot over a backend that
  declares ``supports_derived_state`` (:mod:`coniti.engine.snapshots`, ``log/DERIVED.md``): an open
  restores it (vectors memory mapped) and folds only the events after it;
* elsewhere (InMemoryBackend), one scan of memory, live rows only (:mod:`coniti.engine.scan`);
* an engine from :meth:`ContinuityEngine.at` masks its owner's versioned rows by sequence number
  (:mod:`coniti.engine.past`): no rebuild.

The root namespace ``()`` is checked when the engine opens.

**The embedding id travels with the memory.** Every record is written with the embedder's
``spec_id``; the first write to a namespace sets its ``embedding_id`` metadata, in the same
all-or-nothing step as the records on a backend that declares ``supports_put_with_meta`` (a failed
ingest then records nothing; elsewhere the claim is set first and unset again on failure). A
namespace whose stored id (or any record's) differs from the engine's raises
:class:`EmbeddingMismatch` naming both.

**Following a log.** :meth:`ContinuityEngine.refresh` catches up with writes made through other
handles or processes: with an event feed it reads only the events after the last sequence number it
has seen; elsewhere it rescans the loaded namespaces. The engine reads capabilities only from the
backend's declarations (and ``memory.read_only``), never by probing.

**Reads never write.** An ask, a read-only engine and an engine from :meth:`~ContinuityEngine.at`
leave the store's files as they were: a namespace without a usable snapshot is folded from its
events in memory. Snapshots are written by writers: :meth:`~ContinuityEngine.persist`,
:meth:`~ContinuityEngine.reindex`, and, after this engine's writes, the engine's background saver
(:mod:`coniti.engine.saver`). :meth:`~ContinuityEngine.close` only drops the derived state.

An engine is thread-safe: every public method holds one re-entrant lock (an engine from
:meth:`~ContinuityEngine.at` shares its owner's lock and rows).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np

from coniti import derived
from coniti.actor import Note, Query
from coniti.batch import NoteBatch
from coniti.embedding import Embedder
from coniti.engine import recall, validity
from coniti.engine.accountable import Accountable
from coniti.engine.fold import FoldedIndexes
from coniti.engine.guard import writing as _writing
from coniti.engine.index import Recipe
from coniti.engine.indexes import CurrentIndexes, Indexes
from coniti.engine.keeping import KeepingTrue
from coniti.engine.past import PastIndexes, recorded_at
from coniti.engine.results import (
    EMBEDDING_KEY,
    MAX_QUERY_CHARS,
    Answer,
    DerivedReport,
    IngestResult,
    Snapshot,
    answer,
    snapshot,
)
from coniti.engine.saver import Saver, release
from coniti.engine.scan import ScannedIndexes
from coniti.engine.snapshots import Snapshots
from coniti.engine.writes import Writes, expiry
from coniti.errors import (
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    NotSupported,
    ReadOnlyError,
)
from coniti.fusion import Fusion
from coniti.keyword import KeywordIndex
from coniti.memory import (
    DeleteResult,
    FeedbackRequest,
    FeedbackResult,
    GetRequest,
    GetResult,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    WriteResult,
    as_namespace,
    derived_home,
    event_feed,
    time_travel,
    to_thread,
)
from coniti.recall import ContextBlock, Hit, HitLike, to_context_block
from coniti.rerank import Reranker, RerankerLike, as_reranker
from coniti.retention import retained
from coniti.scope import Scope, check_write
from coniti.strategy import Strategy
from coniti.structure import Structure

if TYPE_CHECKING:
    from coniti.scoped import ScopedEngine

__all__ = ["Answer", "ContinuityEngine", "DerivedReport", "Hit", "IngestResult", "Snapshot"]
# Hit lives in coniti.recall (what recall returns); it is re-exported here, where answers are made.


class ContinuityEngine(Accountable, KeepingTrue):
    """Ingest notes, ask questions, remove notes: over one memory backend; see the module docstring.

    ``structures``: one structure or a sequence of them; each is a prototype, ``spawn()``-ed once per
    namespace. ``read_only``: refuse writes (always so over a read-only backend such as a time-travel
    view). ``keyword``: the keyword index prototype (its ``k1`` and ``b``), spawned per namespace.
    ``reranker``: a :class:`~coniti.rerank.Reranker`, or a plain or async function ``(query, hits) ->
    hits`` (:func:`~coniti.rerank.as_reranker`), applied to every ask but ``recent`` ones.
    ``max_query_chars``: the longest query text an ask takes (:data:`MAX_QUERY_CHARS` by
    default; the attribute of that name may be changed); a longer one is refused before any work.
    Raises :class:`EmbeddingMismatch` if the root namespace holds another embedding's vectors.
    """

    memory: MemoryBackend
    embedder: Embedder
    strategy: Strategy
    reranker: Reranker | None
    max_query_chars: int

    def __init__(
        self,
        memory: MemoryBackend,
        embedder: Embedder,
        structures: Structure | Sequence[Structure],
        strategy: Strategy,
        *,
        read_only: bool = False,
        keyword: KeywordIndex | None = None,
        reranker: RerankerLike | None = None,
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
        if reranker is not None:
            reranker = as_reranker(reranker)
        if type(max_query_chars) is not int or max_query_chars < 1:
            raise ContractError(f"max_query_chars must be a positive int, got {max_query_chars!r}")
        recipe = Recipe(
            tuple(protos), KeywordIndex() if keyword is None else keyword, strategy,
            embedder.spec_id, embedder.dim, embedder.name,
            passages=embedder if embedder.passage_chars is not None else None,
        )  # fmt: skip
        self._setup(
            memory, embedder, recipe, _current_indexes(memory, recipe), reranker=reranker,
            read_only=read_only or memory.read_only, lock=threading.RLock(),
            max_query_chars=max_query_chars,
        )  # fmt: skip

    def _setup(
        self,
        memory: MemoryBackend,
        embedder: Embedder,
        recipe: Recipe,
        indexes: Indexes,
        *,
        reranker: Reranker | None,
        read_only: bool,
        lock: threading.RLock,
        max_query_chars: int,
    ) -> None:
        """Put the engine together from its parts (``__init__``, and :meth:`at` for a past one)."""
        self.memory = memory
        self.embedder = embedder
        self.strategy = recipe.strategy
        self.reranker = reranker
        self.max_query_chars = max_query_chars
        self._recipe = recipe
        self._indexes = indexes
        self._writes = Writes(memory, embedder, recipe, indexes) if isinstance(indexes, CurrentIndexes) else None
        self._read_only = read_only
        self._lock = lock
        self._saver: Saver | None = None
        if isinstance(indexes, FoldedIndexes) and indexes.snapshots is not None and not read_only:
            self._saver = Saver(indexes, lock)
        indexes.check_meta(())

    # -- properties ------------------------------------------------------------------------------

    @property
    def spec_id(self) -> str:
        """The embedding spec id this engine writes and accepts."""
        return self._recipe.spec_id

    @property
    def read_only(self) -> bool:
        """True when writes are refused (time-travel engines, read-only backends)."""
        return self._read_only

    @property
    def namespaces(self) -> list[tuple[str, ...]]:
        """The namespaces loaded so far (touched by a call), sorted."""
        with self._lock:
            return self._indexes.namespaces

    def structures(self, namespace: Sequence[str] = ()) -> list[Structure]:
        """The structures of ``namespace`` (loaded if needed). Read them; do not modify them."""
        with self._lock:
            return list(self._indexes.get(as_namespace(namespace)).structures)

    def keyword_index(self, namespace: Sequence[str] = ()) -> KeywordIndex:
        """The keyword index of ``namespace`` (loaded if needed). Read it; do not modify it."""
        with self._lock:
            return self._indexes.get(as_namespace(namespace)).keyword

    # -- ingest ----------------------------------------------------------------------------------

    def ingest(
        self, note: Note | str, *, namespace: Sequence[str] = (), no_expiry: bool = False, dedup: bool = False
    ) -> IngestResult:
        """Ingest one note (a plain string becomes ``Note.create(text)``); see :meth:`ingest_many`."""
        return self.ingest_many([note], namespace=namespace, no_expiry=no_expiry, dedup=dedup)[0]

    def ingest_many(
        self,
        notes: Iterable[Note | str] | NoteBatch,
        *,
        namespace: Sequence[str] = (),
        op_id: str | None = None,
        no_expiry: bool = False,
        dedup: bool = False,
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
        admissions (the notes it wrote are embedded again and sent with the op id, so memory
        compares them with the first request); another batch under that op id raises
        :class:`~coniti.errors.IdempotencyConflict`.

        ``no_expiry``: the notes get no expiry from the store's retention (:mod:`coniti.retention`).

        ``dedup=True``: besides the strategy's rules, a note whose
        :meth:`~coniti.actor.Note.content_id` (namespace, kind, normalised text: not the id,
        timestamp or metadata) equals that of a live note of the namespace, or of a note admitted
        earlier in the batch, is refused, whatever its timestamp, with the reason ``"duplicate
        content c1:... of stored note 'id'"`` (or ``"... of note 'id' earlier in this batch"``).
        It reads the live notes of the namespace of the batch's kinds (linear in their number).
        """
        if not isinstance(dedup, bool):
            raise ContractError(f"dedup must be true or false, got {type(dedup).__name__}")
        columns: NoteBatch | None = None
        batch: Sequence[Note]
        if isinstance(notes, NoteBatch):
            columns = batch = notes  # a sequence of its notes, built only if something reads them
        else:
            batch = [_as_note(n, i) for i, n in enumerate(notes)]
        ns = as_namespace(namespace)
        check_write(ns, "ingest")
        with _writing(self) as writes, retained(not no_expiry):
            return writes.ingest(ns, batch, columns, op_id, dedup)

    # -- ask ---------------------------------------------------------------------------------------

    def ask(
        self,
        query: Query | str,
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        receipt: bool | Literal["with_query"] = False,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
    ) -> Answer:
        """Answer ``query`` (a plain string becomes ``Query(text=...)``) from ``namespace``, or with
        ``prefix`` from every live namespace under it (``prefix=()``: all of them) in one ranking.
        ``receipt`` (True, or ``"with_query"`` to keep the query's text too): append a recall
        receipt of the answer to a log memory (:mod:`coniti.receipts`; ``Answer.receipt`` is its
        seq, :meth:`replay` replays it); without it the ask writes nothing.

        ``query.strategy`` chooses the ranking (:class:`~coniti.actor.Query`, :mod:`coniti.hybrid`);
        each hit carries its :class:`~coniti.recall.Signals`. ``query.filter`` keeps only notes
        whose metadata it matches, applied where each ranking's candidates are made
        (:mod:`coniti.engine.recall`), and ``query.min_score`` drops hits scoring below it; the
        answer still holds the ``k`` best that pass, in the strategy's order. Across namespaces hits
        are merged by score, then the newer note, then the smaller id, then the namespace (one total
        order). With ``query.mmr`` or a reranker, :func:`pool_size` candidates are gathered this
        way, re-ranked by MMR (:func:`coniti.fusion.mmr` on the hits' scores and the notes' vectors),
        then given to the reranker (:mod:`coniti.rerank`; not for ``recent``), and the first ``k``
        are the answer. Raises :class:`~coniti.errors.AnchorNotFound` when
        ``query.near`` is not stored, and :class:`ContractError` for ``near`` with a ``prefix`` (an
        anchor belongs to one namespace) or for both ``namespace`` and ``prefix``, and (before any
        work) for a query text longer than :attr:`max_query_chars`. A hit whose record vanished
        from memory since the structures last saw it (a write by another process not yet picked up
        by :meth:`refresh`) is left out. Writes nothing.

        Valid time (:mod:`coniti.engine.validity`): notes whose validity ended by now
        (``valid_to <= now``) are left out; with ``valid_at`` (epoch seconds or an aware datetime)
        the notes not valid at that moment of the world are. ``include_superseded=True`` leaves
        none out and marks those hits ``superseded``. Combine with :meth:`at` for what coniti
        believed at a seq about what was true at ``valid_at``. An ask with ``valid_at`` is about
        that moment, not the present, so the newer of two notes that say the same is not preferred
        (:func:`coniti.fusion.supersede` is off); a ``receipt`` is refused with either argument.
        """
        moment = None if valid_at is None else validity.moment_of(valid_at)
        if type(include_superseded) is not bool:
            raise ContractError(f"include_superseded must be True or False, got {include_superseded!r}")
        query = _as_query(query)
        _check_text(query, self.max_query_chars)
        ns, scope = _scope(namespace, prefix)
        _check_query(query, scope, self.embedder)
        with self._lock:
            vector = _vectors([query], self.embedder)[0]
            return _answered(self, query, ns, scope, vector, receipt, moment, include_superseded)

    def ask_many(
        self,
        queries: Iterable[Query | str],
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
    ) -> list[Answer]:
        """:meth:`ask` for each of ``queries`` (plain strings become ``Query(text=...)``), in
        order, from the same ``namespace`` or ``prefix``: the question texts that need a vector
        are embedded in one embedder call (a batch costs about a third per text of single calls),
        then each is answered as :meth:`ask` answers it. Every query is checked before any is
        answered; the first bad one raises :class:`ContractError` naming ``queries[i]``.
        ``valid_at`` and ``include_superseded`` apply to each as in :meth:`ask`. Writes nothing."""
        moment = None if valid_at is None else validity.moment_of(valid_at)
        if type(include_superseded) is not bool:
            raise ContractError(f"include_superseded must be True or False, got {include_superseded!r}")
        if isinstance(queries, str | bytes):
            raise ContractError("queries must be a sequence of queries, not one string")
        asked: list[Query] = []
        for i, item in enumerate(queries):
            try:
                asked.append(_as_query(item))
                _check_text(asked[-1], self.max_query_chars)
            except ContractError as exc:
                raise ContractError(f"queries[{i}]: {exc}") from None
        ns, scope = _scope(namespace, prefix)
        for i, query in enumerate(asked):
            try:
                _check_query(query, scope, self.embedder)
            except ContractError as exc:
                raise ContractError(f"queries[{i}]: {exc}") from None
        with self._lock:
            vectors = _vectors(asked, self.embedder)
            return [
                _answered(self, q, ns, scope, v, False, moment, include_superseded)
                for q, v in zip(asked, vectors, strict=True)
            ]

    def context(
        self,
        query: Query | str,
        *,
        token_budget: int,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        estimator: Callable[[str], int] | None = None,
        render: Callable[[HitLike], str] | None = None,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
        receipt: bool | Literal["with_query"] = False,
    ) -> ContextBlock:
        """The answer to ``query`` rendered for a prompt: :func:`coniti.recall.to_context_block` of
        :meth:`ask`'s hits within about ``token_budget`` tokens (an estimate: the first hit always
        renders). ``seq`` is the memory point read (the ``as_of`` of a time-travel view, else
        ``head`` of a backend with an event feed, else None): ``engine.at(seq).context(...)`` gives the same block again.
        ``valid_at`` and ``include_superseded`` choose the notes as in :meth:`ask` (by default the
        notes whose validity ended are left out); the block's hits keep their ``superseded`` mark.
        ``receipt`` (True or ``"with_query"``): the ask's answer (all its hits, rendered or not) is
        kept as a recall receipt exactly as :meth:`ask` keeps one; ``ContextBlock.receipt`` is its
        seq and :meth:`replay` replays it (the block is ``to_context_block`` of the replayed hits
        with the same budget). Arguments are checked before the receipt is written."""
        to_context_block([], token_budget, estimator=estimator, render=render)  # check arguments first
        with self._lock:
            seq = self.memory.as_of if self.memory.as_of is not None else self._indexes.head()
            found = self.ask(
                query, namespace=namespace, prefix=prefix, valid_at=valid_at,
                include_superseded=include_superseded, receipt=receipt,
            )  # fmt: skip
        block = to_context_block(found.hits, token_budget, estimator=estimator, render=render, seq=seq)
        return block if found.receipt is None else block.model_copy(update={"receipt": found.receipt})

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
        check_write(request.namespace, "improve")
        with _writing(self) as writes:
            return writes.improve(request)

    def feedback(self, namespace: Sequence[str] = ()) -> dict[str, float]:
        """The feedback weights of ``namespace`` (id -> summed weight; as of the view's point for
        an engine from :meth:`at`); empty on a backend without feedback."""
        ns = as_namespace(namespace)
        with self._lock:
            return self.memory.feedback_weights(ns) if self.memory.supports_feedback else {}

    # -- remove, read, correct -------------------------------------------------------------------
    #
    # A correction goes to memory first (one atomic ``write``), then the index is brought in line
    # with it (rebuilt from memory if that fails): a refused write changes nothing, and the index
    # always ends equal to memory.

    def remove(self, ids: Iterable[str], *, namespace: Sequence[str] = ()) -> DeleteResult:
        """Delete ``ids`` from memory, then from the structures; unknown ids come back in ``missing``."""
        id_list = list(ids)
        for i, id_ in enumerate(id_list):
            if not isinstance(id_, str):
                raise ContractError(f"ids[{i}] must be a string, got {type(id_).__name__}")
        ns = as_namespace(namespace)
        check_write(ns, "remove")
        with _writing(self) as writes:
            return writes.remove(ns, id_list)

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
        no_expiry: bool = False,
    ) -> WriteResult:
        """Create ``note`` or replace the live note of its id whole (one new version).

        The text is embedded unless the live note has the same text and this engine's embedding
        (its vector is kept). ``expected_version``: the live version the write requires (``None``:
        the id must not exist; ``...``, the default: no expectation); a mismatch raises
        :class:`~coniti.errors.VersionConflict`. ``op_id`` makes the call idempotent; ``expires_at``
        hides the note from reads from then on; without it the store's retention gives the expiry,
        unless ``no_expiry`` (:mod:`coniti.retention`). The strategy's admission is not consulted: an upsert
        is an explicit correction. Needs a backend with ``supports_write``.
        """
        note = _as_note(note, 0)
        ns = as_namespace(namespace)
        when = None if expires_at is None else expiry(expires_at)
        check_write(ns, "upsert")
        if no_expiry and when is not None:
            raise ContractError("give expires_at or no_expiry, not both")
        with _writing(self) as writes, retained(not no_expiry):
            return writes.upsert(ns, note, when, expected_version, op_id)

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
        changes = {"text": text, "timestamp": timestamp, "metadata": metadata, "metadata_patch": metadata_patch}
        check_write(ns, "update")
        with _writing(self) as writes:
            return writes.update(ns, id, changes, expected_version, op_id)

    def scoped(self, scope: Scope | Mapping[str, str] | str) -> ScopedEngine:
        """A handle that adds the trusted ``scope`` to every call and refuses calls outside it:
        :class:`~coniti.scoped.ScopedEngine` (how scopes are stored and the trust model:
        :mod:`coniti.scope`). ``scope``: a :class:`~coniti.scope.Scope`, a mapping of its fields or
        ``"user=alice,agent=bot"``."""
        from coniti.scoped import ScopedEngine

        return ScopedEngine(self, scope)

    # -- snapshot / restore --------------------------------------------------------------------

    def snapshot(self, namespace: Sequence[str] = ()) -> Snapshot:
        """Every record of ``namespace`` (by scan) with the namespace's embedding id."""
        ns = as_namespace(namespace)
        with self._lock:
            self._indexes.get(ns)
            records = list(self.memory.iter_all(namespace=ns))
            stored = self.memory.get_meta(MetaGetRequest(key=EMBEDDING_KEY, namespace=ns)).value
            return snapshot({"namespace": ns, "embedding_id": stored, "records": records})

    def restore(self, snapshot: Snapshot, *, namespace: Sequence[str] | None = None) -> int:
        """Write a snapshot's records through ``put`` (into ``namespace`` if given); returns the count.

        All or nothing. Raises :class:`EmbeddingMismatch` if the snapshot or a record carries another
        embedding id, :class:`DuplicateRecord` if an id is already stored (or repeats), and
        :class:`ContractError` for a vector of the wrong length.
        """
        if not isinstance(snapshot, Snapshot):
            raise ContractError(f"expected a Snapshot, got {type(snapshot).__name__}")
        ns = snapshot.namespace if namespace is None else as_namespace(namespace)
        check_write(ns, "restore")
        spec_id = self.spec_id
        if snapshot.embedding_id is not None:
            self._recipe.refuse_mismatch(snapshot.embedding_id, ns, what="the snapshot")
        records: list[MemoryRecord] = []
        seen: set[str] = set()
        for record in snapshot.records:
            if record.embedding_id is not None and record.embedding_id != spec_id:
                raise EmbeddingMismatch(
                    f"record {record.id!r} of the snapshot was embedded with "
                    f"{record.embedding_id!r}; this engine uses {spec_id!r}"
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
                    record.note, vector, None if vector is None else spec_id, ns, None, None,
                    record.blob,
                )
            )
        with _writing(self) as writes:
            writes.restore(ns, records)
            return len(records)

    # -- following the log, time travel ----------------------------------------------------------

    def refresh(self) -> int:
        """Catch up with writes made through other handles; returns the number of events read.

        With an event feed, reads only events after the last sequence number seen, per loaded
        namespace (a ``clear`` rescans its namespace where rows keep no versions). Without one,
        rescans every loaded namespace and returns 0. An engine from :meth:`at` never changes: 0.
        On a cluster node (a ``LogBackend`` with ``cluster=``) the store first folds what the
        cluster's stream holds beyond it (``LogBackend.refresh``), so other nodes' writes count.
        Raises :class:`EmbeddingMismatch` if another writer set a different embedding id.
        """
        with self._lock:
            if getattr(self.memory, "cluster", None) is not None:  # a view (at) has none
                self.memory.refresh()  # type: ignore[attr-defined]
            return self._indexes.refresh()

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
        owner = self._indexes
        engine = ContinuityEngine.__new__(ContinuityEngine)
        if not isinstance(owner, FoldedIndexes) or view.as_of is None:
            indexes: Indexes = ScannedIndexes(view, self._recipe, None)
            lock = threading.RLock()
        else:
            indexes = PastIndexes(view, owner, view.as_of, recorded_at(owner.feed, view.as_of))
            lock = self._lock
        engine._setup(
            view, self.embedder, self._recipe, indexes, reranker=self.reranker, read_only=True,
            lock=lock, max_query_chars=self.max_query_chars,
        )  # fmt: skip
        return engine

    # -- derived state ---------------------------------------------------------------------------

    def reindex(self, namespace: Sequence[str] = ()) -> None:
        """Refill the structures and content index of ``namespace`` from memory now (memory itself is
        not touched; compare :meth:`LogBackend.rebuild <coniti.impl.log.LogBackend.rebuild>`, which
        refolds a store's projections). Over an event feed this is the rebuild of the derived
        state: a fold of every event, whose snapshot replaces the one on disk (not on a read-only
        store)."""
        with self._lock:
            self._indexes.reindex(as_namespace(namespace))

    def persist(self, *, lagging: int = 1) -> int:
        """Save the snapshot of every loaded namespace that lags by ``lagging`` events or more
        (default: every one that changed since its last snapshot), on backends that declare
        ``supports_derived_state``, after a :meth:`refresh`; returns how many were written (0 for a
        read-only engine, which writes nothing). Raises what the file system raises (``OSError``);
        the old snapshot then stays. Call it after a bulk load: :meth:`close` saves nothing, and
        the background saver (:mod:`coniti.engine.saver`) waits for a pause in the writes."""
        if isinstance(lagging, bool) or not isinstance(lagging, int) or lagging < 1:
            raise ContractError(f"lagging must be a positive int, got {lagging!r}")
        with self._lock:
            if self._read_only:
                return 0
            return self._indexes.persist(lagging)

    def verify(self, namespace: Sequence[str] = ()) -> DerivedReport:
        """Prove the derived state of ``namespace`` equals a fresh build from memory: after a
        :meth:`refresh`, the rows (id, version, end, time, vector bits) and the content index of
        the loaded structures, and of the snapshot on disk once restored and caught up, are
        compared with a fold of every event (or a scan, without an event feed). Reads; writes
        nothing. O(events of the namespace)."""
        with self._lock:
            return self._indexes.verify(as_namespace(namespace))

    def __repr__(self) -> str:
        recipe = self._recipe
        return (
            f"ContinuityEngine(memory={self.memory.kind}, embedding={recipe.spec_id}, "
            f"structures={[p.name for p in recipe.prototypes]}, strategy={recipe.strategy.name})"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the derived state and stop the background saver; nothing is saved (a snapshot that
        lags is folded at the next open; :meth:`persist` saves). Large dropped state is freed on a
        thread (:func:`coniti.engine.saver.release`): close does not wait for it. The memory
        backend is not closed (its owner closes it)."""
        for worker in self.__dict__.get("_consolidators", ()):
            worker.stop()
        if self._saver is not None:
            self._saver.stop()
        with self._lock:
            dropped = self._indexes.clear()
        if isinstance(self._indexes, CurrentIndexes):  # a past engine's views hold no rows
            release(dropped)

    # -- async twins: the sync call on a worker thread (the engine's lock serialises them) ---------

    async def aingest(
        self, note: Note | str, *, namespace: Sequence[str] = (), no_expiry: bool = False
    ) -> IngestResult:
        """:meth:`ingest` on a worker thread."""
        return await to_thread(self.ingest, note, namespace=namespace, no_expiry=no_expiry)

    async def aingest_many(
        self, notes: Iterable[Note | str], *, namespace: Sequence[str] = (), op_id: str | None = None,
        no_expiry: bool = False,
    ) -> list[IngestResult]:  # fmt: skip
        """:meth:`ingest_many` on a worker thread (``notes`` is read there)."""
        return await to_thread(self.ingest_many, notes, namespace=namespace, op_id=op_id, no_expiry=no_expiry)

    async def aask(
        self,
        query: Query | str,
        *,
        namespace: Sequence[str] = (),
        prefix: Sequence[str] | None = None,
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
    ) -> Answer:
        """:meth:`ask` on a worker thread."""
        return await to_thread(
            self.ask, query, namespace=namespace, prefix=prefix, valid_at=valid_at,
            include_superseded=include_superseded,
        )  # fmt: skip

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
        valid_at: float | datetime | None = None,
        include_superseded: bool = False,
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
            valid_at=valid_at,
            include_superseded=include_superseded,
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
        no_expiry: bool = False,
    ) -> WriteResult:
        """:meth:`upsert` on a worker thread."""
        return await to_thread(
            self.upsert, note, namespace=namespace, expected_version=expected_version, op_id=op_id,
            expires_at=expires_at, no_expiry=no_expiry,
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


def _current_indexes(memory: MemoryBackend, recipe: Recipe) -> CurrentIndexes:
    """How the indexes of ``memory`` are made: folded from its event feed when it has one and the
    structures keep versions (kept on disk when the backend is a derived home and the structures
    persist), else built by scan."""
    feed = event_feed(memory)
    if feed is None or not recipe.versioned:
        return ScannedIndexes(memory, recipe, feed)
    home = derived_home(memory)
    snapshots = Snapshots(home, recipe) if home is not None and recipe.persistent else None
    return FoldedIndexes(memory, feed, recipe, snapshots)


def _scope(
    namespace: Sequence[str], prefix: Sequence[str] | None
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


def _answered(
    engine: ContinuityEngine,
    query: Query,
    ns: tuple[str, ...],
    scope: tuple[str, ...] | None,
    vector: np.ndarray | None,
    receipt: bool | Literal["with_query"] = False,
    moment: float | None = None,
    include_superseded: bool = False,
) -> Answer:
    """The answer of ``query`` (checked, its ``vector`` made) by ``engine``, under its lock; once
    more after each heal of a snapshot block that failed its check (an ask over several
    namespaces may meet a failed block in each). ``receipt``, ``moment`` (``valid_at``
    read) and ``include_superseded``: as :meth:`ContinuityEngine.ask`."""
    if receipt and (moment is not None or include_superseded):
        raise ContractError("a recall receipt keeps asks about the present: leave out valid_at and include_superseded")
    asked_query = query
    if moment is not None:  # about a moment of the world, not the present: no "the newer says it now"
        query = query.model_copy(update={"fusion": (query.fusion or Fusion()).model_copy(update={"supersede": 0.0})})
    spaces = [ns] if scope is None else engine.memory.namespaces(scope)
    point = engine.memory.as_of if engine.memory.as_of is not None else engine._indexes.head()

    def hits(asked: Query) -> list[Hit]:
        return recall.answer(
            asked, vector, spaces, merged=scope is not None, indexes=engine._indexes,
            memory=engine.memory, strategy=engine.strategy, reranker=engine.reranker,
        )  # fmt: skip

    def ranked(asked: Query) -> list[Hit]:
        while True:  # each heal rebuilds at least one namespace: at most one retry per namespace
            try:
                return hits(asked)
            except derived.StaleSnapshot:  # a block of a snapshot failed its check on first touch
                if not engine._indexes.heal():
                    raise

    now = time.time()
    found = ranked(query)
    kept = validity.marked(found, moment, now, keep=include_superseded)
    depth = query.k
    # notes left out took places in a full ranking: rank deeper until k remain or it runs out
    while len(kept) < query.k and len(found) == depth:
        depth *= 4
        found = ranked(query.model_copy(update={"k": depth}))
        kept = validity.marked(found, moment, now, keep=include_superseded)
    kept = kept[: query.k]
    receipt_seq = None
    if receipt:
        from coniti.receipts import Receipt, record_receipt

        if engine._read_only or point is None:
            raise ReadOnlyError(f"a recall receipt needs a writable log memory (memory: {engine.memory.kind})")
        receipt_seq = record_receipt(engine.memory, Receipt.of(
            query, kept, point=point, embedder=engine.spec_id, namespace=ns, prefix=scope,
            with_query=receipt == "with_query",
        ))  # fmt: skip
    return answer({"query": asked_query, "namespace": ns, "prefix": scope, "hits": kept, "receipt": receipt_seq})


def _check_text(query: Query, limit: int) -> None:
    """Refuse a query text longer than ``limit`` characters, before any work."""
    if query.text is not None and len(query.text) > limit:
        raise ContractError(
            f"query text is {len(query.text):,} characters, more than max_query_chars "
            f"({limit:,}); nothing was asked"
        )


def _check_query(query: Query, scope: tuple[str, ...] | None, embedder: Embedder) -> None:
    """Refuse ``near`` with a prefix, and a ``vector`` of another dimension than the embedder's."""
    if scope is not None and query.near is not None:
        raise ContractError("a query with near answers from one namespace; give namespace, not prefix")
    if query.vector is not None and len(query.vector) != embedder.dim:
        raise ContractError(
            f"Query.vector has {len(query.vector)} numbers; this memory's embedder "
            f"({embedder.spec_id}) makes vectors of {embedder.dim}"
        )


def _vectors(queries: Sequence[Query], embedder: Embedder) -> list[np.ndarray | None]:
    """The question vector of each query: its ``vector``, or its text embedded (all such texts in
    one call) when its strategy reads vectors; None when it needs none."""
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
        embedded = embedder.embed(list(texts))
        for row, places in zip(embedded, texts.values(), strict=True):
            for i in places:
                out[i] = row
    return out


def _as_query(value: Any) -> Query:
    if isinstance(value, str):
        return Query(text=value)
    if not isinstance(value, Query):
        raise ContractError(f"query must be a Query or a string, got {type(value).__name__}")
    return value


def _as_note(value: Any, index: int) -> Note:
    if isinstance(value, Note):
        return value
    if isinstance(value, str):
        return Note.create(value)
    raise ContractError(f"notes[{index}] must be a Note or a string, got {type(value).__name__}")
