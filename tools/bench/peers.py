"""The peers benchmark: coniti beside the embedded vector stores, side by side in one run.

Usage (from the repository root)::

    .venv/bin/python tools/bench_peers.py                       # N=100,000, 3 rounds, every system
    .venv/bin/python tools/bench_peers.py --n 2000 --rounds 1   # a quick look
    .venv/bin/python tools/bench_peers.py --systems coniti      # coniti alone (no peers' venv)
    .venv/bin/python tools/bench_peers.py --setup-only          # build the peers' venv, then stop

**The peers live in a venv of their own**, never the project's: ``--venv`` (default
``$XDG_CACHE_HOME/coniti-bench-peers/venv``, else ``~/.cache/...``), made with ``python -m venv``
and filled by pip with :data:`PEERS` (pinned) on first use; a marker file records what it holds, so
later runs reuse it. coniti runs under the interpreter that runs this script, with this checkout's
``coniti`` first on ``PYTHONPATH``.

**Workload** (seeded, the same for every system; written once to a work folder as ``.npz``): ``n``
notes over ``--namespaces`` namespaces (note ``i`` in namespace ``i % namespaces``), each with a
384-dim unit vector (Gaussian, normalised), a short text, a ``user`` out of ``--users`` and a
timestamp spread over the 365 days before a fixed instant. Ingest in batches of ``--batch`` notes,
each batch one namespace, the namespaces taking turns. Queries: ``--queries`` unit vectors, each
a note's vector plus as much Gaussian noise (cosine about 0.7 to that note), with a user and a
namespace drawn for the filtered and one-namespace asks. The phases and what each timer holds:
``bench/peer_worker.py``'s docstring.

**Rounds.** Each round runs every system in a fresh child process of its own, in an order that
rotates from round to round; each child makes a fresh store in a fresh folder, removed after it.
Figures are medians: per round the median over queries (or updates), then the median over rounds.
``numpy`` is the same asks as brute force over the workload's matrix (``matrix @ q`` then
``argpartition``; the filtered, window and one-namespace asks over row indexes computed before the
clock starts: "numpy with a precomputed mask"), timed in each system's child right after each of
its asks (``bench/peer_worker.py``), numpy's BLAS on one thread (:data:`NUMPY_BLAS`). The
``numpy`` column is the one timed beside coniti (beside the first system when coniti is not run),
in the same rounds, and ``coniti / numpy`` is the ratio of the two medians of those rounds.

**Recall@10** of every system against the exact answer (numpy over the matrix as ingested) is
printed beside each ask's latency when it is below 1.0.

**Output.** The table (phase | each system | numpy | best peer | coniti vs best peer) and which
systems sync their writes to disk, on stdout; every figure and every round's raw times as JSON at
``--json`` (default ``bench_peers.json`` in the current folder) for a plot script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().with_name("peer_worker.py")

PEERS = (
    "chromadb==1.5.9",
    "lancedb==0.40.0",
    "qdrant-client==1.20.0",
    "sqlite-vec==0.1.9",
    "langgraph-checkpoint-sqlite==3.1.2",
    "numpy",
)
"""What the peers' venv holds (the versions measured in issue 33)."""

QDRANT_LOCAL_MAX = 20_000
"""Above this many notes qdrant's local mode is left out unless ``--systems`` names it: its local
mode keeps every point in Python and warns past 20,000 (about 60 notes/s at N=2,000 here)."""

PEER_SYSTEMS = ("chroma", "lancedb", "qdrant", "sqlite-vec", "langgraph-sqlite")
SYSTEMS = ("coniti", *PEER_SYSTEMS)
DIM = 384
DAY = 86_400.0
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the workload's fixed "now"

