"""Embedders: normalised rows, stable spec ids, determinism across processes, input checks."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.embedding import (
    EMBEDDERS,
    STOPWORDS,
    EmbeddingSpec,
    LocalHashEmbedder,
    RandomProjectionEmbedder,
    _Features,
    sign_matrix,
    tokenize,
    tokenize_rows,
)
from coniti.errors import ContractError, UnknownPiece

NAMES = ["local_hash", "random_projection"]
TEXTS = [
    "Met Ana about the Q3 budget",
    "budget review with Ana next week",
    "the cat sat on the mat",
    "Grüße aus Köln — ¡hola!",
    "",
]

# Pinned outputs: a change here changes every stored vector, so it must come with a new version.
GOLDEN = {
    "local_hash": ("emb-7c724f5ef559", "85cb90758f0b8704"),
    "random_projection": ("emb-f8bcb87c3a1f", "3ea59763b454fa47"),
}


def digest(vectors: np.ndarray) -> str:
    return hashlib.sha256(vectors.tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("name", NAMES)
def test_rows_are_unit_length_float32(name: str) -> None:
    """Every row of a text with tokens has L2 norm 1 (float32, shape (n, dim))."""
    e = EMBEDDERS.create(name)
    out = e.embed(TEXTS[:4])
    assert out.dtype == np.float32 and out.shape == (4, e.dim)
    np.testing.assert_allclose(np.linalg.norm(out.astype(np.float64), axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", ["", "   ", "!!! ... ???", "🙂🙂"])
def test_text_without_tokens_is_all_zero(name: str, text: str) -> None:
    """A text with no word tokens embeds to the all-zero row."""
    assert not EMBEDDERS.create(name).embed([text]).any()


@pytest.mark.parametrize("name", NAMES)
def test_stop_words_alone_still_embed(name: str) -> None:
    """A text made only of stop words is not zero (they are kept when nothing else is left)."""
    assert EMBEDDERS.create(name).embed(["to be or not to be"]).any()


@pytest.mark.parametrize("name", NAMES)
def test_empty_batch_gives_empty_array(name: str) -> None:
    """embed([]) is a (0, dim) array."""
    e = EMBEDDERS.create(name)
    assert e.embed([]).shape == (0, e.dim)


@pytest.mark.parametrize("name", NAMES)
def test_row_does_not_depend_on_the_batch(name: str) -> None:
    """A text embeds bit-identically alone, in a batch, and across chunk boundaries."""
    e = EMBEDDERS.create(name)
    many = [f"note {i} about topic {i % 7}" for i in range(1500)]
    batch = e.embed(many)
    for i in (0, 127, 128, 1023, 1024, 1499):
        assert np.array_equal(e.embed([many[i]])[0], batch[i])
        assert np.array_equal(e.embed_one(many[i]), batch[i])


@pytest.mark.parametrize("name", NAMES)
def test_golden_spec_id_and_vectors(name: str) -> None:
    """The default spec id and the vectors of two fixed texts are pinned."""
    e = EMBEDDERS.create(name)
    spec_id, vectors = GOLDEN[name]
    assert e.spec_id == spec_id
    assert digest(e.embed(["Met Ana about the Q3 budget", "kick-off"])) == vectors


def test_embeddings_identical_across_processes() -> None:
    """Two fresh interpreters with different hash seeds produce identical bytes."""
    code = (
        "import hashlib, json\n"
        "from coniti.embedding import EMBEDDERS\n"
        f"texts = {TEXTS!r}\n"
        "print(json.dumps({n: hashlib.sha256(EMBEDDERS.create(n).embed(texts).tobytes()).hexdigest()"
        f" for n in {NAMES!r}}}))\n"
    )
    outputs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.append(json.loads(done.stdout))
    here = {n: hashlib.sha256(EMBEDDERS.create(n).embed(TEXTS).tobytes()).hexdigest() for n in NAMES}
    assert outputs[0] == outputs[1] == here


@pytest.mark.parametrize("name", NAMES)
def test_spec_id_is_sha256_of_canonical_spec(name: str) -> None:
    """spec_id is 'emb-' + the first 12 hex digits of SHA-256 over the spec's canonical JSON."""
    e = EMBEDDERS.create(name)
    canonical = json.dumps(e.spec.to_dict(), sort_keys=True, separators=(",", ":"))
    assert e.spec_id == "emb-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


@pytest.mark.parametrize("name", NAMES)
def test_spec_round_trips_through_json(name: str) -> None:
    """The spec survives to_json/from_json with the same id."""
    spec = EMBEDDERS.create(name).spec
    assert EmbeddingSpec.from_json(spec.to_json()).spec_id == spec.spec_id


