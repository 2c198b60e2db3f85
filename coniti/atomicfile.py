"""Writing a file the user named, atomically: the one place coniti creates a file beside a target
(``dump``, ``export_log``).

:func:`atomic_writer` gives a byte stream on a new temporary file in the target's directory, named
``.<name>.<16 random hex digits>.partial``, created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``,
mode 0600), so a planted file or symlink of that name is never opened, let alone truncated. When the
body returns the file is flushed, fsynced, renamed over the target and the directory fsynced; when it
raises (any exception, ``KeyboardInterrupt`` included) the temporary file is removed and the target is
untouched.

The target must be absent or a regular file (a symlink to a regular file is replaced by the new file,
the file it pointed to is left as it was). A directory, device, FIFO or socket is refused with
:class:`~coniti.errors.MemoryFileError` before anything is created: renaming over ``/dev/full`` would
replace the device. Streams (stdout) are the caller's business.

A writer holds an exclusive ``flock`` on its temporary file; one killed (SIGKILL) leaves it behind,
and the next :func:`atomic_writer` for the same target removes every such file whose lock it can take,
so a leftover holds its content only until the next attempt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from coniti.errors import MemoryFileError

__all__ = ["atomic_writer", "check_target", "fsync_dir"]

_BUFFER = 1 << 20
_SUFFIX = ".partial"

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_target(path: Path) -> None:
    """Raise :class:`MemoryFileError` unless ``path`` is absent or (links followed) a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise MemoryFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    kind = _kind(mode)
    if kind is not None:
        raise MemoryFileError(f"cannot write {path}: it is {kind}, not a regular file")


def _temporary_names(directory: Path, name: str) -> Iterator[Path]:
    prefix = f".{name}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            rest = entry.name[len(prefix) :]
            if entry.name.startswith(prefix) and rest.endswith(_SUFFIX) and len(rest) == 16 + len(_SUFFIX):
                yield Path(entry.path)


def _remove_stale(directory: Path, name: str) -> None:
    """Remove temporary files of ``name`` left by killed writers: those whose lock nobody holds."""
    for path in _temporary_names(directory, name):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            with contextlib.suppress(OSError):
                os.unlink(path)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[IO[bytes]]:
    """A buffered byte stream whose content replaces ``path`` once the body returns; see the module
    docstring. Raises :class:`MemoryFileError` for a refused target and for I/O errors."""
    path = Path(path)
    check_target(path)
    directory = path.parent
    _remove_stale(directory, path.name)
    temporary = directory / f".{path.name}.{secrets.token_hex(8)}{_SUFFIX}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise MemoryFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb", buffering=_BUFFER, closefd=False) as raw:
            yield raw
            raw.flush()
            os.fsync(raw.fileno())
        check_target(path)  # it may have changed while we wrote
        os.replace(temporary, path)
        fsync_dir(directory)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise MemoryFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry (after a rename) to disk; errors are ignored (not every FS can)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
