"""A damaged or hostile store never crashes the process and never answers wrongly.

Each test that reads a damaged file does it in a child interpreter (a SIGBUS there fails the test
instead of killing the run). The campaign tests drive ``tools/faultcheck_store.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import lmdb
import pytest
from helpers_log import put, rec, rewrite_db

from coniti.errors import StoreCorrupted, StoreError
from coniti.impl.log import LogBackend
from coniti.memory import GetRequest, PutRequest, ScanRequest

ROOT = Path(__file__).resolve().parent.parent


def _faultcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("faultcheck_store", ROOT / "tools" / "faultcheck_store.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child(code: str, *, user: int | None = None, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """Run ``code`` in a fresh interpreter (as uid/gid ``user`` if given); it prints one JSON object."""
    prelude = "import json, os, sys\n"
    if user is not None:  # the interpreter's own files may be closed to that user: import first
        prelude += "import coniti, coniti.impl.log, coniti.log.checks, coniti.memory, lmdb.verify\n"
        prelude += f"os.setgroups([]); os.setgid({user}); os.setuid({user})\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), proc.stderr


_OPEN_AND_READ = """
from coniti.impl.log import LogBackend
from coniti.memory import GetRequest, ScanRequest
from coniti.errors import ConitiError
try:
    with LogBackend(sys.argv[1] if len(sys.argv) > 1 else {path!r}, read_only={ro}) as s:
        out = {{"records": [r.note.id for r in s.scan(ScanRequest(limit=1000)).records]}}
        out["verify"] = list(s.verify().problems)
except ConitiError as exc:
    out = {{"error": type(exc).__name__, "message": str(exc)}}
