"""JSON Lines files, the common ground of the memory file (:mod:`coniti.memfile`) and the log export
(:mod:`coniti.log.logfile`): atomic writers, one strict line writer and reader, and a line reader with
a length bound. No pydantic (the log layer uses it).

* :func:`atomic_text_writer` / :func:`atomic_binary_writer` write a new file through
  :mod:`coniti.atomicfile` (exclusive temporary file, fsync, rename; gzip if the name ends in ``.gz``).
* :func:`json_line` writes one line (orjson; the standard encoder with ``\\u`` escapes for lone
  surrogates); :func:`parse_json_line` reads one strictly (no NaN/Infinity, no overflow to infinity,
  no duplicate keys).
* :func:`read_lines` yields ``(line number, text)``, decoding each line on its own and refusing one
  over :data:`MAX_LINE_BYTES` after reading no more than that.

Every failure raises :class:`~coniti.errors.MemoryFileError` naming the line where there is one.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import re
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from coniti.atomicfile import atomic_writer, fsync_dir
from coniti.errors import MemoryFileError

__all__ = [
    "MAX_BLOB_BYTES",
    "MAX_LINE_BYTES",
    "MAX_NOTE_BYTES",
    "MAX_STAMP_CHARS",
    "Source",
    "atomic_binary_writer",
    "atomic_text_writer",
    "fsync_dir",
    "json_line",
    "note_size_problem",
    "parse_json_line",
    "read_lines",
    "standard_json",
]

MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest line a reader accepts (32 MiB of UTF-8); a longer line is refused after reading this much
of it, never buffered whole."""
MAX_BLOB_BYTES = 16 * 1024 * 1024
"""Largest binary payload (``MemoryRecord.blob``) a record may carry: 16 MiB. Both line formats carry
it as base64 (4/3 of its size, 21.3 MiB): the memory file under the record's ``blob`` key, the log
export inside the base64 of the put's frame, so a record with the largest blob still fits a line of
:data:`MAX_LINE_BYTES`, with 10.7 MiB left for its text, metadata and vector. Enforced by the record
contract and by the log's put encoder (``coniti.log.codec``)."""
MAX_NOTE_BYTES = 6 * 1024 * 1024
"""Largest note: its id, text and metadata take at most 6 MiB as JSON (UTF-8, escaped as a memory file
writes them); refused beyond, when the note is made (``Note``, ``NoteBatch``, a patch's result),
before anything is embedded or written. The one size limit of a note, chosen so that every record
stored round-trips through both line formats, whose lines are read up to :data:`MAX_LINE_BYTES`
(32 MiB). Measured with a note at the limit, the largest blob, a 384-dimension float32 vector and
audit stamps of :data:`MAX_STAMP_CHARS`: its memory-file line is 27.34 MiB, its log-export line
(the event's frame in base64, where text and metadata take no more bytes than as JSON, plus the
envelope's fields) 29.35 MiB; a vector costs at most 25 bytes a dimension more in the first, 4/3 of
its bytes in the second (tests/test_size_limit.py)."""
MAX_STAMP_CHARS = 4096
"""Longest audit stamp (an event's actor or reason), in characters."""


def note_size_problem(id: str, text: str, metadata: dict[str, Any]) -> str | None:
    """Why a note of ``id``, ``text`` and ``metadata`` (valid already: strings of valid Unicode,
    JSON-able metadata) is over :data:`MAX_NOTE_BYTES`, or None when it is not. A note of at most
    a sixth of the limit in characters is measured without encoding its text (JSON spends at most
    six bytes on a character). A lone surrogate in the metadata raises ``orjson.JSONEncodeError``."""
    meta = 2 if not metadata else len(orjson.dumps(metadata))
    if 6 * (len(id) + len(text)) + meta + 4 <= MAX_NOTE_BYTES:
        return None
    size = len(orjson.dumps(id)) + len(orjson.dumps(text)) + meta
    if size <= MAX_NOTE_BYTES:
        return None
    return (
        f"the note takes {size:,} bytes as JSON (id, text and metadata); at most "
        f"{MAX_NOTE_BYTES:,} ({MAX_NOTE_BYTES // (1024 * 1024)} MiB) allowed"
    )


# -- writing -------------------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_binary_writer(path: Path) -> Iterator[IO[bytes]]:
    """A byte stream replacing ``path`` atomically (see :mod:`coniti.atomicfile`: an exclusive
    temporary file with a random name, fsynced and renamed over ``path`` on success, removed on
    failure; a target that is not a regular file is refused), gzip if the name ends in ``.gz``."""
    with atomic_writer(path) as raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw, mtime=0) as packed:
                yield packed  # type: ignore[misc]
        else:
            yield raw


@contextlib.contextmanager
def atomic_text_writer(target: str | Path | IO[str]) -> Iterator[IO[str]]:
    """A text stream for ``target``. For a path: as :func:`atomic_binary_writer`, in UTF-8 with
    ``\\n`` line ends. A stream is used as it is."""
    if not isinstance(target, str | os.PathLike):
        yield target
        return
    with atomic_binary_writer(Path(target)) as binary:
        text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
        yield text
        text.flush()
        text.detach()


