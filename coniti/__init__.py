"""coniti: durable, replayable, auditable memory for AI agents.

The public names are re-exported here; see ``__all__``. Backends live in :mod:`coniti.impl`.
"""

from coniti.actor import Note, Query, TimeRange
from coniti.container import Container
from coniti.contracts import Contract
from coniti.engine import Answer, ContinuityEngine, Hit, IngestResult, Snapshot
from coniti.errors import (
    AnchorNotFound,
    ConitiError,
    ContractError,
    DuplicateRecord,
    EmbeddingMismatch,
    EngineError,
    InvalidCursor,
    MemoryBackendError,
    MemoryFileError,
    NotSupported,
    ReadOnlyError,
    StoreError,
    StructureError,
    UnknownPiece,
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
    "AnchorNotFound",
    "Answer",
    "ClearRequest",
    "ClearResult",
    "ConitiError",
    "Container",
    "ContinuityEngine",
    "Contract",
    "ContractError",
    "CountRequest",
    "CountResult",
    "DeleteRequest",
    "DeleteResult",
    "DuplicateRecord",
    "EmbeddingMismatch",
    "EngineError",
    "GetRequest",
    "GetResult",
    "Hit",
    "IngestResult",
    "InvalidCursor",
    "MemoryBackend",
    "MemoryBackendError",
    "MemoryFileError",
    "MemoryRecord",
    "MetaGetRequest",
    "MetaResult",
    "MetaSetRequest",
    "NotSupported",
    "Note",
    "PutRequest",
    "PutResult",
    "Query",
    "ReadOnlyError",
    "ScanRequest",
    "ScanResult",
    "Snapshot",
    "StoreError",
    "StructureError",
    "TimeRange",
    "UnknownPiece",
]

__version__ = "0.1.0"
