"""The portable memory file: ``coniti-memory`` JSON Lines, version 1.0.0.

Line 1 is a header ``{"format", "version", "embedding_id", "namespace", "created_at", "count"}``; each
following line is one :class:`~coniti.memory.MemoryRecord` as ``to_dict()`` gives it. UTF-8, ``\\n``.

:func:`dump` streams one namespace page by page. For a path it writes ``<name>.partial`` (mode 0600),
flushes it to disk and renames it over the target only when every record was written, so a failed dump
leaves any previous file untouched; ``.gz`` in the name selects gzip. If the number of records written
differs from the header's count (memory changed while dumping) it fails with
:class:`~coniti.errors.MemoryFileError`.

:func:`load` reads and validates the whole file before writing anything (so it holds the records in
memory), in this order of concern: format and major version; header fields; no blank lines and every
record valid; no duplicate id within a namespace; the record count; the embedding id against the
target's; no id already in the target. Any failure raises ``MemoryFileError`` naming the line where
there is one, and the target is unchanged. It then writes in batches of 500; if a write fails it deletes
what it wrote (best effort, through the backend's own delete) and raises ``MemoryFileError``.

Reading a record line: a line byte for byte as :func:`dump` writes it is read by a fast path whose
shape proves that orjson's reading is the strict reader's (see :func:`_canonical_record`); any other
line goes through the strict reader (:func:`parse_json_line`). Either way a record is accepted exactly
when the contract (:meth:`MemoryRecord.from_dict`) accepts it, and is then the same record bit for bit.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import orjson

from coniti.actor import Note
from coniti.contracts import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, ContractError
from coniti.errors import MemoryBackendError, MemoryFileError
from coniti.jsonl import (
    MAX_LINE_CHARS,
    atomic_binary_writer,
    atomic_text_writer,
    fsync_dir,
    json_line,
    parse_json_line,
    read_lines,
    standard_json,
)
from coniti.memory import (
    VECTOR_DTYPES,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
)

if TYPE_CHECKING:
    from coniti.memory import MemoryBackend

__all__ = [
    "BATCH_SIZE",
    "FORMAT",
    "MAX_LINE_CHARS",
    "VERSION",
    "atomic_text_writer",
    "dump",
    "fsync_dir",
    "json_line",
    "load",
    "parse_json_line",
    "read_lines",
    "record_bytes",
]

FORMAT = "coniti-memory"
VERSION = "1.0.0"
SUPPORTED_MAJOR = 1
BATCH_SIZE = 500
PAGE_SIZE = 500

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$")


# -- writing -------------------------------------------------------------------------------------




_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)
_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE


def record_bytes(record: MemoryRecord) -> bytes:
    """One record as its JSON line in UTF-8, with the newline. Floats are written in the shortest
    form that reads back to the same value of the vector's dtype (float16 as float32 values)."""
    note = record.note
    vector = record.vector
    data: dict[str, Any] = {
        "note": {"id": note.id, "text": note.text, "timestamp": note.timestamp, "metadata": note.metadata},
        "vector": vector,
        "embedding_id": record.embedding_id,
        "namespace": record.namespace,  # a tuple: written as a JSON array
    }
    dtype = vector.dtype
    if dtype is _FLOAT32:  # the common dtypes by identity: reading dtype.name is slow
        data["dtype"] = "float32"
    elif dtype is not _FLOAT64:
        if dtype == np.float16:
            data["vector"] = vector.astype(np.float32)
        if dtype.name != "float64":
            data["dtype"] = dtype.name
    try:
        return orjson.dumps(data, option=_DUMP_OPTIONS)
    except TypeError:
        return (standard_json(data) + "\n").encode("utf-8")




def dump(backend: MemoryBackend, target: str | Path | IO[str], namespace: tuple[str, ...] = ()) -> int:
    """Write ``namespace`` of ``backend`` to ``target``; returns the number of records written."""
    expected = backend.count(CountRequest(namespace=namespace)).count
    embedding_id = backend.get_meta(MetaGetRequest(key="embedding_id", namespace=namespace)).value
    header = {
        "format": FORMAT,
        "version": VERSION,
        "embedding_id": embedding_id if isinstance(embedding_id, str) else None,
        "namespace": list(namespace),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "count": expected,
    }
    if isinstance(target, str | os.PathLike):
        with atomic_binary_writer(Path(target)) as out:
            return _write_records(backend, namespace, header, expected, out.write)
    stream = target
    return _write_records(backend, namespace, header, expected, lambda b: stream.write(b.decode("utf-8")))


