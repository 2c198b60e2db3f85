"""The keyword index: BM25 over tokenised note text, derived from memory like the structures.

**Tokenisation** (:func:`tokenize`, the same for notes and queries):

* the text is NFKC-normalised and case-folded (``str.casefold``: ``"Straße"`` matches ``"STRASSE"``);
* tokens are the maximal runs of word characters (``\\w``: letters, digits, underscore, in every
  script); everything else separates them, so ``"INV-2024-0042"`` is ``inv``, ``2024``, ``0042``;
* inside a run, characters of scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao,
  Khmer, Myanmar: :data:`NO_SPACE`) become overlapping character bigrams (``"苏黎世"`` is ``苏黎``,
  ``黎世``); a lone such character is its own token. The rest of the run stays one token.

A single-character query in such a script therefore matches only notes holding that character
alone, not inside a longer run: a documented limit of bigram tokenisation.

**Scoring** (Okapi BM25, the Lucene form): for the distinct query terms ``t`` and a note ``d`` of
``|d|`` tokens, over the notes visible to the search (``N`` of them, mean length ``avgdl``)::

    idf(t)     = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d)   = sum_t idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

``k1`` (term-frequency saturation, default 1.2) and ``b`` (length normalisation, default 0.75) are
the index's options. Only notes holding at least one query term are hits, ordered like structure
hits: score descending, then timestamp descending, then id ascending (one total order). Scores are
float64 sums in query-term order, so they reproduce exactly.

**Rows and sequence masking.** Every note is one row carrying ``born`` (the sequence number that
wrote it) and ``died`` (the one that ended it; :data:`ALIVE` while live). :meth:`KeywordIndex.search`
with ``as_of=S`` sees the rows with ``born <= S < died``, and ``N``, ``avgdl`` and ``df`` are taken
over those rows only, so a past search scores as a fresh index of that moment would.
:meth:`KeywordIndex.remove` ends rows (it does not drop them); :meth:`KeywordIndex.purge` hides
every row of an id from every point (erasure); :meth:`KeywordIndex.compact` drops rows that ended at
or before a horizon.

**Conversation windows and questions** (:mod:`coniti.windows`). With ``context_weight > 0`` a row
of a conversation thread (:func:`thread_of`) is scored with its neighbours' tokens (its window); a
row without a thread is its own window. :func:`question_text` takes out a question's function words.

**Several indexes as one corpus.** A search over several namespaces (one index each) scores every
note with the statistics of their union: :meth:`KeywordIndex.corpus` gives one index's ``N``, total
length and ``df`` of the query terms, :meth:`Corpus.merge` adds them up, and ``search(...,
corpus=...)`` scores with the merged figures, so scores are comparable across the namespaces.

**State.** :meth:`KeywordIndex.state` is a dict of numpy arrays and ints (no pickled objects),
tagged with the sequence number it reflects (:attr:`KeywordIndex.seq`);
:meth:`KeywordIndex.from_state` rebuilds an equal index and refuses inconsistent arrays. It also
takes the state with every value as a numpy array (scalars as 0-d arrays), as an on-disk snapshot
of named arrays gives it back. The state carries the ids' sort index (``id_order``, ``id_keys``,
``id_key_scheme``: :meth:`coniti.packed.PackedStrings.sort_index`), so a restored index looks ids up
without sorting them first; a state without it (or of another key scheme) restores all the same.
Its terms are in ascending order (of their UTF-8 bytes, as ``sorted`` orders them): a restored
index keeps them packed and finds a query's or a write's terms by binary search
(:meth:`coniti.packed.PackedStrings.bisect`); a term's postings move into a growable list when a
write first touches it, and every term is decoded only by :meth:`state` or :meth:`compact`. That
order is not checked at restore (a snapshot's checksums vouch for the bytes written): out of order,
a lookup may miss a term.
"""

from __future__ import annotations

import itertools
import math
import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coniti import windows as conversation
from coniti.actor import TimeRange
from coniti.errors import ContractError
from coniti.keyword_tokens import NO_SPACE, tokenize, tokens_of
from coniti.packed import (
    LOOKUP_BUDGET,
    IdColumn,
    PackedPostings,
    PackedStrings,
    indexed,
    scheme_array,
)
from coniti.structure import StructureHit
from coniti.windows import QUESTION_WORDS, THREAD_KEY, question_text, thread_of

__all__ = [
    "ALIVE", "NO_SPACE", "QUESTION_WORDS", "THREAD_KEY", "Corpus", "KeywordIndex", "question_text",
    "thread_of", "tokenize", "tokens_of",
]  # fmt: skip

ALIVE = 2**63 - 1
"""The ``died`` value of a live row."""

