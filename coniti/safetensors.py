"""A strict reader of the safetensors format, on numpy alone (no torch, no ``safetensors`` package).

The format: 8 bytes holding ``N``, the header's length (unsigned, little-endian); ``N`` bytes of UTF-8
JSON, an object mapping each tensor's name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional
``"__metadata__"`` object of string values); then the data buffer, each tensor's bytes at
``[begin, end)`` of it, little-endian, row-major. The header may be padded with trailing spaces.

Checked, each failure raising :class:`SafetensorsError` naming the file (and the tensor): the header
length fits the file and is at most :data:`MAX_HEADER`; the header is a JSON object with exactly those
keys per tensor; dtype is one of :data:`DTYPES`; shape is a list of non-negative integers; the
offsets hold exactly ``prod(shape) * itemsize`` bytes; and the tensors tile the buffer: sorted by
offset they start at 0, leave no gap, never overlap and end at the file's end.

``BF16`` tensors (which numpy lacks) are widened to float32 exactly; every other dtype keeps its own.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from coniti.errors import SafetensorsError

__all__ = ["DTYPES", "MAX_HEADER", "SafetensorsError", "TensorFile", "parse_safetensors"]

MAX_HEADER = 100_000_000
"""The largest header accepted, in bytes (the reference implementation's limit)."""

DTYPES: dict[str, str] = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}
"""The safetensors dtypes read, with the numpy dtype of their stored bytes."""

_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})


@dataclass(frozen=True)
class TensorFile:
    """The tensors of one safetensors file: name -> read-only array, plus the header's metadata."""

    path: str
    tensors: dict[str, np.ndarray]
    metadata: dict[str, str]


def parse_safetensors(data: bytes | mmap.mmap, path: str | os.PathLike[str]) -> TensorFile:
    """Parse the bytes of a safetensors file (``path`` only names it in errors and the result), given
    as ``bytes`` or as a read-only memory map of the file.

    Arrays are read-only views of ``data`` (``BF16`` ones are new float32 arrays), which they keep
    alive; a tensor whose offset is not a multiple of its item size is a view that numpy marks
    unaligned. Copy them to get aligned, writable memory.
    """
    name = os.fspath(path)

    def fail(message: str) -> SafetensorsError:
        return SafetensorsError(f"{name}: not a valid safetensors file: {message}")

    if len(data) < 8:
        raise fail(f"{len(data)} bytes, shorter than the 8-byte header length")
    size = int.from_bytes(data[:8], "little")
    if size > MAX_HEADER:
        raise fail(f"header length {size} exceeds the limit of {MAX_HEADER} bytes")
    if 8 + size > len(data):
        raise fail(f"header length {size} runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8 : 8 + size].decode("utf-8"), object_pairs_hook=_unique)
    except (UnicodeDecodeError, ValueError) as exc:
        raise fail(f"the header is not UTF-8 JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise fail(f"the header is a JSON {type(header).__name__}, not an object")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise fail("__metadata__ must be an object of string values")

    buffer = memoryview(data)[8 + size :]
    entries: list[tuple[int, int, str]] = []
    tensors: dict[str, np.ndarray] = {}
    for tensor, entry in header.items():
        begin, end, dtype, shape = _entry(tensor, entry, fail)
        count = math.prod(shape)
        expected = count * np.dtype(DTYPES[dtype]).itemsize
        if end - begin != expected:
            raise fail(
                f"tensor {tensor!r}: data_offsets [{begin}, {end}] hold {end - begin} bytes, "
                f"but {dtype} {shape} needs {expected}"
            )
        if end > len(buffer):
            raise fail(
                f"tensor {tensor!r}: data_offsets end at {end}, past the data's {len(buffer)} bytes"
            )
        entries.append((begin, end, tensor))
        array = np.frombuffer(buffer, dtype=DTYPES[dtype], count=count, offset=begin).reshape(shape)
        if dtype == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
            array.flags.writeable = False
        tensors[tensor] = array

    position = 0
    for begin, end, tensor in sorted(entries):
        if begin != position:
            what = "overlaps the tensor before it" if begin < position else "leaves a gap before it"
            raise fail(f"tensor {tensor!r} starts at {begin}: {what} (expected {position})")
        position = end
    if position != len(buffer):
        raise fail(f"the tensors cover {position} bytes of data, but the file holds {len(buffer)}")
    return TensorFile(path=name, tensors=tensors, metadata=dict(metadata))


def _entry(tensor: str, entry: Any, fail: Any) -> tuple[int, int, str, list[int]]:
    """``(begin, end, dtype, shape)`` of one header entry, checked."""
    if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
        keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        raise fail(f"tensor {tensor!r}: expected keys dtype, shape, data_offsets, got {keys}")
    dtype = entry["dtype"]
    if dtype not in DTYPES:
        raise fail(f"tensor {tensor!r}: unsupported dtype {dtype!r} (known: {', '.join(DTYPES)})")
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(_natural(d) for d in shape):
        raise fail(
            f"tensor {tensor!r}: shape must be a list of non-negative integers, got {shape!r}"
        )
    offsets = entry["data_offsets"]
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_natural(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise fail(
            f"tensor {tensor!r}: data_offsets must be [begin, end] with 0 <= begin <= end, "
            f"got {offsets!r}"
        )
    return offsets[0], offsets[1], dtype, shape


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key that appears twice is an error, not "last one wins"."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice")
        out[key] = value
    return out


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
