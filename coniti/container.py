"""Container: assemble memory, embedding, structure and strategy by name (or instance) into an engine.

::

    c = Container()                                     # in-memory, local_hash, flat, default
    c = Container(memory="log", path="store/", dim=128, structure="segment_tree")
    c.engine.ingest(Note.create("met Ana about the budget"))
    c.resolved()["embedding"].spec_id                   # 'emb-...', the id written in the memory
    c.memory.history("n1")                              # c.memory is typed LogBackend here

``Container`` is generic in its memory's type: ``Container(memory="log")`` is a
``Container[LogBackend]``, ``Container()`` and ``Container(memory="in_memory")`` a
``Container[InMemoryBackend]``, ``Container(memory=backend)`` a ``Container[type of backend]``, and
any other name a ``Container[MemoryBackend]``; so ``c.memory`` exposes the chosen backend's API to a
type checker.

Each piece is a registered name or an instance. Names are looked up in the piece's registry
(:data:`MEMORIES`, :data:`~coniti.embedding.EMBEDDERS`, :data:`~coniti.structure.STRUCTURES`,
:data:`~coniti.strategy.STRATEGIES`), which also reads the entry-point groups ``coniti.memories``,
``coniti.embedders``, ``coniti.structures`` and ``coniti.strategies`` (see :mod:`coniti.registry`).

Options (``**options``) go to the piece whose factory takes a parameter of that name; write
``<piece>_<option>`` (``embedding_dim=64``, ``memory_path=...``) when two pieces take the same name.
An option no named piece takes, or one given for a piece passed as an instance, raises
:class:`~coniti.errors.ContractError` listing what each piece accepts.

Built-in memories: ``in_memory`` (:class:`~coniti.impl.memory.InMemoryBackend`, the default) and
``log`` (:class:`~coniti.impl.log.LogBackend`; needs ``path``; imported only when chosen). A memory the
container created is closed by :meth:`Container.close` (or ``with Container(...) as c:``); a memory
passed as an instance belongs to the caller and is left open.

``reranker`` (keyword only): a registered name in :data:`~coniti.rerank.RERANKERS` (built without
options; entry-point group ``coniti.rerankers``) or a :class:`~coniti.rerank.Reranker` instance,
applied by the engine to every ask but ``recent`` ones. ``keyword``: a
:class:`~coniti.keyword.KeywordIndex` prototype whose ``k1`` and ``b`` every namespace's keyword index
takes (default ``KeywordIndex()``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar, cast, overload

import pydantic

from coniti.contracts import Contract
from coniti.embedding import EMBEDDERS, Embedder
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError, EmbeddingMismatch
from coniti.impl.memory import InMemoryBackend
from coniti.keyword import KeywordIndex
from coniti.memory import MemoryBackend
from coniti.registry import Registry, spec_id
from coniti.rerank import RERANKERS, Reranker
from coniti.strategy import STRATEGIES, Strategy
from coniti.structure import STRUCTURES, Structure

if TYPE_CHECKING:
    from coniti.conversation import Conversation
    from coniti.impl.log import LogBackend

__all__ = [
    "MEMORIES",
    "NEW_MEMORY_EMBEDDING",
    "PIECES",
    "Container",
    "ResolvedPiece",
    "recorded_embedding",
    "stored_embedding",
]

NEW_MEMORY_EMBEDDING = "minilm"
"""What :func:`stored_embedding` picks for memory that holds no embedding yet: the real model (the
library's own default, ``local_hash``, needs no model files and stays what ``Container()`` uses)."""

M = TypeVar("M", bound=MemoryBackend)

MEMORIES: Registry[MemoryBackend] = Registry("memory", "coniti.memories")
"""Memory backends by name; third parties add theirs here or in the ``coniti.memories`` group."""

PIECES = ("memory", "embedding", "structure", "strategy")
"""The piece names, in the order :meth:`Container.resolved` lists them."""

_PREFIX = {"memory": "mem", "embedding": "emb", "structure": "str", "strategy": "stg"}


def _log_backend(
    path: str | os.PathLike[str],
    *,
    durability: str = "sync",
    actor: str | None = None,
    read_only: bool = False,
    map_size: int | None = None,
) -> MemoryBackend:
    """A :class:`~coniti.impl.log.LogBackend` on directory ``path``."""
    from coniti.impl.log import LogBackend

    extra: dict[str, Any] = {} if map_size is None else {"map_size": map_size}
    return LogBackend(path, durability=durability, actor=actor, read_only=read_only, **extra)


MEMORIES.register("in_memory", InMemoryBackend)
MEMORIES.register("log", _log_backend)


def _parameters(factory: Callable[..., Any]) -> list[str]:
    """Keyword-acceptable parameter names of a factory (a class: its ``__init__``)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    return [
        name
        for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def _required(factory: Callable[..., Any]) -> list[str]:
    """Parameters of a factory that have no default."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    return [
        name
        for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
    ]