print(json.dumps(out))
"""


def _open_and_read(path: Path, *, read_only: bool = False, user: int | None = None) -> tuple[int, dict[str, Any], str]:
    return _child(_OPEN_AND_READ.format(path=str(path), ro=read_only), user=user)


def _small_store(path: Path, n: int = 20) -> None:
    with LogBackend(path) as s:
        put(s, [rec(f"r{i}", float(i), text=f"text {i}") for i in range(n // 2)])
        put(s, [rec(f"r{i}", float(i), text=f"text {i}") for i in range(n // 2, n)])


# -- item 1: reads check what they return --------------------------------------------------------


def test_forty_random_bit_flips_give_no_crash_and_no_silent_wrong_read(tmp_path: Path) -> None:
    """40 copies of a 400-record store, each with one random bit of data.mdb flipped: every read
    path (get, scan, events, history, get_meta) raises StoreCorrupted or answers exactly as the
    intact store; none crashes the child, raises a foreign error or answers wrongly."""
    fc = _faultcheck()
    source, truth = fc.prepare(str(tmp_path), 400, 32)
    result = fc.run_class("bitflip", 40, source, truth, str(tmp_path), seed=3)
    assert result["failures"] == [], json.dumps(result["failures"][:3], indent=1)[:3000]


def test_twenty_random_byte_overwrites_give_no_silent_wrong_read(tmp_path: Path) -> None:
    """20 copies with one byte of data.mdb overwritten: no crash, no foreign error, no wrong answer."""
    fc = _faultcheck()
    source, truth = fc.prepare(str(tmp_path), 400, 32)
    result = fc.run_class("byte", 20, source, truth, str(tmp_path), seed=4)
    assert result["failures"] == [], json.dumps(result["failures"][:3], indent=1)[:3000]


def _frame_of(path: Path, seq: int) -> bytes:
    env = lmdb.open(str(path), max_dbs=16, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return bytes(txn.get(struct.pack(">Q", seq), db=env.open_db(b"log", txn=txn, create=False)))
    finally:
        env.close()


_rewrite = rewrite_db


def _flip_in_frame(path: Path, seq: int, needle: bytes) -> None:
    frame = bytearray(_frame_of(path, seq))
    at = bytes(frame).rindex(needle)
    frame[at] ^= 0x01
    _rewrite(path, b"log", lambda txn, db: txn.put(struct.pack(">Q", seq), bytes(frame), db=db))


def test_get_of_a_record_with_altered_text_raises_store_corrupted_naming_it(tmp_path: Path) -> None:
    """A get whose stored text was altered raises StoreCorrupted naming the namespace and the id."""
    _small_store(tmp_path / "s")
    _flip_in_frame(tmp_path / "s", 4, b"text 3")
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"r3"):
        s.get(GetRequest(ids=["r3"]))


def test_scan_over_a_record_with_altered_text_raises_store_corrupted(tmp_path: Path) -> None:
    """A scan reaching a record whose text was altered raises StoreCorrupted naming its id."""
    _small_store(tmp_path / "s")
    _flip_in_frame(tmp_path / "s", 4, b"text 3")
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"r3"):
        s.scan(ScanRequest(limit=100))


def test_events_with_an_altered_actor_raise_store_corrupted(tmp_path: Path) -> None:
    """An envelope altered in place (its actor) breaks the hash chain: events() raises naming it."""
    with LogBackend(tmp_path / "s", actor="alice") as s:
        put(s, [rec(f"r{i}", float(i)) for i in range(3)])
    _flip_in_frame(tmp_path / "s", 2, b"alice")
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"event 2"):
        list(s.events())


def test_history_with_an_altered_recorded_time_raises_store_corrupted(tmp_path: Path) -> None:
    """history() checks each event it returns against the chain: an altered envelope raises."""
    _small_store(tmp_path / "s")
    frame = bytearray(_frame_of(tmp_path / "s", 4))
    at = bytes(frame).index(b"\xa1t\xcb") + 3  # the float64 of field t
    frame[at + 7] ^= 0x01
    _rewrite(tmp_path / "s", b"log", lambda txn, db: txn.put(struct.pack(">Q", 4), bytes(frame), db=db))
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"event 4"):
        s.history("r3")


def test_get_through_an_index_entry_naming_another_event_raises(tmp_path: Path) -> None:
    """A ver entry whose sequence number was altered to name another record's put is caught: get
    raises StoreCorrupted instead of returning the other record's content under this id."""
    _small_store(tmp_path / "s")

    def repoint(txn: Any, db: Any) -> None:
        cur = txn.cursor(db=db)
        for key, value in list(cur):
            if key[4:7] == b"\x00\x00\x02" and key[7:9] == b"r3":
                txn.delete(key, db=db)
                inv = struct.pack(">Q", 2**64 - 1 - 6)  # event 6 is the put of r5
                txn.put(key[:-8] + inv, value, db=db)

    _rewrite(tmp_path / "s", b"ver", repoint)
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"r3"):
        s.get(GetRequest(ids=["r3"]))


def _expiring_store(path: Path) -> None:
    records = [rec("soon", 1.0).model_copy(update={"expires_at": 4.0e9}), rec("plain", 2.0)]
    with LogBackend(path) as s:
        s.put(PutRequest(records=records))


def _edit_ver_value(path: Path, record_id: bytes, edit: Any) -> None:
    def rewrite(txn: Any, db: Any) -> None:
        for key, value in list(txn.cursor(db=db)):
            if key[7 : 7 + len(record_id)] == record_id:
                txn.put(key, edit(bytes(value)), db=db)

    _rewrite(path, b"ver", rewrite)


def test_get_of_a_version_whose_expiry_key_was_altered_raises(tmp_path: Path) -> None:
    """A ver value whose expiry key X (after E T) was altered no longer matches the put's x: get
    raises StoreCorrupted naming the record instead of returning another expiry."""
    _expiring_store(tmp_path / "s")
    _edit_ver_value(tmp_path / "s", b"soon", lambda v: v[:-1] + bytes([v[-1] ^ 0x01]))
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"soon"):
        s.get(GetRequest(ids=["soon"]))


