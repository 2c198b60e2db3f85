"""The contract base class: pydantic models with one serialisation vocabulary.

Every request, result, actor model and spec derives from :class:`Contract` and so has ``to_dict``,
``from_dict``, ``to_json``, ``from_json`` and ``json_schema``. Validation failures surface as
:class:`~coniti.errors.ContractError` whose message names the offending field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Annotated, Any, Self, cast

import pydantic

from coniti.errors import ContractError
from coniti.text import check_text, text_problem, valid_text

__all__ = [
    "Contract",
    "ContractError",
    "NonEmptyText",
    "Text",
    "TextCheck",
    "check_json_value",
    "check_text",
    "describe_validation_error",
    "text_problem",
    "valid_text",
]

MAX_JSON_DEPTH = 64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def describe_validation_error(model: str, exc: pydantic.ValidationError) -> str:
    """One line per problem: ``Model.field.sub: message``."""
    parts = []
    for err in exc.errors(include_url=False):
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if not err["loc"] and isinstance(err.get("ctx", {}).get("error"), ContractError):
            # pydantic runs Contract.__init__ inside validation: its message is already described
            parts.append(msg)
            continue
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{model}.{loc}: {msg}")
    return "; ".join(parts)


def _text(value: Any) -> Any:
    if type(value) is str:  # anything else is refused by StrictStr with pydantic's message
        problem = text_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


TextCheck = pydantic.BeforeValidator(_text)
"""The validator of :data:`Text`, for an ``Annotated`` string with constraints of its own (put the
constraints first: ``Annotated[StrictStr, StringConstraints(max_length=9), TextCheck]``)."""

Text = Annotated[pydantic.StrictStr, TextCheck]
"""A string field of user text: a ``str`` (never coerced) that is valid Unicode (:func:`check_text`).
Every contract field that takes text from a user (a note's id and text, a query, record ids,
metadata keys, op ids, reasons) is of this type or has :data:`TextCheck`, so a new contract built
on them refuses the same. ``Text | None`` for an optional one."""

NonEmptyText = Annotated[pydantic.StrictStr, pydantic.StringConstraints(min_length=1), TextCheck]
""":data:`Text` of at least one character (ids, keys)."""


def check_json_value(value: Any, field: str, _depth: int = 0) -> Any:
    """Return a deep copy of ``value`` if it is JSON-serialisable and finite, else raise ValueError.

    Accepted: None, bool, int in the signed 64-bit range, finite float, str (valid Unicode, see
    :func:`check_text`), lists/tuples (copied as lists) and dicts with str keys (valid Unicode too),
    nested at most ``MAX_JSON_DEPTH`` deep. The message names the path of the offending part.
    """
    if _depth > MAX_JSON_DEPTH:
        raise ValueError(f"{field} is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        return check_text(value, field)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{field} is an integer outside the signed 64-bit range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be finite, got {value!r}")
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        inline = _depth < MAX_JSON_DEPTH  # a value one level down is within the depth limit
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{field} has a non-string key {k!r}")
            if not k.isascii():
                check_text(k, f"{field} key {k!r}")
            kind = type(v)  # plain scalars inline: what the call below returns for them, cheaper
            if inline and (
                (kind is str and v.isascii())
                or v is None
                or kind is bool
                or (kind is int and INT64_MIN <= v <= INT64_MAX)
                or (kind is float and math.isfinite(v))
            ):
                out[k] = v
            else:
                out[k] = check_json_value(v, f"{field}.{k}", _depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [check_json_value(v, f"{field}[{i}]", _depth + 1) for i, v in enumerate(value)]
    raise ValueError(f"{field} is not JSON-serialisable: {type(value).__name__}")


class Contract(pydantic.BaseModel):
    """Base of every coniti contract: validated on construction, serialisable both ways."""

    model_config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    def __init__(self, /, **data: Any) -> None:
        # What pydantic.BaseModel.__init__ does, without its extra frame: every request is built here.
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
        except pydantic.ValidationError as exc:
            raise ContractError(describe_validation_error(type(self).__name__, exc)) from None

    @classmethod
    def constructor(cls) -> Callable[[dict[str, Any]], Self]:
        """The one way to build this model without validation: a plain function ``values -> model``,
        made once per class (keep it in a module-level name on hot paths).

        ``values`` must hold every field, already valid: data coniti itself validated or stored. It is
        used as the instance's ``__dict__`` (no copy); every instance shares one fields-set naming
        all fields. Much cheaper than pydantic's ``model_construct``, which coniti does not use.
        Models built on every read have a typed form over it: :meth:`Note.trusted
        <coniti.actor.Note.trusted>` and :meth:`MemoryRecord.trusted
        <coniti.memory.MemoryRecord.trusted>` (and its bulk form :meth:`MemoryRecord.trusted_rows
        <coniti.memory.MemoryRecord.trusted_rows>`), the only way coniti builds those two unvalidated.
        """
        made = _CONSTRUCTORS.get(cls)
        if made is None:
            made = _CONSTRUCTORS[cls] = _make_constructor(cls)
        return cast("Callable[[dict[str, Any]], Self]", made)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (lists, not tuples; vectors as lists of floats)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Validate ``data`` (as given by :meth:`to_dict`) into a new instance."""
        if not isinstance(data, dict):
            raise ContractError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as exc:
            raise ContractError(describe_validation_error(cls.__name__, exc)) from None

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Parse JSON text and validate it. NaN and Infinity tokens, and numbers that overflow to
        infinity, are refused."""
        try:
            data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:
            raise ContractError(f"{cls.__name__}: invalid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the :meth:`to_dict` form."""
        return cls.model_json_schema(mode="serialization")


# The slot setters of pydantic.BaseModel, called directly (what object.__setattr__ ends in, minus the
# attribute lookup): constructors run once per record on the stores' read paths.
_set_dict = pydantic.BaseModel.__dict__["__dict__"].__set__
_set_fields_set = pydantic.BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = pydantic.BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = pydantic.BaseModel.__dict__["__pydantic_private__"].__set__
_CONSTRUCTORS: dict[type[Contract], Callable[[dict[str, Any]], Any]] = {}


def _make_constructor(cls: type[Contract]) -> Callable[[dict[str, Any]], Any]:
    fields_set = set(cls.model_fields)  # shared by every instance built here (see constructor)
    new = object.__new__
    set_dict, set_fields, set_extra, set_private = _set_dict, _set_fields_set, _set_extra, _set_private

    def construct(values: dict[str, Any]) -> Any:
        obj = new(cls)
        set_dict(obj, values)
        set_fields(obj, fields_set)
        set_extra(obj, None)
        set_private(obj, None)
        return obj

    construct.__qualname__ = f"{cls.__qualname__}.constructor"
    return construct


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"non-finite number {token} is not allowed")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number {token} overflows to infinity")
    return value
