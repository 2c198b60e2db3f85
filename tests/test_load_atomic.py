"""load into a LogBackend is one transaction: a process killed (SIGKILL) or interrupted (SIGINT) in
the middle of writing, or a write the disk refuses, leaves no record and no event, and a retry
succeeds. The kill lands deterministically: the child announces it is inside the transaction."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coniti.errors import MemoryFileError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.testing.helpers import put, record

N = 1200  # three batches of at most 500

CHILD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the test runs in the background
from coniti import memfile
from coniti.impl.log import LogBackend

inner = memfile._Batches.__iter__

def slow(self):
    for i, batch in enumerate(inner(self)):
        yield batch
        if i == 1:  # two batches written inside the transaction
            sys.stdout.write("MIDWAY\\n")
            sys.stdout.flush()
            time.sleep(60)

memfile._Batches.__iter__ = slow
store = LogBackend(sys.argv[1])
store.load(sys.argv[2])
"""


@pytest.fixture
def memfile_path(tmp_path: Path) -> Path:
    source = InMemoryBackend()
    put(source, *[record(f"r{i}", float(i), namespace=("loaded",), embedding_id="e") for i in range(N)])
    path = tmp_path / "m.jsonl"
    source.dump(path, ("loaded",))
    return path


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with LogBackend(path) as store:
        put(store, record("kept", 1.0))
    return path


def _interrupt_midway(store: Path, file: Path, sig: int) -> int:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(store), str(file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "MIDWAY"
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    return proc.returncode


def _loaded(store: LogBackend) -> int:
    return store.count(store.count_request(None, ("loaded",))).count


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_load_interrupted_midway_leaves_nothing(store_path: Path, memfile_path: Path, sig: int) -> None:
    """A load killed or Ctrl-C'd after two of its three batches were written (inside the
    transaction) leaves no record and no event; the store verifies clean."""
    code = _interrupt_midway(store_path, memfile_path, sig)
    assert code != 0
    with LogBackend(store_path) as store:
        assert _loaded(store) == 0 and store.head == 1
        assert store.verify().ok


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_retry_after_an_interrupted_load_succeeds(store_path: Path, memfile_path: Path, sig: int) -> None:
    """After a killed or interrupted load, loading the same file again succeeds with every record."""
    _interrupt_midway(store_path, memfile_path, sig)
    with LogBackend(store_path) as store:
        assert store.load(memfile_path) == N
        assert _loaded(store) == N


def test_load_refused_by_the_disk_leaves_no_event(store_path: Path, memfile_path: Path) -> None:
    """A load the disk cannot hold (the file-size limit) raises MemoryFileError and leaves no record
    and no event in the history: no put, no delete of a rollback, none of the rejected content."""
    import resource

    with LogBackend(store_path) as store:
        size = (store_path / "data.mdb").stat().st_size
        old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 64 * 1024, old_limit[1]))
        try:
            with pytest.raises(MemoryFileError, match="nothing was written"):
                store.load(memfile_path)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
            signal.signal(signal.SIGXFSZ, old_handler)
        assert store.head == 1 and [e.kind for e in store.events()] == ["put"]
        assert _loaded(store) == 0
