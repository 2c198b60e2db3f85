"""Memory commands on the store: get, rm, ls, count, meta (add and ask are in engine_cmds)."""

from __future__ import annotations

import json
from typing import Any

import click

from coniti.actor import TimeRange
from coniti.cli.app import CliError, common_options, settings
from coniti.cli.parse import format_namespace, parse_meta_value
from coniti.cli.show import record_json, show_record, show_records
from coniti.cli.types import NAMESPACE, POINT, TIME
from coniti.impl.log import LogBackend
from coniti.memory import MemoryBackend

__all__ = ["COMMANDS"]

ns_option = click.option(
    "--ns",
    "namespace",
    type=NAMESPACE,
    default="/",
    show_default=True,
    help="Namespace, e.g. alice/notes ('/' is the root).",
)
as_of_option = click.option(
    "--as-of",
    "as_of",
    type=POINT,
    default=None,
    metavar="SEQ|DATE",
    help="Read the memory as it was at this sequence number or ISO time.",
)


def time_range(start: float | None, end: float | None) -> TimeRange | None:
    """The note-time window of --from/--to, or None when neither is given."""
    if start is None and end is None:
        return None
    return TimeRange(start=start, end=end)


def range_options(func: Any) -> Any:
    func = click.option(
        "--to", "end", type=TIME, default=None, help="Note time before this (exclusive)."
    )(func)
    return click.option(
        "--from", "start", type=TIME, default=None, help="Note time at or after this."
    )(func)


def at_point(store: LogBackend, point: int | float | None) -> MemoryBackend:
    """The store itself, or its read-only view at a sequence number (int) or a recorded time."""
    if point is None:
        return store
    if isinstance(point, int):
        return store.at(point)
    return store.at(time=point)


@click.command()
@click.argument("note_id", metavar="ID")
@ns_option
@as_of_option
@common_options
def get(note_id: str, namespace: tuple[str, ...], as_of: int | float | None) -> None:
    """Show the record ID (its note, metadata, embedding and vector shape)."""
    s = settings()
    with s.open_store() as store:
        view = at_point(store, as_of)
        result = view.get(view.get_request([note_id], namespace))
    if not result.records:
        raise CliError(f"no record {note_id!r} in namespace {format_namespace(namespace)}")
    record = result.records[0]
    if s.json:
        s.out.json(record_json(record))
    else:
        show_record(s.out, record)


@click.command()
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@ns_option
@common_options
def rm(ids: tuple[str, ...], namespace: tuple[str, ...]) -> None:
    """Delete records by id. Exit status 1 if any id was not found (the others are deleted)."""
    s = settings()
    with s.open_store("write") as store, s.stamp(store):
        result = store.delete(store.delete_request(ids, namespace))
    if s.json:
        s.out.json({"deleted": result.deleted, "missing": result.missing})
    else:
        for note_id in result.deleted:
            s.out.line(f"deleted {note_id}")
    if result.missing:
        raise CliError(
            f"not found in {format_namespace(namespace)}: {', '.join(result.missing)}"
        )


@click.command(name="ls")
@ns_option
@range_options
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many records.")
@as_of_option
@common_options
def ls(
    namespace: tuple[str, ...],
    start: float | None,
    end: float | None,
    limit: int | None,
    as_of: int | float | None,
) -> None:
    """List records in note-time order (JSON lines with --json)."""
    s = settings()
    window = time_range(start, end)
    with s.open_store() as store:
        view = at_point(store, as_of)
        if limit is None:
            records = list(view.iter_all(window, namespace))
        else:
            records = view.scan(view.scan_request(window, namespace, limit=limit)).records
    if s.json:
        s.out.json_lines(record_json(r) for r in records)
    else:
        show_records(s.out, records)


@click.command()
@ns_option
@range_options
@as_of_option
@common_options
def count(
    namespace: tuple[str, ...], start: float | None, end: float | None, as_of: int | float | None
) -> None:
    """Count the records of a namespace (in a note-time window)."""
    s = settings()
    with s.open_store() as store:
        view = at_point(store, as_of)
        n = view.count(view.count_request(time_range(start, end), namespace)).count
    if s.json:
        s.out.json({"namespace": list(namespace), "count": n})
    else:
        s.out.line(str(n))


@click.group()
def meta() -> None:
    """Read or set a namespace's metadata values."""


@meta.command(name="get")
@click.argument("key")
@ns_option
@as_of_option
@common_options
def meta_get(key: str, namespace: tuple[str, ...], as_of: int | float | None) -> None:
    """Print the value of KEY as JSON (null when unset)."""
    s = settings()
    with s.open_store() as store:
        view = at_point(store, as_of)
        value = view.get_meta(view.meta_get_request(key, namespace)).value
    if s.json:
        s.out.json({"key": key, "namespace": list(namespace), "value": value})
    else:
        s.out.json(value)


@meta.command(name="set")
@click.argument("key")
@click.argument("value")
@ns_option
@common_options
def meta_set(key: str, value: str, namespace: tuple[str, ...]) -> None:
    """Set KEY to VALUE (read as JSON when it parses, else as text; null unsets)."""
    s = settings()
    with s.open_store("create") as store, s.stamp(store):
        stored = store.set_meta(store.meta_set_request(key, parse_meta_value(value), namespace)).value
    if s.json:
        s.out.json({"key": key, "namespace": list(namespace), "value": stored})
    else:
        s.out.line(f"{key} = {json.dumps(stored, ensure_ascii=False)}")


COMMANDS: list[click.Command] = [get, rm, ls, count, meta]
