"""Work the engine's ingest shares between its steps gives what each step computed alone: word
tokens (embedder and keyword index), content keys (admission and the content index), keyword
postings kept pending until read, and the in-memory backend's batch vectors."""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coniti.keyword as keyword_module
from coniti.actor import Note
from coniti.batch import NoteBatch, RecordBatch
from coniti.embedding import LocalHashEmbedder, RandomProjectionEmbedder
from coniti.embedding import tokenize as word_tokens
from coniti.engine import ContinuityEngine
from coniti.impl.memory import InMemoryBackend
from coniti.keyword import KeywordIndex, tokenize, tokens_of
from coniti.memory import GetRequest
from coniti.strategy import DefaultStrategy, StrategyContext
from coniti.structure import FlatStructure
from coniti.times import MAX_TIME, MIN_TIME

TEXT = st.text(alphabet="ab cdÉé苏黎世ｱ_-1 ", max_size=24)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(TEXT)
def test_keyword_tokens_from_word_tokens_equal_tokenize(text: str) -> None:
    """tokens_of(text, embedding.tokenize(text)) is keyword.tokenize(text), for any script."""
    assert list(tokens_of(text, word_tokens(text))) == tokenize(text)


@settings(max_examples=40, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_embedding_given_word_tokens_is_bit_identical(texts: list[str]) -> None:
    """embed_words(texts, tokens) equals embed(texts) bit for bit (local_hash, random_projection)."""
    words = [word_tokens(t) for t in texts]
    for embedder in (LocalHashEmbedder(dim=32), RandomProjectionEmbedder(dim=16, features=256)):
        assert embedder.embed_words(texts, words).tobytes() == embedder.embed(texts).tobytes()


def test_an_embedder_overriding_embed_sees_the_engine_call() -> None:
    """An embedder class that overrides embed is called through it by embed_words (a wrapper sees
    every call), even when its base takes word tokens."""

    class Counting(LocalHashEmbedder):
        calls = 0

        def embed(self, texts: Any) -> Any:
            type(self).calls += 1
            return super().embed(texts)

    Counting(dim=8).embed_words(["a b"], [["a", "b"]])
    assert Counting.calls == 1


def test_embed_words_refuses_a_count_that_differs_naming_both() -> None:
    """embed_words with fewer token lists than texts is refused, naming both counts."""
    with pytest.raises(Exception, match="words has 1 items, texts 2"):
        LocalHashEmbedder(dim=8).embed_words(["a", "b"], [["a"]])


def _streamed_key(note: Note, by_time: bool) -> str:
    """The content key fed part by part (the form the key was defined in)."""
    text = note.text.encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(len(text).to_bytes(8, "little"), digest_size=16)
    digest.update(text)
    if by_time:
        digest.update(struct.pack("<d", note.timestamp + 0.0))
    else:
        from coniti.strategy import _metadata_bytes

        digest.update(_metadata_bytes(note.metadata))
    return digest.hexdigest()


@settings(max_examples=80, deadline=None)
@given(TEXT, st.floats(MIN_TIME, MAX_TIME, exclude_max=True), st.dictionaries(st.text(max_size=3), JSON, max_size=3))
def test_content_keys_equal_the_streamed_digest(text: str, t: float, metadata: dict[str, Any]) -> None:
    """content_key (one BLAKE2b call) and content_keys equal the digest fed part by part, for both
    duplicate keys (persisted content indexes stay valid)."""
    n = Note(id="x", text=text, timestamp=t, metadata=metadata)
    for by_time, key in ((True, "text_timestamp"), (False, "text_metadata")):
        s = DefaultStrategy(duplicate_key=key)
        assert s.content_key(n) == _streamed_key(n, by_time)
        assert s.content_keys([n, n]) == [_streamed_key(n, by_time)] * 2


def _context(stored: dict[str, list[str]], ids: set[str], keys: list[str | None] | None) -> StrategyContext:
    return StrategyContext((), (FlatStructure(),), lambda k: list(stored.get(k, [])), ids.__contains__, keys)


NOTES = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["x", "x y", " ", "z"]), st.sampled_from([0.0, 1.0, -0.0])),
    max_size=10,
)


@settings(max_examples=80, deadline=None)
@given(NOTES, NOTES, st.sampled_from(["text_timestamp", "text_metadata"]))
def test_admission_with_precomputed_keys_decides_the_same(
    stored_rows: list[tuple[str, str, float]], rows: list[tuple[str, str, float]], key: str
) -> None:
    """admit with the engine's content keys in the context gives the same decisions and reasons as
    admit computing them itself."""
    s = DefaultStrategy(duplicate_key=key)
    stored: dict[str, list[str]] = {}
    ids = set()
    for i, (id_, text, t) in enumerate(stored_rows):
        sid = f"s{i}{id_}"
        ids.add(sid)
        k = s.content_key(Note(id=sid, text=text, timestamp=t))
        assert k is not None
        stored.setdefault(k, []).append(sid)
    notes = [Note(id=id_, text=text, timestamp=t) for id_, text, t in rows]
    vectors = np.zeros((len(notes), 4), dtype=np.float32)
    alone = s.admit(notes, vectors, _context(stored, ids, None))
    shared = s.admit(notes, vectors, _context(stored, ids, s.content_keys(notes)))
    assert shared == alone


