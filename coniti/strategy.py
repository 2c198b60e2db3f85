"""Strategies: what to admit into memory and how to answer a query from the structures.

A :class:`Strategy` sees notes and vectors, never the memory backend: the engine hands it a
:class:`StrategyContext` with the namespace's structures and a lookup of stored notes by content key.
Strategies must not modify the structures; the engine owns them.

Built-in, registered by name in :data:`STRATEGIES`:

``default``
    Admits a note when its text is not blank, its id is not stored yet, and (unless
    ``refuse_duplicates=False``) no stored note of the namespace, and no earlier note of the same
    batch, duplicates it: such a duplicate is refused with the id of the note it duplicates. What
    counts as a duplicate is the option ``duplicate_key``: ``"text_timestamp"`` (the default: the
    same text at the same timestamp, so a daily event is stored each day) or ``"text_metadata"``
    (the same text and metadata at any time: recording the same fact again adds nothing).
    Answers with the first structure: a query with text by cosine similarity to the text's vector
    (steered towards the ``near`` note when both are given), a ``near`` query without text by
    closeness in time to that note, a time-only query by the most recent notes; ``time_range`` and
    ``k`` always apply.
"""

from __future__ import annotations

import hashlib
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
import orjson

from coniti.actor import Note, Query
from coniti.batch import NoteBatch
from coniti.errors import ContractError
from coniti.registry import Registry, canonical_json
from coniti.structure import Structure, StructureHit

__all__ = ["STRATEGIES", "Admission", "DefaultStrategy", "Strategy", "StrategyContext"]

_DOUBLE = struct.Struct("<d")

DUPLICATE_KEYS = ("text_timestamp", "text_metadata")
"""What :class:`DefaultStrategy` compares to find a duplicate (its ``duplicate_key`` option)."""

STRATEGIES: Registry[Strategy] = Registry("strategy", "coniti.strategies")
"""Strategies by name; third parties add theirs here or in the ``coniti.strategies`` entry-point group."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A strategy's decision on one note: admitted, or refused with a reason."""

    admitted: bool
    reason: str | None = None


ADMIT = Admission(True)


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """What a strategy may consult for one namespace.

    ``structures``: the namespace's structures, in the engine's order (read them, never modify).
    ``stored_with_key``: ids of stored notes whose :meth:`Strategy.content_key` equals the given key.
    ``is_stored``: whether an id is stored in the namespace.
    ``keys``: in a call of :meth:`Strategy.admit`, the :meth:`Strategy.content_keys` of its notes
    when the engine computed them already (it indexes the admitted notes under the same keys), in
    the notes' order; None otherwise.
    ``stored_among`` and ``held_among`` (optional; None: not offered): the same answers for a whole
    batch at once: the ids among the given ones that ``is_stored``, the keys among the given ones
    that ``stored_with_key`` finds a note for.
    """

    namespace: tuple[str, ...]
    structures: Sequence[Structure]
    stored_with_key: Callable[[str], list[str]]
    is_stored: Callable[[str], bool]
    keys: Sequence[str | None] | None = None
    stored_among: Callable[[Sequence[str]], set[str]] | None = None
    held_among: Callable[[set[str]], set[str]] | None = None


class Strategy(ABC):
    """Decides what to admit (:meth:`admit`) and how to answer (:meth:`answer`)."""

    name: ClassVar[str]

    @property
    def options(self) -> dict[str, Any]:
        """The constructor options that reproduce this strategy (``type(s)(**s.options)``)."""
        return {}

    def content_key(self, note: Note) -> str | None:
        """A key for the engine's content index (see :attr:`StrategyContext.stored_with_key`).

        ``None`` (the default) means the strategy needs no content index.
        """
        return None

    def content_keys(self, notes: Sequence[Note]) -> list[str | None]:
        """:meth:`content_key` of each note, in order (a strategy may override it to compute a
        batch faster; the keys must be the same)."""
        key_of = self.content_key
        return [key_of(note) for note in notes]

    @abstractmethod
    def admit(
        self, notes: Sequence[Note], vectors: np.ndarray, context: StrategyContext
    ) -> list[Admission]:
        """One :class:`Admission` per note, in order. ``vectors[i]`` is the embedding of ``notes[i]``."""

    @abstractmethod
    def answer(
        self, query: Query, vector: np.ndarray | None, context: StrategyContext
    ) -> list[StructureHit]:
        """At most ``query.k`` hits, best first. ``vector`` is the embedded ``query.text`` (or None)."""


