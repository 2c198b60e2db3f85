"""File commands: dump and load, the portable memory file of one namespace (export and import of
the whole log are in log_cmds)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

import click

from coniti.cli.context import (
    CliError,
    as_of_option,
    common_options,
    hint_if_unknown,
    ns_option,
    settings,
    view_as_of,
)
from coniti.cli.output import reader_gone
from coniti.cli.parse import format_namespace

if TYPE_CHECKING:
    from coniti.memory import MemoryBackend

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
    nothing (also when killed). A failed load that would have created the store leaves none. A store
    holds one embedder: a file embedded with another is refused."""
    s = settings()
    with (
        s.undo_new_store(),
        s.open_store("create") as store,
        s.stamp(store),
        s.out.progress(f"loading {file}"),
        _rereadable(file) as source,
    ):
        _refuse_second_embedder(store, source, file, namespace)
        n = store.load(source, namespace)
    if s.json:
        s.out.json({"file": file, "records": n})
    else:
        s.out.line(f"loaded {n} records from {file}")


@contextlib.contextmanager
def _rereadable(file: str) -> Iterator[str | IO[bytes]]:
    """``file`` itself, or for ``-`` stdin copied to an anonymous temporary file (read twice: its
    header, then the load)."""
    if file != "-":
        yield file
        return
    with tempfile.TemporaryFile() as spool:
        while chunk := sys.stdin.buffer.read(1 << 20):
            spool.write(chunk)
        spool.seek(0)
        yield spool


def _refuse_second_embedder(
    store: MemoryBackend, source: str | IO[bytes], file: str, namespace: tuple[str, ...] | None
) -> None:
    """Refuse a file whose header names an embedding other than the one the store records (see
    :func:`~coniti.container.recorded_embedding`), unless the namespace loaded into records its own
    (the load itself compares those). A file that cannot be read is left to the load's own error."""
    from coniti.container import recorded_embedding
    from coniti.errors import ContractError, MemoryFileError
    from coniti.jsonl import parse_json_line, read_lines

    try:
        with contextlib.closing(read_lines(source)) as lines:
            first = next(lines, None)
        header = None if first is None else parse_json_line(first[1], 1)
    except MemoryFileError:
        return
    finally:
        if not isinstance(source, str):
            source.seek(0)
    if not isinstance(header, dict) or not isinstance(header.get("embedding_id"), str):
        return
    embedding = header["embedding_id"]
    parts = header.get("namespace")
    target = namespace if namespace is not None else tuple(parts) if isinstance(parts, list) else ()
    try:
        own = store.get_meta(store.meta_get_request("embedding_id", target)).value
    except ContractError:
        return
    found = recorded_embedding(store)
    if own is not None or found is None or found[1] == embedding:
        return
    name = "stdin" if file == "-" else file
    raise CliError(
        f"{name} is embedded with {embedding!r}, this store with {found[1]!r} (namespace "
        f"{format_namespace(found[0])}): a store holds one embedder, so nothing was loaded; load it "
        "into a store of its own (--store)"
    )
