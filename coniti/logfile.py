"""The portable log file: ``coniti-log`` JSON Lines, version 1.0.0 — a store's whole history.

Line 1 is a header ``{"format": "coniti-log", "version", "log_format", "events", "head_hash",
"created_at", "store_id"}``; line ``1 + s`` is event ``s`` (every event, from 1 to the head, in order):
its readable fields ``seq, at, kind, namespace, id, timestamp, key, actor, reason, erased, prev,
hash`` and ``frame``, the exact stored bytes in base64 (the content travels inside the frame; see
``log/FORMAT.md``, "The log export"). UTF-8, ``\\n`` line ends.

:func:`export_log` writes ``<name>.partial`` (0600) and renames it over the target only once every
event is written (``.gz`` selects gzip), like :func:`coniti.memfile.dump`. The events are those up to
the head when the export began.

:func:`import_log` builds a new store from a file. It reads every line and checks, in order: the
header; that each line is JSON with the fields above; that the frame decodes and its payload matches
its digest; that the readable fields equal the frame's; the sequence numbers (1, 2, ... without a
gap); the hash chain; that recorded times never go backwards; that each event applies to the state
before it; and at the end the event count and head hash of the header. The store is assembled in a
temporary directory beside ``path`` and renamed to ``path`` only when all of it passed, so a
rejection (:class:`~coniti.errors.MemoryFileError` naming the line) creates no store at ``path``.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from coniti.errors import ConitiError, MemoryFileError
from coniti.log import FORMAT_VERSION, EventLog
from coniti.log.codec import META, PUT, Event, decode_envelope
from coniti.log.feed import read_frames
from coniti.log.projections import Head
from coniti.log.store import SYS_DB, SYS_HEAD
from coniti.log.transfer import Chain, FoldRefused, append_checked, check_next
from coniti.memfile import atomic_text_writer, fsync_dir, json_line, parse_json_line, read_lines

if TYPE_CHECKING:
    from coniti.impl.log import LogBackend

__all__ = ["EVENT_FIELDS", "FORMAT", "VERSION", "export_log", "import_log"]

FORMAT = "coniti-log"
VERSION = "1.0.0"
SUPPORTED_MAJOR = 1
_BATCH = 1000
_IMPORT_BATCH = 5000
EVENT_FIELDS = (
    "seq", "at", "kind", "namespace", "id", "timestamp", "key", "actor", "reason", "erased", "prev",
    "hash", "frame",
)


# -- export --------------------------------------------------------------------------------------


def _line(event: Event, frame: bytes) -> str:
    erased = event.kind in (PUT, META) and len(frame) == _envelope_end(frame)
    data = {
            "seq": event.seq,
            "at": event.at,
            "kind": event.kind,
            "namespace": list(event.namespace),
            "id": event.id,
            "timestamp": event.timestamp,
            "key": event.key,
            "actor": event.actor,
            "reason": event.reason,
            "erased": erased,
            "prev": event.prev.hex(),
            "hash": event.hash.hex(),
            "frame": base64.b64encode(frame).decode("ascii"),
        }
    return json_line(data)


def _envelope_end(frame: bytes) -> int:
    return 4 + int.from_bytes(frame[:4], "big") + 32


def export_log(backend: LogBackend, target: str | os.PathLike[str] | IO[str]) -> int:
    """Write every event up to the current head to ``target``; returns how many."""
    store = backend._log.store
    with store.read() as txn:
        head = Head.decode(txn.get(SYS_HEAD, db=store.dbs[SYS_DB]))
    header = {
        "format": FORMAT,
        "version": VERSION,
        "log_format": FORMAT_VERSION,
        "events": head.seq,
        "head_hash": head.hash.hex(),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "store_id": backend.store_id,
    }
    written = 0
    last_hash = bytes(32)
    with atomic_text_writer(Path(target) if isinstance(target, os.PathLike) else target) as out:
        out.write(json_line(header) + "\n")
        while written < head.seq:
            frames = read_frames(store, written, head.seq, _BATCH)
            if not frames:
                break
            for seq, frame in frames:
                event = decode_envelope(frame, seq)
                out.write(_line(event, frame) + "\n")
                last_hash = event.hash
                written = seq
        if written != head.seq or last_hash != head.hash:
            raise MemoryFileError(
                f"the log changed under the export: {written} of {head.seq} events read; nothing was saved"
            )
    return written


# -- import --------------------------------------------------------------------------------------


def _check_header(header: Any) -> tuple[int, bytes]:
    if not isinstance(header, dict):
        raise MemoryFileError("line 1: the header must be a JSON object")
    if header.get("format") != FORMAT:
        raise MemoryFileError(f"line 1: format must be {FORMAT!r}, got {header.get('format')!r}")
    version = header.get("version")
    major = version.split(".", 1)[0] if isinstance(version, str) else ""
    if not major.isdigit():
        raise MemoryFileError(f"line 1: version must be a semantic version, got {version!r}")
    if int(major) != SUPPORTED_MAJOR:
        raise MemoryFileError(
            f"line 1: version {version} is not supported (this reader reads {SUPPORTED_MAJOR}.x)"
        )
    log_format = header.get("log_format")
    if not isinstance(log_format, int) or isinstance(log_format, bool) or log_format < 1:
        raise MemoryFileError(f"line 1: log_format must be a positive integer, got {log_format!r}")
    if log_format > FORMAT_VERSION:
        raise MemoryFileError(
            f"line 1: log_format {log_format} is newer than this coniti reads ({FORMAT_VERSION}): "
            "upgrade coniti"
        )
    count = header.get("events")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise MemoryFileError(f"line 1: events must be an integer >= 0, got {count!r}")
    head_hash = _hex32(header.get("head_hash"), "line 1: head_hash")
    return count, head_hash


def _hex32(value: Any, where: str) -> bytes:
    if not isinstance(value, str) or len(value) != 64:
        raise MemoryFileError(f"{where} must be 64 hex digits, got {value!r}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise MemoryFileError(f"{where} must be 64 hex digits, got {value!r}") from None


def _same_float(a: Any, b: float | None) -> bool:
    if b is None:
        return a is None
    return isinstance(a, int | float) and not isinstance(a, bool) and float(a) == b


def _event_of_line(data: Any, lineno: int, chain: Chain) -> tuple[Event, bytes]:
    where = f"line {lineno}"
    if not isinstance(data, dict):
        raise MemoryFileError(f"{where}: an event line must be a JSON object")
    missing = [f for f in EVENT_FIELDS if f not in data]
    if missing:
        raise MemoryFileError(f"{where}: missing field {missing[0]!r}")
    text = data["frame"]
    if not isinstance(text, str):
        raise MemoryFileError(f"{where}: field 'frame' must be a base64 string")
    try:
        frame = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MemoryFileError(f"{where}: field 'frame' is not valid base64") from None
    try:
        event = check_next(chain, frame)
    except ConitiError as exc:
        raise MemoryFileError(f"{where}: {exc}") from None
    erased = event.erased
    readable: list[tuple[str, bool]] = [
        ("seq", data["seq"] == event.seq and type(data["seq"]) is int),
        ("at", _same_float(data["at"], event.at)),
        ("kind", data["kind"] == event.kind),
        ("namespace", data["namespace"] == list(event.namespace)),
        ("id", data["id"] == event.id),
        ("timestamp", _same_float(data["timestamp"], event.timestamp)),
        ("key", data["key"] == event.key),
        ("actor", data["actor"] == event.actor),
        ("reason", data["reason"] == event.reason),
        ("erased", data["erased"] is erased),
        ("prev", data["prev"] == event.prev.hex()),
        ("hash", data["hash"] == event.hash.hex()),
    ]
    for name, ok in readable:
        if not ok:
            raise MemoryFileError(
                f"{where}: field {name!r} ({data[name]!r}) does not match event {event.seq}'s frame"
            )
    return event, frame


def _events_of(source: str | os.PathLike[str] | IO[str]) -> Iterator[tuple[int, Any]]:
    for lineno, line in read_lines(Path(source) if isinstance(source, os.PathLike) else source):
        if not line.strip():
            raise MemoryFileError(f"line {lineno}: blank line")
        yield lineno, parse_json_line(line, lineno)


def _assemble(source: str | os.PathLike[str] | IO[str], log: EventLog) -> int:
    lines = _events_of(source)
    first = next(lines, None)
    if first is None:
        raise MemoryFileError("line 1: the file is empty (no header)")
    count, head_hash = _check_header(first[1])
    chain = Chain()
    batch: list[tuple[Event, bytes]] = []

    def flush() -> None:
        try:
            append_checked(log.store, batch)
        except FoldRefused as exc:
            raise MemoryFileError(f"line {exc.seq + 1}: {exc}") from None
        batch.clear()

    for lineno, data in lines:
        if chain.seq == count:
            raise MemoryFileError(f"line {lineno}: the header promises {count} events; more follow")
        batch.append(_event_of_line(data, lineno, chain))
        if len(batch) == _IMPORT_BATCH:
            flush()
    flush()
    if chain.seq != count:
        raise MemoryFileError(
            f"line {chain.seq + 2}: the file ends after {chain.seq} events; the header promises "
            f"{count} (truncated?)"
        )
    if chain.hash != head_hash:
        raise MemoryFileError(
            f"line 1: head_hash {head_hash.hex()} is not the hash of the last event ({chain.hash.hex()})"
        )
    return count


def import_log(
    source: str | os.PathLike[str] | IO[str], path: str | os.PathLike[str], **options: Any
) -> LogBackend:
    """A new store at ``path`` holding exactly the events of ``source``; see the module docstring.
    ``path`` must not exist or be an empty directory. ``options`` go to ``LogBackend``."""
    from coniti.impl.log import LogBackend

    target = Path(path)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise MemoryFileError(f"{target} already exists; import_log creates a new store")
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemoryFileError(f"cannot create {parent}: {exc.strerror or exc}") from exc
    scratch = parent / f".{target.name}.importing-{uuid.uuid4().hex[:12]}"
    log: EventLog | None = None
    try:
        log = EventLog(scratch, durability="nosync")
        _assemble(source, log)
        log.store.sync()
        log.close()
        log = None
        if target.is_dir():
            target.rmdir()
        os.rename(scratch, target)
        fsync_dir(parent)
    except BaseException as exc:
        if log is not None:
            log.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if isinstance(exc, OSError):
            raise MemoryFileError(f"cannot create the store at {target}: {exc}") from exc
        raise
    return LogBackend(target, **options)



