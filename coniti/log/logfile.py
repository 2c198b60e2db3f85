"""The log export: ``coniti-log`` JSON Lines, version 1.0.0 — a store's whole history, read from and
written into an :class:`~coniti.log.EventLog` (``log/FORMAT.md`` §9).

Line 1 is a header ``{"format": "coniti-log", "version", "log_format", "events", "head_hash",
"created_at", "store_id"}``; line ``1 + s`` is event ``s`` (every event, from 1 to the head, in order):
its readable fields ``seq, at, kind, namespace, id, timestamp, key, actor, reason, erased, prev,
hash`` and ``frame``, the exact stored bytes in base64 (the content travels inside the frame; see
``log/FORMAT.md``, "The log export"). UTF-8, ``\\n`` line ends.

:func:`export_log` writes a new temporary file beside the target (0600, created exclusively under a
random name, :mod:`coniti.atomicfile`) and renames it over the target only once every event is
written (``.gz`` selects gzip), like :func:`coniti.memfile.dump`; a target that is not a regular file
is refused. The events are those up to
the head when the export began.

:func:`import_log` builds a new store from a file. It reads every line and checks, in order: the
header; that each line is JSON with the fields above; that the frame decodes and its payload matches
its digest; the sequence numbers (1, 2, ... without a gap); the hash chain; that the readable fields
equal the frame's; that recorded times never go backwards and each event applies to the state before
it; and at the end the event count and head hash of the header. The frames are checked and
folded by :meth:`EventLog.import_frames <coniti.log.EventLog.import_frames>` (the chain walk of
:mod:`coniti.log.chain`), a batch per transaction; the first problem, by line, is the one reported.
The store is assembled in a temporary directory beside ``path`` and renamed to ``path`` only when all
of it passed, so a rejection (:class:`~coniti.errors.MemoryFileError` naming the line) creates no
store at ``path``, nor the directories above it that it had to create. A full disk raises
:class:`~coniti.errors.StoreFull` instead: the file was not rejected, the disk was.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from coniti.errors import ContractError, MemoryFileError, StoreVersionError
from coniti.jsonl import atomic_text_writer, fsync_dir, json_line, parse_json_line, read_lines
from coniti.log.chain import FoldError
from coniti.log.codec import EVENT_VERSION, GENESIS, LogEvent, decode_envelope
from coniti.log.eventlog import EventLog
from coniti.log.feed import read_frames

__all__ = ["EVENT_FIELDS", "EXPORT_FORMAT", "EXPORT_VERSION", "export_log", "fork_log", "import_log"]

EXPORT_FORMAT = "coniti-log"
"""The header's ``format``: names this file format (not the event version, not the store layout)."""
EXPORT_VERSION = "1.0.0"
"""The header's ``version``: the semantic version of this file format."""
SUPPORTED_MAJOR = 1
_BATCH = 1000
_IMPORT_BATCH = 5000
EVENT_FIELDS = (
    "seq", "at", "kind", "namespace", "id", "timestamp", "key", "actor", "reason", "erased", "prev",
    "hash", "frame",
)

Source = str | os.PathLike[str] | IO[str]


# -- export --------------------------------------------------------------------------------------


def _line(event: LogEvent, frame: bytes) -> str:
    return json_line({
        "seq": event.seq,
        "at": event.at,
        "kind": event.kind,
        "namespace": list(event.namespace),
        "id": event.id,
        "timestamp": event.timestamp,
        "key": event.key,
        "actor": event.actor,
        "reason": event.reason,
        "erased": event.erased,
        "prev": event.prev.hex(),
        "hash": event.hash.hex(),
        "frame": base64.b64encode(frame).decode("ascii"),
    })


def export_log(log: EventLog, target: Source) -> int:
    """Write every event of ``log`` up to its current head to ``target``; returns how many."""
    head = log.head()
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "log_format": EVENT_VERSION,
        "events": head.seq,
        "head_hash": head.hash.hex(),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "store_id": log.store.store_id.hex(),
    }
    written = 0
    last_hash = GENESIS
    with atomic_text_writer(Path(target) if isinstance(target, os.PathLike) else target) as out:
        out.write(json_line(header) + "\n")
        while written < head.seq:
            frames = read_frames(log.store, written, head.seq, _BATCH)
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
    if header.get("format") != EXPORT_FORMAT:
        raise MemoryFileError(f"line 1: format must be {EXPORT_FORMAT!r}, got {header.get('format')!r}")
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
    if log_format > EVENT_VERSION:
        raise MemoryFileError(
            f"line 1: log_format {log_format} is newer than this coniti reads ({EVENT_VERSION}): "
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


def _frame_of_line(data: Any, lineno: int) -> bytes:
    """The frame of an event line, once the line is an object with every field."""
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
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MemoryFileError(f"{where}: field 'frame' is not valid base64") from None


def _check_readable(data: dict[str, Any], event: LogEvent) -> None:
    """Every readable field of event line ``data`` equals that of ``event``, its decoded frame."""
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
        ("erased", data["erased"] is event.erased),
        ("prev", data["prev"] == event.prev.hex()),
        ("hash", data["hash"] == event.hash.hex()),
    ]
    for name, ok in readable:
        if not ok:
            raise MemoryFileError(
                f"line {event.seq + 1}: field {name!r} ({data[name]!r}) does not match event "
                f"{event.seq}'s frame"
            )


def _events_of(source: Source) -> Iterator[tuple[int, Any]]:
    for lineno, line in read_lines(Path(source) if isinstance(source, os.PathLike) else source):
        if not line.strip():
            raise MemoryFileError(f"line {lineno}: blank line")
        yield lineno, parse_json_line(line, lineno)


