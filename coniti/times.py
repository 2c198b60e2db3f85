"""Times written for people and for JSON: one format for the command line and the MCP server.

Imports nothing heavy, so the command line can use it before it needs the library.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso_time"]


def iso_time(seconds: float) -> str:
    """Epoch seconds as ISO 8601 in UTC with a ``Z``, to the millisecond when not whole seconds.
    Raises OverflowError, OSError or ValueError beyond what a ``datetime`` holds."""
    moment = datetime.fromtimestamp(seconds, UTC)
    text = moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")
