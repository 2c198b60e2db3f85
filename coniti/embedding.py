"""Embedders: text -> vectors, with a spec that says exactly how.

An :class:`Embedder` turns a batch of texts into a float32 array of shape ``(n, dim)`` whose rows are
L2-normalised; a text with no word tokens gives an all-zero row. Its :attr:`~Embedder.spec` is a
canonical, JSON-serialisable description of everything that changes the output, and
:attr:`~Embedder.spec_id` is ``"emb-"`` + 12 hex digits of the SHA-256 of the spec's canonical JSON, so
the same spec has the same id on every machine and run. Memory records carry that id and the engine
refuses memory written under another one.

Built-in embedders (registered by name in :data:`EMBEDDERS`):

``local_hash``
    Signed feature hashing of normalised word tokens, word bigrams and character trigrams of each word
    into ``dim`` buckets (default 256).
``random_projection``
    The same features hashed into ``features`` buckets (default 16384), then projected to ``dim``
    (default 128) by a sparse random sign matrix (Achlioptas: +1 and -1 with probability 1/6 each, else
    0) generated from ``seed`` by SplitMix64, so the matrix is the same on every machine.

Normalisation: Unicode NFKC, then case folding; tokens are maximal runs of ``\\w`` characters.
Hashing is BLAKE2b (never Python's salted ``hash()``); results are bit-identical across processes.
Embedders are deterministic and safe to share between threads (their caches only ever hold values
that are pure functions of their keys).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
import pydantic

from coniti.contracts import Contract
from coniti.errors import ContractError
from coniti.registry import Registry, spec_id
from coniti.structure.scoring import unit_rows

__all__ = [
    "EMBEDDERS",
    "EmbeddingSpec",
    "Embedder",
    "LocalHashEmbedder",
    "RandomProjectionEmbedder",
    "tokenize",
    "tokenize_rows",
]

EMBEDDERS: Registry[Embedder] = Registry("embedding", "coniti.embedders")
"""Embedders by name; third parties add theirs here or in the ``coniti.embedders`` entry-point group."""

_TOKEN = re.compile(r"\w+")
_CACHE_LIMIT = 200_000


def tokenize(text: str) -> list[str]:
    """The word tokens of ``text``: NFKC-normalised, case-folded runs of word characters."""
    if text.isascii():
        return _ascii_tokens(text)
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


_ASCII_WORDS = bytes(
    ord(chr(c).lower()) if chr(c).isalnum() or c == 0x5F else 0x20 for c in range(128)
) + b" " * 128
"""A ``bytes.translate`` table: ASCII letters to lower case, digits and ``_`` kept, the rest spaces."""


_ASCII_ROWS = _ASCII_WORDS[:1] + b"\n" + _ASCII_WORDS[2:]
""":data:`_ASCII_WORDS`, but ``\\x01`` (the row separator of :func:`tokenize_rows`) kept as a line break."""


def tokenize_rows(texts: Sequence[str]) -> list[tuple[str, ...]]:
    """``[tuple(tokenize(text)) for text in texts]``: for a column of ASCII texts without ``\\x01``,
    one translation of the joined column and one split per text (no call per text); else text by
    text."""
    joined = "\x01".join(texts)
    if joined.isascii():
        rows = joined.encode("ascii").translate(_ASCII_ROWS).decode("ascii").split("\n")
        if len(rows) == len(texts):  # no text held the separator
            return [tuple(row.split()) for row in rows]
    return [tuple(tokenize(text)) for text in texts]


def _ascii_tokens(text: str) -> list[str]:
    """:func:`tokenize` of an ASCII ``text`` (NFKC changes no ASCII text, case folding of ASCII is
    ``lower``, and the ASCII word characters are letters, digits and ``_``), without the regex."""
    return text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()


class EmbeddingSpec(Contract):
    """Everything that determines an embedder's output. ``options`` holds JSON values only."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str = pydantic.Field(min_length=1)
    version: int = pydantic.Field(ge=1, strict=True)
    dim: int = pydantic.Field(ge=1, strict=True)
    options: dict[str, Any] = pydantic.Field(default_factory=dict)

    @property
    def spec_id(self) -> str:
        """``"emb-"`` + 12 hex digits of the SHA-256 of this spec's canonical JSON."""
        return spec_id("emb", self.to_dict())


