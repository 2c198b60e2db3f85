"""Parsing and formatting of what people type: store paths, namespaces, times, points, metadata.

Namespaces are written as their parts joined by ``/``: ``alice/notes`` is ``("alice", "notes")``.
Inside a part, ``\\/`` stands for a literal ``/`` and ``\\\\`` for a literal ``\\``; any other use
of ``\\`` is an error. The root namespace ``()`` is written ``/`` (or the empty string).

Times are ISO 8601 dates or date-times (``2025-03-01``, ``2025-03-01T09:30``,
``2025-03-01 09:30:00+02:00``); one without a timezone is read as UTC. A plain number is seconds since
the Unix epoch. ``now`` is the current time. Every time, an expiry included, must lie in years 1 to
9999 UTC (the horizon of :mod:`coniti.times`), so that it can be stored and printed.

A *point* in a store's history (``--as-of``, ``at``, ``diff``) is a sequence number (digits only) or an
ISO date or date-time as above, meaning the last event recorded at or before it (epoch seconds are not
accepted there: they would read as sequence numbers).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coniti.errors import namespace_text
from coniti.text import text_problem
from coniti.times import in_horizon, iso_time, parse_iso_time

__all__ = [
    "ParseError",
    "default_store_path",
    "format_namespace",
    "format_time",
    "iso_time",
    "parse_filter",
    "parse_meta_pair",
    "parse_meta_value",
    "parse_namespace",
    "parse_point",
    "parse_text",
    "parse_time",
    "read_stdin_text",
    "resolve_store_path",
]


class ParseError(ValueError):
    """Text typed on the command line that cannot be read; the message says what and why."""


def parse_text(text: str, *, field: str) -> str:
    """``text`` unchanged when it is valid Unicode; else :class:`ParseError` naming ``field``: a
    command-line argument whose bytes are not UTF-8 arrives with lone surrogates in it."""
    problem = text_problem(text)
    if problem is not None:
        raise ParseError(f"{field}: {problem}")
    return text


def parse_namespace(text: str) -> tuple[str, ...]:
    """``"alice/notes"`` -> ``("alice", "notes")``; ``"/"`` and ``""`` -> ``()``. See the module doc."""
    parse_text(text, field=f"namespace {text!r}")
    if text in ("", "/"):
        return ()
    parts: list[str] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt not in ("/", "\\") or not nxt:
                raise ParseError(
                    f"namespace {text!r}: '\\' at position {i} must be followed by '/' or '\\'"
                )
            buf.append(nxt)
            i += 2
            continue
        if c == "/":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(c)
        i += 1
    parts.append("".join(buf))
    if any(not part for part in parts):
        raise ParseError(f"namespace {text!r} has an empty part (write the root namespace as '/')")
    return tuple(parts)


def format_namespace(namespace: tuple[str, ...] | list[str]) -> str:
    """The inverse of :func:`parse_namespace`: ``("a/b", "c")`` -> ``"a\\/b/c"``; ``()`` -> ``"/"``."""
    return namespace_text(namespace)


def parse_time(text: str, *, field: str = "time") -> float:
    """An ISO 8601 date or date-time (UTC unless it says otherwise), epoch seconds, or ``now``,
    within the horizon (years 1 to 9999 UTC)."""
    seconds = _parse_time(text, field)
    if not in_horizon(seconds):
        raise ParseError(f"{field}: {text!r} is outside years 1 to 9999 (UTC)")
    return seconds


def _parse_time(text: str, field: str) -> float:
    value = text.strip()
    if not value:
        raise ParseError(f"{field}: empty; expected an ISO date such as 2025-03-01 or 2025-03-01T09:30")
    if value == "now":
        return time.time()
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise ParseError(f"{field}: {text!r} is not a finite number of seconds")
        return number
    try:
        return parse_iso_time(value)
    except ValueError:
        raise ParseError(
            f"{field}: {text!r} is not an ISO date such as 2025-03-01 or 2025-03-01T09:30"
        ) from None


def parse_point(text: str, *, field: str = "point") -> int | float:
    """A sequence number (``int``, digits only) or an ISO time / ``now`` (``float`` epoch seconds)."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        float(value)
    except ValueError:
        try:
            return parse_time(value, field=field)
        except ParseError:
            pass
    raise ParseError(
        f"{field}: {text!r} is neither a sequence number nor an ISO date (e.g. 42 or 2025-03-01)"
    )


