"""The content index of one namespace: each content key (:meth:`Strategy.content_key
<coniti.strategy.Strategy.content_key>`) with the ids that hold it, in the order they came, and each
id's key. The strategy reads it through ``StrategyContext.stored_with_key`` to refuse duplicates.

A lone holder is kept as its id, not as a one-item list, so that neither dict holds an object the
cyclic garbage collector tracks (with a list per note, each full collection walked a million lists
at 1M notes). Restored from a snapshot, the index stays packed (two :class:`~coniti.packed.PackedStrings`
columns: ids, and each id's key) and the changes made since wait in order; a few lookups search the
packed columns, and the index is unpacked (changes applied) by :data:`~coniti.packed.LOOKUP_BUDGET`
lookups, a save or a verify. An ask never unpacks it. Not thread-safe: its owner serialises calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from coniti.derived import BlockCheck
from coniti.packed import LOOKUP_BUDGET, PackedStrings

__all__ = ["ContentIndex"]


class ContentIndex:
    """Content key -> holders and id -> key of one namespace (see the module docstring).

    ``packed``: a snapshot's columns (ids, and the key of each), with ``checks``, the CRC-32 checks
    of their blocks not run yet: each runs before any of its bytes is read, and a failed block
    raises :class:`~coniti.derived.StaleSnapshot`."""

    __slots__ = ("checks", "deferred", "key_of", "keys", "packed")

    def __init__(
        self,
        packed: tuple[PackedStrings, PackedStrings] | None = None,
        checks: Sequence[BlockCheck] = (),
    ) -> None:
        self.keys: dict[str, str | list[str]] = {}
        """The holders by key: the id of its one holder, or the ids of its holders in order."""
        self.key_of: dict[str, str] = {}
        self.packed = packed
        self.deferred: list[tuple[str, str | None]] = []
        """While packed: the changes made since, in order, as ``(id, key)`` (key None: the id left)."""
        self.checks = list(checks)

    def add(self, ids: Sequence[str], keys: Sequence[str | None]) -> None:
        """Add ``ids`` under their content ``keys`` (None: not indexed)."""
        if self.packed is not None:
            self.deferred.extend((id_, key) for id_, key in zip(ids, keys, strict=True) if key is not None)
            return
        fresh = None not in keys and self.keys.keys().isdisjoint(keys) and len(set(keys)) == len(keys)
        if fresh:  # the usual batch: new keys, each with one holder
            named = cast("Sequence[str]", keys)
            self.keys.update(zip(named, ids, strict=True))
            self.key_of.update(zip(ids, named, strict=True))
            return
        for id_, key in zip(ids, keys, strict=True):
            if key is not None:
                self.add_key(id_, key)

    def add_key(self, id_: str, key: str) -> None:
        """Add ``id_`` after the holders of ``key`` (the index unpacked)."""
        _hold(self.keys, key, id_)
        self.key_of[id_] = key

    def remove(self, ids: Iterable[str]) -> None:
        """Take ``ids`` out (ids not held are ignored)."""
        if self.packed is not None:
            self.deferred.extend((id_, None) for id_ in ids)
            return
        for id_ in ids:
            key = self.key_of.pop(id_, None)
            if key is None:
                continue
            holders = self.keys.get(key)
            if isinstance(holders, str):
                if holders == id_:
                    del self.keys[key]
            elif holders is not None:
                holders.remove(id_)
                if len(holders) == 1:  # a lone holder again: kept as its id
                    self.keys[key] = holders[0]

    def holders(self, key: str) -> list[str]:
        """The ids holding ``key``, in order (a new list): searched in the packed columns while
        few lookups were made, else from the unpacked index."""
        packed = self.packed
        if packed is None:  # the usual case: unpacked
            return _holders(self.keys.get(key))
        if packed[0].finds + packed[1].finds + len(self.deferred) < LOOKUP_BUDGET:
            self._check()
            return _packed_holders(packed, self.deferred, key)
        self.pairs()
        return _holders(self.keys.get(key))

    def held_among(self, keys: set[str]) -> set[str]:
        """The keys among ``keys`` that some id holds (:meth:`holders` of each, at once while
        unpacked)."""
        if self.packed is None:
            return keys & self.keys.keys()
        return {key for key in keys if self.holders(key)}

    def pairs(self) -> dict[str, str]:
        """Every id with its key (the index unpacked first, if packed)."""
        if self.packed is not None:
            self._check()
            (id_column, key_column), self.packed = self.packed, None
            ids, keys = id_column.tolist(), key_column.tolist()
            by_key, key_of = self.keys, self.key_of
            for id_, key in zip(ids, keys, strict=True):
                _hold(by_key, key, id_)
                key_of[id_] = key
            deferred, self.deferred = self.deferred, []
            for id_, change in deferred:
                if change is None:
                    self.remove([id_])
                else:
                    self.add_key(id_, change)
        return self.key_of

    def _check(self) -> None:
        """Run the packed columns' block checks not run yet (before any of their bytes is read)."""
        for check in self.checks:
            check.all()


def _hold(keys: dict[str, str | list[str]], key: str, id_: str) -> None:
    """Add ``id_`` after the holders of ``key`` in ``keys`` (one holder: its id; several: a list)."""
    held = keys.get(key)
    if held is None:
        keys[key] = id_
    elif isinstance(held, str):
        keys[key] = [held, id_]
    else:
        held.append(id_)


def _holders(held: str | list[str] | None) -> list[str]:
    """The holders of a key as a new list, from its entry ``held`` in :attr:`ContentIndex.keys`."""
    if held is None:
        return []
    return [held] if isinstance(held, str) else list(held)


def _packed_holders(
    content: tuple[PackedStrings, PackedStrings], deferred: list[tuple[str, str | None]], key: str
) -> list[str]:
    """The ids ``keys[key]`` would hold once ``content`` is unpacked and ``deferred`` applied (see
    :meth:`ContentIndex.pairs`), found by searching the packed columns."""
    ids, keys = content
    holders = [ids[r] for r in keys.find(key).tolist()]
    touched: dict[str, str | None] = {}
    for id_, change in deferred:
        if change is not None:  # add_key
            touched[id_] = change
            if change == key:
                holders.append(id_)
            continue
        if id_ in touched:  # remove
            old = touched[id_]
        else:
            rows = ids.find(id_)
            old = keys[int(rows[0])] if rows.shape[0] else None
        if old is not None:
            touched[id_] = None
            if old == key:
                holders.remove(id_)
    return holders
