"""A stand-in for the Hugging Face hub on 127.0.0.1, for the tests of coniti.hub and the model fetch.

It serves the files of a directory (the installed model package's) under the hub's URL layout,
``/{repo}/resolve/{revision}/{path}``, and, as the hub does for a file stored in Git LFS, answers
``model.safetensors`` with a 302 redirect to ``/lfs/{path}``, where the bytes are. Faults are chosen
per file: ``corrupt`` (one byte flipped, the length unchanged), ``cut`` (the full Content-Length
announced, half the body sent, then the connection closed). Every request path is recorded.
Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self

_LFS = frozenset({"model.safetensors"})
_CHUNK = 1 << 20


class HubServer:
    """Serves ``root``'s files as ``repo`` at ``revision``; use as a context manager."""

    def __init__(self, root: Path, repo: str, revision: str) -> None:
        self.root = root
        self.prefix = f"/{repo}/resolve/{revision}/"
        self.corrupt: set[str] = set()
        self.cut: set[str] = set()
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The endpoint, for ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                hub.requests.append(self.path)
                if self.path.startswith(hub.prefix):
                    name = self.path[len(hub.prefix) :]
                    if name in _LFS:
                        self.send_response(302)
                        self.send_header("Location", f"/lfs/{name}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                elif self.path.startswith("/lfs/"):
                    name = self.path[len("/lfs/") :]
                else:
                    name = ""
                path = hub.root / name
                if not name or ".." in name.split("/") or not path.is_file():
                    self.send_error(404, "Entry not found")
                    return
                self._send(name, path)

            def _send(self, name: str, path: Path) -> None:
                size = path.stat().st_size
                limit = size // 2 if name in hub.cut else size
                flip = size // 2 if name in hub.corrupt else -1
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                sent = 0
                with path.open("rb") as file:
                    while sent < limit:
                        chunk = bytearray(file.read(min(_CHUNK, limit - sent)))
                        if sent <= flip < sent + len(chunk):
                            chunk[flip - sent] ^= 0x01
                        self.wfile.write(chunk)
                        sent += len(chunk)
                if limit < size:
                    self.wfile.flush()
                    self.close_connection = True

        return Handler
