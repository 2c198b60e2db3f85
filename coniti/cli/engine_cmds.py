"""Commands that go through the engine: add (embed and store) and ask (recall)."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Literal, cast

import click

from coniti.cli.context import (
    CliError,
    as_of_option,
    at_point,
    common_options,
    hint_if_unknown,
    ns_option,
    range_options,
    settings,
    time_range,
)
from coniti.cli.parse import format_namespace, format_time, iso_time, read_stdin_text
from coniti.cli.types import FILTER, META, NAMESPACE, TIME

if TYPE_CHECKING:
    from coniti.actor import Note
    from coniti.recall import Hit

__all__ = ["add", "ask"]


@click.command()
@click.argument("text")
@ns_option()
@click.option("--time", "when", type=TIME, default=None, help="When it happened (default: now).")
@click.option("--meta", "meta", type=META, multiple=True, help="Metadata KEY=VALUE (repeatable).")
@click.option("--id", "note_id", default=None, help="The note's id (default: a random one).")
@click.option("--kind", "kind", default=None,
              help="What the note is: message, fact, summary, preference, event or your own word.")
@click.option("--embedding", "embedding", default=None, metavar="NAME",
              help="Embedder of a new store (default: $CONITI_EMBEDDING, else minilm); a store "
                   "holds one embedder: another is refused.")  # fmt: skip
@common_options
def add(
    text: str,
    namespace: tuple[str, ...],
    when: float | None,
    meta: tuple[tuple[str, Any], ...],
    note_id: str | None,
    kind: str | None,
    embedding: str | None,
) -> None:
    """Remember TEXT (use - to read it from stdin): embed it and store it through the engine."""
    from coniti.actor import Note

    s = settings()
    if text == "-":
        text = read_stdin_text()
    note = Note(
        id=uuid.uuid4().hex if note_id is None else note_id,
        text=text,
        timestamp=time.time() if when is None else when,
        metadata=dict(meta),
        kind=kind,
    )
    s.check_new_store_model(embedding)
    with s.open_store("create") as store, s.open_engine(store, embedding) as engine, s.stamp(store):
        result = engine.ingest(note, namespace=namespace)
    if not result.admitted:
        raise CliError(f"not added: {result.reason}")
    if s.json:
        s.out.json({"id": result.id, "namespace": list(namespace), "admitted": True})
    else:
        s.out.line(f"added {result.id} to {format_namespace(namespace)}")


@click.command()
@click.argument("text")
@ns_option()
@click.option("--prefix", "prefix", type=NAMESPACE, default=None,
              help="Ask every namespace under this one (e.g. alice; '/' for all) instead of --ns.")
@click.option("-k", "--k", "k", type=click.IntRange(1, 10_000), default=5, show_default=True,
              help="How many notes to return.")
@click.option("--filter", "where", type=FILTER, default=None, metavar="JSON",
              help="Only notes whose metadata match this filter, e.g. '{\"kind\": \"fact\"}'.")
@click.option("--min-score", "min_score", type=click.FloatRange(0.0, 1.0), default=None, metavar="0..1",
              help="Drop notes whose relevance is below this (0 to 1: the score read on a 0-1 scale; "
                   "semantic: the cosine; keyword: 1 when every word of TEXT matches once; hybrid: "
                   "the fused score, or by rank 1 when first on both sides, 0.5 when first on one).")
@click.option("--strategy", "strategy", default="auto", show_default=True,
              type=click.Choice(["auto", "semantic", "keyword", "hybrid", "recent"]),
              help="How to rank: auto is hybrid for text, recent for a time range alone.")
@click.option("--mmr", "mmr", type=click.FloatRange(0.0, 1.0), default=None, metavar="LAMBDA",
              help="Re-rank for diversity by maximal marginal relevance (1: relevance only).")
@click.option("--signals", "show_signals", is_flag=True,
              help="Show each hit's signals (semantic, keyword, feedback, fused ranks).")
@click.option("--context", "as_context", is_flag=True,
              help="Print the answer as a prompt-ready context block.")
@click.option("--budget", "budget", type=click.IntRange(1), default=1000, show_default=True,
              help="With --context: the block's token budget (about four bytes a token).")
@click.option("--valid-at", "valid_at", type=TIME, default=None,
              help="Answer with the notes valid in the world at this time (default: hide those whose "
                   "validity ended).")
@click.option("--include-superseded", is_flag=True,
              help="Also show notes no longer valid, marked (superseded).")
@click.option("--receipt", "receipt", is_flag=True,
              help="Keep a recall receipt of the answer in the log (the query's digest, the point read, "
                   "every hit and score) and print its seq on stderr; 'coniti receipt SEQ' shows it.")
@click.option("--receipt-with-query", "receipt_with_query", is_flag=True,
              help="As --receipt, keeping the whole query (text, k, filter, strategy) too: "
                   "'coniti receipt SEQ' then replays it.")
@range_options
@as_of_option
@common_options
def ask(
    text: str,
    namespace: tuple[str, ...],
    prefix: tuple[str, ...] | None,
    k: int,
    where: dict[str, Any] | None,
    min_score: float | None,
    strategy: str,
    mmr: float | None,
    show_signals: bool,
    as_context: bool,
    budget: int,
    start: float | None,
    end: float | None,
    as_of: int | float | None,
    valid_at: float | None = None,
    include_superseded: bool = False,
    receipt: bool = False,
    receipt_with_query: bool = False,
) -> None:
    """Recall the notes that best answer TEXT, best first (facts no longer valid hidden: see
    --valid-at, --include-superseded). --receipt (or --receipt-with-query) keeps a recall receipt
    of the answer (with --context too) and prints its seq ("receipt" in --json).

    Each hit shows its relevance, 0 to 1: the score of the ranking read on one scale (semantic:
    the cosine; keyword: BM25 over the score of a note holding every word of TEXT once, 1 when
    all match; hybrid fused by score: the fused score, a perfect cosine and keyword match giving
    1; hybrid fused by rank: the share of the best fused score, 1 when first on both sides, 0.5
    when first on one side only). --min-score cuts on it; --signals and --json also give the raw
    score the ranking sorts by.
    """
    from coniti.actor import Query

    s = settings()
    if prefix is not None and namespace:
        raise click.UsageError("give --ns or --prefix, not both")
    if min_score is not None and strategy == "recent":
        raise click.BadParameter("does not apply to --strategy recent (it ranks by time)", param_hint="'--min-score'")
    if not text.strip():
        raise click.BadParameter(
            "empty or blank: give words to ask about (for the notes of a time window: "
            "coniti ls --from ... --to ...)", param_hint="'TEXT'",
        )
    query = Query(
        text=text, time_range=time_range(start, end), k=k, filter=where, min_relevance=min_score,
        strategy=cast(Any, strategy), mmr=mmr,
    )
    keep = _receipt_mode(receipt, receipt_with_query, as_of, valid_at, include_superseded)
    with s.open_store("write" if keep else "read") as store, s.open_engine(store) as engine, s.stamp(store):
        if as_of is not None:
            engine = at_point(engine, as_of)
        scope = namespace if prefix is None else prefix
        if as_context:
            block = engine.context(query, token_budget=budget, namespace=namespace, prefix=prefix,
                                   valid_at=valid_at, include_superseded=include_superseded, receipt=keep)  # fmt: skip
            hits, kept = cast("list[Hit]", block.hits), block.receipt  # the engine's blocks hold its own Hits
        else:
            found = engine.ask(query, namespace=namespace, prefix=prefix, valid_at=valid_at,
                               include_superseded=include_superseded, receipt=keep)  # fmt: skip
            hits, kept = list(found.hits), found.receipt
        if not hits:
            hint_if_unknown(s, engine.memory, scope, prefix=prefix is not None)
    where_json = {"namespace": list(namespace)} if prefix is None else {"prefix": list(prefix)}
    receipt_json = {} if kept is None else {"receipt": kept}
    if as_context:
        if s.json:
            s.out.json({"query": text, **where_json, "text": block.text, "tokens": block.tokens,
                        "omitted": block.omitted, "seq": block.seq,
                        "hits": [_hit_json(h) for h in hits], **receipt_json})  # fmt: skip
        else:
            s.out.line(block.text)
            _receipt_line(s, kept)
        return
    if s.json:
        s.out.json({"query": text, **where_json, "hits": [_hit_json(h) for h in hits], **receipt_json})
        return
    _receipt_line(s, kept)
    if show_signals:
        s.out.table(
            ["rank", "id", "relevance", "score", "semantic", "keyword", "feedback", "ranks"],
            (
                [str(i), h.note.id, _relevance(h), f"{h.score:.4f}", *_signal_cells(h)]
                for i, h in enumerate(hits, 1)
            ),
        )
        return
    columns = ["relevance", "time (UTC)", "id", "text"]
    rows = ([_relevance(h), format_time(h.note.timestamp), h.note.id, _text(h)] for h in hits)
    if prefix is not None:
        columns.insert(2, "namespace")
        rows = (
            [_relevance(h), format_time(h.note.timestamp), format_namespace(h.namespace),
             h.note.id, _text(h)]
            for h in hits
        )  # fmt: skip
    s.out.table(columns, rows, wrap=["text"])


def _receipt_mode(
    receipt: bool, with_query: bool, as_of: int | float | None, valid_at: float | None, include_superseded: bool
) -> bool | Literal["with_query"]:
    """What ``ask`` keeps as a receipt (False, True or ``"with_query"``), after the usage checks."""
    if not (receipt or with_query):
        return False
    if receipt and with_query:
        raise click.UsageError("give --receipt or --receipt-with-query, not both")
    if as_of is not None or valid_at is not None or include_superseded:
        raise click.UsageError(
            "a receipt keeps answers about the present: --receipt does not go with --as-of, --valid-at "
            "or --include-superseded"
        )
    return "with_query" if with_query else True


def _receipt_line(s: Any, kept: int | None) -> None:
    """The line naming the receipt kept (on stderr, so that stdout stays the answer), if one was."""
    if kept is not None:
        s.out.hint(f"receipt: event {kept} (coniti receipt {kept})")


def _relevance(hit: Hit) -> str:
    """A hit's relevance as printed (``-`` for ``recent``, which has none)."""
    return "-" if hit.relevance is None else f"{hit.relevance:.2f}"


def _text(hit: Hit) -> str:
    return f"{hit.note.text} (superseded)" if hit.superseded else hit.note.text


def _signal_cells(hit: Hit) -> list[str]:
    sig = hit.signals
    if sig is None:
        return ["", "", "", ""]

    def num(value: float | None) -> str:
        return "" if value is None else f"{value:.3f}"

    ranks = " ".join(f"{name}={rank}" for name, rank in sig.ranks.items())
    return [num(sig.semantic), num(sig.keyword), num(sig.feedback), ranks]


def _hit_json(hit: Hit) -> dict[str, Any]:
    signals = None if hit.signals is None else hit.signals.to_dict()
    return {
        "score": hit.score, "relevance": hit.relevance, "namespace": list(hit.namespace), **_note_json(hit.note),
        "signals": signals, "superseded": hit.superseded,
    }  # fmt: skip


def _note_json(note: Note) -> dict[str, Any]:
    return {
        "id": note.id,
        "timestamp": note.timestamp,
        "time": iso_time(note.timestamp),
        "text": note.text,
        "metadata": note.metadata,
    }
