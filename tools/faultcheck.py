#!/usr/bin/env python3
"""Fault campaign for coniti: kill, corrupt and feed hostile files to real processes; count outcomes.

Usage::

    .venv/bin/python tools/faultcheck.py                       # every class, the default counts
    .venv/bin/python tools/faultcheck.py --trials 200 --seed 7  # a soak
    .venv/bin/python tools/faultcheck.py --classes kill-load,bomb --assert kill-load,bomb --json

Every trial runs the operation in a child interpreter (``faultcheck.py --child ...``) and sorts what
happened into an outcome. Outcomes ending in ``!`` are failures of coniti's promises:

================  ===============================================================================
class             trial, and its outcomes
================  ===============================================================================
durability        ``tools/crashtest.py``: a writer killed at random; ``ok`` or ``failed!``
kill-load         ``load`` of a 3,000-record file SIGKILLed at a random point: ``all`` / ``none``,
                  or ``partial!``; then a retry: ``retry-failed!`` if it is refused
sigint-load       the same with SIGINT (Ctrl-C)
kill-import       ``import_log`` SIGKILLed: the target holds all events or does not exist, else
                  ``partial!``; a hidden ``.NAME.importing-*`` left after the retry: ``leftover!``
kill-compact      ``compact`` SIGKILLed: state unchanged and ``verify()`` clean, else ``damaged!``
kill-dump         ``dump`` over an older file SIGKILLed: the target is the old or the new file
                  (``old`` / ``new``), else ``torn!``; a temporary file left after the next dump:
                  ``leftover!``
hostile           dump/export onto a planted ``.partial`` symlink, a FIFO, a directory, a socket, a
                  symlink to a FIFO: ``refused`` / ``written``; a byte changed outside the target:
                  ``outside-write!``; a non-coniti error: ``crash!``
bomb              a gzip of one line repeated and a gzip of one endless line (``--bomb-mib``
                  decompressed, into an InMemoryBackend), and a plain file of ``--big-load`` valid
                  records (into a LogBackend, one transaction), in turn: ``refused`` / ``loaded``,
                  with the child's peak RSS (VmHWM); above 256 MB: ``over-memory!``;
                  ``MemoryError`` or a signal: ``crash!``
bitflip           ``tools/faultcheck_store.py`` on a store of ``--store-records`` records: one
                  random bit of ``data.mdb`` flipped, then every read path (get, scan, events,
                  history, metadata, counts now and as of past points, namespaces, an op-id
                  replay, a sweep) compared with the intact store's: ``reported`` (a coniti error),
                  ``refused`` (at open), ``intact`` (equal), ``silent!`` (a different answer, no
                  error), ``foreign!`` (an error that is not coniti's), ``crash!`` (a signal or a
                  hang); ``verify flagged`` says how many copies ``verify()`` flagged
byte              the same with one byte overwritten by another value
truncate          the same with ``data.mdb`` cut at a random length
rollback          the same with one bit of LMDB's older meta page set so that it reads as newest
                  (the last commit vanishes)
hostile-store     the store directory made group- or world-writable or another user's, or its
                  ``lock.mdb``/``data.mdb`` replaced by a symlink: ``refused`` at open, or a failure
================  ===============================================================================

``--assert CLASSES`` makes the exit status 1 when any of those classes had a ``!`` outcome (default:
none; the report is printed either way). ``--json`` prints the report as one JSON document.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent
RSS_BOUND = 256 * 1024 * 1024
"""Peak resident memory a load may reach, whatever the file (bytes)."""
LOAD_RECORDS = 3000
DIM = 32
STORE_CLASSES = {
    "bitflip": "bitflip", "byte": "byte", "truncate": "truncate", "rollback": "rollback",
    "hostile-store": "hostile",
}
"""This tool's class -> the class of ``tools/faultcheck_store.py`` that runs it."""
CLASSES = (
    "durability", "kill-load", "sigint-load", "kill-import", "kill-compact", "kill-dump", "hostile",
    "bomb", *STORE_CLASSES,
)
STORE_OUTCOMES = {"crash": "crash!", "foreign": "foreign!", "silent": "silent!"}
"""The failure outcomes of a store class, marked as this tool marks failures."""


