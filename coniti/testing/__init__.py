'''The conformance suite for :class:`~coniti.memory.MemoryBackend` implementations, as pytest mixins.

A backend opts in with one small class in its own test module. Give the ``backend_factory`` fixture
(a callable that returns a fresh, empty backend on *every* call) and inherit the tests::

    import itertools

    import pytest

    from coniti.testing import MemoryBackendTests

    class TestMyBackend(MemoryBackendTests):
        supports_threads = True        # declared capabilities, see below

        @pytest.fixture
        def backend_factory(self, tmp_path):
            counter = itertools.count()
            return lambda: MyBackend(tmp_path / f"store-{next(counter)}")

That is all: every rule of the spec's "Rules every backend follows" and the memory file's
"Guarantees" then runs against the backend, on the sync and the async path, and each failure shows as
its own test (``-k`` works). The suite uses only the public ``MemoryBackend`` operations and closes
every backend it gets from the factory. Property tests call the factory once per generated example, so
the factory must not hand out the same store twice.

To run only some capabilities, inherit the mixins you want instead of :class:`MemoryBackendTests`;
each is a small class with no ``Test`` prefix, so pytest collects nothing until you subclass it:

=========================  ======================================================================
``BasicsTests``            factory gives independent backends; ``kind``; ``close``; context manager
``PutTests``               all-or-nothing; DuplicateRecord for existing or repeated ids
``GetTests``               missing ids, repeats once, request order
``DeleteTests``            deleted/missing, repeats once
``ScanTests``              (timestamp, write order), half-open ranges, exact paging, ``next_cursor``
``CursorTests``            resuming across deletes and inserts; InvalidCursor for bad/foreign cursors
``NamespaceTests``         isolation of scan, get, delete, count, meta, clear
``NamespaceListingTests``  ``namespaces(prefix, max_depth)``: live only, sorted, cut, bad arguments
``CopyTests``              records and meta values copied in and out
``MetaTests``              JSON values, ``None`` when unset
``ClearTests``             deleted count, metadata kept
``CountTests``             totals and half-open ranges
``FilterTests``            metadata filters on scan and count: every rule, exact pages, cursors
``RequestTypeTests``       a wrong request type raises ContractError (sync and async)
``AsyncTests``             every async twin equals its sync operation
``IterAllTests``           ``iter_all`` at any page size
``DumpTests``              the memory file writer: header, gzip, stream, temporary file + rename, 0600
``LoadTests``              the reader: namespaces, re-homing, the embedding id travelling
``RejectTests``            every kind of bad file refused with MemoryFileError, target unchanged
``RollbackTests``          validate-first; one all-or-nothing write where declared, else rolled back
``PropertyTests``          hypothesis: paging, scan order, dump/load round trip bit for bit
``ConcurrencyTests``       threads and ``fork()``, as declared
``CapabilityTests``        the backend class's ``supports_*`` declarations agree with its methods
``WriteTests``             ``write``: upsert, patch (RFC 7386), delete, expectations, op ids; expiry
``WriteOpTests``           part of ``WriteTests``: upsert, delete and mixed ops, all or nothing; versions
``PatchTests``             part of ``WriteTests``: patch ops, metadata by RFC 7386, expiry set and cleared
``CompareAndSetTests``     part of ``WriteTests``: expected versions, ``None`` for an absent id
``OpIdTests``              part of ``WriteTests``: op ids replay, conflict, per namespace, across reopen
``ExpiryTests``            part of ``WriteTests``: ``expires_at`` hides from every read; ``sweep``
``PayloadTests``           records without a vector and blobs: every read, the memory file, writes, the past
``FeedbackTests``          ``feedback``: weights summed per id and namespace, live ids only, or refused
``WrittenTests``           write results carry the versions reads show and, with a feed, their seqs
=========================  ======================================================================

Capabilities where backends may differ are class attributes you declare; the suite never detects them:

* ``supports_threads`` (default False): one instance may be used from several threads at once. When
  False, the thread tests are skipped.
* ``supports_fork_safety`` (default False): an instance inherited through ``os.fork()`` keeps working
  in the child. When False, the child's first use must raise
  :class:`~coniti.errors.MemoryBackendError` (use after fork detected, never undefined).

Capabilities the engine relies on are declared on the backend class itself
(:attr:`~coniti.memory.MemoryBackend.supports_time_travel`, ``supports_event_feed``,
``supports_put_with_meta``); ``CapabilityTests`` checks each declaration against the methods present.

Needs pytest and hypothesis (the ``test`` extra, ``pip install 'coniti[test]'``): without either,
``import coniti.testing`` raises ImportError naming the missing package and the extra.
'''

