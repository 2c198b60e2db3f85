"""The engine's content index (key -> holders, id -> key): lone holders kept as their id, several as a
list in order; the same holders as a list per key would give, and no object the cyclic garbage
collector tracks after an ingest of distinct notes."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note
from coniti.embedding import LocalHashEmbedder
from coniti.engine.content import ContentIndex, _holders
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryRecord, PutRequest
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure

EMBEDDER = LocalHashEmbedder(dim=16)


def _engine(memory: InMemoryBackend | None = None) -> ContinuityEngine:
    return ContinuityEngine(memory or InMemoryBackend(), EMBEDDER, [FlatStructure()], DefaultStrategy())


OPS = st.lists(
    st.tuples(st.booleans(), st.integers(0, 7), st.sampled_from("kmn")), max_size=60
)
"""(add?, id number, key): an add of an id not held gives it the key; otherwise the id is removed
(a no-op when it is not held). Few ids and keys, so keys gain and lose several holders."""


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_holders_equal_a_list_per_key_and_several_only_are_lists(ops: list[tuple[bool, int, str]]) -> None:
    """After any adds and removes, each key's holders are those of a reference list per key, in
    order; a key with no holder is absent, and only a key with two or more holders holds a list."""
    space = ContentIndex()
    reference: dict[str, list[str]] = {}
    key_of: dict[str, str] = {}
    for add, number, key in ops:
        id_ = f"id{number}"
        if add and id_ not in key_of:
            space.add_key(id_, key)
            reference.setdefault(key, []).append(id_)
            key_of[id_] = key
        elif not add:
            space.remove([id_])
            if id_ in key_of:
                held = reference[key_of.pop(id_)]
                held.remove(id_)
        reference = {k: v for k, v in reference.items() if v}
        assert {k: _holders(v) for k, v in space.keys.items()} == reference
        assert space.key_of == key_of
        assert all(isinstance(v, str) or len(v) >= 2 for v in space.keys.values())


def test_an_ingest_of_distinct_notes_leaves_no_tracked_object_in_the_index() -> None:
    """Distinct notes each hold their key alone: neither dict of the content index is tracked by the
    garbage collector (no list per note for its full collections to walk)."""
    e = _engine()
    e.ingest_many([Note(id=f"n{i}", text=f"note number {i}", timestamp=float(i)) for i in range(50)])
    space = e._indexes.get(()).content
    assert len(space.keys) == 50
    assert not gc.is_tracked(space.keys) and not gc.is_tracked(space.key_of)


def test_a_duplicate_names_the_first_holder_left_as_holders_are_removed() -> None:
    """Three stored notes share a text (written by another writer): a new copy is refused as a
    duplicate of the first, then of the next one each time the first left is removed."""
    memory = InMemoryBackend()
    e = _engine(memory)
    text = "the same words"
    vector = EMBEDDER.embed([text])[0]
    for id_ in ("a", "b", "c"):
        note = Note(id=id_, text=text, timestamp=1.0)
        memory.put(PutRequest(records=[MemoryRecord(note=note, vector=vector, embedding_id=EMBEDDER.spec_id)]))
    reasons = []
    for copy, gone in (("x", "a"), ("y", "b"), ("z", None)):
        reasons.append(e.ingest(Note(id=copy, text=text, timestamp=1.0)).reason)
        if gone is not None:
            e.remove([gone])
    assert reasons == [f"duplicate of stored note {held!r}" for held in ("a", "b", "c")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["k", "m", "n", "p", "q", None]), max_size=4), max_size=5))
def test_a_batch_add_holds_what_adding_each_key_holds(batches: list[list[str | None]]) -> None:
    """Batches of new ids added at once (a batch of new, distinct keys in one step; any other
    key by key) hold the same keys and holders as adding each id's key in turn (None: not held)."""
    batched, single = ContentIndex(), ContentIndex()
    n = 0
    for keys in batches:
        ids = [f"id{n + i}" for i in range(len(keys))]
        n += len(keys)
        batched.add(ids, keys)
        for id_, key in zip(ids, keys, strict=True):
            if key is not None:
                single.add_key(id_, key)
    assert batched.keys == single.keys
    assert batched.key_of == single.key_of