def test_options_change_the_spec_id() -> None:
    """Another dim, weight or seed gives another id; the same options give the same id."""
    ids = {
        LocalHashEmbedder().spec_id,
        LocalHashEmbedder(dim=64).spec_id,
        LocalHashEmbedder(char_weight=0.0).spec_id,
        RandomProjectionEmbedder().spec_id,
        RandomProjectionEmbedder(seed=1).spec_id,
    }
    assert len(ids) == 5
    assert LocalHashEmbedder(dim=64).spec_id == LocalHashEmbedder(dim=64).spec_id


@pytest.mark.parametrize("name", NAMES)
def test_options_rebuild_the_same_embedder(name: str) -> None:
    """type(e)(**e.options) has the same spec id."""
    e = EMBEDDERS.create(name, dim=32)
    assert type(e)(**e.options).spec_id == e.spec_id


@pytest.mark.parametrize("name", NAMES)
def test_shared_words_are_more_similar(name: str) -> None:
    """Texts sharing content words score higher than unrelated texts."""
    a, b, c = EMBEDDERS.create(name).embed(TEXTS[:3]).astype(np.float64)
    assert a @ b > a @ c


@pytest.mark.parametrize("name", NAMES)
def test_case_and_punctuation_do_not_matter(name: str) -> None:
    """Normalisation folds case, width and punctuation."""
    e = EMBEDDERS.create(name)
    a, b = e.embed(["Budget, Q3!", "budget q3"])
    assert np.array_equal(a, b)


def test_random_projection_seed_changes_vectors() -> None:
    """Two seeds give different vectors; the same seed gives the same."""
    a = RandomProjectionEmbedder(seed=1).embed(TEXTS[:1])
    assert np.array_equal(a, RandomProjectionEmbedder(seed=1).embed(TEXTS[:1]))
    assert not np.array_equal(a, RandomProjectionEmbedder(seed=2).embed(TEXTS[:1]))


def test_sign_matrix_is_sparse_signs() -> None:
    """The projection matrix holds -1, 0, +1 with about a third non-zero, balanced in sign."""
    m = sign_matrix(4096, 64, seed=0)
    assert set(np.unique(m).tolist()) == {-1, 0, 1}
    nonzero = np.count_nonzero(m) / m.size
    assert 0.31 < nonzero < 0.36
    assert abs(float(m.astype(np.float64).mean())) < 0.01


def test_tokenize_normalises() -> None:
    """NFKC, case folding and word-character runs."""
    assert tokenize("Ｆｏｏ-BAR baz_1 Straße") == ["foo", "bar", "baz_1", "strasse"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("texts", "message"),
    [("one string", "sequence of strings"), (["ok", 3], r"texts\[1\] must be a string"), (None, "sequence")],
)
def test_bad_texts_are_refused(name: str, texts: object, message: str) -> None:
    """A string instead of a list, or a non-string item, raises ContractError naming it."""
    with pytest.raises(ContractError, match=message):
        EMBEDDERS.create(name).embed(texts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("factory", "kwargs", "message"),
    [
        (LocalHashEmbedder, {"dim": 0}, "dim must be between"),
        (LocalHashEmbedder, {"dim": True}, "dim must be an integer"),
        (LocalHashEmbedder, {"char_weight": -1.0}, "char_weight"),
        (RandomProjectionEmbedder, {"seed": -1}, "seed"),
        (RandomProjectionEmbedder, {"features": 1 << 20, "dim": 4096}, "features \\* dim"),
    ],
)
def test_bad_options_are_refused(factory: type, kwargs: dict[str, object], message: str) -> None:
    """Bad embedder options raise ContractError naming the option."""
    with pytest.raises(ContractError, match=message):
        factory(**kwargs)


def test_registry_lists_both_and_refuses_unknown() -> None:
    """Both built-ins are registered; an unknown name lists the registered ones."""
    assert {"local_hash", "random_projection"} <= set(EMBEDDERS.names())
    with pytest.raises(UnknownPiece, match="unknown embedding 'bert'; registered: .*local_hash"):
        EMBEDDERS.create("bert")


# -- the batch path against a text-by-text walk ----------------------------------------------------

