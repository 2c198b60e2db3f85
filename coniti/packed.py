"""Strings kept packed: a restored snapshot's ids read one at a time and found without decoding all.

A snapshot holds a column of strings (ids, content keys) as their UTF-8 bytes one after another
(``uint8``) and where each ends (``int64``; :func:`coniti.derived.pack_strings`). Decoding 200,000
of them into a list, and a dict from id to row, costs about half a second: more than the rest of an
``ask``. :class:`PackedStrings` reads such a column in place: one string by index, or every index
holding a given string (:meth:`PackedStrings.find`: a binary search over a sorted key of each
string, built by the first find or given by its owner: :meth:`PackedStrings.sort_index`; or, in a
column kept in sorted order, :meth:`PackedStrings.bisect`: a binary search of the strings), and
decodes everything only when asked (:meth:`PackedStrings.tolist`). :class:`IdColumn` is the id of each row of a table that grows: a
packed base plus the rows appended since, or, once :meth:`IdColumn.unpack` ran, one list.

Owners that look strings up often should unpack after :data:`LOOKUP_BUDGET` finds: past that, one
decode (and a dict) costs less than more searches.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

import numpy as np

__all__ = [
    "KEY_SCHEME", "LOOKUP_BUDGET", "IdColumn", "PackedStrings", "index_arrays", "indexed", "scheme_array",
]  # fmt: skip

LOOKUP_BUDGET = 1024
"""Finds over a packed column after which its owner should unpack it (see the module docstring)."""

KEY_SCHEME = f"mix64-{sys.byteorder}-1"
"""The name of the 64-bit key :meth:`PackedStrings.sort_index` sorts (it depends on the machine's
byte order): a sort index kept on disk applies only where this name is the one it was made with."""


def index_arrays(strings: PackedStrings) -> dict[str, np.ndarray]:
    """``strings``' :meth:`~PackedStrings.sort_index` as the arrays a snapshot keeps beside them:
    ``id_order`` (int64), ``id_keys`` (uint64) and ``id_key_scheme`` (:data:`KEY_SCHEME`, ASCII
    ``uint8``)."""
    order, keys = strings.sort_index()
    return {"id_order": order, "id_keys": keys, "id_key_scheme": scheme_array()}


def scheme_array() -> np.ndarray:
    """:data:`KEY_SCHEME` as a state keeps it (``id_key_scheme``: ASCII ``uint8``)."""
    return np.frombuffer(KEY_SCHEME.encode("ascii"), dtype=np.uint8).copy()


def indexed(raw: np.ndarray, ends: np.ndarray, state: dict[str, np.ndarray]) -> PackedStrings:
    """The column ``raw``/``ends`` with the sort index :func:`index_arrays` put in ``state``, when
    it is there under this machine's :data:`KEY_SCHEME` (else made at the first find). Raises
    ``ValueError`` for arrays that do not fit (see :class:`PackedStrings`)."""
    scheme = state.get("id_key_scheme")
    if scheme is None or "id_order" not in state or "id_keys" not in state:
        return PackedStrings(raw, ends)
    if np.asarray(scheme, dtype=np.uint8).tobytes().decode("ascii", "replace") != KEY_SCHEME:
        return PackedStrings(raw, ends)
    return PackedStrings(raw, ends, (state["id_order"], state["id_keys"]))


class PackedStrings:
    """An immutable column of strings as UTF-8 ``raw`` bytes cut at ``ends`` (string ``i`` is
    ``raw[ends[i-1]:ends[i]]``). ``index``: the :meth:`sort_index` of these strings, kept from an
    earlier one (under the same :data:`KEY_SCHEME`): then no find sorts. Raises ``ValueError`` for
    arrays that do not fit together (an ``index`` of another length or dtype, an order out of
    range, keys not sorted); that ``index`` is the sort of these very strings is the caller's
    promise (a checksum of what was written, say): a wrong one makes finds miss."""

    __slots__ = ("_ends", "_order", "_raw", "_sorted", "finds")

    def __init__(
        self, raw: np.ndarray, ends: np.ndarray, index: tuple[np.ndarray, np.ndarray] | None = None
    ) -> None:
        if raw.dtype != np.uint8 or raw.ndim != 1 or ends.ndim != 1:
            raise ValueError("the string arrays do not fit together")
        if ends.shape[0] and int(ends[-1]) != raw.shape[0]:
            raise ValueError("the string arrays do not fit together")
        if ends.shape[0] and (int(ends[0]) < 0 or not (np.diff(ends) >= 0).all()):
            raise ValueError("the string ends are not in order")
        self._raw = raw
        self._ends = np.asarray(ends, dtype=np.int64)
        self._order: np.ndarray | None = None
        self._sorted: np.ndarray | None = None
        if index is not None:
            self._order, self._sorted = _checked_index(index, len(self))
        self.finds = 0
        """How many :meth:`find` calls were made (for owners that unpack past a budget)."""

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(raw, ends)`` as given."""
        return self._raw, self._ends

    def __len__(self) -> int:
        return int(self._ends.shape[0])

    def __getitem__(self, i: int) -> str:
        """String ``i`` (``IndexError`` outside ``[0, len)``; no negative indexes)."""
        if not 0 <= i < self._ends.shape[0]:
            raise IndexError(f"row {i} is not in a column of {self._ends.shape[0]}")
        start = int(self._ends[i - 1]) if i else 0
        return self._raw[start : int(self._ends[i])].tobytes().decode("utf-8", "surrogatepass")

    def take(self, rows: np.ndarray) -> list[str]:
        """Strings ``rows`` (``int64``, each in ``[0, len)``: unchecked), in that order: one gather
        of their ends for all of them."""
        stops = self._ends[rows].tolist()
        before = self._ends[rows - 1].tolist()  # row 0 starts at 0, not at the wrapped ends[-1]
        view = np.ascontiguousarray(self._raw).data  # a memoryview of the bytes
        return [
            str(view[a if row else 0 : b], "utf-8", "surrogatepass")
            for row, a, b in zip(rows.tolist(), before, stops, strict=True)
        ]

    def sort_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(order, keys)``: the rows by their 64-bit key (:data:`KEY_SCHEME`: the string's length,
        first and last 8 bytes, mixed), and those keys in that order (``int64``, ``uint64``). Made
        by the first call (or find) unless given: O(n log n), ~0.3 s at 1,000,000 strings."""
        if self._order is None or self._sorted is None:
            starts = np.concatenate(([0], self._ends[:-1])) if len(self) else self._ends
            keys = _keys(self._raw, starts, self._ends - starts)
            order = np.argsort(keys).astype(np.int64, copy=False)
            self._order, self._sorted = order, keys[order]
        return self._order, self._sorted

    def _starts(self, rows: np.ndarray) -> np.ndarray:
        """Where each of ``rows`` starts in the raw bytes."""
        before = self._ends[np.maximum(rows - 1, 0)]
        starts: np.ndarray = np.where(rows > 0, before, 0)
        return starts

    def find(self, value: str) -> np.ndarray:
        """Every index holding ``value``, ascending (``int64``). Without a given index the first
        call makes :meth:`sort_index`; a find is a binary search of it plus a byte comparison of
        the strings sharing the key."""
        self.finds += 1
        order, sorted_keys = self.sort_index()
        encoded = value.encode("utf-8", "surrogatepass")
        key = np.uint64(_key(encoded))
        lo = int(np.searchsorted(sorted_keys, key, "left"))
        hi = int(np.searchsorted(sorted_keys, key, "right"))
        rows = np.sort(order[lo:hi])
        if rows.shape[0] == 1:  # the usual case: one string has the key
            row = int(rows[0])
            start = int(self._ends[row - 1]) if row else 0
            same = self._raw[start : int(self._ends[row])].tobytes() == encoded
            return rows if same else rows[:0]
        starts = self._starts(rows)
        same_length = self._ends[rows] - starts == len(encoded)
        rows, starts = np.asarray(rows[same_length]), starts[same_length]
        needle = np.frombuffer(encoded, dtype=np.uint8)
        for j in range(needle.shape[0]):  # several strings share the key: compare them column-wise
            if not rows.shape[0]:
                break
            keep = self._raw[starts + j] == needle[j]
            rows, starts = rows[keep], starts[keep]
        return rows

    def find_each(self, values: list[str]) -> list[list[int]]:
        """:meth:`find` of each of ``values``, as lists: the same rows, with the keys of all
        looked up in one search of the sort index (counted as ``len(values)`` finds)."""
        order, sorted_keys = self.sort_index()
        encoded = [value.encode("utf-8", "surrogatepass") for value in values]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        keys = _keys(np.frombuffer(b"".join(encoded), dtype=np.uint8), np.cumsum(lengths) - lengths, lengths)
        lo = np.searchsorted(sorted_keys, keys, "left")
        hi = np.searchsorted(sorted_keys, keys, "right")
        one = hi - lo == 1  # the usual case: one string has the key; compare its bytes
        rows = order[np.where(one, lo, 0)] if order.shape[0] else lo
        stops = self._ends[rows].tolist() if order.shape[0] else []
        starts = self._starts(rows).tolist() if order.shape[0] else []
        view = np.ascontiguousarray(self._raw).data
        out: list[list[int]] = []
        for i, (single, enc) in enumerate(zip(one.tolist(), encoded, strict=True)):
            if single:
                out.append([int(rows[i])] if view[starts[i] : stops[i]] == enc else [])
            else:  # no string, or several, with the key
                out.append(self.find(values[i]).tolist())
                self.finds -= 1
        self.finds += len(values)
        return out

    def bisect(self, value: str) -> int | None:
        """The index of ``value`` in a column whose strings are in strictly ascending order of
        their UTF-8 bytes (as ``sorted`` orders ``str``; the caller's promise, unchecked: out of
        order, a find may miss), or None: a binary search, O(log n) slices, nothing decoded and no
        sort index made."""
        encoded = value.encode("utf-8", "surrogatepass")
        raw, ends = self._raw, self._ends
        lo, hi = 0, int(ends.shape[0])
        while lo < hi:
            mid = (lo + hi) // 2
            here = raw[int(ends[mid - 1]) if mid else 0 : int(ends[mid])].tobytes()
            if here < encoded:
                lo = mid + 1
            elif here > encoded:
                hi = mid
            else:
                return mid
        return None

    def tolist(self) -> list[str]:
        """Every string, decoded (ASCII columns on the fast path)."""
        blob, stops = self._raw.tobytes(), self._ends.tolist()
        starts = [0, *stops[:-1]] if stops else []
        if blob.isascii():  # byte offsets are character offsets
            text = blob.decode("ascii")
            return [text[a:b] for a, b in zip(starts, stops, strict=True)]
        return [blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, stops, strict=True)]


class PackedPostings:
    """The postings of a restored keyword index, left packed: ``terms`` in ascending order (of
    their UTF-8 bytes; looked up by :meth:`PackedStrings.bisect`, never decoded into a dict), term
    ``t``'s rows and term frequencies ``rows[offsets[t]:offsets[t + 1]]`` and ``tfs[...]``. Never
    changed once made (a write moves a term's postings out, into the index's own): the answer of
    :meth:`get` for the last :data:`FOUND_KEPT` terms asked is kept."""

    def __init__(self, terms: PackedStrings, offsets: np.ndarray, rows: np.ndarray, tfs: np.ndarray) -> None:
        self.terms = terms
        self._offsets, self._rows, self._tfs = offsets, rows, tfs
        self._found: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows and term frequencies of ``term`` (views of the packed arrays), or None when it has
        none."""
        if term in self._found:
            return self._found[term]
        t = self.terms.bisect(term)
        found = None
        if t is not None:
            a, z = int(self._offsets[t]), int(self._offsets[t + 1])
            found = self._rows[a:z], self._tfs[a:z]
        if len(self._found) >= FOUND_KEPT:
            self._found.clear()
        self._found[term] = found
        return found