def _defaults(factory: Callable[..., Any]) -> dict[str, Any]:
    """Parameters of a factory with their JSON-friendly defaults."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.default is not p.empty and (p.default is None or isinstance(p.default, bool | int | float | str))
    }


class ResolvedPiece(Contract):
    """One piece as :meth:`Container.resolved` reports it: its ``name``, full ``options`` and
    ``spec_id`` (for the embedding, the id written into the memory). Frozen. ``piece["spec_id"]``
    reads the same field as ``piece.spec_id``."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str
    options: dict[str, Any]
    spec_id: str

    def __getitem__(self, field: str) -> Any:
        if field not in type(self).model_fields:
            raise KeyError(field)
        return getattr(self, field)


class Container(Generic[M]):
    """The assembled pieces and the :class:`~coniti.engine.ContinuityEngine` over them.

    Raises :class:`~coniti.errors.UnknownPiece` for an unknown name (listing the registered ones),
    :class:`~coniti.errors.ContractError` for a bad option, and
    :class:`~coniti.errors.EmbeddingMismatch` if the memory was written with another embedding.
    """

    memory: M
    """The memory backend, typed by the ``memory`` argument (see the module docstring)."""

    @overload
    def __init__(
        self: Container[LogBackend],
        memory: Literal["log"],
        embedding: str | Embedder = ...,
        structure: str | Structure = ...,
        strategy: str | Strategy = ...,
        **options: Any,
    ) -> None: ...

    @overload
    def __init__(
        self: Container[InMemoryBackend],
        memory: Literal["in_memory"] | None = None,
        embedding: str | Embedder = ...,
        structure: str | Structure = ...,
        strategy: str | Strategy = ...,
        **options: Any,
    ) -> None: ...

    @overload
    def __init__(
        self: Container[M],
        memory: M,
        embedding: str | Embedder = ...,
        structure: str | Structure = ...,
        strategy: str | Strategy = ...,
        **options: Any,
    ) -> None: ...

    @overload
    def __init__(
        self: Container[MemoryBackend],
        memory: str,
        embedding: str | Embedder = ...,
        structure: str | Structure = ...,
        strategy: str | Strategy = ...,
        **options: Any,
    ) -> None: ...

    def __init__(
        self,
        memory: str | MemoryBackend | None = None,
        embedding: str | Embedder = "local_hash",
        structure: str | Structure = "flat",
        strategy: str | Strategy = "default",
        *,
        reranker: str | Reranker | None = None,
        keyword: KeywordIndex | None = None,
        **options: Any,
    ) -> None:
        if isinstance(reranker, str):
            reranker = RERANKERS.create(reranker)
        if reranker is not None and not isinstance(reranker, Reranker):
            raise ContractError(
                f"reranker must be a registered name or have rerank(query, hits), got {type(reranker).__name__}"
            )
        self.reranker: Reranker | None = reranker
        chosen: dict[str, Any] = {
            "memory": "in_memory" if memory is None else memory,
            "embedding": embedding,
            "structure": structure,
            "strategy": strategy,
        }
        kinds: dict[str, tuple[Registry[Any], type]] = {
            "memory": (MEMORIES, MemoryBackend),
            "embedding": (EMBEDDERS, Embedder),
            "structure": (STRUCTURES, Structure),
            "strategy": (STRATEGIES, Strategy),
        }
        factories: dict[str, Callable[..., Any] | None] = {}
        for piece, value in chosen.items():
            registry, base = kinds[piece]
            if isinstance(value, str):
                factories[piece] = registry.get(value)
            elif isinstance(value, base):
                factories[piece] = None
            else:
                raise ContractError(
                    f"{piece} must be a registered name or a {base.__name__}, "
                    f"got {type(value).__name__}"
                )
        routed = _route(options, chosen, factories)
        for piece, factory in factories.items():
            if factory is None:
                continue
            missing = [n for n in _required(factory) if n not in routed[piece]]
            if missing:
                raise ContractError(
                    f"{piece} {chosen[piece]!r} needs option {missing[0]!r} "
                    f"(e.g. Container({piece}={chosen[piece]!r}, {missing[0]}=...))"
                )
        self._defaults = {
            p: (_defaults(f) if f is not None else {}) for p, f in factories.items()
        }
        self._names = {p: (v if isinstance(v, str) else _instance_name(p, v)) for p, v in chosen.items()}
        self._given = routed
        self._owns_memory = isinstance(chosen["memory"], str)
        built: dict[str, Any] = {}
        try:
            for piece in PIECES:
                factory = factories[piece]
                built[piece] = chosen[piece] if factory is None else factory(**routed[piece])
                _, base = kinds[piece]
                if not isinstance(built[piece], base):
                    raise ContractError(
                        f"{piece} {self._names[piece]!r} built a {type(built[piece]).__name__}, "
                        f"not a {base.__name__}"
                    )
            self.memory = cast(M, built["memory"])
            self.embedder: Embedder = built["embedding"]
            self.structure: Structure = built["structure"]
            self.strategy: Strategy = built["strategy"]
            self.engine = ContinuityEngine(
                self.memory, self.embedder, self.structure, self.strategy, keyword=keyword, reranker=reranker
            )
        except BaseException:
            created = built.get("memory")
            if self._owns_memory and isinstance(created, MemoryBackend):
                created.close()
            raise

    def resolved(self) -> dict[str, ResolvedPiece]:
        """Per piece, in :data:`PIECES` order: a :class:`ResolvedPiece` with ``name``, ``options``
        and ``spec_id`` (the embedding's is the memory's id)."""
        out: dict[str, ResolvedPiece] = {}
        for piece in PIECES:
            options = self._options(piece)
            if piece == "embedding":
                ident = self.embedder.spec_id
            else:
                ident = spec_id(_PREFIX[piece], {"name": self._names[piece], "options": options})
            out[piece] = ResolvedPiece(name=self._names[piece], options=options, spec_id=ident)
        return out

    def _options(self, piece: str) -> dict[str, Any]:
        if piece == "embedding":
            return dict(self.embedder.options)
        if piece == "structure":
            return dict(self.structure.options)
        if piece == "strategy":
            return dict(self.strategy.options)
        given = {**self._defaults["memory"], **self._given["memory"]}
        return {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in sorted(given.items())}

    def conversation(self, name: str, *, namespace: Sequence[str] = ()) -> Conversation:
        """The conversation ``name`` under ``namespace`` of this container's engine
        (:class:`~coniti.conversation.Conversation`; its turns live in the namespace
        ``(*namespace, "conversations", name)``). Nothing is written until a turn is appended."""
        from coniti.conversation import Conversation

        return Conversation(self.engine, name, namespace=namespace)

    def close(self) -> None:
        """Drop the engine's derived state and close the memory if this container created it."""
        self.engine.close()
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(f"{p}={self._names[p]!r}" for p in PIECES)
        return f"Container({names})"


