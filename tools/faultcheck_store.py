#!/usr/bin/env python
"""Fault campaign over a store's files: damage copies of a store, read each copy in a child process,
and sort every outcome.

Classes (``--classes``, comma list):

* ``bitflip``   one random bit of ``data.mdb`` flipped;
* ``byte``      one random byte of ``data.mdb`` overwritten with another value;
* ``truncate``  ``data.mdb`` cut to a random length shorter than it is;
* ``rollback``  one bit of LMDB's *older* meta page set so that its transaction id becomes the
  newest: LMDB then opens the state one commit back (the last acknowledged write vanishes);
* ``hostile``   the store directory made group- or world-writable, owned by another user, or its
  ``lock.mdb``/``data.mdb`` replaced by a symlink (needs root for the ownership case).

Each damaged copy is opened with ``LogBackend(path)`` in a child interpreter and read through every
read path: ``get`` of every id the store ever held, a paged ``scan`` of each namespace, ``events()``
and ``history(id)`` of every id, metadata, ``count`` (whole namespace and a time range, now and as of
three points), ``namespaces()`` (now and as of a point), the replay of a recorded op id, and a
``sweep`` of its expired records (a write, made last), then ``verify()``. Each read is compared with the same read of the
intact store. A copy's outcome is the worst of:

* ``crash``   the child died (a signal such as SIGBUS or SIGSEGV) or hung;
* ``foreign`` a read raised an error that is not a :class:`coniti.errors.ConitiError`;
* ``silent``  a read returned something other than the intact store's answer and raised nothing
  (``silent`` counts altered content; ``missing`` in the detail means a record read as absent);
* ``refused`` opening the store raised a coniti error;
* ``reported`` some read raised a coniti error (and none answered wrongly);
* ``intact``  every read answered exactly as on the intact store (the damage hit unused bytes).

``verify`` is tallied apart: how many copies it flagged. The target is 0 ``crash``, 0 ``foreign``,
0 ``silent`` in every class.

Run: ``.venv/bin/python tools/faultcheck_store.py --classes bitflip,byte --trials 400``. Functions
:func:`run_class` and :data:`CLASSES` are importable (``tools/faultcheck.py`` may drive them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import random
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
NAMESPACES: list[tuple[str, ...]] = [(), ("team", "a")]
EXPIRING: tuple[str, ...] = ("ttl",)
"""The namespace of :func:`build_store`'s expiring records (some expired, not swept)."""
OP_ID = "faultcheck-op"
TIME_RANGES: list[tuple[float | None, float | None]] = [(None, None), (20000.0, 90000.0)]
OUTCOMES = ("crash", "foreign", "silent", "refused", "reported", "intact")
TRIAL_TIMEOUT = 60.0


# -- the intact store ------------------------------------------------------------------------


