"""Conversation windows of the keyword index (:class:`coniti.keyword.KeywordIndex`), and the
question and thread helpers of conversational recall.

**Conversation windows.** A row may belong to a *thread* (:func:`thread_of`: the ``session`` value of
a note's metadata; a conversation turn carries it). With ``context_weight > 0`` a threaded row is
scored as its *window*: its own tokens plus ``context_weight`` times the tokens of the
``context_before`` rows before it and the ``context_after`` rows after it in its thread (threads
ordered by timestamp, then row; only rows visible to the search count), so a reply is found by the
words of the question it answers. Everything BM25 reads is then the window's: ``tf`` (fractional),
the length, ``avgdl`` and ``df`` (windows holding the term). A row without a thread is its own
window, so an index of plain notes scores exactly as without windows. The neighbours are worked
out at the first search after a change (a sort of the threaded rows: O(t log t) for t threaded
rows) and kept until the next change; every term then costs O(t) more.

**Questions.** :func:`question_text` takes a question's function words out (:data:`QUESTION_WORDS`:
interrogatives, auxiliaries, articles, pronouns, common prepositions) before it is searched, unless
nothing else is left.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coniti.errors import ContractError

__all__ = [
    "QUESTION_WORDS", "THREAD_KEY", "Windows", "check_count", "check_param", "question_text", "thread_code",
    "thread_of", "threads_of", "window_scores",
]  # fmt: skip

QUESTION_WORDS = frozenset(
    """
    what which who whom whose when where why how did do does is are was were has have had the a an
    of to in on at for with by from and or as be been being that this these those it its s his her
    their they them he she him i you your my me we our kind type name
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Words :func:`question_text` leaves out of a question (lower case)."""

THREAD_KEY = "session"
"""The metadata key whose value names a note's thread (:func:`thread_of`)."""

_WORD_RUN = re.compile(r"\w+")

_WINDOW_TERMS = 256
"""Terms whose window frequencies :class:`Windows` keeps (then it starts again)."""


def question_text(text: str) -> str:
    """``text`` with the words of :data:`QUESTION_WORDS` taken out (compared case-folded), the
    remaining word runs joined by spaces; ``text`` itself when no other word is left."""
    kept = [w for w in _WORD_RUN.findall(text) if w.casefold() not in QUESTION_WORDS]
    return " ".join(kept) if kept else text


def thread_of(metadata: dict[str, Any]) -> str | None:
    """The thread of a note with ``metadata``: its :data:`THREAD_KEY` value when that is a string
    or an integer (not a bool), as a string; None otherwise (a plain note)."""
    value = metadata.get(THREAD_KEY)
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return None


def threads_of(metadata: Sequence[dict[str, Any]]) -> list[str | None] | None:
    """:func:`thread_of` of each of ``metadata``, or None when none holds :data:`THREAD_KEY` (the
    usual batch: found by one C-level pass, no call per note)."""
    if not any(map(dict.__contains__, metadata, itertools.repeat(THREAD_KEY))):
        return None
    return [thread_of(m) for m in metadata]


def thread_code(thread: str | None, numbers: dict[str, int], names: list[str]) -> int:
    """The number of ``thread`` in ``numbers`` (a thread not seen yet is numbered next and appended
    to ``names``), -1 for None."""
    if thread is None:
        return -1
    code = numbers.get(thread)
    if code is None:
        code = numbers[thread] = len(names)
        names.append(thread)
    return code


