"""Serving an MCP server over streamable HTTP, to this machine or, with a bearer token, beyond it.

Whoever reaches the port reaches the whole memory the server serves (reads, and writes unless it is
read-only). So :func:`serve_http` binds to a loopback address unless told otherwise, and refuses any
other address (``0.0.0.0`` and ``::`` included) without a token: with one, every HTTP request must
carry ``Authorization: Bearer <token>`` and anything else is answered ``401`` before the MCP server
sees it. The token is compared in constant time. There is no TLS here: beyond a trusted network, put
the server behind a TLS-terminating proxy, or the token travels in clear.

:func:`read_token` reads a token file: one line of at least :data:`MIN_TOKEN_CHARS` characters
without spaces, in a file no one but its owner may read (``chmod 600``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from coniti.errors import ContractError

__all__ = ["MIN_TOKEN_CHARS", "BearerToken", "is_loopback", "read_token", "serve_http"]

MIN_TOKEN_CHARS = 16
"""Shortest token :func:`read_token` accepts (``secrets.token_urlsafe(32)`` gives 43)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (``127.0.0.0/8``, ``::1``); False for any
    other name or address, ``0.0.0.0`` and ``::`` (every interface) included."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | os.PathLike[str]) -> str:
    """The bearer token in the file ``path``; :class:`ContractError` naming the file when it cannot
    be read, holds no token of at least :data:`MIN_TOKEN_CHARS` characters (one line, no spaces), or
    can be read by its group or others."""
    where = Path(path)
    try:
        mode = where.stat().st_mode
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"token file {where}: cannot read it ({exc})") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        raise ContractError(
            f"token file {where}: readable by others than its owner (mode {stat.S_IMODE(mode):o}); "
            f"chmod 600 it"
        )
    token = text.strip()
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ContractError(
            f"token file {where}: expected one token of at least {MIN_TOKEN_CHARS} characters without "
            "spaces (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token


class BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` (compared in
    constant time) is answered ``401`` with a JSON error and ``WWW-Authenticate: Bearer``; a
    websocket is closed (policy violation); lifespan events pass through to ``app``."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "unauthorized: send Authorization: Bearer <token>"}).encode()
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="coniti"'),
            ],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, scope: Scope) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(bytes(given[0]), self._expected)


def serve_http(server: Any, host: str, port: int, *, token: str | None = None) -> None:
    """Run ``server`` (an :class:`mcp.server.mcpserver.MCPServer`) over streamable HTTP at
    ``http://host:port/mcp`` until it is stopped (Ctrl-C, SIGTERM). A ``host`` that is not loopback
    (:func:`is_loopback`) needs a ``token``, else :class:`ContractError` before anything binds; with
    a token every request must carry it (:class:`BearerToken`)."""
    if token is None and not is_loopback(host):
        raise ContractError(
            f"serving on {host} (not a loopback address) needs a bearer token: anyone who reaches "
            "the port would read and write the memory"
        )
    import anyio
    import uvicorn

    app: App = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level=server.settings.log_level.lower())
    anyio.run(uvicorn.Server(config).serve)