class Embedder(ABC):
    """Texts -> ``(n, dim)`` float32 rows, L2-normalised (all-zero for a text with no tokens).

    Subclasses set :attr:`name`, build their :class:`EmbeddingSpec` and implement :meth:`_embed`, which
    receives validated texts in chunks of at most :attr:`chunk_size`.
    """

    name: ClassVar[str]
    chunk_size: ClassVar[int] = 1024
    """Texts handed to :meth:`_embed` at once (bounds the working memory of one call)."""
    uses_words: ClassVar[bool] = False
    """Whether the features start from :func:`tokenize` of each text, so that :meth:`embed_words`
    passes the caller's tokens to :meth:`_embed_words`."""

    @property
    @abstractmethod
    def spec(self) -> EmbeddingSpec:
        """The canonical description of this embedder."""

    @property
    def spec_id(self) -> str:
        """``"emb-"`` + 12 hex digits derived from :attr:`spec`."""
        return self.spec.spec_id

    @property
    def dim(self) -> int:
        """Length of every vector."""
        return self.spec.dim

    @property
    def options(self) -> dict[str, Any]:
        """The constructor options that reproduce this embedder (``type(e)(**e.options)``)."""
        return {"dim": self.dim}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (a sequence of strings, not one string) into a new ``(n, dim)`` float32 array."""
        return self._embed_all(texts, None)

    def embed_words(self, texts: Sequence[str], words: Sequence[Sequence[str]]) -> np.ndarray:
        """:meth:`embed` of ``texts``, given ``words[i]``: :func:`tokenize` of ``texts[i]`` (not
        checked against the texts). An embedder whose features start from those tokens (it
        declares :attr:`uses_words`) takes them instead of tokenising again; any other, and any
        whose class overrides :meth:`embed` (a wrapper must see every call), embeds the texts by
        :meth:`embed`. The vectors are the same either way."""
        if not self.uses_words or type(self).embed is not Embedder.embed:
            return self.embed(texts)
        if len(words) != len(texts):
            raise ContractError(f"words has {len(words)} items, texts {len(texts)}: one per text")
        return self._embed_all(texts, words)

    def _embed_all(self, texts: Sequence[str], words: Sequence[Sequence[str]] | None) -> np.ndarray:
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise ContractError(
                f"texts must be a sequence of strings, got {type(texts).__name__}"
            )
        batch = list(texts)
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise ContractError(f"texts[{i}] must be a string, got {type(text).__name__}")
        out = np.zeros((len(batch), self.dim), dtype=np.float32)
        step = self.chunk_size
        for start in range(0, len(batch), step):
            chunk = batch[start : start + step]
            rows = (
                self._embed(chunk) if words is None
                else self._embed_words(chunk, list(words[start : start + step]))
            )  # fmt: skip
            out[start : start + len(chunk)] = unit_rows(rows)
        return out

    @property
    def passage_chars(self) -> int | None:
        """The longest text (in characters) sure to be read whole by one vector; None: every text
        is (the default). A longer text's further passages come from :meth:`passage_vectors`
        (:mod:`coniti.passages`)."""
        return None

    def passage_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """For each text, the unit vectors of its passages after the first (the first is
        :meth:`embed`'s vector): a float32 array ``(p, dim)``, empty when the text fits in one
        vector. The default (an embedder that reads whole texts): none."""
        return [np.zeros((0, self.dim), dtype=np.float32) for _ in texts]

    def embed_one(self, text: str) -> np.ndarray:
        """Embed one text into a new 1-D float32 vector."""
        row: np.ndarray = self.embed([text])[0]
        return row

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unnormalised float64 rows ``(len(texts), dim)`` for already validated texts."""

    def _embed_words(self, texts: list[str], words: Sequence[Sequence[str]]) -> np.ndarray:
        """:meth:`_embed` of ``texts`` whose :func:`tokenize` tokens are ``words`` (with
        :attr:`uses_words`; the default ignores them)."""
        return self._embed(texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec_id}, dim={self.dim})"


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContractError(f"{name} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ContractError(f"{name} must be between {low} and {high}, got {value}")
    return value


STOPWORDS: frozenset[str] = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves"]
)
"""English function words left out of the features when a text has any other token (``en-v1``)."""


