"""The actor layer: notes, time ranges and questions. No storage, no vectors.

Timestamps are seconds since the Unix epoch as finite floats. A timezone-aware ``datetime`` is accepted
and converted; naive datetimes (their meaning depends on the machine's timezone), booleans, NaN and
infinity are refused with :class:`~coniti.errors.ContractError`. A time that is stored (a note's
timestamp, an expiry) must also lie within the horizon, years 1 to 9999 UTC
(:data:`coniti.times.MIN_TIME` <= t < :data:`coniti.times.MAX_TIME`), so that it can be printed.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import unicodedata
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Self

import pydantic

from coniti.contracts import Contract, NonEmptyText, Text, check_json_value, text_problem
from coniti.errors import ContractError
from coniti.filters import MetadataFilter
from coniti.fusion import Fusion
from coniti.jsonl import note_size_problem
from coniti.times import in_horizon, outside_horizon

__all__ = ["KINDS", "STRATEGY_NAMES", "Facts", "Note", "as_sources", "Query", "TimeRange", "as_kind", "to_stored_time", "to_timestamp"]

KINDS = ("message", "fact", "summary", "preference", "event")
"""The kinds coniti names (:attr:`Note.kind`); any other non-empty string is a user's own kind."""

MAX_KIND_CHARS = 64
"""The longest :attr:`Note.kind`, in characters."""

STRATEGY_NAMES = ("auto", "semantic", "keyword", "hybrid", "recent")
"""The recall strategies a :class:`Query` may name (see :attr:`Query.strategy`)."""

_NONE: dict[str, Any] = {}
"""No metadata, for measuring a note's id and text alone."""