def stored_embedding(memory: MemoryBackend, default: str = NEW_MEMORY_EMBEDDING) -> str:
    """The registered embedder name whose spec id the memory was written with, or ``default`` for
    memory with none yet.

    The id is the ``embedding_id`` metadata of the root namespace, else of the first live namespace
    (sorted) that has one. Registered embedders are tried with their default options, in
    registration order (cheap hash embedders before a model that loads weights); one that cannot be
    built here (a missing package) is passed over. Raises :class:`EmbeddingMismatch` naming the id
    when no registered embedder gives it.
    """
    found = recorded_embedding(memory)
    if found is None:
        return default
    stored = found[1]
    unavailable: list[str] = []
    for name in EMBEDDERS.in_order():  # entry points are read only if no built-in matches
        try:
            if EMBEDDERS.create(name).spec_id == stored:
                return name
        except (ContractError, ImportError) as exc:
            unavailable.append(f"{name} cannot be loaded here ({exc})")
    if unavailable:
        raise EmbeddingMismatch(
            f"memory was written with embedding {stored!r}, which none of the embedders that load "
            f"here gives; {'; '.join(unavailable)}: make it loadable, or open the memory with the "
            "embedder and options that wrote it"
        )
    raise EmbeddingMismatch(
        f"memory was written with embedding {stored!r}, which no registered embedder gives with its "
        f"default options (known: {', '.join(EMBEDDERS.names())}); open it with the embedder and "
        "options that wrote it"
    )


