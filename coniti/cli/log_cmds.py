"""History commands on the event log: log, history, diff, at, export, import."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import CliError, at_point, common_options, ns_option, settings
from coniti.cli.parse import format_namespace
from coniti.cli.show import event_json, event_line, show_history
from coniti.cli.types import NAMESPACE, POINT

if TYPE_CHECKING:
    from coniti.events import Event

__all__ = ["at_cmd", "diff", "export", "history", "import_", "log"]


@click.command(name="log")
@click.option("--after", type=click.IntRange(min=0), default=None,
              help="Only events after this sequence number (default: from the start; with "
                   "--follow, from the current head).")
@ns_option("Only events of this namespace (default: all).", default=None)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many events.")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing events as they are written, by any process (Ctrl-C stops).")
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="With --follow: stop after this many seconds without a new event.")
@common_options
def log(
    after: int | None,
    namespace: tuple[str, ...] | None,
    limit: int | None,
    follow: bool,
    timeout: float | None,
) -> None:
    """The audit trail: every change in order, with who made it and why (JSON lines with --json).

    One line per event: seq, recorded time (UTC), actor, kind, namespace, id, (reason), content.
    """
    s = settings()
    with s.open_store() as store:
        if follow:
            events: Iterator[Event] = store.follow(after, timeout=timeout, namespace=namespace)
        else:
            events = store.events(after or 0, namespace=namespace, limit=limit)
        if follow and limit is not None:
            events = _first(events, limit)
        if s.json:
            s.out.json_lines(event_json(e) for e in events)
        else:
            for event in events:
                s.out.line(event_line(event))


def _first(events: Iterator[Event], n: int) -> Iterator[Event]:
    """The first ``n`` events, returning as soon as the last is yielded (not at the next one)."""
    for i, event in enumerate(events, 1):
        yield event
        if i >= n:
            return


@click.command()
@click.argument("note_id", metavar="ID")
@ns_option("Namespace of the record.")
@common_options
def history(note_id: str, namespace: tuple[str, ...]) -> None:
    """Every event that touched record ID, oldest first: who, when, why (JSON lines with --json)."""
    s = settings()
    with s.open_store() as store:
        events = store.history(note_id, namespace)
    if not events:
        raise CliError(f"no event ever touched {note_id!r} in namespace {format_namespace(namespace)}")
    if s.json:
        s.out.json_lines(event_json(e) for e in events)
    else:
        show_history(s.out, events)


@click.command()
@click.argument("a", type=POINT, metavar="A")
@click.argument("b", type=POINT, metavar="B")
@ns_option("Compare only this namespace (default: the whole store).", default=None)
@click.option("--prefix", "prefix", type=NAMESPACE, default=None,
              help="Compare every namespace under this one (e.g. alice) instead of the whole store.")
@common_options
def diff(
    a: int | float, b: int | float, namespace: tuple[str, ...] | None, prefix: tuple[str, ...] | None
) -> None:
    """Records added, removed and changed between points A and B (sequence numbers or ISO times),
    in every namespace of the store (or under --prefix, or in --ns alone)."""
    s = settings()
    if namespace is not None and prefix is not None:
        raise click.UsageError("give --ns or --prefix, not both")
    with s.open_store() as store:
        before, after = at_point(store, a), at_point(store, b)
        seq_a, seq_b = before.seq, after.seq
        if namespace is not None:
            results = [store.diff(seq_a, seq_b, namespace=namespace)]
        else:
            results = store.diff_all(seq_a, seq_b, prefix=prefix or ())
        rows: list[list[Any]] = []
        for result in results:
            ns = result.namespace
            for change, ids, view in (
                ("added", result.added, after),
                ("removed", result.removed, before),
                ("changed", result.changed, after),
            ):
                found = {r.id: r.note.text for r in view.get(view.get_request(ids, ns)).records}
                for rid in ids:
                    text = found.get(rid, "(content erased)")
                    rows.append([change, format_namespace(ns), rid, text])
    if s.json:
        if namespace is not None:
            s.out.json(results[0].to_dict())
        else:
            s.out.json({"a": seq_a, "b": seq_b, "prefix": list(prefix or ()),
                        "namespaces": [r.to_dict() for r in results]})  # fmt: skip
        return
    if namespace is not None:
        where = format_namespace(namespace)
    else:
        where = "the whole store" if not prefix else f"under {format_namespace(prefix)}"
    title = f"{where}: after seq {seq_a} -> after seq {seq_b}"
    if not rows:
        s.out.line(f"{title}: no change")
        return
    text = "text (at B; removed: at A)"
    if namespace is not None:
        s.out.table(["change", "id", text], [[r[0], *r[2:]] for r in rows], title=title, wrap=[text])
    else:
        s.out.table(["change", "namespace", "id", text], rows, title=title, wrap=[text])


@click.command(name="at")
@click.argument("point", type=POINT, metavar="SEQ|DATE")
@ns_option("Namespace whose records are counted.")
@common_options
def at_cmd(point: int | float, namespace: tuple[str, ...]) -> None:
    """Which event a point is (a sequence number, or the last event at an ISO time) and the size of
    a namespace then. Every read command takes --as-of SEQ|DATE to read at such a point."""
    s = settings()
    with s.open_store() as store:
        view = at_point(store, point)
        seq = view.seq
        n = view.count(view.count_request(None, namespace)).count
        event = next(store.events(seq - 1, limit=1), None) if seq else None
        head = store.head
    if s.json:
        s.out.json(
            {"seq": seq, "head": head, "namespace": list(namespace), "count": n,
             "event": None if event is None else event_json(event)}
        )
        return
    s.out.fields(
        [
            ("seq", f"{seq} (head {head})"),
            ("event", "none: the empty memory" if event is None else event_line(event).strip()),
            (f"records in {format_namespace(namespace)}", n),
        ]
    )


@click.command()
@click.argument("file", metavar="FILE")
@common_options
def export(file: str) -> None:
    """Write the whole history as a coniti-log JSONL file (gzip if FILE ends in .gz; - for stdout)."""
    s = settings()
    with s.open_store() as store, s.out.progress("exporting the log"):
        if file == "-":
            store.export_log(sys.stdout)
            return
        n = store.export_log(file)
        head, head_hash = store.head, store.head_hash
    if s.json:
        s.out.json({"file": file, "events": n, "head": head, "head_hash": head_hash})
    else:
        s.out.line(f"wrote {n} events to {file} (head {head}, hash {head_hash})")


@click.command(name="import")
@click.argument("file", metavar="FILE")
@click.option("--checkpoint", "note_file", default=None, metavar="NOTE",
              help="A signed checkpoint file the history must extend (with --verifier).")
@click.option("--verifier", default=None, metavar="KEY", help="The verifier key of --checkpoint.")
@common_options
def import_(file: str, note_file: str | None, verifier: str | None) -> None:
    """Create a new store (--store, which must not exist or be empty) from a coniti-log file, after
    checking every line, the sequence and the hash chain (and, with --checkpoint, that the history
    extends that signed checkpoint); a bad file creates nothing."""
    from coniti.impl.log import LogBackend

    s = settings()
    if (note_file is None) != (verifier is None):
        raise click.UsageError("--checkpoint and --verifier go together")
    note = None
    if note_file is not None:
        try:
            with open(note_file, encoding="utf-8") as text:
                note = text.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.UsageError(f"cannot read checkpoint file {note_file}: {getattr(exc, 'strerror', None) or exc}") from None
    path = s.store_path
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise CliError(
            f"{path} already exists and is not empty: import creates a new store; choose a new or "
            "empty directory with --store"
        )
    with s.out.progress(f"importing {file}"):
        store = LogBackend.import_log(
            sys.stdin if file == "-" else file, path, checkpoint=note, verifier=verifier
        )
    with store:
        head, head_hash = store.head, store.head_hash
    if s.json:
        s.out.json({"file": file, "store": str(path), "head": head, "head_hash": head_hash})
    else:
        s.out.line(f"imported {head} events into {path} (head hash {head_hash})")
