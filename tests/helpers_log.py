"""Helpers shared by the LogBackend durability tests (crash, multi-process, faults, stateful).

A plain module, not a conftest: tests import it, and child processes run it as a script
(``python tests/helpers_log.py <command> '<json args>'``) so that each child is a fresh interpreter
with its own LMDB environment. Children write one JSON object per line on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from coniti.actor import Note
from coniti.memory import (
    CountRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    PutRequest,
)

HERE = Path(__file__).resolve()


def rec(
    rid: str,
    ts: float = 0.0,
    ns: Sequence[str] = (),
    *,
    text: str | None = None,
    dim: int = 4,
    dtype: str = "float32",
    metadata: dict[str, Any] | None = None,
    embedding_id: str | None = None,
) -> MemoryRecord:
    """A record whose vector is derived from its id (so equal ids give equal vectors)."""
    seed = sum(rid.encode()) + len(rid)
    vector = np.random.default_rng(seed).standard_normal(dim).astype(dtype)
    return MemoryRecord(
        note=Note(id=rid, text=text if text is not None else f"note {rid[:60]}", timestamp=ts,
                  metadata=metadata or {}),
        vector=vector,
        embedding_id=embedding_id,
        namespace=tuple(ns),
    )


def rewrite_db(path: Path, db: bytes, edit: Any) -> None:
    """Apply ``edit(txn, db handle)`` to sub-database ``db`` of a closed store, bypassing coniti (to
    plant damage)."""
    import lmdb

    env = lmdb.open(str(path), max_dbs=16)
    try:
        with env.begin(write=True) as txn:
            edit(txn, env.open_db(db, txn=txn, create=False))
    finally:
        env.close()


def db_entries(path: Path, db: bytes) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` of sub-database ``db`` of a closed store, read bypassing coniti; none
    for a sub-database the store does not hold (``tree`` in a store of a layout before 6)."""
    import lmdb

    env = lmdb.open(str(path), max_dbs=16, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            try:
                handle = env.open_db(db, txn=txn, create=False)
            except lmdb.NotFoundError:
                if db != b"tree":
                    raise
                return []
            return [(bytes(k), bytes(v)) for k, v in txn.cursor(db=handle)]
    finally:
        env.close()


def unpack_store(archive: Path, into: Path) -> Path:
    """The store ``store/`` of the fixture ``archive`` (a ``.tar.gz``), unpacked into ``into`` with
    the private mode a store directory needs."""
    import tarfile

    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    path = into / "store"
    path.chmod(0o700)
    return path


def to_layout_5(path: Path) -> None:
    """Turn a closed store of the current layout (6) into the layout-5 store the previous coniti
    wrote: the same entries without the Merkle tree's table, sys/format 5."""
    import struct

    rewrite_db(path, b"tree", lambda txn, db: txn.drop(db, delete=True))
    rewrite_db(path, b"sys", lambda txn, db: txn.put(b"format", struct.pack(">I", 5), db=db))


def to_layout_4(path: Path) -> None:
    """Turn a closed store of the current layout (6) into the layout-4 store the coniti before
    layout 5 wrote: :func:`to_layout_5`, then the same entries, each payload CRC and seal computed
    with zlib's CRC-32 instead of CRC-32C (each CRC-32C checked on the way), sys/format 4."""
    import struct
    import zlib

    import crc32c

    from coniti.log.codec import split_frame
    from coniti.log.keys import seq_key

    to_layout_5(path)
    frames = dict(db_entries(path, b"log"))
    for name in (b"ver", b"tver", b"time", b"cnt", b"exv"):
        def reseal(txn: Any, db: Any, name: bytes = name) -> None:
            seed = (crc32c.crc32c(name), zlib.crc32(name)) if name in (b"ver", b"tver", b"time") else (0, 0)
            for key, value in list(txn.cursor(db=db)):
                key, value = bytes(key), bytes(value)
                if not value:
                    continue  # an expiry marker
                body = value[:-4]
                assert struct.unpack(">I", value[-4:])[0] == crc32c.crc32c(body, crc32c.crc32c(key, seed[0]))
                if seed[0]:
                    seq = struct.unpack(">Q", key[-8:])[0]
                    payload = split_frame(frames[seq_key(2**64 - 1 - seq if name == b"ver" else seq)])[2]
                    assert struct.unpack(">I", body[-4:])[0] == crc32c.crc32c(payload)
                    body = body[:-4] + struct.pack(">I", zlib.crc32(payload))
                txn.put(key, body + struct.pack(">I", zlib.crc32(body, zlib.crc32(key, seed[1]))), db=db)

        rewrite_db(path, name, reseal)
    rewrite_db(path, b"sys", lambda txn, db: txn.put(b"format", struct.pack(">I", 4), db=db))


def to_layout_3(path: Path) -> None:
    """Turn a closed store of the current layout into the layout-3 store coniti wrote before
    layout 4: :func:`to_layout_4`, then ver, tver and time values without their payload CRC and
    seal, sys/format 3."""
    import struct
    import zlib

    to_layout_4(path)
    for name in (b"ver", b"tver", b"time"):
        seed = zlib.crc32(name)

        def strip(txn: Any, db: Any, seed: int = seed) -> None:
            for key, value in list(txn.cursor(db=db)):
                body = bytes(value[:-4])
                assert struct.unpack(">I", value[-4:])[0] == zlib.crc32(body, zlib.crc32(bytes(key), seed))
                txn.put(key, body[:-4], db=db)

        rewrite_db(path, name, strip)
    rewrite_db(path, b"sys", lambda txn, db: txn.put(b"format", struct.pack(">I", 3), db=db))


def put(backend: MemoryBackend, records: Iterable[MemoryRecord]) -> int:
    return backend.put(PutRequest(records=list(records))).written


def records_of(backend: MemoryBackend, ns: Sequence[str] = ()) -> list[MemoryRecord]:
    return list(backend.iter_all(namespace=ns, page_size=1000))


def state_of(
    backend: MemoryBackend, namespaces: Iterable[Sequence[str]], meta_keys: Iterable[str] = ()
) -> dict[str, Any]:
    """Every record (as dicts) and the given metadata of each namespace: comparable with ``==``."""
    keys = list(meta_keys)
    return {
        repr(tuple(ns)): {
            "records": [r.to_dict() for r in records_of(backend, ns)],
            "meta": {k: backend.get_meta(MetaGetRequest(key=k, namespace=ns)).value for k in keys},
        }
        for ns in namespaces
    }


def count(backend: MemoryBackend, ns: Sequence[str] = ()) -> int:
    return backend.count(CountRequest(namespace=ns)).count


def missing(backend: MemoryBackend, ids: list[str], ns: Sequence[str] = ()) -> list[str]:
    return backend.get(GetRequest(ids=ids, namespace=ns)).missing


def assert_verified(store: Any) -> Any:
    """``verify()`` is clean and the log is gap-free up to ``store.head``; returns the report."""
    report = store.verify()
    assert list(report.problems) == [], f"verify() found problems: {list(report.problems)[:5]}"
    assert report.events_checked == report.head_seq == store.head, (
        f"events_checked {report.events_checked}, head_seq {report.head_seq}, head {store.head}"
    )
    return report


# -- child processes ---------------------------------------------------------------------------


def spawn(command: str, args: dict[str, Any], **popen: Any) -> subprocess.Popen[str]:
    """Start ``python tests/helpers_log.py command args`` with text pipes."""
    return subprocess.Popen(
        [sys.executable, str(HERE), command, json.dumps(args)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,
    )


def run_child(command: str, args: dict[str, Any], timeout: float = 60) -> tuple[int, list[Any], str]:
    """Run a child to completion: (return code, its JSON lines, its stderr)."""
    proc = spawn(command, args)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"child {command} hung for {timeout}s; stderr: {err[-2000:]}") from None
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return proc.returncode, lines, err


def _say(obj: Any) -> None:
    os.write(1, (json.dumps(obj) + "\n").encode())


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "error": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "module": type(exc).__module__,
        "message": str(exc)[:500],
    }


