"""Conformance: ``dump`` writes the memory file (spec: "Serialisation and the memory file")."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from coniti.errors import MemoryBackendError, MemoryFileError, StoreError
from coniti.memory import DeleteRequest, MemoryBackend, MemoryRecord, MetaSetRequest, ScanRequest
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import WrappedBackend, exact, put, record, scan_all

__all__ = ["DumpTests"]

HEADER_FIELDS = {"format", "version", "embedding_id", "namespace", "created_at", "count"}
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _fill(backend: MemoryBackend, n: int = 3, namespace: tuple[str, ...] = ()) -> None:
    put(backend, *[record(f"r{i}", float(i), namespace=namespace) for i in range(n)])


def _lines(path: Path) -> list[str]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        text: str = f.read()
    assert text.endswith("\n")
    return text[:-1].split("\n")


def _partials(path: Path) -> list[Path]:
    """The temporary files a dump to ``path`` writes through (``.<name>.<random>.partial``)."""
    return sorted(path.parent.glob(f".{path.name}.*.partial"))


def _fail(call: int, request: Any) -> None:
    raise StoreError("injected failure while scanning")


class DumpTests(BackendFixtures):
    """dump: path, stream or .gz; the header; the temporary file + rename guarantee; refused targets;
    the count check."""

    def test_dump_returns_record_count(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """dump returns the number of records written."""
        _fill(backend, 3)
        assert backend.dump(tmp_path / "m.jsonl") == 3

    def test_dump_accepts_str_path(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A str path works like a Path."""
        _fill(backend, 2)
        assert backend.dump(str(tmp_path / "m.jsonl")) == 2
        assert len(_lines(tmp_path / "m.jsonl")) == 3

    def test_header_has_the_documented_fields(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """The first line is the header with exactly format, version, embedding_id, namespace,
        created_at and count."""
        _fill(backend, 2)
        backend.dump(tmp_path / "m.jsonl")
        head = json.loads(_lines(tmp_path / "m.jsonl")[0])
        assert set(head) == HEADER_FIELDS
        assert head["format"] == "coniti-memory"
        assert head["version"] == "1.1.0"
        assert head["namespace"] == []
        assert head["count"] == 2

    def test_created_at_is_rfc3339_utc_now(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """created_at is RFC 3339 with a Z offset, and is the time of the dump."""
        before = time.time()
        backend.dump(tmp_path / "m.jsonl")
        after = time.time()
        created = json.loads(_lines(tmp_path / "m.jsonl")[0])["created_at"]
        assert RFC3339_Z.match(created), created
        stamp = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        assert before - 1.0 <= stamp <= after + 1.0

    def test_records_are_record_lines_in_scan_order(
        self, backend: MemoryBackend, tmp_path: Path
    ) -> None:
        """Each line after the header is one record in the to_dict() form (same fields; from_dict
        gives the record back bit for bit), in scan order."""
        put(
            backend,
            record("b", 2.0, dtype="float32", vector=[1 / 3, 1e-40]),
            record("a", 1.0, dtype="float16", vector=[0.1, 65504.0], embedding_id="e"),
            record("c", 2.0, vector=[1 / 3, 5e-324], metadata={"x": [1, 1.0, True]}),
        )
        backend.dump(tmp_path / "m.jsonl")
        lines = [json.loads(line) for line in _lines(tmp_path / "m.jsonl")[1:]]
        stored = scan_all(backend)
        assert [set(line) for line in lines] == [set(r.to_dict()) for r in stored]
        assert [exact(MemoryRecord.from_dict(line)) for line in lines] == [exact(r) for r in stored]

    def test_one_line_per_record_whatever_the_text(
        self, backend: MemoryBackend, tmp_path: Path
    ) -> None:
        """Newlines, carriage returns and line separators inside text never split a record line."""
        put(backend, record("a", 1.0, text="one\ntwo\r\nthree\u2028four\x85five\x00"))
        backend.dump(tmp_path / "m.jsonl")
        lines = _lines(tmp_path / "m.jsonl")
        assert len(lines) == 2
        assert json.loads(lines[1])["note"]["text"] == "one\ntwo\r\nthree\u2028four\x85five\x00"

    def test_embedding_id_comes_from_meta(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """The header's embedding_id is the namespace's embedding_id metadata."""
        backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-74006f08273e"))
        backend.dump(tmp_path / "m.jsonl")
        assert json.loads(_lines(tmp_path / "m.jsonl")[0])["embedding_id"] == "emb-74006f08273e"

    def test_embedding_id_is_not_inferred_from_records(
        self, backend: MemoryBackend, tmp_path: Path
    ) -> None:
        """Without the metadata, the header says null even if records carry an embedding id."""
        put(backend, record("a", 1.0, embedding_id="emb-1"))
        backend.dump(tmp_path / "m.jsonl")
        assert json.loads(_lines(tmp_path / "m.jsonl")[0])["embedding_id"] is None

    def test_dump_writes_only_its_namespace(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """dump(namespace=...) writes that namespace's records, and names it in the header."""
        _fill(backend, 2)
        _fill(backend, 3, ("alice",))
        _fill(backend, 4, ("alice", "x"))
        backend.set_meta(MetaSetRequest(key="embedding_id", value="e-root"))
        assert backend.dump(tmp_path / "m.jsonl", namespace=("alice",)) == 3
        lines = [json.loads(line) for line in _lines(tmp_path / "m.jsonl")]
        assert lines[0]["namespace"] == ["alice"]
        assert lines[0]["embedding_id"] is None
        assert [r["namespace"] for r in lines[1:]] == [["alice"]] * 3

    def test_dump_of_empty_namespace(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """An empty namespace dumps as a header with count 0 and nothing else."""
        assert backend.dump(tmp_path / "m.jsonl") == 0
        lines = _lines(tmp_path / "m.jsonl")
        assert len(lines) == 1
        assert json.loads(lines[0])["count"] == 0

    def test_dump_to_stream(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A text stream receives the same lines as a path (created_at aside)."""
        _fill(backend, 3)
        stream = io.StringIO()
        assert backend.dump(stream) == 3
        backend.dump(tmp_path / "m.jsonl")
        from_stream = stream.getvalue()[:-1].split("\n")
        from_path = _lines(tmp_path / "m.jsonl")
        assert from_stream[1:] == from_path[1:]
        head = json.loads(from_stream[0])
        del head["created_at"]
        expected = json.loads(from_path[0])
        del expected["created_at"]
        assert head == expected

    def test_dump_to_gz_path_is_gzip(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A path ending in .gz is written gzip-compressed, holding the same lines."""
        _fill(backend, 3)
        assert backend.dump(tmp_path / "m.jsonl.gz") == 3
        assert (tmp_path / "m.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
        backend.dump(tmp_path / "m.jsonl")
        assert _lines(tmp_path / "m.jsonl.gz")[1:] == _lines(tmp_path / "m.jsonl")[1:]

    def test_dump_to_plain_path_is_utf8_text(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A path not ending in .gz is plain UTF-8 JSON Lines with \\n line endings."""
        put(backend, record("a", 1.0, text="ünïcode"))
        backend.dump(tmp_path / "m.jsonl")
        raw = (tmp_path / "m.jsonl").read_bytes()
        assert raw.startswith(b"{")
        assert b"\r" not in raw
        raw.decode("utf-8")

    @pytest.mark.parametrize("name", ["m.jsonl", "m.jsonl.gz"])
    def test_dumped_file_is_private(self, backend: MemoryBackend, tmp_path: Path, name: str) -> None:
        """A dumped file is readable and writable by its owner only (0600)."""
        _fill(backend, 1)
        backend.dump(tmp_path / name)
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600

    def test_dump_replaces_an_existing_file(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """Dumping over an existing file replaces it completely."""
        path = tmp_path / "m.jsonl"
        path.write_text("old content\n" * 100)
        _fill(backend, 1)
        backend.dump(path)
        assert len(_lines(path)) == 2
        assert not _partials(path)

    def test_dump_writes_through_a_partial_file(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """While records are read, one .<name>.<random>.partial is being written and the target is
        still the old file."""
        path = tmp_path / "m.jsonl"
        path.write_text("previous\n")
        seen: list[tuple[bool, str]] = []
        _fill(backend, 3)

        def look(call: int, request: ScanRequest) -> None:
            seen.append((len(_partials(path)) == 1, path.read_text()))

        WrappedBackend(backend, before_scan=look).dump(path)
        assert seen and all(s == (True, "previous\n") for s in seen)
        assert not _partials(path)
        assert len(_lines(path)) == 4

    def test_failed_dump_keeps_previous_file(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A dump that fails midway leaves the previous file byte for byte and no temporary file."""
        path = tmp_path / "m.jsonl"
        path.write_bytes(b"previous file\n")
        _fill(backend, 3)
        with pytest.raises(MemoryBackendError):
            WrappedBackend(backend, before_scan=_fail).dump(path)
        assert path.read_bytes() == b"previous file\n"
        assert not _partials(path)

    def test_failed_dump_creates_nothing(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A dump that fails with no previous file leaves no file and no temporary file."""
        path = tmp_path / "m.jsonl.gz"
        _fill(backend, 3)
        with pytest.raises(MemoryBackendError):
            WrappedBackend(backend, before_scan=_fail).dump(path)
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize("change", ["insert", "delete"])
    def test_memory_changing_mid_dump_raises(
        self, backend: MemoryBackend, tmp_path: Path, change: str
    ) -> None:
        """If memory changes while dumping so the count no longer matches, dump raises
        MemoryFileError, and the previous file stays with no temporary file left."""
        path = tmp_path / "m.jsonl"
        path.write_bytes(b"previous file\n")
        _fill(backend, 3)

        def meddle(call: int, request: ScanRequest) -> None:
            if call == 1 and change == "insert":
                put(backend, record("intruder", 0.5))
            elif call == 1:
                backend.delete(DeleteRequest(ids=["r2"]))

        with pytest.raises(MemoryFileError):
            WrappedBackend(backend, before_scan=meddle).dump(path)
        assert path.read_bytes() == b"previous file\n"
        assert not _partials(path)

    def test_memory_changing_mid_dump_to_stream_raises(self, backend: MemoryBackend) -> None:
        """The count check also applies to a stream: dump raises MemoryFileError."""
        _fill(backend, 3)

        def meddle(call: int, request: ScanRequest) -> None:
            if call == 1:
                put(backend, record("intruder", 0.5))

        with pytest.raises(MemoryFileError):
            WrappedBackend(backend, before_scan=meddle).dump(io.StringIO())

    def test_dump_into_missing_directory_raises(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """An I/O error while dumping (no such directory) is a MemoryFileError."""
        _fill(backend, 1)
        with pytest.raises(MemoryFileError):
            backend.dump(tmp_path / "missing" / "m.jsonl")

    # -- hostile targets ---------------------------------------------------------------------

    def test_planted_partial_symlink_is_not_followed(
        self, backend: MemoryBackend, tmp_path: Path
    ) -> None:
        """A symlink planted at <target>.partial (the old temporary name) is not followed: the file
        it points to keeps its bytes, and the dump succeeds through a new, random name."""
        victim = tmp_path / "victim"
        victim.write_bytes(b"precious\n")
        path = tmp_path / "m.jsonl"
        path.with_name("m.jsonl.partial").symlink_to(victim)
        _fill(backend, 2)
        assert backend.dump(path) == 2
        assert victim.read_bytes() == b"precious\n"
        assert len(_lines(path)) == 3

    @pytest.mark.parametrize("kind", ["directory", "fifo", "socket"])
    def test_target_that_is_not_a_regular_file_is_refused(
        self, backend: MemoryBackend, tmp_path: Path, kind: str
    ) -> None:
        """A target that exists and is a directory, FIFO or socket (as a device would be: st_mode not
        regular) is refused with MemoryFileError naming what it is; it stays what it was and no
        temporary file is left."""
        import socket

        path = tmp_path / "target"
        sock = None
        if kind == "directory":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
        try:
            _fill(backend, 1)
            before = os.stat(path).st_mode
            with pytest.raises(MemoryFileError, match="not a regular file"):
                backend.dump(path)
            assert os.stat(path).st_mode == before
            assert not _partials(path)
        finally:
            if sock is not None:
                sock.close()

    def test_symlink_to_a_fifo_is_refused(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """A symlink whose target is not a regular file (here a FIFO, as /dev/full is a device) is
        refused too: the check follows links."""
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        link = tmp_path / "link"
        link.symlink_to(fifo)
        _fill(backend, 1)
        with pytest.raises(MemoryFileError, match="FIFO"):
            backend.dump(link)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link.is_symlink()

    def test_leftover_of_a_killed_dump_is_removed_by_the_next(
        self, backend: MemoryBackend, tmp_path: Path
    ) -> None:
        """A temporary file left by a killed dump (nobody holds its lock) is removed by the next dump
        to the same target."""
        path = tmp_path / "m.jsonl"
        leftover = tmp_path / ".m.jsonl.0123456789abcdef.partial"
        leftover.write_bytes(b"half a dump\n")
        _fill(backend, 1)
        backend.dump(path)
        assert not leftover.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]
