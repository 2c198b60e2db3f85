"""One size limit for a note, at write time, consistent with the files: a note of at most
MAX_NOTE_BYTES as JSON is stored and round-trips through a memory file and a log export even with the
largest blob and the longest audit stamps; a larger one is refused before anything is written."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from cli_support import Cli, no_traceback

from coniti.actor import Note
from coniti.batch import NoteBatch
from coniti.errors import ContractError, MemoryFileError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.jsonl import MAX_BLOB_BYTES, MAX_LINE_BYTES, MAX_NOTE_BYTES, MAX_STAMP_CHARS, read_lines
from coniti.memory import MemoryRecord, PatchOp, PutRequest, WriteRequest

FIXED = len('"n"') + len("{}") + len('""')
"""The JSON bytes of a note with id "n", no metadata and an empty text."""


def _note(text: str) -> Note:
    return Note(id="n", text=text, timestamp=1.0)


def test_a_note_at_the_limit_is_accepted() -> None:
    """A note whose id, text and metadata take exactly MAX_NOTE_BYTES as JSON is a valid Note."""
    assert len(_note("x" * (MAX_NOTE_BYTES - FIXED)).text) == MAX_NOTE_BYTES - FIXED


def test_a_note_one_byte_over_the_limit_is_refused() -> None:
    """One byte more is a ContractError naming the size and the limit."""
    with pytest.raises(ContractError, match=f"at most {MAX_NOTE_BYTES:,}"):
        _note("x" * (MAX_NOTE_BYTES - FIXED + 1))


def test_the_limit_counts_json_escapes() -> None:
    """A control character takes six bytes as JSON (\\u0001), so a text of them is measured as the
    memory file writes it, not by its length."""
    fits = (MAX_NOTE_BYTES - FIXED) // 6
    assert _note("\x01" * fits).text
    with pytest.raises(ContractError, match="as JSON"):
        _note("\x01" * (fits + 1))


def test_the_limit_counts_metadata() -> None:
    """Metadata counts towards the same limit."""
    big = {"k": "x" * (MAX_NOTE_BYTES // 2)}
    with pytest.raises(ContractError, match="as JSON"):
        Note(id="n", text="x" * (MAX_NOTE_BYTES // 2), timestamp=1.0, metadata=big)


def test_a_note_batch_refuses_a_row_over_the_limit() -> None:
    """NoteBatch refuses the row Note refuses, naming it."""
    with pytest.raises(ContractError, match=r"notes\[1\] \(id 'b'\): .*at most"):
        NoteBatch(["a", "b"], ["fine", "x" * MAX_NOTE_BYTES], [1.0, 2.0])


def test_a_patch_whose_result_is_over_the_limit_is_refused() -> None:
    """A patch that grows a note past the limit (new metadata on a large text) writes nothing."""
    memory = InMemoryBackend()
    text = "x" * (MAX_NOTE_BYTES - FIXED - 100)
    memory.put(PutRequest(records=[MemoryRecord(note=_note(text), vector=None)]))
    patch = PatchOp(id="n", metadata={"grown": "y" * 200})
    with pytest.raises(ContractError, match=r"ops\[0\]: the note takes"):
        memory.write(WriteRequest(ops=[patch]))
    assert memory.get(memory.get_request(["n"])).records[0].note.metadata == {}


def test_an_audit_stamp_over_its_limit_is_refused(tmp_path: Path) -> None:
    """An actor or reason longer than MAX_STAMP_CHARS is refused before anything is written."""
    with LogBackend(tmp_path / "store") as store:
        with pytest.raises(ContractError, match="reason is"), store.audit(reason="r" * (MAX_STAMP_CHARS + 1)):
            store.set_meta(store.meta_set_request("k", 1))
        assert store.head == 0


@pytest.mark.parametrize("written_by", ["dump", "hand"])
def test_a_memory_file_with_a_note_over_the_limit_is_not_loaded(written_by: str) -> None:
    """A line holding a note over the limit (under the line limit: a file from elsewhere) is
    refused naming its line, whether written as dump writes lines (the fast paths) or not, and
    nothing is loaded."""
    from coniti.testing.memfile_cases import header, jsonl, rec

    line = rec("big") | {"note": {"id": "big", "text": "x" * MAX_NOTE_BYTES, "timestamp": 1.0, "metadata": {}}}
    text = jsonl(header(1), line)
    if written_by == "dump":  # the compact form dump writes (orjson), read by the canonical fast path
        import orjson

        text = jsonl(header(1), orjson.dumps(line).decode())
    memory = InMemoryBackend()
    with pytest.raises(MemoryFileError, match="line 2: .*at most"):
        memory.load(io.StringIO(text))
    assert memory.namespaces() == []


def _longest_line(path: Path) -> int:
    return max(len(text.encode()) for _, text in read_lines(path))


def test_a_record_at_every_limit_round_trips_through_both_files(tmp_path: Path) -> None:
    """A note at MAX_NOTE_BYTES with a blob of MAX_BLOB_BYTES and a 384-dimension vector, written
    under the longest actor and reason, dumps and loads back identical, and exports and imports
    into a store with the same head hash; no line of either file passes MAX_LINE_BYTES."""
    rng = np.random.default_rng(7)
    record = MemoryRecord(
        note=_note("x" * (MAX_NOTE_BYTES - FIXED)),
        vector=rng.standard_normal(384).astype(np.float32),
        embedding_id="emb-000000000000",
        namespace=("big",),
        blob=rng.bytes(MAX_BLOB_BYTES),
    )
    source = tmp_path / "source"
    with LogBackend(source) as store:
        with store.audit(actor="a" * MAX_STAMP_CHARS, reason="r" * MAX_STAMP_CHARS):
            store.put(PutRequest(records=[record]))
        assert store.dump(tmp_path / "big.jsonl", ("big",)) == 1
        store.export_log(tmp_path / "history.jsonl")
        head_hash = store.head_hash
    assert _longest_line(tmp_path / "big.jsonl") <= MAX_LINE_BYTES
    assert _longest_line(tmp_path / "history.jsonl") <= MAX_LINE_BYTES
    with LogBackend(tmp_path / "loaded") as loaded:
        assert loaded.load(tmp_path / "big.jsonl") == 1
        (back,) = loaded.get(loaded.get_request(["n"], ("big",))).records
        assert back.identical(record)
    with LogBackend.import_log(tmp_path / "history.jsonl", tmp_path / "imported") as imported:
        assert imported.head_hash == head_hash


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(tmp_path / "store", capsys, monkeypatch)


def test_add_of_a_note_over_the_limit_is_refused_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti add - of a 35 MB text (the issue's case) exits 1 at once with one line naming the
    limit, and creates no store (it used to take 28 s and 2.6 GB, then write a note whose dump and
    export could not be read back)."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"x" * 35_000_000)))
    result = cli("add", "-", "--embedding", "local_hash")
    assert result.code == 1 and no_traceback(result) and result.err.count("\n") == 1
    assert f"at most {MAX_NOTE_BYTES:,}" in result.err and not cli.store.exists()
