"""Dates in questions: what time a question names, and whether it asks when or about now.

:func:`read_question` reads an English question and returns a :class:`QuestionTime`:

* ``mentions``: the times it names, each a :class:`TimeMention` (the words as written and a
  half-open UTC interval ``[start, end)`` of epoch seconds, or, for a date written without a year,
  the month and day it names in every year);
* ``asks_when``: it asks for a time (``when``, ``what date``, ``what year``, ``how long ago``,
  ``since when``, ``how long has``);
* ``present``: it asks about the current state of things (:func:`asks_present`), so that of two notes
  answering it the newer one is the answer;
* ``rest``: the question with the time expressions taken out (single spaces).

Recognised expressions (case-insensitive; English month names and their three-letter forms,
``Sept`` too; days ``1``-``31`` with an optional ``st``/``nd``/``rd``/``th``; years 1900-2199):

==============================================  ==================================================
``7 July 2023``, ``7 July, 2023``, ``July 7,    that day
2023``, ``July 7th 2023``, ``the 7th of July
2023``, ``2023-07-07``
``July 2023``, ``in July of 2023``              that month
``in 2023``, ``during 2023``, ``of 2023``       that year
``7 July``, ``July 7``, ``the 7th of July``     that day of every year
``in July``, ``during July``, ``early July``    that month of every year (``May`` only after ``in``,
                                                ``during``, ``early``, ``mid``, ``late``, ``of``,
                                                ``since``, ``until``, ``by`` or before a day or
                                                year: ``may`` is also a verb)
``today``, ``yesterday``                        that day (before ``now``)
``this``/``last`` ``week``/``weekend``/         the week (Monday to Sunday), its Saturday and
``month``/``year``                              Sunday, the calendar month or year holding ``now``,
                                                or the one before
``N days``/``weeks``/``months``/``years ago``   the day, week, month or year that many before
                                                ``now`` (``N``: digits, ``a``, ``one`` to
                                                ``twelve``, ``a few`` = 3, ``a couple of`` = 2)
``recently``, ``lately``                        the 30 days before ``now``
``... before``/``after`` a day                  relative phrases anchored on that day instead of
                                                ``now``: ``last weekend before April 10, 2023``,
                                                ``two weeks before August 11, 2023``, ``the week
                                                before 3 August 2023``, ``the day after ...``
==============================================  ==================================================

Relative expressions need ``now`` (epoch seconds): the ask's reference time. Dates are calendar
days in UTC, as :func:`coniti.recall.render_hit` prints note timestamps. Anything else (other
languages, ``Q3``, ``the 90s``, ``next Tuesday``) is not recognised and stays in ``rest``. The
module is pure: no clock is read, ``now`` is always given.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np

__all__ = ["QuestionTime", "TimeMention", "asks_present", "read_question"]

_MONTHS = {
    name: number
    for number, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
         ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
         ("october", "oct"), ("november", "nov"), ("december", "dec")],
        start=1,
    )
    for name in names
}  # fmt: skip
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a few": 3, "a couple of": 2,
    "couple of": 2, "few": 3,
}  # fmt: skip
_MONTH = r"(?P<{0}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{0}>[12][0-9]|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?P<{0}>19[0-9]{{2}}|2[01][0-9]{{2}})"
_COUNT = (
    r"(?P<count>\d{1,3}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight"
    r"|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_MAY_CUE = r"(?:in|during|early|mid|late|of|since|until|by)\s+(?:the\s+)?(?:(?:early|mid|late)[\s-]+)?"


def _p(template: str, *names: str) -> str:
    return template.format(*names)


_DAY_FORMS = [
    # 2023-07-07
    r"(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})",
    # 7 July 2023, 7 July, 2023, the 7th of July 2023
    r"(?:the\s+)?" + _p(_DAY, "d1") + r"\s+(?:of\s+)?" + _p(_MONTH, "m1") + r",?\s+" + _p(_YEAR, "y1"),
    # July 7, 2023, July 7th 2023
    _p(_MONTH, "m2") + r"\s+" + _p(_DAY, "d2") + r",?\s+" + _p(_YEAR, "y2"),
]
_MONTH_FORMS = [
    # July 2023, July of 2023
    _p(_MONTH, "m3") + r",?\s+(?:of\s+)?" + _p(_YEAR, "y3"),
]
_YEARLESS_DAY = [
    r"(?:the\s+)?" + _p(_DAY, "d4") + r"\s+(?:of\s+)?" + _p(_MONTH, "m4"),
    _p(_MONTH, "m5") + r"\s+" + _p(_DAY, "d5") + r"(?![\d:])",
]
_ABSOLUTE = re.compile(
    r"\b(?:" + "|".join(f"(?:{f})" for f in (*_DAY_FORMS, *_MONTH_FORMS, *_YEARLESS_DAY)) + r")\b",
    re.IGNORECASE,
)
_YEAR_ONLY = re.compile(r"\b(?P<cue>in|during|of|since|by|until)\s+" + _p(_YEAR, "y"), re.IGNORECASE)
_MONTH_ONLY = re.compile(
    r"\b(?P<cue>" + _MAY_CUE + r")?" + _p(_MONTH, "m") + r"\b", re.IGNORECASE
)
_ANCHORED = re.compile(
    r"\b(?:(?:the\s+)?(?P<which>last|this|past|previous)\s+|the\s+)?"
    r"(?:(?P<count>\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+)?"
    r"(?P<unit>day|week|weekend|month|year)s?\s+(?P<side>before|after|prior\s+to)\s+$",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"\b(?:(?P<ago>" + _COUNT + r"\s+" + _UNIT + r"\s+ago)"
    r"|(?P<which>this|last|past|previous)\s+(?P<span>week|weekend|month|year)"
    r"|(?P<word>today|yesterday|recently|lately))\b",
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"^\s*(?:when\b|since\s+when\b|what\s+(?:date|day|year|month|time)\b|which\s+(?:date|day|year|month)\b"
    r"|how\s+long\s+(?:ago|has|have|had|did|was|were|is|are|since)\b|in\s+what\s+year\b|in\s+which\s+(?:year|month)\b)",
    re.IGNORECASE,
)
_PAST = re.compile(
    r"\b(?:was|were|did|had|used\s+to|before|previously|originally|formerly|at\s+first|first|"
    r"initially|earlier|old|former|ago|last|yesterday)\b",
    re.IGNORECASE,
)
_PRESENT = re.compile(
    r"^\s*(?:(?:what|which|who|whom|where|when|how|how\s+much|how\s+many)\s+(?:\w+\s+){0,3}?"
    r"(?:is|are|does|do|'s)\b|(?:is|are|does|do)\b)",
    re.IGNORECASE,
)
_NOW = re.compile(r"\b(?:now|currently|current|still|latest|these\s+days|at\s+the\s+moment|today)\b", re.IGNORECASE)
_DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class TimeMention:
    """A time a question names: ``text`` as written; ``start``/``end`` a half-open interval of epoch
    seconds (UTC), or, for a date without a year, ``month`` (1-12) and ``day`` (None: the whole
    month) in every year (``start`` and ``end`` are then None)."""

    text: str
    start: float | None = None
    end: float | None = None
    month: int | None = None
    day: int | None = None

    def matches(self, timestamps: np.ndarray, *, slack: float = 0.0) -> np.ndarray:
        """Which of ``timestamps`` (epoch seconds) fall in this time, or up to ``slack`` seconds
        after it (a note written a few days after the event it tells of; for a date without a
        year, ``slack`` counts in whole days)."""
        times = np.asarray(timestamps, dtype=np.float64)
        if self.start is not None and self.end is not None:
            return (times >= self.start) & (times < self.end + slack)
        out = np.zeros(times.shape, dtype=bool)
        for step in range(int(slack // _DAY_S) + 1):
            days = (times - step * _DAY_S).astype("datetime64[s]").astype("datetime64[D]")
            months = days.astype("datetime64[M]")
            hit = months.astype(np.int64) % 12 + 1 == self.month
            if self.day is not None:
                hit &= (days - months).astype(np.int64) + 1 == self.day
            out |= hit
        return out


@dataclass(frozen=True, slots=True)
class QuestionTime:
    """What :func:`read_question` found (module docstring)."""

    mentions: tuple[TimeMention, ...]
    asks_when: bool
    present: bool
    rest: str

    def matches(self, timestamps: np.ndarray, *, slack: float = 0.0) -> np.ndarray:
        """Which of ``timestamps`` fall in any mention (all False without mentions)."""
        out = np.zeros(np.shape(timestamps), dtype=bool)
        for mention in self.mentions:
            out |= mention.matches(timestamps, slack=slack)
        return out


def _epoch(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _days(first: date, count: int) -> tuple[float, float]:
    return _epoch(first), _epoch(first + timedelta(days=count))


def _month_span(year: int, month: int) -> tuple[float, float]:
    days = calendar.monthrange(year, month)[1]
    return _days(date(year, month, 1), days)


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


def _count(text: str | None) -> int:
    if not text:
        return 1
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS.get(text, 1)


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _relative(unit: str, this: bool, count: int, anchor: date, sign: int = -1) -> tuple[float, float]:
    """The day, week (Monday to Sunday), weekend, month or year ``count`` of them before
    (``sign`` -1) or after (+1) the one holding ``anchor``, or the one holding it (``this``)."""
    unit = unit.lower()
    step = 0 if this else sign * count
    if unit == "day":
        return _days(anchor + timedelta(days=step), 1)
    if unit in ("week", "weekend"):
        monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=step)
        return _days(monday + timedelta(days=5), 2) if unit == "weekend" else _days(monday, 7)
    if unit == "month":
        return _month_span(*_shift_month(anchor.year, anchor.month, step))
    return _year_span(anchor.year + step)


def _year_span(year: int) -> tuple[float, float]:
    return _epoch(date(year, 1, 1)), _epoch(date(year + 1, 1, 1))


def read_question(text: str, *, now: float) -> QuestionTime:
    """The times ``text`` names, relative ones read against ``now`` (epoch seconds), whether it asks
    when and whether it asks about the present (module docstring)."""
    today = datetime.fromtimestamp(now, UTC).date()
    mentions: list[TimeMention] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    for found in _ABSOLUTE.finditer(text):
        groups = {k: v for k, v in found.groupdict().items() if v is not None}
        words = found.group(0)
        mention: TimeMention | None = None
        start_at = found.start()
        if "iy" in groups:
            day = _valid(int(groups["iy"]), int(groups["im"]), int(groups["id"]))
            if day is not None:
                mention = TimeMention(words, *_days(day, 1))
        elif "y1" in groups or "y2" in groups:
            n = "1" if "y1" in groups else "2"
            day = _valid(int(groups[f"y{n}"]), _MONTHS[groups[f"m{n}"].lower()], int(groups[f"d{n}"]))
            if day is not None:
                mention = TimeMention(words, *_days(day, 1))
        elif "y3" in groups:
            mention = TimeMention(words, *_month_span(int(groups["y3"]), _MONTHS[groups["m3"].lower()]))
        else:
            n = "4" if "m4" in groups else "5"
            month, day_no = _MONTHS[groups[f"m{n}"].lower()], int(groups[f"d{n}"])
            if _valid(2000, month, day_no) is not None:  # 2000: a leap year, so 29 February passes
                mention = TimeMention(words, month=month, day=day_no)
        if mention is None:
            continue
        anchored = _ANCHORED.search(text[:start_at])
        if anchored is not None and mention.start is not None:
            anchor = datetime.fromtimestamp(mention.start, UTC).date()
            sign = 1 if anchored.group("side").lower() == "after" else -1
            span = _relative(anchored.group("unit"), False, _count(anchored.group("count")), anchor, sign)
            words = text[anchored.start() : found.end()]
            start_at = anchored.start()
            mention = TimeMention(words, *span)
        mentions.append(mention)
        taken.append((start_at, found.end()))
    for found in _YEAR_ONLY.finditer(text):
        if free(found.start("y"), found.end("y")):
            year = int(found.group("y"))
            mentions.append(TimeMention(found.group("y"), *_year_span(year)))
            taken.append((found.start("y"), found.end("y")))
    for found in _MONTH_ONLY.finditer(text):
        name = found.group("m").lower().rstrip(".")
        if not free(found.start("m"), found.end("m")):
            continue
        if (name == "may" or len(name) == 3) and not found.group("cue"):
            continue  # "may" the verb, "mar", "jan" as words: only after a cue
        cue = found.group("cue") or ""
        start_at = found.start("m") if not cue else found.start()
        mentions.append(TimeMention(text[start_at : found.end()].strip(), month=_MONTHS[name]))
        taken.append((start_at, found.end()))
    for found in _RELATIVE.finditer(text):
        if not free(found.start(), found.end()):
            continue
        if found.group("word"):
            word = found.group("word").lower()
            if word == "today":
                span = _days(today, 1)
            elif word == "yesterday":
                span = _days(today - timedelta(days=1), 1)
            else:
                span = (_epoch(today - timedelta(days=30)), _epoch(today + timedelta(days=1)))
        elif found.group("ago"):
            span = _relative(found.group("unit"), False, _count(found.group("count")), today)
        else:
            span = _relative(found.group("span"), found.group("which").lower() == "this", 1, today)
        mentions.append(TimeMention(found.group(0), *span))
        taken.append((found.start(), found.end()))
    rest = text
    for start, end in sorted(taken, reverse=True):
        rest = rest[:start] + " " + rest[end:]
    rest = re.sub(r"\b(?:in|on|during|of|since|by|until|before|after)\s*([?.!]?)\s*$", r"\1", " ".join(rest.split()))
    rest = re.sub(r"\s+([?.!,])", r"\1", rest).strip()
    return QuestionTime(
        mentions=tuple(mentions),
        asks_when=bool(_WHEN.search(text)),
        present=asks_present(text),
        rest=rest,
    )


def asks_present(text: str) -> bool:
    """Whether ``text`` asks about the current state: it says ``now``, ``currently``, ``current``,
    ``still``, ``latest``, ``these days``, ``at the moment`` or ``today``; or it is a question in
    the present tense (``what/which/who/where/when/how ... is/are/does/do ...``, or starting with
    ``is/are/does/do``) with no past marker in it (``was``, ``were``, ``did``, ``had``, ``used
    to``, ``before``, ``first``, ``originally``, ``ago``, ``last``, ``yesterday``, a word ending in
    ``-ed``, or a date: :func:`read_question`'s mentions are checked by the caller)."""
    if _NOW.search(text):
        return True
    return bool(_PRESENT.search(text)) and not _PAST.search(text)
