"""File commands: dump and load, the portable memory file of one namespace (export and import of
the whole log are in log_cmds)."""

from __future__ import annotations

import sys

import click

from coniti.cli.context import (
    as_of_option,
    common_options,
    hint_if_unknown,
    ns_option,
    settings,
    view_as_of,
)
from coniti.cli.output import reader_gone
from coniti.cli.parse import format_namespace

__all__ = ["dump", "load"]


@click.command()
@click.argument("file", metavar="FILE")
@ns_option("Namespace to write.")
@as_of_option
@common_options
def dump(file: str, namespace: tuple[str, ...], as_of: int | float | None) -> None:
    """Write a namespace as a coniti-memory JSONL file (gzip if FILE ends in .gz; - for stdout).

    A namespace with no notes is written as a file of no records, with a hint on stderr naming the
    namespaces that have notes."""
    s = settings()
    with s.open_store() as store, s.out.progress(f"dumping {format_namespace(namespace)}"):
        view = view_as_of(store, as_of)
        if file == "-":
            with reader_gone():
                n = view.dump(sys.stdout, namespace)
                sys.stdout.flush()
        else:
            n = view.dump(file, namespace)
        if n == 0:
            hint_if_unknown(s, view, namespace, prefix_option=False)
    if file == "-":
        return
    if s.json:
        s.out.json({"file": file, "namespace": list(namespace), "records": n})
    else:
        s.out.line(f"wrote {n} records of {format_namespace(namespace)} to {file}")


@click.command()
@click.argument("file", metavar="FILE")
@ns_option("Put every record into this namespace (default: each record's own).", default=None)
@common_options
def load(file: str, namespace: tuple[str, ...] | None) -> None:
    """Read a coniti-memory file (- for stdin), validate all of it, then write it to the store, all or
    nothing (also when killed). A failed load that would have created the store leaves none."""
    s = settings()
    with (
        s.undo_new_store(),
        s.open_store("create") as store,
        s.stamp(store),
        s.out.progress(f"loading {file}"),
    ):
        n = store.load(sys.stdin.buffer if file == "-" else file, namespace)
    if s.json:
        s.out.json({"file": file, "records": n})
    else:
        s.out.line(f"loaded {n} records from {file}")
