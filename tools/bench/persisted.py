"""The persisted engine over a LogBackend (part of ``--part engine``): open, first answer, as-of asks.

Per structure (``flat``, ``segment_tree``), on the N notes of :func:`~bench.engine.corpus`:

* **ingest**: notes/s through ``engine.ingest_many`` in batches of 500 into a new LogBackend
  (``durability="nosync"``, to keep the run short), then 2% of the notes removed (rows kept for
  history) and ``persist()`` (the snapshot written: **save** in s);
* **open to first answer**: a fresh child process imports coniti (**imports s**), then opens the store
  and an engine and asks one question (**open s**: from after the imports to the answer; **open CPU s**:
  the CPU time of every thread meanwhile), the whole
  child from the parent's spawn (**with python s**, interpreter start and imports included), the
  child's peak RSS (``VmHWM``: mapped snapshot pages included; ``ru_maxrss`` would carry the forking
  parent's) and its anonymous RSS at the end (``RssAnon``: what is not a mapped file);
* **asks**: in the parent, an engine opened the same way; per window (full, 10%, 1%) and query the
  ask latency now and through ``engine.at(seq)`` at the start (after 10% of the notes), the middle
  and the head (a view made once per point, and a **new view** per ask: ``engine.at(seq).ask(q)``,
  as ``coniti ask --as-of`` does), the structure's search alone, and numpy brute force (one float32
  product and an argpartition: row positions) on the time slice of the same row matrix, and the same
  brute force plus the ids of its k rows (**brute + ids**: what a caller needs of an answer). The
  search and both brute forces are timed after one untimed run of each on the same query and window,
  so that all three read rows already in cache (the asks before them read other data too; timed cold,
  the search would pay for the brute force's cache). Medians over the queries; the ratio columns are
  the worst as-of median over the current one.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from coniti import Container, Query
from coniti.impl.log import LogBackend
from coniti.packed import PackedStrings

from .common import ROOT, fmt, workdir

__all__ = ["persisted_table", "restore_table", "run_persisted", "run_restore"]

CHILD = """
import time, json, sys
t_import = time.perf_counter()
from coniti import Container
import coniti.impl.log
import coniti.derived as derived
crc_seconds = [0.0]
def timing(checked):
    def timed(data):
        start = time.thread_time()
        try:
            return checked(data)
        finally:
            crc_seconds[0] += time.thread_time() - start
    return timed
