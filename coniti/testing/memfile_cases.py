"""Memory files for the conformance suite: a header builder and every kind of bad file the spec lists.

Line 1 is the header; record lines follow from line 2.
"""

from __future__ import annotations

import json
from typing import Any

from coniti.testing.helpers import record

__all__ = ["BAD_FILES", "DROP", "header", "jsonl", "rec"]

DROP = object()
"""Pass as a header field's value to leave the field out."""


def header(count: int | Any, **fields: Any) -> dict[str, Any]:
    """A valid 1.0.0 header for ``count`` records, with ``fields`` replaced (or dropped with DROP)."""
    out: dict[str, Any] = {
        "format": "coniti-memory",
        "version": "1.0.0",
        "embedding_id": None,
        "namespace": [],
        "created_at": "2026-10-30T09:24:42Z",
        "count": count,
    }
    out.update(fields)
    return {k: v for k, v in out.items() if v is not DROP}


def rec(record_id: str, timestamp: float = 1.0, **kwargs: Any) -> dict[str, Any]:
    """A valid record line's object, as ``MemoryRecord.to_dict()`` gives it."""
    return record(record_id, timestamp, **kwargs).to_dict()


def jsonl(*objects: Any) -> str:
    """Objects as JSON Lines (strings are taken as already-written lines)."""
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects)


def _good(n: int = 2) -> str:
    return jsonl(header(n), *[rec(f"f{i}", float(i)) for i in range(n)])


def _with(field: str, value: Any) -> str:
    """One record whose ``field`` (dotted path into the record) is replaced by raw JSON text."""
    obj = rec("f0", 1.0, metadata={"m": 1})
    parts = field.split(".")
    target = obj
    for p in parts[:-1]:
        target = target[p]
    target[parts[-1]] = "@@RAW@@"
    return jsonl(header(1), json.dumps(obj).replace('"@@RAW@@"', value))


def _without(field: str) -> str:
    obj = rec("f0", 1.0)
    del obj[field]
    return jsonl(header(1), obj)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _truncated() -> str:
    text = _good(3)
    return text[: len(text) - 40]