_STATE_VERSION = 1
_PENDING_LIMIT = 1 << 20
"""Pending posting entries (term, row) beyond which an add moves them into the postings (at most
about 24 MiB of pending arrays)."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """The BM25 statistics of a set of notes for some terms: ``n`` notes, ``length`` tokens in
    all, ``df[term]`` notes holding the term."""

    n: int
    length: float
    df: dict[str, int]

    @staticmethod
    def merge(parts: Iterable[Corpus]) -> Corpus:
        """The statistics of the union of disjoint note sets."""
        n = 0
        length = 0.0
        df: dict[str, int] = {}
        for part in parts:
            n += part.n
            length += part.length
            for term, count in part.df.items():
                df[term] = df.get(term, 0) + count
        return Corpus(n, length, df)


class KeywordIndex:
    """BM25 postings over note rows with born/died sequence numbers (module docstring).

    Not thread-safe: the engine serialises access, as it does for structures.
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        context_before: int = 3,
        context_after: int = 2,
        context_weight: float = 0.5,
    ) -> None:
        self.k1 = conversation.check_param("k1", k1, 0.0, None)
        self.b = conversation.check_param("b", b, 0.0, 1.0)
        self.context_before = conversation.check_count("context_before", context_before)
        self.context_after = conversation.check_count("context_after", context_after)
        self.context_weight = conversation.check_param("context_weight", context_weight, 0.0, 1.0)
        self.seq = 0
        """The sequence number this index reflects (the caller advances it; see :meth:`state`)."""
        self._ids = IdColumn()
        self._born = array("q")
        self._died = array("q")
        self._length = array("l")
        self._time = array("d")
        self._expires = array("d")
        self._expiring = 0
        """How many rows have a finite expiry: a search masks by expiry only when some row has one."""
        """Each row's expiry (epoch seconds; inf: none): an expired row counts for nothing, as
        memory hides an expired record from every read."""
        self._row_of: dict[str, int] | None = {}
        """The row of each live id; None while the ids of a restored state are still packed
        (:meth:`_live_row` then searches them)."""
        self._lookups = 0
        """Searches of the packed ids so far (past :data:`~coniti.packed.LOOKUP_BUDGET`: unpack)."""
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        self._packed: PackedPostings | None = None
        """The postings of a restored state, still packed, until a write first touches a term and
        moves its postings to ``_postings``, which is read first (a thawed term's packed ones are
        stale); every term is decoded only by :meth:`_thaw_all`."""
        self._term_number: dict[str, int] = {}
        """Every term added since this index was made (or cleared), numbered in order of first use."""
        self._terms: list[str] = []
        """The terms by number."""
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        """Postings added but not yet in ``_postings``: per :meth:`add`, ``(term numbers, rows,
        term frequencies)`` sorted by term, then row. Every read of postings first moves them there
        (:meth:`_flush`), all at once: one append per distinct term of many batches, not per term
        of each batch."""
        self._pending_size = 0
        self._live = 0
        self._ends = 0
        """Rows ended, retracted or purged so far (as-of views re-index the rows ended since their
        seq when it or the row count changed)."""
        self._seen: tuple[tuple[int | None, int, int], np.ndarray, int, int] | None = None
        """The last :meth:`_visible` answer, ``(key, mask, rows, total length)``."""
        self._thread = array("q")
        """Each row's thread number (-1: none); :attr:`_thread_names` by number."""
        self._thread_names: list[str] = []
        self._thread_number: dict[str, int] = {}
        self._threaded = 0
        """Rows with a thread: windows are worked out only when some row has one."""
        self._windows: tuple[tuple[int | None, int, int], conversation.Windows | None] | None = None
        """The last :meth:`_context` answer, keyed like :attr:`_seen`."""

    @property
    def options(self) -> dict[str, float | int]:
        """The constructor options (``KeywordIndex(**index.options)`` is an empty twin)."""
        return {
            "k1": self.k1, "b": self.b, "context_before": self.context_before,
            "context_after": self.context_after, "context_weight": self.context_weight,
        }  # fmt: skip

    def spawn(self) -> KeywordIndex:
        """A new, empty index with the same options."""
        return KeywordIndex(**self.options)  # type: ignore[arg-type]

    def __len__(self) -> int:
        """The live rows."""
        return self._live

    def __contains__(self, id_: object) -> bool:
        return isinstance(id_, str) and self._live_row(id_) is not None

    def timestamp(self, id_: str) -> float:
        """The timestamp of the live row of ``id_`` (KeyError if none)."""
        row = self._live_row(id_)
        if row is None:
            raise KeyError(id_)
        return self._time[row]

    @property
    def packed(self) -> bool:
        """Whether the ids of a restored state are still packed: until more than
        :data:`~coniti.packed.LOOKUP_BUDGET` lookups (or a write of that many ids, or a compaction),
        a restored index answers and accepts writes without decoding its ids into a list and a dict
        (see :mod:`coniti.packed`). Postings stay packed, per term, until a write touches the term."""
        return self._row_of is None

    def _live_row(self, id_: str) -> int | None:
        """The live row of ``id_``, or None: from the dict, or, while the ids are packed, by a
        search of them (the row whose ``died`` is :data:`ALIVE`; there is at most one)."""
        if self._row_of is not None:
            return self._row_of.get(id_)
        if not self._searchable(1):
            return self._unpack().get(id_)
        return self._find_live(id_)

    def _find_live(self, id_: str) -> int | None:
        """The live row of ``id_`` by a search of the packed ids (uncounted)."""
        for row in self._ids.find(id_).tolist():
            if self._died[row] == ALIVE:
                return int(row)
        return None

    def _end_live(self, id_: object) -> int | None:
        """The live row of ``id_`` taken out of the dict (the caller ends it), or None."""
        row = self._live_row(id_) if isinstance(id_, str) else None
        if row is not None and self._row_of is not None:
            del self._row_of[id_]  # type: ignore[arg-type]
        return row

    def _searchable(self, lookups: int) -> bool:
        """Whether ``lookups`` more searches of the packed ids are worth it (counted if so); if
        not, the ids are unpacked (no more searches: dict lookups)."""
        if self._row_of is not None:
            return False
        if self._ids.packed and self._lookups + lookups <= LOOKUP_BUDGET:
            self._lookups += lookups
            return True
        self._unpack()
        return False

    def _unpack(self) -> dict[str, int]:
        """Decode packed ids into the list and the dict of live rows (done once). Raises
        :class:`ContractError` if a restored state holds two live rows of one id."""
        if self._row_of is None:
            ids = self._ids.unpack()
            died = np.frombuffer(self._died, dtype=np.int64) if ids else np.empty(0, np.int64)
            live = np.flatnonzero(died == ALIVE).tolist()
            row_of = {ids[r]: r for r in live}
            if len(row_of) != len(live):
                raise ContractError("keyword index state: two live rows of one id")
            self._row_of = row_of
        return self._row_of

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows and term frequencies of ``term`` (int64 arrays), or None."""
        if self._pending:
            self._flush()
        posting = self._postings.get(term)
        if posting is not None:
            return np.frombuffer(posting[0], dtype=np.int_), np.frombuffer(posting[1], dtype=np.int_)
        return None if self._packed is None else self._packed.get(term)

    def _thaw(self, term: str) -> tuple[array[int], array[int]]:
        """The growable postings of ``term`` (which is not in ``_postings``: a new term, or one
        whose postings are still packed), moved out of the packed ones."""
        packed = None if self._packed is None else self._packed.get(term)
        out: tuple[array[int], array[int]] = (array("l"), array("l"))
        if packed is not None:
            rows, tfs = packed
            out = (array("l", rows.astype(np.int_).tobytes()), array("l", tfs.astype(np.int_).tobytes()))
        self._postings[term] = out
        return out

    def _thaw_all(self) -> None:
        """Every posting into ``_postings`` (the packed terms decoded once, then dropped)."""
        self._flush()
        if self._packed is not None:
            for term in self._packed.terms.tolist():
                if term not in self._postings:
                    self._thaw(term)
        self._packed = None

    @property
    def threaded(self) -> bool:
        """Whether some row (live or ended) belongs to a thread: the index holds conversation turns."""
        return self._threaded > 0

    @property
    def rows(self) -> int:
        """Every row held, live or ended (not yet compacted)."""
        return len(self._ids)

    # -- updates -------------------------------------------------------------------------------

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        timestamps: Sequence[float] | np.ndarray,
        born: Sequence[int] | np.ndarray | int = 0,
        expires: Sequence[float | None] | None = None,
        *,
        tokens: Sequence[Sequence[str]] | None = None,
        threads: Sequence[str | None] | None = None,
    ) -> None:
        """Add live rows: ``ids[i]`` with ``texts[i]`` at ``timestamps[i]``, written by sequence
        number ``born[i]`` (one int: the same for all). All or nothing: raises
        :class:`ContractError` for an id already live here or repeated, or mismatched lengths.

        ``tokens``: ``tokenize(texts[i])`` for each text, when the caller has them (see
        :func:`tokens_of`); they are not checked against the texts. ``threads``: each row's thread
        (:func:`thread_of` of its note's metadata; None: none), for conversation windows."""
        n = len(ids)
        births = array("q", [born]) * n if isinstance(born, int) else _column("q", born)
        ends = array("d", [math.inf]) * n
        expiring = 0
        if expires is not None:
            ends = array("d", [math.inf if x is None else float(x) for x in expires])
            expiring = sum(end != math.inf for end in ends)
        times = _column("d", timestamps)
        per_text = [tokenize(text) for text in texts] if tokens is None else list(tokens)
        thread_of_row = None if threads is None else list(threads)
        if (
            len(texts) != n or len(times) != n or len(births) != n or len(ends) != n
            or len(per_text) != n or (thread_of_row is not None and len(thread_of_row) != n)
        ):
            raise ContractError(
                f"ids, texts, timestamps, born and threads must have one entry per note ({n} ids)"
            )
        searched = self._searchable(n)  # packed ids: a few are searched, many unpack them first
        row_of = self._row_of
        if searched or row_of is None or len(set(ids)) != n or not row_of.keys().isdisjoint(ids):
            seen: set[str] = set()
            for id_ in ids:
                live = self._find_live(id_) if searched else row_of.get(id_)  # type: ignore[union-attr]
                if id_ in seen or live is not None:
                    raise ContractError(f"id {id_!r} is already in the keyword index")
                seen.add(id_)
        first = len(self._ids)
        self._ids.extend(ids)
        self._born.extend(births)
        self._died.extend(array("q", [ALIVE]) * n)
        self._length.extend(array("l", map(len, per_text)))
        self._time.extend(times)
        self._expires.extend(ends)
        self._expiring += expiring
        if thread_of_row is None:  # no thread: code -1 for each row, as thread_code(None)
            self._thread.extend(array("q", [-1]) * n)
        else:
            numbers, names = self._thread_number, self._thread_names
            self._thread.extend(array("q", (conversation.thread_code(t, numbers, names) for t in thread_of_row)))
            self._threaded += sum(t is not None for t in thread_of_row)
        if row_of is not None:
            row_of.update(zip(ids, range(first, first + n), strict=True))
        self._post(first, per_text)
        self._live += n

    def _post(self, first: int, per_text: Sequence[Sequence[str]]) -> None:
        """Add rows ``first, first + 1, ...`` (their tokens ``per_text``) to the pending postings
        (numbered terms: new ones in order of first use); past :data:`_PENDING_LIMIT` entries,
        :meth:`_flush` them."""
        tokens = list(itertools.chain.from_iterable(per_text))
        if not tokens:
            return
        number = self._term_number
        try:  # the usual case: every term seen before
            term_of = np.fromiter(map(number.__getitem__, tokens), np.int64, len(tokens))
        except KeyError:
            terms = self._terms
            for token in dict.fromkeys(tokens):
                if token not in number:
                    number[token] = len(terms)
                    terms.append(token)
            term_of = np.fromiter(map(number.__getitem__, tokens), np.int64, len(tokens))
        n = len(per_text)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.fromiter(map(len, per_text), np.int64, n))
        keys, tfs = np.unique(term_of * n + rows, return_counts=True)  # by term, then row
        self._pending.append((keys // n, keys % n + first, tfs.astype(np.int64)))
        self._pending_size += len(keys)
        if self._pending_size > _PENDING_LIMIT:
            self._flush()

    def _flush(self) -> None:
        """Append the pending postings to ``_postings``: per term, its rows in order with their
        term frequencies (a term whose postings are still packed is thawed first)."""
        pending = self._pending
        if not pending:
            return
        if len(pending) == 1:
            terms, rows, tfs = pending[0]
        else:  # each part is sorted by term and the parts come in row order: a stable sort keeps it
            terms, rows, tfs = (np.concatenate(column) for column in zip(*pending, strict=True))
            order = np.argsort(terms, kind="stable")
            terms, rows, tfs = terms[order], rows[order], tfs[order]
        pending.clear()
        self._pending_size = 0
        starts = np.flatnonzero(np.concatenate(([True], terms[1:] != terms[:-1])))
        size = np.dtype(np.int_).itemsize
        row_bytes = rows.astype(np.int_).tobytes()
        tf_bytes = tfs.astype(np.int_).tobytes()
        bounds = (starts * size).tolist() + [len(row_bytes)]
        postings, names = self._postings, self._terms
        for t, a, b in zip(terms[starts].tolist(), bounds[:-1], bounds[1:], strict=True):
            term = names[t]
            posting = postings.get(term)
            if posting is None:
                posting = self._thaw(term)  # a new term, or one whose postings are still packed
            posting[0].frombytes(row_bytes[a:b])
            posting[1].frombytes(tf_bytes[a:b])

    def remove(self, ids: Iterable[str], died: int | Sequence[int] = ALIVE - 1) -> int:
        """End the live rows of ``ids`` at sequence number ``died`` (unknown ids are ignored; the
        default ends them for every search but as-of ones before it); returns how many ended.
        ``died`` a sequence as long as ``ids``: each id ends at its own (a batch of deletes, one
        event each), as one call a pair would.

        Ended rows stay for as-of searches until :meth:`compact` drops them."""
        ended = 0
        if isinstance(died, Sequence):
            pairs: list[tuple[str, int]] = list(zip(ids, died, strict=True))
        else:
            pairs = [(id_, died) for id_ in dict.fromkeys(ids)]
        named = [id_ for id_, _ in pairs]
        found: list[list[int]] | list[None] = [None] * len(named)  # None: the dict (_end_live)
        if self._row_of is None and named and all(isinstance(i, str) for i in named) and self._searchable(len(named)):
            found = self._ids.find_each(named)  # the rows, live or ended, of each: one search
        for (id_, at), rows in zip(pairs, found, strict=True):
            if rows is None:
                row = self._end_live(id_)
            else:  # a search of the packed ids, read now: an id met twice ends once
                row = next((r for r in rows if self._died[r] == ALIVE), None)
            if row is not None:
                self._died[row] = int(at)
                ended += 1
        self._live -= ended
        self._ends += ended
        return ended

    def retract(self, ids: Iterable[str]) -> int:
        """Take back the live rows of ``ids`` as if never added (visible at no point); their
        ended rows stay. Returns how many. Unknown ids are ignored."""
        retracted = 0
        for id_ in dict.fromkeys(ids):
            row = self._end_live(id_)
            if row is not None:
                self._died[row] = self._born[row]
                retracted += 1
        self._live -= retracted
        self._ends += retracted
        return retracted

    def purge(self, ids: Iterable[str]) -> int:
        """Make every row of ``ids`` (live or ended) invisible to every search, now and as of any
        point (an erasure): they end before they begin and the next :meth:`compact` drops them.
        Returns how many rows were purged. O(rows held); while the ids are packed, a search per id."""
        wanted = {i for i in ids if isinstance(i, str)}
        if self._searchable(len(wanted)):
            rows = sorted(r for id_ in wanted for r in self._ids.find(id_).tolist())
            candidates = [(r, self._ids[r]) for r in rows]
        else:
            candidates = list(enumerate(self._ids))
        purged = 0
        for row, id_ in candidates:
            if id_ in wanted and not (self._born[row] == 0 and self._died[row] == 0):
                if self._died[row] == ALIVE:
                    self._live -= 1
                    if self._row_of is not None:
                        self._row_of.pop(id_, None)
                self._born[row] = 0
                self._died[row] = 0
                purged += 1
        self._ends += purged
        return purged

    def compact(self, horizon: int | None = None) -> int:
        """Drop the rows that ended at or before ``horizon`` (None: every ended row); returns how
        many. As-of searches before ``horizon`` are then no longer exact."""
        limit = ALIVE - 1 if horizon is None else horizon
        keep = [r for r in range(len(self._ids)) if self._died[r] > limit]
        dropped = len(self._ids) - len(keep)
        if not dropped:
            return 0
        self._unpack()
        self._thaw_all()
        remap = np.full(len(self._ids), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        old_ids = self._ids.unpack()
        self._ids = IdColumn.of([old_ids[r] for r in keep])
        self._born = array("q", (self._born[r] for r in keep))
        self._died = array("q", (self._died[r] for r in keep))
        self._length = array("l", (self._length[r] for r in keep))
        self._time = array("d", (self._time[r] for r in keep))
        self._expires = array("d", (self._expires[r] for r in keep))
        self._expiring = sum(end != math.inf for end in self._expires)
        self._thread = array("q", (self._thread[r] for r in keep))
        self._threaded = sum(t >= 0 for t in self._thread)
        self._seen = None
        self._windows = None
        self._row_of = {self._ids[r]: r for r in range(len(self._ids)) if self._died[r] == ALIVE}
        postings: dict[str, tuple[array[int], array[int]]] = {}
        for term, (rows, tfs) in self._postings.items():
            old = np.frombuffer(rows, dtype=np.int_) if rows else np.empty(0, dtype=np.int_)
            new = remap[old]
            kept = new >= 0
            if kept.any():
                postings[term] = (
                    array("l", new[kept].astype(np.int_).tobytes()),
                    array("l", np.frombuffer(tfs, dtype=np.int_)[kept].tobytes()),
                )
        self._postings = postings
        return dropped

    def clear(self) -> None:
        """Drop every row (``seq`` is kept)."""
        seq = self.seq
        self.__init__(**self.options)  # type: ignore[misc]
        self.seq = seq

    # -- search --------------------------------------------------------------------------------

    def _clock(self) -> float:
        """The time expiry is judged by: now (a past view: the recorded time of its point)."""
        return time.time()

    def _mask(self, as_of: int | None) -> np.ndarray:
        died = np.frombuffer(self._died, dtype=np.int64) if self._ids else np.empty(0, np.int64)
        if as_of is None:
            visible: np.ndarray = died == ALIVE
        else:
            born = np.frombuffer(self._born, dtype=np.int64)
            visible = (born <= as_of) & (died > as_of)
        if self._expiring:  # an expired row counts for nothing, as memory hides it (FORMAT §11.4)
            visible &= np.frombuffer(self._expires, dtype=np.float64) > self._clock()
        return visible

    def _changes(self) -> int:
        """Rows ended, retracted or purged so far (with the row count: the state's version)."""
        return self._ends

    def _visible(self, as_of: int | None) -> tuple[np.ndarray, int, int]:
        """``(mask, rows, total length)`` of the rows visible now (or as of ``as_of``); kept until
        a row is added or ended, unless rows expire (their mask depends on the clock)."""
        key = (as_of, len(self._ids), self._changes())
        seen = self._seen
        if seen is not None and seen[0] == key and not self._expiring:
            return seen[1], seen[2], seen[3]
        visible = self._mask(as_of)
        lengths = np.frombuffer(self._length, dtype=np.int_) if self._ids else np.empty(0, np.int_)
        own, total = int(np.count_nonzero(visible)), int(lengths[visible].sum())
        self._seen = (key, visible, own, total)
        return visible, own, total

    def _context(self, as_of: int | None) -> conversation.Windows | None:
        """The conversation windows of the rows visible now (or as of ``as_of``), None when no
        row has a window (:mod:`coniti.windows`); kept until a row is added or ended."""
        visible, _, _ = self._visible(as_of)
        assert self._seen is not None  # set by _visible
        key = self._seen[0]
        if self._windows is not None and self._windows[0] == key and not self._expiring:
            return self._windows[1]
        windows = None
        if self.context_weight and self._threaded:
            windows = conversation.Windows.of(
                visible, np.frombuffer(self._thread, dtype=np.int64), np.frombuffer(self._time, dtype=np.float64),
                np.frombuffer(self._length, dtype=np.int_), before=self.context_before,
                after=self.context_after, weight=self.context_weight,
            )  # fmt: skip
        self._windows = (key, windows)
        return windows

    def corpus(self, text: str, *, as_of: int | None = None) -> Corpus:
        """This index's statistics for the terms of ``text`` (rows visible now, or as of
        ``as_of``; with conversation windows, the windows' lengths and document frequencies)."""
        visible, own, total = self._visible(as_of)
        windows = self._context(as_of)
        df = {}
        for term in dict.fromkeys(tokenize(text)):
            posting = self._posting(term)
            if posting is not None:
                if windows is None:
                    df[term] = int(np.count_nonzero(visible[posting[0]]))
                else:
                    held, tfs = posting
                    df[term] = len(windows.tf(term, held, tfs, visible[held])[0])
        return Corpus(own, total if windows is None else windows.total, df)

    def ceiling(self, text: str, *, as_of: int | None = None, corpus: Corpus | None = None) -> float:
        """The BM25 ceiling of ``text``: ``sum_t idf(t) * (k1 + 1)`` over its distinct terms, the
        bound a note's score approaches as it repeats every term; a term no visible note holds
        counts with the idf of ``df = 0``. Statistics from ``corpus`` when given."""
        terms = list(dict.fromkeys(tokenize(text)))
        stats = self.corpus(text, as_of=as_of) if corpus is None else corpus
        n = stats.n
        return math.fsum(
            math.log(1.0 + (n - stats.df.get(t, 0) + 0.5) / (stats.df.get(t, 0) + 0.5)) * (self.k1 + 1.0)
            for t in terms
        )

    def _scores(
        self,
        terms: list[str],
        as_of: int | None,
        only: np.ndarray | None,
        corpus: Corpus | None = None,
        rows: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 scores and the mask of rows matching at least one term: per row of the index
        (dense; rows outside the mask ``only`` are neither scored nor matched), or, given ``rows``
        (row numbers), per entry of ``rows``. Only the rows a term's postings hold are touched
        (postings hold their rows in ascending order, so ``rows`` are found by binary search), in
        term order: the same floats either way."""
        size = len(self._ids) if rows is None else len(rows)
        scores = np.zeros(size, dtype=np.float64)
        matched = np.zeros(size, dtype=bool)
        visible, own, total = self._visible(as_of)
        if not own or not terms or not size:
            return scores, matched
        windows = self._context(as_of)
        if windows is not None:
            if corpus is None:
                n_visible, avgdl = own, windows.total / own
            else:
                n_visible, avgdl = corpus.n, corpus.length / corpus.n if corpus.n else 0.0
            return conversation.window_scores(
                terms, self._posting, visible, windows, only, rows, size, n_visible=n_visible, avgdl=avgdl,
                df=None if corpus is None else corpus.df, k1=self.k1, b=self.b,
            )  # fmt: skip
        lengths = np.frombuffer(self._length, dtype=np.int_)
        if corpus is None:
            n_visible, avgdl = own, float(total) / own
        else:
            n_visible, avgdl = corpus.n, corpus.length / corpus.n if corpus.n else 0.0
        k1, b = self.k1, self.b
        for term in terms:
            posting = self._posting(term)
            if posting is None:
                continue
            held, held_tfs = posting
            keep = visible[held]
            df = int(np.count_nonzero(keep))
            if not df:
                continue
            if corpus is not None:
                df = corpus.df.get(term, df)
            idf = math.log(1.0 + (n_visible - df + 0.5) / (df + 0.5))
            if rows is None:
                if only is not None:
                    keep &= only[held]
                target = at = held[keep]
                tfs = held_tfs[keep].astype(np.float64)
            else:
                place = np.minimum(np.searchsorted(held, rows), len(held) - 1)
                target = np.flatnonzero((held[place] == rows) & visible[rows])
                at = rows[target]
                tfs = held_tfs[place[target]].astype(np.float64)
            norm = k1 * (1.0 - b + b * lengths[at] / avgdl) if avgdl > 0 else k1 * (1.0 - b)
            scores[target] += idf * tfs * (k1 + 1.0) / (tfs + norm)
            matched[target] = True
        return scores, matched

    def search(
        self,
        text: str,
        *,
        k: int,
        time_range: TimeRange | None = None,
        as_of: int | None = None,
        corpus: Corpus | None = None,
    ) -> list[StructureHit]:
        """The ``k`` best rows for ``text`` by BM25 (module docstring), among the rows live now
        (or as of sequence number ``as_of``) whose timestamp is in ``time_range``; scored with
        ``corpus``'s statistics when given (it must include this index's)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ContractError(f"k must be a positive integer, got {k!r}")
        terms = list(dict.fromkeys(tokenize(text)))
        only = None
        if time_range is not None and len(self._ids):
            times = np.frombuffer(self._time, dtype=np.float64)
            start = -math.inf if time_range.start is None else time_range.start
            end = math.inf if time_range.end is None else time_range.end
            only = (times >= start) & (times < end)
        scores, matched = self._scores(terms, as_of, only, corpus)
        rows = np.flatnonzero(matched)
        if not len(rows):
            return []
        times = np.frombuffer(self._time, dtype=np.float64)
        ids = self._ids
        picked = rows
        if len(rows) > k:  # keep every row tied with the k-th score, then break ties exactly
            found = scores[rows]
            cut = found[np.argpartition(-found, k - 1)[k - 1]]
            picked = rows[found >= cut]
        order = sorted(picked.tolist(), key=lambda r: (-scores[r], -times[r], ids[r]))
        return [StructureHit(ids[r], float(scores[r])) for r in order[:k]]

    def score(
        self, text: str, ids: Iterable[str], *, as_of: int | None = None, corpus: Corpus | None = None
    ) -> dict[str, float]:
        """The BM25 score of each of ``ids`` that is live (0.0 when it holds no query term); ids
        not in the index are left out."""
        rows = {i: row for i in ids if (row := self._live_row(i)) is not None}
        return self._scored(text, rows, as_of, corpus)

    def _scored(self, text: str, rows: dict[str, int], as_of: int | None, corpus: Corpus | None) -> dict[str, float]:
        """:meth:`score` of the ids ``rows`` maps to their rows."""
        terms = list(dict.fromkeys(tokenize(text)))
        scores, _ = self._scores(terms, as_of, None, corpus, np.fromiter(rows.values(), np.int64, len(rows)))
        return dict(zip(rows, scores.tolist(), strict=True))

    def at(self, seq: int, *, clock: float | None = None) -> KeywordIndex:
        """A read-only view of this index as of sequence number ``seq``, judging expiry at
        ``clock`` (the recorded time of event ``seq``; None: now): it shares this index's
        rows (rows added later are born after ``seq``; an erasure purges them in place, so it shows
        in the view too) and every search, score and statistic masks by ``born <= seq < died``.
        O(1) to make; the first :meth:`score`, :meth:`timestamp` or ``len`` costs O(rows)."""
        return _AsOf(self, seq, clock)

    def rows_state(self) -> set[tuple[str, int, int, float, int]]:
        """Every row that counts as of some point, as ``(id, born, died, time, length)`` (purged
        and retracted rows, visible at no point, left out): what a fresh build must equal (an
        engine's ``verify``)."""
        return {
            (id_, int(born), int(died), float(t), int(n))
            for id_, born, died, t, n in zip(self._ids, self._born, self._died, self._time, self._length, strict=True)
            if born < died
        }

    # -- state ----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The index as plain arrays and ints, tagged with :attr:`seq` (module docstring)."""
        self._thaw_all()
        terms = sorted(self._postings)
        encoded = [t.encode("utf-8") for t in terms]
        offsets = np.cumsum([0, *(len(t) for t in encoded)], dtype=np.int64)
        rows = [np.frombuffer(self._postings[t][0], dtype=np.int_) for t in terms]
        tfs = [np.frombuffer(self._postings[t][1], dtype=np.int_) for t in terms]
        id_bytes, id_ends, id_order, id_keys = self._ids.pack_indexed()
        thread_encoded = [t.encode("utf-8") for t in self._thread_names]
        thread_bytes = b"".join(thread_encoded)
        return {
            "version": _STATE_VERSION,
            "seq": self.seq,
            "k1": self.k1,
            "b": self.b,
            "ids": np.array(id_bytes, dtype=np.uint8),
            "id_offsets": np.concatenate(([0], id_ends)).astype(np.int64),
            "id_order": np.array(id_order, dtype=np.int64),
            "id_keys": np.array(id_keys, dtype=np.uint64),
            "id_key_scheme": scheme_array(),
            "born": np.frombuffer(self._born, dtype=np.int64).copy(),
            "died": np.frombuffer(self._died, dtype=np.int64).copy(),
            "length": np.frombuffer(self._length, dtype=np.int_).astype(np.int64),
            "time": np.frombuffer(self._time, dtype=np.float64).copy(),
            "expires": np.frombuffer(self._expires, dtype=np.float64).copy(),
            "context": np.array(
                [self.context_before, self.context_after, self.context_weight], dtype=np.float64
            ),
            "threads": np.frombuffer(self._thread, dtype=np.int64).copy(),
            "thread_names": np.frombuffer(thread_bytes, dtype=np.uint8).copy(),
            "thread_offsets": np.cumsum([0, *(len(t) for t in thread_encoded)], dtype=np.int64),
            "terms": np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(),
            "term_offsets": offsets,
            "posting_offsets": np.cumsum([0, *(len(r) for r in rows)], dtype=np.int64),
            "posting_rows": np.concatenate(rows).astype(np.int64) if rows else np.empty(0, np.int64),
            "posting_tfs": np.concatenate(tfs).astype(np.int64) if tfs else np.empty(0, np.int64),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> KeywordIndex:
        """The index :meth:`state` described; raises :class:`ContractError` naming the field when
        the state is not one this version wrote or its arrays disagree."""
        try:
            version = int(np.asarray(state["version"]))
            if version != _STATE_VERSION:
                raise ContractError(f"keyword index state version {version} is not {_STATE_VERSION}")
            context = np.asarray(state.get("context", [0, 0, 0.0]), dtype=np.float64)
            if context.shape != (3,):
                raise ContractError("keyword index state: context is not (before, after, weight)")
            index = cls(
                k1=float(np.asarray(state["k1"])), b=float(np.asarray(state["b"])),
                context_before=int(context[0]), context_after=int(context[1]),
                context_weight=float(context[2]),
            )  # fmt: skip
            index.seq = int(np.asarray(state["seq"]))
            id_bytes = np.asarray(state["ids"], dtype=np.uint8)
            id_off = np.asarray(state["id_offsets"], dtype=np.int64)
            born = np.asarray(state["born"], dtype=np.int64)
            died = np.asarray(state["died"], dtype=np.int64)
            length = np.asarray(state["length"], dtype=np.int64)
            times = np.asarray(state["time"], dtype=np.float64)
            n = len(id_off) - 1
            if (
                n < 0 or any(len(a) != n for a in (born, died, length, times))
                or id_off[0] != 0 or id_off[-1] != len(id_bytes)
            ):
                raise ContractError("keyword index state: ids, born, died, length and time disagree")
            term_bytes = np.asarray(state["terms"], dtype=np.uint8)
            term_off = np.asarray(state["term_offsets"], dtype=np.int64)
            post_off = np.asarray(state["posting_offsets"], dtype=np.int64)
            post_rows = np.asarray(state["posting_rows"], dtype=np.int64)
            post_tfs = np.asarray(state["posting_tfs"], dtype=np.int64)
            if (
                len(term_off) != len(post_off)
                or term_off[-1] != len(term_bytes)
                or post_off[-1] != len(post_rows)
                or len(post_rows) != len(post_tfs)
                or (len(post_rows) and (post_rows.min() < 0 or post_rows.max() >= n))
            ):
                raise ContractError("keyword index state: terms and postings disagree")
        except KeyError as exc:
            raise ContractError(f"keyword index state lacks {exc.args[0]!r}") from None
        try:  # with the ids' sort index, when written under this key scheme (older states: made later)
            ids = indexed(id_bytes, id_off[1:], state)
        except ValueError:
            try:
                PackedStrings(id_bytes, id_off[1:])
            except ValueError:
                raise ContractError("keyword index state: the id offsets are not in order") from None
            raise ContractError("keyword index state: id_order and id_keys do not fit the ids") from None
        index._ids = IdColumn(ids)
        index._born = array("q", born.tobytes())
        index._died = array("q", died.tobytes())
        index._length = array("l", length.astype(np.int_).tobytes())
        index._time = array("d", times.tobytes())
        expires = np.asarray(state.get("expires", np.full(n, math.inf)), dtype=np.float64)
        if len(expires) != n:
            raise ContractError("keyword index state: expires and ids disagree")
        index._expires = array("d", expires.tobytes())
        index._expiring = int(np.isfinite(expires).sum())
        threads = np.asarray(state.get("threads", np.full(n, -1)), dtype=np.int64)
        name_bytes = np.asarray(state.get("thread_names", np.empty(0)), dtype=np.uint8).tobytes()
        name_stops = np.asarray(state.get("thread_offsets", [0]), dtype=np.int64).tolist()
        try:
            names = [name_bytes[a:z].decode("utf-8") for a, z in zip(name_stops, name_stops[1:], strict=False)]
        except UnicodeDecodeError:
            raise ContractError("keyword index state: thread names are not UTF-8") from None
        if (
            len(threads) != n or (n and (threads.min() < -1 or threads.max() >= len(names)))
            or name_stops[-1] != len(name_bytes) or len(set(names)) != len(names)
        ):
            raise ContractError("keyword index state: threads and ids disagree")
        index._thread = array("q", threads.tobytes())
        index._thread_names = names
        index._thread_number = {name: i for i, name in enumerate(names)}
        index._threaded = int(np.count_nonzero(threads >= 0))
        index._row_of = None  # the ids stay packed until a write touches many (see _live_row)
        index._live = int(np.count_nonzero(died == ALIVE))
        unordered = len(post_off) > 1 and not (np.diff(post_off) >= 0).all()
        if term_off[0] != 0 or unordered:
            raise ContractError("keyword index state: terms and postings disagree")
        try:
            terms = PackedStrings(term_bytes, term_off[1:])
        except ValueError:
            raise ContractError("keyword index state: the term offsets are not in order") from None
        index._packed = PackedPostings(terms, post_off, post_rows, post_tfs)
        return index


def _column(code: str, values: Sequence[Any] | np.ndarray) -> array[Any]:
    """An ``array(code)`` of ``values`` (``"q"``: int64, ``"d"``: float64), from a numpy array by
    its bytes."""
    if isinstance(values, np.ndarray):
        return array(code, values.astype(np.int64 if code == "q" else np.float64).tobytes())
    return array(code, map(int, values) if code == "q" else map(float, values))


class _AsOf(KeywordIndex):
    """:meth:`KeywordIndex.at`: the rows of a live index as of one sequence number, read-only."""

    def __init__(self, base: KeywordIndex, seq: int, clock: float | None) -> None:
        self.__dict__.update(base.__dict__)  # shares the rows, does not copy them
        self._base = base
        self._as_of = int(seq)
        self._at = clock
        self.seq = self._as_of
        self._ended: tuple[tuple[int, int], dict[str, int]] | None = None
        self._count: int | None = None
        self._seen = None  # its masks are as of seq, not the base's
        self._windows = None

    def _clock(self) -> float:
        return time.time() if self._at is None else self._at

    def _flush(self) -> None:
        self._base._flush()  # into the base's postings (this view shares them, until a compaction)

    def _changes(self) -> int:
        return self._base._ends

    def _mask(self, as_of: int | None) -> np.ndarray:
        return super()._mask(self._as_of if as_of is None else min(as_of, self._as_of))

    def _row(self, id_: str) -> int | None:
        """The row of ``id_`` live as of the view's seq (expired or not: a row's facts), or None:
        its live row if born by then, else the row of it that ended since. The rows that ended
        after the seq (usually few) are indexed in O(rows) numpy work, again only after the base
        index added or ended rows; the live rows are not (the base finds them by id, from its dict
        or its packed ids)."""
        base = self._base
        row = base._live_row(id_)
        if row is not None and self._born[row] <= self._as_of:
            return row
        marker = (len(base._ids), base._ends)
        if self._ended is None or self._ended[0] != marker:
            born, died = self._lives()
            ended = np.flatnonzero((died != ALIVE) & (born <= self._as_of) & (died > self._as_of))
            self._ended = (marker, {self._ids[r]: r for r in ended.tolist()})
        row = self._ended[1].get(id_)
        if row is not None and self._born[row] <= self._as_of < self._died[row]:  # not purged since
            return row
        return None

    def _lives(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's born and died."""
        if not self._ids:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.frombuffer(self._born, dtype=np.int64), np.frombuffer(self._died, dtype=np.int64)

    def __len__(self) -> int:
        """The rows live as of the view's seq (expired or not)."""
        if self._count is None:
            born, died = self._lives()
            self._count = int(np.count_nonzero((born <= self._as_of) & (died > self._as_of)))
        return self._count

    def __contains__(self, id_: object) -> bool:
        return isinstance(id_, str) and self._row(id_) is not None

    def timestamp(self, id_: str) -> float:
        row = self._row(id_)
        if row is None:
            raise KeyError(id_)
        return self._time[row]

    def score(
        self, text: str, ids: Iterable[str], *, as_of: int | None = None, corpus: Corpus | None = None
    ) -> dict[str, float]:
        rows = {i: row for i in ids if (row := self._row(i)) is not None}
        return self._scored(text, rows, as_of, corpus)

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise ContractError(f"the keyword index as of seq {self._as_of} is read-only")

    add = remove = retract = purge = compact = clear = _refuse
