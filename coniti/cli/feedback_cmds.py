"""The command that records feedback: improve (an audited ``feedback`` event)."""

from __future__ import annotations

import click

from coniti.cli.context import common_options, ns_option, settings
from coniti.cli.parse import format_namespace

__all__ = ["improve"]


@click.command(context_settings={"ignore_unknown_options": True})  # WEIGHT may be negative: -0.5
@click.argument("note_id", metavar="ID")
@click.argument("weight", type=float)
@ns_option()
@common_options
def improve(note_id: str, weight: float, namespace: tuple[str, ...]) -> None:
    """Give the live note ID the feedback WEIGHT (positive promotes it in hybrid recall, negative
    demotes it; weights add up). Recorded as a feedback event, with --reason if given."""
    s = settings()
    with s.open_store("write") as store, s.open_engine(store) as engine, s.stamp(store):
        result = engine.improve(note_id, weight, namespace=namespace, reason=s.reason)
    if s.json:
        s.out.json({"id": result.id, "namespace": list(namespace), "weight": result.weight, "seq": result.seq})
    else:
        s.out.line(
            f"feedback {weight:+g} on {result.id} in {format_namespace(namespace)}: "
            f"weight {result.weight:g} (event {result.seq})"
        )
