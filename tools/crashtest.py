#!/usr/bin/env python3
"""Crash test for LogBackend: kill a writer with SIGKILL at random moments and check the store.

Usage::

    .venv/bin/python tools/crashtest.py --trials 1000            # long soak in temporary stores
    .venv/bin/python tools/crashtest.py --trials 50 --store DIR --seed 7 --spawn

Each trial starts a writer process on one store (reused across trials). The writer opens a
``LogBackend`` with the default durability and carries out a plan of calls drawn from the seed:
put batches of 1-4 records (some with ids and namespaces longer than LMDB's 511-byte key limit),
deletes of records it put earlier, ``set_meta`` and ``clear`` of a scratch namespace. After each call
returns it writes ``ACK <i>`` on stdout with one unbuffered ``write``. The parent kills it with SIGKILL
after a random delay (sometimes before the store is even open), then checks, with its own handle:

* every acknowledged call is in the store, and no call after the one in flight is;
* the call in flight is all there or all absent (no partial batch);
* the whole store equals an ``InMemoryBackend`` model that replayed exactly those calls;
* ``head`` equals the number of events those calls append, and ``verify()`` is clean with
  ``events_checked == head_seq == head`` (gap-free sequence numbers, intact hash chain).

LMDB property the check allows for: a writer killed after its commit reached the disk but before it
updated LMDB's shared lock table leaves that commit invisible to processes that already had the store
open, until some process next takes the write lock (``verify()`` does); it then appears, whole. The
parent therefore judges the in-flight call only after ``verify()``, and requires that a commit that
appears this way is exactly the in-flight call ("visible only after the write lock was retaken" in
the summary).

The checks walk the whole store, so a soak starts a new store every ``--rotate`` trials (default 50).

The writer only ever acknowledges after ``put``/``delete``/... returned, and it blocks on the
acknowledgement before starting the next call, so at most one call can be committed but
unacknowledged. By default writers are forked from a "zygote" process that has imported coniti but
never opened a store (fast: no interpreter start per trial); ``--spawn`` starts a fresh interpreter
per trial instead. The parent keeps its checking handle open across most trials, so writers are also
killed while another process holds the environment (stale reader slots, a dead writer's lock).

Exit status 0 when every trial passed; 1 with a description of the first failure otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMESPACES: list[tuple[str, ...]] = [(), ("crash",), ("crash", "n" * 600)]
SCRATCH: tuple[str, ...] = ("scratch",)
TIES = [0.0, 1.0, 2.5]

Op = dict[str, Any]


# -- the plan: deterministic from (seed, trial), shared by the writer and the checker --------------


def plan(seed: int, trial: int, n_ops: int) -> list[Op]:
    """The calls trial ``trial`` makes, in order. Deletes and clears only target what the plan put."""
    rng = random.Random(f"{seed}/{trial}")
    ops: list[Op] = []
    live: list[tuple[tuple[str, ...], str]] = []
    scratch_full = False
    for i in range(n_ops):
        roll = rng.random()
        if roll < 0.01:
            ops.append({"kind": "rebuild"})
        elif roll < 0.12 and live:
            targets = rng.sample(live, min(len(live), rng.randint(1, 3)))
            ns = targets[0][0]
            ids = [rid for tns, rid in targets if tns == ns]
            for rid in ids:
                live.remove((ns, rid))
            ops.append({"kind": "delete", "ns": list(ns), "ids": [*ids, f"t{trial}o{i}-missing"]})
        elif roll < 0.2:
            ns = rng.choice(NAMESPACES)
            ops.append({"kind": "meta", "ns": list(ns), "key": "progress", "value": [trial, i]})
        elif roll < 0.25 and scratch_full:
            ops.append({"kind": "clear", "ns": list(SCRATCH)})
            scratch_full = False
        else:
            ns = SCRATCH if roll < 0.35 else rng.choice(NAMESPACES)
            records = []
            for j in range(rng.randint(1, 4)):
                rid = f"t{trial}o{i}r{j}"
                if rng.random() < 0.05:
                    rid += "-" + "x" * 600
                ts = rng.choice(TIES) if rng.random() < 0.3 else round(rng.uniform(0, 100), 3)
                dtype = rng.choice(["float16", "float32", "float64"])
                vec = [rng.uniform(-1, 1) for _ in range(4)]
                records.append({"id": rid, "ts": ts, "dtype": dtype, "vec": vec, "i": i})
                if ns != SCRATCH:
                    live.append((ns, rid))
            if ns == SCRATCH:
                scratch_full = True
            ops.append({"kind": "put", "ns": list(ns), "records": records})
    return ops


def build_record(ns: list[str], spec: dict[str, Any]) -> Any:
    import numpy as np

    from coniti.actor import Note
    from coniti.memory import MemoryRecord

    return MemoryRecord(
        note=Note(id=spec["id"], text=f"text of {spec['id'][:40]}", timestamp=spec["ts"],
                  metadata={"op": spec["i"], "tags": ["crash"]}),
        vector=np.array(spec["vec"], dtype=spec["dtype"]),
        embedding_id="crash-emb",
        namespace=tuple(ns),
    )


def apply(backend: Any, op: Op) -> int:
    """Carry out ``op`` on ``backend``; returns the number of events it appends to a log."""
    from coniti.memory import (
        ClearRequest,
        DeleteRequest,
        MetaSetRequest,
        PutRequest,
    )

    ns = tuple(op.get("ns", ()))
    kind = op["kind"]
    if kind == "put":
        backend.put(PutRequest(records=[build_record(op["ns"], r) for r in op["records"]]))
        return len(op["records"])
    if kind == "delete":
        return len(backend.delete(DeleteRequest(ids=op["ids"], namespace=ns)).deleted)
    if kind == "meta":
        backend.set_meta(MetaSetRequest(key=op["key"], value=op["value"], namespace=ns))
        return 1
    if kind == "clear":
        backend.clear(ClearRequest(namespace=ns))
        return 1
    if kind == "rebuild":
        if hasattr(backend, "rebuild"):  # the model has nothing to rebuild
            backend.rebuild()
        return 0
    raise ValueError(f"unknown op kind {kind!r}")


# -- the writer --------------------------------------------------------------------------------


def writer(store: str, seed: int, trial: int, n_ops: int, **options: Any) -> int:
    """Open ``store`` and run the plan, writing ``OPEN``, ``ACK <i>`` and ``DONE`` lines to fd 1.

    ``options`` go to ``LogBackend`` (``durability``, ``map_size``). Returns 0, or 3 after an
    ``ERROR <traceback>`` line if anything raised.
    """
    try:
        from coniti.impl.log import LogBackend

        ops = plan(seed, trial, n_ops)
        backend = LogBackend(store, **options)
        os.write(1, b"OPEN\n")
        for i, op in enumerate(ops):
            apply(backend, op)
            os.write(1, f"ACK {i}\n".encode())
        backend.close()
        os.write(1, b"DONE\n")
        return 0
    except BaseException:
        os.write(1, ("ERROR " + traceback.format_exc().replace("\n", " | ") + "\n").encode())
        return 3


def zygote() -> None:
    """Read ``RUN <json>`` lines on stdin; fork a writer for each; report ``PID`` and ``EXIT``."""
    import coniti.impl.log  # noqa: F401 - imported once here, inherited by every forked writer

    os.write(1, b"READY\n")
    for line in sys.stdin:
        args = json.loads(line.removeprefix("RUN "))
        pid = os.fork()
        if pid == 0:
            os._exit(writer(**args))
        os.write(1, f"PID {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"EXIT {pid} {status}\n".encode())


# -- the parent --------------------------------------------------------------------------------


@dataclass
class TrialResult:
    trial: int
    delay: float
    opened: bool
    acked: int
    inflight_present: bool | None
    finished: bool
    late: bool = False


@dataclass
class Report:
    trials: list[TrialResult] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        n = len(self.trials)
        acked = sum(t.acked for t in self.trials)
        before_open = sum(not t.opened for t in self.trials)
        present = sum(t.inflight_present is True for t in self.trials)
        absent = sum(t.inflight_present is False for t in self.trials)
        finished = sum(t.finished for t in self.trials)
        late = sum(t.late for t in self.trials)
        return (
            f"{n} trials in {self.seconds:.1f}s: {acked} acknowledged calls; killed before open "
            f"{before_open}, in-flight call present {present} / absent {absent}, "
            f"of which visible only after the write lock was retaken {late}, "
            f"writer finished before the kill {finished}"
        )


class CrashTestFailure(AssertionError):
    """A trial found the store in a state the crash contract forbids."""


class _Zygote:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "zygote"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.expect("READY", timeout=60)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    def expect(self, prefix: str, timeout: float) -> str:
        line = self.lines.get(timeout=timeout)
        if not line.startswith(prefix):
            raise CrashTestFailure(f"zygote said {line!r}, expected {prefix}")
        return line

    def run(self, args: dict[str, Any], delay: float, from_start: bool = False) -> list[str]:
        """Fork a writer, SIGKILL it ``delay`` s after it opened the store (or after the fork, with
        ``from_start``, so that the kill may land in the open), return every line it wrote.

        Timing from the open, not the fork, keeps the kill inside the writer's calls however slow a
        loaded machine makes the open."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("RUN " + json.dumps(args) + "\n")
        self.proc.stdin.flush()
        out: list[str] = []
        pid = None
        while pid is None:
            line = self.lines.get(timeout=60)
            if line.startswith("PID "):
                pid = int(line.split()[1])
            else:
                out.append(line)
        while not from_start and not any(x.startswith(("OPEN", "ERROR", "EXIT")) for x in out[-1:]):
            line = self.lines.get(timeout=60)
            if line.startswith("EXIT "):
                return out
            out.append(line)
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while True:
            line = self.lines.get(timeout=60)
            if line.startswith("EXIT "):
                return out
            if line == "EOF":
                raise CrashTestFailure("the zygote died")
            out.append(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _spawn_run(args: dict[str, Any], delay: float, from_start: bool) -> list[str]:
    """Run a writer in a fresh interpreter; SIGKILL it ``delay`` s after it opened the store (or
    after it started, with ``from_start``, so that the kill may land in the import or the open)."""
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import crashtest; "
        "sys.exit(crashtest.writer(**json.loads(sys.argv[2])))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(Path(__file__).parent), json.dumps(args)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    out: list[str] = []
    if not from_start:
        for line in proc.stdout:
            out.append(line.rstrip("\n"))
            if line.startswith(("OPEN", "ERROR")):
                break
    time.sleep(delay)
    proc.kill()
    rest = proc.stdout.read()  # the same buffered reader as above: no line is skipped
    proc.wait(timeout=60)
    return out + rest.splitlines()


def _state(backend: Any, namespaces: list[tuple[str, ...]]) -> dict[str, Any]:
    from coniti.memory import MetaGetRequest

    return {
        repr(ns): {
            "records": [r.to_dict() for r in backend.iter_all(namespace=ns, page_size=1000)],
            "meta": backend.get_meta(MetaGetRequest(key="progress", namespace=ns)).value,
        }
        for ns in namespaces
    }


def _inflight_present(store: Any, op: Op) -> bool:
    """Whether the unacknowledged call ``op`` reached the store (judged by one of its effects)."""
    from coniti.memory import CountRequest, GetRequest, MetaGetRequest

    if op["kind"] == "rebuild":  # leaves no trace but the projections it rewrote
        return False
    ns = tuple(op["ns"])
    if op["kind"] == "put":
        return not store.get(GetRequest(ids=[op["records"][0]["id"]], namespace=ns)).missing
    if op["kind"] == "delete":
        return bool(store.get(GetRequest(ids=[op["ids"][0]], namespace=ns)).missing)
    if op["kind"] == "meta":
        return bool(store.get_meta(MetaGetRequest(key=op["key"], namespace=ns)).value == op["value"])
    return store.count(CountRequest(namespace=ns)).count == 0


def check_verified(store: Any, where: str) -> None:
    report = store.verify()
    if list(report.problems):
        raise CrashTestFailure(f"{where}: verify() found problems: {list(report.problems)[:5]}")
    if not report.events_checked == report.head_seq == store.head:
        raise CrashTestFailure(
            f"{where}: verify() checked {report.events_checked} events, head_seq {report.head_seq}, "
            f"store.head {store.head}: sequence numbers are not gap-free"
        )


def run(
    store_dir: str | Path,
    trials: int,
    *,
    seed: int = 0,
    max_delay: float = 0.12,
    n_ops: int = 400,
    spawn: bool = False,
    durability: str = "sync",
    log: Any = None,
) -> Report:
    """Run ``trials`` kill trials on ``store_dir``; raise :class:`CrashTestFailure` on the first bad one.

    Writers open the store with ``durability``; every third one with a 64 KiB map, so that kills
    also land while the map grows.
    """
    from coniti.impl.log import LogBackend
    from coniti.impl.memory import InMemoryBackend

    started = time.monotonic()
    rng = random.Random(seed)
    store_dir = str(store_dir)
    model = InMemoryBackend()
    namespaces = [*NAMESPACES, SCRATCH]
    report = Report()
    expected_head = 0
    checker: Any = None
    zyg = None if spawn else _Zygote()
    try:
        for trial in range(trials):
            early = trial % 10 == 0
            args: dict[str, Any] = {"store": store_dir, "seed": seed, "trial": trial, "n_ops": n_ops,
                                    "durability": durability}
            if trial % 3 == 1:
                args["map_size"] = 1 << 16
            if spawn:
                delay = rng.uniform(0, 0.7) if early else rng.uniform(0, max_delay)
                lines = _spawn_run(args, delay, from_start=early)
            else:
                delay = rng.uniform(0, 0.01) if early else rng.uniform(0, max_delay)
                lines = zyg.run(args, delay, from_start=early)  # type: ignore[union-attr]
            where = f"trial {trial} (seed {seed}, delay {delay:.4f}s)"
            errors = [line for line in lines if line.startswith("ERROR")]
            if errors:
                raise CrashTestFailure(f"{where}: the writer failed: {errors[0]}")
            acks = [int(line.split()[1]) for line in lines if line.startswith("ACK ")]
            if acks != list(range(len(acks))):
                raise CrashTestFailure(f"{where}: acknowledgements out of order: {acks[:10]}...")
            finished = "DONE" in lines
            if checker is None or trial % 7 == 6:
                if checker is not None:
                    checker.close()
                checker = LogBackend(store_dir)
            # A writer killed after its commit reached the disk but before it updated LMDB's shared
            # lock table leaves that commit invisible to processes that already had the store open,
            # until some process next takes the write lock (LMDB then recovers the dead writer's
            # mutex and adopts the newest meta page). verify() takes the write lock, so it runs
            # first: after it, the fate of the in-flight call is final.
            seen_before = checker.head
            check_verified(checker, where)
            late = checker.head != seen_before
            ops = plan(seed, trial, n_ops)
            for op in ops[: len(acks)]:
                expected_head += apply(model, op)
            present: bool | None = None
            if len(acks) < len(ops):
                present = _inflight_present(checker, ops[len(acks)])
                if present:
                    expected_head += apply(model, ops[len(acks)])
            if late and not (present and seen_before < expected_head == checker.head):
                raise CrashTestFailure(
                    f"{where}: head moved from {seen_before} to {checker.head} without a writer, "
                    f"and not by exactly the in-flight call"
                )
            if checker.head != expected_head:
                raise CrashTestFailure(
                    f"{where}: head is {checker.head}, expected {expected_head} "
                    f"({len(acks)} acknowledged calls, in-flight call present: {present})"
                )
            if _state(checker, namespaces) != _state(model, namespaces):
                raise CrashTestFailure(
                    f"{where}: the store differs from the model of {len(acks)} acknowledged calls "
                    f"(+ the in-flight call: {present})"
                )
            result = TrialResult(trial, delay, "OPEN" in lines, len(acks), present, finished, late)
            report.trials.append(result)
            if log is not None:
                log(result)
        if checker is not None:
            checker.close()
            checker = None
        with LogBackend(store_dir) as fresh:
            if _state(fresh, namespaces) != _state(model, namespaces):
                raise CrashTestFailure("after the last trial a fresh handle disagrees with the model")
            check_verified(fresh, "final reopen")
    finally:
        if checker is not None:
            checker.close()
        if zyg is not None:
            zyg.close()
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--store", help="store directory (default: a fresh temporary one)")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--max-delay", type=float, default=0.12, help="seconds before the kill")
    parser.add_argument("--ops", type=int, default=400, help="calls per writer plan")
    parser.add_argument("--spawn", action="store_true", help="a fresh interpreter per trial")
    parser.add_argument("--durability", default="sync", help="the writers' LogBackend durability")
    parser.add_argument("--rotate", type=int, default=50,
                        help="start a new store every N trials (checks walk the whole store)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per trial")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    tmp = None
    store = args.store
    if store is None:
        tmp = tempfile.mkdtemp(prefix="coniti-crash-")
        store = os.path.join(tmp, "store")
    print(f"crashtest: store {store}, seed {seed}, {args.trials} trials", flush=True)
    log = (lambda r: print(f"  {r}", flush=True)) if args.verbose else None
    report = Report()
    done = 0
    part = 0
    while done < args.trials:
        n = min(args.rotate, args.trials - done)
        part_store = store if args.rotate >= args.trials else os.path.join(store, f"part-{part}")
        try:
            chunk = run(part_store, n, seed=seed + part, max_delay=args.max_delay, n_ops=args.ops,
                        spawn=args.spawn, durability=args.durability, log=log)
        except CrashTestFailure as exc:
            print(f"FAILED: {exc}", flush=True)
            print(f"store kept at {part_store} for inspection (seed {seed + part})", flush=True)
            return 1
        report.trials.extend(chunk.trials)
        report.seconds += chunk.seconds
        done += n
        part += 1
    print("ok: " + report.summary(), flush=True)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["zygote"]:
        zygote()
        sys.exit(0)
    sys.exit(main())