def to_timestamp(value: Any, field: str = "timestamp") -> float:
    """Convert an accepted time value to float epoch seconds, or raise ValueError naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number or an aware datetime, not a boolean")
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"{field} is a naive datetime; give it a timezone")
        return value.timestamp()
    if isinstance(value, int | float):
        try:
            out = float(value)
        except OverflowError:  # an int beyond float range
            raise ValueError(f"{field} is too large for a float ({len(str(abs(value)))} digits)") from None
        if not math.isfinite(out):
            raise ValueError(f"{field} must be finite, got {value!r}")
        return out
    raise ValueError(f"{field} must be a number or an aware datetime, got {type(value).__name__}")


def to_stored_time(value: Any, field: str = "timestamp") -> float:
    """:func:`to_timestamp` of a time that is stored (a note's timestamp, an expiry): also
    ValueError naming ``field`` outside the horizon, years 1 to 9999 UTC (:mod:`coniti.times`)."""
    out = to_timestamp(value, field)
    if not in_horizon(out):
        raise ValueError(outside_horizon(field, value))
    return out


Facts = tuple[float | None, float | None, tuple[str, ...]]
"""A note's valid time and lineage as stored: ``(valid_from, valid_to, derived_from)``."""

_NO_FACTS: Facts = (None, None, ())

MAX_SOURCES = 1024
"""The most entries of :attr:`Note.derived_from`."""


def as_sources(value: Any, field: str = "derived_from") -> tuple[str, ...]:
    """``value`` as :attr:`Note.derived_from`: a list or tuple (not a string) of at most
    :data:`MAX_SOURCES` distinct non-blank strings of valid Unicode without surrounding whitespace,
    each a source reference (see :mod:`coniti.engine.lineage`: ``note:ID``, ``note:ID@VERSION``,
    ``seq:N`` or an external reference such as a URL); raises ValueError naming ``field`` otherwise."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"{field} must be a list of source references, got {type(value).__name__}")
    if len(value) > MAX_SOURCES:
        raise ValueError(f"{field} has {len(value)} sources; at most {MAX_SOURCES} allowed")
    for i, ref in enumerate(value):
        if not isinstance(ref, str) or not ref or ref != ref.strip():
            raise ValueError(f"{field}[{i}] must be a non-blank string without surrounding whitespace, got {ref!r}")
        problem = text_problem(ref)
        if problem is not None:
            raise ValueError(f"{field}[{i}]: {problem}")
    if len(set(value)) != len(value):
        raise ValueError(f"{field} names a source twice")
    return tuple(value)


def as_kind(value: Any, field: str = "kind") -> str | None:
    """``value`` as a note's kind: None, or a non-blank string of valid Unicode of at most
    :data:`MAX_KIND_CHARS` characters without surrounding whitespace; raises ValueError naming
    ``field`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string or None, got {type(value).__name__}")
    if not value or value.isspace() or value != value.strip():
        raise ValueError(f"{field} must be a non-blank string without surrounding whitespace, got {value!r}")
    if len(value) > MAX_KIND_CHARS:
        raise ValueError(f"{field} is {len(value)} characters; at most {MAX_KIND_CHARS} allowed")
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{field}: {problem}")
    return value


class Note(Contract):
    """One thing remembered. Frozen; ``metadata`` is deep-copied in and must be JSON-able and finite;
    ``timestamp`` lies within the horizon (:func:`to_stored_time`). Its id, text and metadata take
    at most :data:`~coniti.jsonl.MAX_NOTE_BYTES` (6 MiB) as JSON, so that every stored note fits the
    lines of a memory file and a log export.

    ``kind`` says what the note is: one of :data:`KINDS` (``message``, ``fact``, ``summary``,
    ``preference``, ``event``), a user's own string (:func:`as_kind`), or None (the default: a plain
    note). It is stored with the note by every backend and format, written by ``to_dict`` only when
    set (so stores and files written before kinds existed read back with ``kind=None``), filtered on
    by the key ``"$kind"`` of a metadata filter (:mod:`coniti.filters`), and part of
    :meth:`content_id`.

    ``valid_from`` / ``valid_to`` (epoch seconds or aware datetimes, within the horizon; each None
    for unbounded) say when the note holds in the world, half-open ``[valid_from, valid_to)``;
    ``valid_to`` before ``valid_from`` is refused. ``derived_from`` lists what the note came from
    (:func:`as_sources`). All three are stored by every backend and format, written only when set
    (stores and files from before them read back with None and ``()``); see docs/keeping-true.md."""

    model_config = pydantic.ConfigDict(frozen=True)

    id: NonEmptyText
    text: pydantic.StrictStr  # Text's check, and the size with the id, in _text (one call)
    timestamp: float
    metadata: dict[str, Any] = pydantic.Field(default_factory=dict)
    kind: str | None = None
    valid_from: float | None = None
    valid_to: float | None = None
    derived_from: tuple[str, ...] = ()

    @pydantic.field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> str | None:
        return as_kind(value)

    @pydantic.field_validator("valid_from", "valid_to", mode="before")
    @classmethod
    def _valid(cls, value: Any, info: pydantic.ValidationInfo) -> float | None:
        if value is None:
            return None
        out = to_stored_time(value, str(info.field_name))
        start = info.data.get("valid_from")
        if info.field_name == "valid_to" and start is not None and out < start:
            raise ValueError(f"valid_to ({out!r}) is before valid_from ({start!r})")
        return out

    @pydantic.field_validator("derived_from", mode="before")
    @classmethod
    def _derived(cls, value: Any) -> tuple[str, ...]:
        return as_sources(value)

    # No return annotation on purpose (see MemoryRecord._serialize): the schema comes from the fields.
    @pydantic.model_serializer(mode="wrap")
    def _serialize(self, handler: pydantic.SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out: dict[str, Any] = handler(self)
        for key in ("kind", "valid_from", "valid_to"):
            if out.get(key, 0) is None:
                del out[key]
        if out.get("derived_from", 0) in ((), []):
            del out["derived_from"]
        return out

    @pydantic.field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if type(value) is str:
            problem = text_problem(value) or note_size_problem(info.data.get("id", ""), value, _NONE)
            if problem is not None:
                raise ValueError(problem)
        return value

    @pydantic.field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> float:
        return to_stored_time(value)

    @pydantic.field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any, info: pydantic.ValidationInfo) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"metadata must be a dict, got {type(value).__name__}")
        copied: dict[str, Any] = check_json_value(value, "metadata")
        if copied and "text" in info.data:
            problem = note_size_problem(info.data.get("id", ""), info.data["text"], copied)
            if problem is not None:
                raise ValueError(problem)
        return copied

    @classmethod
    def create(
        cls,
        text: str,
        timestamp: float | datetime | None = None,
        *,
        kind: str | None = None,
        valid_from: float | datetime | None = None,
        valid_to: float | datetime | None = None,
        derived_from: Sequence[str] = (),
        **metadata: Any,
    ) -> Self:
        """A new note with a random id; ``timestamp`` defaults to now; ``kind``, ``valid_from``,
        ``valid_to`` and ``derived_from`` (keyword only) default to unset, every other keyword is
        metadata."""
        return cls(
            id=uuid.uuid4().hex,
            text=text,
            timestamp=time.time() if timestamp is None else timestamp,
            metadata=metadata,
            kind=kind,
            valid_from=valid_from,
            valid_to=valid_to,
            derived_from=derived_from,
        )

    @staticmethod
    def trusted(
        id: str,
        text: str,
        timestamp: float,
        metadata: dict[str, Any],
        kind: str | None = None,
        facts: Facts | None = None,
    ) -> Note:
        """The one unvalidated constructor of a Note (:meth:`Contract.constructor`), for values already
        validated (data the store itself wrote). No checks, no copy. ``facts`` is the stored
        ``(valid_from, valid_to, derived_from)`` (:meth:`facts`), None when all three are unset."""
        vf, vt, df = _NO_FACTS if facts is None else facts
        return _note({
            "id": id, "text": text, "timestamp": timestamp, "metadata": metadata, "kind": kind,
            "valid_from": vf, "valid_to": vt, "derived_from": df,
        })  # fmt: skip

    def facts(self) -> Facts | None:
        """``(valid_from, valid_to, derived_from)`` as the backends store them: None when all three
        are unset (a note written before valid time and lineage existed)."""
        if self.valid_from is None and self.valid_to is None and not self.derived_from:
            return None
        return (self.valid_from, self.valid_to, self.derived_from)

    def valid_at(self, moment: float) -> bool:
        """Whether the note holds in the world at ``moment`` (epoch seconds): ``valid_from <= moment
        < valid_to``, an unset side unbounded."""
        return (self.valid_from is None or self.valid_from <= moment) and (
            self.valid_to is None or moment < self.valid_to
        )

    def content_id(self, namespace: Sequence[str] = ()) -> str:
        """The note's content id in ``namespace``: ``"c1:"`` and the lowercase hex SHA-256 of the
        UTF-8 bytes of the compact JSON array ``[namespace parts, kind or null, normalised text]``
        (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``). The text is normalised by
        Unicode NFC, then every run of whitespace (``str.split()``) becomes one space, leading and
        trailing whitespace dropped; case is kept. The id, timestamp and metadata are not part of
        it: two notes with one content id say the same thing in the same place. Test vector:
        ``Note(id="x", text="  Hello\n  world ", timestamp=0, kind="fact").content_id(("alice",))``
        is the SHA-256 of ``["alice"],"fact","Hello world"`` in brackets (see docs/conversations.md)."""
        return content_id(self.text, self.kind, namespace)


def normalise_text(text: str) -> str:
    """The text :meth:`Note.content_id` hashes: NFC, whitespace runs as one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def content_id(text: str, kind: str | None, namespace: Sequence[str] = ()) -> str:
    """:meth:`Note.content_id` of a note with ``text`` and ``kind`` in ``namespace``."""
    parts = list(namespace)
    if isinstance(namespace, str) or not all(isinstance(p, str) and p for p in parts):
        raise ContractError(f"namespace must be a tuple of non-empty strings, got {namespace!r}")
    body = json.dumps([parts, kind, normalise_text(text)], ensure_ascii=False, separators=(",", ":"))
    return "c1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


_note = Note.constructor()


class TimeRange(Contract):
    """Half-open interval ``[start, end)`` of note timestamps. ``None`` on a side means unbounded."""

    model_config = pydantic.ConfigDict(frozen=True)

    start: float | None = None
    end: float | None = None

    @pydantic.field_validator("start", "end", mode="before")
    @classmethod
    def _bound(cls, value: Any, info: pydantic.ValidationInfo) -> float | None:
        return None if value is None else to_timestamp(value, str(info.field_name))

    @pydantic.model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(f"start ({self.start}) must be <= end ({self.end})")
        return self

    def contains(self, t: float) -> bool:
        """True when ``start <= t < end`` (missing bounds are unbounded)."""
        return (self.start is None or t >= self.start) and (self.end is None or t < self.end)

    @property
    def is_empty(self) -> bool:
        """True when ``start == end``: no timestamp is inside."""
        return self.start is not None and self.start == self.end


class Query(Contract):
    """A question: text, a vector, a time range, a note to recall around (``near``), or any mix; ``k``
    results. ``text``, when given, holds at least one non-blank character (an empty question has no
    answer).

    ``vector``: a precomputed question vector (finite numbers; a list or a 1-D numpy array, kept as
    a tuple of floats), used instead of embedding ``text``; the engine refuses one whose length is
    not its embedder's dimension. With text too, the text still drives the keyword side. ``asked_at``:
    the time the question is asked (epoch seconds or an aware datetime): relative dates in the text
    (``last week``, :mod:`coniti.dates`) are read against it; None: the time of the ask.

    ``filter``: a metadata filter (:mod:`coniti.filters`); only notes it matches are answered.
    ``min_score``: hits scoring below it are dropped (the score of the strategy that answered:
    cosine for ``semantic``, BM25 for ``keyword``, the fused score for ``hybrid``).
    ``min_relevance`` (0 to 1): hits whose :attr:`~coniti.recall.Hit.relevance` (the score read on
    a 0-1 scale, defined for each strategy there) is below it are dropped; not with ``recent``.
    These narrow the answer; none reorders it.

    ``strategy``: ``"semantic"`` (cosine similarity from the structures; with ``near``, steered
    towards or, without text or vector, closest in time to that note), ``"keyword"`` (BM25 on the
    text, :mod:`coniti.keyword`), ``"hybrid"`` (both fused, by score with feedback and the dates
    the question names unless ``fusion`` says rank, :mod:`coniti.fusion`; ``fusion`` sets the
    weights), ``"recent"`` (newest first in ``time_range``; the text is not used and nothing
    reorders it), or ``"auto"`` (the default: ``near`` given -> semantic, else text given ->
    hybrid, else a vector given -> semantic, else recent).
    ``mmr``: re-rank by maximal marginal relevance with this lambda in [0, 1] (1: relevance only;
    not with ``recent``).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    text: Text | None = None
    vector: tuple[float, ...] | None = None
    time_range: TimeRange | None = None
    near: NonEmptyText | None = None
    k: int = pydantic.Field(default=10, ge=1, le=10_000, strict=True)
    filter: MetadataFilter = None
    min_score: float | None = pydantic.Field(default=None, allow_inf_nan=False)
    strategy: Literal["auto", "semantic", "keyword", "hybrid", "recent"] = "auto"
    mmr: float | None = pydantic.Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    fusion: Fusion | None = None
    asked_at: float | None = None
    min_relevance: float | None = pydantic.Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)

    @pydantic.field_validator("vector", mode="before")
    @classmethod
    def _vector(cls, value: Any) -> Any:
        if value is None:
            return None
        if hasattr(value, "tolist") and hasattr(value, "ndim"):  # a numpy array
            if value.ndim != 1:
                raise ValueError(f"vector must be one-dimensional, got {value.ndim} dimensions")
            value = value.tolist()
        if not isinstance(value, list | tuple) or not value:
            raise ValueError(f"vector must be a non-empty list of numbers, got {type(value).__name__}")
        out = []
        for i, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, int | float):
                raise ValueError(f"vector[{i}] must be a number, got {type(x).__name__}")
            number = float(x)
            if not math.isfinite(number):
                raise ValueError(f"vector[{i}] must be finite, got {x!r}")
            out.append(number)
        return tuple(out)

    @pydantic.field_validator("asked_at", mode="before")
    @classmethod
    def _asked_at(cls, value: Any) -> float | None:
        return None if value is None else to_timestamp(value, "asked_at")

    @pydantic.field_validator("text")
    @classmethod
    def _words(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.isspace()):  # isspace: no copy of a long text
            raise ValueError(
                "empty or blank: give words to ask about, or leave text out to ask by time_range or near"
            )
        return value

    @pydantic.field_validator("min_score", "mmr", "min_relevance", mode="before")
    @classmethod
    def _score(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        if isinstance(value, bool) or not (value is None or isinstance(value, int | float)):
            raise ValueError(f"{info.field_name} must be a number, got {type(value).__name__}")
        return value

    @property
    def resolved_strategy(self) -> str:
        """The strategy that answers: :attr:`strategy`, with ``"auto"`` resolved (class docstring)."""
        if self.strategy != "auto":
            return self.strategy
        if self.near is not None:
            return "semantic"
        if self.text is not None:
            return "hybrid"
        return "semantic" if self.vector is not None else "recent"

    @pydantic.model_validator(mode="after")
    def _something(self) -> Self:
        if self.text is None and self.vector is None and self.time_range is None and self.near is None:
            raise ValueError("a query needs at least one of text, vector, time_range or near")
        if self.strategy == "keyword" and self.text is None:
            raise ValueError("strategy 'keyword' needs text")
        if self.strategy in ("keyword", "recent") and self.near is not None:
            raise ValueError(f"strategy {self.strategy!r} does not take near")
        if self.strategy == "semantic" and self.text is None and self.vector is None and self.near is None:
            raise ValueError("strategy 'semantic' needs text, vector or near")
        if self.resolved_strategy == "recent" and self.mmr is not None:
            raise ValueError("mmr does not apply to strategy 'recent' (nothing reorders it)")
        if self.resolved_strategy == "recent" and self.min_relevance is not None:
            raise ValueError("min_relevance does not apply to strategy 'recent' (it ranks by time, not relevance)")
        return self