def test_get_of_a_version_whose_expiry_key_was_dropped_raises(tmp_path: Path) -> None:
    """A ver value that lost its expiry key (24 -> 16 bytes) would make an expiring version read as
    never expiring: get raises StoreCorrupted naming the record."""
    _expiring_store(tmp_path / "s")
    _edit_ver_value(tmp_path / "s", b"soon", lambda v: v[:16])
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted, match=r"soon"):
        s.get(GetRequest(ids=["soon"]))


def test_get_and_scan_return_the_checked_version_and_expiry(tmp_path: Path) -> None:
    """An intact expiring store reads back each row's version and expiry through the checked reads."""
    _expiring_store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as s:
        got = {r.id: r for r in s.get(GetRequest(ids=["soon", "plain"])).records}
        scanned = {r.id: r for r in s.scan(ScanRequest(limit=10)).records}
    assert got["soon"].expires_at == scanned["soon"].expires_at == 4.0e9
    assert got["plain"].expires_at is None and scanned["plain"].expires_at is None


# -- item 4: every decoding error of a damaged store is StoreCorrupted ---------------------------


def test_scan_over_a_malformed_time_key_raises_store_corrupted(tmp_path: Path) -> None:
    """A time index key of the wrong length makes scan raise StoreCorrupted, not struct.error."""
    _small_store(tmp_path / "s")

    def shorten(txn: Any, db: Any) -> None:
        key, value = next(iter(txn.cursor(db=db)))
        txn.delete(key, db=db)
        txn.put(bytes(key[:13]), value, db=db)

    _rewrite(tmp_path / "s", b"time", shorten)
    with LogBackend(tmp_path / "s") as s, pytest.raises(StoreCorrupted):
        s.scan(ScanRequest(limit=100))


# -- item 2: truncation ----------------------------------------------------------------------------


def test_truncated_data_file_is_refused_at_open_without_a_crash(tmp_path: Path) -> None:
    """data.mdb cut short of what its meta page names: opening raises StoreCorrupted saying so
    (the child survives; before, LMDB died of SIGBUS)."""
    _small_store(tmp_path / "s", 400)
    data = tmp_path / "s" / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    code, out, err = _open_and_read(tmp_path / "s")
    assert code == 0, err[-2000:]
    assert out.get("error") == "StoreCorrupted", out
    assert "truncated" in out["message"], out


def test_fifty_truncations_never_crash(tmp_path: Path) -> None:
    """50 copies cut to random lengths: each is refused (or reported), none crashes a child."""
    fc = _faultcheck()
    source, truth = fc.prepare(str(tmp_path), 200, 8)
    result = fc.run_class("truncate", 50, source, truth, str(tmp_path), seed=5)
    assert result["failures"] == [], json.dumps(result["failures"][:3], indent=1)[:3000]


def test_verify_reports_a_data_file_truncated_while_open(tmp_path: Path) -> None:
    """A store whose file is cut while it is open: verify() reports the truncation, no crash."""
    _small_store(tmp_path / "s", 400)
    code, out, err = _child(f"""
        from coniti.impl.log import LogBackend
        s = LogBackend({str(tmp_path / "s")!r})
        data = os.path.join(s.path, "data.mdb")
        os.truncate(data, os.path.getsize(data) // 2)
        print(json.dumps({{"problems": list(s.verify().problems)}}))
    """)
    assert code == 0, err[-2000:]
    assert any("truncated" in p for p in out["problems"]), out


# -- item 3: rollback --------------------------------------------------------------------------------


def _roll_back_meta(path: Path) -> None:
    fc = _faultcheck()
    fc.fault_rollback(str(path), __import__("random").Random(1))


def test_a_rolled_back_meta_page_is_refused_at_open(tmp_path: Path) -> None:
    """One bit of LMDB's older meta page set so that it reads as the newest: the store lost its last
    acknowledged commit, and opening it raises StoreCorrupted saying so."""
    _small_store(tmp_path / "s")
    _roll_back_meta(tmp_path / "s")
    code, out, err = _open_and_read(tmp_path / "s")
    assert code == 0, err[-2000:]
    assert out.get("error") == "StoreCorrupted", out
    assert "acknowledged" in out["message"], out