# (phase, what the row shows, higher is better?, unit)
ROWS: tuple[tuple[str, str, bool, str], ...] = (
    ("ingest", "ingest, batches of {batch}", True, "notes/s"),
    ("all", "top-10 over all namespaces (exact)", False, "ms"),
    ("ann", "top-10 over all namespaces (approximate: HNSW)", False, "ms"),
    ("filtered", "top-10 with a metadata filter (user == X)", False, "ms"),
    ("window", "top-10 in the last 30 days", False, "ms"),
    ("one_ns", "top-10 in one namespace", False, "ms"),
    ("close", "close", False, "s"),
    ("reopen", "reopen + first query", False, "s"),
    ("disk", "bytes on disk per note", False, "B"),
    ("update", "update one note", False, "ms"),
    ("delete", "delete, batches of {batch}", True, "notes/s"),
)
ASKS = ("all", "filtered", "window", "one_ns")
ANN = "coniti-ann"
"""coniti with structure ``ann`` (``bench/peer_worker.py``'s ``ANN_OPTIONS``): run beside ``coniti``
in every round (ingest and the top-10 over all namespaces only), shown in the ``ann`` row beside
chroma's top-10 over all namespaces (its HNSW index); the other peers have no such row."""
APPROXIMATE = {ANN: "coniti", "chroma": "chroma"}
"""Whose top-10 over all namespaces fills the ``ann`` row, and in which column."""
WRITES = ("ingest", "update", "delete", "close")
"""Rows whose best peer is the best among the peers that sync their writes (a faster one that does
not is named beside it)."""
NUMPY_BLAS = "one thread"
"""How numpy's ``matrix @ q`` runs in the children: numpy's BLAS (OpenBLAS in its wheel) held to one
thread (``OPENBLAS_NUM_THREADS=1``), the one core an ask of coniti uses. A threaded product timed
between other work stalls while its threads wake (3 ms instead of 0.17 ms a product at N=2,000
here), which would flatter every system beside it; on an idle machine two threads take about half
the wall time of one at N=100,000."""
EXACT = 0.99
"""A peer's ask counts as exact (comparable with coniti's, recall 1.0) from this recall@10 on; a
faster one below it is named beside the best exact peer, with its recall."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "coniti-bench-peers" / "venv"


def base_python() -> Path:
    """The interpreter the peers' venv is made from: this one, unless its ``sqlite3`` cannot load
    extensions (sqlite-vec, and LangGraph's store through it, need that; a pyenv build often
    lacks it), then the system's ``/usr/bin/python3`` when that one can."""
    probe = "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)"
    for candidate in (Path(sys.executable), Path("/usr/bin/python3")):
        if (
            candidate.exists()
            and subprocess.run([str(candidate), "-c", probe], capture_output=True).returncode == 0
        ):
            return candidate
    return Path(sys.executable)


