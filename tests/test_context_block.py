"""coniti.recall.to_context_block: hits rendered in rank order within an estimated token budget."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coniti import Container, ContractError, Hit, Note
from coniti.recall import (
    ContextBlock,
    estimate_tokens,
    omitted_line,
    render_hit,
    to_context_block,
)

DAY = datetime(2025, 3, 14, 9, 30, tzinfo=UTC).timestamp()


def hit(i: int, text: str | None = None, score: float | None = None) -> Hit:
    return Hit(
        note=Note(id=f"n{i}", text=text or f"note number {i}", timestamp=DAY + i, metadata={}),
        score=1.0 - i / 100 if score is None else score,
    )


@dataclass(frozen=True)
class NamespacedHit:
    """A hit-like object that carries its namespace, as engine hits will."""

    note: Note
    score: float
    namespace: tuple[str, ...]


HITS = [hit(i, "x" * 36) for i in range(10)]
"""Ten hits whose default lines are 36 + 23 bytes each."""


def test_hits_render_in_the_order_given() -> None:
    """Lines follow the order of the hits (rank order), not their scores."""
    hits = [hit(0, "first", 0.1), hit(1, "second", 0.9), hit(2, "third", 0.5)]
    block = to_context_block(hits, 1000)
    assert [line.split("] ")[1].split(" (")[0] for line in block.text.splitlines()] == [
        "first", "second", "third",
    ]  # fmt: skip
    assert block.hits == hits


def test_all_hits_fit_and_no_omitted_line_is_written() -> None:
    """When every hit fits, the text is their lines alone and omitted is 0."""
    block = to_context_block(HITS[:3], 1000)
    assert block.text == "\n".join(render_hit(h) for h in HITS[:3])
    assert block.omitted == 0


def test_budget_stops_rendering_and_the_omitted_line_counts_the_rest() -> None:
    """With room for three lines and the omitted line, three hits render and the last line says
    seven more were omitted."""
    three = "\n".join([*(render_hit(h) for h in HITS[:3]), omitted_line(7)])
    block = to_context_block(HITS, estimate_tokens(three))
    assert block.text == three
    assert block.text.splitlines()[-1] == "[... 7 more omitted ...]"
    assert block.omitted == 7
    assert block.hits == HITS[:3]


def test_a_hit_that_fits_only_without_the_omitted_line_is_left_out() -> None:
    """The omitted line counts against the budget: a hit whose line fits but leaves no room for the
    omitted line after it is not rendered."""
    two = "\n".join(render_hit(h) for h in HITS[:2])
    block = to_context_block(HITS[:3], estimate_tokens(two))
    assert block.hits == HITS[:1]
    assert block.text == "\n".join([render_hit(HITS[0]), omitted_line(2)])


def test_first_hit_renders_even_over_budget() -> None:
    """A first hit larger than the budget still renders, followed by the omitted line; tokens then
    exceed the budget."""
    big = hit(0, "word " * 200)
    block = to_context_block([big, hit(1)], 5)
    assert block.hits == [big]
    assert block.text == f"{render_hit(big)}\n{omitted_line(1)}"
    assert block.tokens > 5


def test_empty_hits_give_an_empty_block() -> None:
    """No hits: empty text, no hits, nothing omitted, zero tokens."""
    block = to_context_block([], 10)
    assert (block.text, block.hits, block.omitted, block.tokens) == ("", [], 0, 0)


def test_tokens_are_the_default_estimate_of_the_text() -> None:
    """tokens equals estimate_tokens(text) for the text as returned."""
    block = to_context_block(HITS, 50)
    assert block.tokens == estimate_tokens(block.text)


def test_a_given_estimator_decides_the_budget_and_the_tokens() -> None:
    """With a word-count estimator, hits render while the text has at most `budget` words, and
    tokens is that estimator's figure for the text."""

    def words(text: str) -> int:
        return len(text.split())

    hits = [hit(i, "one two three") for i in range(5)]  # 6 words a line; 5 in the omitted line
    block = to_context_block(hits, 17, estimator=words)
    assert block.hits == hits[:2]  # 6 + 6 + 5 = 17; three lines would need 23
    assert block.tokens == words(block.text) == 17