def build_store(path: str, n: int = 2000, dim: int = 32, seed: int = 7) -> None:
    """A closed store of ``n`` records over two namespaces, with deletes, re-puts of deleted ids,
    metadata, actors and reasons; its last commit is a single put (what a rollback loses)."""
    import numpy as np

    from coniti.actor import Note
    from coniti.impl.log import LogBackend
    from coniti.memory import DeleteRequest, MemoryRecord, MetaSetRequest, PutRequest

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)

    def record(rid: str, ns: tuple[str, ...], version: int) -> MemoryRecord:
        return MemoryRecord(
            note=Note(id=rid, text=f"note {rid} v{version} " + "x" * rng.randrange(40),
                      timestamp=float(rng.randrange(10**6)) / 7, metadata={"v": version, "n": rid[-2:]}),
            vector=nrng.standard_normal(dim).astype("float32"),
            embedding_id="e1",
            namespace=ns,
        )

    with LogBackend(path, actor="builder") as store:
        per_batch = 200
        for b in range(0, n - 1, per_batch):
            ns = NAMESPACES[(b // per_batch) % len(NAMESPACES)]
            ids = [f"r{i:05d}" for i in range(b, min(b + per_batch, n - 1))]
            with store.audit(reason=f"batch {b // per_batch}"):
                store.put(PutRequest(records=[record(i, ns, 1) for i in ids]))
        gone = [f"r{i:05d}" for i in range(0, min(n - 1, per_batch), 4)]
        store.delete(DeleteRequest(ids=gone))
        store.put(PutRequest(records=[record(i, (), 2) for i in gone[::2]]))
        for k in range(5):
            store.set_meta(MetaSetRequest(key=f"k{k}", value={"k": k, "s": "v" * k}))
        expiring = [
            record(f"x{i:03d}", EXPIRING, 1).model_copy(update={"expires_at": 1.0 if i % 2 else 4.0e9})
            for i in range(40)
        ]
        store.put(PutRequest(records=expiring))
        store.write(_op_request())
        store.put(PutRequest(records=[record("last-commit", (), 1)]))


def _op_request() -> Any:
    """The write request :func:`build_store` records under :data:`OP_ID` (a retry replays it)."""
    from coniti.memory import DeleteOp, WriteRequest

    return WriteRequest(ops=[DeleteOp(id="x038")], namespace=EXPIRING, op_id=OP_ID)


def _owner(rid: str) -> tuple[str, ...]:
    """The namespace :func:`build_store` put ``rid`` in."""
    if rid == "last-commit":
        return ()
    if rid.startswith("x"):
        return EXPIRING
    return NAMESPACES[(int(rid[1:]) // 200) % len(NAMESPACES)]


def _all_ids(n: int) -> list[str]:
    return [f"r{i:05d}" for i in range(n - 1)] + ["last-commit"] + [f"x{i:03d}" for i in range(40)]


# -- observing a store (runs in the child) -----------------------------------------------------


def _rec(r: Any) -> tuple[Any, ...]:
    v = r.vector
    return (r.note.id, repr(r.note.timestamp), r.note.text, json.dumps(r.note.metadata, sort_keys=True),
            r.embedding_id, str(v.dtype), v.tobytes().hex(), tuple(r.namespace))


def _event(e: Any) -> tuple[Any, ...]:
    record = None
    if e.record is not None:
        record = _rec(e.record)
    return (e.seq, repr(e.at), e.kind, e.namespace, e.id, repr(e.timestamp), e.key, e.actor, e.reason,
            str(getattr(e, "prev", "")), str(getattr(e, "digest", "")), str(e.hash), e.erased, record, json.dumps(e.value))


def _error(exc: BaseException) -> dict[str, Any]:
    from coniti.errors import ConitiError

    return {"type": type(exc).__name__, "coniti": isinstance(exc, ConitiError), "message": str(exc)[:300]}


def observe(path: str, ids: list[str], with_verify: bool = True) -> dict[str, Any]:
    """Every read of the store at ``path``: per read kind a list of items, or an error dict."""
    owners = [_owner(i) for i in ids]
    from coniti.impl.log import LogBackend
    from coniti.memory import CountRequest, GetRequest, MetaGetRequest, ScanRequest, TimeRange

    out: dict[str, Any] = {}
    try:
        store = LogBackend(path)
    except Exception as exc:
        out["open"] = _error(exc)
        return out
    reads: dict[str, Callable[[], list[Any]]] = {}

    def get() -> list[Any]:
        items: list[Any] = []
        for ns in [*NAMESPACES, EXPIRING]:
            for i in range(0, len(ids), 250):
                res = store.get(GetRequest(ids=ids[i : i + 250], namespace=ns))
                items += [_rec(r) for r in res.records]
                items += [("missing", ns, m) for m in res.missing]
        return items

    def scan() -> list[Any]:
        items: list[Any] = []
        for ns in [*NAMESPACES, EXPIRING]:
            cursor = None
            while True:
                page = store.scan(ScanRequest(namespace=ns, limit=300, cursor=cursor))
                items += [_rec(r) for r in page.records]
                cursor = page.next_cursor
                if cursor is None:
                    break
        return items

    def events() -> list[Any]:
        return [_event(e) for e in store.events()]

    def history() -> list[Any]:
        # Each id's own namespace (get reads both, so a record moved across namespaces shows there).
        return [(ns, i, [_event(e) for e in store.history(i, ns)]) for i, ns in zip(ids, owners, strict=True)]

    def meta() -> list[Any]:
        return [json.dumps(store.get_meta(MetaGetRequest(key=f"k{k}", namespace=())).value)
                for k in range(6)]

    def count() -> list[Any]:
        head = store.head
        items: list[Any] = []
        for point in (None, head // 3, head // 2, head - 1):
            reader = store if point is None else store.at(point)
            for ns in [*NAMESPACES, EXPIRING]:
                for lo, hi in TIME_RANGES:
                    span = None if lo is None else TimeRange(start=lo, end=hi)
                    items.append((point, ns, lo, reader.count(CountRequest(namespace=ns, time_range=span)).count))
        return items

    def namespaces() -> list[Any]:
        return [store.namespaces(), store.at(store.head // 2).namespaces(), sorted(store._log.namespaces())]

    def op_replay() -> list[Any]:
        return [store.write(_op_request()).to_dict()]

    def sweep() -> list[Any]:
        # A write (made last, on the copy): what it deleted is judged. Reads after a write to a
        # damaged store are not: LMDB may insert into a damaged B-tree where no read can tell.
        return [store.sweep().deleted]

    reads = {"get": get, "scan": scan, "events": events, "history": history, "meta": meta,
             "count": count, "namespaces": namespaces, "op_replay": op_replay, "sweep": sweep}
    for name, fn in reads.items():
        try:
            out[name] = fn()
        except Exception as exc:
            out[name] = _error(exc)
    if with_verify:
        try:
            report = store.verify()
            out["verify"] = list(report.problems)[:3]
        except Exception as exc:
            out["verify"] = _error(exc)
    with contextlib.suppress(Exception):
        store.close()
    return out


def _first_difference(seen: list[Any], truth: list[Any]) -> str:
    for a, b in zip(seen, truth, strict=False):
        if a != b:
            if isinstance(a, tuple) and a[:1] == ("missing",):
                return f"missing {a[1:]!r}"
            return f"altered {str(b)[:80]}"
    return f"{len(seen)} items instead of {len(truth)}"


def judge(seen: dict[str, Any], truth: dict[str, Any]) -> dict[str, Any]:
    """The outcome of one copy (see the module docstring) and its details."""
    detail: dict[str, Any] = {}
    flags: set[str] = set()
    if "open" in seen:
        flags.add("refused" if seen["open"]["coniti"] else "foreign")
        detail["open"] = seen["open"]
    else:
        for name, items in truth.items():
            if name == "verify":
                continue
            got = seen.get(name)
            if isinstance(got, dict):
                flags.add("reported" if got["coniti"] else "foreign")
                detail[name] = got
            elif got != items:
                flags.add("silent")
                detail[name] = _first_difference(got or [], items)
    outcome = next((o for o in OUTCOMES if o in flags), "intact")
    v = seen.get("verify")
    flagged = "open" in seen or (v is not None and (isinstance(v, dict) or bool(v)))
    return {"outcome": outcome, "verify_flagged": flagged, "detail": detail}


def child_main(truth_file: str) -> None:
    """Read store paths from stdin, one per line; write one JSON judgement per line."""
    with open(truth_file, "rb") as fh:
        truth, ids = pickle.load(fh)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        result = judge(observe(path, ids), truth)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


# -- faults (parent) ---------------------------------------------------------------------------


def _data(path: str) -> str:
    return os.path.join(path, "data.mdb")


def fault_bitflip(path: str, rng: random.Random) -> str:
    size = os.path.getsize(_data(path))
    off, bit = rng.randrange(size), rng.randrange(8)
    with open(_data(path), "r+b") as fh:
        fh.seek(off)
        b = fh.read(1)[0]
        fh.seek(off)
        fh.write(bytes([b ^ (1 << bit)]))
    return f"bit {bit} of byte {off}"


def fault_byte(path: str, rng: random.Random) -> str:
    size = os.path.getsize(_data(path))
    off = rng.randrange(size)
    with open(_data(path), "r+b") as fh:
        fh.seek(off)
        b = fh.read(1)[0]
        new = (b + rng.randrange(1, 256)) % 256
        fh.seek(off)
        fh.write(bytes([new]))
    return f"byte {off}: {b:#04x} -> {new:#04x}"


def fault_truncate(path: str, rng: random.Random) -> str:
    size = os.path.getsize(_data(path))
    new = rng.randrange(size)
    os.truncate(_data(path), new)
    return f"cut to {new} of {size} bytes"


# LMDB 0.9 meta page (mdb.c): a page header of 16 bytes (pgno u64, pad u16, flags u16, lower/upper
# u16) then MDB_meta: magic u32, version u32, address ptr, mapsize size_t, two MDB_db of 48 bytes,
# last_pg pgno_t, txnid txnid_t. On a 64-bit build the txnid is at 16 + 136 = 152.
META_TXNID = 16 + 4 + 4 + 8 + 8 + 48 + 48 + 8


def _page_size(path: str) -> int:
    with open(_data(path), "rb") as fh:
        head = fh.read(16 + 24 + 4)
    return int(struct.unpack_from("<I", head, 16 + 24)[0]) if len(head) >= 44 else 4096


def fault_rollback(path: str, rng: random.Random) -> str:
    psize = _page_size(path)
    with open(_data(path), "r+b") as fh:
        raw = fh.read(2 * psize)
        ids = [struct.unpack_from("<Q", raw, p * psize + META_TXNID)[0] for p in (0, 1)]
        older = 0 if ids[0] < ids[1] else 1
        bit = rng.randrange(40, 62)
        fh.seek(older * psize + META_TXNID)
        fh.write(struct.pack("<Q", ids[older] | (1 << bit)))
    return f"meta page {older}: txnid {ids[older]} -> bit {bit} set (newer was {ids[1 - older]})"


HOSTILE = ("group-writable", "world-writable", "other-owner", "lock-symlink", "data-symlink")


def fault_hostile(path: str, rng: random.Random, case: str | None = None) -> str:
    case = case or rng.choice(HOSTILE)
    if case == "group-writable":
        os.chmod(path, 0o770)
    elif case == "world-writable":
        os.chmod(path, 0o707)
    elif case == "other-owner":
        os.chown(path, 65534, 65534)
    elif case == "lock-symlink":
        victim = path + ".victim"
        Path(victim).write_bytes(b"precious")
        os.unlink(os.path.join(path, "lock.mdb"))
        os.symlink(victim, os.path.join(path, "lock.mdb"))
    elif case == "data-symlink":
        elsewhere = path + ".elsewhere"
        shutil.move(_data(path), elsewhere)
        os.symlink(elsewhere, _data(path))
    return case


CLASSES: dict[str, Callable[[str, random.Random], str]] = {
    "bitflip": fault_bitflip,
    "byte": fault_byte,
    "truncate": fault_truncate,
    "rollback": fault_rollback,
    "hostile": fault_hostile,
}


class _Child:
    """A child interpreter judging copies; restarted after it dies."""

    def __init__(self, truth_file: str) -> None:
        self.truth_file = truth_file
        self.proc: subprocess.Popen[str] | None = None

    def judge(self, path: str) -> dict[str, Any]:
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE), "--child", self.truth_file],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(path + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], TRIAL_TIMEOUT)
        line = proc.stdout.readline() if ready else ""
        if line:
            result: dict[str, Any] = json.loads(line)
            return result
        if not ready:
            proc.kill()
        code = proc.wait()
        err = proc.stderr.read()[-400:] if proc.stderr is not None else ""
        self.proc = None
        why = "hung" if not ready else f"died with status {code}"
        return {"outcome": "crash", "verify_flagged": False, "detail": {"child": why, "stderr": err}}

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
            self.proc = None


def prepare(work: str, n: int, dim: int) -> tuple[str, str]:
    """Build the intact store under ``work`` and record its reads; returns (store, truth file)."""
    source = os.path.join(work, "source")
    build_store(source, n=n, dim=dim)
    ids = _all_ids(n)
    reference = os.path.join(work, "reference")  # observing writes (sweep): a copy, not the source
    shutil.copytree(source, reference)
    truth = observe(reference, ids, with_verify=False)
    shutil.rmtree(reference)
    bad = {k: v for k, v in truth.items() if isinstance(v, dict)}
    if bad:
        raise SystemExit(f"the intact store does not read cleanly: {bad}")
    truth_file = os.path.join(work, "truth.pickle")
    with open(truth_file, "wb") as fh:
        pickle.dump((truth, ids), fh)
    return source, truth_file


def run_class(name: str, trials: int, source: str, truth_file: str, work: str, seed: int = 1,
              progress: bool = False) -> dict[str, Any]:
    """Run ``trials`` damaged copies of ``source`` for fault class ``name``; returns the tally and
    the copies that failed (crash, foreign, silent)."""
    rng = random.Random(f"{name}-{seed}")
    child = _Child(truth_file)
    tally: Counter[str] = Counter()
    flagged = 0
    failures: list[dict[str, Any]] = []
    try:
        for t in range(trials):
            copy = os.path.join(work, f"{name}-{t}")
            shutil.copytree(source, copy)
            if name == "hostile":
                what = fault_hostile(copy, rng, HOSTILE[t % len(HOSTILE)])
            else:
                what = CLASSES[name](copy, rng)
            result = child.judge(copy)
            tally[result["outcome"]] += 1
            flagged += bool(result["verify_flagged"])
            if result["outcome"] in ("crash", "foreign", "silent"):
                failures.append({"trial": t, "fault": what, **result})
            if progress:
                print(f"{name} {t + 1}/{trials}: {result['outcome']} ({what})", file=sys.stderr)
            with contextlib.suppress(OSError):
                os.chmod(copy, 0o700)
            shutil.rmtree(copy, ignore_errors=True)
            for extra in (copy + ".victim", copy + ".elsewhere"):
                with contextlib.suppress(OSError):
                    os.unlink(extra)
    finally:
        child.close()
    return {"class": name, "trials": trials, "tally": dict(tally), "verify_flagged": flagged,
            "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="bitflip,byte,truncate,rollback,hostile")
    parser.add_argument("--trials", type=int, default=400, help="copies per class (rollback, hostile: "
                        "at most 10)")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    work = tempfile.mkdtemp(prefix="faultcheck-store-", dir=args.dir)
    started = time.monotonic()
    try:
        source, truth_file = prepare(work, args.records, args.dim)
        size = os.path.getsize(_data(source))
        print(f"store: {args.records} records, dim {args.dim}, data.mdb {size:,} bytes")
        results = []
        failed = False
        for name in args.classes.split(","):
            trials = min(args.trials, 10) if name in ("rollback", "hostile") else args.trials
            res = run_class(name, trials, source, truth_file, work, args.seed, args.verbose)
            results.append(res)
            tally = ", ".join(f"{o} {res['tally'].get(o, 0)}" for o in OUTCOMES)
            print(f"{name:9} {trials:4} copies: {tally}; verify flagged {res['verify_flagged']}")
            for f in res["failures"][:5]:
                print(f"    trial {f['trial']} ({f['fault']}): {f['outcome']} {json.dumps(f['detail'])[:300]}")
            failed |= bool(res["failures"])
        print(f"({time.monotonic() - started:.0f} s)")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