def _open(path: str, **kwargs: Any) -> Any:
    from coniti.impl.log import LogBackend

    return LogBackend(path, **kwargs)


def child_mp_writer(a: dict[str, Any]) -> None:
    """Put ``n`` records ``w<k>-<i>``: the first ``single`` one per call, the rest in batches."""
    store = _open(a["store"])
    ns = tuple(a["ns"])
    w, n, single, batch = a["writer"], a["n"], a["single"], a["batch"]
    _say({"ready": True})
    sys.stdin.readline()
    started = time.monotonic()
    i = 0
    while i < n:
        size = 1 if i < single else min(batch, n - i)
        put(store, [rec(f"w{w}-{k:05d}", ts=float(k), ns=ns, metadata={"w": w, "k": k})
                    for k in range(i, i + size)])
        i += size
    store.close()
    _say({"done": True, "seconds": time.monotonic() - started})


def child_mp_reader(a: dict[str, Any]) -> None:
    """Poll count and head until count reaches ``target``; report every regression seen. Once,
    halfway, run verify() while the writers are still writing."""
    store = _open(a["store"])
    ns = tuple(a["ns"])
    _say({"ready": True})
    sys.stdin.readline()
    deadline = time.monotonic() + a["timeout"]
    last_count = last_head = -1
    seen: set[int] = set()
    polls = 0
    regressions: list[str] = []
    verified: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        c = count(store, ns)
        h = store.head
        polls += 1
        seen.add(c)
        if c < last_count:
            regressions.append(f"count went from {last_count} to {c}")
        if h < last_head:
            regressions.append(f"head went from {last_head} to {h}")
        last_count, last_head = c, h
        if verified is None and c >= a["target"] // 2:
            report = store.verify()
            verified = {"problems": [str(p) for p in report.problems][:5],
                        "events_checked": report.events_checked, "head_seq": report.head_seq,
                        "count_before": c}
        if c >= a["target"]:
            break
    store.close()
    _say({"polls": polls, "distinct": len(seen), "last": last_count, "regressions": regressions[:20],
          "verified_mid_run": verified})