def test_a_given_render_makes_the_lines() -> None:
    """A custom render function's strings are the lines of the text."""
    block = to_context_block(HITS[:2], 1000, render=lambda h: f"* {h.note.id}")
    assert block.text == "* n0\n* n1"


def test_default_render_shows_date_text_and_id() -> None:
    """render_hit writes `- [YYYY-MM-DD] text (id)` with the note's UTC date."""
    assert render_hit(hit(0, "Alice lives in Lyon.")) == "- [2025-03-14] Alice lives in Lyon. (n0)"


def test_default_render_shows_the_namespace_of_a_hit_that_has_one() -> None:
    """A hit with a namespace renders it as `alice/work` after the id; the root namespace is not
    shown."""
    note = hit(0, "Alice lives in Lyon.").note
    assert render_hit(NamespacedHit(note, 0.5, ("alice", "work"))) == (
        "- [2025-03-14] Alice lives in Lyon. (n0, alice/work)"
    )
    assert render_hit(NamespacedHit(note, 0.5, ())).endswith("(n0)")


def test_default_render_keeps_each_hit_on_one_line() -> None:
    """Line breaks in a note's text become spaces in its line."""
    assert render_hit(hit(0, "first line\nsecond line")) == (
        "- [2025-03-14] first line second line (n0)"
    )


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("éé", 1), ("ééé", 2), ("日本", 2), ("🙂", 1), ("a🙂", 2)],
)
def test_default_estimate_counts_four_bytes_of_utf8_per_token(text: str, tokens: int) -> None:
    """estimate_tokens is ceil(UTF-8 bytes / 4): bytes, not characters."""
    assert estimate_tokens(text) == tokens


def test_non_ascii_text_spends_the_budget_by_bytes() -> None:
    """Notes of two-byte characters fill a budget twice as fast as ASCII notes of the same length."""
    ascii_hits = [hit(i, "e" * 40) for i in range(6)]
    accented = [hit(i, "é" * 40) for i in range(6)]
    assert len(to_context_block(accented, 60).hits) < len(to_context_block(ascii_hits, 60).hits)


def test_seq_is_kept_on_the_block() -> None:
    """The seq given is the block's seq; without one it is None."""
    assert to_context_block(HITS[:1], 100, seq=42).seq == 42
    assert to_context_block(HITS[:1], 100).seq is None


def test_a_block_is_frozen() -> None:
    """Assigning to a block's field raises."""
    block = to_context_block(HITS[:1], 100)
    with pytest.raises(Exception, match="frozen"):
        block.text = "changed"  # type: ignore[misc]


def test_a_block_of_engine_hits_serialises_to_json() -> None:
    """to_dict gives JSON-compatible data with the rendered hits' notes."""
    data = to_context_block(HITS[:2], 1000, seq=3).to_dict()
    assert json.loads(json.dumps(data))["hits"][1]["note"]["id"] == "n1"
    assert set(data) == {"text", "hits", "omitted", "tokens", "seq", "receipt"}


def test_a_block_is_reproduced_from_the_memory_point_it_read(tmp_path: Path) -> None:
    """On a LogBackend, asking `engine.at(seq)` later, with seq the head when the hits were asked,
    gives the same block although notes were written meanwhile."""
    ns = ("alice", "personal")
    with Container(memory="log", path=tmp_path / "store") as container:
        engine = container.engine
        engine.ingest_many(["Alice lives in Lyon.", "Alice has a grey cat."], namespace=ns)
        seq = container.memory.head  # type: ignore[attr-defined]
        first = to_context_block(engine.ask("Lyon cat", namespace=ns).hits, 200, seq=seq)
        engine.ingest_many(["Alice moved from Lyon to Ghent.", "Lyon has a cat café."], namespace=ns)
        assert to_context_block(engine.ask("Lyon cat", namespace=ns).hits, 200).text != first.text
        past = engine.at(first.seq)
        again = to_context_block(past.ask("Lyon cat", namespace=ns).hits, 200, seq=first.seq)
    assert again == first


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, -3, 2.5, True, "10", None])
def test_a_budget_that_is_not_a_positive_int_is_refused(budget: Any) -> None:
    """token_budget must be a positive int; the error names token_budget."""
    with pytest.raises(ContractError, match="token_budget"):
        to_context_block(HITS, budget)


