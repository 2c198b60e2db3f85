"""Every error coniti raises, under one root.

::

    ConitiError
    ├── ContractError (ValueError)        a request, contract or value is malformed; names the field
    │   └── ModelFileError                 an embedding model's file is missing (could not be fetched), malformed or not the pinned one
    │       └── SafetensorsError           a safetensors weights file is malformed
    ├── ProofError (ValueError)           a Merkle proof does not verify, or asks for what the tree lacks
    │   └── CheckpointError                a checkpoint, signed note or note key is malformed, unsigned or foreign
    ├── MemoryBackendError (RuntimeError)  a memory operation could not be carried out
    │   ├── DuplicateRecord                put of an id that exists, or repeats within the call
    │   ├── InvalidCursor                  malformed, empty, foreign-instance or foreign-namespace cursor
    │   ├── MemoryFileError                a memory or log file is unreadable, invalid or could not be written
    │   ├── ReadOnlyError                  a write on a read-only view (time travel)
    │   ├── VersionConflict                a write's expected version is not the live one
    │   ├── IdempotencyConflict            an op id already used by a different write request
    │   ├── RecordNotFound (LookupError)   a patch of an id that is not live
    │   └── StoreError                     the LMDB store failed (see coniti.impl.log)
    │       ├── StoreCorrupted             stored data does not decode or contradicts itself
    │       ├── StoreVersionError          written by a newer format version
    │       ├── StoreFull                  could not grow (map limit, disk full, file-size limit)
    │       ├── StoreClosed                the store or view was closed
    │       ├── StoreForked                a handle opened before fork() used in the child
    │       └── StoreBusy                  the store is open elsewhere and the call needs it alone
    └── EngineError (RuntimeError)         the engine or one of its pieces refused or failed
        ├── EmbeddingMismatch              memory holds another embedding spec's vectors
        ├── UnknownPiece (LookupError)     no piece registered under that name
        ├── StructureError                 a structure refused its input or failed
        ├── AnchorNotFound (LookupError)   Query.near names a note that is not stored
        └── NotSupported                   the memory backend lacks what the call needs

Library errors (LMDB, msgpack, OS) are translated into the most specific of these at one boundary per
layer; the original is kept as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence


def namespace_text(namespace: Sequence[str]) -> str:
    """A namespace in messages, written as the command line writes it: parts joined by ``/``, a
    literal ``/`` or ``\\`` in a part escaped with ``\\``, the root namespace as ``/``. Never a
    Python tuple."""
    if not namespace:
        return "/"
    return "/".join(part.replace("\\", "\\\\").replace("/", "\\/") for part in namespace)


class ConitiError(Exception):
    """Root of every error coniti raises."""


class ContractError(ConitiError, ValueError):
    """A request, contract or value is malformed. The message names the offending field."""


class ModelFileError(ContractError):
    """A model file is missing (and could not be fetched), unreadable, malformed or not the pinned
    one; the message names it, or what could not be reached, and how to get the model."""


class SafetensorsError(ModelFileError):
    """A safetensors file is malformed; the message names the file and, where there is one, the tensor."""


class ProofError(ConitiError, ValueError):
    """A Merkle proof does not verify (wrong length, a hash of the wrong size, a root that does not
    follow), or a proof was asked for a leaf or size the tree does not have; the message names what
    failed (see :mod:`coniti.proofs`)."""


class CheckpointError(ProofError):
    """A signed checkpoint, signed note or note key is malformed, not signed by the expected key, its
    signature does not verify, or it is for another origin (see :mod:`coniti.checkpoint`)."""


class MemoryBackendError(ConitiError, RuntimeError):
    """A memory operation could not be carried out."""


class DuplicateRecord(MemoryBackendError):
    """``put`` of an id that already exists in the namespace, or that repeats within one call."""


class InvalidCursor(MemoryBackendError):
    """A scan cursor that is malformed, empty, or from another backend instance or namespace."""


class MemoryFileError(MemoryBackendError):
    """A memory or log file could not be read, failed validation, or could not be written."""


class ReadOnlyError(MemoryBackendError):
    """A write was attempted on a read-only view of memory."""


class VersionConflict(MemoryBackendError):
    """A write's expectation failed: the live version of ``id`` is not ``expected`` (``None``: the
    record must not exist; ``actual`` is ``None`` when it does not). Nothing was written."""

    def __init__(self, id: str, expected: int | None, actual: int | None, namespace: tuple[str, ...] = ()) -> None:
        self.id = id
        self.expected = expected
        self.actual = actual
        self.namespace = namespace
        want = "absent" if expected is None else f"version {expected}"
        got = "absent" if actual is None else f"version {actual}"
        super().__init__(
            f"record {id!r} in namespace {namespace_text(namespace)}: expected {want}, found {got}; "
            "nothing was written"
        )


class IdempotencyConflict(MemoryBackendError):
    """An op id was already used, in this namespace, by a write request with different content."""


class RecordNotFound(MemoryBackendError, LookupError):
    """A patch names an id that is not live (and the request does not allow missing ids)."""


class StoreError(MemoryBackendError):
    """The on-disk store failed; subclasses say how."""


class EngineError(ConitiError, RuntimeError):
    """The engine or one of its pieces refused or failed."""


# -- engine errors (coniti.engine, coniti.embedding, coniti.structure, coniti.strategy, coniti.container)


class EmbeddingMismatch(EngineError):
    """Memory holds vectors of another embedding spec than the engine's; the message names both ids."""


class UnknownPiece(EngineError, LookupError):
    """No embedding, structure, strategy or memory piece is registered under a name; lists the names."""


class StructureError(EngineError):
    """A structure refused its input (wrong dimension, non-finite vector, repeated id) or failed."""


class AnchorNotFound(EngineError, LookupError):
    """The note a query recalls around (``Query.near``) is not stored in the namespace."""


class NotSupported(EngineError):
    """The memory backend lacks what the call needs (e.g. ``at`` needs a backend with time travel)."""


# -- store errors (coniti.log, coniti.impl.log)


class StoreCorrupted(StoreError):
    """Stored data does not decode or contradicts itself; the message names the sequence number."""


class StoreVersionError(StoreError):
    """The store or an event was written by a newer format version than this coniti reads."""


class StoreFull(StoreError):
    """The store could not grow (map limit, disk full, file-size limit); the call wrote nothing."""


class StoreClosed(StoreError):
    """The LogBackend or view was closed."""


class StoreForked(StoreError):
    """A LogBackend opened before ``fork()`` was used in the child; open a new one in the child."""


class StoreBusy(StoreError):
    """The call needs the store alone (``compact``) but another process or handle has it open."""
