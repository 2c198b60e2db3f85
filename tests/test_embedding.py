"""Embedders: normalised rows, stable spec ids, determinism across processes, input checks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from coniti.embedding import (
    EMBEDDERS,
    EmbeddingSpec,
    LocalHashEmbedder,
    RandomProjectionEmbedder,
    sign_matrix,
    tokenize,
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
