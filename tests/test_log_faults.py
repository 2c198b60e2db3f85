"""LogBackend under faults: a tiny map, a full disk, bit flips, stale readers, modes, long keys.

Anything that could crash the interpreter (reading a corrupt file, a file-size limit) runs in a
child process (tests/helpers_log.py), so that a segfault is a test failure, not a lost test run.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers_log import (
    assert_verified,
    count,
    lmdb_env,
    missing,
    put,
    rec,
    records_of,
    run_child,
    spawn,
    state_of,
)

from coniti.actor import TimeRange
from coniti.errors import DuplicateRecord
from coniti.impl.log import LogBackend
from coniti.memory import (
    CountRequest,
    DeleteRequest,
    GetRequest,
    MetaGetRequest,
    MetaSetRequest,
    ScanRequest,
)

SMALL_MAP = 64 * 1024


def data_file(path: str | Path) -> Path:
    """The LMDB data file of a store directory."""
    return Path(path) / "data.mdb"


# -- the map grows -----------------------------------------------------------------------------


def test_tiny_map_fills_and_grows_automatically(tmp_path: Path) -> None:
    """A store opened with a 64 KiB map takes 2 MiB of records in batches; nothing is lost."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        for b in range(16):
            put(store, [rec(f"r{b}-{i}", ts=float(b), dim=2048, dtype="float64") for i in range(8)])
        assert count(store) == 128
        assert lmdb_env(store).info()["map_size"] >= 2 * 1024 * 1024
        assert_verified(store)
    with LogBackend(path, map_size=SMALL_MAP) as store:
        assert count(store) == 128
        assert records_of(store)[-1] == rec("r15-7", ts=15.0, dim=2048, dtype="float64")


def test_one_call_larger_than_the_whole_map_grows_it(tmp_path: Path) -> None:
    """A single put of ~4 MiB into a 64 KiB map succeeds in one call (all records written)."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        batch = [rec(f"big{i}", ts=float(i), dim=8192, dtype="float64") for i in range(64)]
        assert put(store, batch) == 64
        assert store.head == 64
        assert records_of(store) == batch


def test_map_grown_by_another_process_is_adopted(tmp_path: Path) -> None:
    """While we hold a store with a small map, another process grows it; we then read and write."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        put(store, [rec("mine-1", 0.0)])
        before = lmdb_env(store).info()["map_size"]
        code, lines, err = run_child("grow", {"store": path, "n": 200, "dim": 2048})
        assert code == 0, err[-3000:]
        assert lines[0]["map_size"] > before
        assert count(store) == 201
        put(store, [rec("mine-2", 1.0)])
        assert store.head == 202
        assert_verified(store)


@pytest.mark.parametrize("handshake", [True, False], ids=["all-open-first", "opening-while-others-grow"])
def test_several_processes_grow_a_tiny_map_at_once(tmp_path: Path, handshake: bool) -> None:
    """3 processes write ~1.6 MiB each into a store with a 64 KiB map at the same time (all opened
    before the first write, or opening while the others already grow it), while we hold it open:
    every record of every process is there, and verify() is clean."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        procs = [
            spawn("grow", {"store": path, "n": 100, "dim": 2048, "map_size": SMALL_MAP,
                           "prefix": f"p{k}", "wait": handshake})
            for k in range(3)
        ]
        if handshake:
            for proc in procs:
                assert proc.stdout is not None
                assert json.loads(proc.stdout.readline()) == {"ready": True}
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
        assert count(store) == 300
        assert missing(store, [f"p{k}-{b}-{i}" for k in range(3) for b in range(10) for i in range(10)]) == []
        assert_verified(store)


def test_open_adopts_a_map_another_process_grows_during_the_open(tmp_path: Path) -> None:
    """Another process outgrows our map between LMDB's env open and our first transaction: the open
    adopts the new size and succeeds (seen with several processes growing a store at once)."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        put(store, [rec("mine", 0.0)])
    code, lines, err = run_child(
        "open-while-another-grows", {"store": path, "n": 200, "dim": 2048, "map_size": SMALL_MAP}
    )
    assert code == 0, err[-3000:]
    assert lines == [{"count": 201, "head": 201}]


