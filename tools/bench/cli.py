"""coniti's side-by-side benchmark: coniti's backends against raw LMDB and sqlite, in one run.

Usage (from the repository root)::

    .venv/bin/python tools/bench.py                      # N=20,000, 3 rounds, every phase
    .venv/bin/python tools/bench.py --quick              # N=2,000, 2 rounds, small counts: < 1 minute
    .venv/bin/python tools/bench.py --n 100000 --phases bulk,get,scan --systems log,lmdb
    .venv/bin/python tools/bench.py --n 1000000 --rounds 1 --phases reopen,peak --systems log,lmdb
    .venv/bin/python tools/bench.py --namespaces 100 --ids time  # the many-namespace, time-ordered-id variant
    .venv/bin/python tools/bench.py --profile get,scan --systems log   # cProfile of coniti's timed calls

Systems (``--systems``; see :mod:`bench.systems`): ``log`` (coniti LogBackend, durability "sync"),
``memory`` (InMemoryBackend), ``lmdb`` (raw LMDB written in the benchmark: the minimum work coniti's
design needs) and ``sqlite`` (sqlite3, WAL, synchronous=FULL). The workload (:mod:`bench.workload`) is
deterministic and seeded: every system stores the same records.

A round builds a fresh store per system, then runs the selected phases in order. Within a phase the
systems are interleaved (batch by batch, call by call, or chunk by chunk) and their order rotates from
round to round, so drift of the machine falls on every system alike. Each metric gets one figure per
round; the table shows the median and [min..max] over rounds, and each coniti figure as a ratio to raw
LMDB and to sqlite (``x``: coniti's figure divided by the baseline's, in the metric's unit, so read it
with the unit's direction, e.g. >1 is better for rec/s and worse for us/call). The target column
checks issue 7's targets on the LogBackend rows. The benchmark checks that all systems return the same
records and counts and stops if they do not.

Phases (``--phases``, comma-separated; default all):

bulk        put N records in durable batches of 500 (rec/s)
single      500 durable one-record put calls (us/call)
concurrent  8 threads doing one-record durable puts (rec/s, all threads together); coniti also with
            group commit off (``log_nogc``: LogBackend(group_commit=False) on a copy of ``log``'s
            store made just before the phase, so both write into the same N records)
get         5,000 random ids, one id per call, full records back (us/call)
scan        every record in (timestamp, write order), pages of 500 (rec/s)
count       count over the middle half of the time range (us/call)
asof        LogBackend.at(seq): view open, get and a scan page at the start (5%), middle and head of
            history, with the current store's get and page from the same start points (us/call,
            ms/page); and, at the start and middle, the page that ends the view's visible records
            (it must find that nothing later is visible)
reopen      close, open, first get (ms)
size        bytes on disk per record (files of the store, lock files excluded)
dump        dump and load of the memory file (rec/s); the raw LMDB row is the floor: the same lines
            written from raw LMDB records with orjson, and coniti's file parsed and put raw
rebuild     LogBackend.rebuild() and verify() (events/s)
peak        peak memory of dump, verify and a full scan, each in a fresh subprocess: anonymous RSS
            sampled every 2 ms (heap, numpy and LMDB buffers; excludes the mapped store file) and
            peak RSS (VmHWM, includes mapped file pages, so it grows with what the op touches)
engine      engine ingest and ask (:mod:`bench.engine`, also ``tools/bench_engine.py``), once after the rounds

Times are wall-clock (time.perf_counter) with the garbage collector on, as callers run; before each
phase the objects alive so far are frozen (gc.freeze), so one system's data does not slow another's
collections. No test asserts a time: ``tests/test_bench_smoke.py`` only runs ``--quick`` at a tiny N.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .common import summary_line, workdir
from .peak import child_peak
from .report import figures_json, header, print_profiles, table
from .runner import PHASES, Bench, Config
from .systems import SYSTEMS
from .workload import WorkloadSpec

__all__ = ["main", "parse"]


def _list(value: str, allowed: Sequence[str], what: str) -> list[str]:
    """A comma list of names from ``allowed``; ArgumentTypeError naming the unknown ones."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"{what}: unknown {bad or value!r}; choose from {', '.join(allowed)}"
        )
    return items


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, Config]:
    """The parsed options and the run's configuration; a bad option exits with status 2, naming it."""
    p = argparse.ArgumentParser(description=summary_line(__doc__))
    p.add_argument(
        "--n",
        type=int,
        default=None,
        help="records in the bulk load (default 20,000; --quick 2,000)",
    )
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 2)")
    p.add_argument("--quick", action="store_true", help="small counts, finishes in under a minute")
    p.add_argument(
        "--systems",
        default=None,
        help="comma list of log, memory, lmdb, sqlite (default: all)",
    )
    p.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    p.add_argument(
        "--namespaces", type=int, default=1, help="spread records over this many namespaces"
    )
    p.add_argument(
        "--ids", choices=("uuid4", "time"), default="uuid4", help="random or time-ordered ids"
    )
    p.add_argument("--dim", type=int, default=384, help="vector dimensions (float32)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--dir", type=Path, default=None, help="where stores go (default: a temporary directory)"
    )
    p.add_argument("--json", type=Path, default=None, help="also write every per-round figure here")
    p.add_argument("--profile", default="", help="phases whose coniti calls run under cProfile")
    p.add_argument("--profile-out", type=Path, default=None, help="directory for the .prof files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--child-peak", help=argparse.SUPPRESS)
    p.add_argument("--child-system", help=argparse.SUPPRESS)
    p.add_argument("--child-path", help=argparse.SUPPRESS)
    p.add_argument("--child-namespaces", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        systems = _list(args.systems or ",".join(SYSTEMS), list(SYSTEMS), "--systems")
        phases = _list(args.phases, PHASES, "--phases")
        profile = _list(args.profile, PHASES, "--profile") if args.profile else []
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    n = args.n if args.n is not None else (2_000 if args.quick else 20_000)
    if not 1 <= n <= 10_000_000:
        p.error(f"--n must be between 1 and 10,000,000, got {n}")
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 3)
    if rounds < 1:
        p.error(f"--rounds must be >= 1, got {rounds}")
    quick = args.quick
    single = 100 if quick else 500
    writers, per_writer = 8, (10 if quick else 100)
    if "single" not in phases:
        single = 0
    if "concurrent" not in phases:
        per_writer = 0
    spec = WorkloadSpec(
        n=n,
        extra=single + writers * per_writer,
        seed=args.seed,
        ids=args.ids,
        namespaces=args.namespaces,
        dim=args.dim,
    )
    cfg = Config(
        n=n,
        rounds=rounds,
        systems=systems,
        phases=phases,
        spec=spec,
        single=single,
        writers=writers,
        per_writer=per_writer,
        gets=1_000 if quick else 5_000,
        count_calls=10 if quick else 50,
        reopens=3 if quick else 10,
        asof_gets=200 if quick else 1_000,
        asof_pages=3 if quick else 10,
        base=args.dir or Path("."),  # main() sets the work directory it opens
        profile=profile,
        profile_out=args.profile_out,
        quick=quick,
        verbose=not args.quiet,
    )
    return args, cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with the hidden ``--child-peak``, one peak-memory child) and print
    the report on stdout; progress goes to stderr."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = parse(argv)
    if args.child_peak:
        namespaces = [tuple(ns) for ns in json.loads(args.child_namespaces)]
        child_peak(args.child_peak, args.child_system, Path(args.child_path), namespaces)
        return 0
    with workdir(args.dir, "coniti-bench-") as base:
        cfg.base = base
        bench = Bench(cfg)
        t0 = time.perf_counter()
        res = bench.run()
        elapsed = time.perf_counter() - t0
    print(header(cfg, argv))
    print()
    print(table(res, cfg.systems))
    for text in res.notes:
        print(f"\nnote: {text}")
    print(f"\n({elapsed:.0f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures_json(cfg, argv, res), indent=1))
    if cfg.profile:
        print_profiles(bench, cfg.profile_out)
    return 0