def test_the_engine_indexes_each_admitted_note_under_its_content_key() -> None:
    """After a NoteBatch ingest the content index maps each admitted note to content_key(note),
    and a later duplicate is refused naming it."""
    e = ContinuityEngine(InMemoryBackend(), LocalHashEmbedder(dim=16), FlatStructure(), DefaultStrategy())
    batch = NoteBatch(["a", "b", "c"], ["one", "two", "one"], [1.0, 2.0, 1.0])
    results = e.ingest_many(batch)
    assert [r.admitted for r in results] == [True, True, False]
    index = e._content(e._space(()))
    assert index == {n.id: e.strategy.content_key(n) for n in batch.notes()[:2]}
    [again] = e.ingest_many([Note(id="d", text="two", timestamp=2.0)])
    assert again.reason == "duplicate of stored note 'b'"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(TEXT, min_size=1, max_size=6), min_size=1, max_size=6), TEXT, st.integers(1, 40))
def test_pending_postings_flushed_at_any_size_give_the_same_index(
    batches: list[list[str]], query: str, limit: int
) -> None:
    """Postings added in batches and moved into the index at any pending limit give the state and
    hits of one add of every row."""
    texts = [t for b in batches for t in b]
    ids = [f"n{i}" for i in range(len(texts))]
    one = KeywordIndex()
    one.add(ids, texts, [float(i) for i in range(len(texts))])
    many = KeywordIndex()
    saved = keyword_module._PENDING_LIMIT
    keyword_module._PENDING_LIMIT = limit
    try:
        at = 0
        for b in batches:
            many.add(ids[at : at + len(b)], b, [float(i) for i in range(at, at + len(b))])
            at += len(b)
    finally:
        keyword_module._PENDING_LIMIT = saved
    assert many.search(query, k=50) == one.search(query, k=50)
    a, b = one.state(), many.state()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_an_as_of_view_reads_postings_added_after_it_was_made() -> None:
    """A view made before an add finds the new rows in later views' statistics and the base keeps
    them: the view moves pending postings into the base's index, not into its own."""
    base = KeywordIndex()
    base.add(["a"], ["red apple"], [0.0], 1)
    view = base.at(5)
    base.add(["b"], ["red kite"], [0.0], 2)
    assert {h.id for h in view.search("red", k=5)} == {"a", "b"}
    assert {h.id for h in base.search("kite", k=5)} == {"b"}


def test_keyword_add_with_tokens_equals_add_from_texts() -> None:
    """add(..., tokens=tokenize of each text) gives the state add from the texts gives."""
    texts = ["Zürich 苏黎世 tram", "tram tram"]
    a, b = KeywordIndex(), KeywordIndex()
    a.add(["x", "y"], texts, [0.0, 1.0], [1, 2])
    b.add(["x", "y"], texts, np.array([0.0, 1.0]), np.array([1, 2]), tokens=[tokenize(t) for t in texts])
    sa, sb = a.state(), b.state()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)


def test_keyword_add_of_a_live_or_repeated_id_names_it_and_changes_nothing() -> None:
    """A batch repeating an id, or holding a live one, is refused naming the id; no row is added."""
    index = KeywordIndex()
    index.add(["a"], ["x"], [0.0])
    for ids in (["b", "a"], ["c", "c"]):
        with pytest.raises(Exception, match=repr(ids[1])):
            index.add(ids, ["y", "z"], [0.0, 0.0])
        assert index.rows == 1


def test_in_memory_batch_vectors_are_read_only_and_reads_are_copies() -> None:
    """put_batch keeps each record's vector as a read-only row of its own copy of the matrix: a
    change to the caller's array or to a read record's vector does not reach memory."""
    memory = InMemoryBackend()
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    memory.put_batch(RecordBatch.trusted(NoteBatch(["a", "b"], ["x", "y"], [0.0, 1.0]), matrix, "emb-x", ()))
    matrix[:] = -1.0
    [got] = memory.get(GetRequest(ids=["b"])).records
    assert got.vector is not None
    got.vector[:] = 9.0
    [again] = memory.get(GetRequest(ids=["b"])).records
    assert again.vector is not None and again.vector.tolist() == [3.0, 4.0, 5.0]


def test_in_memory_batch_metadata_is_a_deep_copy() -> None:
    """put_batch copies each metadata dict, nested values too: changing the batch's dicts later
    does not reach memory."""
    memory = InMemoryBackend()
    batch = NoteBatch(["a"], ["x"], [0.0], [{"k": {"n": [1]}, "s": "v"}])
    memory.put_batch(RecordBatch(batch, None))
    batch.metadata[0]["k"]["n"].append(2)
    batch.metadata[0]["s"] = "changed"
    [got] = memory.get(GetRequest(ids=["a"])).records
    assert got.note.metadata == {"k": {"n": [1]}, "s": "v"}