from __future__ import annotations

try:
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401
except ImportError as exc:
    raise ImportError(
        f"coniti.testing needs pytest and hypothesis, and {exc.name or 'one of them'} is not "
        "installed: install the test extra, pip install 'coniti[test]'",
        name=exc.name,
    ) from exc

from coniti.testing.async_twins import AsyncTests
from coniti.testing.basics import BasicsTests
from coniti.testing.capabilities import CapabilityTests
from coniti.testing.clear import ClearTests
from coniti.testing.concurrency import ConcurrencyTests
from coniti.testing.copies import CopyTests
from coniti.testing.count import CountTests
from coniti.testing.cursors import CursorTests
from coniti.testing.delete import DeleteTests
from coniti.testing.feedback import FeedbackTests
from coniti.testing.filters import FilterTests
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.get import GetTests
from coniti.testing.iteration import IterAllTests
from coniti.testing.listing import NamespaceListingTests
from coniti.testing.memfile_dump import DumpTests
from coniti.testing.memfile_load import LoadTests, RollbackTests
from coniti.testing.memfile_reject import RejectTests
from coniti.testing.meta import MetaTests
from coniti.testing.namespaces import NamespaceTests
from coniti.testing.payloads import PayloadTests
from coniti.testing.properties import PropertyTests
from coniti.testing.put import PutTests
from coniti.testing.requests import RequestTypeTests
from coniti.testing.scan import ScanTests
from coniti.testing.write import (
    CompareAndSetTests,
    ExpiryTests,
    OpIdTests,
    PatchTests,
    WriteOpTests,
    WriteTests,
)
from coniti.testing.written import WrittenTests

__all__ = [
    "AsyncTests",
    "BackendFactory",
    "BackendFixtures",
    "BasicsTests",
    "CapabilityTests",
    "ClearTests",
    "CompareAndSetTests",
    "ConcurrencyTests",
    "CopyTests",
    "CountTests",
    "CursorTests",
    "DeleteTests",
    "DumpTests",
    "ExpiryTests",
    "FeedbackTests",
    "FilterTests",
    "GetTests",
    "IterAllTests",
    "LoadTests",
    "MemoryBackendTests",
    "MetaTests",
    "NamespaceListingTests",
    "NamespaceTests",
    "OpIdTests",
    "PatchTests",
    "PayloadTests",
    "PropertyTests",
    "PutTests",
    "RejectTests",
    "RequestTypeTests",
    "RollbackTests",
    "ScanTests",
    "WriteOpTests",
    "WriteTests",
    "WrittenTests",
]


class MemoryBackendTests(
    BasicsTests,
    PutTests,
    GetTests,
    DeleteTests,
    ScanTests,
    CursorTests,
    NamespaceTests,
    NamespaceListingTests,
    CopyTests,
    MetaTests,
    ClearTests,
    CountTests,
    FilterTests,
    RequestTypeTests,
    AsyncTests,
    IterAllTests,
    DumpTests,
    LoadTests,
    RejectTests,
    RollbackTests,
    PropertyTests,
    ConcurrencyTests,
    CapabilityTests,
    WriteTests,
    PayloadTests,
    FeedbackTests,
    WrittenTests,
):
    """Every conformance mixin. Subclass it with a ``backend_factory`` fixture (see the module doc)."""
