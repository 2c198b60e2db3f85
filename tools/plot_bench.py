#!/usr/bin/env python3
"""Draw benchmark results as an SVG bar chart of ratios to a baseline system.

The input is a JSON file of results, either a list of rows or an object holding them::

    {"title": "...", "baseline": "raw LMDB", "source": "the command that measured it",
     "results": [{"phase": "get 1 id", "system": "coniti LogBackend", "value": 26.3, "unit": "us/call"},
                 ...]}

Each row is one figure: ``phase`` (what was measured), ``system`` (who), ``value`` (a number, > 0
when lower is better) and ``unit``; ``better`` ("higher" or "lower") may say which way is better, else it follows
from the unit: times and sizes (``s``, ``ms``, ``us``, ``µs``, ``ns``, ``B``, ``KB``, ``MB``, ``GB``,
alone or per something, such as ``us/call`` or ``B/rec``) are better lower, everything else
(``rec/s``, ``recall@5``, ...) higher. A phase without the baseline's figure is left out, and
said so in the chart's footnote.

For every phase the chart draws one bar per other system: its figure relative to the baseline's,
turned so that a longer bar is always better (``value / baseline`` when higher is better,
``baseline / value`` when lower is), with a line at 1 (the baseline). Each bar is labelled with
that ratio and, for lower-is-better units, the plain ratio of the figures ("3.44x the time").

``--from-bench BENCH_JSON`` first turns the output of ``tools/bench.py --json`` into this form
(medians, with the bench's labels), ``--from-recall RECALL_JSON`` that of ``tools/bench_recall.py
--json`` (recall@5 of each strategy of ``--embedder``, relative to ``keyword``), ``--from-peers
PEERS_JSON`` that of ``tools/bench_peers.py`` (each phase against coniti; query phases only for
systems at recall@10 >= 0.99; a peer that does not sync marked), and writes it to ``--results``. A value may be 0 when higher is better (a zero bar); a baseline of 0 leaves its phase
out.

Run::

    .venv/bin/python tools/plot_bench.py results.json --out chart.svg [--baseline SYSTEM] [--title T]
    .venv/bin/python tools/plot_bench.py --from-bench bench.json --results results.json --out chart.svg

The output depends only on the input (no dates, no randomness): the same file gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
FONT = "font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\""
PALETTE = ("#1e88e5", "#43a047", "#f9a825", "#8e24aa", "#e53935", "#00897b", "#6d4c41")
LOWER_UNITS = re.compile(r"^(s|ms|us|µs|ns|b|kb|mb|gb|kib|mib|gib|bytes)(/.*)?$", re.I)


class ResultsError(ValueError):
    """The results file is not in the form this script reads; the message names what is wrong."""


@dataclass(frozen=True)
class Row:
    phase: str
    system: str
    value: float
    unit: str
    higher: bool


def higher_is_better(unit: str, better: object = None) -> bool:
    """Which way ``unit`` is better: ``better`` when given, else lower for times and sizes."""
    if better is not None:
        if better not in ("higher", "lower"):
            raise ResultsError(f"better: {better!r} is neither 'higher' nor 'lower'")
        return better == "higher"
    return LOWER_UNITS.match(unit.strip()) is None


def read_results(data: Any) -> tuple[list[Row], dict[str, Any]]:
    """The rows of a results document (a list, or an object with ``results``) and its other fields."""
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        meta = {k: v for k, v in data.items() if k != "results"}
        data = data.get("results")
    if not isinstance(data, list) or not data:
        raise ResultsError("results: expected a non-empty list of {phase, system, value, unit}")
    rows = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ResultsError(f"results[{i}]: expected an object")
        missing = {"phase", "system", "value", "unit"} - item.keys()
        if missing:
            raise ResultsError(f"results[{i}]: missing {', '.join(sorted(missing))}")
        value = item["value"]
        higher = higher_is_better(str(item["unit"]), item.get("better"))
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ResultsError(f"results[{i}].value: {value!r} is not a number >= 0")
        if value == 0 and not higher:
            raise ResultsError(f"results[{i}].value: 0 {item['unit']} (lower is better) has no ratio")
        rows.append(Row(str(item["phase"]), str(item["system"]), float(value), str(item["unit"]), higher))
    return rows, meta


def from_bench(bench: dict[str, Any]) -> dict[str, Any]:
    """``tools/bench.py --json`` output as a results document: each metric's median per system."""
    sys.path.insert(0, str(HERE))
    from bench.metrics import METRICS
    from bench.systems import SYSTEMS

    config = bench.get("config", {})
    results = [
        {"phase": METRICS[m["metric"]].label, "system": SYSTEMS[m["system"]].label,
         "value": m["median"], "unit": m["unit"],
         "better": "higher" if METRICS[m["metric"]].higher else "lower"}
        for m in bench["metrics"]
    ]
    return {
        "title": f"coniti LogBackend against raw LMDB and sqlite3, N={config.get('n', 0):,}, "
                 f"medians of {config.get('rounds', 0)} rounds",
        "baseline": "raw LMDB",
        "source": " ".join(_without_output_options(bench.get("command", []))),
        "results": results,
    }