_ALPHABET = st.sampled_from(
    list("abcXYZ019_ -.,'!\n\t")
    + ["é", "É", "ß", "ẞ", "ﬁ", "Σ", "σ", "ς", "苏", "黎", "カ", "\u0301", "\u00a0", "Ǆ", "Ⅻ", "①"]
    + ["\U0001f600", "\u200b", "İ", "ŉ"]
)
_WORDS = st.sampled_from(["the", "and", "of", "budget", "Ana", "Köln", "straße", "Q3", "a"])
_TEXT = st.one_of(
    st.text(_ALPHABET, max_size=40),
    st.lists(_WORDS, max_size=12).map(" ".join),
    st.text(max_size=30),
    st.integers(0, 3000).map(lambda k: "word " * k + "x" * k),
)


def _walk(features: _Features, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The features of ``texts`` by the definition, text by text and token by token (the
    reference the bulk path must equal entry for entry)."""
    rows: list[int] = []
    buckets: list[int] = []
    values: list[float] = []
    pairs: list[tuple[int, int, float]] = []

    def h(feature: str) -> int:
        digest = hashlib.blake2b(feature.encode(), digest_size=8, person=features.person).digest()
        return int.from_bytes(digest, "little")

    def signed(x: int, weight: float) -> float:
        return -weight if x >> 63 else weight

    for row, text in enumerate(texts):
        words = re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())
        kept = [w for w in words if w not in STOPWORDS] or words
        for word in kept:
            rows.append(row)
            buckets.append(h("w:" + word) % features.buckets)
            values.append(signed(h("w:" + word), 1.0))
            if features.char_weight > 0 and len(word) >= 4:
                marked = f"<{word}>"
                grams = [marked[i : i + 3] for i in range(len(marked) - 2)]
                for gram in grams:
                    rows.append(row)
                    buckets.append(h("c:" + gram) % features.buckets)
                    values.append(signed(h("c:" + gram), features.char_weight / math.sqrt(len(grams))))
        if features.bigram_weight > 0:
            for first, second in itertools.pairwise(kept):
                mixed = (h("w:" + first) * 0x9E3779B97F4A7C15 + h("w:" + second)) % 2**64
                mixed ^= mixed >> 30
                mixed = (mixed * 0xBF58476D1CE4E5B9) % 2**64
                mixed ^= mixed >> 27
                mixed = (mixed * 0x94D049BB133111EB) % 2**64
                mixed ^= mixed >> 31
                pairs.append((row, mixed % features.buckets, signed(mixed, features.bigram_weight)))
    return (
        np.array(rows + [p[0] for p in pairs], dtype=np.int64),
        np.array(buckets + [p[1] for p in pairs], dtype=np.int64),
        np.array(values + [p[2] for p in pairs], dtype=np.float64),
    )


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_TEXT, max_size=12), seen=st.lists(_TEXT, max_size=4))
def test_bulk_features_equal_the_text_by_text_walk(texts: list[str], seen: list[str]) -> None:
    """The batch's features are the walk's entries in the walk's order (so every sum is bit for bit
    the walk's), whichever tokens the vocabulary already holds."""
    features = LocalHashEmbedder()._features
    features.sparse(seen)
    got = features.sparse(texts)
    want = _walk(features, texts)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=10))
def test_batch_rows_equal_rows_embedded_alone(name: str, texts: list[str]) -> None:
    """Each row of a batch is bit for bit the vector of its text embedded alone."""
    e = EMBEDDERS.create(name)
    batch = e.embed(texts)
    fresh = EMBEDDERS.create(name)
    for i, text in enumerate(texts):
        assert np.array_equal(fresh.embed([text])[0], batch[i])


@given(text=st.text(st.characters(max_codepoint=127)))
def test_ascii_tokens_are_the_regex_tokens(text: str) -> None:
    """An ASCII text's fast tokens are those of NFKC, case folding and ``\\w+``."""
    assert tokenize(text) == re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


@given(texts=st.lists(st.text(st.sampled_from("ab Z_9\x01\n.é")), max_size=6))
def test_tokenize_rows_is_tokenize_of_each_text(texts: list[str]) -> None:
    """A column's tokens are each text's own, whether the column is ASCII, holds the separator
    ``\\x01`` the fast path joins with, or holds a non-ASCII text."""
    assert tokenize_rows(texts) == [tuple(tokenize(text)) for text in texts]


def test_vocabulary_refills_after_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the vocabulary's limit the next batch starts a new one, with the same vectors."""
    e = LocalHashEmbedder()
    texts = [f"word{i} other{i}" for i in range(50)]
    want = e.embed(texts)
    monkeypatch.setattr("coniti.embedding._CACHE_LIMIT", 10)
    e.embed(["filler " + " ".join(f"f{i}" for i in range(20))])
    assert len(e._features._vocab) > 10
    assert np.array_equal(e.embed(texts), want)
    assert len(e._features._vocab) <= 2 * len(texts) + 1