def test_a_rolled_back_meta_page_is_refused_by_a_read_only_open(tmp_path: Path) -> None:
    """A read-only open detects the lost commit too."""
    _small_store(tmp_path / "s")
    _roll_back_meta(tmp_path / "s")
    code, out, err = _open_and_read(tmp_path / "s", read_only=True)
    assert code == 0, err[-2000:]
    assert out.get("error") == "StoreCorrupted", out


def test_verify_reports_a_head_witness_ahead_of_the_store(tmp_path: Path) -> None:
    """verify() reports lost commits when the witness names an event beyond the head (what a
    rollback under an open handle leaves; LMDB itself keeps serving the newest state while its lock
    file is live, so the open-time check cannot see it)."""
    from coniti.log import guard

    _small_store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as s:
        ahead = guard.Witness(bytes.fromhex(s.store_id), s.head + 1, bytes(32))
        fd = guard.open_witness(s.path)
        try:
            guard.write_witness(fd, ahead)
        finally:
            os.close(fd)
        problems = list(s.verify().problems)
    assert any("acknowledged" in p for p in problems), problems


def test_a_clean_store_reopens_without_alarm_after_many_commits(tmp_path: Path) -> None:
    """The head witness never alarms on a healthy store: 30 commits, reopen, verify clean."""
    for i in range(3):
        with LogBackend(tmp_path / "s") as s:
            for j in range(10):
                put(s, [rec(f"r{i}-{j}", float(j))])
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert list(s.verify().problems) == []
        assert s.head == 30


def test_a_witness_behind_the_head_is_no_alarm(tmp_path: Path) -> None:
    """A witness naming an older event (its write lost in a crash) opens and verifies clean."""
    from coniti.log import guard

    _small_store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as s:
        first = next(iter(s.events()))
        behind = guard.Witness(bytes.fromhex(s.store_id), 1, bytes.fromhex(first.hash))
    fd = guard.open_witness(str(tmp_path / "s"))
    try:
        guard.write_witness(fd, behind)
    finally:
        os.close(fd)
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert list(s.verify().problems) == []


def test_a_nosync_store_names_its_head_in_the_witness_only_once_synced(tmp_path: Path) -> None:
    """With durability="nosync" the witness moves at sync() (a commit not yet flushed may be lost
    by an OS crash, so naming it earlier could raise a false alarm)."""
    from coniti.log import guard

    _small_store(tmp_path / "s")
    with LogBackend(tmp_path / "s", durability="nosync") as s:
        put(s, [rec("late", 1.0)])
        witness = guard.Witness.read(s.path)
        assert witness is not None and witness.seq == s.head - 1
        s.sync()
        witness = guard.Witness.read(s.path)
        assert witness is not None and witness.seq == s.head


# -- item 7: hostile store directories ----------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o775, 0o777])
def test_a_group_or_world_writable_store_directory_is_refused(tmp_path: Path, mode: int) -> None:
    """A store directory others may write is refused at open, with the chmod that fixes it."""
    _small_store(tmp_path / "s")
    os.chmod(tmp_path / "s", mode)
    with pytest.raises(StoreError, match=r"chmod 700"):
        LogBackend(tmp_path / "s")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_store_directory_owned_by_another_user_is_refused_for_writing(tmp_path: Path) -> None:
    """A writable open of a directory owned by another user is refused, naming the owner."""
    _small_store(tmp_path / "s")
    os.chown(tmp_path / "s", 65534, 65534)
    with pytest.raises(StoreError, match=r"owned by"):
        LogBackend(tmp_path / "s")


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """lock.mdb replaced by a symlink: the open is refused and the link's target keeps its bytes."""
    _small_store(tmp_path / "s")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "s" / "lock.mdb").unlink()
    (tmp_path / "s" / "lock.mdb").symlink_to(victim)
    with pytest.raises(StoreError, match=r"symbolic link"):
        LogBackend(tmp_path / "s")
    assert victim.read_bytes() == b"precious"


