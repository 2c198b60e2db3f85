"""The documentation's pictures stay true: tools/docs_pictures.py and tools/plot_bench.py regenerate
the committed SVG files byte for byte, and plot_bench reads benchmark output as its docstring says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
TOOLS = ROOT / "tools"


def _tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOLS / name), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_the_pictures_regenerate_identically(tmp_path: Path) -> None:
    """tools/docs_pictures.py writes architecture.svg and timeline.svg equal to the committed files
    (the timeline is drawn from a store the script makes, so the store's answers are in the file)."""
    proc = _tool("docs_pictures.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for name in ("architecture.svg", "timeline.svg"):
        assert (tmp_path / name).read_bytes() == (IMG / name).read_bytes(), f"run tools/docs_pictures.py ({name})"


def test_the_timeline_shows_what_the_store_answered() -> None:
    """The timeline holds both versions' text as read as of their points, who changed it and why,
    and the erased history."""
    svg = (IMG / "timeline.svg").read_text(encoding="utf-8")
    for text in ("at(1) → “Bob's kitchen budget is 25,000 dollars.”", "at(2) → “Bob's kitchen budget is 25,000 EUR.”",
                 "put by bob, replaces 1", "why: the budget is in euros", "1 put: content erased",
                 "3 erase: the receipt"):
        assert text.replace("'", "&#x27;") in svg or text in svg, text


CHARTS = sorted(p.stem for p in (IMG / "data").glob("*.json"))


@pytest.mark.parametrize("name", CHARTS)
def test_each_chart_regenerates_from_its_results(tmp_path: Path, name: str) -> None:
    """docs/img/NAME.svg is what plot_bench.py draws from docs/img/data/NAME.json."""
    out = tmp_path / "chart.svg"
    proc = _tool("plot_bench.py", str(IMG / "data" / f"{name}.json"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == (IMG / f"{name}.svg").read_bytes(), "run tools/plot_bench.py"


def test_the_charts_are_in_the_docs() -> None:
    """Each chart of docs/img/ is shown on a page of docs/."""
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    assert CHARTS
    for name in CHARTS:
        assert f"(img/{name}.svg)" in pages, name


def test_a_recall_report_becomes_recall_at_5_against_keyword(tmp_path: Path) -> None:
    """--from-recall reads tools/bench_recall.py's report: one row per strategy, mode and question
    kind with its recall@5, the keyword strategy as the baseline; an embedder not in it is named."""
    figures = {"all": {"n": 4, "recall@1": 0.5, "recall@5": 0.75, "mrr": 0.6}}
    report = {"command": "tools/bench_recall.py --embedders minilm --json out.json", "results": {"minilm": {
        "strategies": {"keyword": {"scoped": figures, "unscoped": figures},
                       "hybrid": {"scoped": {"all": {**figures["all"], "recall@5": 1.0}}}}}}}
    source = tmp_path / "recall.json"
    source.write_text(json.dumps(report), encoding="utf-8")
    results, chart = tmp_path / "results.json", tmp_path / "chart.svg"
    proc = _tool("plot_bench.py", "--from-recall", str(source), "--results", str(results), "--out", str(chart))
    assert proc.returncode == 0, proc.stderr
    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["baseline"] == "keyword" and document["source"] == "tools/bench_recall.py --embedders minilm"
    assert [(r["phase"], r["system"], r["value"]) for r in document["results"]] == [
        ("scoped, all (n=4)", "keyword", 0.75), ("unscoped, all (n=4)", "keyword", 0.75),
        ("scoped, all (n=4)", "hybrid", 1.0)]
    assert "1.33x (1.00 recall@5)" in chart.read_text(encoding="utf-8")
    proc = _tool("plot_bench.py", "--from-recall", str(source), "--embedder", "nope", "--out", str(chart))
    assert proc.returncode == 1 and "--embedder: 'nope' is not in the report (it has: minilm)" in proc.stderr


def test_a_bench_run_goes_through_to_a_chart(tmp_path: Path) -> None:
    """tools/bench.py --json at a tiny N, converted by --from-bench, gives a results file in the
    documented form (one row per metric and system) and a chart comparing coniti with raw LMDB."""
    bench = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(TOOLS / "bench.py"), "--quiet", "--n", "200", "--rounds", "1",
                           "--phases", "get,size", "--systems", "log,lmdb", "--dir", str(tmp_path / "stores"),
                           "--json", str(bench)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results, chart = tmp_path / "results.json", tmp_path / "chart.svg"
    proc = _tool("plot_bench.py", "--from-bench", str(bench), "--results", str(results), "--out", str(chart))
    assert proc.returncode == 0, proc.stderr
    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["baseline"] == "raw LMDB"
    assert {(r["phase"], r["system"]) for r in document["results"]} == {
        (p, s) for p in ("get 1 id, full record", "size on disk") for s in ("coniti LogBackend", "raw LMDB")}
    svg = chart.read_text(encoding="utf-8")
    assert "get 1 id, full record" in svg and "x the time: " in svg and "x the size: " in svg
    assert "--dir" not in svg and "--json" not in svg


def test_lower_is_better_units_are_turned_round(tmp_path: Path) -> None:
    """A system taking twice the baseline's time gets a bar of 0.50 labelled '2.00x the time'; one
    with twice its rate a bar of 2.00; each label gives the figure itself too."""
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"baseline": "B", "title": "t", "results": [
        {"phase": "get", "system": "A", "value": 20, "unit": "us/call"},
        {"phase": "get", "system": "B", "value": 10, "unit": "us/call"},
        {"phase": "scan", "system": "A", "value": 200, "unit": "rec/s"},
        {"phase": "scan", "system": "B", "value": 100, "unit": "rec/s"},
    ]}), encoding="utf-8")
    out = tmp_path / "c.svg"
    assert _tool("plot_bench.py", str(results), "--out", str(out)).returncode == 0
    svg = out.read_text(encoding="utf-8")
    assert "0.50x (2.00x the time: 20.0 us/call)" in svg and "2.00x (200.0 rec/s)" in svg


def test_long_titles_and_phase_names_are_cut_into_lines(tmp_path: Path) -> None:
    """A title over 88 characters and a phase name over 32 are drawn as several lines, cut at
    spaces (so they do not run into the bars or off the chart), every word kept."""
    phase = "top-10 with a metadata filter (user == X)"
    title = "coniti against embedded vector stores, N=100,000 in 10 namespaces, medians of 2 rounds (more)"
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"baseline": "B", "title": title, "results": [
        {"phase": phase, "system": "A", "value": 20, "unit": "ms"},
        {"phase": phase, "system": "B", "value": 10, "unit": "ms"},
    ]}), encoding="utf-8")
    out = tmp_path / "c.svg"
    assert _tool("plot_bench.py", str(results), "--out", str(out)).returncode == 0
    svg = out.read_text(encoding="utf-8")
    assert ">top-10 with a metadata filter</text>" in svg and ">(user == X)</text>" in svg
    assert ">(more)</text>" in svg and f">{title}</text>" not in svg