def from_recall(report: dict[str, Any], embedder: str, baseline: str = "keyword") -> dict[str, Any]:
    """``tools/bench_recall.py --json`` output as a results document: recall@5 of each strategy of
    ``embedder``, per mode (scoped, unscoped) and question kind, against the ``baseline`` strategy."""
    try:
        strategies = report["results"][embedder]["strategies"]
    except KeyError:
        raise ResultsError(f"--embedder: {embedder!r} is not in the report "
                           f"(it has: {', '.join(report.get('results', {})) or 'none'})") from None
    results = [
        {"phase": f"{mode}, {kind} (n={figures['n']})", "system": strategy,
         "value": figures["recall@5"], "unit": "recall@5", "better": "higher"}
        for strategy, by_mode in strategies.items()
        for mode in ("scoped", "unscoped")
        for kind, figures in by_mode.get(mode, {}).items()
    ]
    return {
        "title": f"recall@5 of each strategy relative to {baseline}, {embedder} embedder",
        "baseline": baseline,
        "source": " ".join(_without_output_options(str(report.get("command", "")).split())),
        "results": results,
    }


def from_peers(report: dict[str, Any], min_recall: float = 0.99) -> dict[str, Any]:
    """``tools/bench_peers.py`` JSON output as a results document: each phase's median per system
    against coniti; a query phase leaves out a system whose recall@10 is under ``min_recall`` (its
    answer is not the exact top 10), a system that does not sync to disk is marked so, and ``close``
    is left out (all systems close in under 60 ms; its ratios of near-zero times would set the scale)."""
    medians = report["medians"]
    syncs = report.get("syncs", {})
    results = []
    for row in report["rows"]:
        phase = row["phase"]
        if phase == "close":  # every system under 60 ms: ratios of near-zero times would fill the chart
            continue
        for system, figures in medians.items():
            value = figures.get(phase)
            recall = figures.get(f"{phase}_recall")
            if value is None or (recall is not None and recall < min_recall) or system == "coniti@base":
                continue
            name = system if str(syncs.get(system, "yes")).startswith("yes") else f"{system} (no sync)"
            results.append({"phase": row["label"], "system": name, "value": value, "unit": row["unit"],
                            "better": "higher" if row["higher_is_better"] else "lower"})
    return {
        "title": f"coniti against embedded vector stores, N={report['n']:,} in {report['namespaces']} "
                 f"namespaces, medians of {report['rounds']} rounds (query rows: recall@10 >= {min_recall})",
        "baseline": "coniti",
        "source": f"tools/bench_peers.py --n {report['n']} --rounds {report['rounds']} --queries {report['queries']}",
        "results": results,
    }


