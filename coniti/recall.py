"""What recall returns: :class:`Hit` (a note with its score and namespace) and prompt-ready context
blocks, hits rendered in rank order within an estimated token budget.

:func:`to_context_block` is a plain function over any hits: those of one
:meth:`~coniti.engine.ContinuityEngine.ask`, a merge of several, or a list filtered by hand. Any
object with a ``.note`` (:class:`~coniti.actor.Note`) and a ``.score`` is a hit (:class:`HitLike`);
one that also has a ``.namespace`` (a tuple of strings) shows it.

Rules, in order:

* Hits render in the order given (rank order), one :func:`render_hit` line each, joined by ``\\n``.
* A hit is added only if the text with it, and with the line ``[... N more omitted ...]`` for the
  ``N`` hits after it, stays within ``token_budget``. At the first hit that does not fit, rendering
  stops and the omitted line for the ``N`` hits left ends the text.
* The first hit always renders, even if it alone is over budget. So the budget is an estimate, not a
  hard limit: ``tokens <= token_budget`` holds whenever more than one hit rendered or the first hit
  fits, and ``tokens`` is the estimate of the whole text either way.
* Tokens are estimated by :func:`estimate_tokens` (about four bytes of UTF-8 per token) unless an
  ``estimator`` is given (a tokenizer's count, for instance). The estimator sees whole candidate
  texts, so it is called once per rendered hit plus once, not once per line.
* ``seq`` is the memory point that was read (``memory.head`` of a
  :class:`~coniti.impl.log.LogBackend` when the hits were asked): ``engine.at(seq)`` answers from the
  same memory again, so the block can be reproduced. Nothing here reads it; the caller passes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import pydantic
from pydantic.json_schema import SkipJsonSchema

from coniti.actor import Note
from coniti.contracts import Contract
from coniti.errors import ContractError
from coniti.memory import Namespace

__all__ = [
    "ContextBlock",
    "Hit",
    "Signals",
    "HitLike",
    "estimate_tokens",
    "omitted_line",
    "render_hit",
    "to_context_block",
    "trusted_signals",
]

BYTES_PER_TOKEN = 4
"""The default estimate: one token per four bytes of UTF-8 text, rounded up."""


class Signals(Contract):
    """Why a hit ranked where it did: the ``strategy`` that answered (``auto`` resolved), the
    ``semantic`` score (cosine of the query text's vector and the note's; None without text), the
    ``keyword`` score (BM25; None without text), ``recency`` (seconds the note is older than the
    newest candidate; set for ``recent`` and ``hybrid``), the ``feedback`` weight of the note (the
    sum of its ``improve`` weights; set for ``hybrid``), ``ranks``: the 1-based rank in each ranking
    that was fused (``semantic``, ``keyword``, ``recency``), and ``fused``, the fused score."""

    model_config = pydantic.ConfigDict(frozen=True)

    strategy: str
    semantic: float | None = None
    keyword: float | None = None
    recency: float | None = None
    feedback: float | None = None
    ranks: dict[str, int] = pydantic.Field(default_factory=dict)
    fused: float | None = None


_signals = Signals.constructor()


def trusted_signals(values: dict[str, Any]) -> Signals:
    """:class:`Signals` from values the engine computed (unvalidated; missing fields take their
    defaults)."""
    return _signals({
        "semantic": None, "keyword": None, "recency": None, "feedback": None, "fused": None,
        **values, "ranks": dict(values.get("ranks", {})),
    })


class Hit(Contract):
    """One answer: the stored note, its score (higher is better: the score of the strategy that
    answered, see :class:`~coniti.actor.Query`), the namespace it was found in, the version of the
    record it was read from and the :class:`Signals` behind the score. ``superseded`` is True on a
    hit an ask with ``include_superseded=True`` would otherwise have hidden (its note no longer, or
    not yet, valid at the moment asked: docs/keeping-true.md); written by ``to_dict`` only when True."""

    model_config = pydantic.ConfigDict(frozen=True)

    note: Note
    score: float
    namespace: Namespace = ()
    version: int | None = None
    signals: Signals | None = None
    superseded: bool = False

    # No return annotation on purpose (see MemoryRecord._serialize): the schema comes from the fields.
    @pydantic.model_serializer(mode="wrap")
    def _serialize(self, handler: pydantic.SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out: dict[str, Any] = handler(self)
        if out.get("superseded") is False:
            del out["superseded"]
        return out


@runtime_checkable
class HitLike(Protocol):
    """What :func:`to_context_block` needs of a hit: the note and its score (higher is better)."""

    @property
    def note(self) -> Note: ...

    @property
    def score(self) -> float: ...


@runtime_checkable
class _WithNamespace(Protocol):
    @property
    def namespace(self) -> tuple[str, ...]: ...


class ContextBlock(Contract):
    """A rendered block: its ``text``, the ``hits`` rendered in it (in order), how many hits were
    ``omitted``, the estimated ``tokens`` of ``text`` and the memory point ``seq`` that was read.

    ``hits`` holds the objects given, not copies. With :class:`~coniti.engine.Hit` items the block
    round-trips through ``to_dict``/``from_dict`` like every contract (its JSON schema describes
    ``Hit``); other hit-like objects are kept as they are and ``from_dict`` reads them back as
    ``Hit``.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    text: str
    hits: list[Hit | SkipJsonSchema[HitLike]]
    omitted: int = pydantic.Field(ge=0, strict=True)
    tokens: int = pydantic.Field(ge=0, strict=True)
    seq: int | None = pydantic.Field(default=None, ge=0, strict=True)