@pytest.mark.parametrize(("rows", "message"), [
    ([{"phase": "get", "system": "A", "value": -1, "unit": "us"}], "results[0].value: -1 is not a number >= 0"),
    ([{"phase": "get", "system": "A", "value": 1}], "results[0]: missing unit"),
    ([{"phase": "get", "system": "A", "value": 1, "unit": "us"}], "baseline: 'B' has no figure"),
])
def test_bad_results_are_refused_in_one_line(tmp_path: Path, rows: list[dict[str, object]], message: str) -> None:
    """A malformed results file exits 1 with one line naming the field, and writes no chart."""
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"baseline": "B", "results": rows}), encoding="utf-8")
    out = tmp_path / "c.svg"
    proc = _tool("plot_bench.py", str(results), "--out", str(out))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert not out.exists()


def test_a_peers_run_becomes_a_chart_of_exact_answers(tmp_path: Path) -> None:
    """--from-peers keeps a query phase's systems at recall@10 >= 0.99 only, marks a peer that does
    not sync, leaves out coniti@base and close, and the chart is drawn from the result."""
    run = {
        "n": 1000, "namespaces": 2, "rounds": 1, "queries": 5,
        "rows": [{"phase": "all", "label": "top-10", "higher_is_better": False, "unit": "ms"},
                 {"phase": "close", "label": "close", "higher_is_better": False, "unit": "s"},
                 {"phase": "ingest", "label": "ingest", "higher_is_better": True, "unit": "notes/s"}],
        "medians": {"coniti": {"all": 2.0, "all_recall": 1.0, "close": 0.01, "ingest": 900.0},
                    "coniti@base": {"all": 3.0, "all_recall": 1.0, "close": 0.01, "ingest": 500.0},
                    "fast": {"all": 0.5, "all_recall": 0.5, "close": 0.0, "ingest": 3000.0},
                    "exact": {"all": 4.0, "all_recall": 1.0, "close": 0.01, "ingest": 800.0}},
        "syncs": {"coniti": "yes", "fast": "no (strace)", "exact": "yes"},
    }  # fmt: skip
    source = tmp_path / "run.json"
    source.write_text(json.dumps(run), encoding="utf-8")
    results, out = tmp_path / "results.json", tmp_path / "chart.svg"
    proc = _tool("plot_bench.py", "--from-peers", str(source), "--results", str(results), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = {(r["phase"], r["system"]) for r in json.loads(results.read_text(encoding="utf-8"))["results"]}
    assert rows == {("top-10", "coniti"), ("top-10", "exact"), ("ingest", "coniti"),
                    ("ingest", "fast (no sync)"), ("ingest", "exact")}  # fmt: skip
    assert out.read_text(encoding="utf-8").startswith("<svg")
