"""coniti.times.parse_iso_time: the one reader of ISO times, shared by the command line and MCP."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import coniti
from coniti.cli.parse import ParseError, parse_time
from coniti.times import iso_time, parse_iso_time

PACKAGE = Path(coniti.__file__).parent
TEXTS = ["2025-03-01", "2025-03-01T09:30", " 2025-03-01 09:30:00+02:00 ", "2025-03-01T00:00:00.250Z"]
BAD = ["yesterday", "2025-13-01", "2025-03-01T25:00", "1.5e9x", ""]


def test_a_date_without_a_zone_is_utc_midnight() -> None:
    """A date alone is midnight UTC."""
    assert parse_iso_time("2025-03-01") == 1740787200.0


def test_a_zone_is_honoured() -> None:
    """A date-time with an offset is read in that offset; surrounding whitespace is ignored."""
    assert parse_iso_time(" 2025-03-01T02:00:00+02:00 ") == 1740787200.0


def test_what_iso_time_writes_reads_back() -> None:
    """iso_time's text (Z, milliseconds) reads back to the same seconds."""
    assert parse_iso_time(iso_time(1740787200.25)) == 1740787200.25


@pytest.mark.parametrize("text", BAD)
def test_anything_else_is_a_value_error(text: str) -> None:
    """Text that is not an ISO date or date-time raises ValueError."""
    with pytest.raises(ValueError):
        parse_iso_time(text)


@pytest.mark.parametrize("text", TEXTS)
def test_the_cli_and_mcp_read_an_iso_time_alike(text: str) -> None:
    """The command line (parse_time) and the MCP server read an ISO text to the same seconds."""
    pytest.importorskip("mcp")
    from coniti.integrations.mcp import _seconds

    assert parse_time(text) == _seconds(text, "start") == parse_iso_time(text)


@pytest.mark.parametrize("text", [t for t in BAD if t])
def test_the_cli_and_mcp_refuse_the_same_text(text: str) -> None:
    """A text the reader refuses is refused by the command line and by the MCP server, each
    naming the field."""
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from coniti.integrations.mcp import _seconds

    with pytest.raises(ParseError, match="^--since"):
        parse_time(text, field="--since")
    with pytest.raises(ToolError, match="^start"):
        _seconds(text, "start")


def test_only_the_reader_parses_iso_text_for_the_cli_and_mcp() -> None:
    """No module of coniti.cli or coniti.integrations calls fromisoformat itself."""
    calls = [
        str(path.relative_to(PACKAGE))
        for folder in ("cli", "integrations")
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "fromisoformat"
    ]
    assert calls == []