def json_line(data: Any) -> str:
    """``data`` (JSON values and numpy vectors) as one line of JSON, without the newline. orjson where
    it can; a string holding lone surrogates (a namespace or key may) is written with ``\\u`` escapes
    by the standard encoder instead, since UTF-8 cannot carry it."""
    try:
        return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode("utf-8")
    except TypeError:
        return standard_json(data)


def standard_json(data: Any) -> str:
    """``data`` by the standard encoder: compact, ASCII with ``\\u`` escapes, numpy vectors as lists."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False, default=_array_list)


def _array_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


# -- reading -------------------------------------------------------------------------------------


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number {token[:40]} overflows to infinity")
    return value


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed (numbers must be finite)")


_KEY_END = re.compile(r'"\s*:')


def _key_ends(line: str) -> int:
    """How often '"' is followed by optional white space and ':' — at least the number of keys."""
    if '" ' in line or '"\t' in line or '"\r' in line or '"\n' in line:
        return len(_KEY_END.findall(line))
    return line.count('":')


def _shape(value: Any) -> tuple[int, bool]:
    """How many keys the parsed value's objects hold, and whether a float of magnitude >= 2**63 with
    no fraction appears (orjson reads integer tokens beyond 64 bits as floats). A record's ``vector``
    is not walked: it must be a list of numbers, which record validation checks anyway."""
    keys = 0
    huge = False
    stack = [value]
    if isinstance(value, dict) and isinstance(value.get("vector"), list):
        keys = len(value)
        stack = [v for k, v in value.items() if k != "vector"]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and abs(item) >= 2.0**63 and item.is_integer():
            huge = True
    return keys, huge


def parse_json_line(line: str, lineno: int) -> Any:
    """Strict JSON for one line: no NaN/Infinity, no numbers overflowing to infinity, no duplicate
    keys. Errors raise :class:`MemoryFileError` naming ``lineno``."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        slow = True  # the standard parser words the error, or reads escaped lone surrogates
    else:
        # Every key ends with '"' then ':', so the pattern count is at least the number of keys
        # written; when it equals the number of keys parsed, no key was repeated. Otherwise look
        # closely. Also when a huge whole float appears: orjson reads integers beyond 64 bits as floats.
        if isinstance(data, dict | list):
            keys, huge = _shape(data)
            slow = huge or keys != _key_ends(line)
        else:
            slow = False
    if slow:
        try:
            data = json.loads(
                line,
                object_pairs_hook=_no_duplicate_keys,
                parse_float=_finite_float,
                parse_constant=_refuse_constant,
            )
        except RecursionError:
            raise MemoryFileError(f"line {lineno}: JSON is nested too deeply") from None
        except ValueError as exc:
            raise MemoryFileError(f"line {lineno}: invalid JSON: {exc}") from None
    return data


Source = str | os.PathLike[str] | IO[str] | IO[bytes]
"""A path (``.gz``: gzip), a text stream or a byte stream."""


@contextlib.contextmanager
def _open_source(source: Source) -> Iterator[IO[bytes] | IO[str]]:
    """A byte stream for a path (decompressed for ``.gz``); a stream as it is."""
    if not isinstance(source, str | os.PathLike):
        yield source
        return
    path = Path(source)
    try:
        if path.name.endswith(".gz"):
            stream: IO[bytes] = gzip.open(path, "rb")  # type: ignore[assignment]  # noqa: SIM115
        else:
            stream = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise MemoryFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with stream:
        yield stream


def _stream_lines(stream: IO[bytes] | IO[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line, read with ``readline(MAX_LINE_BYTES + 1)`` so that no
    more than that is ever read into memory for one line. Bytes are decoded line by line, so an
    undecodable byte is reported on its own line."""
    lineno = 0
    while True:
        lineno += 1
        try:
            raw = stream.readline(MAX_LINE_BYTES + 1)
        except UnicodeDecodeError as exc:  # a text stream decodes ahead: the line is approximate
            raise MemoryFileError(f"line {lineno}: not valid UTF-8 ({exc.reason})") from None
        except MemoryError:
            raise MemoryFileError(f"line {lineno}: not enough memory to read it") from None
        except (OSError, EOFError, zlib.error) as exc:
            raise MemoryFileError(f"line {lineno}: cannot read the file: {exc}") from exc
        if not raw:
            return
        if isinstance(raw, bytes):
            complete = raw.endswith(b"\n")
            if not complete and len(raw) > MAX_LINE_BYTES:
                raise MemoryFileError(f"line {lineno}: longer than {MAX_LINE_BYTES} bytes")
            try:
                line = (raw[:-1] if complete else raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MemoryFileError(
                    f"line {lineno}: not valid UTF-8 (byte {exc.start + 1} of the line: {exc.reason})"
                ) from None
            del raw
        else:
            if raw.endswith("\n"):
                line = raw[:-1]
            elif len(raw) > MAX_LINE_BYTES:
                raise MemoryFileError(f"line {lineno}: longer than {MAX_LINE_BYTES} characters")
            else:
                line = raw
        yield lineno, line


def read_lines(source: Source) -> Generator[tuple[int, str], None, None]:
    """``(line number, text)`` for each line, without its ``\\n``. A line longer than
    :data:`MAX_LINE_BYTES` (characters for a text stream), undecodable bytes, corrupt gzip and I/O
    errors raise :class:`MemoryFileError` naming the line."""
    with _open_source(source) as stream:
        yield from _stream_lines(stream)
