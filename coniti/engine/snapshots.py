"""The snapshots of one engine's namespace indexes in its store's derived directory
(:mod:`coniti.derived` keeps the files; ``log/DERIVED.md`` describes them).

A snapshot of a namespace holds a part per structure (``structure.0``, ...), the keyword index
(``keyword``) and the content index as packed pairs (``content``), tagged with the event the index
reflects and keyed by the engine's configuration (:meth:`Snapshots.key`): another embedding,
structure option, strategy or keyword setting never reads it. The structures' vectors and the
content index are checked block by block on first touch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coniti import derived
from coniti.engine.content import ContentIndex
from coniti.engine.index import NamespaceIndex, Recipe
from coniti.errors import ContractError
from coniti.keyword import KeywordIndex
from coniti.memory import DerivedHome
from coniti.packed import PackedStrings

__all__ = ["Snapshots"]

CONTENT_FIELDS = ("id_bytes", "id_ends", "key_bytes", "key_ends")
"""The arrays of a snapshot's ``content`` part (the content index as packed pairs)."""

KEY_FORMAT = 2
"""The engine's own part of a snapshot's key: bump it when what the engine saves changes (2: long
notes' passage rows in the structures, conversation threads in the keyword index)."""


class Snapshots:
    """Load and save the snapshots of indexes made by ``recipe`` beside the store ``home``."""

    def __init__(self, home: DerivedHome, recipe: Recipe) -> None:
        self.home = home
        self.recipe = recipe
        self._dir = derived.DerivedDir(home.derived_path, home.store_id)

    def key(self) -> dict[str, Any]:
        """What a snapshot must have been written with to be read."""
        recipe = self.recipe
        return {
            "engine": KEY_FORMAT,
            "embedding": recipe.spec_id,
            "structures": [[p.name, p.options] for p in recipe.prototypes],
            "strategy": [recipe.strategy.name, recipe.strategy.options],
            "keyword": recipe.keyword.options,
        }

    def load(self, ns: tuple[str, ...], head: int, *, deferred: bool = False) -> derived.Loaded:
        """The snapshot of ``ns`` checked against the store at ``head`` (else
        :class:`~coniti.derived.StaleSnapshot`); with ``deferred``, the structures' vectors and the
        content index are checked block by block on first touch instead."""
        defer = [
            *(f"content/{name}" for name in CONTENT_FIELDS),
            *(f"structure.{i}/{name}" for i, p in enumerate(self.recipe.prototypes) for name in p.checked_on_touch),
        ] if deferred else []  # fmt: skip
        key = self.key()
        return self._dir.load(
            derived.snapshot_name(ns, key), key=key, head=head, hash_at=self.home.event_hash,
            defer=defer,
        )

    def restore(self, loaded: derived.Loaded) -> NamespaceIndex | None:
        """The index ``loaded`` holds, as of its event (not caught up); None when its arrays do
        not fit this configuration."""
        index = self.recipe.spawn(seq=loaded.seq)
        index.checks = dict(loaded.checks)
        try:
            for i, structure in enumerate(index.structures):
                part = f"structure.{i}"
                structure.restore_derived_state(loaded.parts[part], loaded.part_checks(part))
            index.keyword = KeywordIndex.from_state(loaded.parts["keyword"])
            if index.keyword.seq != loaded.seq or index.keyword.options != self.recipe.keyword.options:
                return None
            content = loaded.parts.get("content")
            if content is not None:
                if not set(CONTENT_FIELDS) <= set(content):
                    return None
                packed = (
                    PackedStrings(content["id_bytes"], content["id_ends"]),
                    PackedStrings(content["key_bytes"], content["key_ends"]),
                )
                if len(packed[0]) != len(packed[1]):
                    return None
                index.content = ContentIndex(packed, list(loaded.part_checks("content").values()))
        except (KeyError, ContractError, ValueError):
            return None
        index.meta_checked = True
        return index

    def save(self, ns: tuple[str, ...], index: NamespaceIndex) -> None:
        """Write the snapshot of ``ns`` tagged with ``index.seq`` (which must be known); raises
        what the file system raises, and the old snapshot then stays."""
        seq = index.seq
        assert seq is not None
        parts: dict[str, dict[str, np.ndarray]] = {
            f"structure.{i}": s.derived_state() for i, s in enumerate(index.structures)
        }
        pairs = sorted(index.content.pairs().items())
        id_bytes, id_ends = derived.pack_strings([i for i, _ in pairs])
        key_bytes, key_ends = derived.pack_strings([k for _, k in pairs])
        parts["content"] = {
            "id_bytes": id_bytes, "id_ends": id_ends, "key_bytes": key_bytes, "key_ends": key_ends,
        }
        index.keyword.seq = seq
        parts["keyword"] = {k: np.asarray(v) for k, v in index.keyword.state().items()}
        key = self.key()
        self._dir.save(
            derived.snapshot_name(ns, key), seq=seq, seq_hash=self.home.event_hash(seq), key=key,
            parts=parts,
        )
        index.changed = 0
