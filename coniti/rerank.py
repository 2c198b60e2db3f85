"""Rerankers: a second stage that reorders the hits of a query, seeing the notes' text.

A :class:`Reranker` is any object with ``rerank(query, hits) -> hits``: it gets the
:class:`~coniti.actor.Query` and the candidate :class:`~coniti.recall.Hit` objects in rank order
(after filters and MMR, more than ``query.k`` of them: see :meth:`ContinuityEngine.ask
<coniti.engine.ContinuityEngine.ask>`) and returns the hits to keep, best first. It may drop hits
and may return them with a new ``score``, but every hit it returns must be one it was given (the
same note id and namespace) and none twice; the engine then keeps the first ``query.k``.

A reranker that raises, or returns anything else, makes the ask fail: its exception propagates
as it is, a malformed result raises :class:`RerankerError` naming the reranker and the item. There
is no silent fall-back to the first-stage order. Queries with strategy ``recent`` are never
reranked (nothing reorders them).

**Plain functions.** Wherever a :class:`Reranker` is accepted (``Container(reranker=)``,
``ContinuityEngine(reranker=)``), a plain callable ``fn(query, hits) -> hits`` is accepted too, or an
``async def`` one (any callable whose result is awaitable): :func:`as_reranker` wraps it in a
:class:`FunctionReranker`, named after the function, under the same rules. An awaitable result is run
to completion before the ask goes on: with :func:`asyncio.run` when the calling thread runs no event
loop (the sync ``ask``, and the async twins, which run on a worker thread), else on a new event loop
in a helper thread (a sync ``ask`` called from inside a coroutine), so it never blocks on the
caller's own loop.

Rerankers are registered by name in :data:`RERANKERS` (entry-point group ``coniti.rerankers``),
like embedders and structures; :class:`~coniti.container.Container` takes ``reranker=`` as a
name or an instance. Built-in:

``term_overlap``
    Orders by the fraction of the query's distinct tokens (:func:`coniti.keyword.tokenize`) that
    occur in the note's text (score = that fraction), ties kept in the first-stage order: a cheap
    exact-match stage for literal questions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from coniti.actor import Query
from coniti.errors import ContractError
from coniti.keyword import tokenize
from coniti.recall import Hit
from coniti.registry import Registry

__all__ = [
    "RERANKERS",
    "FunctionReranker",
    "Reranker",
    "RerankerError",
    "RerankerLike",
    "TermOverlapReranker",
    "apply_reranker",
    "as_reranker",
]


@runtime_checkable
class Reranker(Protocol):
    """Reorders candidate hits (module docstring)."""

    def rerank(self, query: Query, hits: list[Hit]) -> list[Hit]: ...


RerankerLike = Reranker | Callable[[Query, list[Hit]], "list[Hit] | Awaitable[list[Hit]]"]
"""What a ``reranker=`` argument takes: a :class:`Reranker`, or a plain or async function (module
docstring)."""


class FunctionReranker:
    """A plain or async function ``fn(query, hits) -> hits`` as a :class:`Reranker` (module
    docstring); ``name`` is the function's ``__name__`` (its type's name when it has none)."""

    def __init__(self, fn: Callable[[Query, list[Hit]], Any]) -> None:
        if not callable(fn):
            raise ContractError(f"reranker must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = str(getattr(fn, "__name__", type(fn).__name__))

    def rerank(self, query: Query, hits: list[Hit]) -> list[Hit]:
        out = self.fn(query, hits)
        if inspect.isawaitable(out):
            out = _run(out)
        return out  # type: ignore[no-any-return]  # checked by apply_reranker

    def __repr__(self) -> str:
        return f"FunctionReranker({self.name})"


def _run(awaitable: Awaitable[Any]) -> Any:
    """``awaitable`` run to completion from synchronous code (module docstring)."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="coniti-rerank") as pool:
        return pool.submit(asyncio.run, wait()).result()


def as_reranker(value: Any, field: str = "reranker") -> Reranker:
    """``value`` as a :class:`Reranker`: itself when it has ``rerank(query, hits)``, a
    :class:`FunctionReranker` when it is a plain callable; else :class:`ContractError` naming
    ``field``."""
    if isinstance(value, type):  # a class, not an instance: has rerank, but unbound
        pass
    elif isinstance(value, Reranker):
        return value
    elif callable(value):
        return FunctionReranker(value)
    raise ContractError(
        f"{field} must be a registered name, have rerank(query, hits) or be a function "
        f"(query, hits) -> hits, got {type(value).__name__}"
    )


RERANKERS: Registry[Reranker] = Registry("reranker", "coniti.rerankers")
"""Rerankers by name; third parties add theirs here or in the ``coniti.rerankers`` entry-point group."""


class RerankerError(ContractError):
    """A reranker returned something other than hits drawn from the ones it was given."""


def _name(reranker: Any) -> str:
    return str(getattr(reranker, "name", type(reranker).__name__))


def apply_reranker(reranker: Reranker, query: Query, hits: Sequence[Hit]) -> list[Hit]:
    """``reranker.rerank(query, hits)`` checked against the module's rules."""
    given = {(h.note.id, h.namespace) for h in hits}
    out = reranker.rerank(query, list(hits))
    if not isinstance(out, list | tuple):
        raise RerankerError(f"reranker {_name(reranker)!r} returned a {type(out).__name__}, not a list of hits")
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for i, hit in enumerate(out):
        if not isinstance(hit, Hit):
            raise RerankerError(f"reranker {_name(reranker)!r} returned {type(hit).__name__} at [{i}], not a Hit")
        key = (hit.note.id, hit.namespace)
        if key not in given:
            raise RerankerError(
                f"reranker {_name(reranker)!r} returned note {hit.note.id!r} at [{i}], which it was not given"
            )
        if key in seen:
            raise RerankerError(f"reranker {_name(reranker)!r} returned note {hit.note.id!r} twice")
        seen.add(key)
    return list(out)


class TermOverlapReranker:
    """The ``term_overlap`` reranker (module docstring)."""

    name = "term_overlap"

    def rerank(self, query: Query, hits: list[Hit]) -> list[Hit]:
        terms = set(tokenize(query.text or ""))
        if not terms:
            return list(hits)
        scored = []
        for position, hit in enumerate(hits):
            share = len(terms & set(tokenize(hit.note.text))) / len(terms)
            scored.append((-share, position, hit.model_copy(update={"score": share})))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [hit for _, _, hit in scored]


RERANKERS.register(TermOverlapReranker.name, TermOverlapReranker)