@pytest.mark.parametrize("figure", [-1, 1.5, "3", None, True])
def test_an_estimator_returning_anything_but_a_non_negative_int_is_refused(figure: Any) -> None:
    """An estimator must return a non-negative int; the error names estimator and the figure."""
    with pytest.raises(ContractError, match=r"estimator must return a non-negative int, got"):
        to_context_block(HITS, 100, estimator=lambda text: figure)


def test_an_estimator_that_is_not_callable_is_refused() -> None:
    """A non-callable estimator is refused by name."""
    with pytest.raises(ContractError, match="estimator must be callable"):
        to_context_block(HITS, 100, estimator=4)  # type: ignore[arg-type]


def test_a_render_returning_a_non_string_is_refused() -> None:
    """render must return a string; the error names render and the hit."""
    with pytest.raises(ContractError, match=r"render must return a string, got int for hits\[0\]"):
        to_context_block(HITS, 100, render=lambda h: 7)  # type: ignore[arg-type, return-value]


def test_an_item_that_is_not_a_hit_is_refused_by_index() -> None:
    """Each item needs .note and .score; the error names its index."""
    with pytest.raises(ContractError, match=r"hits\[1\] must be a hit with \.note and \.score"):
        to_context_block([HITS[0], "not a hit"], 100)  # type: ignore[list-item]


def test_a_string_of_hits_is_refused() -> None:
    """A string is not an iterable of hits."""
    with pytest.raises(ContractError, match="hits must be an iterable of hits"):
        to_context_block("hits", 100)  # type: ignore[arg-type]


def test_a_negative_seq_is_refused() -> None:
    """seq is a memory point: a negative one is refused, naming seq."""
    with pytest.raises(ContractError, match="seq"):
        to_context_block(HITS, 100, seq=-1)


# -- properties -------------------------------------------------------------------------------


@given(
    texts=st.lists(st.text(min_size=1, max_size=80), max_size=12),
    budget=st.integers(min_value=1, max_value=400),
)
def test_a_block_is_a_prefix_within_budget_unless_only_the_first_hit_renders(
    texts: list[str], budget: int
) -> None:
    """The rendered hits are a prefix of the input, rendered + omitted is the input's length, the
    text ends with the omitted line when something was omitted, and tokens <= budget unless the
    block holds just the first hit."""
    hits = [hit(i, t) for i, t in enumerate(texts)]
    block = to_context_block(hits, budget)
    assert block.hits == hits[: len(block.hits)]
    assert len(block.hits) + block.omitted == len(hits)
    assert bool(hits) == bool(block.hits)
    if block.omitted:
        assert block.text.endswith(omitted_line(block.omitted))
    assert block.tokens <= budget or len(block.hits) == 1
    assert isinstance(block, ContextBlock)


def test_a_block_of_engine_hits_round_trips_through_from_dict() -> None:
    """from_dict(to_dict()) gives an equal block when the hits are engine Hits."""
    block = to_context_block(HITS[:3], 40, seq=9)
    assert ContextBlock.from_dict(block.to_dict()) == block


def test_a_hit_like_object_is_kept_as_given() -> None:
    """A hit-like object that is not an engine Hit is stored in the block as the same object."""
    other = NamespacedHit(hit(0).note, 0.5, ("alice", "work"))
    assert to_context_block([other], 100).hits[0] is other


def test_the_json_schema_describes_every_key_of_to_dict() -> None:
    """ContextBlock.json_schema is an object schema whose properties are the keys to_dict writes."""
    schema = ContextBlock.json_schema()
    assert schema["type"] == "object"
    json.dumps(schema)
    assert set(to_context_block(HITS[:1], 100).to_dict()) == set(schema["properties"])
