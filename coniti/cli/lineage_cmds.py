"""Keeping memory true: explain (a note's versions, sources, supersessions), blame (one line),
consolidate (summaries, facts, pruning)."""

from __future__ import annotations

from collections.abc import Callable

import click

from coniti.cli.context import CliError, common_options, ns_option, settings
from coniti.cli.parse import format_namespace
from coniti.cli.types import TIME
from coniti.engine.lineage import Explanation, Source, blame, explain
from coniti.errors import RecordNotFound

__all__ = ["blame_cmd", "consolidate_cmd", "explain_cmd"]


def _explained(note_id: str, namespace: tuple[str, ...]) -> Explanation:
    s = settings()
    with s.open_store() as store:
        try:
            return explain(store, note_id, namespace)
        except RecordNotFound:
            raise CliError(f"no note {note_id!r} ever in namespace {format_namespace(namespace)}") from None


@click.command(name="explain")
@click.argument("note_id", metavar="ID")
@ns_option("Namespace of the note.")
@common_options
def explain_cmd(note_id: str, namespace: tuple[str, ...]) -> None:
    """Where note ID came from: its versions (who, when, why), its sources (recursively; an erased
    source shows its id and erasure receipt), what it superseded, what superseded it, and the notes
    derived from it (a JSON document with --json)."""
    e = _explained(note_id, namespace)
    s = settings()
    if s.json:
        s.out.json(e.to_dict())
        return
    s.out.line(f"{e.id}  ({'live' if e.live else 'not live'})" + ("" if e.text is None else f"  {e.text}"))
    s.out.line("versions:")
    for v in e.versions:
        valid = "" if v.valid_from is None and v.valid_to is None else f"  valid [{v.valid_from}, {v.valid_to})"
        text = "(erased)" if v.erased else (v.text or "")
        s.out.line(f"  @{v.seq} {v.kind} by {v.actor or '-'}: {v.reason or '-'}  {text}{valid}")
    for title, items in (("sources", e.sources), ("supersedes", e.supersedes)):
        if items:
            s.out.line(f"{title}:")
            for item in items:
                _source_lines(s.out.line, item, 1)
    if e.superseded_by:
        s.out.line("superseded by: " + ", ".join(e.superseded_by))
    if e.derived:
        s.out.line("derived: " + ", ".join(e.derived))


def _source_lines(line: Callable[[str], None], source: Source, depth: int) -> None:
    pad = "  " * depth
    if source.kind == "external":
        line(f"{pad}{source.ref}")
        return
    name = f"{source.id}@{source.version}" if source.id else source.ref
    if source.erased:
        state = f"(erased, receipt @{source.receipt})"
    elif source.missing:
        state = "(missing)"
    else:
        state = source.text or ""
    line(f"{pad}{name}  {state}")
    for nested in source.sources:
        _source_lines(line, nested, depth + 1)


@click.command(name="blame")
@click.argument("note_id", metavar="ID")
@ns_option("Namespace of the note.")
@common_options
def blame_cmd(note_id: str, namespace: tuple[str, ...]) -> None:
    """One line on note ID: its last write (seq, time, actor, reason), sources and supersessions
    (the explain document with --json)."""
    e = _explained(note_id, namespace)
    s = settings()
    if s.json:
        s.out.json(e.to_dict())
    else:
        s.out.line(blame(e))


@click.command(name="consolidate")
@ns_option("Namespace to consolidate (a conversation's is NAMESPACE/conversations/NAME).")
@click.option("--conversation", "conversation", default=None, metavar="NAME",
              help="Consolidate this conversation under --ns instead of --ns itself.")
@click.option("--max-items", "max_items", type=click.IntRange(min=0), default=None,
              help="Then delete the oldest notes of the namespace beyond this many (audited).")
@click.option("--older-than", "older_than", type=TIME, default=None,
              help="Summarise only turns older than this time.")
@click.option("--prune-sources", is_flag=True, help="Delete the turns summarised (audited; history kept).")
@click.option("--extract", is_flag=True, help="Also turn each turn into a fact (the pass-through extractor).")
@click.option("--no-summary", is_flag=True, help="Write no summary (with --extract or --max-items).")
@common_options
def consolidate_cmd(
    namespace: tuple[str, ...],
    conversation: str | None,
    max_items: int | None,
    older_than: float | None,
    prune_sources: bool,
    extract: bool,
    no_summary: bool,
) -> None:
    """Summarise the unsummarised message turns of a namespace into one summary note (built-in
    extractive summariser), optionally extract facts and prune, in one atomic write; running it
    again on the same turns writes nothing. Prints the report (JSON with --json)."""
    from dataclasses import asdict

    from coniti.conversation import conversation_namespace
    from coniti.engine.consolidate import PassThroughExtractor

    s = settings()
    ns = namespace if conversation is None else conversation_namespace(conversation, namespace)
    with s.open_store("write") as store, s.open_engine(store) as engine:
        report = engine.consolidate(
            ns, max_items=max_items, older_than=older_than, prune_sources=prune_sources,
            extractor=PassThroughExtractor() if extract else None, summarizer=False if no_summary else None,
            actor=s.actor_name,
        )  # fmt: skip
    if s.json:
        s.out.json(asdict(report))
        return
    s.out.line(
        f"summarized {report.summarized}, reweighted {report.reweighted}, pruned {report.pruned}, "
        f"derived {report.derived}" + ("" if report.seq is None else f" (seq {report.seq})")
        + (" (already consolidated: nothing written)" if report.replayed else "")
    )
    for decision in report.decisions:
        s.out.line(f"  {decision}")