_DURATION = re.compile(r"^\+?(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_expiry(text: str, *, field: str = "--expires", now: float | None = None) -> float:
    """An expiry as epoch seconds: a duration from now (``90s``, ``30m``, ``12h``, ``7d``) or a
    time as :func:`parse_time` reads it; either within the horizon (before year 10000 UTC)."""
    match = _DURATION.match(text.strip())
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        when = (time.time() if now is None else now) + seconds
        if not in_horizon(when):
            raise ParseError(f"{field}: {text!r} from now is after year 9999 (UTC)")
        return when
    try:
        when = _parse_time(text, field)
    except ParseError:
        raise ParseError(
            f"{field}: {text!r} is neither a duration (30m, 12h, 7d) nor a time (2025-03-01)"
        ) from None
    if not in_horizon(when):
        raise ParseError(f"{field}: {text!r} is outside years 1 to 9999 (UTC)")
    return when


def _json(text: str, field: str, depth: int = 0) -> Any:
    """``text`` as JSON (``NaN`` and ``Infinity`` refused: ``ValueError``). A value nested deeper
    than the library takes (:data:`coniti.contracts.MAX_JSON_DEPTH` levels, counting from
    ``depth`` for the text's top value) raises :class:`ParseError` naming ``field``, also when it is
    too deep for Python's parser."""
    from coniti.contracts import MAX_JSON_DEPTH

    too_deep = f"{field}: nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ParseError(too_deep) from None
    pending = [(value, depth)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children and level >= MAX_JSON_DEPTH:
            raise ParseError(too_deep)
        pending.extend((child, level + 1) for child in children)
    return value


def parse_json_object(text: str, *, field: str) -> dict[str, Any]:
    """``text`` as a JSON object (``NaN`` and ``Infinity`` refused, at most
    :data:`~coniti.contracts.MAX_JSON_DEPTH` levels deep)."""
    try:
        value = _json(text, field)
    except ParseError:
        raise
    except ValueError as exc:
        raise ParseError(f"{field}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ParseError(f"{field}: must be a JSON object, got {type(value).__name__}")
    return value


def parse_meta_value(text: str, *, field: str = "--meta", depth: int = 1) -> Any:
    """JSON if ``text`` parses as JSON (``3``, ``true``, ``null``, ``[1,2]``, ``"x"``), else the text.
    JSON nested deeper than :data:`~coniti.contracts.MAX_JSON_DEPTH` levels (the value itself at
    ``depth``: 1 for a metadata value) raises :class:`ParseError` naming ``field``."""
    try:
        return _json(text, field, depth)
    except ParseError:
        raise
    except ValueError:
        return text


def parse_meta_pair(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``("key", value)`` with the value read by :func:`parse_meta_value`."""
    parse_text(text, field=f"--meta {text!r}")
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ParseError(f"--meta {text!r}: expected KEY=VALUE with a non-empty key")
    try:
        return key, parse_meta_value(value, field=key)
    except ParseError as exc:
        raise ParseError(f"--meta: {exc}") from None


def parse_filter(text: str, *, field: str = "--filter") -> dict[str, Any]:
    """A metadata filter typed as a JSON object (``'{"kind": "fact"}'``), checked by
    :func:`coniti.filters.check_filter`."""
    from coniti.errors import ContractError
    from coniti.filters import MAX_FILTER_DEPTH, check_filter

    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ParseError(f"{field} is nested deeper than {MAX_FILTER_DEPTH} levels") from None
    except ValueError:
        raise ParseError(f"{field}: not JSON: {text!r} (e.g. '{{\"kind\": \"fact\"}}')") from None
    if not isinstance(value, dict):
        raise ParseError(f"{field}: a filter is a JSON object, got {type(value).__name__}")
    try:
        checked = check_filter(value, field)
    except ContractError as exc:
        raise ParseError(str(exc)) from None
    assert checked is not None
    return checked


def _refuse_constant(token: str) -> Any:
    raise ValueError(token)


def read_stdin_text() -> str:
    """All of stdin as text, decoded as strict UTF-8 (not with the ``surrogateescape`` Python uses
    for stdin under a C or POSIX locale), one trailing newline run removed. Bytes that are not
    UTF-8 raise :class:`ParseError` naming the first one and its offset."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream put in place of stdin (tests, embedding applications)
        text = sys.stdin.read()
    else:
        data = buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(
                f"stdin is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                "(convert it first, e.g. iconv -f latin1 -t utf-8)"
            ) from None
    return text.rstrip("\n")


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/coniti/store``, else ``~/.local/share/coniti/store``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "coniti" / "store"


def resolve_store_path(option: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """``--store`` if given, else ``$CONITI_STORE`` if set and non-empty, else the default path."""
    env = os.environ if environ is None else environ
    if option:
        return Path(option).expanduser()
    if env.get("CONITI_STORE"):
        return Path(env["CONITI_STORE"]).expanduser()
    return default_store_path(env)


def format_time(seconds: float) -> str:
    """Epoch seconds for a table: ``2025-03-01 09:30:00`` (UTC), milliseconds when not whole."""
    return iso_time(seconds).replace("T", " ").removesuffix("Z")