def _without_output_options(command: Sequence[str]) -> list[str]:
    """The bench command without where it wrote its files (--json PATH, --dir PATH) and -q: what
    was measured."""
    out: list[str] = []
    skip = False
    for word in command:
        if skip:
            skip = False
        elif word in ("--json", "--dir"):
            skip = True
        elif word not in ("-q", "--quiet") and not word.startswith(("--json=", "--dir=")):
            out.append(word)
    return out


def _number(value: float) -> str:
    """A figure as a person reads it: 36,512 / 26.3 / 0.955."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _noun(unit: str) -> str:
    """What a lower-is-better unit measures: "time" or "size"."""
    return "time" if re.match(r"^(s|ms|us|µs|ns)(/|$)", unit.strip(), re.I) else "size"


def _text(x: float, y: float, s: str, size: int = 12, weight: str = "normal", anchor: str = "start",
          fill: str = "#1f2933") -> str:
    return (f'<text x="{x:g}" y="{y:g}" font-size="{size}" font-weight="{weight}" '
            f'text-anchor="{anchor}" fill="{fill}">{escape(s)}</text>')


def _lines(text: str, width: int) -> list[str]:
    """``text`` cut at spaces into lines of at most ``width`` characters (a longer word alone)."""
    lines = [""]
    for word in text.split(" "):
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return lines


def chart(rows: Sequence[Row], baseline: str, title: str, source: str = "") -> str:
    """The SVG of ``rows`` relative to ``baseline`` (see the module docstring)."""
    phases = list(dict.fromkeys(r.phase for r in rows))
    systems = [s for s in dict.fromkeys(r.system for r in rows) if s != baseline]
    if not systems:
        raise ResultsError(f"baseline: no system other than {baseline!r} to compare")
    base = {r.phase: r for r in rows if r.system == baseline and r.value > 0}
    if not base:
        raise ResultsError(f"baseline: {baseline!r} has no figure (systems: "
                           f"{', '.join(dict.fromkeys(r.system for r in rows))})")
    shown = [p for p in phases if p in base]
    skipped = [p for p in phases if p not in base]  # no figure of the baseline, or 0
    ratios: dict[tuple[str, str], tuple[float, float]] = {}
    r_value = {(r.phase, r.system): r.value for r in rows}
    for r in rows:
        if r.system != baseline and r.phase in base:
            plain = r.value / base[r.phase].value
            ratios[(r.phase, r.system)] = (plain if r.higher else 1 / plain, plain)
    top = max([1.0, *(better for better, _ in ratios.values())]) * 1.18
    width, label_w, left, bar_h, gap = 820, 250, 24, 16, 4
    area = width - left - label_w - 230
    x0 = left + label_w

    def x(ratio: float) -> float:
        return x0 + area * ratio / top

    titles = _lines(title, 88)
    body: list[str] = [_text(left, 28 + 19 * i, line, 15, "bold") for i, line in enumerate(titles)]
    top_y = 19 * (len(titles) - 1)
    body.append(_text(left, 46 + top_y, f"Each bar: the system's figure relative to {baseline}'s, "
                      "turned so that longer is better; the line marks 1.", 11, fill="#52606d"))
    y = 70 + top_y
    for phase in shown:
        unit = base[phase].unit
        names = _lines(phase, 32)
        start = y
        for i, line in enumerate(names):
            body.append(_text(left, y + 12 + 14 * i, line, 12, "bold"))
        body.append(_text(left, y + 26 + 14 * (len(names) - 1),
                          f"{unit}, {'higher' if base[phase].higher else 'lower'} is better", 10, fill="#52606d"))
        for k, system in enumerate(systems):
            if (phase, system) not in ratios:
                continue
            better, plain = ratios[(phase, system)]
            colour = PALETTE[k % len(PALETTE)]
            body.append(f'<rect x="{x0:g}" y="{y:g}" width="{x(better) - x0:.1f}" height="{bar_h}" '
                        f'fill="{colour}"/>')
            figure = f"{_number(r_value[(phase, system)])} {unit}"
            label = (f"{better:.2f}x ({figure})" if base[phase].higher
                     else f"{better:.2f}x ({plain:.2f}x the {_noun(unit)}: {figure})")
            body.append(_text(x(better) + 5, y + 12, label, 11))
            y += bar_h + gap
        y = max(y, start + 30 + 14 * (len(names) - 1)) + 14  # the phase's name and unit fit beside its bars
    body.insert(len(titles) + 1, f'<line x1="{x(1.0):.1f}" y1="{60 + top_y}" x2="{x(1.0):.1f}" y2="{y - 6:g}" stroke="#1f2933" '
                'stroke-width="1.2" stroke-dasharray="4 3"/>')
    body.append(_text(x(1.0), y + 8, f"1 = {baseline}", 11, anchor="middle"))
    y += 30
    for k, system in enumerate(systems):
        colour = PALETTE[k % len(PALETTE)]
        body.append(f'<rect x="{left + 170 * k:g}" y="{y - 10:g}" width="12" height="12" fill="{colour}"/>')
        body.append(_text(left + 170 * k + 18, y, system, 11))
    y += 22
    if skipped:
        body.append(_text(left, y, f"Not shown (no {baseline} figure, or 0): {', '.join(skipped)}", 10,
                          fill="#52606d"))
        y += 16
    if source:
        body.append(_text(left, y, f"Measured by: {source}", 10, fill="#52606d"))
        y += 16
    height = int(y + 8)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT} role="img" aria-label="{escape(title)}">\n'
            f"<title>{escape(title)}</title>\n"
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n' + "\n".join(body) + "\n</svg>\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="?", help="the results JSON file")
    parser.add_argument("--from-bench", type=Path, help="a tools/bench.py --json file to convert first")
    parser.add_argument("--from-recall", type=Path, help="a tools/bench_recall.py --json file to convert first")
    parser.add_argument("--from-peers", type=Path, help="a tools/bench_peers.py JSON file to convert first")
    parser.add_argument("--embedder", default="minilm", help="with --from-recall: whose figures (default minilm)")
    parser.add_argument("--results", dest="results_out", type=Path,
                        help="with --from-bench, --from-recall or --from-peers: where the converted results go")
    parser.add_argument("--out", type=Path, required=True, help="the SVG file to write")
    parser.add_argument("--baseline", help="the system the others are compared with (default: the file's)")
    parser.add_argument("--title", help="the chart's title (default: the file's)")
    args = parser.parse_args(argv)
    try:
        if args.from_bench is not None or args.from_recall is not None or args.from_peers is not None:
            if args.from_peers is not None:
                document = from_peers(json.loads(args.from_peers.read_text(encoding="utf-8")))
            elif args.from_bench is not None:
                document = from_bench(json.loads(args.from_bench.read_text(encoding="utf-8")))
            else:
                document = from_recall(json.loads(args.from_recall.read_text(encoding="utf-8")), args.embedder)
            if args.results_out is not None:
                args.results_out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        elif args.results is not None:
            document = json.loads(args.results.read_text(encoding="utf-8"))
        else:
            parser.error("give a results file, --from-bench, --from-recall or --from-peers")
        rows, meta = read_results(document)
        baseline = args.baseline or meta.get("baseline")
        if not baseline:
            raise ResultsError("baseline: give --baseline or a 'baseline' field")
        svg = chart(rows, str(baseline), args.title or str(meta.get("title", "benchmark")),
                    str(meta.get("source", "")))
    except (OSError, json.JSONDecodeError, ResultsError, KeyError) as exc:
        print(f"plot_bench: error: {exc}", file=sys.stderr)
        return 1
    args.out.write_text(svg, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