class _Batch:
    """Event lines read but not yet imported, by sequence number (line ``1 + s`` holds event ``s``)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.lines: dict[int, dict[str, Any]] = {}
        self.frames: list[bytes] = []
        self.reached = 0
        """The last event that decoded and chained (the import fails, if it does, after it)."""

    def add(self, seq: int, data: dict[str, Any], frame: bytes) -> None:
        self.lines[seq] = data
        self.frames.append(frame)

    def check(self, event: LogEvent) -> None:
        self.reached = event.seq
        _check_readable(self.lines[event.seq], event)

    def flush(self) -> None:
        """Import the batch: raises :class:`MemoryFileError` naming the line of the first event
        that does not decode, chain, match its readable fields or apply."""
        self.reached = min(self.lines, default=1) - 1
        try:
            self.log.import_frames(self.frames, self.check)
        except FoldError as exc:
            raise MemoryFileError(f"line {exc.seq + 1}: {exc}") from None
        except StoreVersionError as exc:
            raise MemoryFileError(f"line {self.reached + 2}: {exc}") from None
        self.lines.clear()
        self.frames.clear()


def _assemble(source: Source, log: EventLog) -> int:
    lines = _events_of(source)
    first = next(lines, None)
    if first is None:
        raise MemoryFileError("line 1: the file is empty (no header)")
    count, head_hash = _check_header(first[1])
    batch = _Batch(log)
    n = 0
    while True:
        try:
            item = next(lines, None)
            if item is None:
                break
            lineno, data = item
            if n == count:
                raise MemoryFileError(f"line {lineno}: the header promises {count} events; more follow")
            frame = _frame_of_line(data, lineno)
        except MemoryFileError:
            batch.flush()  # a problem on an earlier line is reported first
            raise
        n += 1
        batch.add(n, data, frame)
        if len(batch.frames) == _IMPORT_BATCH:
            batch.flush()
    batch.flush()
    if n != count:
        raise MemoryFileError(
            f"line {n + 2}: the file ends after {n} events; the header promises {count} (truncated?)"
        )
    last = log.head().hash
    if last != head_hash:
        raise MemoryFileError(
            f"line 1: head_hash {head_hash.hex()} is not the hash of the last event ({last.hex()})"
        )
    return count


_IMPORTING = ".importing-"


def _remove_stale_imports(parent: Path, name: str) -> None:
    """Remove the scratch stores of imports into ``parent / name`` whose process died (nobody holds
    their directory lock)."""
    prefix = f".{name}{_IMPORTING}"
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # an import in progress
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
            finally:
                os.close(fd)


def _first_missing(path: Path) -> Path | None:
    """The outermost ancestor of ``path`` (or ``path``) that does not exist, or None."""
    missing = None
    while not path.exists():
        missing = path
        if path.parent == path:
            break
        path = path.parent
    return missing


def import_log(source: Source, path: str | os.PathLike[str], check: Callable[[EventLog], None] | None = None) -> int:
    """Create a new store at ``path`` holding exactly the events of ``source``; returns how many.
    See the module docstring. ``path`` must not exist or be an empty directory. ``check``, if given,
    is called with the assembled store before it appears at ``path``; what it raises aborts the
    import (nothing is created).

    The scratch store ``.NAME.importing-<random>`` beside ``path`` is locked (``flock``) while the
    import runs; one left by a killed import is removed by the next import into ``path``. A failed
    import also removes the parent directories it created."""
    return _create(path, lambda log: _assemble(source, log), check)


def fork_log(parent: EventLog, path: str | os.PathLike[str], at: int) -> int:
    """Create a new store at ``path`` whose log is ``parent``'s events 1 to ``at``, frame for frame
    (the same hashes, so the same Merkle root at every size up to ``at``), as :func:`import_log`
    creates one (a scratch store renamed into place; nothing at ``path`` if it fails). Returns
    ``at``. Raises :class:`ContractError` for an ``at`` past the parent's head."""
    head = parent.head().seq
    if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= head:
        raise ContractError(f"fork point at must be a seq between 0 and the head ({head}), got {at!r}")

    def copy(log: EventLog) -> int:
        done = 0
        while done < at:
            frames = read_frames(parent.store, done, at, _IMPORT_BATCH)
            log.import_frames(frame for _, frame in frames)
            done = frames[-1][0]
        return done

    return _create(path, copy, None)


def _create(path: str | os.PathLike[str], fill: Callable[[EventLog], int], check: Callable[[EventLog], None] | None) -> int:
    """A new store at ``path`` filled by ``fill`` (returns the count it reports) in a scratch store
    beside it, checked by ``check``, then renamed into place."""
    target = Path(path)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise MemoryFileError(
            f"{target} already exists and is not empty: an import creates a new store (give a new or "
            "empty directory)"
        )
    parent = target.absolute().parent
    created = _first_missing(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemoryFileError(f"cannot create {parent}: {exc.strerror or exc}") from exc
    _remove_stale_imports(parent, target.name)
    scratch = parent / f".{target.name}{_IMPORTING}{uuid.uuid4().hex[:12]}"
    log: EventLog | None = None
    lock: int | None = None
    try:
        os.mkdir(scratch, 0o700)
        lock = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(lock, fcntl.LOCK_SH)  # shared, as every open store holds its directory
        log = EventLog(scratch, durability="nosync")
        count = fill(log)
        if check is not None:
            check(log)
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
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(exc, OSError):
            raise MemoryFileError(f"cannot create the store at {target}: {exc}") from exc
        raise
    finally:
        if lock is not None:
            os.close(lock)
    return count
