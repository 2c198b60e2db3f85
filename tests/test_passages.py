"""Long notes (coniti/passages.py): MiniLM reads 256 tokens; a longer note gets a row per passage
and is scored by its best one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from coniti import Container, Note, Query, TimeRange
from coniti.engine import ContinuityEngine
from coniti.errors import ContractError
from coniti.minilm import PASSAGE_OVERLAP, MiniLMEmbedder
from coniti.passages import MAX_PASSAGES, note_hits, note_id, passage_id
from coniti.structure import StructureHit

FILLER = " ".join(
    f"The committee reviewed item number {i} of the agenda and found nothing to report." for i in range(40)
)
SECRET = "The launch code for the Borealis probe is ZEPHYR-778 and the pilot enters it at dawn."
LONG = Note(id="minutes", text=f"{FILLER} {SECRET}", timestamp=1.0)
OTHERS = [
    Note(id="picnic", text="The weather was sunny at the picnic by the lake.", timestamp=2.0),
    Note(id="garden", text="Tomatoes and beans grow in the garden behind the house.", timestamp=3.0),
]
QUESTION = "What is the launch code of the Borealis probe?"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def engine(embedder: MiniLMEmbedder) -> Iterator[ContinuityEngine]:
    with Container(embedding=embedder) as c:
        c.engine.ingest_many([LONG, *OTHERS])
        yield c.engine


def test_a_short_text_has_no_further_passage(embedder: MiniLMEmbedder) -> None:
    """A text within one window gives no passage beyond the first."""
    assert [len(p) for p in embedder.passage_vectors(["short text", SECRET])] == [0, 0]


def test_a_long_text_is_split_into_overlapping_windows(embedder: MiniLMEmbedder) -> None:
    """The secret sits past token 256; the passages are the tokenizer's windows after the first, each
    starting PASSAGE_OVERLAP tokens before the previous one ended, and the last holds the secret."""
    encoding = embedder._tokenize([LONG.text])[0]
    windows = [encoding, *encoding.overflowing]
    assert len(encoding.ids) == embedder.max_seq_length and len(windows) >= 2
    first, second = windows[0].ids[1:-1], windows[1].ids[1:-1]  # without [CLS] and [SEP]
    assert first[-PASSAGE_OVERLAP:] == second[:PASSAGE_OVERLAP]
    secret_ids = embedder._tokenize(["zephyr"])[0].ids[1:-1]
    assert not set(secret_ids) <= set(first)
    assert set(secret_ids) <= set(windows[-1].ids)
    vectors = embedder.passage_vectors([LONG.text])[0]
    assert vectors.shape == (len(windows) - 1, embedder.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_the_long_note_is_scored_by_its_best_passage(engine: ContinuityEngine, embedder: MiniLMEmbedder) -> None:
    """The semantic score of the long note is the cosine of the question with the passage holding
    the answer, above its first passage's (the record's vector); it is the first hit."""
    question = embedder.embed([QUESTION])[0].astype(np.float64)
    first = float(embedder.embed([LONG.text])[0] @ question)
    best = float(np.max(embedder.passage_vectors([LONG.text])[0] @ question))
    hits = engine.ask(Query(text=QUESTION, k=3, strategy="semantic")).hits
    assert hits[0].note.id == "minutes"
    assert hits[0].score == pytest.approx(best, abs=1e-5) and best > first + 0.1


def test_each_note_is_one_hit(engine: ContinuityEngine) -> None:
    """Passage rows never show as hits: every hit is a stored note, each once."""
    queries = [
        Query(text=QUESTION, k=10, strategy="semantic"),
        Query(text=QUESTION, k=10, strategy="hybrid"),
        Query(time_range=TimeRange(start=0.0), k=10),
    ]
    for query in queries:
        got = [h.note.id for h in engine.ask(query).hits]
        assert sorted(got) == ["garden", "minutes", "picnic"], query.resolved_strategy


def test_removing_a_long_note_removes_its_passages(engine: ContinuityEngine) -> None:
    """After remove, no row of the note is left in the structures."""
    engine.remove(["minutes"])
    assert all(note_id(row) != "minutes" for row in engine.structures()[0].live_ids())


def test_a_rebuild_from_the_log_equals_the_live_rows(embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    """verify() rebuilds from the events (embedding the passages again) and finds the same rows."""
    with Container(embedding=embedder, memory="log", path=tmp_path / "store") as c:
        c.engine.ingest_many([LONG, *OTHERS])
        c.engine.update("minutes", text=f"{FILLER} {FILLER} {SECRET}")
        report = c.engine.verify()
        assert report.ok, report.problems
        assert sum(note_id(r) == "minutes" for r in c.engine.structures()[0].live_ids()) >= 3


def test_an_id_with_the_passage_mark_is_refused(engine: ContinuityEngine) -> None:
    """Over an embedder with passages, an id holding U+001F is refused and nothing is written."""
    with pytest.raises(ContractError, match="U\\+001F"):
        engine.ingest(Note(id="a\x1f1", text="x", timestamp=1.0))
    assert engine.get(["a\x1f1"]).records == []


def test_hash_embedders_have_no_passages() -> None:
    """An embedder that reads whole texts keeps one row per note, whatever its length."""
    with Container() as c:
        assert c.engine.embedder.passage_chars is None
        c.engine.ingest(LONG)
        c.engine.ingest(Note(id="x\x1fy", text="allowed here", timestamp=2.0))
        assert sorted(c.engine.structures()[0].live_ids()) == ["minutes", "x\x1fy"]


def test_note_hits_keep_each_note_at_its_best_row() -> None:
    """Passage rows map to their note; the first (best) row of a note wins; the anchor is left out."""
    rows = [StructureHit(passage_id("a", 2), 0.9), StructureHit("b", 0.8), StructureHit("a", 0.7),
            StructureHit(passage_id("c", 1), 0.6)]  # fmt: skip
    assert note_hits(rows) == [StructureHit("a", 0.9), StructureHit("b", 0.8), StructureHit("c", 0.6)]
    assert [h.id for h in note_hits(rows, exclude="a")] == ["b", "c"]
    assert passage_id("a", MAX_PASSAGES - 1).startswith("a\x1f")
