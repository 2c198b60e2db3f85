"""The README's "MCP server" section: its client configuration is a valid `coniti mcp` command, and
its Python example runs (the SDK's client over stdio) and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import click
import pytest

from coniti.cli.app import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^### MCP server\n(.*?)(?=^##+ |\Z)", text, re.S | re.M)
    assert match is not None, "README has no '### MCP server' section"
    return match.group(1)


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), re.S)


def test_the_client_configuration_is_a_coniti_mcp_command() -> None:
    """The mcpServers entry runs `coniti` with arguments the mcp command accepts."""
    (block,) = _blocks("json")
    entry = json.loads(block)["mcpServers"]["coniti"]
    assert entry["command"] == "coniti" and entry["args"][0] == "mcp"
    command = cli.get_command(click.Context(cli), "mcp")
    assert command is not None
    parsed = command.make_context("mcp", list(entry["args"][1:]))
    assert parsed.params["prefix"] == ("alice",)


def test_the_example_prints_what_its_comments_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python example, run as it is, prints the commented lines in order."""
    (block,) = _blocks("python")
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert out.getvalue().splitlines() == expected and len(expected) == 4
