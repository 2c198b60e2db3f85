"""Pinned files of a Hugging Face hub repository, fetched once into the hub's own cache.

The cache is huggingface_hub's, in its layout, so files that sentence-transformers or transformers
already downloaded are used as they are, and the files fetched here serve them too:

* the directory: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
  else ``~/.cache/huggingface/hub``;
* a file's content: ``models--{org}--{name}/blobs/{etag}``, where the etag is the SHA-256 of a file
  stored in Git LFS and the Git blob SHA-1 of any other (content-addressed: a blob fetched for one
  revision serves every revision with the same file);
* a revision: ``models--{org}--{name}/snapshots/{revision}/{path}``, a relative symlink to the blob.

Files come from ``{endpoint}/{repo}/resolve/{revision}/{path}`` (redirects followed), the endpoint
being ``$HF_ENDPOINT``, else ``https://huggingface.co``; ``HF_HUB_OFFLINE=1`` forbids any request.
Nothing is sent but the request (no token, no telemetry); the proxy variables apply (urllib).

What :func:`fetch` guarantees:

* a file gets its blob name only once its size and SHA-256 equal its pins, checked as it streams (a
  server sending more than the pinned size is cut off);
* the files of one fetch land together or not at all: each is downloaded to a temporary file beside
  its blob (:func:`coniti.atomicfile.atomic_writer`), and they are renamed into place only when every
  one has passed; then the snapshot's symlinks are made (each made under a temporary name and
  renamed);
* on any failure (HTTP error, connection lost, timeout, a pin not met, Ctrl-C) every temporary file is
  removed and so is every directory this fetch created, empty again; a fetch killed outright leaves
  its temporary files, which the next fetch of the same blob removes;
* concurrent fetches of the same files are safe: each renames the same verified content into place.

A blob already in the cache is checked (size, SHA-256) before a snapshot links to it; a snapshot's
files, once there, are not checked here: the reader checks what it loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from coniti.atomicfile import atomic_writer, fsync_dir
from coniti.errors import MemoryFileError, ModelFileError

__all__ = [
    "DEFAULT_ENDPOINT",
    "HubFile",
    "HubModel",
    "cache_dir",
    "cached",
    "endpoint",
    "fetch",
    "offline",
    "snapshot_dir",
]

DEFAULT_ENDPOINT = "https://huggingface.co"
_CHUNK = 1 << 20
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})


@dataclass(frozen=True)
class HubFile:
    """One file of a repository at a revision: its path there, size, SHA-256 and etag (the SHA-256
    for a Git LFS file, else the Git blob SHA-1 of its content)."""

    path: str
    size: int
    sha256: str
    etag: str


@dataclass(frozen=True)
class HubModel:
    """The pinned files of a model repository (``org/name``) at a revision (a commit hash)."""

    repo: str
    revision: str
    files: tuple[HubFile, ...]

    @property
    def folder(self) -> str:
        """The repository's directory name in the cache."""
        return "models--" + self.repo.replace("/", "--")


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache directory (see the module docstring) for ``environ`` (default: the process's)."""
    env = os.environ if environ is None else environ
    explicit = env.get("HF_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def endpoint(environ: Mapping[str, str] | None = None) -> str:
    """``$HF_ENDPOINT`` without a trailing ``/``, else :data:`DEFAULT_ENDPOINT`."""
    env = os.environ if environ is None else environ
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids requests (``1``, ``ON``, ``YES`` or ``TRUE``, any case)."""
    env = os.environ if environ is None else environ
    return env.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE


def snapshot_dir(model: HubModel, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``model``'s files are (or will be) in the cache; it may not exist."""
    return cache_dir(environ) / model.folder / "snapshots" / model.revision


def cached(model: HubModel, environ: Mapping[str, str] | None = None) -> Path | None:
    """The snapshot directory when every one of ``model``'s files is there (symlinks followed), else
    None. The files are not checked."""
    snapshot = snapshot_dir(model, environ)
    if all((snapshot / f.path).is_file() for f in model.files):
        return snapshot
    return None


def fetch(
    model: HubModel, environ: Mapping[str, str] | None = None, *, timeout: float = 60.0
) -> Path:
    """The snapshot directory holding every one of ``model``'s files, fetching those it lacks (see the
    module docstring for what is guaranteed). ``timeout`` bounds each connection and each read, in
    seconds. Raises :class:`~coniti.errors.ModelFileError` naming the URL or path and the reason: the
    endpoint unreachable, an HTTP error, a file not the pinned one (refused), the cache not writable,
    or ``HF_HUB_OFFLINE`` set."""
    snapshot = snapshot_dir(model, environ)
    missing = [f for f in model.files if not (snapshot / f.path).is_file()]
    if not missing:
        return snapshot
    if offline(environ):
        raise ModelFileError(
            f"HF_HUB_OFFLINE is set and {snapshot} lacks {', '.join(f.path for f in missing)}"
        )
    blobs = snapshot.parent.parent / "blobs"
    base = f"{endpoint(environ)}/{model.repo}/resolve/{model.revision}"
    directories = [blobs, *sorted({(snapshot / f.path).parent for f in missing})]
    with _new_directories(directories):
        try:
            written = []
            with contextlib.ExitStack() as landing:
                for f in missing:
                    blob = blobs / f.etag
                    if not _holds(blob, f):
                        out = landing.enter_context(atomic_writer(blob))
                        _download(f"{base}/{f.path}", out, f, timeout)
                        written.append(blob)
            for blob in written:
                os.chmod(blob, 0o644)  # atomic_writer's 0600 is for a user's private files
            for f in missing:
                _link(snapshot / f.path, blobs / f.etag)
        except MemoryFileError as exc:  # atomic_writer's: the cache cannot be written
            raise ModelFileError(str(exc)) from exc
        except OSError as exc:
            raise ModelFileError(f"cannot write in {snapshot}: {exc.strerror or exc}") from exc
    return snapshot


@contextlib.contextmanager
def _new_directories(directories: list[Path]) -> Iterator[None]:
    """Make ``directories`` (and their parents); if the body raises, remove again, deepest first,
    each one made here that is empty by then."""
    made: list[Path] = []
    try:
        for directory in directories:
            missing = []
            for parent in (directory, *directory.parents):
                if parent.exists():
                    break
                missing.append(parent)
            directory.mkdir(parents=True, exist_ok=True)
            made.extend(reversed(missing))
    except OSError as exc:
        _remove_empty(made)
        raise ModelFileError(f"cannot create {directory}: {exc.strerror or exc}") from exc
    try:
        yield
    except BaseException:
        _remove_empty(made)
        raise


def _remove_empty(made: list[Path]) -> None:
    for directory in sorted(set(made), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _holds(blob: Path, f: HubFile) -> bool:
    """Whether ``blob`` is a regular file with ``f``'s size and SHA-256."""
    try:
        with blob.open("rb") as file:
            if os.fstat(file.fileno()).st_size != f.size:
                return False
            return hashlib.file_digest(file, "sha256").hexdigest() == f.sha256
    except OSError:
        return False


def _download(url: str, out: IO[bytes], f: HubFile, timeout: float) -> None:
    """Stream ``url`` into ``out``; raise ModelFileError unless it is ``f`` (size, SHA-256)."""
    import http.client
    import urllib.error
    import urllib.request

    from coniti import __version__

    request = urllib.request.Request(url, headers={"User-Agent": f"coniti/{__version__}"})
    digest = hashlib.sha256()
    got = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            while chunk := response.read(_CHUNK):
                got += len(chunk)
                if got > f.size:
                    raise ModelFileError(f"{url}: more than the pinned {f.size} bytes: refused")
                digest.update(chunk)
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        raise ModelFileError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise ModelFileError(f"cannot reach {url}: {exc.reason}") from None
    except (http.client.HTTPException, OSError) as exc:
        raise ModelFileError(
            f"{url}: the download broke off after {got} of {f.size} bytes: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if got < f.size:  # the connection ended early (urllib does not always say so)
        raise ModelFileError(f"{url}: the download broke off after {got} of {f.size} bytes")
    found = digest.hexdigest()
    if found != f.sha256:
        raise ModelFileError(f"{url}: SHA-256 {found} is not the pinned {f.sha256}: refused")


def _link(path: Path, blob: Path) -> None:
    """Make ``path`` a relative symlink to ``blob``, atomically (made aside, then renamed)."""
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.link"
    os.symlink(os.path.relpath(blob, path.parent), temporary)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_dir(path.parent)
