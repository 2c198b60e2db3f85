"""Conformance: ``load`` reads the memory file (spec: "Serialisation and the memory file")."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import pytest

from coniti.errors import MemoryFileError, StoreError
from coniti.memory import MemoryBackend, MetaGetRequest, MetaSetRequest, PutRequest
from coniti.testing.fixtures import BackendFactory, BackendFixtures
from coniti.testing.helpers import WrappedBackend, count, exact, ids, put, record, scan_all, state
from coniti.testing.memfile_cases import header, jsonl, rec

__all__ = ["LoadTests", "RollbackTests"]


def _embedding(backend: MemoryBackend, namespace: tuple[str, ...] = ()) -> Any:
    return backend.get_meta(MetaGetRequest(key="embedding_id", namespace=namespace)).value


def _records() -> list[Any]:
    return [
        record("a", 1.0, metadata={"k": [1, 2.5]}),
        record("b", 1.0, dtype="float16", vector=[0.1, 65504.0]),
        record("c", -3.0, dtype="float32", vector=[1 / 3], embedding_id="emb-1"),
        record("d", 1.0, text="last\nline"),
    ]


class LoadTests(BackendFixtures):
    """load: path, stream or .gz; namespaces and re-homing; the embedding id travels."""

    @pytest.mark.parametrize("name", ["m.jsonl", "m.jsonl.gz"])
    def test_dump_then_load_is_bit_for_bit(
        self, make_backend: BackendFactory, tmp_path: Path, name: str
    ) -> None:
        """A dumped file loads into another backend as the same records, bit for bit, in scan order."""
        source, target = make_backend(), make_backend()
        put(source, *_records())
        source.dump(tmp_path / name)
        assert target.load(tmp_path / name) == 4
        assert [exact(r) for r in scan_all(target)] == [exact(r) for r in scan_all(source)]

    def test_load_accepts_str_path(self, make_backend: BackendFactory, tmp_path: Path) -> None:
        """A str path works like a Path."""
        source, target = make_backend(), make_backend()
        put(source, *_records())
        source.dump(tmp_path / "m.jsonl")
        assert target.load(str(tmp_path / "m.jsonl")) == 4

    def test_load_from_stream(self, make_backend: BackendFactory) -> None:
        """A text stream loads like a file."""
        source, target = make_backend(), make_backend()
        put(source, *_records())
        stream = io.StringIO()
        source.dump(stream)
        stream.seek(0)
        assert target.load(stream) == 4
        assert [exact(r) for r in scan_all(target)] == [exact(r) for r in scan_all(source)]

    def test_load_handwritten_gz(self, backend: MemoryBackend, tmp_path: Path) -> None:
        """Any gzip-compressed file named .gz loads (not only ones dump wrote)."""
        with gzip.open(tmp_path / "m.jsonl.gz", "wt", encoding="utf-8") as f:
            f.write(jsonl(header(2), rec("a", 1.0), rec("b", 2.0)))
        assert backend.load(tmp_path / "m.jsonl.gz") == 2
        assert ids(scan_all(backend)) == ["a", "b"]

    def test_load_header_only(self, backend: MemoryBackend) -> None:
        """A file with count 0 and no records loads nothing and returns 0."""
        assert backend.load(io.StringIO(jsonl(header(0)))) == 0
        assert count(backend) == 0

    def test_load_adds_to_existing_records(self, backend: MemoryBackend) -> None:
        """load adds to a namespace that already holds other ids."""
        put(backend, record("x", 0.0))
        backend.load(io.StringIO(jsonl(header(2), rec("a", 1.0), rec("b", 2.0))))
        assert ids(scan_all(backend)) == ["x", "a", "b"]

    def test_load_keeps_write_order_of_equal_timestamps(self, backend: MemoryBackend) -> None:
        """Records with equal timestamps scan in file order after loading."""
        backend.load(io.StringIO(jsonl(header(3), rec("z", 1.0), rec("a", 1.0), rec("m", 1.0))))
        assert ids(scan_all(backend)) == ["z", "a", "m"]

    def test_load_keeps_each_records_namespace(self, backend: MemoryBackend) -> None:
        """With namespace=None every record goes to its own namespace."""
        text = jsonl(header(3), rec("a", namespace=("x",)), rec("a", namespace=("y",)), rec("b"))
        assert backend.load(io.StringIO(text)) == 3
        assert [ids(scan_all(backend, ns)) for ns in [("x",), ("y",), ()]] == [["a"], ["a"], ["b"]]

    def test_load_rehomes_into_namespace(self, backend: MemoryBackend) -> None:
        """load(namespace=...) puts every record into that namespace, and nowhere else."""
        text = jsonl(header(2), rec("a", 1.0), rec("b", 2.0, namespace=("x",)))
        assert backend.load(io.StringIO(text), namespace=("bob",)) == 2
        got = scan_all(backend, ("bob",))
        assert ids(got) == ["a", "b"]
        assert {r.namespace for r in got} == {("bob",)}
        assert count(backend) == 0
        assert count(backend, ("x",)) == 0

    def test_load_with_the_same_major_version(self, backend: MemoryBackend) -> None:
        """A file of a later minor or patch version of major 1 is accepted."""
        text = jsonl(header(1, version="1.7.3"), rec("a"))
        assert backend.load(io.StringIO(text)) == 1

    def test_embedding_id_travels_to_header_namespace(self, backend: MemoryBackend) -> None:
        """If the file has an embedding id and the target none, load sets it in the header's namespace."""
        text = jsonl(header(1, embedding_id="emb-a", namespace=["alice"]), rec("a", namespace=("alice",)))
        backend.load(io.StringIO(text))
        assert _embedding(backend, ("alice",)) == "emb-a"
        assert _embedding(backend) is None

    def test_embedding_id_travels_to_rehomed_namespace(self, backend: MemoryBackend) -> None:
        """When re-homing, the embedding id is set in the namespace loaded into."""
        text = jsonl(header(1, embedding_id="emb-a"), rec("a"))
        backend.load(io.StringIO(text), namespace=("bob",))
        assert _embedding(backend, ("bob",)) == "emb-a"
        assert _embedding(backend) is None

    def test_matching_embedding_id_loads(self, backend: MemoryBackend) -> None:
        """A file whose embedding id equals the target's loads."""
        backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-a"))
        assert backend.load(io.StringIO(jsonl(header(1, embedding_id="emb-a"), rec("a")))) == 1

    def test_file_without_embedding_id_skips_the_check(self, backend: MemoryBackend) -> None:
        """A file with embedding_id null loads into a target that has one, which keeps it."""
        backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-t"))
        assert backend.load(io.StringIO(jsonl(header(1), rec("a")))) == 1
        assert _embedding(backend) == "emb-t"

    def test_target_embedding_id_elsewhere_does_not_block(self, backend: MemoryBackend) -> None:
        """Only the embedding id of the namespace loaded into is compared."""
        backend.set_meta(MetaSetRequest(key="embedding_id", value="emb-other"))
        text = jsonl(header(1, embedding_id="emb-a"), rec("a"))
        assert backend.load(io.StringIO(text), namespace=("bob",)) == 1

    def test_existing_id_elsewhere_does_not_block(self, backend: MemoryBackend) -> None:
        """An id that exists only in another namespace of the target does not block the load."""
        put(backend, record("a", 1.0))
        assert backend.load(io.StringIO(jsonl(header(1), rec("a"))), namespace=("bob",)) == 1


