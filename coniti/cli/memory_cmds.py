"""Memory commands on the store: get, rm, ls, count, meta (add and ask are in engine_cmds)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from coniti.cli.context import (
    CliError,
    as_of_option,
    common_options,
    hint_if_unknown,
    ns_option,
    range_options,
    settings,
    time_range,
    view_as_of,
)
from coniti.cli.parse import format_namespace, parse_meta_value
from coniti.cli.show import record_json, show_record, show_records
from coniti.cli.types import FILTER, NAMESPACE

if TYPE_CHECKING:
    from coniti.memory import MemoryBackend, MemoryRecord

__all__ = ["count", "get", "ls", "meta", "rm"]


@click.command()
@click.argument("note_id", metavar="ID")
@ns_option()
@as_of_option
@common_options
def get(note_id: str, namespace: tuple[str, ...], as_of: int | float | None) -> None:
    """Show the record ID (its note, metadata, embedding and vector shape)."""
    s = settings()
    with s.open_store() as store:
        view = view_as_of(store, as_of)
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
@ns_option()
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


filter_option = click.option(
    "--filter", "where", type=FILTER, default=None, metavar="JSON",
    help="Only records whose metadata match this filter, e.g. '{\"kind\": \"fact\"}'.",
)  # fmt: skip


F = TypeVar("F", bound=Callable[..., Any])


def prefix_option(verb: str) -> Callable[[F], F]:
    """``--prefix NAMESPACE`` passed as ``prefix``: every namespace under it instead of ``--ns``."""
    return click.option(
        "--prefix", "prefix", type=NAMESPACE, default=None,
        help=f"{verb} every namespace under this one (e.g. alice; '/' for all) instead of --ns.",
    )  # fmt: skip


def _scopes(
    view: MemoryBackend, namespace: tuple[str, ...], prefix: tuple[str, ...] | None
) -> list[tuple[str, ...]]:
    """The namespaces a command reads: ``namespace``, or with ``prefix`` the live ones under it,
    sorted. ``--ns`` (other than the root) with ``--prefix`` is a usage error."""
    if prefix is None:
        return [namespace]
    if namespace:
        raise click.UsageError("give --ns or --prefix, not both")
    return view.namespaces(prefix)


@click.command(name="ls")
@ns_option()
@prefix_option("List")
@range_options
@filter_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many records.")
@click.option("--versions", "versions", is_flag=True, help="Add a column with each record's version.")
@as_of_option
@common_options
def ls(
    namespace: tuple[str, ...],
    prefix: tuple[str, ...] | None,
    start: float | None,
    end: float | None,
    where: dict[str, Any] | None,
    limit: int | None,
    versions: bool,
    as_of: int | float | None,
) -> None:
    """List records in note-time order (JSON lines with --json, which carry versions); with
    --prefix, namespace by namespace (sorted), with a namespace column."""
    s = settings()
    window = time_range(start, end)
    with s.open_store() as store:
        view = view_as_of(store, as_of)
        records: list[MemoryRecord] = []
        for ns in _scopes(view, namespace, prefix):
            if limit is None:
                records.extend(view.iter_all(window, ns, filter=where))
                continue
            if len(records) >= limit:
                break
            request = view.scan_request(window, ns, limit=limit - len(records), filter=where)
            records.extend(view.scan(request).records)
        if not records:
            hint_if_unknown(s, view, namespace if prefix is None else prefix, prefix=prefix is not None)
    if s.json:
        s.out.json_lines(record_json(r) for r in records)
    else:
        show_records(s.out, records, versions=versions, namespaces=prefix is not None)


@click.command()
@ns_option()
@prefix_option("Count")
@range_options
@filter_option
@as_of_option
@common_options
def count(
    namespace: tuple[str, ...],
    prefix: tuple[str, ...] | None,
    start: float | None,
    end: float | None,
    where: dict[str, Any] | None,
    as_of: int | float | None,
) -> None:
    """Count the records of a namespace, or with --prefix of every namespace under one (in a
    note-time window, matching a filter). With --json and --prefix: the count of each namespace too."""
    s = settings()
    window = time_range(start, end)
    with s.open_store() as store:
        view = view_as_of(store, as_of)
        counts = {
            ns: view.count(view.count_request(window, ns, filter=where)).count
            for ns in _scopes(view, namespace, prefix)
        }
        n = sum(counts.values())
        if n == 0:
            hint_if_unknown(s, view, namespace if prefix is None else prefix, prefix=prefix is not None)
    if s.json and prefix is not None:
        s.out.json({"prefix": list(prefix), "count": n,
                    "namespaces": {format_namespace(ns): c for ns, c in counts.items()}})  # fmt: skip
    elif s.json:
        s.out.json({"namespace": list(namespace), "count": n})
    else:
        s.out.line(str(n))


@click.group()
def meta() -> None:
    """Read or set a namespace's metadata values."""


@meta.command(name="get")
@click.argument("key")
@ns_option()
@as_of_option
@common_options
def meta_get(key: str, namespace: tuple[str, ...], as_of: int | float | None) -> None:
    """Print the value of KEY as JSON (null when unset)."""
    s = settings()
    with s.open_store() as store:
        view = view_as_of(store, as_of)
        value = view.get_meta(view.meta_get_request(key, namespace)).value
    if s.json:
        s.out.json({"key": key, "namespace": list(namespace), "value": value})
    else:
        s.out.json(value)


@meta.command(name="set")
@click.argument("key")
@click.argument("value")
@ns_option()
@common_options
def meta_set(key: str, value: str, namespace: tuple[str, ...]) -> None:
    """Set KEY to VALUE (read as JSON when it parses, else as text; null unsets)."""
    s = settings()
    with s.open_store("create") as store, s.stamp(store):
        stored = store.set_meta(
            store.meta_set_request(key, parse_meta_value(value, field="VALUE", depth=0), namespace)
        ).value
    if s.json:
        s.out.json({"key": key, "namespace": list(namespace), "value": stored})
    else:
        s.out.line(f"{key} = {json.dumps(stored, ensure_ascii=False)}")
