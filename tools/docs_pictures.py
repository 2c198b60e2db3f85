#!/usr/bin/env python3
"""Draw the documentation's pictures as SVG: the architecture and a record's timeline.

``docs/img/architecture.svg``: the layers, data flowing down from the log to the integrations.
``docs/img/timeline.svg``: one record's life in a real ``LogBackend``, made by this script in a
temporary directory (a put, a correction by someone for a reason, reads as of two points, an
erasure), drawn from what the store answers: sequence numbers, kinds, actors, reasons, the text a
read as of each point returns, and what the history shows after the erasure. Nothing in it is
typed by hand, and nothing varies between runs (recorded times are left out), so the files are
byte for byte the same each time; ``tests/test_docs_pictures.py`` checks that.

Run: ``.venv/bin/python tools/docs_pictures.py [--out DIR]`` (default ``docs/img``).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
FONT = "font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\""
INK = "#1f2933"
MUTED = "#52606d"


def _text(x: float, y: float, s: str, size: int = 13, weight: str = "normal", anchor: str = "start",
          fill: str = INK) -> str:
    return (f'<text x="{x:g}" y="{y:g}" font-size="{size}" font-weight="{weight}" '
            f'text-anchor="{anchor}" fill="{fill}">{escape(s)}</text>')


def _box(x: float, y: float, w: float, h: float, fill: str, stroke: str) -> str:
    return (f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="8" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"/>')


def _arrow(x1: float, y1: float, x2: float, y2: float, colour: str = MUTED) -> str:
    return (f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{colour}" '
            f'stroke-width="1.8" marker-end="url(#head)"/>')


def _svg(width: int, height: int, title: str, body: Sequence[str]) -> str:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT} role="img" aria-label="{escape(title)}">\n'
            f"<title>{escape(title)}</title>\n"
            '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{MUTED}"/>'
            "</marker></defs>\n"
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n')
    return head + "\n".join(body) + "\n</svg>\n"


# -- the architecture ------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    title: str
    where: str
    lines: tuple[str, ...]
    fill: str
    stroke: str


LAYERS = (
    Layer("Event log", "coniti/log/  ·  LMDB, one durable transaction per write",
          ("every change is an event: put, delete, meta, clear, erase, feedback, op",
           "hash-chained, with who and why; the Merkle tree over it proves what it holds"),
          "#e3f2fd", "#1e88e5"),
    Layer("Projections", "coniti/log/projections.py  ·  folded in the same transaction",
          ("records by id and by time, every past version, counts, metadata, op ids",
           "get · scan · count · at(seq) · history · diff · verify (each read checked)"),
          "#e8f5e9", "#43a047"),
    Layer("Derived indexes", "<store>/derived/  ·  rebuilt from the log, never authoritative",
          ("vector structures (flat, segment tree, ann) · keyword index (BM25) · content index",
           "snapshots memory-mapped at open; the events after them are folded in"),
          "#fff8e1", "#f9a825"),
    Layer("Engine", "coniti/engine/  ·  ContinuityEngine, built by Container",
          ("ingest (embed, admit, index, write) · update · remove · improve",
           "ask: semantic, keyword, hybrid, recent · context blocks · at(seq): as of any point"),
          "#f3e5f5", "#8e24aa"),
)
OUTLETS = (("coniti (CLI)", "coniti/cli/"), ("MCP server", "coniti mcp"),
           ("LangGraph", "store · checkpointer"))


def architecture() -> str:
    width, left, box_w, box_h, gap = 760, 40, 600, 92, 34
    body: list[str] = [_text(left, 34, "coniti: the layers", 18, "bold")]
    y = 56
    for i, layer in enumerate(LAYERS):
        body.append(_box(left, y, box_w, box_h, layer.fill, layer.stroke))
        body.append(_text(left + 16, y + 26, layer.title, 16, "bold"))
        body.append(_text(left + box_w - 16, y + 26, layer.where, 11, anchor="end", fill=MUTED))
        for j, line in enumerate(layer.lines):
            body.append(_text(left + 16, y + 52 + 20 * j, line, 13))
        if i < len(LAYERS) - 1:
            body.append(_arrow(left + box_w / 2, y + box_h + 2, left + box_w / 2, y + box_h + gap - 2))
        y += box_h + gap
    outlet_w = (box_w - 2 * 20) / 3
    for k, (name, sub) in enumerate(OUTLETS):
        x = left + k * (outlet_w + 20)
        body.append(_arrow(x + outlet_w / 2, y - gap + 2, x + outlet_w / 2, y - 2))
        body.append(_box(x, y, outlet_w, 58, "#eceff1", "#546e7a"))
        body.append(_text(x + outlet_w / 2, y + 25, name, 15, "bold", "middle"))
        body.append(_text(x + outlet_w / 2, y + 45, sub, 12, anchor="middle", fill=MUTED))
    # writes go up: every write is appended to the log first
    top, bottom = 56 + 20, y + 29
    rail = left + box_w + 40
    body.append(f'<path d="M{left + box_w:g},{bottom:g} H{rail:g} V{top:g} H{left + box_w + 4:g}" '
                f'fill="none" stroke="#c62828" stroke-width="1.8" marker-end="url(#head)"/>')
    body.append(f'<text x="{rail + 14:g}" y="{(top + bottom) / 2:g}" font-size="12" fill="#c62828" '
                f'text-anchor="middle" transform="rotate(90 {rail + 14:g} {(top + bottom) / 2:g})">'
                "writes: appended to the log, then folded down</text>")
    body.append(_text(left, y + 92, "Reads flow down: each layer is computed from the one above it; "
                      "only the log is authoritative.", 12, fill=MUTED))
    return _svg(width, int(y + 110), "coniti's architecture: log, projections, derived indexes, "
                "engine, integrations", body)


# -- a record's timeline ---------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    seq: int
    kind: str
    actor: str
    reason: str
    text: str
    replaces: int | None = None


@dataclass(frozen=True)
class Story:
    steps: tuple[Step, ...]
    reads: tuple[tuple[int, str], ...]  # (as-of seq, text a read of the record returned)
    after: tuple[str, ...]  # the record's history after the erasure, one line per event


def story(directory: Path) -> Story:
    """One record's life in a real LogBackend under ``directory``."""
    import numpy as np

    from coniti import Note
    from coniti.impl.log import LogBackend
    from coniti.memory import GetRequest, MemoryRecord, PutRequest, UpsertOp, WriteRequest

    def record(text: str) -> MemoryRecord:
        return MemoryRecord(note=Note(id="bob-budget", text=text, timestamp=1_736_600_000.0),
                            vector=np.ones(3, "float32"))

    with LogBackend(directory / "store") as store:
        with store.audit(actor="assistant", reason="remembered from a chat"):
            store.put(PutRequest(records=[record("Bob's kitchen budget is 25,000 dollars.")]))
        first = store.head
        with store.audit(actor="bob", reason="the budget is in euros"):
            store.write(WriteRequest(ops=[UpsertOp(record=record("Bob's kitchen budget is 25,000 EUR."))]))
        second = store.head

        def read(seq: int) -> str:
            (got,) = store.at(seq).get(GetRequest(ids=["bob-budget"])).records
            return got.note.text

        reads = ((first, read(first)), (second, read(second)))
        steps = [Step(e.seq, e.kind, e.actor or "", e.reason or "",
                      e.record.note.text if e.record else "", e.replaces)
                 for e in store.history("bob-budget")]
        with store.audit(actor="privacy-officer"):
            store.erase(["bob-budget"], reason="Bob asked to be forgotten")
        history = store.history("bob-budget")
        erase = history[-1]
        steps.append(Step(erase.seq, erase.kind, erase.actor or "", erase.reason or "", ""))
        after = tuple(f"{e.seq} {e.kind}: " + ("content erased" if e.erased else
                                               "the receipt" if e.kind == "erase" else "kept")
                      for e in history)
    return Story(tuple(steps), reads, after)


