"""`coniti mcp` as a real process: over stdio and over streamable HTTP with the MCP SDK's Client,
and a second client implementation (fastmcp.Client) for one round trip; plus the command's own
refusals. Every server process is stopped by the test that started it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fastmcp
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from coniti.cli import main
from coniti.impl.log import LogBackend

pytestmark = pytest.mark.anyio

ENV = {**os.environ, "CONITI_EMBEDDING": "local_hash"}
ENV.pop("CONITI_ACTOR", None)
ENV.pop("CONITI_STORE", None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _command(store: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "coniti", "mcp", "--store", str(store), *options]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"coniti mcp --http exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"coniti mcp --http did not listen on port {port} within {timeout} s")


@contextmanager
def _serving(store: Path, *options: str) -> Iterator[tuple[int, Path]]:
    """`coniti mcp --store STORE OPTIONS` with a free port as PORT in the options, until SIGTERM
    stops it cleanly (exit status 0); yields the port and the file of its stderr."""
    port = _free_port()
    log = store.parent / f"mcp-{port}.err"
    argv = _command(store, *(o.replace("PORT", str(port)) for o in options))
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
    try:
        _wait_for(port, proc)
        yield port, log
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def http_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`coniti mcp --http PORT` (no host: loopback) on a fresh store: its URL and stderr file."""
    with _serving(tmp_path_factory.mktemp("http") / "store", "--http", "PORT") as (port, log):
        yield f"http://127.0.0.1:{port}/mcp", log


@pytest.fixture(scope="module")
def http_url(http_served: tuple[str, Path]) -> str:
    return http_served[0]


TOKEN = "t0ken-for-the-tests-" + "x" * 24


@pytest.fixture(scope="module")
def token_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`coniti mcp --http 127.0.0.1:PORT --token-file F` (F: TOKEN, mode 600) on a fresh store."""
    base = tmp_path_factory.mktemp("token")
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with _serving(base / "store", "--http", "127.0.0.1:PORT", "--token-file", str(token_file)) as (port, _):
        yield f"http://127.0.0.1:{port}/mcp"


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] = result.structured_content
    return content


async def test_stdio_round_trip_stamps_the_client_name(tmp_path: Path) -> None:
    """Over stdio (python -m coniti mcp), a remembered note is recalled, and its event carries the
    name the client gave."""
    store = tmp_path / "store"
    params = StdioServerParameters(command=sys.executable, args=_command(store)[1:], env=ENV)
    info = Implementation(name="stdio-agent", version="0.1")
    async with Client(params, client_info=info) as client:
        await client.call_tool("remember", {"id": "a", "text": "Ada drinks tea", "reason": "told"})
        found = _structured(await client.call_tool("recall", {"query": "Ada drinks tea"}))
    assert [h["id"] for h in found["hits"]] == ["a"]
    with LogBackend(store, read_only=True) as backend:
        assert [(e.actor, e.reason) for e in backend.history("a")] == [("stdio-agent", "told")]


async def test_streamable_http_round_trip(http_url: str) -> None:
    """Over streamable HTTP, the SDK's Client remembers a note and recalls it."""
    async with Client(http_url) as client:
        made = _structured(await client.call_tool(
            "remember", {"id": "h1", "text": "Bob lives in Ghent", "namespace": ["bob"], "reason": "r"}))
        found = _structured(await client.call_tool("recall", {"query": "Bob lives in Ghent", "k": 1}))
    assert made["admitted"] and found["hits"][0]["id"] == "h1"


def test_http_without_a_host_binds_to_loopback(http_served: tuple[str, Path]) -> None:
    """--http PORT serves on 127.0.0.1 (and says so on stderr)."""
    url, log = http_served
    assert url.startswith("http://127.0.0.1:") and f"on {url}" in log.read_text()


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-of-the-right-length", TOKEN,
                                           f"Basic {TOKEN}"], ids=["none", "wrong", "bare", "basic"])
def test_http_with_a_token_file_refuses_requests_without_the_token(
    token_url: str, authorization: str | None
) -> None:
    """With --token-file, an MCP request without 'Authorization: Bearer TOKEN' is answered 401
    (WWW-Authenticate: Bearer) before the MCP server sees it."""
    headers = _HEADERS if authorization is None else {**_HEADERS, "authorization": authorization}
    response = httpx2.post(token_url, json=_INITIALIZE, headers=headers, timeout=30)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")