@dataclass(frozen=True, slots=True)
class Windows:
    """The conversation windows of the visible rows: ``reach`` holds, for each place a window
    reaches (a row ``s`` places before or after another in its thread), the row whose window each
    row is in that way (-1: none), one entry per row of the index; ``length`` is every row's window
    length and ``total`` the visible rows' sum of it; ``weight`` the share a neighbour's tokens
    count for."""

    reach: list[np.ndarray]
    length: np.ndarray
    total: float
    weight: float
    terms: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Window term frequencies already worked out, by term (:meth:`tf`)."""

    @classmethod
    def of(
        cls,
        visible: np.ndarray,
        threads: np.ndarray,
        times: np.ndarray,
        lengths: np.ndarray,
        *,
        before: int,
        after: int,
        weight: float,
    ) -> Windows | None:
        """The windows of the ``visible`` rows (each row's thread number, -1: none; timestamp;
        token count); None when no visible row has a neighbour in reach (module docstring)."""
        offsets = [*range(-before, 0), *range(1, after + 1)]
        rows = np.flatnonzero(visible & (threads >= 0))
        if not offsets or len(rows) < 2:
            return None
        order = rows[np.lexsort((rows, times[rows], threads[rows]))]
        thread = threads[order]
        length = lengths.astype(np.float64)
        window = length.copy()
        reach = []
        for shift in offsets:  # the row ``shift`` places from each row j in its thread
            if shift < 0:
                j, r, same = order[-shift:], order[:shift], thread[-shift:] == thread[:shift]
            else:
                j, r, same = order[:-shift], order[shift:], thread[:-shift] == thread[shift:]
            j, r = j[same], r[same]
            window[j] += weight * length[r]  # j: distinct within a shift
            owner = np.full(len(threads), -1, dtype=np.int64)
            owner[r] = j  # r is in j's window
            reach.append(owner)
        return cls(reach, window, float(window[visible].sum()), weight)

    def tf(self, term: str, held: np.ndarray, tfs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows whose window holds ``term``, held by the visible rows ``held[keep]``
        (frequencies ``tfs[keep]``), ascending, and their window term frequencies: O(rows holding
        it x window + rows of the index); kept for the windows' lifetime (the statistics, the
        search and the scores of one ask read the same terms)."""
        cached = self.terms.get(term)
        if cached is not None:
            return cached
        if len(self.terms) >= _WINDOW_TERMS:
            self.terms.clear()
        self.terms[term] = out = self._rows(held, tfs, keep)
        return out

    def _rows(self, held: np.ndarray, tfs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`tf`, computed."""
        rows = held[keep]
        values = tfs[keep].astype(np.float64)
        targets, weights = [rows], [values]
        share = values * self.weight
        for owner in self.reach:
            into = owner[rows]
            inside = into >= 0
            targets.append(into[inside])
            weights.append(share[inside])
        every, shares = np.concatenate(targets), np.concatenate(weights)
        size = len(self.length)
        if len(every) * 16 < size:  # few: sort them; many: count over every row
            found, inverse = np.unique(every, return_inverse=True)
            return found, np.bincount(inverse, weights=shares, minlength=len(found))
        dense = np.bincount(every, weights=shares, minlength=size)
        found = np.flatnonzero(dense)
        return found, dense[found]


def check_count(name: str, value: Any) -> int:
    """``value`` when it is an integer in [0, 16] (a window's reach), else ContractError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 16:
        raise ContractError(f"{name} must be an integer in [0, 16], got {value!r}")
    return value


def check_param(name: str, value: Any, low: float, high: float | None) -> float:
    """``value`` as a float when it is a finite number in [low, high] (``high`` None: no upper
    bound), else ContractError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ContractError(f"{name} must be a finite number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ContractError(f"{name} must be {bound}, got {value!r}")
    return float(value)


def window_scores(
    terms: list[str],
    posting: Callable[[str], tuple[np.ndarray, np.ndarray] | None],
    visible: np.ndarray,
    windows: Windows,
    only: np.ndarray | None,
    rows: np.ndarray | None,
    size: int,
    *,
    n_visible: int,
    avgdl: float,
    df: Mapping[str, int] | None,
    k1: float,
    b: float,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 over conversation windows (module docstring) and the mask of rows matching a term:
    per row of the index (dense; rows outside ``only`` neither scored nor matched), or, given
    ``rows``, per entry of ``rows`` (``size`` entries either way). ``posting(term)``: the rows
    holding the term, ascending, and its frequencies; ``n_visible``, ``avgdl`` and ``df`` (None:
    the windows' own) the statistics to score with."""
    scores = np.zeros(size, dtype=np.float64)
    matched = np.zeros(size, dtype=bool)
    for term in terms:
        found_posting = posting(term)
        if found_posting is None:
            continue
        held, held_tfs = found_posting
        keep = visible[held]
        if not keep.any():
            continue
        found, wtf = windows.tf(term, held, held_tfs, keep)
        count = len(found) if df is None else df.get(term, len(found))
        idf = math.log(1.0 + (n_visible - count + 0.5) / (count + 0.5))
        if rows is None:
            inside = slice(None) if only is None else only[found]
            target = at = found[inside]
            tfs = wtf[inside]
        else:
            place = np.minimum(np.searchsorted(found, rows), len(found) - 1)
            target = np.flatnonzero(found[place] == rows)
            at = rows[target]
            tfs = wtf[place[target]]
        norm = k1 * (1.0 - b + b * windows.length[at] / avgdl) if avgdl > 0 else k1 * (1.0 - b)
        scores[target] += idf * tfs * (k1 + 1.0) / (tfs + norm)
        matched[target] = True
    return scores, matched
