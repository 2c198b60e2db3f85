"""The ContinuityEngine: notes in, answers out, memory underneath.

The package keeps the import path ``coniti.engine`` with every name it exported as one module. Its
parts, each given what it needs (data flows down, nothing calls back up into the engine):

* :mod:`~coniti.engine.engine`: :class:`ContinuityEngine`, the facade (ingest, ask, context,
  update, remove, at, ...);
* :mod:`~coniti.engine.results`: what the engine hands back (:class:`Answer`, :class:`IngestResult`,
  :class:`Snapshot`, :class:`DerivedReport`);
* :mod:`~coniti.engine.writes`: the write path (structures, memory, then what memory wrote);
* :mod:`~coniti.engine.recall`: candidates -> filter -> fuse -> hits, then MMR and the reranker;
* :mod:`~coniti.engine.index`: one namespace's derived state, and the fold of its events;
* :mod:`~coniti.engine.content`: the content index the strategy reads to refuse duplicates;
* :mod:`~coniti.engine.indexes`: the loaded indexes and how they are kept in line with memory, in
  three kinds: :mod:`~coniti.engine.fold` (folded from an event feed),
  :mod:`~coniti.engine.scan` (built by scan), :mod:`~coniti.engine.past` (as of a point);
* :mod:`~coniti.engine.snapshots`: the indexes' snapshots on disk;
* :mod:`~coniti.engine.saver`: the background saver of lagging snapshots (reads never write them).
"""

from coniti.engine.engine import (
    Answer,
    ContinuityEngine,
    DerivedReport,
    Hit,
    IngestResult,
    Snapshot,
)
from coniti.engine.results import EMBEDDING_KEY as EMBEDDING_KEY
from coniti.engine.results import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from coniti.engine.results import pool_size as pool_size

__all__ = ["Answer", "ContinuityEngine", "DerivedReport", "Hit", "IngestResult", "Snapshot"]
