"""What recall returns: :class:`Hit` (a note with its score and namespace), hits grouped by session
(:func:`group_hits`) and prompt-ready context blocks, hits rendered in rank order within an
estimated token budget.

:func:`group_hits` groups hits by a metadata value (``session`` by default, as conversation turns
carry it): the groups come in the order of their best hit, each with its first ``per_group`` hits
in rank order; a hit whose note lacks the value (or holds a list or object there) is a group of
its own; the same value in two namespaces makes two groups.

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
    "HitGroup",
    "Signals",
    "HitLike",
    "estimate_tokens",
    "group_hits",
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
    sum of its ``improve`` weights; set for ``hybrid``), ``date`` (1.0 when the note falls in a time
    the question names, else 0.0; set for ``hybrid`` by score), ``superseded_by`` (the id of a newer
    note that says the same, which this one was moved below for a question about the present:
    :func:`coniti.fusion.supersede`), ``ranks``: the 1-based rank in each
    ranking that was fused (``semantic``, ``keyword``, ``recency``), and ``fused``, the fused
    score."""

    model_config = pydantic.ConfigDict(frozen=True)

    strategy: str
    semantic: float | None = None
    keyword: float | None = None
    recency: float | None = None
    feedback: float | None = None
    date: float | None = None
    superseded_by: str | None = None
    ranks: dict[str, int] = pydantic.Field(default_factory=dict)
    fused: float | None = None


_signals = Signals.constructor()


def trusted_signals(values: dict[str, Any]) -> Signals:
    """:class:`Signals` from values the engine computed (unvalidated; missing fields take their
    defaults)."""
    return _signals({
        "semantic": None, "keyword": None, "recency": None, "feedback": None, "date": None,
        "superseded_by": None, "fused": None,
        **values, "ranks": dict(values.get("ranks", {})),
    })


