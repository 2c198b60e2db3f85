"""``coniti demo``: run :mod:`coniti.demo` and show what it found."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import common_options_for, settings
from coniti.cli.parse import format_namespace, format_time, iso_time
from coniti.cli.show import event_json, show_history

if TYPE_CHECKING:
    from coniti.actor import Note
    from coniti.cli.output import Output
    from coniti.demo import Asked, DemoReport

__all__ = ["demo"]


@click.command()
@common_options_for(
    "The demo's directory (default: ./coniti-demo); its store is PATH/store. Not a store of yours: "
    "$CONITI_STORE is ignored."
)
def demo() -> None:
    """Run the demo in ./coniti-demo/ (or --store DIR): a fresh store in DIR/store, a story, a tour.

    Ingests a bundled corpus of notes through the engine; corrects, deletes and erases some under
    different actors with reasons; then shows answers, answers as of earlier points, audit trails,
    the change between two points, verify with the head hash, the files written, the compaction and
    the figures. Rerunning replaces an earlier demo directory; any other non-empty directory is
    refused. $CONITI_STORE is ignored: the demo never writes to your own store.
    """
    from coniti import demo as story

    s = settings()
    directory = Path(s.store) if s.store else story.DEFAULT_DIR
    s.require_minilm()  # before the demo's directory is made
    total = len(story.load_corpus())
    with s.out.progress("ingesting the corpus", total=total) as tick:
        report = story.run(directory, progress=tick)
    if s.json:
        s.out.json(_report_json(report))
    else:
        _show(s.out, report)


def _hit(relevance: float, note: Note) -> str:
    return f"{relevance:.2f}  {format_time(note.timestamp)[:10]}  {note.text}  ({note.id})"


def _hits(out: Output, label: str, asked: Asked, style: str) -> None:
    if not asked.hits:
        out.line(f"    {label}(nothing)", style=style)
    for i, (relevance, note) in enumerate(asked.hits):
        out.line(f"    {label if i == 0 else ' ' * len(label)}{_hit(relevance, note)}", style=style)


def _section(out: Output, title: str, *, first: bool = False) -> None:
    from rich.rule import Rule

    if not first:
        out.line()
    out.rich(Rule(title, align="left"))


def _show(out: Output, r: DemoReport) -> None:
    _section(out, "1. Ingest", first=True)
    out.line(
        f"{r.notes} notes about four people and their team, Jan-Jun 2025, in {len(r.namespaces)} "
        f"namespaces, ingested through the engine (embedded, indexed, written) in "
        f"{r.ingest_seconds:.2f} s as actor 'assistant': events 1..{r.seq_after_ingest} "
        "(one per note, one embedding-id setting per namespace)"
    )
    out.table(["namespace", "notes"], sorted(r.namespaces.items()))

    _section(out, "2. Corrections, deletions and an erasure, each by someone, for a reason")
    out.table(
        ["events up to", "actor", "what", "namespace", "id", "reason"],
        (
            [seq, e.actor, e.what, format_namespace(e.namespace), e.id, e.reason]
            for e, seq in r.edits
        ),
        wrap=["reason"],
    )

    _section(out, "3. Questions (best hit: relevance 0-1, note date, text, id)")
    for asked in r.answers:
        out.line(f"[{format_namespace(asked.namespace)}] {asked.question}")
        _hits(out, "", asked, "green")

    _section(out, "4. The same question, earlier")
    for group in r.earlier:
        out.line(f"[{format_namespace(group.now.namespace)}] {group.now.question}")
        for then, why in group.then:
            _hits(out, f"as of {then.as_of}: ", then, "yellow")
            out.line(f"      why: {why}", style="dim")
        _hits(out, "now: ", group.now, "green")

    _section(out, "5. Audit trails: who, when, why")
    for ns, rid, trail in r.trails:
        out.line(f"{rid} in {format_namespace(ns)}:")
        show_history(out, trail)

    _section(out, "6. What changed between two points")
    out.line(
        f"from {format_time(r.time_after_ingest)} UTC (seq {r.seq_after_ingest}, after the ingest) "
        f"to now (seq {r.events}):"
    )
    out.table(
        ["namespace", "change", "id", "text"],
        ([format_namespace(n), c, i, t] for n, c, i, t in r.changes),
        wrap=["text"],
    )

    _section(out, "7. Keeping memory true: a superseded fact, a consolidation, its lineage")
    t = r.truth
    assert t is not None, "run() always supersedes and consolidates"
    out.line(f"on a copy of the store ({t.store}, imported from the export):", style="dim")
    out.line(f"[{format_namespace(t.now.namespace)}] {t.old} superseded by {t.new} "
             f"(event {t.seq}, {t.actor}: {t.reason})")  # fmt: skip
    out.line(t.now.question)
    _hits(out, "now: ", t.now, "green")
    _hits(out, f"{t.then.as_of}: ", t.then, "yellow")
    out.line("    with include_superseded: " + ", ".join(f"{i}{' (superseded)' if m else ''}" for i, m in t.marked))
    c = t.consolidation
    out.line(f"[{format_namespace(t.conversation)}] consolidated: summarized {c.summarized}, reweighted "
             f"{c.reweighted}, pruned {c.pruned}, derived {c.derived} (seq {c.seq})")  # fmt: skip
    out.line(f"    summary: {t.summary}", style="green")
    out.line(f"    blame: {t.blame}", style="dim")

    _section(out, "8. verify")
    v = r.verify
    assert v is not None, "run() always verifies"
    state = "clean" if not v.problems else f"{len(v.problems)} problem(s)"
    out.line(f"{v.events_checked} events checked: hash chain and projections {state}")
    out.line(f"head seq {v.head_seq}, head hash {v.head_hash}")

    _section(out, "9. Files written")
    out.line(f"{r.dump_file}  ({r.dumped} notes of team/atlas, coniti-memory JSONL)")
    out.line(f"{r.export_file}  ({r.exported} events, the whole history, coniti-log JSONL)")
    before, after = r.compacted
    out.line(f"{r.store}  (compacted after the erasure: {before:,} -> {after:,} bytes)")

    _section(out, "10. Figures")
    out.fields(
        [
            ("notes ingested", r.notes),
            ("notes now", r.live_notes),
            ("events", r.events),
            ("store size", f"{r.store_bytes:,} bytes"),
            ("time taken", f"{r.seconds:.2f} s"),
        ]
    )
    out.line()
    coniti = _console_script()
    out.line(f"Look around: export CONITI_STORE={r.store}; {coniti} stats; {coniti} log --limit 5")


def _console_script() -> str:
    """How to type the ``coniti`` command: beside this interpreter (a virtualenv), else by name."""
    script = Path(sys.executable).parent / "coniti"
    if not script.exists():
        return "coniti"
    relative = os.path.relpath(script)
    return script.as_posix() if relative.startswith("..") else relative


def _asked_json(asked: Asked) -> dict[str, Any]:
    return {
        "question": asked.question,
        "namespace": list(asked.namespace),
        "as_of": asked.as_of,
        "hits": [
            {"relevance": relevance, "id": note.id, "text": note.text, "time": iso_time(note.timestamp)}
            for relevance, note in asked.hits
        ],
    }


def _report_json(r: DemoReport) -> dict[str, Any]:
    v = r.verify
    assert v is not None, "run() always verifies"
    return {
        "store": str(r.store),
        "notes": r.notes,
        "namespaces": r.namespaces,
        "seq_after_ingest": r.seq_after_ingest,
        "edits": [
            {"seq": seq, "actor": e.actor, "reason": e.reason, "namespace": list(e.namespace),
             "id": e.id, "what": e.what}
            for e, seq in r.edits
        ],
        "answers": [_asked_json(a) for a in r.answers],
        "earlier": [
            {
                "then": [{**_asked_json(t), "why": why} for t, why in group.then],
                "now": _asked_json(group.now),
            }
            for group in r.earlier
        ],
        "trails": [
            {"namespace": list(ns), "id": rid, "events": [event_json(e) for e in trail]}
            for ns, rid, trail in r.trails
        ],
        "changes": [
            {"namespace": list(n), "change": c, "id": i, "text": t} for n, c, i, t in r.changes
        ],
        "truth": _truth_json(r),
        "verify": {
            "events_checked": v.events_checked,
            "head_seq": v.head_seq,
            "head_hash": v.head_hash,
            "problems": [str(p) for p in v.problems],
        },
        "dump": {"file": str(r.dump_file), "records": r.dumped},
        "export": {"file": str(r.export_file), "events": r.exported},
        "figures": {
            "notes": r.notes,
            "live_notes": r.live_notes,
            "events": r.events,
            "store_bytes": r.store_bytes,
            "compacted": {"before": r.compacted[0], "after": r.compacted[1]},
            "seconds": r.seconds,
        },
    }


def _truth_json(r: DemoReport) -> dict[str, Any]:
    from dataclasses import asdict

    t = r.truth
    assert t is not None, "run() always supersedes and consolidates"
    return {
        "store": str(t.store),
        "superseded": {"old": t.old, "new": t.new, "seq": t.seq, "actor": t.actor, "reason": t.reason},
        "now": _asked_json(t.now),
        "then": _asked_json(t.then),
        "marked": [{"id": i, "superseded": m} for i, m in t.marked],
        "conversation": list(t.conversation),
        "consolidation": asdict(t.consolidation),
        "summary": t.summary,
        "blame": t.blame,
    }