class DefaultStrategy(Strategy):
    """Admit non-blank, new, non-duplicate notes; answer by similarity, time closeness or recency."""

    name: ClassVar[str] = "default"

    def __init__(self, *, refuse_duplicates: bool = True, duplicate_key: str = "text_timestamp") -> None:
        if not isinstance(refuse_duplicates, bool):
            raise ContractError(
                f"refuse_duplicates must be a boolean, got {type(refuse_duplicates).__name__}"
            )
        if duplicate_key not in DUPLICATE_KEYS:
            raise ContractError(
                f"duplicate_key must be one of {', '.join(DUPLICATE_KEYS)}, got {duplicate_key!r}"
            )
        self._refuse_duplicates = refuse_duplicates
        self._duplicate_key = duplicate_key

    @property
    def options(self) -> dict[str, Any]:
        return {"refuse_duplicates": self._refuse_duplicates, "duplicate_key": self._duplicate_key}

    def content_key(self, note: Note) -> str | None:
        """BLAKE2b of the length-prefixed UTF-8 text and, by ``duplicate_key``, the timestamp's
        IEEE-754 bits or the metadata as sorted-key JSON.

        ``None`` when duplicates are allowed. The key lives only in the engine's in-process index.
        """
        if not self._refuse_duplicates:
            return None
        if self._duplicate_key == "text_timestamp":
            tail = _DOUBLE.pack(note.timestamp + 0.0)
        else:
            tail = _metadata_bytes(note.metadata)
        return _key(note.text, tail)

    def content_keys(self, notes: Sequence[Note]) -> list[str | None]:
        """:meth:`content_key` of each note, read from the columns of a
        :class:`~coniti.batch.NoteBatch` (no note built); a subclass that overrides
        :meth:`content_key` gets its own keys (:meth:`Strategy.content_keys`)."""
        if type(self).content_key is not DefaultStrategy.content_key:
            return super().content_keys(notes)
        if not self._refuse_duplicates:
            return [None] * len(notes)
        texts = notes.texts if isinstance(notes, NoteBatch) else [n.text for n in notes]
        if self._duplicate_key == "text_timestamp":
            times = (
                notes.timestamps if isinstance(notes, NoteBatch)
                else np.fromiter((n.timestamp for n in notes), np.float64, len(texts))
            )  # fmt: skip
            bits = (times + 0.0).astype("<f8").tobytes()  # + 0.0: -0.0 keys as 0.0
            return [_key(text, bits[8 * i : 8 * i + 8]) for i, text in enumerate(texts)]
        metadata = notes.metadata if isinstance(notes, NoteBatch) else [n.metadata for n in notes]
        return [_key(text, _metadata_bytes(m)) for text, m in zip(texts, metadata, strict=True)]

    def admit(
        self, notes: Sequence[Note], vectors: np.ndarray, context: StrategyContext
    ) -> list[Admission]:
        """One decision per note, in order (see the module docstring); reads the columns of a
        :class:`~coniti.batch.NoteBatch` (no note built)."""
        ids: Sequence[str]
        texts: Sequence[str]
        if isinstance(notes, NoteBatch):
            ids, texts = notes.ids, notes.texts
        else:
            ids, texts = [n.id for n in notes], [n.text for n in notes]
        keys = self.content_keys(notes) if context.keys is None else context.keys
        if len(keys) != len(ids):
            raise ContractError(f"{len(keys)} content keys for {len(ids)} notes: one per note")
        if _all_admitted(ids, texts, keys, context):
            return [ADMIT] * len(ids)
        is_stored, stored_with_key = context.is_stored, context.stored_with_key
        decisions: list[Admission] = []
        decide = decisions.append
        batch_ids: set[str] = set()
        batch_keys: dict[str, str] = {}
        for id_, text, key in zip(ids, texts, keys, strict=True):
            if not text or text.isspace():  # what ``not text.strip()`` says, without the copy
                decide(Admission(False, "blank text"))
            elif id_ in batch_ids:
                decide(Admission(False, f"id {id_!r} appears earlier in this batch"))
            elif is_stored(id_):
                decide(Admission(False, f"id {id_!r} is already stored"))
            elif key is None:
                decide(ADMIT)
            elif stored := stored_with_key(key):
                decide(Admission(False, f"duplicate of stored note {stored[0]!r}"))
            elif (earlier := batch_keys.get(key)) is not None:
                decide(Admission(False, f"duplicate of note {earlier!r} earlier in this batch"))
            else:
                batch_keys[key] = id_
                decide(ADMIT)
            batch_ids.add(id_)
        return decisions

    def answer(
        self, query: Query, vector: np.ndarray | None, context: StrategyContext
    ) -> list[StructureHit]:
        if not context.structures:
            return []
        return context.structures[0].search(
            vector, k=query.k, time_range=query.time_range, anchor_id=query.near
        )


def _all_admitted(
    ids: Sequence[str], texts: Sequence[str], keys: Sequence[str | None], context: StrategyContext
) -> bool:
    """Whether :meth:`DefaultStrategy.admit` admits every note, found by whole-batch checks (when
    the context offers its batch lookups): no blank text, no id twice or stored, no content key
    twice or held by a stored note. False: decide note by note."""
    stored_among, held_among = context.stored_among, context.held_among
    if stored_among is None or held_among is None:
        return False
    if not all(texts) or any(map(str.isspace, texts)) or len(set(ids)) != len(ids):
        return False
    distinct = set(keys)
    distinct.discard(None)
    if len(distinct) != len(keys) - keys.count(None):
        return False
    return not stored_among(ids) and not held_among(cast("set[str]", distinct))


def _key(text: str, tail: bytes) -> str:
    """The content key of ``text`` followed by ``tail`` (one BLAKE2b call over the parts: the
    digest of feeding them one by one)."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(len(data).to_bytes(8, "little") + data + tail, digest_size=16).hexdigest()


def _metadata_bytes(metadata: dict[str, Any]) -> bytes:
    """Sorted-key JSON of ``metadata``: orjson when it can encode it, else the standard library
    (integers beyond 64 bits, lone surrogates); the same metadata always takes the same path."""
    if not metadata:
        return b"{}"
    try:
        return b"o" + orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return b"j" + canonical_json(metadata).encode("ascii")


STRATEGIES.register(DefaultStrategy.name, DefaultStrategy)