class Hit(Contract):
    """One answer: the stored note, its score (higher is better: the score of the strategy that
    answered, see :class:`~coniti.actor.Query`), the namespace it was found in, the version of the
    record it was read from, the :class:`Signals` behind the score and its ``relevance``. ``superseded``
    is True on a hit an ask with ``include_superseded=True`` would otherwise have hidden (its note no
    longer, or not yet, valid at the moment asked: docs/keeping-true.md); written by ``to_dict`` only
    when True.

    ``relevance`` is the score read on a scale of 0 to 1, the share of the best score the ask's
    ranking could give (None for ``recent``, which ranks by time only; None on a hit not made by
    the engine). It follows the score within one answer (a higher score never has a lower
    relevance), so ``Query(min_relevance=...)`` cuts the ranking without reordering it:

    * ``semantic``: the cosine, negatives as 0;
    * ``keyword``: BM25 divided by the score of a note of average length holding every word of the
      question once (the sum of the words' idf, :meth:`coniti.keyword.KeywordIndex.ceiling` /
      ``(k1 + 1)``): about 1 when every word matches, less for a part of them or a long note;
      above (a short note, a word repeated) as 1;
    * ``hybrid`` fused by score (:func:`coniti.fusion.fuse_scores`): the fused score, on the
      cosine's scale (a perfect cosine and the best keyword match give 1), above 1 (the date and
      feedback signals) as 1;
    * ``hybrid`` fused by rank (:func:`coniti.fusion.fuse`): the fused score divided by the best
      one possible, first in every ranking fused (sum of weights / (k + 1)): 1.0 first on both
      sides, 0.5 first on one side and absent from the other, falling slowly with rank (10th on
      both sides: 0.87 with k = 60), feedback above it as 1.

    Comparable across the hits of one answer, and between asks only roughly (the keyword ceiling
    and the fused scores depend on the question). A reranker reorders hits and sets their score;
    the relevance stays the first stage's."""

    model_config = pydantic.ConfigDict(frozen=True)

    note: Note
    score: float
    namespace: Namespace = ()
    version: int | None = None
    signals: Signals | None = None
    relevance: float | None = None
    superseded: bool = False

    # No return annotation on purpose (see MemoryRecord._serialize): the schema comes from the fields.
    @pydantic.model_serializer(mode="wrap")
    def _serialize(self, handler: pydantic.SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out: dict[str, Any] = handler(self)
        if out.get("superseded") is False:
            del out["superseded"]
        return out


class HitGroup(Contract):
    """Hits that share a metadata value (:func:`group_hits`): the ``key`` the value is read at, the
    ``value`` (None for a hit without one), the ``namespace``, the ``score`` of the group's best hit,
    how many hits of the ranking fell in the group (``total``) and the first ``hits`` in rank
    order."""

    model_config = pydantic.ConfigDict(frozen=True)

    key: str
    value: str | int | float | bool | None
    namespace: Namespace = ()
    score: float
    total: int
    hits: list[Hit]


def group_hits(hits: Iterable[Hit], *, key: str = "session", per_group: int = 3) -> list[HitGroup]:
    """``hits`` (in rank order) grouped by their notes' ``metadata[key]`` (module docstring): the
    groups in the order of their best hit, each with at most ``per_group`` hits. Raises
    :class:`ContractError` naming ``per_group`` unless it is a positive int, ``key`` unless it is a
    non-empty string, and ``hits[i]`` for an item that is not a :class:`Hit`."""
    if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1:
        raise ContractError(f"per_group must be a positive int, got {per_group!r}")
    if not isinstance(key, str) or not key:
        raise ContractError(f"key must be a non-empty string, got {key!r}")
    order: list[tuple[Any, ...]] = []
    members: dict[tuple[Any, ...], list[Hit]] = {}
    for i, hit in enumerate(hits):
        if not isinstance(hit, Hit):
            raise ContractError(f"hits[{i}] must be a Hit, got {type(hit).__name__}")
        value = hit.note.metadata.get(key)
        grouped = value is not None and not isinstance(value, list | dict)
        # a value's type is part of its identity: 1 and "1" (and True) are different sessions
        ident = (hit.namespace, type(value).__name__, value) if grouped else (hit.namespace, "", i)
        if ident not in members:
            members[ident] = []
            order.append(ident)
        members[ident].append(hit)
    out = []
    for ident in order:
        group = members[ident]
        first = group[0]
        value = first.note.metadata.get(key) if ident[1] else None
        out.append(
            HitGroup(
                key=key, value=value, namespace=first.namespace, score=first.score,
                total=len(group), hits=group[:per_group],
            )
        )  # fmt: skip
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
    ``omitted``, the estimated ``tokens`` of ``text`` and the memory point ``seq`` that was read;
``receipt``: the seq of the recall receipt kept of the answer (``context(..., receipt=True)``), else None.

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
    receipt: int | None = pydantic.Field(default=None, ge=1, strict=True)


def estimate_tokens(text: str) -> int:
    """About four bytes of UTF-8 per token, rounded up: ``ceil(len(text.encode()) / 4)``.

    Counts bytes, not characters, so non-ASCII text (``é`` is two bytes, ``日`` three) costs more.
    """
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def render_hit(hit: HitLike) -> str:
    """The default line of a hit: ``- [YYYY-MM-DD] text (id)``, or ``- [YYYY-MM-DD] text (id,
    alice/work)`` when the hit has a non-root ``namespace``; ``, superseded`` ends the parenthesis
    of a hit marked ``superseded`` (an ask with ``include_superseded=True``).

    The date is the note's timestamp in UTC. Line breaks in the text become spaces, so every hit
    is one line.
    """
    note = hit.note
    day = datetime.fromtimestamp(note.timestamp, tz=UTC).strftime("%Y-%m-%d")
    text = " ".join(note.text.splitlines())
    where = note.id
    if isinstance(hit, _WithNamespace) and hit.namespace:
        where = f"{note.id}, {'/'.join(hit.namespace)}"
    if getattr(hit, "superseded", False) is True:
        where = f"{where}, superseded"
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