# -- fixtures: a memory file, a store, a log export --------------------------------------------


def _records(n: int, prefix: str, namespace: tuple[str, ...]) -> list[Any]:
    import numpy as np

    from coniti.actor import Note
    from coniti.memory import MemoryRecord

    rng = np.random.default_rng(len(prefix) + n)
    return [
        MemoryRecord(
            note=Note(id=f"{prefix}{i}", text=f"note {i} " + "lorem ipsum " * 8,
                      timestamp=1_700_000_000.0 + i, metadata={"i": i, "tags": ["fault"]}),
            vector=rng.standard_normal(DIM).astype(np.float32),
            embedding_id="fault-emb",
            namespace=namespace,
        )
        for i in range(n)
    ]


class Work:
    """The shared inputs of a campaign, built once in ``root``."""

    def __init__(self, root: Path, bomb_size: int, big_load: int = 100_000) -> None:
        from coniti.impl.log import LogBackend
        from coniti.impl.memory import InMemoryBackend
        from coniti.memory import PutRequest

        self.root = root
        self.bomb_size = bomb_size
        self.big_load = big_load
        self.peaks: dict[str, int] = {}
        self.store_campaign: tuple[str, str] = ("", "")
        """The store classes' intact store and the file of its reads (built by the first of them)."""
        self.base = root / "base-store"
        with LogBackend(self.base) as store:
            store.put(PutRequest(records=_records(20, "base", ("base",))))
            self.base_head = store.head
        source = InMemoryBackend()
        source.put(PutRequest(records=_records(LOAD_RECORDS, "load", ("loaded",))))
        self.memfile = root / "load.jsonl"
        source.dump(self.memfile, ("loaded",))
        full = root / "full-store"
        shutil.copytree(self.base, full)
        with LogBackend(full) as store:
            store.load(self.memfile)
            self.full_head = store.head
            self.logfile = root / "full.coniti-log.jsonl"
            store.export_log(self.logfile)
            self.full_state = _state_of(store)
        self.full = full

    def fresh_store(self, name: str) -> Path:
        path = self.root / name
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(self.base, path)
        return path


def _state_of(store: Any) -> dict[str, Any]:
    """Every record, metadata value and event of a store, as comparable JSON."""
    out: dict[str, Any] = {"head": store.head, "head_hash": store.head_hash, "namespaces": {}}
    for ns in store.namespaces():
        records = [
            [r.id, r.note.text, r.note.timestamp, r.note.metadata, r.vector.tobytes().hex()]
            for r in store.iter_all(namespace=ns)
        ]
        meta = store.get_meta(store.meta_get_request("embedding_id", ns)).value
        out["namespaces"]["/".join(ns)] = [records, meta]
    out["events"] = [[e.seq, e.kind, e.id, e.hash] for e in store.events()]
    return out


# -- children --------------------------------------------------------------------------------


def _child(argv: list[str]) -> int:
    """Run one operation for a trial; prints READY once set up, DONE when finished."""
    kind, *args = argv
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    from coniti.errors import ConitiError
    from coniti.impl.log import LogBackend

    def ready() -> None:
        sys.stdout.write("READY\n")
        sys.stdout.flush()

    try:
        if kind == "load":
            store = LogBackend(args[0])
            ready()
            store.load(args[1])
        elif kind == "import":
            ready()
            LogBackend.import_log(args[0], args[1]).close()
        elif kind == "compact":
            store = LogBackend(args[0])
            ready()
            store.compact()
        elif kind == "dump":
            store = LogBackend(args[0])
            ready()
            store.dump(args[1], ("loaded",))
        elif kind == "bomb":
            from coniti.impl.memory import InMemoryBackend

            target: Any = InMemoryBackend() if args[1] == "memory" else LogBackend(args[2])
            ready()
            outcome = "loaded"
            try:
                target.load(args[0])
            except ConitiError as exc:
                outcome = f"refused: {str(exc)[:120]}"
            peak = _peak_rss()
            sys.stdout.write(json.dumps({"outcome": outcome, "peak": peak}) + "\n")
        else:
            raise SystemExit(f"unknown child {kind}")
    except KeyboardInterrupt:
        return 130
    sys.stdout.write("DONE\n")
    sys.stdout.flush()
    return 0


