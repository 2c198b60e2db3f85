"""Validation messages in an MCP tool's terms, for :mod:`coniti.integrations.mcp`: pydantic's
errors as ``argument: problem`` without type codes or URLs, and a contract's messages with the model's
name dropped (the model's fields are the tool's arguments)."""

from __future__ import annotations

import json
from typing import Any

import pydantic

from coniti.errors import ContractError

__all__ = ["contract_message", "describe"]


def describe(exc: pydantic.ValidationError) -> str:
    """One ``argument: problem`` per argument, joined by ``; ``, without pydantic's type codes or
    URLs. Locations keep the argument and list indices (``namespace.1``); the branches of a union
    (``start`` is a number or a string) are one problem whose alternatives are joined by ``or``."""
    problems: dict[str, list[str]] = {}
    inputs: dict[str, Any] = {}
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for i, p in enumerate(err["loc"]) if i == 0 or isinstance(p, int))
        if err["type"] == "missing":
            message = "required"
        else:
            message = err["msg"].removeprefix("Value error, ")
            message = message[:1].lower() + message[1:]
            inputs.setdefault(loc, err.get("input"))
        if message not in problems.setdefault(loc, []):
            problems[loc].append(message)
    return "; ".join(
        f"{loc}: {_alternatives(messages)}" + (f" (got {_short(inputs[loc])})" if loc in inputs else "")
        for loc, messages in problems.items()
    )


def _alternatives(messages: list[str]) -> str:
    """``input should be a valid number or a valid string``: the first message whole, the others
    without the opening they share with it."""
    first, *others = messages
    shared = "input should be "
    if first.startswith(shared):
        others = [m.removeprefix(shared) for m in others]
    return " or ".join([first, *others])


def contract_message(exc: ContractError, model: str) -> str:
    """A contract's validation message in the tool's terms: ``Query.filter: filter: x`` reads
    ``filter: x`` (the model's fields are the tool's arguments)."""
    parts = []
    for part in str(exc).split("; "):
        part = part.removeprefix(f"{model}.")
        field, sep, rest = part.partition(": ")
        parts.append(rest if sep and rest.startswith((f"{field}:", f"{field} ")) else part)
    return "; ".join(parts)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else f"{text[:57]}..."
