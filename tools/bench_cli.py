#!/usr/bin/env python3
"""The command-line latency benchmark: ``coniti ask`` and ``coniti add`` end to end on a large store.

Usage (from the repository root)::

    .venv/bin/python tools/bench_cli.py --n 200000            # build the store once, then measure
    .venv/bin/python tools/bench_cli.py --n 2000 --runs 3     # a quick run
    .venv/bin/python tools/bench_cli.py --store DIR --phases  # also the in-process phase split

The store (``--store``, default ``$TMPDIR/coniti-bench-cli-N``; reused when it already holds N notes)
holds the notes of ``tools/bench/engine.py``'s corpus in the root namespace, each with a random unit
float32 vector of the ``minilm`` embedder's width, stamped with ``minilm``'s spec id as the engine
writes it (the CLI then loads ``minilm`` for it, as on a real store). Random vectors are what the
latency needs: every exact structure does the same work whatever the vectors hold, and embedding N
notes with ``minilm`` first would take longer than the whole benchmark.

Each command runs ``--runs`` times as a fresh process (``coniti`` from this checkout's ``.venv``,
with bytecode caches written first): wall clock from spawn to exit, Python start included; the
table gives the median and [min..max]. ``add`` adds one note per run (the store grows by ``--runs``
notes). ``--phases`` also times, in one fresh process per run, the parts of an ``ask``: importing
the command line, loading the embedder, opening the store, the engine's open (its snapshot of
derived state restored and checked, the events after it folded; a rebuild when there is none), and
the ask itself. Wall clock on a shared machine: compare rows of one run, and the CPU column.

To compare with another version of coniti in the same run, give its directory in ``PYTHONPATH``
(the children run outside this checkout, so it wins): e.g. ``git archive main coniti | tar -x -C
/tmp/main`` and ``PYTHONPATH=/tmp/main python tools/bench_cli.py ...``. Give each version its own
copy of the store (``cp -a``) when their snapshots of derived state differ (e.g. the checksum of
their blocks): a version that refuses the other's snapshot rebuilds the whole namespace on every
read-only ``ask``. ``--reindex`` rewrites the store's snapshot with the code being measured first
(an ``add`` rewrites it only once it lags by 1,000 events).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

QUESTION = "budget review for the client meeting"
_NEUTRAL = tempfile.gettempdir()
"""The children's working directory: not the checkout, whose ``coniti/`` would shadow a
``PYTHONPATH`` given to measure another version."""
BATCH = 5_000

PHASES_CODE = r"""
import json, sys, time
marks = [(time.perf_counter(), time.process_time())]
from coniti.cli.app import run  # noqa: F401  (what `coniti` imports first)
from coniti.cli.engine_cmds import ask  # noqa: F401
from coniti.container import Container, stored_embedding
from coniti.impl.log import LogBackend
marks.append((time.perf_counter(), time.process_time()))
store = LogBackend(sys.argv[1], read_only=True)
marks.append((time.perf_counter(), time.process_time()))
name = stored_embedding(store)
marks.append((time.perf_counter(), time.process_time()))
container = Container(memory=store, embedding=name)
engine = container.engine
engine.structures()
marks.append((time.perf_counter(), time.process_time()))
engine.ask(sys.argv[2])
marks.append((time.perf_counter(), time.process_time()))
names = ["import", "store", "embedder", "engine_open", "ask"]
print(json.dumps({n: [b[0] - a[0], b[1] - a[1]] for n, a, b in zip(names, marks, marks[1:])}))
"""


def make_store(path: Path, n: int, seed: int) -> None:
    """Fill ``path`` with ``n`` notes (see the module docstring) and save the engine's snapshot of
    them (:func:`reindex`: reads never write one); nothing if it already has them."""
    import numpy as np
    from bench.engine import corpus

    from coniti.impl.log import LogBackend
    from coniti.memory import MemoryRecord, MetaSetRequest, PutRequest
    from coniti.minilm import MiniLMEmbedder

    if path.is_dir() and any(path.iterdir()):
        with LogBackend(path, read_only=True) as store:
            enough = store.count(store.count_request()).count >= n
        if enough:
            LogBackend(path).close()  # a writable open brings a store of an older layout to this one's
            return
        raise SystemExit(f"{path} holds another store: remove it or choose --store")
    embedder = MiniLMEmbedder()
    spec_id, dim = embedder.spec_id, embedder.dim
    rng = np.random.default_rng(seed)
    notes = corpus(n, seed)
    started = time.perf_counter()
    with LogBackend(path) as store:
        store.set_meta(MetaSetRequest(key="embedding_id", value=spec_id))
        for a in range(0, n, BATCH):
            rows = rng.standard_normal((min(BATCH, n - a), dim)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            records = [
                MemoryRecord.trusted(note, row, spec_id, ())
                for note, row in zip(notes[a : a + BATCH], rows, strict=True)
            ]
            store.put(PutRequest(records=records))
    print(f"built {path}: {n:,} notes in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    reindex(path)


def reindex(path: Path) -> None:
    """Rewrite the snapshot of the store's root namespace with the coniti being measured."""
    code = (
        "import sys\n"
        "from coniti.container import Container, stored_embedding\n"
        "from coniti.impl.log import LogBackend\n"
        "with LogBackend(sys.argv[1]) as store:\n"
        "    with Container(memory=store, embedding=stored_embedding(store)) as c:\n"
        "        c.engine.reindex()\n"
    )
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=_NEUTRAL)
    print(f"reindexed {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def timed_runs(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) seconds of ``runs`` fresh processes of ``argv``; a failure
    stops the benchmark."""
    spent, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=_NEUTRAL)
        spent.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return spent, cpu


def phases(store: Path, runs: int, env: dict[str, str]) -> dict[str, list[list[float]]]:
    """Per part of an ask (see the module docstring), [wall, CPU] seconds in each of ``runs``
    processes."""
    out: dict[str, list[list[float]]] = {}
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", PHASES_CODE, str(store), QUESTION],
            capture_output=True, text=True, env=env, check=False, cwd=_NEUTRAL,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"phase run failed:\n{proc.stderr[-2000:]}")
        for key, value in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            out.setdefault(key, []).append(value)
    return out


def row(label: str, values: list[float]) -> str:
    return f"| {label} | {statistics.median(values):.3f} | [{min(values):.3f}..{max(values):.3f}] |"


def timed_row(label: str, timed: tuple[list[float], list[float]]) -> str:
    return f"{row(label, timed[0])} {statistics.median(timed[1]):.3f} |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--n", type=int, default=200_000, help="notes in the store (default 200,000)")
    p.add_argument("--runs", type=int, default=5, help="fresh processes per command (default 5)")
    p.add_argument("--store", type=Path, default=None, help="the store directory (see above)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--phases", action="store_true", help="also the in-process split of an ask")
    p.add_argument("--commands", default="ask,add", help="which of ask,add to time")
    p.add_argument("--reindex", action="store_true",
                   help="first rewrite the store's snapshot with the code measured")  # fmt: skip
    args = p.parse_args(argv)
    if args.n < 1 or args.runs < 1:
        p.error("--n and --runs must be >= 1")
    store = args.store or Path(tempfile.gettempdir()) / f"coniti-bench-cli-{args.n}"
    make_store(store, args.n, args.seed)
    if args.reindex:
        reindex(store)
    compileall.compile_dir(ROOT / "coniti", quiet=1)  # as an installed package has them
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CONITI_STORE"] = str(store)
    coniti = str(Path(sys.executable).parent / "coniti")
    commands = {
        "ask": [coniti, "ask", QUESTION, "-k", "5"],
        "add": [coniti, "add", "a note added by the CLI benchmark", "--meta", "bench=cli"],
    }
    lines = [
        f"coniti CLI latency: store of {args.n:,} notes ({store}), {args.runs} runs each",
        "",
        "| what | median wall s | [min..max] | median CPU s |",
        "|---|---:|---|---:|",
    ]
    for name in [c for c in args.commands.split(",") if c]:
        if name not in commands:
            p.error(f"unknown command {name!r} in --commands")
        timed = timed_runs(commands[name], args.runs, env)
        lines.append(timed_row(f"`coniti {name}` end to end", timed))
    start = timed_runs([sys.executable, "-c", "pass"], args.runs, env)
    lines.append(timed_row("`python -c pass` (interpreter start)", start))
    if args.phases:
        split = phases(store, args.runs, env)
        labels = {
            "import": "import the command line and the library",
            "store": "open the store (LogBackend)",
            "embedder": "find and load the stored embedder (minilm)",
            "engine_open": "engine open: snapshot restored, later events folded",
            "ask": "ask (embed the question, search, resolve)",
        }
        lines += ["", "| phase of an ask, in-process | median wall s | [min..max] | median CPU s |",
                  "|---|---:|---|---:|"]  # fmt: skip
        for key, label in labels.items():
            wall = [w for w, _ in split[key]]
            cpu = statistics.median(c for _, c in split[key])
            lines.append(f"{row(label, wall)} {cpu:.3f} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
