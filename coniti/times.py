"""Times written for people and for JSON, and read back: one format and one reader for the command
line and the MCP server, and the horizon every stored time lies within.

Imports nothing heavy, so the command line can use it before it needs the library.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["MAX_TIME", "MIN_TIME", "in_horizon", "iso_time", "outside_horizon", "parse_iso_time"]

MIN_TIME = -62_135_596_800.0
"""0001-01-01T00:00:00Z in epoch seconds: the earliest a note's timestamp or an expiry may be."""

MAX_TIME = 253_402_300_800.0
"""10000-01-01T00:00:00Z in epoch seconds: every note timestamp and expiry is before it. Together
with :data:`MIN_TIME` the horizon is years 1 to 9999 (UTC), what a ``datetime`` holds, so every
stored time can be printed by :func:`iso_time`."""


def in_horizon(seconds: float) -> bool:
    """Whether ``MIN_TIME <= seconds < MAX_TIME`` (False for NaN)."""
    return MIN_TIME <= seconds < MAX_TIME


def outside_horizon(field: str, value: object) -> str:
    """The message refusing ``value`` of ``field``, a time outside the horizon."""
    return (
        f"{field} must lie in years 1 to 9999 UTC (epoch seconds from {MIN_TIME:.0f} to before "
        f"{MAX_TIME:.0f}), got {value!r}"
    )


def iso_time(seconds: float) -> str:
    """Epoch seconds as ISO 8601 in UTC with a ``Z``, to the millisecond when not whole seconds.
    Raises OverflowError, OSError or ValueError beyond what a ``datetime`` holds (never for a time
    within the horizon)."""
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
