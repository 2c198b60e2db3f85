"""coniti: durable, replayable, auditable memory for AI agents.

The public names are re-exported here; see ``__all__``. Backends live in :mod:`coniti.impl`.
"""

from coniti.actor import Note, Query, TimeRange
from coniti.contracts import Contract
from coniti.errors import (
    ConitiError,
    ContractError,
    DuplicateRecord,
    EngineError,
    InvalidCursor,
    MemoryBackendError,
    MemoryFileError,
    ReadOnlyError,
    StoreError,
)
from coniti.memory import (
    ClearRequest,
    ClearResult,
    CountRequest,
    CountResult,
    DeleteRequest,
    DeleteResult,
    GetRequest,
    GetResult,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaResult,
    MetaSetRequest,
    PutRequest,
    PutResult,
    ScanRequest,
    ScanResult,
)

__all__ = [
    "ClearRequest",
    "ClearResult",
    "ConitiError",
    "Contract",
    "ContractError",
    "CountRequest",
    "CountResult",
    "DeleteRequest",
    "DeleteResult",
    "DuplicateRecord",
    "EngineError",
    "GetRequest",
    "GetResult",
    "InvalidCursor",
    "MemoryBackend",
    "MemoryBackendError",
    "MemoryFileError",
    "MemoryRecord",
    "MetaGetRequest",
    "MetaResult",
    "MetaSetRequest",
    "Note",
    "PutRequest",
    "PutResult",
    "Query",
    "ReadOnlyError",
    "ScanRequest",
    "ScanResult",
    "StoreError",
    "TimeRange",
]

__version__ = "0.1.0"