def test_http_with_a_token_file_serves_requests_with_the_token(token_url: str) -> None:
    """With --token-file, the same request with 'Authorization: Bearer TOKEN' is served."""
    headers = {**_HEADERS, "authorization": f"Bearer {TOKEN}"}
    response = httpx2.post(token_url, json=_INITIALIZE, headers=headers, timeout=30)
    assert response.status_code == 200


async def test_http_with_a_token_file_round_trip(token_url: str) -> None:
    """The SDK's Client sending the token remembers a note and recalls it."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
    async with http, Client(streamable_http_client(token_url, http_client=http)) as client:
        await client.call_tool("remember", {"id": "t1", "text": "Dora keeps bees", "reason": "r"})
        found = _structured(await client.call_tool("recall", {"query": "Dora keeps bees", "k": 1}))
    assert found["hits"][0]["id"] == "t1"


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "192.0.2.1", "example.com"])
def test_a_non_loopback_http_host_needs_a_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    """--http on an address other than loopback (every interface included) without --token-file
    exits 2 naming --token-file, before the store is opened or anything binds (--read-only on a
    missing store: an open would fail otherwise)."""
    store = tmp_path / "s"
    code = main(["mcp", "--store", str(store), "--read-only", "--http", f"{host}:{_free_port()}"])
    assert code == 2 and "--token-file" in capsys.readouterr().err and not store.exists()


@pytest.mark.parametrize(("mode", "text", "why"), [
    (0o644, TOKEN, "chmod 600"), (0o600, "short", "16 characters"), (0o600, "two words " * 3, "16 characters"),
], ids=["readable-by-others", "short", "spaces"])  # fmt: skip
def test_a_weak_token_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int, text: str, why: str
) -> None:
    """A token file readable by others, or without one token of 16+ characters, exits 2 naming
    --token-file and what is wrong, before anything is opened."""
    token_file = tmp_path / "token"
    token_file.write_text(text)
    token_file.chmod(mode)
    code = main(["mcp", "--store", str(tmp_path / "s"), "--http", "9", "--token-file", str(token_file)])
    err = capsys.readouterr().err
    assert code == 2 and "--token-file" in err and why in err and not (tmp_path / "s").exists()


async def test_fastmcp_client_round_trip(http_url: str) -> None:
    """A second client implementation, fastmcp.Client, lists the tools, remembers and recalls."""
    async with fastmcp.Client(http_url) as client:
        names = {t.name for t in await client.list_tools()}
        await client.call_tool("remember", {"id": "f1", "text": "Carol adopted a cat", "reason": "r"})
        found = await client.call_tool("recall", {"query": "Carol adopted a cat", "k": 1})
    assert "recall" in names and found.structured_content is not None
    assert found.structured_content["hits"][0]["id"] == "f1"


def test_read_only_and_allow_erase_is_a_usage_error(tmp_path: Path) -> None:
    """coniti mcp --read-only --allow-erase exits 2 before opening anything."""
    assert main(["mcp", "--store", str(tmp_path / "s"), "--read-only", "--allow-erase"]) == 2
    assert not (tmp_path / "s").exists()


def test_read_only_needs_an_existing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """coniti mcp --read-only on a missing store exits 1 saying so, and creates nothing."""
    assert main(["mcp", "--store", str(tmp_path / "s"), "--read-only"]) == 1
    assert "no store at" in capsys.readouterr().err and not (tmp_path / "s").exists()


@pytest.mark.parametrize("value", ["localhost:", "localhost:http", "host:70000", "eighty"])
def test_a_bad_http_address_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--http that is not [HOST:]PORT exits 2 naming the option."""
    assert main(["mcp", "--http", value]) == 2
    assert "--http" in capsys.readouterr().err


def test_help_does_not_import_the_sdk() -> None:
    """`coniti --help` and `coniti mcp --help` load neither the MCP SDK nor the server module."""
    probe = (
        "import sys; from coniti.cli import main; main(['--help']); main(['mcp', '--help']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types') "
        "or m == 'coniti.integrations.mcp'), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0 and proc.stderr.strip().splitlines()[-1] == "[]"
