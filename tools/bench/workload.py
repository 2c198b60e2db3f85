"""The deterministic, seeded workload of ``tools/bench.py``.

Record ``i`` of a workload depends only on ``(seed, i)`` and the workload's options, never on how the
records are batched, so every system in a run (and every run with the same options) stores exactly the
same records. Per record: an id (uuid4, or time-ordered in the UUIDv7 layout), a text of about 200
characters, small metadata, a unit-length float32 vector (384 dimensions by default), a timestamp and a
namespace.

Timestamps follow write order, one second apart, with Gaussian jitter (sd 0.25 s); 5% of the records
arrive late, their timestamp pushed back by up to two minutes. So timestamps are mostly, not strictly,
increasing, like an agent's notes ingested as they happen.

With ``namespaces > 1`` each record goes to a random one of ``namespaces`` namespaces
``("tenant", "tNNN")``; with 1 it goes to ``()``.

Ids and timestamps of all records are held in memory (about 100 bytes a record); texts, metadata and
vectors are made block by block (``BLOCK`` records) on demand, and blocks are cached only when the
whole workload is small (``cache_limit`` records).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BLOCK", "EMBEDDING_ID", "Raw", "Workload", "WorkloadSpec"]

BLOCK = 500
EMBEDDING_ID = "bench-emb"
BASE_TIME = 1_700_000_000.0
SOURCES = ("chat", "email", "doc", "web", "tool", "note")


class Raw(NamedTuple):
    """One workload record, in plain Python values (the baselines store these directly)."""

    id: str
    text: str
    timestamp: float
    metadata: dict[str, Any]
    vector: np.ndarray
    namespace: tuple[str, ...]


@dataclass(frozen=True)
class WorkloadSpec:
    """Options that, with the seed, determine every record."""

    n: int
    extra: int = BLOCK
    seed: int = 7
    ids: str = "uuid4"
    namespaces: int = 1
    dim: int = 384

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.ids not in ("uuid4", "time"):
            raise ValueError(f"ids must be 'uuid4' or 'time', got {self.ids!r}")
        if self.namespaces < 1:
            raise ValueError(f"namespaces must be >= 1, got {self.namespaces}")

    @property
    def total(self) -> int:
        """Records made: ``n`` for the bulk load plus ``extra`` for single puts."""
        return self.n + self.extra


def _vocabulary(seed: int, size: int = 2048) -> list[str]:
    rng = np.random.default_rng([seed, 99])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 10, size)
    return ["".join(rng.choice(letters, int(k))) for k in lengths]


class Workload:
    """The records of one :class:`WorkloadSpec`; see the module docstring."""

    def __init__(self, spec: WorkloadSpec, cache_limit: int = 200_000) -> None:
        self.spec = spec
        total = spec.total
        rng = np.random.default_rng([spec.seed, 0])
        ts = BASE_TIME + np.arange(total, dtype=np.float64) + rng.normal(0.0, 0.25, total)
        late = rng.random(total) < 0.05
        ts[late] -= rng.uniform(0.0, 120.0, int(late.sum()))
        self.timestamps: list[float] = [round(float(t), 6) for t in ts]
        raw_ids = rng.bytes(16 * total)
        if spec.ids == "uuid4":
            self.ids = [
                uuid.UUID(bytes=raw_ids[16 * i : 16 * i + 16], version=4).hex for i in range(total)
            ]
        else:
            # UUIDv7 layout: 48-bit milliseconds of write time, version 7, then random bits.
            self.ids = []
            for i in range(total):
                ms = int((BASE_TIME + i) * 1000)
                rand = int.from_bytes(raw_ids[16 * i : 16 * i + 10], "big") >> 6
                value = (ms << 80) | (0x7 << 76) | (rand & ((1 << 76) - 1))
                value = (value & ~(0x3 << 62)) | (0x2 << 62)
                self.ids.append(f"{value:032x}")
        if spec.namespaces == 1:
            self.namespace_list: list[tuple[str, ...]] = [()]
            self.ns_index = np.zeros(total, dtype=np.int32)
        else:
            self.namespace_list = [("tenant", f"t{k:03d}") for k in range(spec.namespaces)]
            self.ns_index = rng.integers(0, spec.namespaces, total).astype(np.int32)
        self._words = _vocabulary(spec.seed)
        self._cache: dict[int, list[Raw]] | None = {} if total <= cache_limit else None

    def namespace_of(self, i: int) -> tuple[str, ...]:
        return self.namespace_list[int(self.ns_index[i])]

    def _block(self, b: int) -> list[Raw]:
        if self._cache is not None and b in self._cache:
            return self._cache[b]
        spec = self.spec
        start = b * BLOCK
        stop = min(start + BLOCK, spec.total)
        count = stop - start
        rng = np.random.default_rng([spec.seed, 1, b])
        vectors = rng.standard_normal((count, spec.dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        word_idx = rng.integers(0, len(self._words), (count, 60)).tolist()
        sources = rng.integers(0, len(SOURCES), count).tolist()
        scores = rng.random(count).tolist()
        tags = rng.integers(0, 50, (count, 2)).tolist()
        words = self._words
        out: list[Raw] = []
        for j in range(count):
            i = start + j
            parts: list[str] = []
            length = -1
            for w in word_idx[j]:
                parts.append(words[w])
                length += len(words[w]) + 1
                if length >= 195:
                    break
            text = " ".join(parts)
            meta = {
                "source": SOURCES[sources[j]],
                "turn": i,
                "tags": [f"tag{tags[j][0]}", f"tag{tags[j][1]}"],
                "score": round(scores[j], 3),
            }
            out.append(
                Raw(self.ids[i], text, self.timestamps[i], meta, vectors[j], self.namespace_of(i))
            )
        if self._cache is not None:
            self._cache[b] = out
        return out

    def records(self, start: int, stop: int) -> list[Raw]:
        """Records ``start`` (inclusive) to ``stop`` (exclusive), in write order."""
        if not 0 <= start <= stop <= self.spec.total:
            raise ValueError(f"records({start}, {stop}) outside 0..{self.spec.total}")
        out: list[Raw] = []
        b = start // BLOCK
        while b * BLOCK < stop:
            block = self._block(b)
            lo = max(start - b * BLOCK, 0)
            hi = min(stop - b * BLOCK, len(block))
            out.extend(block[lo:hi])
            b += 1
        return out

    def batches(self, start: int, stop: int, size: int = BLOCK) -> Iterator[list[Raw]]:
        """Records ``start`` to ``stop`` in batches of ``size``."""
        for lo in range(start, stop, size):
            yield self.records(lo, min(lo + size, stop))
