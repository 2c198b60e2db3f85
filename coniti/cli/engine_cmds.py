"""Commands that go through the engine: add (embed and store) and ask (recall)."""

from __future__ import annotations

import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import (
    CliError,
    as_of_option,
    at_point,
    common_options,
    ns_option,
    range_options,
    settings,
    time_range,
)
from coniti.cli.parse import format_namespace, format_time, iso_time
from coniti.cli.types import META, TIME

if TYPE_CHECKING:
    from coniti.actor import Note

__all__ = ["add", "ask"]


@click.command()
@click.argument("text")
@ns_option()
@click.option("--time", "when", type=TIME, default=None, help="When it happened (default: now).")
@click.option("--meta", "meta", type=META, multiple=True, help="Metadata KEY=VALUE (repeatable).")
@click.option("--id", "note_id", default=None, help="The note's id (default: a random one).")
@common_options
def add(
    text: str,
    namespace: tuple[str, ...],
    when: float | None,
    meta: tuple[tuple[str, Any], ...],
    note_id: str | None,
) -> None:
    """Remember TEXT (use - to read it from stdin): embed it and store it through the engine."""
    from coniti.actor import Note

    s = settings()
    if text == "-":
        text = sys.stdin.read().rstrip("\n")
    note = Note(
        id=uuid.uuid4().hex if note_id is None else note_id,
        text=text,
        timestamp=time.time() if when is None else when,
        metadata=dict(meta),
    )
    with s.open_store("create") as store, s.open_engine(store) as engine, s.stamp(store):
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
@click.option("-k", "--k", "k", type=click.IntRange(1, 10_000), default=5, show_default=True,
              help="How many notes to return.")
@range_options
@as_of_option
@common_options
def ask(
    text: str,
    namespace: tuple[str, ...],
    k: int,
    start: float | None,
    end: float | None,
    as_of: int | float | None,
) -> None:
    """Recall the notes that best answer TEXT, best first."""
    from coniti.actor import Query

    s = settings()
    query = Query(text=text, time_range=time_range(start, end), k=k)
    with s.open_store() as store, s.open_engine(store) as engine:
        if as_of is not None:
            engine = at_point(engine, as_of)
        answer = engine.ask(query, namespace=namespace)
    hits = list(answer.hits)
    if s.json:
        s.out.json(
            {
                "query": text,
                "namespace": list(namespace),
                "hits": [{"score": h.score, **_note_json(h.note)} for h in hits],
            }
        )
        return
    s.out.table(
        ["score", "time (UTC)", "id", "text"],
        ([f"{h.score:.3f}", format_time(h.note.timestamp), h.note.id, h.note.text] for h in hits),
        wrap=["text"],
    )


def _note_json(note: Note) -> dict[str, Any]:
    return {
        "id": note.id,
        "timestamp": note.timestamp,
        "time": iso_time(note.timestamp),
        "text": note.text,
        "metadata": note.metadata,
    }