def test_a_symlinked_data_file_is_refused(tmp_path: Path) -> None:
    """data.mdb replaced by a symlink (to another store's file) is refused."""
    _small_store(tmp_path / "s")
    _small_store(tmp_path / "other", 4)
    (tmp_path / "s" / "data.mdb").unlink()
    (tmp_path / "s" / "data.mdb").symlink_to(tmp_path / "other" / "data.mdb")
    with pytest.raises(StoreError, match=r"symbolic link"):
        LogBackend(tmp_path / "s", read_only=True)


def test_a_data_file_swapped_in_from_another_store_is_refused(tmp_path: Path) -> None:
    """data.mdb copied over from another store: the head witness names another store, refused."""
    _small_store(tmp_path / "s")
    _small_store(tmp_path / "other", 4)
    shutil.copyfile(tmp_path / "other" / "data.mdb", tmp_path / "s" / "data.mdb")
    with pytest.raises(StoreCorrupted, match=r"another store"):
        LogBackend(tmp_path / "s")


def test_parent_directories_created_for_a_new_store_are_private(tmp_path: Path) -> None:
    """Every directory created on the way to a new store is 0700."""
    os.umask(0o022)
    with LogBackend(tmp_path / "a" / "b" / "store"):
        pass
    for d in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "store"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_non_empty_directory_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    """Opening for writing a non-empty directory that holds no store writes nothing into it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match=r"not empty"):
        LogBackend(home)
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]


# -- item 8: reading a store you may not write -----------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_a_user_who_may_only_read_a_store_can_read_it(tmp_path: Path) -> None:
    """A store owned by another user, readable but not writable by this one (lock file included):
    a read-only open reads every record and verifies clean."""
    shared = Path(tempfile.mkdtemp(prefix="coniti-shared-"))  # tmp_path's parents are root-only
    try:
        _read_as_nobody(shared)
    finally:
        shutil.rmtree(shared)


def _read_as_nobody(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    _small_store(tmp_path / "s")
    os.chmod(tmp_path / "s", 0o755)
    for name in ("data.mdb", "lock.mdb"):
        os.chmod(tmp_path / "s" / name, 0o644)
    for name in os.listdir(tmp_path / "s"):
        if not name.endswith(".mdb"):
            os.chmod(tmp_path / "s" / name, 0o644)
    code, out, err = _open_and_read(tmp_path / "s", read_only=True, user=65534)
    assert code == 0, err[-2000:]
    assert out.get("records") == [f"r{i}" for i in range(20)], out
    assert out.get("verify") == [], out


# -- small ones ------------------------------------------------------------------------------------


def test_a_store_killed_during_creation_reads_as_empty_read_only(tmp_path: Path) -> None:
    """An LMDB environment with nothing committed yet (a creation killed before its first commit)
    opens read-only as the empty store."""
    (tmp_path / "s").mkdir(mode=0o700)
    env = lmdb.open(str(tmp_path / "s"), max_dbs=16, mode=0o600)
    env.close()
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert s.head == 0
        assert s.get(GetRequest(ids=["x"])).missing == ["x"]
        assert s.scan(ScanRequest()).records == []


def test_cli_add_into_a_non_empty_directory_reports_the_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`coniti add --store DIR` into a user's non-empty directory exits 1 with the library's message
    and leaves the directory as it was."""
    from cli_support import Cli

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "notes.txt").write_text("mine")
    result = Cli(home, capsys, monkeypatch)("add", "a note", "--id", "n1")
    assert result.code == 1 and "not empty" in result.err, result
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]


def test_cli_read_of_a_world_writable_store_says_how_to_fix_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI read of a world-writable store directory exits 1 naming the chmod that fixes it."""
    from cli_support import Cli

    _small_store(tmp_path / "s")
    os.chmod(tmp_path / "s", 0o777)
    result = Cli(tmp_path / "s", capsys, monkeypatch)("ls")
    assert result.code == 1 and f"chmod 700 {tmp_path / 's'}" in result.err, result
