"""A snapshot's arrays are mapped by coniti.derived._mapped: the same array ``np.load(...,
mmap_mode="r", allow_pickle=False)`` gives, read-only; object arrays, Fortran order and a short
file are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coniti.derived import _mapped

ARRAYS = {
    "vectors": np.arange(24, dtype=np.float32).reshape(4, 6),
    "seqs": np.array([3, 1, 2], dtype=np.int64),
    "bytes": np.frombuffer(b"abc\x00def", dtype=np.uint8),
    "empty": np.zeros((0, 384), dtype=np.float32),
    "scalar": np.array(7.5),
    "records": np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
}


@pytest.mark.parametrize("label", sorted(ARRAYS))
def test_a_mapped_array_equals_numpys_load_and_is_read_only(tmp_path: Path, label: str) -> None:
    """Same dtype, shape and values as numpy's own mapped load; writing to it raises."""
    path = tmp_path / f"{label}.npy"
    np.save(path, ARRAYS[label])
    got, want = _mapped(path), np.load(path, mmap_mode="r", allow_pickle=False)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    assert not got.flags.writeable
    if got.size:
        with pytest.raises(ValueError):
            got.reshape(-1)[0] = got.reshape(-1)[0]


def test_an_object_array_is_refused(tmp_path: Path) -> None:
    """A file of Python objects is not read (no unpickling)."""
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="Python objects"):
        _mapped(path)


def test_a_fortran_ordered_array_is_refused(tmp_path: Path) -> None:
    """A snapshot array is written in C order; one in Fortran order is refused."""
    path = tmp_path / "fortran.npy"
    np.save(path, np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    with pytest.raises(ValueError, match="Fortran"):
        _mapped(path)


def test_a_file_shorter_than_its_header_is_refused(tmp_path: Path) -> None:
    """A torn file (its data cut short) is refused rather than mapped short."""
    path = tmp_path / "torn.npy"
    np.save(path, np.arange(100, dtype=np.float64))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ValueError, match="shorter"):
        _mapped(path)