def estimate_tokens(text: str) -> int:
    """About four bytes of UTF-8 per token, rounded up: ``ceil(len(text.encode()) / 4)``.

    Counts bytes, not characters, so non-ASCII text (``é`` is two bytes, ``日`` three) costs more.
    """
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def render_hit(hit: HitLike) -> str:
    """The default line of a hit: ``- [YYYY-MM-DD] text (id)``, or ``- [YYYY-MM-DD] text (id,
    alice/work)`` when the hit has a non-root ``namespace``.

    The date is the note's timestamp in UTC. Line breaks in the text become spaces, so every hit
    is one line.
    """
    note = hit.note
    day = datetime.fromtimestamp(note.timestamp, tz=UTC).strftime("%Y-%m-%d")
    text = " ".join(note.text.splitlines())
    where = note.id
    if isinstance(hit, _WithNamespace) and hit.namespace:
        where = f"{note.id}, {'/'.join(hit.namespace)}"
    return f"- [{day}] {text} ({where})"


def omitted_line(count: int) -> str:
    """The last line of a block that left ``count`` hits out: ``[... N more omitted ...]``."""
    return f"[... {count} more omitted ...]"


def to_context_block(
    hits: Iterable[HitLike],
    token_budget: int,
    *,
    estimator: Callable[[str], int] | None = None,
    render: Callable[[HitLike], str] | None = None,
    seq: int | None = None,
) -> ContextBlock:
    """Render ``hits`` in order into a block of about ``token_budget`` tokens (module docstring).

    ``estimator(text) -> int`` counts tokens (default :func:`estimate_tokens`); ``render(hit) -> str``
    makes one hit's line (default :func:`render_hit`). Raises :class:`ContractError` naming
    ``token_budget`` unless it is a positive int, ``hits[i]`` for an item without ``note`` and
    ``score``, ``render`` if it returns a non-string, and ``estimator`` if it returns anything but a
    non-negative int. Empty ``hits`` give an empty text with ``omitted == 0``.
    """
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise ContractError(f"token_budget must be a positive int, got {token_budget!r}")
    if isinstance(hits, str | bytes):
        raise ContractError(f"hits must be an iterable of hits, got {type(hits).__name__}")
    items = list(hits)
    for i, hit in enumerate(items):
        if not isinstance(hit, HitLike):
            raise ContractError(
                f"hits[{i}] must be a hit with .note and .score, got {type(hit).__name__}"
            )
    count = _counter(estimator)
    draw = render_hit if render is None else render
    lines: list[str] = []
    text = ""
    tokens = count(text)
    for i, hit in enumerate(items):
        line = draw(hit)
        if not isinstance(line, str):
            raise ContractError(f"render must return a string, got {type(line).__name__} for hits[{i}]")
        left = len(items) - i - 1
        candidate = "\n".join([*lines, line, *([omitted_line(left)] if left else [])])
        figure = count(candidate)
        if lines and figure > token_budget:
            break
        lines.append(line)
        text, tokens = candidate, figure
    return ContextBlock(
        text=text, hits=items[: len(lines)], omitted=len(items) - len(lines), tokens=tokens, seq=seq
    )


def _counter(estimator: Callable[[str], int] | None) -> Callable[[str], int]:
    """``estimator`` (or the default) with its result checked."""
    if estimator is None:
        return estimate_tokens
    if not callable(estimator):
        raise ContractError(f"estimator must be callable, got {type(estimator).__name__}")

    def count(text: str) -> int:
        figure: Any = estimator(text)
        if isinstance(figure, bool) or not isinstance(figure, int) or figure < 0:
            raise ContractError(
                f"estimator must return a non-negative int, got {figure!r} "
                f"for a text of {len(text)} characters"
            )
        return int(figure)

    return count
