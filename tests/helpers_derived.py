"""Helpers for tests that read or damage a snapshot's files (``log/DERIVED.md``, format 3: one
file of arrays per snapshot, each array at the ``offset`` its manifest entry records)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def array_place(manifest_path: Path, label: str) -> tuple[Path, int, int]:
    """``(file, offset, size)``: where the bytes of the array ``label`` (``"part/field"``) of the
    snapshot whose manifest is ``manifest_path`` lie."""
    manifest = json.loads(manifest_path.read_bytes())
    entry = manifest["arrays"][label]
    file = manifest_path.parent / manifest["data"] / manifest["file"]
    return file, int(entry["offset"]), int(entry["bytes"])


def read_parts(manifest_path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every array of the snapshot, copied out of its file, by part and field."""
    manifest = json.loads(manifest_path.read_bytes())
    raw = (manifest_path.parent / manifest["data"] / manifest["file"]).read_bytes()
    parts: dict[str, dict[str, np.ndarray]] = {}
    for label, entry in manifest["arrays"].items():
        part, _, field = label.partition("/")
        count = int(np.prod(entry["shape"], dtype=np.int64))
        array = np.frombuffer(raw, np.dtype(entry["dtype"]), count, entry["offset"])
        parts.setdefault(part, {})[field] = array.reshape(entry["shape"]).copy()
    return parts


def flip_byte(manifest_path: Path, label: str, at: int, mask: int = 0x01) -> None:
    """XOR byte ``at`` of the array ``label``'s data (negative: from its end) with ``mask``."""
    file, offset, size = array_place(manifest_path, label)
    raw = bytearray(file.read_bytes())
    raw[offset + (at % size)] ^= mask
    file.write_bytes(bytes(raw))
