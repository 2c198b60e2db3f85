"""click parameter types for namespaces, times, points and KEY=VALUE metadata.

A value that cannot be read is a usage error (exit status 2) whose message names the option.
"""

from __future__ import annotations

from typing import Any

import click

from coniti.cli.parse import (
    ParseError,
    parse_meta_pair,
    parse_namespace,
    parse_point,
    parse_time,
)

__all__ = ["META", "NAMESPACE", "POINT", "TIME"]


class _Parsed(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.5
    def parse(self, text: str, field: str) -> Any:
        raise NotImplementedError

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        field = param.opts[0] if param is not None and param.opts else self.name
        try:
            return self.parse(value, field)
        except ParseError as exc:
            self.fail(str(exc), param, ctx)


class NamespaceType(_Parsed):
    name = "namespace"

    def parse(self, text: str, field: str) -> tuple[str, ...]:
        return parse_namespace(text)


class TimeType(_Parsed):
    name = "time"

    def parse(self, text: str, field: str) -> float:
        return parse_time(text, field=field)


class PointType(_Parsed):
    name = "point"

    def parse(self, text: str, field: str) -> int | float:
        return parse_point(text, field=field)


class MetaType(_Parsed):
    name = "key=value"

    def parse(self, text: str, field: str) -> tuple[str, Any]:
        return parse_meta_pair(text)


NAMESPACE = NamespaceType()
TIME = TimeType()
POINT = PointType()
META = MetaType()
