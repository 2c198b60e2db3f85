"""Dates in questions (coniti/dates.py): what time a question names, whether it asks when or about now."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from coniti.dates import asks_present, read_question

NOW = datetime(2023, 10, 20, 15, 0, tzinfo=UTC).timestamp()


def day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=UTC).timestamp()


def span(question: str) -> tuple[float | None, float | None]:
    found = read_question(question, now=NOW).mentions
    assert len(found) == 1, found
    return found[0].start, found[0].end


@pytest.mark.parametrize(
    "question",
    [
        "What did Gina find on 1 February, 2023?",
        "What did Gina find on February 1, 2023?",
        "What did Gina find on February 1st 2023?",
        "What did Gina find on the 1st of February 2023?",
        "What did Gina find on 2023-02-01?",
    ],
)
def test_a_written_day_is_that_day(question: str) -> None:
    """Every written form of a day names the 24 hours of that day (UTC)."""
    assert span(question) == (day(2023, 2, 1), day(2023, 2, 2))


def test_a_month_and_year_is_the_month() -> None:
    """'in December 2023' is the whole month."""
    assert span("What class did Maria start in December 2023?") == (day(2023, 12, 1), day(2024, 1, 1))


def test_a_year_after_in_is_the_year() -> None:
    """'in 2023' is the calendar year."""
    assert span("How many times has Melanie gone to the beach in 2023?") == (day(2023, 1, 1), day(2024, 1, 1))


def test_a_month_without_a_year_matches_that_month_of_every_year() -> None:
    """'in June' names June of any year: notes of June 2021 and June 2023 match, July does not."""
    mention = read_question("When did Melanie go camping in June?", now=NOW).mentions[0]
    assert (mention.start, mention.month, mention.day) == (None, 6, None)
    times = np.array([day(2021, 6, 3), day(2023, 6, 30), day(2023, 7, 1)])
    assert mention.matches(times).tolist() == [True, True, False]


def test_a_day_without_a_year_matches_that_day_of_every_year() -> None:
    """'the 5th of May' matches 5 May of any year only."""
    mention = read_question("What happened on the 5th of May?", now=NOW).mentions[0]
    times = np.array([day(2020, 5, 5) + 3600, day(2023, 5, 5), day(2023, 5, 6)])
    assert mention.matches(times).tolist() == [True, True, False]


def test_may_the_verb_is_not_a_month() -> None:
    """'May I ask ...' names no time; 'in May' does."""
    assert read_question("May I ask what Alice likes?", now=NOW).mentions == ()
    assert read_question("What did Alice plant in May?", now=NOW).mentions[0].month == 5


def test_relative_days_read_against_now() -> None:
    """'yesterday' and 'last week' are read against the ``now`` given."""
    assert span("What did I do yesterday?") == (day(2023, 10, 19), day(2023, 10, 20))
    assert span("Who called last week?") == (day(2023, 10, 9), day(2023, 10, 16))


def test_ago_counts_back_from_now() -> None:
    """'4 years ago' is the calendar year four before now's; 'two weeks ago' a Monday-to-Sunday week."""
    assert span("Where did Caroline move from 4 years ago?") == (day(2019, 1, 1), day(2020, 1, 1))
    assert span("What broke two weeks ago?") == (day(2023, 10, 2), day(2023, 10, 9))


def test_a_phrase_anchored_on_a_day_counts_from_that_day() -> None:
    """'last weekend before April 10, 2023' is the Saturday and Sunday before that Monday."""
    assert span("What did Maria do last weekend before April 10, 2023?") == (day(2023, 4, 8), day(2023, 4, 10))
    assert span("What did John do the week before August 3, 2023?") == (day(2023, 7, 24), day(2023, 7, 31))


def test_slack_lets_a_later_note_match() -> None:
    """With a slack of two days, a note written two days after the named day matches."""
    mention = read_question("What happened on 7 July 2023?", now=NOW).mentions[0]
    later = np.array([day(2023, 7, 9)])
    assert not mention.matches(later)[0]
    assert mention.matches(later, slack=2 * 86_400)[0]


def test_the_rest_leaves_the_time_out() -> None:
    """``rest`` is the question without its time expression and a dangling preposition."""
    assert read_question("Who did Maria have dinner with on May 3, 2023?", now=NOW).rest == (
        "Who did Maria have dinner with?"
    )


@pytest.mark.parametrize(
    ("question", "when"),
    [
        ("When did Caroline apply to adoption agencies?", True),
        ("What year did Joanna start writing?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("What did Caroline apply for?", False),
    ],
)
def test_asks_when(question: str, when: bool) -> None:
    """Questions asking for a time are recognised."""
    assert read_question(question, now=NOW).asks_when is when


@pytest.mark.parametrize(
    ("question", "present"),
    [
        ("When is the Atlas launch date?", True),
        ("What is Alice's role at Northwind?", True),
        ("Where does Bob live now?", True),
        ("When was the Atlas launch date first set?", False),
        ("What did Bob decide?", False),
        ("Where did Alice live before Lyon?", False),
    ],
)
def test_asks_present(question: str, present: bool) -> None:
    """Present-tense questions without a past marker ask about the present."""
    assert asks_present(question) is present