def ensure_venv(venv: Path) -> Path:
    """The python of the peers' venv at ``venv``, made and filled with :data:`PEERS` when it does
    not hold them yet. Raises ``RuntimeError`` (with pip's last lines) when it cannot be built."""
    python = venv / "bin" / "python"
    marker = venv / "coniti-peers.json"
    wanted = json.dumps(sorted(PEERS))
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    if not python.exists():
        subprocess.run([str(base_python()), "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PEERS],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(
            f"the peers' venv at {venv} could not be built: {proc.stderr.strip()[-1500:]}"
        )
    marker.write_text(wanted)
    return python


# -- workload --------------------------------------------------------------------------------------


def unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def make_workload(
    folder: Path, n: int, namespaces: int, users: int, batch: int, queries: int, seed: int
) -> dict[str, Any]:
    """Write the workload (module docstring) to ``folder`` and return its arrays."""
    rng = np.random.default_rng(seed)
    vectors = unit(rng.standard_normal((n, DIM), dtype=np.float32))
    ns = np.arange(n) % namespaces
    user = rng.integers(0, users, n)
    times = NOW - rng.uniform(0, 365 * DAY, n)
    src = rng.integers(0, n, queries)
    q = unit(vectors[src] + rng.standard_normal((queries, DIM), dtype=np.float32) / np.sqrt(DIM))
    n_updates = min(50, n)
    updates = unit(rng.standard_normal((n_updates, DIM), dtype=np.float32))
    per_ns = [np.flatnonzero(ns == j) for j in range(namespaces)]
    chunks = [[rows[s : s + batch] for s in range(0, len(rows), batch)] for rows in per_ns]
    order = [c[b] for b in range(max(map(len, chunks))) for c in chunks if b < len(c)]
    doomed = [rows[(rows // namespaces) % 10 == 3] for rows in per_ns]
    dchunks = [[rows[s : s + batch] for s in range(0, len(rows), batch)] for rows in doomed]
    deletes = [c[b] for b in range(max(map(len, dchunks))) for c in dchunks if b < len(c)]
    meta = {
        "n": n, "namespaces": namespaces, "n_users": users, "batch": batch, "seed": seed,
        "query_users": rng.integers(0, users, queries).tolist(),
        "query_ns": rng.integers(0, namespaces, queries).tolist(),
        "since": NOW - 30 * DAY,
        "update_ids": rng.choice(n, n_updates, replace=False).tolist(),
        "batches": [b.tolist() for b in order],
        "deletes": [b.tolist() for b in deletes if len(b)],
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(
        folder / "data.npz",
        vectors=vectors,
        ns=ns,
        users=user,
        times=times,
        queries=q,
        updates=updates,
    )
    (folder / "meta.json").write_text(json.dumps(meta))
    return {"vectors": vectors, "ns": ns, "users": user, "times": times, "queries": q, **meta}


def note_id(i: int) -> str:
    return f"n{i:07d}"


def _top(matrix: np.ndarray, q: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Row numbers of the exact top-10 of ``q`` (among ``rows``), best first."""
    sub = matrix if rows is None else matrix[rows]
    scores = sub @ q
    k = min(10, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    best = part[np.argsort(-scores[part], kind="stable")]
    return best if rows is None else rows[best]


def exact_answers(w: dict[str, Any]) -> dict[str, list[list[str]]]:
    """The exact answers (ids) of every ask (untimed: numpy is timed in the children, beside each
    system's asks)."""
    matrix, queries = w["vectors"], w["queries"]
    by_user = {u: np.flatnonzero(w["users"] == u) for u in set(w["query_users"])}
    by_ns = {j: np.flatnonzero(w["ns"] == j) for j in range(w["namespaces"])}
    recent = np.flatnonzero(w["times"] >= w["since"])
    rows_of = {
        "all": lambda j: None,
        "filtered": lambda j: by_user[w["query_users"][j]],
        "window": lambda j: recent,
        "one_ns": lambda j: by_ns[w["query_ns"][j]],
    }
    return {
        ask: [
            [note_id(int(i)) for i in _top(matrix, queries[j], rows(j))]
            for j in range(len(queries))
        ]
        for ask, rows in rows_of.items()
    }


# -- running ---------------------------------------------------------------------------------------


def run_child(
    python: Path,
    system: str,
    data: Path,
    work: Path,
    queries: int,
    timeout: float,
    code: Path = ROOT,
) -> dict[str, Any]:
    """One round of ``system`` in a child process (``code``: the checkout whose ``coniti`` it
    imports, for coniti)."""
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = (
        "1"  # numpy's product on one core, as coniti's ask (see NUMPY_BLAS)
    )
    if system.startswith("coniti"):
        env["PYTHONPATH"] = str(code)
    else:
        env.pop("PYTHONPATH", None)
    work.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [str(python), str(WORKER), system, str(data), str(work), str(queries)],
            capture_output=True, text=True, env=env, timeout=timeout,
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    marker = "@@RESULT@@"
    if proc.returncode != 0 or marker not in proc.stdout:
        return {
            "system": system,
            "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"],
        }
    result: dict[str, Any] = json.loads(proc.stdout.rsplit(marker, 1)[1])
    return result


def figures_of(
    result: dict[str, Any], n: int, truth: dict[str, list[list[str]]]
) -> dict[str, float]:
    """One round's figures of one system (the table's units) and its recall@10 per ask."""
    out = {"ingest": n / result["ingest_s"]}
    if "close_s" in result:  # every phase (not an asks-only system)
        out |= {
            "close": result["close_s"],
            "reopen": result["reopen_s"],
            "disk": result["disk_bytes"] / n,
            "update": statistics.median(result["update_s"]) * 1e3,
            "delete": result["deleted"] / result["delete_s"],
        }
    for ask in ASKS:
        if f"{ask}_s" not in result:
            continue
        out[ask] = statistics.median(result[f"{ask}_s"]) * 1e3
        if f"numpy_{ask}_s" in result:  # numpy timed beside this system's asks
            out[f"numpy_{ask}"] = statistics.median(result[f"numpy_{ask}_s"]) * 1e3
        hits = [
            len(set(got) & set(want)) / max(1, len(want))
            for got, want in zip(result[f"{ask}_ids"], truth[ask], strict=True)
        ]
        out[f"{ask}_recall"] = float(np.mean(hits))
    return out


def fmt(value: float, unit: str) -> str:
    if unit in ("notes/s", "B"):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.3f} s" if value >= 0.01 else f"{value * 1e3:.1f} ms"
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def table(
    medians: dict[str, dict[str, float]],
    numpy_ms: dict[str, float],
    systems: Sequence[str],
    batch: int,
    syncs: dict[str, str],
) -> str:
    peers = [s for s in systems if not s.startswith("coniti") and s in medians]
    head = [
        "phase",
        *[s for s in systems if s in medians],
        "numpy",
        "best peer",
        "coniti vs best",
        "coniti / numpy",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for phase, label, higher, unit in ROWS:
        cells = [label.format(batch=batch)]
        for s in systems:
            if s not in medians:
                continue
            v = medians[s].get(phase)
            cell = "-" if v is None else fmt(v, unit)
            recall = medians[s].get(f"{phase}_recall")
            if recall is not None and recall < 0.9995:
                cell += f" (recall {recall:.2f})"
            cells.append(cell)
        cells.append(fmt(numpy_ms[phase], "ms") if phase in numpy_ms else "")
        every = {p: medians[p][phase] for p in peers if phase in medians[p]}
        if phase == "ann":  # approximate beside approximate, each with its recall
            exact = every
        elif phase in WRITES:  # against the peers that sync their writes, as coniti does
            exact = {p: v for p, v in every.items() if syncs.get(p, "").startswith("yes")}
        else:
            exact = {
                p: v for p, v in every.items() if medians[p].get(f"{phase}_recall", 1.0) >= EXACT
            }
        vals = exact or every
        if vals and "coniti" in medians:
            pick = max if higher else min
            best = pick(vals, key=lambda p: vals[p])
            b, c = vals[best], medians["coniti"][phase]
            cell = f"{best} {fmt(b, unit)}"
            fastest = pick(every, key=lambda p: every[p])
            if fastest not in vals and phase in WRITES:
                cell += f" (not synced: {fastest} {fmt(every[fastest], unit)})"
            elif fastest not in vals:
                recall = medians[fastest][f"{phase}_recall"]
                cell += (
                    f" (approximate: {fastest} {fmt(every[fastest], unit)} at recall {recall:.2f})"
                )
            cells.append(cell)
            ratio = (b / c) if higher else (c / b)
            cells.append(f"{ratio:.2f}x slower" if ratio > 1 else f"**{1 / ratio:.2f}x faster**")
        else:
            cells += ["", ""]
        has = "coniti" in medians and phase in numpy_ms
        cells.append(f"{medians['coniti'][phase] / numpy_ms[phase]:.2f}x" if has else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "Syncs its writes to disk: " + "; ".join(f"{s}: {syncs[s]}" for s in systems if s in syncs)
    )
    return "\n".join(lines)


def write_results(
    a: argparse.Namespace,
    systems: Sequence[str],
    runs: dict[str, list[dict[str, Any]]],
    truth: dict[str, list[list[str]]],
    errors: dict[str, Any],
    done: int,
) -> None:
    """The JSON (``a.json``) and the table (beside it, ``.md``) of the rounds ``done`` so far:
    written after every round, so that a run stopped early still leaves its figures."""
    per_round = {s: [figures_of(res, a.n, truth) for res in rs] for s, rs in runs.items() if rs}
    medians = {
        s: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for s, fs in per_round.items()
    }
    for source, column in APPROXIMATE.items():  # the approximate row
        if source in medians and column in medians and "all" in medians[source]:
            medians[column]["ann"] = medians[source]["all"]
            medians[column]["ann_recall"] = medians[source]["all_recall"]
    beside = "coniti" if "coniti" in per_round else next(iter(per_round), None)
    numpy_rounds = {
        ask: [f[f"numpy_{ask}"] for f in per_round[beside]] for ask in ASKS if beside is not None
    }
    numpy_ms = {k: statistics.median(v) for k, v in numpy_rounds.items()}
    syncs = {s: runs[s][0]["syncs"] for s in runs if runs[s]}
    out = {
        "n": a.n, "rounds": done, "namespaces": a.namespaces, "users": a.users, "batch": a.batch,
        "queries": a.queries, "seed": a.seed, "dim": DIM, "medians": medians, "numpy_ms": numpy_ms,
        "per_round": per_round, "numpy_per_round": numpy_rounds, "numpy_beside": beside, "syncs": syncs, "errors": errors,
        "rows": [{"phase": ph, "label": lb.format(batch=a.batch), "higher_is_better": hi, "unit": u} for ph, lb, hi, u in ROWS],
    }  # fmt: skip
    a.json.write_text(json.dumps(out, indent=1))
    head = f"N={a.n:,} notes, {a.namespaces} namespaces, {DIM}-dim, {done} round(s), medians; {a.queries} queries per ask"
    a.json.with_suffix(".md").write_text(
        head + "\n\n" + table(medians, numpy_ms, systems, a.batch, syncs) + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--seed", type=int, default=33)
    p.add_argument(
        "--systems", default=None,
        help=f"comma-separated, of: {', '.join(SYSTEMS)} (default: all; qdrant only up to n={QDRANT_LOCAL_MAX:,})",
    )  # fmt: skip
    p.add_argument("--venv", type=Path, default=None, help="the peers' venv (made when missing)")
    p.add_argument("--json", type=Path, default=Path("bench_peers.json"))
    p.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds for one system's round")
    p.add_argument(
        "--baseline-code", type=Path, default=None,
        help="also run coniti from this checkout (e.g. an export of main), as column coniti@base",
    )  # fmt: skip
    p.add_argument(
        "--from-json", type=Path, default=None, help="print the table of a run's JSON, then stop"
    )  # fmt: skip
    p.add_argument("--setup-only", action="store_true", help="build the peers' venv, then stop")
    p.add_argument(
        "--no-ann", action="store_true",
        help="leave out coniti with structure ann (the approximate row)",
    )  # fmt: skip
    a = p.parse_args(argv)
    if a.systems is None:  # qdrant's local mode is for small collections (it warns past 20,000)
        systems = [s for s in SYSTEMS if s != "qdrant" or a.n <= QDRANT_LOCAL_MAX]
    else:
        systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        p.error(f"--systems: unknown system {unknown[0]!r} (known: {', '.join(SYSTEMS)})")
    if a.baseline_code is not None:
        if not (a.baseline_code / "coniti" / "__init__.py").is_file():
            p.error(f"--baseline-code: {a.baseline_code} holds no coniti package")
        systems.insert(1 if "coniti" in systems else 0, "coniti@base")
    if "coniti" in systems and not a.no_ann and importlib.util.find_spec("usearch") is not None:
        runs_too = [ANN]  # the approximate row (coniti's ann structure needs usearch)
    else:
        runs_too = []
    if a.from_json is not None:
        saved = json.loads(a.from_json.read_text())
        order = [s for s in ("coniti", "coniti@base", *PEER_SYSTEMS) if s in saved["medians"]]
        print(
            f"N={saved['n']:,} notes, {saved['namespaces']} namespaces, {saved['dim']}-dim, "
            f"{saved['rounds']} round(s), medians; {saved['queries']} queries per ask\n"
        )
        print(table(saved["medians"], saved["numpy_ms"], order, saved["batch"], saved["syncs"]))
        return 0
    venv = a.venv or default_venv()
    peer_python: Path | None = None
    if a.setup_only or any(not s.startswith("coniti") for s in systems):
        try:
            peer_python = ensure_venv(venv)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            print(f"bench_peers: {e}", file=sys.stderr)
            return 2
    if a.setup_only:
        print(f"peers' venv ready: {venv}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-peers-", dir=a.work))
    try:
        w = make_workload(work / "data", a.n, a.namespaces, a.users, a.batch, a.queries, a.seed)
        truth = exact_answers(w)
        everyone = [*systems, *runs_too]
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in everyone}
        errors: dict[str, Any] = {}
        for r in range(a.rounds):
            order = everyone[r % len(everyone) :] + everyone[: r % len(everyone)]
            for s in order:
                python = Path(sys.executable) if s.startswith("coniti") else peer_python
                assert python is not None
                code = a.baseline_code.resolve() if s == "coniti@base" else ROOT
                res = run_child(
                    python,
                    s.split("@")[0],
                    work / "data",
                    work / f"r{r}-{s}",
                    a.queries,
                    a.timeout,
                    code,
                )
                if "error" in res:
                    errors[s] = res["error"]
                    print(f"round {r + 1}: {s} failed: {res['error']}", file=sys.stderr)
                    continue
                runs[s].append(res)
                print(
                    f"round {r + 1}: {s} done (ingest {a.n / res['ingest_s']:,.0f} notes/s)",
                    file=sys.stderr,
                )
            write_results(a, systems, runs, truth, errors, done=r + 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print((a.json.with_suffix(".md")).read_text())
    print(f"JSON: {a.json}")
    return 1 if errors else 0
