"""Conformance: ``load`` refuses every kind of bad file with MemoryFileError and changes nothing."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path

import pytest

from coniti.errors import MemoryFileError
from coniti.memfile import MAX_LINE_BYTES
from coniti.memory import MemoryBackend, MetaSetRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import put, record, state
from coniti.testing.memfile_cases import BAD_FILES, header, jsonl, rec

__all__ = ["RejectTests"]

NAMESPACES = [(), ("alice",), ("bob",)]


def _prepare(backend: MemoryBackend) -> None:
    """Give the target something to keep: records in () and ('bob',), an embedding id in ('bob',)."""
    put(backend, record("keep", 5.0), record("keep", 5.0, namespace=("bob",)))
    backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-bob", namespace=("bob",)))


def _refused(backend: MemoryBackend, source: Path | io.StringIO, **kwargs: object) -> str:
    """Load ``source``, expect MemoryFileError and an unchanged target; return the message."""
    _prepare(backend)
    before = state(backend, NAMESPACES)
    with pytest.raises(MemoryFileError) as info:
        backend.load(source, **kwargs)  # type: ignore[arg-type]
    assert state(backend, NAMESPACES) == before
    return str(info.value)


def _line(n: int, message: str) -> bool:
    return re.search(rf"\bline {n}\b", message) is not None


class RejectTests(BackendFixtures):
    """Every bad file is refused with MemoryFileError, naming the line, and the target is unchanged."""

    @pytest.mark.parametrize("case", sorted(BAD_FILES))
    def test_bad_file_is_refused(self, backend: MemoryBackend, tmp_path: Path, case: str) -> None:
        """Each kind of bad file raises MemoryFileError and leaves the target unchanged."""
        content = BAD_FILES[case]
        path = tmp_path / "bad.jsonl"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        _refused(backend, path)

    @pytest.mark.parametrize("case", ["nan-in-vector", "duplicate-id", "count-short", "version-major-2"])
    def test_bad_stream_is_refused(self, backend: MemoryBackend, case: str) -> None:
        """A bad file given as a text stream is refused the same way."""
        content = BAD_FILES[case]
        assert isinstance(content, str)
        _refused(backend, io.StringIO(content))

    @pytest.mark.parametrize("case", ["nan-in-vector", "count-long", "header-not-json"])
    def test_bad_gz_file_is_refused(self, backend: MemoryBackend, tmp_path: Path, case: str) -> None:
        """A bad file inside valid gzip is refused the same way."""
        content = BAD_FILES[case]
        assert isinstance(content, str)
        path = tmp_path / "bad.jsonl.gz"
        path.write_bytes(gzip.compress(content.encode()))
        _refused(backend, path)

    def test_absurdly_long_line_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A line longer than memfile.MAX_LINE_BYTES is refused with MemoryFileError, naming it."""
        path = tmp_path / "long.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(header(1)) + "\n")
            f.write('{"note": {"id": "a", "text": "')
            chunk = "x" * (1 << 20)
            for _ in range(MAX_LINE_BYTES // len(chunk) + 1):
                f.write(chunk)
            f.write('", "timestamp": 1.0, "metadata": {}}, "vector": [1.0]}\n')
        message = _refused(backend, path)
        assert _line(2, message), message

    def test_not_gzip_named_gz_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A .gz path that is not gzip is refused with MemoryFileError."""
        path = tmp_path / "bad.jsonl.gz"
        path.write_bytes(jsonl(header(1), rec("a")).encode())
        _refused(backend, path)

    def test_truncated_gzip_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A gzip file cut short is refused with MemoryFileError."""
        path = tmp_path / "bad.jsonl.gz"
        data = gzip.compress(jsonl(header(50), *[rec(f"r{i}") for i in range(50)]).encode())
        path.write_bytes(data[: len(data) // 2])
        _refused(backend, path)

    def test_corrupt_gzip_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A gzip file with damaged bytes in the middle is refused with MemoryFileError."""
        path = tmp_path / "bad.jsonl.gz"
        data = bytearray(gzip.compress(jsonl(header(50), *[rec(f"r{i}") for i in range(50)]).encode()))
        for i in range(20, 60):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        _refused(backend, path)

    def test_missing_file_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A path that does not exist raises MemoryFileError."""
        _refused(backend, tmp_path / "nothing.jsonl")

    def test_directory_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A path that is a directory raises MemoryFileError."""
        _refused(backend, tmp_path)

    # -- errors name the line --------------------------------------------------------------

    def test_header_error_names_line_1(self, backend: MemoryBackend) -> None:
        """A header problem is reported at line 1."""
        message = _refused(backend, io.StringIO(BAD_FILES["created-at-garbage"]))  # type: ignore[arg-type]
        assert _line(1, message), message

    def test_invalid_record_names_its_line(self, backend: MemoryBackend) -> None:
        """An invalid record is reported with its line number (header = line 1)."""
        text = jsonl(header(3), rec("a"), {**rec("b"), "vector": []}, rec("c"))
        message = _refused(backend, io.StringIO(text))
        assert _line(3, message), message

    def test_blank_line_names_its_line(self, backend: MemoryBackend) -> None:
        """A blank line is reported with its line number."""
        message = _refused(backend, io.StringIO(jsonl(header(2), rec("a"), "", rec("b"))))
        assert _line(3, message), message

    def test_non_finite_token_names_its_line(self, backend: MemoryBackend) -> None:
        """A NaN token is reported with its line number."""
        text = jsonl(header(2), rec("a"), json.dumps(rec("b")).replace("1.0", "NaN", 1))
        message = _refused(backend, io.StringIO(text))
        assert _line(3, message), message

    def test_duplicate_id_names_id_and_line(self, backend: MemoryBackend) -> None:
        """A duplicate id is reported with the id and the line of its second occurrence."""
        text = jsonl(header(4), rec("a"), rec("dup"), rec("b"), rec("dup"))
        message = _refused(backend, io.StringIO(text))
        assert "dup" in message and _line(5, message), message

    def test_count_mismatch_is_named(self, backend: MemoryBackend) -> None:
        """A count mismatch says so."""
        message = _refused(backend, io.StringIO(jsonl(header(3), rec("a"), rec("b"))))
        assert re.search(r"\bcount\b|\b3\b.*\b2\b", message), message

    # -- semantic refusals -----------------------------------------------------------------

    def test_existing_id_is_refused(self, backend: MemoryBackend) -> None:
        """A record id that already exists in the target namespace is refused, naming the id."""
        message = _refused(backend, io.StringIO(jsonl(header(2), rec("new"), rec("keep"))))
        assert "keep" in message and "already exists" in message, message

    def test_existing_id_in_rehomed_namespace_is_refused(self, backend: MemoryBackend) -> None:
        """When re-homing, ids are checked against the namespace loaded into."""
        message = _refused(
            backend, io.StringIO(jsonl(header(1), rec("keep", namespace=("x",)))), namespace=("bob",)
        )
        assert "keep" in message, message

    def test_rehoming_that_creates_duplicates_is_refused(self, backend: MemoryBackend) -> None:
        """Re-homing two namespaces that share an id into one namespace is refused."""
        text = jsonl(header(2), rec("a", namespace=("x",)), rec("a", namespace=("y",)))
        _refused(backend, io.StringIO(text), namespace=("alice",))

    def test_embedding_mismatch_is_refused(self, backend: MemoryBackend) -> None:
        """A file whose embedding id differs from the target namespace's is refused."""
        text = jsonl(header(1, embedding_id="emb-file", namespace=["bob"]), rec("a", namespace=("bob",)))
        message = _refused(backend, io.StringIO(text))
        assert "emb-file" in message or "embedding" in message.lower(), message

    def test_embedding_mismatch_in_rehomed_namespace_is_refused(
        self, backend: MemoryBackend
    ) -> None:
        """When re-homing, the embedding id is compared with the namespace loaded into."""
        text = jsonl(header(1, embedding_id="emb-file"), rec("a"))
        _refused(backend, io.StringIO(text), namespace=("bob",))

    # -- the order of concern --------------------------------------------------------------

    def test_format_is_checked_before_records(self, backend: MemoryBackend) -> None:
        """With a bad format name and a bad record, the format is reported."""
        text = jsonl(header(2, format="other"), rec("a"), {**rec("b"), "vector": []})
        message = _refused(backend, io.StringIO(text))
        assert "format" in message.lower() and not _line(3, message), message

    def test_header_is_checked_before_records(self, backend: MemoryBackend) -> None:
        """With a bad header field and a bad record, the header field is reported."""
        text = jsonl(header(2, created_at="yesterday"), rec("a"), {**rec("b"), "vector": []})
        message = _refused(backend, io.StringIO(text))
        assert "created_at" in message and not _line(3, message), message

    def test_records_are_checked_before_duplicates(self, backend: MemoryBackend) -> None:
        """With a duplicate id and a later invalid record, the invalid record is reported."""
        text = jsonl(header(3), rec("a"), rec("a"), {**rec("b"), "vector": []})
        message = _refused(backend, io.StringIO(text))
        assert _line(4, message), message

    def test_duplicates_are_checked_before_count(self, backend: MemoryBackend) -> None:
        """With a duplicate id and a count mismatch, the duplicate is reported."""
        text = jsonl(header(5), rec("a"), rec("dupe"), rec("dupe"))
        message = _refused(backend, io.StringIO(text))
        assert "dupe" in message, message

    def test_count_is_checked_before_embedding(self, backend: MemoryBackend) -> None:
        """With a count mismatch and an embedding mismatch, the count is reported."""
        text = jsonl(header(2, embedding_id="emb-file", namespace=["bob"]), rec("a", namespace=("bob",)))
        message = _refused(backend, io.StringIO(text))
        assert re.search(r"\bcount\b|\b2\b.*\b1\b", message), message
        assert "emb-file" not in message, message

    def test_embedding_is_checked_before_existing_ids(self, backend: MemoryBackend) -> None:
        """With an embedding mismatch and an existing id, the embedding mismatch is reported."""
        text = jsonl(header(1, embedding_id="emb-file", namespace=["bob"]), rec("keep", namespace=("bob",)))
        message = _refused(backend, io.StringIO(text))
        assert "already exists" not in message, message

    def test_invalid_utf8_is_reported_on_its_line(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """An invalid UTF-8 byte on line 5 is reported as line 5 (lines are decoded one by one)."""
        lines = [json.dumps(header(4))] + [json.dumps(rec(f"r{i}")) for i in range(4)]
        data = "\n".join(lines).encode() + b"\n"
        at = data.index(b"r3")
        path = tmp_path / "bad-utf8.jsonl"
        path.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
        message = _refused(backend, path)
        assert _line(5, message) and "UTF-8" in message, message
