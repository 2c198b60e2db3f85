"""The conversation tools' values for :mod:`coniti.integrations.mcp`: the turn a call appends, the
turn a window returns, the speaker of a recalled turn, and the results of ``append_turns`` and
``window`` (see :mod:`coniti.conversation`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic

from coniti.actor import Note
from coniti.contracts import Contract
from coniti.conversation import TURN_KEY, Turn
from coniti.times import iso_time

__all__ = ["Appended", "TurnArg", "TurnFields", "TurnInfo", "Window", "turn_fields", "turn_info"]


class TurnFields(Contract):
    """Who said a recalled turn: speaker, role and session (None when not set)."""

    speaker: str
    role: str | None = None
    session: str | None = None


class TurnArg(Contract):
    """A turn to append: ``speaker`` and ``text`` (non-blank), optional ``id`` (default: a random
    one), ``timestamp`` (default: now), ``role`` (user, assistant, system or tool), ``session`` and
    ``metadata``."""

    speaker: str
    text: str
    id: Annotated[str | None, pydantic.Field(min_length=1)] = None
    timestamp: Annotated[float, pydantic.Strict()] | str | None = None
    """Epoch seconds, or an ISO 8601 date or date-time (UTC unless it names a zone)."""
    role: Literal["user", "assistant", "system", "tool"] | None = None
    session: str | None = None
    metadata: dict[str, Any] | None = None


class TurnInfo(Contract):
    """A turn as a tool returns it, with its version (the sequence number that wrote it)."""

    id: str
    speaker: str
    role: str | None
    session: str | None
    text: str
    timestamp: float
    time: str | None
    metadata: dict[str, Any]
    version: int | None


class Appended(Contract):
    """The outcome of ``append_turns``: the conversation's namespace, each turn's id and version."""

    conversation: str
    namespace: list[str]
    ids: list[str]
    versions: list[int]


class Window(Contract):
    """The turns of ``window``, oldest first, and the point read (``seq``: the head)."""

    conversation: str
    namespace: list[str]
    seq: int
    turns: list[TurnInfo]


def turn_fields(note: Note) -> TurnFields | None:
    """The speaker, role and session of a turn's note (None for another note)."""
    fields = note.metadata.get(TURN_KEY) if note.kind == "message" else None
    if not isinstance(fields, dict) or not isinstance(fields.get("speaker"), str):
        return None
    return TurnFields(speaker=fields["speaker"], role=fields.get("role"), session=fields.get("session"))


def turn_info(turn: Turn) -> TurnInfo:
    return TurnInfo(
        id=turn.id, speaker=turn.speaker, role=turn.role, session=turn.session, text=turn.text,
        timestamp=turn.timestamp, time=_iso(turn.timestamp), metadata=turn.metadata, version=turn.version,
    )  # fmt: skip


def _iso(seconds: float) -> str | None:
    try:
        return iso_time(seconds)
    except (OverflowError, OSError, ValueError):
        return None
