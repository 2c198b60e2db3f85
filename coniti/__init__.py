"""coniti: durable, replayable, auditable memory for AI agents.

The public names are re-exported here; see ``__all__``. Backends live in :mod:`coniti.impl`. Each
name is imported on first access (PEP 562), so ``import coniti`` and the modules that only need
:mod:`coniti.errors` stay cheap; ``from coniti import X`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coniti.actor import Note, Query, TimeRange
    from coniti.batch import NoteBatch, RecordBatch
    from coniti.container import Container
    from coniti.contracts import Contract
    from coniti.engine import Answer, ContinuityEngine, IngestResult, Snapshot
    from coniti.errors import (
        AnchorNotFound,
        CheckpointError,
        ConitiError,
        ContractError,
        DuplicateRecord,
        EmbeddingMismatch,
        EngineError,
        IdempotencyConflict,
        InvalidCursor,
        MemoryBackendError,
        MemoryFileError,
        NotSupported,
        ProofError,
        ReadOnlyError,
        RecordNotFound,
        StoreBusy,
        StoreClosed,
        StoreCorrupted,
        StoreError,
        StoreForked,
        StoreFull,
        StoreVersionError,
        StructureError,
        UnknownPiece,
        VersionConflict,
    )
    from coniti.events import Diff, EraseResult, Event
    from coniti.memory import (
        ClearRequest,
        ClearResult,
        CountRequest,
        CountResult,
        DeleteOp,
        DeleteRequest,
        DeleteResult,
        GetRequest,
        GetResult,
        MemoryBackend,
        MemoryRecord,
        MetaGetRequest,
        MetaResult,
        MetaSetRequest,
        PatchOp,
        PutRequest,
        PutResult,
        ScanRequest,
        ScanResult,
        SweepResult,
        UpsertOp,
        WriteRequest,
        WriteResult,
    )
    from coniti.recall import ContextBlock, Hit, to_context_block
    from coniti.scope import Scope, ScopeError
    from coniti.scoped import ScopedEngine

__all__ = [
    "AnchorNotFound",
    "Answer",
    "CheckpointError",
    "ClearRequest",
    "ClearResult",
    "ConitiError",
    "Container",
    "ContextBlock",
    "ContinuityEngine",
    "Contract",
    "ContractError",
    "CountRequest",
    "CountResult",
    "DeleteOp",
    "DeleteRequest",
    "DeleteResult",
    "Diff",
    "DuplicateRecord",
    "EmbeddingMismatch",
    "EngineError",
    "EraseResult",
    "Event",
    "GetRequest",
    "GetResult",
    "Hit",
    "IdempotencyConflict",
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
    "NoteBatch",
    "PatchOp",
    "ProofError",
    "PutRequest",
    "PutResult",
    "Query",
    "ReadOnlyError",
    "RecordBatch",
    "RecordNotFound",
    "ScanRequest",
    "ScanResult",
    "Scope",
    "ScopeError",
    "ScopedEngine",
    "Snapshot",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupted",
    "StoreError",
    "StoreForked",
    "StoreFull",
    "StoreVersionError",
    "StructureError",
    "SweepResult",
    "TimeRange",
    "UnknownPiece",
    "UpsertOp",
    "VersionConflict",
    "WriteRequest",
    "WriteResult",
    "to_context_block",
]

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AnchorNotFound": "coniti.errors",
    "Answer": "coniti.engine",
    "CheckpointError": "coniti.errors",
    "ClearRequest": "coniti.memory",
    "ClearResult": "coniti.memory",
    "ConitiError": "coniti.errors",
    "Container": "coniti.container",
    "ContextBlock": "coniti.recall",
    "ContinuityEngine": "coniti.engine",
    "Contract": "coniti.contracts",
    "ContractError": "coniti.errors",
    "CountRequest": "coniti.memory",
    "CountResult": "coniti.memory",
    "DeleteOp": "coniti.memory",
    "DeleteRequest": "coniti.memory",
    "DeleteResult": "coniti.memory",
    "Diff": "coniti.events",
    "DuplicateRecord": "coniti.errors",
    "EmbeddingMismatch": "coniti.errors",
    "EngineError": "coniti.errors",
    "EraseResult": "coniti.events",
    "Event": "coniti.events",
    "GetRequest": "coniti.memory",
    "GetResult": "coniti.memory",
    "Hit": "coniti.recall",
    "IdempotencyConflict": "coniti.errors",
    "IngestResult": "coniti.engine",
    "InvalidCursor": "coniti.errors",
    "MemoryBackend": "coniti.memory",
    "MemoryBackendError": "coniti.errors",
    "MemoryFileError": "coniti.errors",
    "MemoryRecord": "coniti.memory",
    "MetaGetRequest": "coniti.memory",
    "MetaResult": "coniti.memory",
    "MetaSetRequest": "coniti.memory",
    "NotSupported": "coniti.errors",
    "Note": "coniti.actor",
    "NoteBatch": "coniti.batch",
    "PatchOp": "coniti.memory",
    "ProofError": "coniti.errors",
    "PutRequest": "coniti.memory",
    "PutResult": "coniti.memory",
    "Query": "coniti.actor",
    "ReadOnlyError": "coniti.errors",
    "RecordBatch": "coniti.batch",
    "RecordNotFound": "coniti.errors",
    "ScanRequest": "coniti.memory",
    "ScanResult": "coniti.memory",
    "Scope": "coniti.scope",
    "ScopeError": "coniti.scope",
    "ScopedEngine": "coniti.scoped",
    "Snapshot": "coniti.engine",
    "StoreBusy": "coniti.errors",
    "StoreClosed": "coniti.errors",
    "StoreCorrupted": "coniti.errors",
    "StoreError": "coniti.errors",
    "StoreForked": "coniti.errors",
    "StoreFull": "coniti.errors",
    "StoreVersionError": "coniti.errors",
    "StructureError": "coniti.errors",
    "SweepResult": "coniti.memory",
    "TimeRange": "coniti.actor",
    "UnknownPiece": "coniti.errors",
    "UpsertOp": "coniti.memory",
    "VersionConflict": "coniti.errors",
    "WriteRequest": "coniti.memory",
    "WriteResult": "coniti.memory",
    "to_context_block": "coniti.recall",
}
"""Exported name -> the module that defines it (a test keeps it equal to ``__all__``)."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'coniti' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