FOUND_KEPT = 4096
"""How many terms' answers a :class:`PackedPostings` keeps (all dropped when full)."""


class IdColumn:
    """The id of each row of a growing table: a :class:`PackedStrings` base (rows ``[0, base)``)
    plus a list of the rows appended since, or one list once :meth:`unpack` ran (or when made
    without a base). Indexing, ``len``, ``append`` and iteration behave as on a list of the ids.

    Unpacking happens in place, so every holder of the column sees it."""

    __slots__ = ("_base", "_list", "_tail", "_tail_rows")

    def __init__(self, base: PackedStrings | None = None) -> None:
        self._base = base
        self._list: list[str] | None = [] if base is None else None
        self._tail: list[str] = []
        self._tail_rows: dict[str, list[int]] = {}

    @classmethod
    def of(cls, ids: list[str]) -> IdColumn:
        """A column of ``ids`` (the list itself, not a copy)."""
        column = cls()
        column._list = ids
        return column

    @property
    def packed(self) -> bool:
        """Whether the base is still packed (not decoded into a list)."""
        return self._list is None

    def __len__(self) -> int:
        if self._list is not None:
            return len(self._list)
        assert self._base is not None
        return len(self._base) + len(self._tail)

    def __getitem__(self, i: int) -> str:
        if self._list is not None:
            return self._list[i]
        assert self._base is not None
        n = len(self._base)
        return self._base[i] if i < n else self._tail[i - n]

    def __iter__(self) -> Iterator[str]:
        return iter(self.unpack())

    def append(self, id_: str) -> None:
        if self._list is not None:
            self._list.append(id_)
            return
        assert self._base is not None
        self._tail_rows.setdefault(id_, []).append(len(self._base) + len(self._tail))
        self._tail.append(id_)

    def extend(self, ids: Iterable[str]) -> None:
        if self._list is not None:
            self._list.extend(ids)
            return
        for id_ in ids:
            self.append(id_)

    def find(self, id_: str) -> np.ndarray:
        """Every row holding ``id_``, ascending. Packed: a search of the base (see
        :meth:`PackedStrings.find`) plus the appended rows; unpacked: O(rows), so unpacked owners
        keep their own dict instead."""
        if self._list is None:
            assert self._base is not None
            found = self._base.find(id_)
            tail = self._tail_rows.get(id_)
            return found if tail is None else np.concatenate((found, np.asarray(tail, np.int64)))
        return np.asarray([r for r, x in enumerate(self._list) if x == id_], dtype=np.int64)

    def find_each(self, ids: list[str]) -> list[list[int]]:
        """:meth:`find` of each of ``ids``, as lists (packed: one
        :meth:`PackedStrings.find_each` of the base)."""
        if self._list is None:
            assert self._base is not None
            found = self._base.find_each(ids)
            tails = self._tail_rows
            return [at + tails[i] if i in tails else at for i, at in zip(ids, found, strict=True)]
        return [self.find(id_).tolist() for id_ in ids]

    def unpack(self) -> list[str]:
        """The ids as one list, decoded once (the column then stays unpacked)."""
        if self._list is None:
            assert self._base is not None
            self._list = [*self._base.tolist(), *self._tail]
            self._base, self._tail, self._tail_rows = None, [], {}
        return self._list

    def pack(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids as ``(raw, ends)`` (:func:`coniti.derived.pack_strings`); a still-packed base is
        reused, not re-encoded."""
        tail = self._tail if self._list is None else self._list
        encoded = [i.encode("utf-8", "surrogatepass") for i in tail]
        raw = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        ends = np.cumsum(np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded)))
        if self._list is not None:
            return raw, ends.astype(np.int64)
        assert self._base is not None
        base_raw, base_ends = self._base.arrays
        offset = int(base_ends[-1]) if base_ends.shape[0] else 0
        return np.concatenate((base_raw, raw)), np.concatenate((base_ends, ends + offset)).astype(np.int64)

    def pack_indexed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`pack` and the :meth:`PackedStrings.sort_index` of the packed strings: the base's
        (made once, or as given) while nothing was appended to it, else made now."""
        if self._list is None and not self._tail:
            assert self._base is not None
            return (*self._base.arrays, *self._base.sort_index())
        raw, ends = self.pack()
        return raw, ends, *PackedStrings(raw, ends).sort_index()


def _checked_index(index: tuple[np.ndarray, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``index`` if it can be the :meth:`PackedStrings.sort_index` of ``n`` strings (lengths,
    dtypes, order in range, keys ascending), else ``ValueError``."""
    order, keys = (np.asarray(a) for a in index)
    if order.dtype != np.int64 or keys.dtype != np.uint64 or order.shape != (n,) or keys.shape != (n,):
        raise ValueError("the sort index does not fit the strings")
    if n and (int(order.min()) < 0 or int(order.max()) >= n or not (keys[1:] >= keys[:-1]).all()):
        raise ValueError("the sort index is not in order")
    return order, keys


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))


_MASK = (1 << 64) - 1


def _key(encoded: bytes) -> int:
    """:func:`_keys` of one string, in plain integers (numpy on 1-element arrays costs more)."""
    first = int.from_bytes((encoded + bytes(8))[:8], sys.byteorder)
    last = int.from_bytes((bytes(8) + encoded)[-8:], sys.byteorder)
    m0, m1, m2 = (int(m) for m in _MIX)
    return ((first * m0) & _MASK) ^ ((last * m1) & _MASK) ^ ((len(encoded) * m2) & _MASK)


def _keys(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit key of each string ``raw[starts[i] : starts[i] + lengths[i]]``: its length and its
    first and last 8 bytes (zero-padded), mixed. Equal strings have equal keys."""
    n = starts.shape[0]
    size = int(lengths[0]) if n else 0
    if n and size >= 8 and raw.shape[0] == n * size and (lengths == size).all():
        table = raw.reshape(n, size)  # one length (ids of one scheme): columns, no gather
        first, last = np.ascontiguousarray(table[:, :8]), np.ascontiguousarray(table[:, size - 8 :])
    else:
        span = np.arange(8, dtype=np.int64)
        padded = np.concatenate((raw, np.zeros(8, dtype=np.uint8)))
        first = np.where(span < lengths[:, None], padded[starts[:, None] + span], 0).astype(np.uint8)
        last_at = (starts + lengths - 8)[:, None] + span
        last = np.where(last_at >= starts[:, None], padded[np.maximum(last_at, 0)], 0).astype(np.uint8)
    with np.errstate(over="ignore"):
        keys: np.ndarray = (
            first.view(np.uint64).reshape(-1) * _MIX[0]
            ^ last.view(np.uint64).reshape(-1) * _MIX[1]
            ^ lengths.astype(np.uint64) * _MIX[2]
        )
    return keys
