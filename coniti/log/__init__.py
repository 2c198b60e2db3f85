"""coniti's event log engine: an append-only, hash-chained log in LMDB with projections folded in the
same transaction. Plain values only (no pydantic, nothing from :mod:`coniti.memory`).

Modules: :mod:`~coniti.log.keys` (key encodings), :mod:`~coniti.log.codec` (events <-> bytes, hash
chain), :mod:`~coniti.log.store` (LMDB environments, transactions, error translation),
:mod:`~coniti.log.projections` (the fold and index reads), :mod:`~coniti.log.eventlog` (operations,
erasure, compaction), :mod:`~coniti.log.checks` (rebuild and verify), :mod:`~coniti.log.feed` (event
ranges, history, diff, waiting for commits, subscription positions), :mod:`~coniti.log.transfer`
(appending exported frames verbatim). The format is specified in ``log/FORMAT.md``.
"""

from coniti.log.checks import VerifyReport, rebuild, verify
from coniti.log.codec import FORMAT_VERSION, Event, RecordData
from coniti.log.eventlog import EventLog, PutItem, Row
from coniti.log.projections import Head
from coniti.log.store import DEFAULT_MAP_SIZE, DURABILITIES, Store

__all__ = [
    "DEFAULT_MAP_SIZE",
    "DURABILITIES",
    "FORMAT_VERSION",
    "Event",
    "EventLog",
    "Head",
    "PutItem",
    "RecordData",
    "Row",
    "Store",
    "VerifyReport",
    "rebuild",
    "verify",
]