def test_open_is_not_refused_when_another_process_commits_while_the_length_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process commits, growing the data file, between the open's reading of the file's
    length and of its meta pages (seen with several processes growing a store at once): the open
    takes the file for what it is, not for one truncated short of that commit."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        put(store, [rec("mine", 0.0)])
    real_pread = os.pread
    grown: list[int] = []

    def pread_after_another_commit(fd: int, n: int, offset: int) -> bytes:
        if not grown:
            size = os.path.getsize(data_file(path))
            code, _, err = run_child("grow", {"store": path, "n": 50, "dim": 2048})
            assert code == 0, err[-3000:]
            grown.append(os.path.getsize(data_file(path)) - size)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", pread_after_another_commit)
    with LogBackend(path, map_size=SMALL_MAP) as store:
        monkeypatch.undo()
        assert grown[0] > 0
        assert count(store) == 51
        assert_verified(store)


def test_verify_adopts_a_map_grown_by_another_process(tmp_path: Path) -> None:
    """After another process grew the map, our first call being verify(): it is clean."""
    path = str(tmp_path / "store")
    with LogBackend(path, map_size=SMALL_MAP) as store:
        put(store, [rec("mine", 0.0)])
        code, _, err = run_child("grow", {"store": path, "n": 200, "dim": 2048})
        assert code == 0, err[-3000:]
        report = store.verify()
        assert list(report.problems) == []
        assert report.events_checked == 201


def test_map_grows_while_other_threads_read(tmp_path: Path) -> None:
    """Readers in 2 threads (scans, gets) run while a 3rd thread's puts grow a 64 KiB map
    many times: no reader errs, every read is consistent, and the writer loses nothing."""
    path = str(tmp_path / "store")
    store = LogBackend(path, map_size=SMALL_MAP)
    put(store, [rec(f"seed{i}", ts=float(i)) for i in range(20)])
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                got = records_of(store)
                assert [r.id for r in got[:20]] == [f"seed{i}" for i in range(20)]
                assert len({r.id for r in got}) == len(got)
                assert (len(got) - 20) % 8 == 0, "a scan saw part of a put"
                assert missing(store, ["seed3", "seed17"]) == []
                reads[0] += 1
                time.sleep(0.002)  # let the writer have the GIL now and then
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for b in range(24):
            put(store, [rec(f"big{b}-{i}", ts=100.0 + b, dim=2048, dtype="float64") for i in range(8)])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert reads[0] > 0
    assert count(store) == 20 + 24 * 8
    assert lmdb_env(store).info()["map_size"] > 2 * 1024 * 1024
    assert_verified(store)
    store.close()


# -- the disk is full --------------------------------------------------------------------------