def child_fsize_writer(a: dict[str, Any]) -> None:
    """Cap file size at the data file's size + ``margin`` bytes, try a put that cannot fit, read;
    with ``retry``, then lift the cap and put one small record through the same handle."""
    import resource

    store = _open(a["store"], **a.get("open", {}))
    data_size = os.path.getsize(os.path.join(a["store"], a["data_file"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = data_size + a["margin"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # soft cap
    outcome: dict[str, Any] = {"limit": limit, "head_before": store.head}
    try:
        put(store, [rec(f"big-{i}", ts=float(i), dim=a["dim"], dtype="float64") for i in range(a["n"])])
        outcome["written"] = True
    except BaseException as exc:
        outcome.update(_error(exc))
    try:
        outcome["head_after"] = store.head
        outcome["missing_after"] = missing(store, a["check_ids"])
    except BaseException as exc:
        outcome["after_error"] = _error(exc)
    if not a.get("retry"):
        _say(outcome)
        return
    # Space comes back: the same handle writes again.
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    try:
        put(store, [rec("after-space-returned", ts=0.5)])
        outcome["head_after_space_returned"] = store.head
    except BaseException as exc:
        outcome["retry_error"] = _error(exc)
    _say(outcome)


def read_everything(path: str, namespaces: list[list[str]], meta_keys: list[str]) -> dict[str, Any]:
    """Open a (possibly corrupt) store, run verify() and read everything; say what happened.

    Keys: ``open_error`` | (``verify`` or ``verify_error``) and (``state`` + ``head`` or
    ``read_error``); errors as their class names (with MRO) and message.
    """
    out: dict[str, Any] = {"store": path}
    try:
        store = _open(path)
    except BaseException as exc:
        out["open_error"] = _error(exc)
        return out
    try:
        report = store.verify()
        out["verify"] = {
            "problems": [str(p) for p in report.problems][:5],
            "events_checked": report.events_checked,
            "head_seq": report.head_seq,
        }
    except BaseException as exc:
        out["verify_error"] = _error(exc)
    try:
        out["state"] = state_of(store, [tuple(ns) for ns in namespaces], meta_keys)
        out["head"] = store.head
    except BaseException as exc:
        out["read_error"] = _error(exc)
    try:
        store.close()
    except BaseException as exc:
        out["close_error"] = _error(exc)
    return out


def child_read_all(a: dict[str, Any]) -> None:
    """``read_everything`` on each of ``stores`` in turn, one JSON line per store as it finishes
    (so that if one crashes the process, the lines before it still tell which)."""
    for path in a["stores"]:
        _say(read_everything(path, a["namespaces"], a["meta_keys"]))


def child_hold_reader_and_die(a: dict[str, Any]) -> None:
    """Open the store, take a read transaction on its LMDB environment, then SIGKILL itself."""
    store = _open(a["store"])
    env = lmdb_env(store)
    txn = env.begin()
    _say({"pid": os.getpid(), "readers": env.readers(), "txn": txn.id()})
    os.kill(os.getpid(), signal.SIGKILL)


def child_grow(a: dict[str, Any]) -> None:
    """Open the store (map ``map_size``, default the library's) and write ``n`` records of ``dim``
    float64 each in batches of 10, forcing the map to grow; ids ``<prefix>-<b>-<i>``. With
    ``wait``, say ready once open and wait for a line on stdin before writing."""
    kwargs = {"map_size": a["map_size"]} if "map_size" in a else {}
    store = _open(a["store"], **kwargs)
    if a.get("wait"):
        _say({"ready": True})
        sys.stdin.readline()
    prefix = a.get("prefix", "grow")
    for b in range(a["n"] // 10):
        put(store, [rec(f"{prefix}-{b}-{i}", ts=float(b), dim=a["dim"], dtype="float64")
                    for i in range(10)])
    _say({"head": store.head, "map_size": lmdb_env(store).info()["map_size"]})
    store.close()


def child_open_while_another_grows(a: dict[str, Any]) -> None:
    """Open the store with map ``map_size``, while another process grows it between LMDB's
    ``mdb_env_open`` and the open's first transaction (a ``grow`` child run from inside
    ``lmdb.open``): the window in which a concurrent writer can outgrow the opener's map."""
    import lmdb

    real_open = lmdb.open

    def open_then_grow(*args: Any, **kwargs: Any) -> Any:
        env = real_open(*args, **kwargs)
        grow = {"store": a["store"], "n": a["n"], "dim": a["dim"], "prefix": "other"}
        subprocess.run([sys.executable, str(HERE), "grow", json.dumps(grow)], check=True,
                       capture_output=True, timeout=120)
        return env

    lmdb.open = open_then_grow
    try:
        store = _open(a["store"], map_size=a["map_size"])
    except BaseException as exc:
        _say({"open_error": _error(exc)})
        return
    finally:
        lmdb.open = real_open
    _say({"count": count(store), "head": store.head})
    store.close()


def lmdb_env(store: Any) -> Any:
    """The ``lmdb.Environment`` behind a LogBackend (white-box access for fault tests)."""
    return store._env


COMMANDS = {
    "mp-writer": child_mp_writer,
    "mp-reader": child_mp_reader,
    "fsize-writer": child_fsize_writer,
    "read-all": child_read_all,
    "hold-reader-and-die": child_hold_reader_and_die,
    "grow": child_grow,
    "open-while-another-grows": child_open_while_another_grows,
}

if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
