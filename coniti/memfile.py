"""The portable memory file: ``coniti-memory`` JSON Lines, version 1.1.0.

Line 1 is a header ``{"format", "version", "embedding_id", "namespace", "created_at", "count"}``; each
following line is one :class:`~coniti.memory.MemoryRecord` as ``to_dict()`` gives it. UTF-8, ``\\n``.
A record line has the keys ``note``, ``vector`` (an array of numbers, or ``null`` for a record
without a vector: its ``embedding_id`` is then ``null``), ``embedding_id``, ``namespace``, and
``dtype`` (a vector's, when not float64), ``expires_at`` and ``blob`` only when set. ``blob`` is
``{"base64": text}``: the record's bytes in standard base64 with padding (RFC 4648 §4), at most
:data:`~coniti.jsonl.MAX_BLOB_BYTES` decoded; anything else there is refused naming the line and
the field. Version 1.1.0 added ``vector: null`` and ``blob``; a file without them is a 1.0.0 file,
and every 1.x file is read.

:func:`dump` streams one namespace page by page. For a path it writes a new temporary file beside it
(mode 0600, created exclusively under a random name), flushes it to disk and renames it over the
target only when every record was written, so a failed dump leaves any previous file untouched; a
target that is a directory, device, FIFO or socket is refused (see :mod:`coniti.atomicfile`); ``.gz``
in the name selects gzip. If the number of records written
differs from the header's count (memory changed while dumping) it fails with
:class:`~coniti.errors.MemoryFileError`.

:func:`load` reads and validates the whole file before writing anything, in this order of concern:
format and major version; header fields; no blank lines and every record valid; no duplicate id within
a namespace; the record count; the embedding id against the target's; no id already in the target.
Any failure raises ``MemoryFileError`` naming the line where there is one, and the target is unchanged.
Validation streams: it holds one batch of records at a time and a 64-bit hash per record (a repeated
hash is confirmed by a second pass), so memory does not grow with the file. A stream (stdin) is first
copied to an anonymous temporary file, since the file is read again to write it. Then, where the
backend declares :attr:`~coniti.memory.MemoryBackend.supports_put_batches`, every record and the
embedding id are written in one all-or-nothing step (a crash, SIGKILL or Ctrl-C leaves nothing, and a
retry succeeds); otherwise in batches of 500, and if a write fails what was written is deleted (best
effort, through the backend's own delete). Either way the error is ``MemoryFileError``.

Reading a record line: a line byte for byte as :func:`dump` writes it is read by a fast path whose
shape proves that orjson's reading is the strict reader's (see :func:`_canonical_record`); any other
line goes through the strict reader (:func:`parse_json_line`). Either way a record is accepted exactly
when the contract (:meth:`MemoryRecord.from_dict`) accepts it, and is then the same record bit for bit.
"""

from __future__ import annotations

import array
import base64
import contextlib
import math
import os
import re
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol

import numpy as np
import orjson

from coniti.actor import Note
from coniti.contracts import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, ContractError
from coniti.errors import DuplicateRecord, MemoryBackendError, MemoryFileError, namespace_text
from coniti.jsonl import (
    MAX_LINE_BYTES,
    Source,
    atomic_binary_writer,
    atomic_text_writer,
    fsync_dir,
    json_line,
    note_size_problem,
    parse_json_line,
    read_lines,
    standard_json,
)
from coniti.records import VECTOR_DTYPES, MemoryRecord, as_blob
from coniti.requests import (
    CountRequest,
    CountResult,
    DeleteRequest,
    DeleteResult,
    GetRequest,
    GetResult,
    MetaGetRequest,
    MetaResult,
    MetaSetRequest,
    PutRequest,
    PutResult,
)
from coniti.text import valid_text
from coniti.times import in_horizon