def _peak_rss() -> int:
    """This process's peak resident set (bytes), from ``VmHWM``: unlike ``ru_maxrss`` it does not
    carry the parent's peak over ``exec``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _run_killed(args: Sequence[str], delay: float, sig: int = signal.SIGKILL) -> bool:
    """Start a child, wait for READY, signal it after ``delay`` seconds; True if it finished first."""
    proc = _start(*args)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"child {args[0]} did not start: {proc.stderr.read() if proc.stderr else ''}")
    time.sleep(delay)
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(sig)
    proc.communicate(timeout=120)
    return finished


def _timed(args: Sequence[str]) -> float:
    """How long a child's operation takes from READY to DONE (to aim the kills)."""
    proc = _start(*args)
    assert proc.stdout is not None
    proc.stdout.readline()
    started = time.monotonic()
    proc.stdout.readline()
    elapsed = time.monotonic() - started
    proc.communicate(timeout=300)
    return elapsed


# -- the trials ------------------------------------------------------------------------------

Trial = Callable[[random.Random, Work, int], str]


def _count_loaded(path: Path) -> tuple[int, int]:
    from coniti.impl.log import LogBackend

    with LogBackend(path) as store:
        report = store.verify()
        if not report.ok:
            raise AssertionError(f"verify: {report}")
        return store.count(store.count_request(None, ("loaded",))).count, store.head


def _load_trial(sig: int) -> Trial:
    def trial(rng: random.Random, work: Work, i: int) -> str:
        from coniti.errors import MemoryFileError
        from coniti.impl.log import LogBackend

        path = work.fresh_store(f"load-{i}")
        budget = _budget(work, "load", lambda: _timed(["load", str(work.fresh_store("t")), str(work.memfile)]))
        _run_killed(["load", str(path), str(work.memfile)], rng.uniform(0, budget * 1.1), sig)
        try:
            n, head = _count_loaded(path)
        except AssertionError:
            return "damaged!"
        if n not in (0, LOAD_RECORDS) or (n == 0 and head != work.base_head):
            return "partial!"
        outcome = "all" if n else "none"
        with LogBackend(path) as store:
            try:
                store.load(work.memfile)
            except MemoryFileError:
                if n == 0:
                    return "retry-failed!"
            if store.count(store.count_request(None, ("loaded",))).count != LOAD_RECORDS:
                return "retry-failed!"
        shutil.rmtree(path)
        return outcome

    return trial


_BUDGETS: dict[str, float] = {}


def _budget(work: Work, name: str, measure: Callable[[], float]) -> float:
    if name not in _BUDGETS:
        _BUDGETS[name] = max(measure(), 0.05)
    return _BUDGETS[name]


def _import_trial(rng: random.Random, work: Work, i: int) -> str:
    from coniti.errors import MemoryFileError
    from coniti.impl.log import LogBackend

    parent = work.root / f"import-{i}"
    parent.mkdir()
    target = parent / "store"
    budget = _budget(work, "import", lambda: _timed(["import", str(work.logfile), str(parent / "t")]))
    _run_killed(["import", str(work.logfile), str(target)], rng.uniform(0, budget * 1.1))
    outcome = "none"
    if target.exists():
        try:
            with LogBackend(target, read_only=True) as store:
                if _state_of(store) != work.full_state:
                    return "partial!"
        except Exception:
            return "partial!"
        outcome = "all"
    else:
        try:
            LogBackend.import_log(work.logfile, target).close()
        except MemoryFileError:
            return "retry-failed!"
    leftovers = [p.name for p in parent.iterdir() if p.name != "store" and p.name != "t"]
    shutil.rmtree(parent)
    return "leftover!" if leftovers else outcome