class _Features:
    """Hashed sparse features of texts: signed (bucket, weight) pairs.

    Tokens come from :func:`tokenize`; stop words are dropped unless nothing else is left. Per token:
    the word itself (weight 1) and, for words of 4 or more characters, its character trigrams with
    boundary markers (together ``char_weight``, split evenly in squared norm). Per adjacent pair of
    kept tokens: the bigram (weight ``bigram_weight``). A word's 64-bit BLAKE2b hash gives its bucket
    (hash mod buckets) and sign (top bit); a trigram is hashed the same way; a bigram's hash is
    SplitMix64's finaliser applied to ``h(first) * 0x9E3779B97F4A7C15 + h(second)`` mod 2**64.

    A batch is featurised in bulk: each distinct token is hashed once (and kept in a vocabulary of
    at most about ``_CACHE_LIMIT`` tokens, a pure function of the token; the trigrams of the words
    it holds are kept too, each hashed once), then numpy gathers every
    occurrence's features; the entries come out in the order a text-by-text, token-by-token walk
    gives them, so the sums of equal features are bit for bit those of that walk.
    """

    WORD_WEIGHT = 1.0
    MIN_CHAR_TOKEN = 4

    def __init__(self, buckets: int, char_weight: float, bigram_weight: float, person: bytes) -> None:
        self.buckets = buckets
        self.char_weight = char_weight
        self.bigram_weight = bigram_weight
        self.person = person
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        """Forget every token (the caller holds the lock)."""
        self._vocab: dict[str, int] = {}
        """Token -> its index in the columns below."""
        self._first = _Growing(np.int64)
        """Per token: the index of its first feature in ``_bucket``/``_value``."""
        self._count = _Growing(np.int64)
        """Per token: its number of features (the word, then its trigrams)."""
        self._word_hash = _Growing(np.uint64)
        self._stop = _Growing(np.bool_)
        self._bucket = _Growing(np.int64)
        self._value = _Growing(np.float64)
        self._gram_hash: dict[str, int] = {}
        """Character trigram -> its hash: words share most of their trigrams."""

    def spec_options(self) -> dict[str, Any]:
        """The recipe of these features, as it enters an embedder's spec (and so its spec id)."""
        return {
            "tokens": "nfkc-casefold-w+",
            "stopwords": "en-v1",
            "hash": "blake2b-8-signed",
            "char_ngram": 3,
            "char_weight": float(self.char_weight),
            "bigram_weight": float(self.bigram_weight),
        }

    def _hash(self, feature: str) -> int:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=self.person).digest()
        return int.from_bytes(digest, "little")

    def _learn(self, tokens: Iterable[str]) -> None:
        """Hash ``tokens`` (none known yet) into the vocabulary (the caller holds the lock)."""
        firsts: list[int] = []
        counts: list[int] = []
        hashes: list[int] = []
        stops: list[bool] = []
        idx: list[int] = []
        val: list[float] = []
        at = len(self._bucket)
        vocab, gram_hash = self._vocab, self._gram_hash
        for token in tokens:
            vocab[token] = len(vocab)
            h = self._hash("w:" + token)
            before = len(idx)
            idx.append(h % self.buckets)
            val.append(-self.WORD_WEIGHT if h >> 63 else self.WORD_WEIGHT)
            if self.char_weight > 0.0 and len(token) >= self.MIN_CHAR_TOKEN:
                marked = f"<{token}>"
                grams = [marked[i : i + 3] for i in range(len(marked) - 2)]
                weight = self.char_weight / math.sqrt(len(grams))
                for gram in grams:
                    g = gram_hash.get(gram)
                    if g is None:
                        g = gram_hash[gram] = self._hash("c:" + gram)
                    idx.append(g % self.buckets)
                    val.append(-weight if g >> 63 else weight)
            firsts.append(at + before)
            counts.append(len(idx) - before)
            hashes.append(h)
            stops.append(token in STOPWORDS)
        self._first.extend(firsts)
        self._count.extend(counts)
        self._word_hash.extend(hashes)
        self._stop.extend(stops)
        self._bucket.extend(idx)
        self._value.extend(val)

    def sparse(
        self, texts: list[str], words: Sequence[Sequence[str]] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, buckets, values)``: one entry per feature occurrence; ``rows`` index ``texts``
        (``words``: their :func:`tokenize` tokens, if known)."""
        n = len(texts)
        per_text = words if words is not None else [_ascii_tokens(t) if t.isascii() else tokenize(t) for t in texts]
        tokens = list(itertools.chain.from_iterable(per_text))
        with self._lock:
            if len(self._vocab) > _CACHE_LIMIT:
                self._clear()
            try:  # the usual case: every token known
                ids = np.fromiter(map(self._vocab.get, tokens), np.int64, len(tokens))
            except TypeError:  # a None: tokens to learn first
                self._learn(sorted(set(tokens).difference(self._vocab)))
                ids = np.fromiter(map(self._vocab.__getitem__, tokens), np.int64, len(tokens))
            stop = self._stop.view()[ids]
            token_rows = np.repeat(
                np.arange(n, dtype=np.int64), np.fromiter(map(len, per_text), np.int64, n)
            )
            # stop words count only in a text that has nothing else
            content = np.bincount(token_rows[~stop], minlength=n)
            kept = ~stop | (content[token_rows] == 0)
            ids, token_rows = ids[kept], token_rows[kept]
            first, count = self._first.view()[ids], self._count.view()[ids]
            hashes = self._word_hash.view()[ids]
            ends = np.cumsum(count)
            at = np.repeat(first - (ends - count), count) + np.arange(ends[-1] if ids.size else 0)
            buckets = self._bucket.view()[at]
            values = self._value.view()[at]
        rows = np.repeat(token_rows, count)
        if self.bigram_weight > 0.0 and ids.size:
            pair = token_rows[:-1] == token_rows[1:]
            with np.errstate(over="ignore"):
                mixed = _finalise(hashes[:-1][pair] * _SPLITMIX_GAMMA + hashes[1:][pair])
            signs = np.where(mixed >> np.uint64(63), -self.bigram_weight, self.bigram_weight)
            rows = np.concatenate((rows, token_rows[:-1][pair]))
            buckets = np.concatenate((buckets, (mixed % np.uint64(self.buckets)).astype(np.int64)))
            values = np.concatenate((values, signs))
        return rows, buckets, values


class _Growing:
    """A 1-D numpy column with amortised appends; :meth:`view` is the filled part (do not keep it
    across an :meth:`extend`)."""

    __slots__ = ("_data", "_size")

    def __init__(self, dtype: type[np.generic]) -> None:
        self._data = np.empty(1024, dtype=dtype)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def extend(self, values: Sequence[Any]) -> None:
        grown = self._size + len(values)
        if grown > self._data.size:
            data = np.empty(max(grown, 2 * self._data.size), dtype=self._data.dtype)
            data[: self._size] = self._data[: self._size]
            self._data = data
        self._data[self._size : grown] = np.array(values, dtype=self._data.dtype)
        self._size = grown

    def view(self) -> np.ndarray:
        return self._data[: self._size]


class LocalHashEmbedder(Embedder):
    """Signed feature hashing of words, word bigrams and character trigrams into ``dim`` buckets."""

    name: ClassVar[str] = "local_hash"
    VERSION: ClassVar[int] = 1
    uses_words: ClassVar[bool] = True
    chunk_size: ClassVar[int] = 128
    """Texts featurised at once: a chunk's temporaries (some KiB per text) stay within what the
    C allocator keeps for reuse; with chunks of 1024 texts it mapped them afresh and faulted them
    in page by page on every call (an engine ingest in batches of 500: 2.7 page faults per text
    at 1024, 0.4 at 128). Each row is a function of its own text only: the chunking never changes
    a vector."""

    def __init__(
        self, dim: int = 256, *, char_weight: float = 0.5, bigram_weight: float = 0.5
    ) -> None:
        self._dim = _check_int("dim", dim, 1, 1 << 16)
        self._features = _Features(
            self._dim,
            _check_weight("char_weight", char_weight),
            _check_weight("bigram_weight", bigram_weight),
            b"coniti-lh-v1",
        )
        self._spec = EmbeddingSpec(
            name=self.name,
            version=self.VERSION,
            dim=self._dim,
            options=self._features.spec_options(),
        )

    @property
    def spec(self) -> EmbeddingSpec:
        return self._spec

    @property
    def options(self) -> dict[str, Any]:
        return {
            "dim": self._dim,
            "char_weight": self._features.char_weight,
            "bigram_weight": self._features.bigram_weight,
        }

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._embed_words(texts, None)

    def _embed_words(self, texts: list[str], words: Sequence[Sequence[str]] | None) -> np.ndarray:
        rows, idx, val = self._features.sparse(texts, words)
        n, dim = len(texts), self._dim
        flat = np.bincount(rows * dim + idx, weights=val, minlength=n * dim)
        return flat.reshape(n, dim)


class RandomProjectionEmbedder(Embedder):
    """Hashed sparse features (``features`` buckets) projected to ``dim`` by a seeded sign matrix."""

    name: ClassVar[str] = "random_projection"
    VERSION: ClassVar[int] = 1
    uses_words: ClassVar[bool] = True
    chunk_size: ClassVar[int] = 128
    MAX_MATRIX: ClassVar[int] = 1 << 26

    def __init__(
        self,
        dim: int = 128,
        *,
        features: int = 1 << 14,
        seed: int = 0,
        char_weight: float = 0.5,
        bigram_weight: float = 0.5,
    ) -> None:
        self._dim = _check_int("dim", dim, 1, 4096)
        self._n_features = _check_int("features", features, 1, 1 << 20)
        self._seed = _check_int("seed", seed, 0, (1 << 63) - 1)
        if self._n_features * self._dim > self.MAX_MATRIX:
            raise ContractError(
                f"features * dim must be at most {self.MAX_MATRIX}, got {self._n_features * self._dim}"
            )
        self._features = _Features(
            self._n_features,
            _check_weight("char_weight", char_weight),
            _check_weight("bigram_weight", bigram_weight),
            b"coniti-rp-v1",
        )
        self._matrix: np.ndarray | None = None
        self._matrix_lock = threading.Lock()
        self._spec = EmbeddingSpec(
            name=self.name,
            version=self.VERSION,
            dim=self._dim,
            options={
                **self._features.spec_options(),
                "features": self._n_features,
                "seed": self._seed,
                "matrix": "achlioptas-splitmix64",
            },
        )

    @property
    def spec(self) -> EmbeddingSpec:
        return self._spec

    @property
    def options(self) -> dict[str, Any]:
        return {
            "dim": self._dim,
            "features": self._n_features,
            "seed": self._seed,
            "char_weight": self._features.char_weight,
            "bigram_weight": self._features.bigram_weight,
        }

    def matrix(self) -> np.ndarray:
        """The ``(features, dim)`` int8 projection matrix (built once, on first use; read-only)."""
        with self._matrix_lock:
            if self._matrix is None:
                self._matrix = sign_matrix(self._n_features, self._dim, self._seed)
            return self._matrix

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._embed_words(texts, None)

    def _embed_words(self, texts: list[str], words: Sequence[Sequence[str]] | None) -> np.ndarray:
        rows, idx, val = self._features.sparse(texts, words)
        n = len(texts)
        # Fold repeated (row, bucket) pairs first: far fewer rows of the matrix to gather.
        keys, inverse = np.unique(rows * self._n_features + idx, return_inverse=True)
        weights = np.bincount(inverse, weights=val, minlength=keys.size)
        key_rows = keys // self._n_features
        contributions = self.matrix()[keys % self._n_features].astype(np.float64)
        contributions *= weights[:, None]
        out = np.zeros((n, self._dim), dtype=np.float64)
        if keys.size:
            starts = np.flatnonzero(np.concatenate(([True], key_rows[1:] != key_rows[:-1])))
            out[key_rows[starts]] = np.add.reduceat(contributions, starts, axis=0)
        return out


_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SPLITMIX_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SPLITMIX_M2 = np.uint64(0x94D049BB133111EB)


def _finalise(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 values (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _SPLITMIX_M1
        z = (z ^ (z >> np.uint64(27))) * _SPLITMIX_M2
        out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def splitmix64(counter: np.ndarray, seed: int) -> np.ndarray:
    """SplitMix64 outputs for ``counter`` (uint64) under ``seed``; arithmetic wraps modulo 2**64."""
    with np.errstate(over="ignore"):
        state = np.uint64(seed) * _SPLITMIX_M2 + _SPLITMIX_GAMMA
        z = counter.astype(np.uint64) * _SPLITMIX_GAMMA + state
    return _finalise(z)


def sign_matrix(rows: int, cols: int, seed: int) -> np.ndarray:
    """An int8 ``(rows, cols)`` matrix of +1/-1 (probability 1/6 each) and 0, from ``seed``."""
    draws = splitmix64(np.arange(rows * cols, dtype=np.uint64), seed) % np.uint64(6)
    flat = np.zeros(rows * cols, dtype=np.int8)
    flat[draws == 0] = 1
    flat[draws == 1] = -1
    out: np.ndarray = flat.reshape(rows, cols)
    out.flags.writeable = False
    return out


def _check_weight(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ContractError(f"{name} must be a number, got {type(value).__name__}")
    out = float(value)
    if not math.isfinite(out) or out < 0.0:
        raise ContractError(f"{name} must be finite and >= 0, got {value!r}")
    return out


EMBEDDERS.register(LocalHashEmbedder.name, LocalHashEmbedder)
EMBEDDERS.register(RandomProjectionEmbedder.name, RandomProjectionEmbedder)


# Imported on first use: it needs the coniti[minilm] extra, and it imports this module.
EMBEDDERS.register("minilm", "coniti.minilm:MiniLMEmbedder")