__all__ = [
    "BATCH_SIZE",
    "Backend",
    "FORMAT",
    "MAX_LINE_BYTES",
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
VERSION = "1.1.0"
SUPPORTED_MAJOR = 1
BATCH_SIZE = 500
PAGE_SIZE = 500
_BATCH_BYTES = 8 * 1024 * 1024
"""A load batch holds at most :data:`BATCH_SIZE` records and about this many bytes of lines."""



class Backend(Protocol):
    """What :func:`dump` and :func:`load` use of a backend: public operations of
    :class:`~coniti.memory.MemoryBackend`, which every backend has (typed here, so the memory file
    does not import the backend interface that offers ``dump`` and ``load`` as methods)."""

    supports_put_batches: ClassVar[bool]

    def count(self, request: CountRequest, /) -> CountResult: ...

    def get(self, request: GetRequest, /) -> GetResult: ...

    def put(self, request: PutRequest, /) -> PutResult: ...

    def delete(self, request: DeleteRequest, /) -> DeleteResult: ...

    def get_meta(self, request: MetaGetRequest, /) -> MetaResult: ...

    def set_meta(self, request: MetaSetRequest, /) -> MetaResult: ...

    def iter_all(self, *, namespace: Sequence[str], page_size: int) -> Iterator[MemoryRecord]: ...

    def put_batches(
        self, batches: Iterable[Sequence[MemoryRecord]], meta: MetaSetRequest | None, /
    ) -> int: ...


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
    if note.kind is not None:  # a note with a kind takes the contract's path when read
        data["note"]["kind"] = note.kind
    facts = note.facts()
    if facts is not None:  # so does a note with valid time or sources
        if facts[0] is not None:
            data["note"]["valid_from"] = facts[0]
        if facts[1] is not None:
            data["note"]["valid_to"] = facts[1]
        if facts[2]:
            data["note"]["derived_from"] = list(facts[2])
    if record.expires_at is not None:
        data["expires_at"] = record.expires_at
    if record.blob is not None:
        data["blob"] = {"base64": base64.b64encode(record.blob).decode("ascii")}
    if vector is None:
        return _dumped(data)
    dtype = vector.dtype
    if dtype is _FLOAT32:  # the common dtypes by identity: reading dtype.name is slow
        data["dtype"] = "float32"
    elif dtype is not _FLOAT64:
        if dtype == np.float16:
            data["vector"] = vector.astype(np.float32)
        if dtype.name != "float64":
            data["dtype"] = dtype.name
    return _dumped(data)


def _dumped(data: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(data, option=_DUMP_OPTIONS)
    except TypeError:
        return (standard_json(data) + "\n").encode("utf-8")




def dump(backend: Backend, target: str | Path | IO[str], namespace: tuple[str, ...] = ()) -> int:
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
    backend: Backend,
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
_LINE_KEYS = _RECORD_KEYS_DTYPE | {"blob"}
"""The keys of a line the fast paths read (a line with ``expires_at`` takes the contract's path)."""
_REST_ORDER = ("embedding_id", "namespace", "blob", "dtype")
"""The keys after the vector, in the order :func:`record_bytes` writes them."""
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

    The line must be ``{"note":N,"vector":[V],R`` (or ``{"note":N,"vector":null,R`` for a record
    without a vector) where ``N`` is orjson's text of the parsed note, ``{R`` orjson's text of the
    parsed ``embedding_id``, ``namespace`` (and ``blob``, and ``dtype``), in that order, and ``V``
    holds none of :data:`_NOT_IN_NUMBERS`. Such a line has no repeated key (every key is in ``N`` or
    ``R``, texts of dicts) and no integer beyond 64 bits outside ``V`` (orjson reads one as a float,
    and writes floats with ``.`` or ``e``), and every vector element is a number: so orjson's
    reading is the strict reader's (:func:`parse_json_line`), without its scans. The values are
    then checked as :func:`_plain_record` checks them."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict:
        return None
    keys = data.keys()
    if keys == _RECORD_KEYS_DTYPE:
        rest = {"embedding_id": data["embedding_id"], "namespace": data["namespace"], "dtype": data["dtype"]}
    elif keys == _RECORD_KEYS:
        rest = {"embedding_id": data["embedding_id"], "namespace": data["namespace"]}
    elif _RECORD_KEYS < keys <= _LINE_KEYS:
        rest = {key: data[key] for key in _REST_ORDER if key in keys}
    else:
        return None
    note, vector = data["note"], data["vector"]
    if type(note) is not dict or not (vector is None or type(vector) is list and vector):
        return None
    try:
        head = '{"note":' + orjson.dumps(note).decode() + (',"vector":[' if vector else ',"vector":null,')
        tail = ("]," if vector else "") + orjson.dumps(rest).decode()[1:]
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return None
    start, end = len(head), len(line) - len(tail)
    if (end != start if vector is None else end <= start) or not line.startswith(head) or not line.endswith(tail):
        return None
    find = line.find
    for char in _NOT_IN_NUMBERS:
        if find(char, start, end) >= 0:
            return None
    return _checked_record(
        note, vector, rest["embedding_id"], rest["namespace"], rest.get("dtype", _DEFAULT), rest.get("blob")
    )


def _plain_record(data: Any) -> MemoryRecord | None:
    """The record of a line in the shape ``dump`` writes (any key order or spacing), checked by hand
    (no pydantic); None when anything differs, so that :meth:`MemoryRecord.from_dict` decides. Never
    accepts what the contract would refuse. Call under ``np.errstate(over="ignore")``."""
    if type(data) is not dict or not _RECORD_KEYS <= data.keys() <= _LINE_KEYS:
        return None
    vector = data["vector"]
    if vector is not None and (type(vector) is not list or not vector or not set(map(type, vector)) <= _NUMBERS):
        return None
    dtype = data.get("dtype", _DEFAULT)
    return _checked_record(data["note"], vector, data["embedding_id"], data["namespace"], dtype, data.get("blob"))


_DEFAULT = object()
"""The ``dtype`` of a line without one (float64 for a vector; none is right without a vector)."""


def _checked_record(
    note: Any, vector: list[Any] | None, embedding_id: Any, namespace: Any, dtype: Any, blob: Any
) -> MemoryRecord | None:
    """The record of parsed values, ``vector`` a non-empty list of ints and floats or None,
    ``dtype`` the line's (:data:`_DEFAULT` when it has none), ``blob`` its parsed value (None when
    absent); None unless every value is what the contract accepts (it then gives the verdict and
    the message). The vector is converted as :func:`coniti.memory.as_vector` converts it, the blob
    by :func:`coniti.memory.as_blob`."""
    if vector is None:
        if dtype is not _DEFAULT or embedding_id is not None:
            return None
    elif dtype is _DEFAULT:
        dtype = "float64"
    elif type(dtype) is not str or dtype not in _DTYPES:
        return None
    if blob is not None:
        try:
            blob = as_blob(blob)
        except ValueError:
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
        array = None if vector is None else _vector(vector, dtype)
    except OverflowError:  # an integer beyond the float range
        return None
    if (array is None and vector is not None) or not in_horizon(timestamp):
        return None
    if not _valid_note(note_id, text, namespace, metadata):
        return None
    return MemoryRecord.trusted(
        Note.trusted(note_id, text, timestamp, metadata), array, embedding_id, tuple(namespace), None, None, blob
    )


def _valid_note(note_id: str, text: str, namespace: list[str], metadata: dict[str, Any]) -> bool:
    """Whether the note's strings (metadata keys and values included) are valid Unicode and the
    note is within :data:`~coniti.jsonl.MAX_NOTE_BYTES`: what the contract checks besides types."""
    if not (valid_text(note_id) and valid_text(text) and all(valid_text(part) for part in namespace)):
        return False
    try:
        return note_size_problem(note_id, text, metadata) is None
    except orjson.JSONEncodeError:  # orjson encodes no lone surrogate: one is in the metadata
        return False


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


Batch = list[tuple[int, MemoryRecord]]
"""``(line number, record)`` pairs of consecutive lines."""


def _record_batches(lines: Iterator[tuple[int, str]], rehome: tuple[str, ...] | None) -> Iterator[Batch]:
    """The records of ``lines`` in batches of at most :data:`BATCH_SIZE` records and about
    :data:`_BATCH_BYTES` of text; each line is validated (a bad one raises naming it)."""
    while True:
        texts: list[tuple[int, str]] = []
        size = 0
        for lineno, line in lines:
            texts.append((lineno, line))
            size += len(line)
            if len(texts) == BATCH_SIZE or size >= _BATCH_BYTES:
                break
        if not texts:
            return
        batch: Batch = []
        with np.errstate(over="ignore"):  # a value too large for the dtype is refused as infinite
            for lineno, line in texts:
                record = _canonical_record(line)
                if record is None:
                    record = _record_of_line(line, lineno)
                if rehome is not None:
                    record = MemoryRecord.trusted(
                        record.note, record.vector, record.embedding_id, rehome, None, None, record.blob
                    )
                batch.append((lineno, record))
        del texts
        yield batch


class _File:
    """A memory file that can be read more than once: a path is reopened, a stream is first copied
    to an anonymous temporary file (unlinked from the start, so nothing is left if the process dies).
    """

    def __init__(self, source: Source) -> None:
        self._source = source
        self._spool: IO[bytes] | None = None

    def __enter__(self) -> _File:
        if not isinstance(self._source, str | os.PathLike):
            self._spool = _spooled(self._source)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._spool is not None:
            self._spool.close()

    @contextlib.contextmanager
    def lines(self) -> Iterator[Iterator[tuple[int, str]]]:
        """A fresh pass over the lines (the file is closed when the block ends)."""
        if self._spool is not None:
            self._spool.seek(0)
        with contextlib.closing(read_lines(self._source if self._spool is None else self._spool)) as lines:
            yield lines

    def header(self, lines: Iterator[tuple[int, str]]) -> tuple[tuple[str, ...], str | None, int]:
        first = next(lines, None)
        if first is None:
            raise MemoryFileError("line 1: the file is empty (no header)")
        return _check_header(parse_json_line(first[1], 1))


def _spooled(stream: IO[str] | IO[bytes]) -> IO[bytes]:
    """A copy of ``stream`` in an anonymous temporary file (text is encoded as UTF-8; a lone
    surrogate then fails to decode on its line, as it would in a file)."""
    spool = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            spool.write(chunk.encode("utf-8", "surrogatepass") if isinstance(chunk, str) else chunk)
    except UnicodeDecodeError as exc:
        spool.close()
        raise MemoryFileError(f"the input is not valid UTF-8 ({exc.reason})") from None
    except OSError as exc:
        spool.close()
        raise MemoryFileError(f"cannot read the input: {exc.strerror or exc}") from exc
    except BaseException:
        spool.close()
        raise
    return spool


def _key_hash(record: MemoryRecord) -> int:
    return hash((record.namespace, record.note.id))


class _Checked:
    """What validating a whole file found: header values, the record count, the first id found
    already in the target."""

    def __init__(self, namespace: tuple[str, ...], embedding_id: str | None, count: int) -> None:
        self.namespace = namespace
        self.embedding_id = embedding_id
        self.count = count
        self.records = 0
        self.existing: tuple[str, tuple[str, ...]] | None = None


def _validate(
    file: _File, rehome: tuple[str, ...] | None, backend: Backend
) -> _Checked:
    """Read the whole file once and raise :class:`MemoryFileError` for the first concern of the
    module docstring's order, except the two that need the target (reported by :func:`load`).
    Holds one batch of records and 8 bytes per record (a hash of its key) at a time."""
    hashes = array.array("q")
    with file.lines() as lines:
        checked = _Checked(*file.header(lines))
        for batch in _record_batches(lines, rehome):
            hashes.extend([_key_hash(record) for _, record in batch])
            checked.records += len(batch)
            if checked.existing is None:
                checked.existing = _first_existing(backend, [record for _, record in batch])
    repeated = _repeated_hashes(hashes)
    del hashes
    if repeated:
        _raise_first_duplicate(file, rehome, repeated)
    if checked.records != checked.count:
        raise MemoryFileError(
            f"the header says {checked.count} records but the file has {checked.records} "
            "(truncated or edited file); nothing was loaded"
        )
    return checked


def _repeated_hashes(hashes: array.array[int]) -> set[int]:
    ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
    same = ordered[1:] == ordered[:-1]
    return {int(h) for h in ordered[1:][same]}


def _raise_first_duplicate(file: _File, rehome: tuple[str, ...] | None, repeated: set[int]) -> None:
    """Read the file again, keeping only the keys whose hash repeats, and raise for the first key
    seen twice (a mere hash collision raises nothing)."""
    seen: set[tuple[tuple[str, ...], str]] = set()
    with file.lines() as lines:
        file.header(lines)
        for batch in _record_batches(lines, rehome):
            for lineno, record in batch:
                if _key_hash(record) not in repeated:
                    continue
                key = (record.namespace, record.note.id)
                if key in seen:
                    raise MemoryFileError(
                        f"line {lineno}: record id {record.id!r} appears twice in namespace "
                        f"{namespace_text(record.namespace)}"
                    )
                seen.add(key)


def _first_existing(
    backend: Backend, records: Sequence[MemoryRecord]
) -> tuple[str, tuple[str, ...]] | None:
    for ns, ids in _id_batches(records):
        found = backend.get(GetRequest(ids=ids, namespace=ns)).records
        if found:
            return found[0].id, ns
    return None


class _Batches:
    """The records of a validated file, in batches, read afresh on each iteration. A file that
    changed since it was validated raises :class:`MemoryFileError` while being iterated."""

    def __init__(self, file: _File, rehome: tuple[str, ...] | None, checked: _Checked) -> None:
        self._file = file
        self._rehome = rehome
        self._checked = checked

    def __iter__(self) -> Iterator[list[MemoryRecord]]:
        checked = self._checked
        n = 0
        with self._file.lines() as lines:
            if self._file.header(lines) != (checked.namespace, checked.embedding_id, checked.count):
                raise MemoryFileError("the file changed while it was being loaded; nothing was loaded")
            for batch in _record_batches(lines, self._rehome):
                n += len(batch)
                yield [record for _, record in batch]
        if n != checked.count:
            raise MemoryFileError("the file changed while it was being loaded; nothing was loaded")


def load(backend: Backend, source: Source, namespace: tuple[str, ...] | None = None) -> int:
    """Validate the whole file, then write its records into ``backend``; returns the record count.

    ``namespace=None`` keeps each record's own namespace; a namespace re-homes every record into it.
    All or nothing where the backend :attr:`~coniti.memory.MemoryBackend.supports_put_batches`
    (one write, even under SIGKILL or Ctrl-C); otherwise in batches, deleted again on failure (best
    effort). Reading and checking hold one batch of records (:data:`BATCH_SIZE` records or the
    lines up to the one that passes 8 MiB), one line of at most :data:`MAX_LINE_BYTES`, and 16 bytes
    per record while checking for duplicate ids, whatever the file; the write adds what the
    backend's own write holds, which for a :class:`~coniti.impl.log.LogBackend` is every page it
    writes until the commit (one LMDB transaction: peak memory is at most the growth of its
    ``data.mdb`` plus ten batches of lines, as the README states and ``tests/test_load_bounds.py``
    checks). Running out of memory raises :class:`MemoryFileError`, never ``MemoryError``.
    """
    try:
        with _File(source) as file:
            return _load(backend, file, namespace)
    except MemoryError:
        raise MemoryFileError("not enough memory to load the file; nothing was loaded") from None


def _load(backend: Backend, file: _File, rehome: tuple[str, ...] | None) -> int:
    checked = _validate(file, rehome, backend)
    meta_ns = checked.namespace if rehome is None else rehome
    file_embedding = checked.embedding_id
    target_embedding = backend.get_meta(MetaGetRequest(key="embedding_id", namespace=meta_ns)).value
    if file_embedding is not None and target_embedding is not None and file_embedding != target_embedding:
        raise MemoryFileError(
            f"the file's embedding id {file_embedding!r} differs from the target's "
            f"{target_embedding!r} in namespace {namespace_text(meta_ns)}; nothing was loaded"
        )
    if checked.existing is not None:
        rid, ns = checked.existing
        raise MemoryFileError(
            f"record id {rid!r} already exists in namespace {namespace_text(ns)}; nothing was loaded"
        )
    meta = None
    if file_embedding is not None and target_embedding is None:
        meta = MetaSetRequest(key="embedding_id", value=file_embedding, namespace=meta_ns)
    batches = _Batches(file, rehome, checked)
    if backend.supports_put_batches:
        try:
            return backend.put_batches(batches, meta)
        except DuplicateRecord as exc:  # written meanwhile by someone else
            raise MemoryFileError(f"{exc}; nothing was loaded") from exc
        except MemoryFileError:
            raise
        except (MemoryBackendError, OSError) as exc:
            raise MemoryFileError(f"load failed and nothing was written: {exc}") from exc
    return _load_in_batches(backend, batches, meta)


def _load_in_batches(backend: Backend, batches: _Batches, meta: MetaSetRequest | None) -> int:
    """The load for a backend without :meth:`~coniti.memory.MemoryBackend.put_batches`: a put per
    batch, then the metadata; on failure what was written is deleted (best effort)."""
    written: list[tuple[tuple[str, ...], list[str]]] = []
    n = 0
    try:
        for batch in batches:
            backend.put(PutRequest.constructor()({"records": batch}))
            written.extend(_id_batches(batch))
            n += len(batch)
        if meta is not None:
            backend.set_meta(meta)
    except BaseException as exc:
        _roll_back(backend, written)
        if isinstance(exc, MemoryBackendError | OSError) and not isinstance(exc, MemoryFileError):
            raise MemoryFileError(f"load failed and was rolled back: {exc}") from exc
        raise
    return n


def _id_batches(records: Sequence[MemoryRecord]) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """``(namespace, ids)`` groups of at most ``BATCH_SIZE`` ids, per namespace, in file order."""
    by_namespace: dict[tuple[str, ...], list[str]] = {}
    for record in records:
        by_namespace.setdefault(record.namespace, []).append(record.id)
    for ns, ids in by_namespace.items():
        for start in range(0, len(ids), BATCH_SIZE):
            yield ns, ids[start : start + BATCH_SIZE]


def _roll_back(backend: Backend, written: Sequence[tuple[tuple[str, ...], list[str]]]) -> None:
    """Delete what a failed load wrote, as far as the backend lets us (best effort)."""
    for ns, ids in written:
        with contextlib.suppress(MemoryBackendError, OSError):
            backend.delete(DeleteRequest(ids=ids, namespace=ns))
