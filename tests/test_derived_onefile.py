"""A snapshot's arrays live in one file (``log/DERIVED.md``, format 3): one open and one map per
snapshot at reopen, the same checks as before (size, dtype, shape, each block's checksum); a
damaged file is never used, and a snapshot of format 2 (one ``.npy`` file per array, what the code
before wrote) is still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_derived import array_place, flip_byte, read_parts
from test_derived import answers, engine, fresh, notes, snapshot_files

from coniti import derived
from coniti.derived import ALIGN, ARRAYS_FILE, FORMAT, DerivedDir, StaleSnapshot
from coniti.impl.log import LogBackend

PARTS: dict[str, dict[str, np.ndarray]] = {
    "a": {
        "matrix": np.arange(12, dtype=np.float32).reshape(3, 4),
        "bytes": np.frombuffer(b"hello", dtype=np.uint8),
        "scalar": np.asarray(7, dtype=np.int64),
        "empty": np.empty((0, 5), dtype=np.float64),
    },
    "b": {"flags": np.array([True, False, True]), "ids": np.array([2**63 - 1, -1], dtype=np.int64)},
}


def load(place: DerivedDir) -> derived.Loaded:
    return place.load("x", key={}, head=1, hash_at=lambda s: "h")


def test_a_save_writes_one_aligned_file_and_a_load_gives_the_arrays_back(tmp_path: Path) -> None:
    """A save writes one file in the data directory, each array at an offset that is a multiple of
    ALIGN; a load gives back every array equal in dtype, shape and values, read-only."""
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts=PARTS)
    manifest = json.loads((place.path / "x.json").read_bytes())
    assert manifest["format"] == FORMAT == 3
    assert [p.name for p in (place.path / manifest["data"]).iterdir()] == [ARRAYS_FILE]
    assert all(entry["offset"] % ALIGN == 0 for entry in manifest["arrays"].values())
    loaded = load(place)
    for part, arrays in PARTS.items():
        for name, want in arrays.items():
            got = loaded.parts[part][name]
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
            assert not got.flags.writeable


@pytest.mark.parametrize("label", ["a/matrix", "a/bytes", "a/scalar", "b/flags", "b/ids"])
def test_a_flipped_byte_of_any_array_is_refused(tmp_path: Path, label: str) -> None:
    """One flipped bit in the bytes of any array of the file makes the load refuse the snapshot
    (its checksum), naming the array; nothing is returned."""
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts=PARTS)
    flip_byte(place.path / "x.json", label, -1)
    with pytest.raises(StaleSnapshot, match=f"{label} fails its checksum"):
        load(place)


@pytest.mark.parametrize("change", [-1, +1])
def test_a_file_of_another_size_is_refused(tmp_path: Path, change: int) -> None:
    """The arrays file cut short or grown by one byte is refused before anything is mapped."""
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts=PARTS)
    file, _, _ = array_place(place.path / "x.json", "a/matrix")
    size = file.stat().st_size
    with open(file, "r+b") as f:
        f.truncate(size + change)
    with pytest.raises(StaleSnapshot, match="another size"):
        load(place)


@pytest.mark.parametrize(
    "edit",
    [
        {"offset": 3},  # not aligned
        {"offset": 1 << 30},  # beyond the file
        {"dtype": "float32"},  # not the explicit byte-order form a save writes
        {"dtype": "|O"},  # Python objects
        {"shape": [4, 4]},  # more bytes than recorded
        {"bytes": 40},  # not shape x itemsize
    ],
)
def test_an_entry_that_does_not_fit_the_file_is_refused(tmp_path: Path, edit: dict[str, Any]) -> None:
    """A manifest entry whose offset, dtype, shape or size cannot be an array of the file is
    refused (StaleSnapshot), never read."""
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts=PARTS)
    manifest_path = place.path / "x.json"
    manifest = json.loads(manifest_path.read_bytes())
    manifest["arrays"]["a/matrix"].update(edit)
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(StaleSnapshot, match="a/matrix"):
        load(place)


def test_reopen_from_the_file_equals_a_rebuild(tmp_path: Path) -> None:
    """An engine restored from a one-file snapshot, with writes after it folded in, answers as a
    fresh build of the log."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(40))
        e.persist()
        e.close()
        later = engine(store)
        later.ingest_many(notes(5, 40))
        later.remove(["n3"])
        later.close()
        assert answers(engine(store)) == answers(fresh(store))


def test_a_damaged_array_of_an_engine_snapshot_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    """A flipped byte in any array of an engine's snapshot (structures, content index, keyword
    index): the engine answers as a fresh build, and verify names the checksum."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(40))
        e.persist()
        e.close()
        (manifest_path,) = snapshot_files(store)
        file, _, _ = array_place(manifest_path, "structure.0/vecs")
        kept = file.read_bytes()
        want = answers(fresh(store))
        labels = [k for k, v in json.loads(manifest_path.read_bytes())["arrays"].items() if v["bytes"]]
        assert len(labels) > 30
        for label in labels:
            flip_byte(manifest_path, label, -1)
            assert answers(engine(store)) == want, label
            report = engine(store).verify()
            assert "checksum" in report.snapshot and report.ok, label
            file.write_bytes(kept)


def as_format_2(manifest_path: Path) -> None:
    """Rewrite a snapshot in format 2, as the code before format 3 saved it: one ``.npy`` file
    per array (``<i>.npy``, ``np.save``) in a data directory, the manifest entries naming their
    file, numpy's ``str`` of the dtype and the file's size."""
    manifest = json.loads(manifest_path.read_bytes())
    parts = read_parts(manifest_path)
    data = manifest_path.parent / (manifest["data"] + "-v2")
    data.mkdir()
    for i, (label, entry) in enumerate(manifest["arrays"].items()):
        part, _, field = label.partition("/")
        array = parts[part][field]
        np.save(data / f"{i}.npy", array, allow_pickle=False)
        del entry["offset"]
        entry.update(file=f"{i}.npy", dtype=str(array.dtype), bytes=(data / f"{i}.npy").stat().st_size)
    shutil.rmtree(manifest_path.parent / manifest["data"])
    for key in ("file", "bytes"):
        del manifest[key]
    manifest.update(format=2, data=data.name)
    manifest_path.write_text(json.dumps(manifest, sort_keys=True))


def test_a_format_2_snapshot_is_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose snapshot the code before format 3 wrote (one .npy file per array) reopens
    from it: only the events after it are read from the log, the answers equal a rebuild, and the
    next save writes format 3."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(40))
        e.persist()
        e.close()
        seq = store.head
        (manifest_path,) = snapshot_files(store)
        as_format_2(manifest_path)
        engine(store).ingest_many(notes(5, 40))
        reads: list[int] = []
        original = LogBackend.events

        def spy(self: LogBackend, after: int = 0, **kw: Any) -> Any:
            reads.append(after)
            return original(self, after, **kw)

        monkeypatch.setattr(LogBackend, "events", spy)
        second = engine(store)
        assert len(second.structures()[0]) == 45
        assert reads and min(reads) >= seq - 1  # restored, not folded from the start of the log
        monkeypatch.undo()
        assert answers(second) == answers(fresh(store))
        second.persist()
        assert json.loads(manifest_path.read_bytes())["format"] == FORMAT
