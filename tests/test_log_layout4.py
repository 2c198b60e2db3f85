"""A layout-4 store written by coniti before layout 5 (``tests/data/store_layout4/make.py``, with
the reads it gave then in ``expected.json``): read as it is read-only, resealed into layout 5 by a
writable open."""

from __future__ import annotations

import importlib.util
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers_log import db_entries, unpack_store

from coniti.impl.log import LogBackend
from coniti.log.store import LAYOUT_VERSION, PROJECTION_DBS

FIXTURE = Path(__file__).parent / "data" / "store_layout4"
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text())
_spec = importlib.util.spec_from_file_location("store_layout4_make", FIXTURE / "make.py")
assert _spec is not None and _spec.loader is not None
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


@pytest.fixture
def layout4(tmp_path: Path) -> Path:
    return unpack_store(FIXTURE / "store.tar.gz", tmp_path)


def _format(path: Path) -> int:
    return int(struct.unpack(">I", dict(db_entries(path, b"sys"))[b"format"])[0])


def _states(view: LogBackend) -> list[Any]:
    return json.loads(json.dumps([make.observe(view.at(seq)) for seq in range(view.head)] + [make.observe(view)]))


def _tables(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    return {name: db_entries(path, name) for name in (b"log", *PROJECTION_DBS)}


def test_the_fixture_is_a_layout_4_store_sealed_with_zlib_crc32(layout4: Path) -> None:
    """The fixture really is layout 4: sys/format 4, and its ver seals are zlib CRC-32s."""
    assert _format(layout4) == 4
    key, value = db_entries(layout4, b"ver")[0]
    assert struct.unpack(">I", value[-4:])[0] == zlib.crc32(b"ver" + key + value[:-4])


def test_a_layout_4_store_reads_read_only_as_it_did(layout4: Path) -> None:
    """Opened read-only, the layout-4 store gives at every point of its history the gets, scans,
    counts and metadata it gave when it was written, and stays layout 4."""
    with LogBackend(layout4, read_only=True) as ro:
        assert ro.head == EXPECTED["head"]
        assert _states(ro) == EXPECTED["states"]
    assert _format(layout4) == 4


def test_a_writable_open_reseals_it_into_layout_5_as_a_rebuild_would(layout4: Path) -> None:
    """A writable open reseals the layout-4 store: sys/format 5, verify() clean, every point of
    history reads as before, and every table is byte for byte what a rebuild from the log gives."""
    with LogBackend(layout4) as store:
        assert store.verify().ok
        assert _states(store) == EXPECTED["states"]
    assert _format(layout4) == LAYOUT_VERSION == 6
    resealed = _tables(layout4)
    with LogBackend(layout4) as store:
        store.rebuild()
    assert _tables(layout4) == resealed
