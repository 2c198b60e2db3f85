"""History commands on the event log: log, history, diff, at, export, import, stats."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import click

from coniti.cli.app import CliError, common_options, settings
from coniti.cli.care_cmds import store_size
from coniti.cli.output import Output
from coniti.cli.parse import format_namespace, format_time, iso_time
from coniti.cli.show import record_json
from coniti.cli.types import NAMESPACE, POINT
from coniti.events import Event
from coniti.impl.log import LogBackend

__all__ = ["COMMANDS", "event_json", "event_line", "resolve_point", "show_events"]


def event_json(event: Event) -> dict[str, Any]:
    """An event for ``--json``: every field of :class:`~coniti.events.Event`, the recorded time also
    as ISO 8601 (``recorded``), and the record without its vector (see ``record_json``)."""
    out = event.to_dict()
    out["recorded"] = iso_time(event.at)
    if event.record is not None:
        out["record"] = record_json(event.record)
    return out


def _what(event: Event) -> str:
    if event.erased:
        return "(content erased)"
    if event.kind == "meta":
        return f"{event.key} = {json.dumps(event.value, ensure_ascii=False)}"
    if event.record is not None:
        return event.record.note.text
    return ""


def event_line(event: Event) -> str:
    """One event on one line: seq, recorded time, actor, kind, namespace, id, why, what."""
    parts = [
        f"{event.seq:>6}",
        format_time(event.at).ljust(23),
        (event.actor or "-").ljust(10),
        event.kind.ljust(6),
        format_namespace(tuple(event.namespace)),
    ]
    if event.id is not None:
        parts.append(event.id)
    if event.reason:
        parts.append(f"({event.reason})")
    what = _what(event)
    if what:
        parts.append(what if len(what) <= 70 else what[:69] + "…")
    return "  ".join(parts)


def show_events(out: Output, events: Iterable[Event], *, title: str | None = None,
                one_record: bool = False) -> int:
    """Events as a table: seq, recorded time, actor, kind, namespace, id, reason, what.
    ``one_record`` leaves out namespace and id (the events of one record's history)."""
    columns = ["seq", "recorded (UTC)", "actor", "kind", "namespace", "id", "reason", "what"]
    rows: Iterable[list[Any]] = (
        [e.seq, format_time(e.at), e.actor, e.kind, format_namespace(tuple(e.namespace)), e.id,
         e.reason, _what(e)]
        for e in events
    )
    if one_record:
        columns = [c for c in columns if c not in ("namespace", "id")]
        rows = ([r[0], r[1], r[2], r[3], r[6], r[7]] for r in rows)
    return out.table(columns, rows, title=title, wrap=["reason", "what"])


def resolve_point(store: LogBackend, point: int | float) -> int:
    """A sequence number (0..head, else an error) or the seq of the last event at or before a time."""
    if isinstance(point, int):
        return store.at(point).seq
    return store.at(time=point).seq


@click.command(name="log")
@click.option("--after", type=click.IntRange(min=0), default=None,
              help="Only events after this sequence number (default: from the start; with "
                   "--follow, from the current head).")
@click.option("--ns", "namespace", type=NAMESPACE, default=None,
              help="Only events of this namespace (default: all).")
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
@click.option("--ns", "namespace", type=NAMESPACE, default="/", show_default=True,
              help="Namespace of the record.")
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
        show_events(s.out, events, one_record=True)


@click.command()
@click.argument("a", type=POINT, metavar="A")
@click.argument("b", type=POINT, metavar="B")
@click.option("--ns", "namespace", type=NAMESPACE, default="/", show_default=True,
              help="Namespace to compare.")
@common_options
def diff(a: int | float, b: int | float, namespace: tuple[str, ...]) -> None:
    """Records added, removed and changed between points A and B (sequence numbers or ISO times)."""
    s = settings()
    with s.open_store() as store:
        seq_a, seq_b = resolve_point(store, a), resolve_point(store, b)
        result = store.diff(seq_a, seq_b, namespace=namespace)
        before, after = store.at(seq_a), store.at(seq_b)
        rows: list[list[Any]] = []
        for change, ids, view in (
            ("added", result.added, after),
            ("removed", result.removed, before),
            ("changed", result.changed, after),
        ):
            for record in view.get(view.get_request(ids, namespace)).records:
                rows.append([change, record.id, record.note.text])
    if s.json:
        s.out.json(result.to_dict())
        return
    title = f"{format_namespace(namespace)}: after seq {seq_a} -> after seq {seq_b}"
    if not rows:
        s.out.line(f"{title}: no change")
        return
    s.out.table(["change", "id", "text (at B; removed: at A)"], rows, title=title,
                wrap=["text (at B; removed: at A)"])


@click.command(name="at")
@click.argument("point", type=POINT, metavar="SEQ|DATE")
@click.option("--ns", "namespace", type=NAMESPACE, default="/", show_default=True,
              help="Namespace whose records are counted.")
@common_options
def at_cmd(point: int | float, namespace: tuple[str, ...]) -> None:
    """Which event a point is (a sequence number, or the last event at an ISO time) and the size of
    a namespace then. Every read command takes --as-of SEQ|DATE to read at such a point."""
    s = settings()
    with s.open_store() as store:
        view = store.at(point) if isinstance(point, int) else store.at(time=point)
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
@common_options
def import_(file: str) -> None:
    """Create a new store (--store, which must not exist or be empty) from a coniti-log file, after
    checking every line, the sequence and the hash chain; a bad file creates nothing."""
    s = settings()
    path = s.store_path
    with s.out.progress(f"importing {file}"):
        store = LogBackend.import_log(sys.stdin if file == "-" else file, path)
    with store:
        head, head_hash = store.head, store.head_hash
    if s.json:
        s.out.json({"file": file, "store": str(path), "head": head, "head_hash": head_hash})
    else:
        s.out.line(f"imported {head} events into {path} (head hash {head_hash})")


@click.command()
@common_options
def stats() -> None:
    """Events, namespaces, records, size on disk, head sequence number and hash."""
    s = settings()
    path = s.store_path
    with s.open_store() as store:
        spaces = [
            (ns, store.count(store.count_request(None, ns)).count)
            for ns in sorted(store.namespaces())
        ]
        head, head_hash = store.head, store.head_hash
    size = store_size(path)
    records = sum(n for _, n in spaces)
    if s.json:
        s.out.json(
            {
                "store": str(path),
                "events": head,
                "records": records,
                "namespaces": [{"namespace": list(ns), "records": n} for ns, n in spaces],
                "bytes": size,
                "head_seq": head,
                "head_hash": head_hash,
            }
        )
        return
    s.out.fields(
        [
            ("store", str(path)),
            ("events", head),
            ("records", f"{records} in {len(spaces)} namespaces"),
            ("size on disk", f"{size:,} bytes"),
            ("head", f"seq {head}, hash {head_hash}"),
        ]
    )
    s.out.table(["namespace", "records"], ([format_namespace(ns), n] for ns, n in spaces))


COMMANDS: list[click.Command] = [log, history, diff, at_cmd, export, import_, stats]
