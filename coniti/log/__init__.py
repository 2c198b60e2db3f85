"""coniti's event log engine: an append-only, hash-chained log in LMDB with projections folded in the
same transaction. Plain values only (no pydantic, nothing from :mod:`coniti.memory`).

Modules: :mod:`~coniti.log.keys` (key encodings), :mod:`~coniti.log.codec` (events <-> bytes) and
:mod:`~coniti.log.payloads` (payloads -> bytes), :mod:`~coniti.log.chain` (the hash chain walker and
:class:`FoldError`), :mod:`~coniti.log.store` (LMDB environments, transactions, error translation),
:mod:`~coniti.log.layout` (every index key and value), :mod:`~coniti.log.projections` (index
lookups and the fold), :mod:`~coniti.log.reads` (the checked get/scan/count reads),
:mod:`~coniti.log.append` (the one append routine), :mod:`~coniti.log.eventlog` (operations,
erasure, compaction), :mod:`~coniti.log.checks` (rebuild, reseal and verify), :mod:`~coniti.log.feed`
(event ranges, history, diff, waiting for commits, subscription positions),
:mod:`~coniti.log.logfile` (the ``coniti-log`` export and its importer), :mod:`~coniti.log.replica`
(cluster mode: the log replicated through a stream, folded by every node; its store hook is
:mod:`~coniti.log.writehook`). The format is specified in ``log/FORMAT.md``.
"""

from coniti.log.chain import FoldError
from coniti.log.checks import VerifyReport, rebuild, verify
from coniti.log.codec import EVENT_VERSION, LogEvent, RecordData
from coniti.log.eventlog import EventLog, PutItem, Row
from coniti.log.projections import Head
from coniti.log.store import DEFAULT_MAP_SIZE, DURABILITIES, Store

__all__ = [
    "DEFAULT_MAP_SIZE",
    "DURABILITIES",
    "EVENT_VERSION",
    "EventLog",
    "FoldError",
    "Head",
    "LogEvent",
    "PutItem",
    "RecordData",
    "Row",
    "Store",
    "VerifyReport",
    "rebuild",
    "verify",
]
