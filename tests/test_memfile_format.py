"""The exact bytes ``dump`` writes for a record line: pinned, so that a faster writer cannot drift."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pytest

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, MemoryRecord, PutRequest

NOTE = Note(
    id="n-1",
    text='café "q"\n',
    timestamp=1700000000.25,
    metadata={"k": [1, 2.5, True, None], "z": {"a": "b"}},
)
VALUES = [1 / 3, -2.0, 1e-3, 65504.0]
NOTE_TEXT = (
    b'{"note":{"id":"n-1","text":"caf\xc3\xa9 \\"q\\"\\n","timestamp":1700000000.25,'
    b'"metadata":{"k":[1,2.5,true,null],"z":{"a":"b"}}},'
)
LINES = {
    "float16": NOTE_TEXT + b'"vector":[0.33325195,-2.0,0.0010004044,65504.0],'
    b'"embedding_id":"emb","namespace":["a","b"],"dtype":"float16"}',
    "float32": NOTE_TEXT + b'"vector":[0.33333334,-2.0,0.001,65504.0],'
    b'"embedding_id":"emb","namespace":["a","b"],"dtype":"float32"}',
    "float64": NOTE_TEXT + b'"vector":[0.3333333333333333,-2.0,0.001,65504.0],'
    b'"embedding_id":"emb","namespace":["a","b"]}',
}
SURROGATE_LINE = (
    b'{"note":{"id":"s","text":"t\\u00e9\\ud800x","timestamp":2.0,"metadata":{}},"vector":[0.5,1.5],'
    b'"embedding_id":null,"namespace":["a"],"dtype":"float32"}'
)


@pytest.fixture(params=["memory", "log"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryBackend:
    if request.param == "memory":
        return InMemoryBackend()
    return LogBackend(tmp_path / "store", durability="nosync")


def _put(backend: MemoryBackend, dtype: str) -> None:
    vector = np.array(VALUES, dtype=dtype)
    record = MemoryRecord(note=NOTE, vector=vector, embedding_id="emb", namespace=("a", "b"))
    backend.put(PutRequest(records=[record]))


def _record_lines(data: bytes) -> list[bytes]:
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")[1:]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_record_line_bytes_to_a_path(backend: MemoryBackend, tmp_path: Path, dtype: str) -> None:
    """A dumped record line is exactly the pinned bytes for a float16, float32 or float64 vector."""
    _put(backend, dtype)
    backend.dump(tmp_path / "m.jsonl", namespace=("a", "b"))
    assert _record_lines((tmp_path / "m.jsonl").read_bytes()) == [LINES[dtype]]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_record_line_bytes_in_gzip(backend: MemoryBackend, tmp_path: Path, dtype: str) -> None:
    """A .gz dump decompresses to the same pinned record line."""
    _put(backend, dtype)
    backend.dump(tmp_path / "m.jsonl.gz", namespace=("a", "b"))
    assert _record_lines(gzip.decompress((tmp_path / "m.jsonl.gz").read_bytes())) == [LINES[dtype]]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_record_line_text_to_a_stream(backend: MemoryBackend, dtype: str) -> None:
    """A text stream receives the pinned record line as text."""
    _put(backend, dtype)
    stream = io.StringIO()
    backend.dump(stream, namespace=("a", "b"))
    assert _record_lines(stream.getvalue().encode("utf-8")) == [LINES[dtype]]


def test_lone_surrogate_line_is_ascii_escaped(tmp_path: Path) -> None:
    """A record holding a lone surrogate (text the contracts refuse now, which a store written
    before that can hold; built here as a store reads it back, unvalidated) is written by the
    standard encoder: ASCII with \\u escapes (also for other non-ASCII text of that line)."""
    backend = InMemoryBackend()
    namespace = ("a",)
    vector = np.array([0.5, 1.5], dtype="float32")
    note = Note.trusted("s", "té\ud800x", 2.0, {})
    backend.put(PutRequest(records=[MemoryRecord.trusted(note, vector, None, namespace)]))
    backend.dump(tmp_path / "m.jsonl", namespace=namespace)
    stream = io.StringIO()
    backend.dump(stream, namespace=namespace)
    assert _record_lines((tmp_path / "m.jsonl").read_bytes()) == [SURROGATE_LINE]
    assert _record_lines(stream.getvalue().encode("utf-8")) == [SURROGATE_LINE]


def test_many_records_span_write_chunks(backend: MemoryBackend, tmp_path: Path) -> None:
    """Records beyond one page are all written, in scan order, each on its own line."""
    records = [
        MemoryRecord(
            note=Note(id=f"r{i}", text="x" * 50, timestamp=float(i), metadata={}),
            vector=np.full(4, i, dtype="float32"),
        )
        for i in range(1203)
    ]
    backend.put(PutRequest(records=records))
    assert backend.dump(tmp_path / "m.jsonl") == 1203
    lines = _record_lines((tmp_path / "m.jsonl").read_bytes())
    assert [line.split(b'"', 6)[5] for line in lines] == [f"r{i}".encode() for i in range(1203)]
