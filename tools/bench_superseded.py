#!/usr/bin/env python3
"""Superseded facts: does recall prefer the newer of two notes that answer a question about now?

Usage (from the repository root)::

    .venv/bin/python tools/bench_superseded.py                  # minilm
    .venv/bin/python tools/bench_superseded.py --embedding local_hash

``tools/data/superseded/pairs.jsonl`` holds labelled pairs: an ``older`` note and a ``newer`` one
that replaced it (each ``text`` and ``time``, a day), a question about the ``present`` (the newer
note answers it) and one about the ``past`` (the older one does). Every note of every pair goes into
one namespace (the other pairs are the distractors), through the public API; each question is
asked with the default hybrid recall (``Query(text=..., k=10)``) and with the preference off
(``Fusion(supersede=0)``). Reported: how often the newer note ranks above the older one and first,
for the present questions, and the older above the newer for the past ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coniti import Container, Note, Query  # noqa: E402
from coniti.fusion import Fusion  # noqa: E402

DATA = ROOT / "tools" / "data" / "superseded" / "pairs.jsonl"


def load(path: Path = DATA) -> list[dict[str, object]]:
    """The labelled pairs, one JSON object a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _time(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()


def run(embedding: str) -> dict[str, dict[str, int]]:
    """Counts per setting (``default``, ``off``): present newer-above-older and newer-first, past
    older-above-newer, and the number of pairs."""
    pairs = load()
    notes = [
        Note(id=f"{p['id']}-{side}", text=p[side]["text"], timestamp=_time(p[side]["time"]))  # type: ignore[index]
        for p in pairs
        for side in ("older", "newer")
    ]
    out: dict[str, dict[str, int]] = {}
    with Container(embedding=embedding) as container:
        engine = container.engine
        engine.ingest_many(notes, namespace=("pairs",))
        for name, fusion in (("default", None), ("off", Fusion(supersede=0.0))):
            counts = {"pairs": len(pairs), "present_newer_above": 0, "present_newer_first": 0, "past_older_above": 0}
            for p in pairs:
                older, newer = f"{p['id']}-older", f"{p['id']}-newer"
                now = [h.note.id for h in engine.ask(Query(text=str(p["present"]), k=10, fusion=fusion), namespace=("pairs",)).hits]
                then = [h.note.id for h in engine.ask(Query(text=str(p["past"]), k=10, fusion=fusion), namespace=("pairs",)).hits]
                rank = {i: r for r, i in enumerate(now)}
                counts["present_newer_above"] += rank.get(newer, 99) < rank.get(older, 99)
                counts["present_newer_first"] += bool(now) and now[0] == newer
                past = {i: r for r, i in enumerate(then)}
                counts["past_older_above"] += past.get(older, 99) < past.get(newer, 99)
            out[name] = counts
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedding", default="minilm")
    args = parser.parse_args(argv)
    result = run(args.embedding)
    for name, c in result.items():
        n = c["pairs"]
        print(
            f"{name:<8} present: newer above older {c['present_newer_above']}/{n}, newer first "
            f"{c['present_newer_first']}/{n}; past: older above newer {c['past_older_above']}/{n}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