derived._CHECKSUMS = {{kind: timing(f) for kind, f in derived._CHECKSUMS.items()}}
t0, cpu0 = time.perf_counter(), time.process_time()
c = Container(memory="log", path={path!r}, structure={structure!r})
c.engine.structures()
t1 = time.perf_counter()
hits = c.engine.ask({question!r}).hits
t2, cpu2 = time.perf_counter(), time.process_time()
c.engine.ask({again!r})
t3 = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
rss = int(status["VmHWM"].split()[0]) / 1024
anon = int(status["RssAnon"].split()[0]) / 1024
print(json.dumps({{
    "open": t2 - t0, "open_cpu": cpu2 - cpu0, "load": t1 - t0, "first_ask": t2 - t1, "second_ask": t3 - t2,
    "crc_cpu": crc_seconds[0], "imports": t0 - t_import, "rss_mb": rss, "anon_mb": anon,
    "hits": len(hits),
}}))
"""
"""A fresh process: imports, then the open to the first answer, split into **load** (store, engine,
the namespace's snapshot read and caught up: ``engine.structures()``), **first ask** and a second
ask of another question (warm); **crc_cpu** is the CPU time spent in CRC-32 checks, summed over
threads (the checks run on a pool: it can exceed their wall time); **open CPU** is the process's CPU
time (every thread) from the open to the first answer: less swayed than wall time by other work on a
shared machine."""

OPEN_FIELDS = ("open", "open_cpu", "load", "first_ask", "second_ask", "crc_cpu", "imports", "with_python")


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_persisted(
    n: int, structures: list[str], queries: int, seed: int,
    keep: Path | None = None, opens: int = 1,
) -> dict[str, Any]:
    """Figures per structure (see the module docstring). ``keep``: the stores live there and are
    reused by the next run with the same ``n`` and seed (no ingest then: ``ingest`` and ``save``
    are those of the run that wrote them); ``opens``: fresh-process opens (medians are reported)."""
    from .engine import corpus, questions, windows

    notes = corpus(n, seed)
    texts = questions(notes, queries, seed)
    ranges = windows(notes, queries, seed)
    out: dict[str, Any] = {"n": n, "structures": {}}
    with workdir(keep, "coniti-bench-persist-") as home:
        for structure in structures:
            path = home / f"{structure}-{n}-{seed}"
            marks_file = path.with_suffix(".marks.json")
            if marks_file.exists():
                kept = json.loads(marks_file.read_text())
                marks, figures = kept["marks"], kept["figures"]
            else:
                marks, figures = _ingest(path, structure, notes, seed)
                if keep is not None:
                    marks_file.write_text(json.dumps({"marks": marks, "figures": figures}))
            runs = [_open_child(path, structure, texts[0], texts[1 % len(texts)]) for _ in range(opens)]
            for name in (*OPEN_FIELDS, "rss_mb", "anon_mb"):
                figures[name] = statistics.median(r[name] for r in runs)
            figures["opens"] = [r["open"] for r in runs]
            figures["asks"] = _asks(path, structure, marks, texts, ranges)
            out["structures"][structure] = figures
    return out


def _ingest(path: Path, structure: str, notes: list[Any], seed: int) -> tuple[dict[str, int], dict[str, Any]]:
    """Ingest ``notes`` into a new store at ``path``, remove 2%, persist and close: the as-of marks
    (start, middle, head) and the ingest rate and save time."""
    from .engine import BATCH

    n = len(notes)
    figures: dict[str, Any] = {}
    store = LogBackend(path, durability="nosync")
    engine = Container(memory=store, structure=structure).engine
    marks: dict[str, int] = {}
    start = time.perf_counter()
    for i in range(0, n, BATCH):
        engine.ingest_many(notes[i : i + BATCH])
        if "start" not in marks and i + BATCH >= n // 10:
            marks["start"] = store.head
        if "middle" not in marks and i + BATCH >= n // 2:
            marks["middle"] = store.head
    figures["ingest"] = n / (time.perf_counter() - start)
    rng = random.Random(seed)
    gone = [notes[i].id for i in rng.sample(range(n), n // 50)]
    for i in range(0, len(gone), BATCH):
        engine.remove(gone[i : i + BATCH])
    marks["head"] = store.head
    figures["save"] = _timed(engine.persist)
    engine.close()
    store.close()
    return marks, figures


def _open_child(path: Path, structure: str, question: str, again: str) -> dict[str, Any]:
    """One fresh process opening the store and answering (see ``CHILD``)."""
    code = CHILD.format(path=str(path), structure=structure, question=question, again=again)
    spawn = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=3600
    )
    with_python = time.perf_counter() - spawn
    if proc.returncode != 0:
        raise SystemExit(f"open child failed:\n{proc.stderr[-2000:]}")
    child: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    child["with_python"] = with_python
    return child


def _asks(
    path: Path, structure: str, marks: dict[str, int], texts: list[str], ranges: dict[str, list[Any]]
) -> dict[str, dict[str, float]]:
    """Median latencies per window: ask now, through ``engine.at(seq)`` at each mark, the
    structure's search alone and numpy brute force on the same rows."""
    import numpy as np

    from .engine import _brute

    store = LogBackend(path, durability="nosync")
    container = Container(memory=store, structure=structure)
    engine = container.engine
    engine.ask(texts[0])
    views = {name: engine.at(seq) for name, seq in marks.items()}
    struct = engine.structures()[0]
    rows = struct.derived_state()
    vecs, times = np.asarray(rows["vecs"]), np.asarray(rows["times"])
    ids = PackedStrings(np.array(rows["id_bytes"]), np.array(rows["id_ends"]))

    def brute_ids(span: Any, unit: Any) -> list[str]:
        return ids.take(_brute(vecs, times, unit, span, 10))
    table: dict[str, dict[str, float]] = {}
    for window, spans in ranges.items():
        samples: dict[str, list[float]] = {}
        for text, span in zip(texts, spans, strict=True):
            query = Query(text=text, time_range=span)
            vector = container.embedder.embed([text])[0]
            unit = vector / max(float(np.linalg.norm(vector)), 1e-30)
            samples.setdefault("ask", []).append(_timed(lambda q=query, e=engine: e.ask(q)))
            for name, view in views.items():
                samples.setdefault(name, []).append(_timed(lambda q=query, v=view: v.ask(q)))
            for name, seq in marks.items():  # what `coniti ask --as-of` does: a view per ask
                samples.setdefault(f"fresh_{name}", []).append(
                    _timed(lambda q=query, s=seq, e=engine: e.at(s).ask(q))
                )
            unit32 = unit.astype(np.float32)
            struct.search(vector, k=10, time_range=span)  # warm-ups: see the module docstring
            _brute(vecs, times, unit32, span, 10)
            brute_ids(span, unit32)
            samples.setdefault("search", []).append(
                _timed(lambda s=span, v=vector, t=struct: t.search(v, k=10, time_range=s))
            )
            samples.setdefault("brute", []).append(
                _timed(lambda s=span, u=unit32, m=vecs, t=times: _brute(m, t, u, s, 10))
            )
            samples.setdefault("brute_ids", []).append(
                _timed(lambda s=span, u=unit32: brute_ids(s, u))
            )
        table[window] = {name: _median_ms(values) for name, values in samples.items()}
    engine.close()
    store.close()
    return table


def persisted_table(figures: dict[str, Any]) -> str:
    """Two markdown tables: open figures, then ask latencies now and as of start/middle/head."""
    lines = [
        f"Persisted engine over LogBackend, N={figures['n']:,} (open figures: medians of "
        f"{len(next(iter(figures['structures'].values()), {}).get('opens', [0]))} fresh processes)",
        "",
        "| structure | ingest notes/s | save s | open to first answer s | open CPU s | load s | first ask s "
        "| second ask s | CRC CPU s | imports s | with python start s | peak RSS MB | anon RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in figures["structures"].items():
        lines.append(
            f"| {name} | {fmt(f['ingest'], 0)} | {fmt(f['save'], 2)} | {fmt(f['open'], 2)} | "
            f"{fmt(f['open_cpu'], 2)} | {fmt(f['load'], 2)} | {fmt(f['first_ask'], 2)} | {fmt(f['second_ask'], 3)} | "
            f"{fmt(f['crc_cpu'], 2)} | {fmt(f['imports'], 2)} | {fmt(f['with_python'], 2)} | "
            f"{fmt(f['rss_mb'], 0)} | {fmt(f['anon_mb'], 0)} |"
        )
    lines += [
        "",
        "| window | structure | ask ms | at start ms | at middle ms | at head ms | worst at/ask | "
        "new view: start ms | middle ms | head ms | worst new/ask | search ms | numpy brute ms | "
        "brute + ids ms | search/brute+ids |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in figures["structures"].items():
        for window, t in f["asks"].items():
            worst = max(t["start"], t["middle"], t["head"]) / t["ask"]
            worst_new = max(t["fresh_start"], t["fresh_middle"], t["fresh_head"]) / t["ask"]
            lines.append(
                f"| {window} | {name} | {fmt(t['ask'], 2)} | {fmt(t['start'], 2)} | "
                f"{fmt(t['middle'], 2)} | {fmt(t['head'], 2)} | {fmt(worst, 2)} | "
                f"{fmt(t['fresh_start'], 2)} | {fmt(t['fresh_middle'], 2)} | {fmt(t['fresh_head'], 2)} | "
                f"{fmt(worst_new, 2)} | {fmt(t['search'], 2)} | {fmt(t['brute'], 2)} | "
                f"{fmt(t['brute_ids'], 2)} | {fmt(t['search'] / t['brute_ids'], 2)} |"
            )
    return "\n".join(lines)


RESTORE_DOC = """``--part restore``: the open path of one namespace's snapshot alone, at sizes where an engine
ingest takes too long for a shared machine. The cached corpus matrix (``--vectors``, as in
``--part structures``) goes into a ``flat`` structure (hex ids, each row born at its own seq), which is
saved with :class:`coniti.derived.DerivedDir`; then, for each way of checking (**at load**: every
CRC-32 block checked by ``load``; **on touch**: the vector blocks deferred, checked by the first
search as it reads them), ``--rounds`` times: **load** (manifest, sizes, the CRC-32 checks not
deferred, memory-mapped), **restore** (``restore_derived_state``), the **first search** over the full
range (k=10) and a **second search** (the same, everything checked). The engine adds to this only
O(1) reads of the store (head, event hash, metadata), its other parts (keyword and content index)
and the fold of events written after the snapshot."""


def run_restore(n: int, seed: int, vectors: str, cache: Path, rounds: int = 2) -> dict[str, Any]:
    """Figures of the snapshot open path at ``n`` rows (see ``RESTORE_DOC``)."""
    import numpy as np

    from coniti.derived import DerivedDir
    from coniti.structure import FlatStructure

    from .engine import matrix

    rows_path, times_path = matrix(n, seed, vectors, cache)
    rows = np.load(rows_path, mmap_mode="r")
    times = np.load(times_path)
    order = np.argsort(times, kind="stable")
    source = FlatStructure()
    for a in range(0, n, 65_536):
        idx = order[a : a + 65_536]
        source.add([f"{i:032x}" for i in idx.tolist()], np.asarray(rows[idx]), times[idx], born=idx + 1)
    query = np.asarray(rows[n // 3], dtype=np.float64)
    out: dict[str, Any] = {"n": n, "rounds": []}
    with tempfile.TemporaryDirectory(dir=cache, prefix="coniti-bench-restore-") as tmp:
        place = DerivedDir(tmp, "bench")
        start = time.perf_counter()
        place.save("x", seq=n, seq_hash="h", key={}, parts={"s": source.derived_state()})
        out["save"] = time.perf_counter() - start
        del source
        for _ in range(rounds):
            for way, defer in (("at load", ()), ("on touch", ("s/vecs",))):
                start = time.perf_counter()
                loaded = place.load("x", key={}, head=n, hash_at=lambda seq: "h", defer=defer)
                loaded_at = time.perf_counter()
                restored = FlatStructure()
                restored.restore_derived_state(loaded.parts["s"], loaded.part_checks("s"))
                restored_at = time.perf_counter()
                restored.search(query, k=10)
                searched_at = time.perf_counter()
                restored.search(query, k=10)
                done = time.perf_counter()
                out["rounds"].append({
                    "way": way, "load": loaded_at - start, "restore": restored_at - loaded_at,
                    "search": searched_at - restored_at, "again": done - searched_at,
                })  # fmt: skip
                del restored, loaded
    out["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    return out


def restore_table(figures: dict[str, Any]) -> str:
    lines = [
        f"Snapshot open path, N={figures['n']:,} (save {fmt(figures['save'], 2)} s, load average "
        f"{' '.join(figures['loadavg'])})",
        "",
        "| checks | load s | restore s | first full search s | second search s | load to first result s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in figures["rounds"]:
        total = r["load"] + r["restore"] + r["search"]
        lines.append(
            f"| {r['way']} | {fmt(r['load'], 2)} | {fmt(r['restore'], 2)} | {fmt(r['search'], 2)} | "
            f"{fmt(r['again'], 3)} | {fmt(total, 2)} |"
        )
    return "\n".join(lines)
