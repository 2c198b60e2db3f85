"""Times written for people and for JSON, and read back: one format and one reader for the command
line and the MCP server.

Imports nothing heavy, so the command line can use it before it needs the library.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso_time", "parse_iso_time"]


def iso_time(seconds: float) -> str:
    """Epoch seconds as ISO 8601 in UTC with a ``Z``, to the millisecond when not whole seconds.
    Raises OverflowError, OSError or ValueError beyond what a ``datetime`` holds."""
    moment = datetime.fromtimestamp(seconds, UTC)
    text = moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def parse_iso_time(text: str) -> float:
    """An ISO 8601 date or date-time (``2025-03-01``, ``2025-03-01T09:30``,
    ``2025-03-01 09:30:00+02:00``; what :meth:`datetime.fromisoformat` reads, surrounding
    whitespace ignored) as epoch seconds; one without a timezone is UTC. Raises ValueError for
    anything else (the caller names the field)."""
    moment = datetime.fromisoformat(text.strip())
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()