def _write_records(
    backend: MemoryBackend,
    namespace: tuple[str, ...],
    header: dict[str, Any],
    expected: int,
    write: Callable[[bytes], object],
) -> int:
    """Write the header and every record line through ``write`` (a page of lines per call)."""
    write((json_line(header) + "\n").encode("utf-8"))
    written = 0
    lines: list[bytes] = []
    for record in backend.iter_all(namespace=namespace, page_size=PAGE_SIZE):
        lines.append(record_bytes(record))
        if len(lines) == PAGE_SIZE:
            write(b"".join(lines))
            written += len(lines)
            lines.clear()
    if lines:
        write(b"".join(lines))
        written += len(lines)
    if written != expected:
        raise MemoryFileError(
            f"memory changed while dumping: the header says {expected} records, "
            f"{written} were written; nothing was saved"
        )
    return written


# -- reading -------------------------------------------------------------------------------------




def _check_header(header: Any) -> tuple[tuple[str, ...], str | None, int]:
    if not isinstance(header, dict):
        raise MemoryFileError("line 1: the header must be a JSON object")
    if header.get("format") != FORMAT:
        raise MemoryFileError(f"line 1: format must be {FORMAT!r}, got {header.get('format')!r}")
    version = header.get("version")
    match = _SEMVER.match(version) if isinstance(version, str) else None
    if match is None:
        raise MemoryFileError(f"line 1: version must be a semantic version, got {version!r}")
    if int(match.group(1)) != SUPPORTED_MAJOR:
        raise MemoryFileError(
            f"line 1: version {version} is not supported (this reader reads {SUPPORTED_MAJOR}.x)"
        )
    expected_keys = {"format", "version", "embedding_id", "namespace", "created_at", "count"}
    missing = sorted(expected_keys - header.keys())
    if missing:
        raise MemoryFileError(f"line 1: header field {missing[0]!r} is missing")
    count = header["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise MemoryFileError(f"line 1: header field 'count' must be a non-negative integer, got {count!r}")
    namespace = header["namespace"]
    if not isinstance(namespace, list) or not all(isinstance(p, str) and p for p in namespace):
        raise MemoryFileError(
            f"line 1: header field 'namespace' must be a list of non-empty strings, got {namespace!r}"
        )
    embedding_id = header["embedding_id"]
    if embedding_id is not None and (not isinstance(embedding_id, str) or not embedding_id):
        raise MemoryFileError(
            f"line 1: header field 'embedding_id' must be a non-empty string or null, got {embedding_id!r}"
        )
    created_at = header["created_at"]
    if not isinstance(created_at, str) or not _RFC3339_Z.match(created_at):
        raise MemoryFileError(
            f"line 1: header field 'created_at' must be an RFC 3339 time ending in Z, got {created_at!r}"
        )
    try:
        datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        raise MemoryFileError(f"line 1: header field 'created_at' is not a valid time: {created_at!r}") from None
    return tuple(namespace), embedding_id, count


_RECORD_KEYS = frozenset({"note", "vector", "embedding_id", "namespace"})
_RECORD_KEYS_DTYPE = _RECORD_KEYS | {"dtype"}
_NOTE_KEYS = frozenset({"id", "text", "timestamp", "metadata"})
_NUMBERS = frozenset({int, float})
_DTYPES = {name: np.dtype(name) for name in VECTOR_DTYPES}
_PACKERS: dict[tuple[str, int], struct.Struct] = {}
_NOT_IN_NUMBERS = ('"', "[", "]", "{", "t", "f", "n")
"""Characters no JSON number holds; each other JSON value (string, array, object, true, false,
null) holds one of them."""


def _canonical_record(line: str) -> MemoryRecord | None:
    """The record of a line written exactly as :func:`dump` writes it, or None (the general path
    then decides). Call under ``np.errstate(over="ignore")``.

    The line must be ``{"note":N,"vector":[V],R`` where ``N`` is orjson's text of the parsed note,
    ``{R`` orjson's text of the parsed ``embedding_id``, ``namespace`` (and ``dtype``), in that
    order, and ``V`` holds none of :data:`_NOT_IN_NUMBERS`. Such a line has no repeated key (every
    key is in ``N`` or ``R``, texts of dicts) and no integer beyond 64 bits outside ``V`` (orjson
    reads one as a float, and writes floats with ``.`` or ``e``), and every vector element is a
    number: so orjson's reading is the strict reader's (:func:`parse_json_line`), without its scans.
    The values are then checked as :func:`_plain_record` checks them."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict:
        return None
    keys = data.keys()
    rest = {"embedding_id": data.get("embedding_id"), "namespace": data.get("namespace")}
    if keys == _RECORD_KEYS_DTYPE:
        rest["dtype"] = dtype = data["dtype"]
    elif keys == _RECORD_KEYS:
        dtype = "float64"
    else:
        return None
    note, vector = data["note"], data["vector"]
    if type(note) is not dict or type(vector) is not list or not vector:
        return None
    try:
        head = '{"note":' + orjson.dumps(note).decode() + ',"vector":['
        tail = "]," + orjson.dumps(rest).decode()[1:]
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return None
    start, end = len(head), len(line) - len(tail)
    if end <= start or not line.startswith(head) or not line.endswith(tail):
        return None
    find = line.find
    for char in _NOT_IN_NUMBERS:
        if find(char, start, end) >= 0:
            return None
    return _checked_record(note, vector, rest["embedding_id"], rest["namespace"], dtype)


def _plain_record(data: Any) -> MemoryRecord | None:
    """The record of a line in the shape ``dump`` writes (any key order or spacing), checked by hand
    (no pydantic); None when anything differs, so that :meth:`MemoryRecord.from_dict` decides. Never
    accepts what the contract would refuse. Call under ``np.errstate(over="ignore")``."""
    if type(data) is not dict or not (data.keys() == _RECORD_KEYS or data.keys() == _RECORD_KEYS_DTYPE):
        return None
    vector = data["vector"]
    if type(vector) is not list or not vector or not set(map(type, vector)) <= _NUMBERS:
        return None
    dtype = data.get("dtype", "float64")
    return _checked_record(data["note"], vector, data["embedding_id"], data["namespace"], dtype)


def _checked_record(
    note: Any, vector: list[Any], embedding_id: Any, namespace: Any, dtype: Any
) -> MemoryRecord | None:
    """The record of parsed values, ``vector`` a non-empty list of ints and floats, ``dtype`` the
    line's (``"float64"`` when it has none); None unless every value is what the contract accepts
    (it then gives the verdict and the message). The vector is converted as
    :func:`coniti.memory.as_vector` converts it."""
    if type(dtype) is not str or dtype not in _DTYPES:
        return None
    if (
        type(note) is not dict
        or note.keys() != _NOTE_KEYS
        or not (embedding_id is None or type(embedding_id) is str)
        or type(namespace) is not list
    ):
        return None
    for part in namespace:
        if type(part) is not str or not part:
            return None
    note_id, text, timestamp, metadata = note["id"], note["text"], note["timestamp"], note["metadata"]
    if (
        type(note_id) is not str
        or not note_id
        or type(text) is not str
        or type(timestamp) not in _NUMBERS
        or type(metadata) is not dict
        or not _plain_json(metadata)
    ):
        return None
    try:
        timestamp = float(timestamp)
        array = _vector(vector, dtype)
    except OverflowError:  # an integer beyond the float range
        return None
    if array is None or not math.isfinite(timestamp):
        return None
    return MemoryRecord.trusted(
        Note.trusted(note_id, text, timestamp, metadata), array, embedding_id, tuple(namespace)
    )


def _vector(values: list[Any], dtype: str) -> np.ndarray | None:
    """``values`` (ints and finite floats, as both readers give them) as an array of ``dtype``: the
    values the contract's ``np.array(values, dtype)`` gives; None where one is not finite there (or
    OverflowError: an int beyond a double's range). float32 and float64 go through :mod:`struct`,
    which casts each value to C float or double as numpy does, but fails instead of making an
    infinity (half the time of ``np.array`` on a list, and no finiteness pass for float32)."""
    if dtype == "float16":
        array = np.array(values, dtype=np.float16)
        return array if np.isfinite(array).all() else None
    key = (dtype, len(values))
    packer = _PACKERS.get(key)
    if packer is None:
        if len(_PACKERS) >= 64:
            _PACKERS.clear()
        packer = _PACKERS[key] = struct.Struct(f"={len(values)}{'f' if dtype == 'float32' else 'd'}")
    try:
        packed = packer.pack(*values)
    except (OverflowError, struct.error):  # beyond the dtype's range, or an int beyond a double's
        return None
    array = np.frombuffer(packed, dtype=_DTYPES[dtype]).copy()
    return array if dtype == "float32" or np.isfinite(array).all() else None


def _plain_json(value: Any) -> bool:
    """Whether :func:`~coniti.contracts.check_json_value` accepts ``value``, a parsed JSON value
    (dict keys are strings, no tuples); it is kept as it is, not copied. One pass, no recursion."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind is dict:
            children = item.values()
        elif kind is list:
            children = item
        else:
            return _plain_scalar(item)  # only ``value`` itself: containers are pushed, not scalars
        if children and depth >= MAX_JSON_DEPTH:
            return False  # a child would be nested deeper than the limit
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                pending.append((child, depth + 1))
            elif not _plain_scalar(child):
                return False
    return True


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if kind is float:
        return math.isfinite(value)
    return False


def _record_of_line(line: str, lineno: int) -> MemoryRecord:
    """The record of any line: strict JSON, then the plain shape or the contract's verdict."""
    if not line.strip():
        raise MemoryFileError(f"line {lineno}: blank line")
    data = parse_json_line(line, lineno)
    record = _plain_record(data)
    if record is None:  # not the plain shape: let the contract give the verdict and the message
        try:
            record = MemoryRecord.from_dict(data)
        except ContractError as exc:
            raise MemoryFileError(f"line {lineno}: invalid record: {exc}") from None
        except OverflowError:
            raise MemoryFileError(
                f"line {lineno}: invalid record: a number is too large for a float"
            ) from None
    return record


def _read_file(
    source: str | Path | IO[str], rehome: tuple[str, ...] | None
) -> tuple[tuple[str, ...], str | None, list[MemoryRecord]]:
    lines = read_lines(source)
    first = next(lines, None)
    if first is None:
        raise MemoryFileError("line 1: the file is empty (no header)")
    namespace, embedding_id, count = _check_header(parse_json_line(first[1], 1))
    records: list[MemoryRecord] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    duplicate: tuple[int, MemoryRecord] | None = None  # reported once every record is known valid
    with np.errstate(over="ignore"):  # a value too large for the dtype is refused as infinite
        for lineno, line in lines:
            record = _canonical_record(line)
            if record is None:
                record = _record_of_line(line, lineno)
            if rehome is not None:
                record = MemoryRecord.trusted(record.note, record.vector, record.embedding_id, rehome)
            key = (record.namespace, record.note.id)
            if key in seen and duplicate is None:
                duplicate = (lineno, record)
            seen.add(key)
            records.append(record)
    if duplicate is not None:
        lineno, record = duplicate
        raise MemoryFileError(
            f"line {lineno}: record id {record.id!r} appears twice in namespace {record.namespace!r}"
        )
    if len(records) != count:
        raise MemoryFileError(
            f"the header says {count} records but the file has {len(records)} "
            "(truncated or edited file); nothing was loaded"
        )
    return namespace, embedding_id, records


def load(
    backend: MemoryBackend, source: str | Path | IO[str], namespace: tuple[str, ...] | None = None
) -> int:
    """Validate the whole file, then write its records into ``backend``; returns the record count.

    ``namespace=None`` keeps each record's own namespace; a namespace re-homes every record into it.
    """
    header_ns, file_embedding, records = _read_file(source, namespace)
    meta_ns = header_ns if namespace is None else namespace
    target_embedding = backend.get_meta(MetaGetRequest(key="embedding_id", namespace=meta_ns)).value
    if file_embedding is not None and target_embedding is not None and file_embedding != target_embedding:
        raise MemoryFileError(
            f"the file's embedding id {file_embedding!r} differs from the target's "
            f"{target_embedding!r} in namespace {meta_ns!r}; nothing was loaded"
        )
    for ns, ids in _id_batches(records):
        found = backend.get(GetRequest(ids=ids, namespace=ns)).records
        if found:
            raise MemoryFileError(
                f"record id {found[0].id!r} already exists in namespace {ns!r}; nothing was loaded"
            )
    written: list[MemoryRecord] = []
    try:
        for start in range(0, len(records), BATCH_SIZE):
            batch = records[start : start + BATCH_SIZE]
            backend.put(PutRequest.constructor()({"records": batch}))
            written.extend(batch)
        if file_embedding is not None and target_embedding is None:
            backend.set_meta(MetaSetRequest(key="embedding_id", value=file_embedding, namespace=meta_ns))
    except (MemoryBackendError, OSError) as exc:
        _roll_back(backend, written)
        raise MemoryFileError(f"load failed and was rolled back: {exc}") from exc
    return len(records)


def _id_batches(records: Sequence[MemoryRecord]) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """``(namespace, ids)`` groups of at most ``BATCH_SIZE`` ids, per namespace, in file order."""
    by_namespace: dict[tuple[str, ...], list[str]] = {}
    for record in records:
        by_namespace.setdefault(record.namespace, []).append(record.id)
    for ns, ids in by_namespace.items():
        for start in range(0, len(ids), BATCH_SIZE):
            yield ns, ids[start : start + BATCH_SIZE]


def _roll_back(backend: MemoryBackend, written: Sequence[MemoryRecord]) -> None:
    """Delete what a failed load wrote, as far as the backend lets us (best effort)."""
    for ns, ids in _id_batches(written):
        with contextlib.suppress(MemoryBackendError, OSError):
            backend.delete(DeleteRequest(ids=ids, namespace=ns))
