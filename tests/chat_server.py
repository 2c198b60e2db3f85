"""A stand-in for an OpenAI-compatible chat completions endpoint on 127.0.0.1, for tests of coniti.llm.

``POST /v1/chat/completions`` answers ``{"choices": [{"message": {"role": "assistant", "content":
...}}]}`` with the next of ``replies`` (the last one repeats). ``faults`` is a list consumed one per
request before the replies: an int answers that HTTP status, ``"slow"`` sleeps past any test
timeout, ``"garbage"`` answers a body that is not JSON. Every request body is recorded (``bodies``)
with its Authorization header (``auth``). Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class ChatServer:
    def __init__(self, replies: list[str], faults: list[Any] | None = None) -> None:
        self.replies = list(replies)
        self.faults = list(faults or [])
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.bodies.append(body)
                server.auth.append(self.headers.get("Authorization"))
                fault = server.faults.pop(0) if server.faults else None
                if self.path != "/v1/chat/completions":
                    fault = 404
                if fault == "slow":
                    time.sleep(2)
                    return
                if isinstance(fault, int):
                    self.send_response(fault)
                    self.end_headers()
                    return
                reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                data = b"not json" if fault == "garbage" else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