class RollbackTests(BackendFixtures):
    """load validates everything before writing, writes in batches, and rolls back a failed write."""

    def test_bad_last_line_of_a_long_file_writes_nothing(self, backend: MemoryBackend) -> None:
        """A long file whose very last record is invalid writes nothing (validation comes first)."""
        lines = [rec(f"r{i}", float(i), vector=[1.0]) for i in range(1200)]
        lines[-1]["vector"] = []
        with pytest.raises(MemoryFileError):
            backend.load(io.StringIO(jsonl(header(1200), *lines)))
        assert count(backend) == 0

    def test_existing_last_id_of_a_long_file_writes_nothing(self, backend: MemoryBackend) -> None:
        """A long file whose last id already exists in the target writes nothing."""
        put(backend, record("r1199", 0.0))
        lines = [rec(f"r{i}", float(i), vector=[1.0]) for i in range(1200)]
        with pytest.raises(MemoryFileError):
            backend.load(io.StringIO(jsonl(header(1200), *lines)))
        assert count(backend) == 1

    def _failing_load(self, backend: MemoryBackend, embedding_id: str | None) -> MemoryFileError:
        """Load 1200 records through a wrapper whose second put fails; return the error raised."""
        lines = [rec(f"r{i}", float(i), vector=[1.0]) for i in range(1200)]
        text = jsonl(header(1200, embedding_id=embedding_id), *lines)

        def fail_second(call: int, request: PutRequest) -> None:
            if call == 2:
                raise StoreError("injected failure on the second batch")

        wrapper = WrappedBackend(backend, before_put=fail_second)
        with pytest.raises(MemoryFileError) as info:
            wrapper.load(io.StringIO(text))
        assert wrapper.put_calls >= 2
        return info.value

    def test_failed_write_is_rolled_back(self, backend: MemoryBackend) -> None:
        """When a batch write fails midway, what was written is deleted and other records stay."""
        put(backend, record("keep", 0.5))
        before = state(backend)
        self._failing_load(backend, None)
        assert state(backend) == before

    def test_failed_write_says_rolled_back(self, backend: MemoryBackend) -> None:
        """The error says the load was rolled back and keeps the write error as its cause."""
        error = self._failing_load(backend, None)
        assert "rolled back" in str(error)
        assert isinstance(error.__cause__, StoreError)

    def test_failed_write_leaves_embedding_id_unset(self, backend: MemoryBackend) -> None:
        """A rolled-back load does not leave the file's embedding id set in the target."""
        self._failing_load(backend, "emb-a")
        assert _embedding(backend) is None

    def test_batches_hold_at_most_500(self, backend: MemoryBackend) -> None:
        """load writes in batches of at most 500 records."""
        sizes: list[int] = []

        def measure(call: int, request: PutRequest) -> None:
            sizes.append(len(request.records))

        lines = [rec(f"r{i}", float(i), vector=[1.0]) for i in range(1200)]
        WrappedBackend(backend, before_put=measure).load(io.StringIO(jsonl(header(1200), *lines)))
        assert sum(sizes) == 1200
        assert max(sizes) <= 500