def _compact_trial(rng: random.Random, work: Work, i: int) -> str:
    from coniti.impl.log import LogBackend

    path = work.root / f"compact-{i}"
    shutil.copytree(work.full, path)
    budget = _budget(work, "compact", lambda: _copy_timed(work, ["compact"]))
    finished = _run_killed(["compact", str(path)], rng.uniform(0, budget * 1.1))
    try:
        with LogBackend(path) as store:
            ok = store.verify().ok and _state_of(store) == work.full_state
    except Exception:
        ok = False
    leftovers = [p.name for p in path.iterdir() if p.name.startswith(".compact-")]
    shutil.rmtree(path)
    if not ok:
        return "damaged!"
    if leftovers:
        return "leftover!"
    return "finished" if finished else "killed"


def _copy_timed(work: Work, args: list[str]) -> float:
    path = work.root / "timed-copy"
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(work.full, path)
    try:
        return _timed([*args, str(path)])
    finally:
        shutil.rmtree(path)


def _dump_trial(rng: random.Random, work: Work, i: int) -> str:
    from coniti.impl.log import LogBackend

    directory = work.root / f"dump-{i}"
    directory.mkdir()
    target = directory / "m.jsonl"
    old = b"the previous file\n"
    target.write_bytes(old)
    budget = _budget(work, "dump", lambda: _timed(["dump", str(work.full), str(work.root / "t.jsonl")]))
    _run_killed(["dump", str(work.full), str(target)], rng.uniform(0, budget * 1.1))
    data = target.read_bytes()
    if data == old:
        outcome = "old"
    elif data.count(b"\n") == LOAD_RECORDS + 1 and data.endswith(b"\n"):
        outcome = "new"
    else:
        return "torn!"
    with LogBackend(work.full, read_only=True) as store:
        store.dump(target, ("loaded",))
    names = sorted(p.name for p in directory.iterdir())
    shutil.rmtree(directory)
    return outcome if names == ["m.jsonl"] else "leftover!"


def _hostile_trial(rng: random.Random, work: Work, i: int) -> str:
    from coniti.errors import ConitiError
    from coniti.impl.log import LogBackend

    directory = work.root / f"hostile-{i}"
    directory.mkdir()
    victim = directory / "victim"
    victim.write_bytes(b"precious\n")
    target = directory / "target"
    case = ("planted-partial", "fifo", "directory", "socket", "link-to-fifo")[i % 5]
    sock = None
    if case == "planted-partial":
        target.with_name("target.partial").symlink_to(victim)
    elif case == "fifo":
        os.mkfifo(target)
    elif case == "directory":
        target.mkdir()
    elif case == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(target))
    else:
        os.mkfifo(victim.with_name("fifo"))
        target.symlink_to(victim.with_name("fifo"))
    before = os.lstat(target).st_mode if os.path.lexists(target) else None
    outcome = "written"
    try:
        with LogBackend(work.full, read_only=True) as store:
            if rng.random() < 0.5:
                store.dump(target, ("loaded",))
            else:
                store.export_log(target)
    except ConitiError:
        outcome = "refused"
    except Exception:
        outcome = "crash!"
    finally:
        if sock is not None:
            sock.close()
    changed = before is not None and outcome == "refused" and os.lstat(target).st_mode != before
    if victim.read_bytes() != b"precious\n" or changed:
        outcome = "outside-write!"
    shutil.rmtree(directory)
    return f"{outcome} ({case})" if not outcome.endswith("!") else outcome