def recorded_embedding(memory: MemoryBackend) -> tuple[tuple[str, ...], Any] | None:
    """``(namespace, id)``: the embedding id the memory records, in the root namespace's
    ``embedding_id`` metadata, else in the first live namespace (sorted) that has one; None when
    none does. What :func:`stored_embedding` and the command line read as a store's embedding."""
    from coniti.engine import EMBEDDING_KEY

    for ns in [(), *memory.namespaces()]:
        stored = memory.get_meta(memory.meta_get_request(EMBEDDING_KEY, ns)).value
        if stored is not None:
            return ns, stored
    return None


def _instance_name(piece: str, value: Any) -> str:
    if piece == "memory":
        return str(value.kind)
    return str(value.name)


def _route(
    options: dict[str, Any],
    chosen: dict[str, Any],
    factories: dict[str, Callable[..., Any] | None],
) -> dict[str, dict[str, Any]]:
    """Assign each option to exactly one piece, or raise ContractError saying what is accepted."""
    accepted = {p: (_parameters(f) if f is not None else []) for p, f in factories.items()}
    routed: dict[str, dict[str, Any]] = {p: {} for p in PIECES}

    def help_text() -> str:
        parts = []
        for piece in PIECES:
            names = ", ".join(accepted[piece]) if factories[piece] is not None else "(an instance)"
            parts.append(f"{piece} {_label(chosen[piece])}: {names or '(none)'}")
        return "; ".join(parts)

    for key, value in options.items():
        target: str | None = None
        name = key
        for piece in PIECES:
            prefix = piece + "_"
            if key.startswith(prefix):
                if factories[piece] is None:
                    raise ContractError(
                        f"option {key!r} is for the {piece}, which was given as an instance"
                    )
                if key[len(prefix) :] in accepted[piece]:
                    target, name = piece, key[len(prefix) :]
                    break
        if target is None:
            takers = [p for p in PIECES if key in accepted[p]]
            if len(takers) > 1:
                spelled = " or ".join(f"{p}_{key}" for p in takers)
                raise ContractError(f"option {key!r} fits several pieces; write {spelled}")
            if not takers:
                raise ContractError(f"unknown option {key!r}; accepted: {help_text()}")
            target = takers[0]
        if name in routed[target]:
            raise ContractError(f"option {name!r} for the {target} is given twice")
        routed[target][name] = value
    return routed


def _label(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"({type(value).__name__} instance)"