def _fill(path: str, n: int = 50) -> list[str]:
    with LogBackend(path) as store:
        for b in range(n // 10):
            put(store, [rec(f"early-{b}-{i}", ts=float(i)) for i in range(10)])
        store.set_meta(MetaSetRequest(key="k", value="before the full disk"))
    return [f"early-{b}-{i}" for b in range(n // 10) for i in range(10)]


def test_disk_full_write_fails_with_store_full_and_changes_nothing(tmp_path: Path) -> None:
    """With RLIMIT_FSIZE just above the data file, a 2 MiB put raises StoreFull in the child; the
    handle still reads, head is unchanged, and nothing of the failed call is in the store."""
    path = str(tmp_path / "store")
    early = _fill(path)
    code, lines, err = run_child(
        "fsize-writer",
        {"store": path, "data_file": "data.mdb", "margin": 8192, "n": 64, "dim": 4096,
         "check_ids": early[:3] + ["big-0"]},
    )
    assert code == 0, err[-3000:]
    out = lines[0]
    assert "written" not in out, "the put should not fit under the file-size limit"
    assert "StoreFull" in out["mro"] and "ConitiError" in out["mro"], out
    assert out["head_after"] == out["head_before"] == 51, out
    assert out["missing_after"] == ["big-0"], out


def test_the_same_handle_writes_again_once_space_returns(tmp_path: Path) -> None:
    """After a put failed with StoreFull, lifting the file-size limit lets the same handle (no
    reopen) write again, right after the earlier writes."""
    path = str(tmp_path / "store")
    _fill(path)
    code, lines, err = run_child(
        "fsize-writer",
        {"store": path, "data_file": "data.mdb", "margin": 8192, "n": 64, "dim": 4096, "check_ids": [],
         "retry": True},
    )
    assert code == 0, err[-3000:]
    out = lines[0]
    assert "StoreFull" in out["mro"], out
    assert out.get("head_after_space_returned") == 52, out
    with LogBackend(path) as store:
        assert store.head == 52
        assert missing(store, ["after-space-returned", "big-0"]) == ["big-0"]
        assert_verified(store)


def test_every_write_before_a_full_disk_survives_reopen(tmp_path: Path) -> None:
    """After the failed put, a fresh process finds every earlier write, verify clean, and writes again."""
    path = str(tmp_path / "store")
    early = _fill(path)
    code, _, err = run_child(
        "fsize-writer",
        {"store": path, "data_file": "data.mdb", "margin": 8192, "n": 64, "dim": 4096, "check_ids": []},
    )
    assert code == 0, err[-3000:]
    with LogBackend(path) as store:
        assert missing(store, early) == []
        assert missing(store, ["big-0"]) == ["big-0"]
        assert store.get_meta(MetaGetRequest(key="k")).value == "before the full disk"
        assert store.head == 51
        assert_verified(store)
        put(store, [rec("after", 99.0)])
        assert store.head == 52


# -- bit flips -----------------------------------------------------------------------------------

FLIP_NAMESPACES = [[], ["flip"]]
FLIP_KEYS = ["k"]
MARKER = "MARKER-0123456789-text"


@pytest.fixture(scope="module")
def flip_source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small closed store (records with a marker text, deletes, meta) and its exact state."""
    path = str(tmp_path_factory.mktemp("flip") / "store")
    with LogBackend(path) as store:
        for b in range(6):
            put(store, [rec(f"f{b}-{i}", ts=float(b * 10 + i), text=f"{MARKER}-{b}-{i}",
                            metadata={"b": b}, dtype="float64", dim=8)
                        for i in range(5)])
            put(store, [rec(f"g{b}", ts=float(b), ns=("flip",))])
        store.delete(DeleteRequest(ids=["f0-0", "f1-1"]))
        store.set_meta(MetaSetRequest(key="k", value={"v": 1}))
        state = state_of(store, [tuple(n) for n in FLIP_NAMESPACES], FLIP_KEYS)
        head = store.head
    return {"path": path, "state": state, "head": head}


def _flipped_copy(src: str, dst: Path, offsets: list[int], bit: int) -> Path:
    shutil.copytree(src, dst)
    data = bytearray(data_file(dst).read_bytes())
    for off in offsets:
        data[off] ^= 1 << bit
    data_file(dst).write_bytes(bytes(data))
    return dst


def _judge(out: dict[str, Any], source: dict[str, Any]) -> str:
    """'reported' (a coniti error or a verify problem) or 'intact'; raises on anything else."""
    where = out["store"]
    for key in ("open_error", "verify_error", "read_error", "close_error"):
        if key in out:
            assert "ConitiError" in out[key]["mro"], f"{where}: {key} is not a coniti error: {out[key]}"
    if "open_error" in out or "verify_error" in out:
        return "reported"
    if out["verify"]["problems"]:
        return "reported"
    assert "read_error" not in out, f"{where}: verify() was clean but reading failed: {out}"
    assert out["state"] == source["state"], f"{where}: verify() was clean but the data read back differs"
    assert out["head"] == source["head"]
    return "intact"


def _read_copies(copies: list[Path]) -> list[dict[str, Any]]:
    """Read every copy in one child process; a crash on a copy fails naming that copy."""
    code, lines, err = run_child(
        "read-all",
        {"stores": [str(c) for c in copies], "namespaces": FLIP_NAMESPACES, "meta_keys": FLIP_KEYS},
        timeout=120,
    )
    if code != 0:
        culprit = copies[len(lines)] if len(lines) < len(copies) else "?"
        raise AssertionError(f"the reader died (status {code}) on {culprit}: {err[-3000:]}")
    assert len(lines) == len(copies), err[-3000:]
    return lines


def _flip_each(source: dict[str, Any], needle: bytes, dst: Path, bit: int) -> list[str]:
    """One copy per place ``needle`` occurs in the data file, with one bit flipped there; judged."""
    raw = data_file(source["path"]).read_bytes()
    offsets = [m.start() for m in re.finditer(re.escape(needle), raw)]
    assert offsets, "needle not found in the data file"
    copies = [
        _flipped_copy(source["path"], dst / f"copy{n}", [off + len(needle) // 2], bit)
        for n, off in enumerate(offsets)
    ]
    return [_judge(out, source) for out in _read_copies(copies)]


def test_an_intact_copy_reads_back_identically(flip_source: dict[str, Any], tmp_path: Path) -> None:
    """Baseline for the flip tests: a byte-for-byte copy verifies clean and reads the same data."""
    copy = _flipped_copy(flip_source["path"], tmp_path / "copy", [], 0)
    assert [_judge(out, flip_source) for out in _read_copies([copy])] == ["intact"]


@pytest.mark.parametrize("bit", [0, 5])
def test_bit_flip_in_a_record_text_is_reported(
    flip_source: dict[str, Any], tmp_path: Path, bit: int
) -> None:
    """A bit flipped in a record's stored text: the live copy is reported by verify() or a coniti
    error; copies in LMDB's free pages change nothing that is read."""
    outcomes = _flip_each(flip_source, f"{MARKER}-3-2".encode(), tmp_path, bit)
    assert "reported" in outcomes, outcomes


def test_bit_flip_in_a_vector_is_reported(flip_source: dict[str, Any], tmp_path: Path) -> None:
    """A bit flipped in a record's stored float64 vector is reported, never read back as data."""
    vector = rec("f4-4", dtype="float64", dim=8).vector
    raw = data_file(flip_source["path"]).read_bytes()
    needle = vector.astype("<f8").tobytes()
    if needle not in raw:
        needle = vector.astype(">f8").tobytes()
    outcomes = _flip_each(flip_source, needle, tmp_path, 3)
    assert "reported" in outcomes, outcomes


def test_bit_flip_in_a_stored_record_id_is_reported(flip_source: dict[str, Any], tmp_path: Path) -> None:
    """A bit flipped in a record id, wherever it is stored (event, index key), is reported or
    harmless, never read back as another id."""
    outcomes = _flip_each(flip_source, b"f5-3", tmp_path, 1)
    assert "reported" in outcomes, outcomes


def test_random_bit_flips_never_crash_or_pass_as_different_data(
    flip_source: dict[str, Any], tmp_path: Path
) -> None:
    """120 copies, each with one random bit flipped anywhere in the data file: the reader never
    crashes or hangs; each copy is reported (coniti error or verify problem) or reads intact."""
    size = data_file(flip_source["path"]).stat().st_size
    rng = random.Random(1129)
    copies = [
        _flipped_copy(flip_source["path"], tmp_path / f"copy{n}", [rng.randrange(size)], rng.randrange(8))
        for n in range(120)
    ]
    outcomes = [_judge(out, flip_source) for out in _read_copies(copies)]
    assert len(outcomes) == 120


# -- stale readers, file modes, long keys ------------------------------------------------------


def test_stale_reader_slot_of_a_killed_process_is_cleared_at_open(tmp_path: Path) -> None:
    """A process killed inside a read transaction leaves a reader slot; the next open clears it."""
    path = str(tmp_path / "store")
    with LogBackend(path) as store:  # keeps the lock file in use, so LMDB does not reset it
        put(store, [rec("x", 0.0)])
        code, lines, err = run_child("hold-reader-and-die", {"store": path})
        assert code == -9, err[-3000:]
        dead = lines[0]["pid"]
        assert str(dead) in lines[0]["readers"]
        assert str(dead) in lmdb_env(store).readers()
        code, _, err = run_child("read-all", {"stores": [path], "namespaces": [[]], "meta_keys": []})
        assert code == 0, err[-3000:]
        deadline = time.monotonic() + 5
        while str(dead) in lmdb_env(store).readers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert str(dead) not in lmdb_env(store).readers()


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_store_directory_is_0700_and_files_0600(tmp_path: Path, umask: int) -> None:
    """Whatever the umask, a new store's directory is private (0700) and its files 0600."""
    path = tmp_path / "store"
    old = os.umask(umask)
    try:
        with LogBackend(str(path)) as store:
            put(store, [rec("x", 0.0)])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    files = list(path.iterdir())
    assert files
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


LONG_IDS = ["a" * 511, "a" * 512, "b" * 600 + "1", "b" * 600 + "2", "é" * 400, "z" * 5000]
LONG_NS = ("p" * 1000, "q" * 300)


def test_ids_longer_than_the_lmdb_key_limit_work(tmp_path: Path) -> None:
    """Ids of 511 .. 5000 bytes (and multi-byte) put, get, scan, count and delete like short ones;
    ids that share a 600-byte prefix stay distinct."""
    with LogBackend(str(tmp_path / "store")) as store:
        batch = [rec(rid, ts=float(i)) for i, rid in enumerate(LONG_IDS)]
        put(store, batch)
        assert store.get(GetRequest(ids=list(reversed(LONG_IDS)))).records == list(reversed(batch))
        assert records_of(store) == batch
        assert count(store) == len(LONG_IDS)
        assert store.delete(DeleteRequest(ids=[LONG_IDS[2]])).deleted == [LONG_IDS[2]]
        assert missing(store, LONG_IDS) == [LONG_IDS[2]]
        with pytest.raises(DuplicateRecord):
            put(store, [rec(LONG_IDS[3], 0.0)])
        assert_verified(store)


def test_long_namespaces_and_meta_keys_work_and_stay_isolated(tmp_path: Path) -> None:
    """A namespace of 1300 bytes and a 1000-byte meta key behave like short ones, across reopen."""
    path = str(tmp_path / "store")
    other = ("p" * 1000, "q" * 299)
    key = "k" * 1000
    with LogBackend(path) as store:
        put(store, [rec("x", 1.0, ns=LONG_NS), rec("y", 2.0, ns=other)])
        store.set_meta(MetaSetRequest(key=key, value=[1, 2], namespace=LONG_NS))
    with LogBackend(path) as store:
        assert [r.id for r in records_of(store, LONG_NS)] == ["x"]
        assert [r.id for r in records_of(store, other)] == ["y"]
        assert store.count(CountRequest(namespace=LONG_NS, time_range=TimeRange(start=0.0, end=1.5))).count == 1
        assert store.get_meta(MetaGetRequest(key=key, namespace=LONG_NS)).value == [1, 2]
        assert store.get_meta(MetaGetRequest(key=key, namespace=other)).value is None
        page = store.scan(ScanRequest(namespace=LONG_NS, limit=1))
        assert page.next_cursor is None and [r.id for r in page.records] == ["x"]
        assert_verified(store)
