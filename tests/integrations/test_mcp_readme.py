"""docs/integrations.md's "MCP server" section: its client configuration is a valid `coniti mcp`
command (its Python example runs with every page, tests/test_docs.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from coniti.cli.app import cli

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(r"^## MCP server\n(.*?)(?=^##? |\Z)", text, re.S | re.M)
    assert match is not None, "docs/integrations.md has no '## MCP server' section"
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
