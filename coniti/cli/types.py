"""click parameter types for namespaces, times, points, KEY=VALUE metadata and metadata filters.

A value that cannot be read is a usage error (exit status 2) whose message names the option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from coniti.cli.parse import (
    ParseError,
    parse_expiry,
    parse_filter,
    parse_json_object,
    parse_meta_pair,
    parse_namespace,
    parse_point,
    parse_text,
    parse_time,
)

__all__ = ["EXPIRY", "FILTER", "JSON_OBJECT", "META", "NAMESPACE", "POINT", "TEXT", "TIME"]


class _Parsed(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.5
    """A parameter read by ``parse(text, field)``; a :class:`ParseError` becomes a usage error."""

    def __init__(self, name: str, parse: Callable[[str, str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        field = param.opts[0] if param is not None and param.opts else self.name
        try:
            return self._parse(value, field)
        except ParseError as exc:
            message = str(exc)  # click names the option already: "Invalid value for '--time': ..."
            self.fail(message.removeprefix(f"{field}: "), param, ctx)


NAMESPACE = _Parsed("namespace", lambda text, field: parse_namespace(text))
TIME = _Parsed("time", lambda text, field: parse_time(text, field=field))
POINT = _Parsed("point", lambda text, field: parse_point(text, field=field))
META = _Parsed("key=value", lambda text, field: parse_meta_pair(text))
EXPIRY = _Parsed("duration|time", lambda text, field: parse_expiry(text, field=field))
JSON_OBJECT = _Parsed("json", lambda text, field: parse_json_object(text, field=field))
FILTER = _Parsed("json", lambda text, field: parse_filter(text, field=field))
TEXT = _Parsed("text", lambda text, field: parse_text(text, field=field))
"""Text that must be valid Unicode (no bytes that were not UTF-8)."""