BAD_FILES: dict[str, str | bytes] = {
    # the format name and version
    "format-name-wrong": jsonl(header(0, format="coniti-memories")),
    "format-name-missing": jsonl(header(0, format=DROP)),
    "format-name-number": jsonl(header(0, format=1)),
    "version-major-2": jsonl(header(0, version="2.0.0")),
    "version-major-0": jsonl(header(0, version="0.9.0")),
    "version-not-semver": jsonl(header(0, version="1.0")),
    "version-prefixed": jsonl(header(0, version="v1.0.0")),
    "version-number": jsonl(header(0, version=1.0)),
    "version-missing": jsonl(header(0, version=DROP)),
    # the header fields
    "count-negative": jsonl(header(-1)),
    "count-string": jsonl(header("2"), rec("a"), rec("b")),
    "count-float": jsonl(header(2.0), rec("a"), rec("b")),
    "count-bool": jsonl(header(True), rec("a")),
    "count-missing": jsonl(header(DROP), rec("a")),
    "namespace-string": jsonl(header(0, namespace="alice")),
    "namespace-empty-part": jsonl(header(0, namespace=[""])),
    "namespace-number-part": jsonl(header(0, namespace=[1])),
    "namespace-missing": jsonl(header(0, namespace=DROP)),
    "embedding-id-number": jsonl(header(0, embedding_id=5)),
    "embedding-id-missing": jsonl(header(0, embedding_id=DROP)),
    "created-at-garbage": jsonl(header(0, created_at="yesterday")),
    "created-at-number": jsonl(header(0, created_at=1700000000)),
    "created-at-missing": jsonl(header(0, created_at=DROP)),
    "header-not-object": jsonl([1, 2]),
    "header-not-json": "coniti-memory 1.0.0\n",
    "empty-file": "",
    "only-a-newline": "\n",
    # blank lines
    "blank-line-between-records": jsonl(header(2), rec("a"), "", rec("b")),
    "blank-line-after-header": jsonl(header(1), "", rec("a")),
    "blank-line-at-end": jsonl(header(1), rec("a"), ""),
    "whitespace-only-line": jsonl(header(2), rec("a"), "   ", rec("b")),
    # invalid records
    "record-not-object": jsonl(header(1), 5),
    "record-not-json": jsonl(header(1), "{not json"),
    "record-missing-vector": _without("vector"),
    "record-missing-note": _without("note"),
    "record-empty-vector": _with("vector", "[]"),
    "record-nested-vector": _with("vector", "[[1.0]]"),
    "record-string-in-vector": _with("vector", '[1.0, "x"]'),
    "record-bad-dtype": jsonl(header(1), {**rec("a"), "dtype": "int8"}),
    "record-empty-id": _with("note.id", '""'),
    "record-string-timestamp": _with("note.timestamp", '"10"'),
    "record-bool-timestamp": _with("note.timestamp", "true"),
    "record-metadata-list": _with("note.metadata", "[1]"),
    "record-namespace-string": _with("namespace", '"alice"'),
    "record-namespace-empty-part": _with("namespace", '[""]'),
    "record-unknown-field": jsonl(header(1), {**rec("a"), "colour": "red"}),
    "truncated-last-line": _truncated(),
    # non-finite tokens and numbers that overflow to infinity
    "nan-in-vector": _with("vector", "[NaN, 1.0]"),
    "infinity-timestamp": _with("note.timestamp", "Infinity"),
    "minus-infinity-metadata": _with("note.metadata.m", "-Infinity"),
    "nan-in-header": jsonl('{"format": "coniti-memory", "version": "1.0.0", "embedding_id": NaN, '
                           '"namespace": [], "created_at": "2026-10-30T09:24:42Z", "count": 0}'),
    "overflow-in-vector": _with("vector", "[1e999, 1.0]"),
    "overflow-timestamp": _with("note.timestamp", "1e400"),
    # times past the horizon, years 1 to 9999 UTC (coniti.times)
    "timestamp-in-year-10000": _with("note.timestamp", "253402300800.0"),
    "timestamp-before-year-1": _with("note.timestamp", "-62135596801"),
    "expires-at-in-year-273792727": jsonl(header(1), {**rec("a"), "expires_at": 8639999999913600.0}),
    "overflow-in-metadata": _with("note.metadata.m", "-1e999"),
    "overflow-float32-vector": jsonl(header(1), {**rec("a"), "vector": [1e39], "dtype": "float32"}),
    "integer-beyond-64-bits-in-metadata": _with("note.metadata.m", str(2**70)),
    "negative-integer-beyond-64-bits-in-metadata": _with("note.metadata.m", str(-(2**63) - 1)),
    "overflow-float16-vector": jsonl(header(1), {**rec("a"), "vector": [7e4], "dtype": "float16"}),
    # duplicate JSON keys
    "duplicate-key-in-record": jsonl(header(1), json.dumps(rec("a"))[:-1] + ', "embedding_id": "x"}'),
    "duplicate-key-in-metadata": _with("note.metadata", '{"k": 1, "k": 2}'),
    "duplicate-key-in-header": jsonl(json.dumps(header(0))[:-1] + ', "count": 0}'),
    # deep nesting
    "deep-nesting-in-metadata": _with("note.metadata.m", _deep(100_000)),
    "deep-nesting-in-header": jsonl(json.dumps(header(0))[:-1] + ', "x": ' + _deep(100_000) + "}"),
    "deep-nesting-in-vector": _with("vector", _deep(100_000)),
    "nesting-beyond-json-limit-in-metadata": _with("note.metadata.m", _deep(100)),
    # duplicate ids and counts
    "duplicate-id": jsonl(header(2), rec("a", 1.0), rec("a", 2.0)),
    "duplicate-id-far-apart": jsonl(header(4), rec("a"), rec("b"), rec("c"), rec("a")),
    "count-short": jsonl(header(3), rec("a"), rec("b")),
    "count-long": jsonl(header(1), rec("a"), rec("b")),
    "records-missing": jsonl(header(2)),
    # encoding
    "invalid-utf8": jsonl(header(1)).encode() + b'{"note": {"id": "\xff\xfe"}}\n',
}
"""Every kind of bad file: name -> content (text, or raw bytes). Each must be refused, target unchanged."""