def timeline(s: Story) -> str:
    width, left, right = 760, 40, 720
    axis_y = 150
    xs = [left + 90 + i * (right - left - 180) / max(len(s.steps) - 1, 1) for i in range(len(s.steps))]
    colours = {"put": "#1e88e5", "delete": "#6d4c41", "erase": "#c62828"}
    body = [_text(left, 34, "One record's timeline: versions, who and why, reads as of a point, erasure",
                  16, "bold"),
            _arrow(left, axis_y, right, axis_y),
            _text(right, axis_y + 20, "sequence number (the log's order)", 11, anchor="end", fill=MUTED)]
    for x, step in zip(xs, s.steps, strict=True):
        colour = colours.get(step.kind, MUTED)
        body.append(f'<circle cx="{x:g}" cy="{axis_y}" r="9" fill="{colour}"/>')
        body.append(_text(x, axis_y + 4, str(step.seq), 10, "bold", "middle", "#ffffff"))
        what = f"{step.kind} by {step.actor}" + (f", replaces {step.replaces}" if step.replaces else "")
        body.append(_text(x, 66, what, 13, "bold", "middle", colour))
        body.append(_text(x, 86, f"why: {step.reason}", 12, anchor="middle", fill=MUTED))
        if step.text:
            body.append(_text(x, 106, f"\u201c{step.text}\u201d", 12, anchor="middle"))
        body.append(f'<line x1="{x:g}" y1="{axis_y - 12}" x2="{x:g}" y2="116" stroke="{colour}" '
                    'stroke-width="1" stroke-dasharray="3 3"/>')
    y = axis_y + 52
    body.append(_text(left, y, "Read as of a point (before the erasure): store.at(seq).get(...)", 13, "bold"))
    for seq, text in s.reads:
        y += 22
        body.append(_text(left + 16, y, f"at({seq}) \u2192 \u201c{text}\u201d", 13))
    y += 34
    body.append(_text(left, y, "After the erasure: history(\"bob-budget\")", 13, "bold"))
    for line in s.after:
        y += 22
        body.append(_text(left + 16, y, line, 13))
    y += 30
    body.append(_text(left, y, "Every version's text, vector and metadata are gone from every read, view and "
                      "export; each event keeps its digest,", 12, fill=MUTED))
    body.append(_text(left, y + 17, "so the hash chain still verifies, and the erase event is the receipt.",
                      12, fill=MUTED))
    return _svg(width, int(y + 36), "A record's timeline in coniti", body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the SVG files go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "architecture.svg").write_text(architecture(), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        (args.out / "timeline.svg").write_text(timeline(story(Path(tmp))), encoding="utf-8")
    print(f"wrote architecture.svg and timeline.svg to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
