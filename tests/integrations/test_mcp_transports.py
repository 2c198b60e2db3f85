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
from pathlib import Path
from typing import Any

import fastmcp
import pytest
from mcp import Client, StdioServerParameters
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


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`coniti mcp --http 127.0.0.1:PORT` on a fresh store; after the module, SIGTERM stops it
    cleanly (exit status 0)."""
    store = tmp_path_factory.mktemp("http") / "store"
    port = _free_port()
    proc = subprocess.Popen(_command(store, "--http", f"127.0.0.1:{port}"), env=ENV,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        _wait_for(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


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


@pytest.mark.parametrize("value", ["8000", "localhost:", "localhost:http", "host:70000"])
def test_a_bad_http_address_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--http that is not HOST:PORT exits 2 naming the option."""
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