def _bomb_files(root: Path, size: int, big_load: int) -> dict[str, Path]:
    """A gzip of one valid record line repeated (``size`` bytes decompressed), a gzip of one line
    ``size`` bytes long, and a plain file of ``big_load`` valid records."""
    from coniti.memfile import FORMAT, VERSION

    header = json.dumps({"format": FORMAT, "version": VERSION, "embedding_id": None, "namespace": [],
                         "created_at": "2025-01-01T00:00:00Z", "count": 1}) + "\n"
    line = json.dumps({"note": {"id": "a", "text": "x" * 100, "timestamp": 1.0, "metadata": {}},
                       "vector": [1.0] * 8, "embedding_id": None, "namespace": []}) + "\n"
    files = {"repeated-line.gz": root / "bomb-repeated.jsonl.gz", "endless-line.gz": root / "bomb-long.jsonl.gz"}
    with gzip.open(files["repeated-line.gz"], "wt", compresslevel=9) as f:
        f.write(header)
        block = line * max(1, (1 << 20) // len(line))
        for _ in range(max(1, size // len(block))):
            f.write(block)
    with gzip.open(files["endless-line.gz"], "wt", compresslevel=9) as f:
        f.write(header)
        f.write('{"note": {"id": "a", "text": "')
        chunk = "x" * (1 << 20)
        for _ in range(max(1, size // len(chunk))):
            f.write(chunk)
    records = root / f"bomb-{big_load}-records.jsonl"
    if not records.exists():
        rng = random.Random(big_load)
        with open(records, "w", encoding="utf-8") as f:
            f.write(header.replace('"count": 1', f'"count": {big_load}'))
            for i in range(big_load):
                vector = [round(rng.uniform(-1, 1), 6) for _ in range(DIM)]
                f.write(json.dumps({
                    "note": {"id": f"r{i}", "text": f"note {i} " + "lorem ipsum " * 8,
                             "timestamp": 1_700_000_000.0 + i, "metadata": {"i": i}},
                    "vector": vector, "embedding_id": None, "namespace": [], "dtype": "float32",
                }) + "\n")
    files["valid-records"] = records
    return files


BOMB_SIZE = 800 * 1024 * 1024


def _bomb_trial(rng: random.Random, work: Work, i: int) -> str:
    files = _bomb_files(work.root, work.bomb_size, work.big_load)
    name = list(files)[i % len(files)]
    target = "log" if name == "valid-records" else "memory"
    store = work.root / f"bomb-store-{i}"
    proc = _start("bomb", str(files[name]), target, str(store))
    out, err = proc.communicate(timeout=600)
    shutil.rmtree(store, ignore_errors=True)
    lines = out.splitlines()
    if proc.returncode != 0 or len(lines) < 2:
        return "crash!"
    result = json.loads(lines[1])
    peak = result["peak"]
    kind = "loaded" if result["outcome"] == "loaded" else "refused"
    work.peaks[name] = max(work.peaks.get(name, 0), peak)
    if peak > RSS_BOUND:
        return "over-memory!"
    return f"{kind} ({name})"


def _store_class(name: str, trials: int, seed: int, work: Work, records: int) -> tuple[Counter[str], int]:
    """Run store fault class ``name`` (:data:`STORE_CLASSES`) ``trials`` times on one store of
    ``records`` records built for all of them; returns the outcomes and how many copies
    ``verify()`` flagged."""
    spec = importlib.util.spec_from_file_location("faultcheck_store", TOOLS / "faultcheck_store.py")
    assert spec is not None and spec.loader is not None
    store_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(store_check)
    root = work.root / "store-campaign"
    if not root.exists():
        root.mkdir()
        work.store_campaign = store_check.prepare(str(root), records, DIM)
    source, truth = work.store_campaign
    result = store_check.run_class(STORE_CLASSES[name], trials, source, truth, str(root), seed=seed)
    outcomes = Counter({STORE_OUTCOMES.get(k, k): v for k, v in result["tally"].items()})
    return outcomes, int(result["verify_flagged"])


def _durability(trials: int, seed: int, work: Work) -> Counter[str]:
    spec = importlib.util.spec_from_file_location("crashtest", TOOLS / "crashtest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["crashtest"] = module
    spec.loader.exec_module(module)
    try:
        report = module.run(work.root / "crash-store", trials=trials, seed=seed)
    except module.CrashTestFailure as exc:
        return Counter({f"failed! ({exc})"[:200]: 1})
    return Counter({"ok": len(report.trials)})


TRIALS: dict[str, Trial] = {
    "kill-load": _load_trial(signal.SIGKILL),
    "sigint-load": _load_trial(signal.SIGINT),
    "kill-import": _import_trial,
    "kill-compact": _compact_trial,
    "kill-dump": _dump_trial,
    "hostile": _hostile_trial,
    "bomb": _bomb_trial,
}


def run(
    classes: Sequence[str],
    trials: int,
    *,
    seed: int = 0,
    work_dir: Path | None = None,
    bomb_size: int = BOMB_SIZE,
    big_load: int = 100_000,
    counts: dict[str, int] | None = None,
    store_records: int = 2000,
) -> dict[str, Any]:
    """Run ``trials`` trials of each class (``counts`` overrides per class); returns the report:
    per class the outcome counts and the seconds taken (store classes: also ``verify_flagged``),
    plus the bombs' peak RSS. The store classes share one store of ``store_records`` records."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        work = Work(Path(tmp), bomb_size, big_load)
        report: dict[str, Any] = {"seed": seed, "classes": {}}
        for name in classes:
            n = (counts or {}).get(name, trials)
            started = time.monotonic()
            rng = random.Random(f"{seed}/{name}")
            extra: dict[str, Any] = {}
            if name == "durability":
                outcomes = _durability(n, seed, work)
            elif name in STORE_CLASSES:
                outcomes, extra["verify_flagged"] = _store_class(name, n, seed, work, store_records)
            else:
                outcomes = Counter(TRIALS[name](rng, work, i) for i in range(n))
            report["classes"][name] = {
                "trials": n, "outcomes": dict(sorted(outcomes.items())),
                "seconds": round(time.monotonic() - started, 1), **extra,
            }
        report["bomb_peak_rss_mb"] = {k: round(v / 2**20, 1) for k, v in work.peaks.items()}
    return report


def failures(report: dict[str, Any], classes: Sequence[str]) -> list[str]:
    """The ``!`` outcomes of ``classes`` in ``report``, as ``class: outcome xN``."""
    out = []
    for name in classes:
        for outcome, n in report["classes"].get(name, {}).get("outcomes", {}).items():
            if outcome.endswith("!") or "!" in outcome:
                out.append(f"{name}: {outcome} x{n}")
    return out


def _print(report: dict[str, Any]) -> None:
    print(f"faultcheck, seed {report['seed']}")
    for name, entry in report["classes"].items():
        outcomes = ", ".join(f"{k} {v}" for k, v in entry["outcomes"].items())
        if "verify_flagged" in entry:
            outcomes += f"; verify flagged {entry['verify_flagged']}"
        print(f"  {name:<13} {entry['trials']:>5} trials {entry['seconds']:>7.1f}s  {outcomes}")
    if report["bomb_peak_rss_mb"]:
        peaks = ", ".join(f"{k} {v} MB" for k, v in report["bomb_peak_rss_mb"].items())
        print(f"  peak RSS of the bomb children: {peaks} (bound {RSS_BOUND >> 20} MB)")


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--child"]:
        return _child(args_in[1:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="trials per class (default 10)")
    parser.add_argument("--classes", default=",".join(CLASSES), help="comma-separated classes")
    parser.add_argument("--assert", dest="asserted", default="",
                        help="classes whose ! outcomes make the exit status 1")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--bomb-mib", type=int, default=800, help="decompressed size of the bombs")
    parser.add_argument("--big-load", type=int, default=100_000,
                        help="records of the valid file the bomb class loads into a LogBackend")
    parser.add_argument("--store-records", type=int, default=2000,
                        help="records of the store the store classes damage (default 2000)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(args_in)
    classes = [c for c in args.classes.split(",") if c]
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        parser.error(f"unknown classes: {', '.join(unknown)} (known: {', '.join(CLASSES)})")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    report = run(classes, args.trials, seed=seed, bomb_size=args.bomb_mib << 20,
                 big_load=args.big_load, store_records=args.store_records)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    bad = failures(report, [c for c in args.asserted.split(",") if c])
    for line in bad:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
