"""Checked reads of the remaining projections: record counts (``cnt``), the namespace table
(``ns``/``nsn``), expiries (``exv``) and op ids (``opx``). Damage in them is a StoreCorrupted naming
the namespace (or op id), never a wrong count, namespace list, sweep or replay (``log/FORMAT.md``
§5.1, layout 3)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
from helpers_log import db_entries, put, rec, rewrite_db, to_layout_3

from coniti.errors import StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log.store import LAYOUT_VERSION
from coniti.memory import CountRequest, DeleteOp, GetRequest, PutRequest, TimeRange, WriteRequest

NS = ("alice",)


_rewrite = rewrite_db


_entries = db_entries


def _store(path: Path) -> None:
    with LogBackend(path) as s:
        put(s, [rec(f"r{i}", float(i), NS) for i in range(6)])
        put(s, [rec(f"p{i}", float(i)) for i in range(3)])
        s.put(PutRequest(records=[
            rec("gone", 1.0, NS).model_copy(update={"expires_at": 1.0}),
            rec("later", 2.0, NS).model_copy(update={"expires_at": 4.0e9}),
        ]))
        s.write(WriteRequest(ops=[DeleteOp(id="r0")], namespace=NS, op_id="op-1"))


def _flip_value_byte(path: Path, db: bytes, pick: Callable[[list[tuple[bytes, bytes]]], bytes], at: int) -> None:
    key = pick(_entries(path, db))

    def edit(txn: Any, handle: Any) -> None:
        value = bytearray(txn.get(key, db=handle))
        value[at] ^= 0x01
        txn.put(key, bytes(value), db=handle)

    _rewrite(path, db, edit)


def _last_of(nsid: bytes) -> Callable[[list[tuple[bytes, bytes]]], bytes]:
    return lambda entries: [k for k, _ in entries if k[:4] == nsid][-1]


ALICE = struct.pack(">I", 0)


def test_a_damaged_record_count_is_reported_naming_the_namespace(tmp_path: Path) -> None:
    """One bit flipped in the count of a namespace's last cnt entry: count raises StoreCorrupted
    naming the namespace, not a count off by one."""
    _store(tmp_path / "s")
    _flip_value_byte(tmp_path / "s", b"cnt", _last_of(ALICE), 7)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.count(CountRequest(namespace=NS))


def test_a_damaged_count_of_a_past_point_is_reported(tmp_path: Path) -> None:
    """A flipped bit in the cnt entry an as-of count reads raises StoreCorrupted."""
    _store(tmp_path / "s")
    _flip_value_byte(tmp_path / "s", b"cnt", lambda e: [k for k, _ in e if k[:4] == ALICE][2], 7)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.at(3).count(CountRequest(namespace=NS))


def test_a_damaged_count_position_is_reported_by_an_as_of_scan(tmp_path: Path) -> None:
    """The scan bound kept after the count is covered by the same check."""
    _store(tmp_path / "s")
    _flip_value_byte(tmp_path / "s", b"cnt", lambda e: [k for k, _ in e if k[:4] == ALICE][2], 12)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted):
        s.at(3).count(CountRequest(namespace=NS, time_range=TimeRange(start=0.0, end=10.0)))


def test_a_range_count_confirms_each_entry_against_ver(tmp_path: Path) -> None:
    """A time entry whose version ver does not confirm (its key moved to another timestamp inside
    the range) makes a range count raise instead of counting it."""
    _store(tmp_path / "s")
    key, value = [(k, v) for k, v in _entries(tmp_path / "s", b"time") if k[:4] == ALICE][1]
    moved = bytearray(key)
    moved[11] ^= 0x01  # the low byte of the timestamp key

    def edit(txn: Any, handle: Any) -> None:
        txn.delete(key, db=handle)
        txn.put(bytes(moved), value, db=handle)

    _rewrite(tmp_path / "s", b"time", edit)
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="alice"):
        s.count(CountRequest(namespace=NS, time_range=TimeRange(start=-1.0, end=100.0)))


def test_a_namespace_table_naming_another_namespace_is_reported(tmp_path: Path) -> None:
    """An nsn entry altered into another valid namespace (ns no longer maps it back): listing the
    namespaces raises StoreCorrupted instead of listing a namespace that was never written."""
    _store(tmp_path / "s")
    _rewrite(tmp_path / "s", b"nsn", lambda txn, db: txn.put(ALICE, msgpack.packb(["alicf"]), db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted, match="namespace table"):
        s.namespaces()


def test_a_damaged_expiry_entry_is_reported_by_count_and_sweep(tmp_path: Path) -> None:
    """A flipped bit in an exv value (its end): the count of the namespace and a sweep raise
    StoreCorrupted naming it instead of counting or sweeping by a wrong end."""
    _store(tmp_path / "s")
    _flip_value_byte(tmp_path / "s", b"exv", lambda e: [k for k, _ in e if len(k) > 4][0], 3)
    with LogBackend(tmp_path / "s") as s:
        with pytest.raises(StoreCorrupted, match="alice"):
            s.count(CountRequest(namespace=NS))
        head = s.head
        with pytest.raises(StoreCorrupted, match="alice"):
            s.sweep()
        assert s.head == head


def test_an_op_id_index_naming_another_event_is_reported(tmp_path: Path) -> None:
    """opx pointing op-1 at another event: retrying the request raises StoreCorrupted naming the op
    id (it neither replays another result nor runs the request again)."""
    _store(tmp_path / "s")
    key = [k for k, _ in _entries(tmp_path / "s", b"opx")][0]
    _rewrite(tmp_path / "s", b"opx", lambda txn, db: txn.put(key, struct.pack(">Q", 2), db=db))
    with LogBackend(tmp_path / "s") as s:
        head = s.head
        with pytest.raises(StoreCorrupted, match="op-1"):
            s.write(WriteRequest(ops=[DeleteOp(id="r0")], namespace=NS, op_id="op-1"))
        assert s.head == head


def _unseal_to_layout_2(path: Path) -> None:
    """Turn a store into the layout-2 store the previous coniti wrote: its layout-3 form
    (:func:`helpers_log.to_layout_3`) with cnt and exv values without their CRC, sys/format 2."""
    to_layout_3(path)
    for name in (b"cnt", b"exv"):
        def strip(txn: Any, db: Any) -> None:
            for key, value in list(txn.cursor(db=db)):
                if value:
                    body = bytes(value[:-4])
                    assert struct.unpack(">I", value[-4:])[0] == zlib.crc32(body, zlib.crc32(bytes(key)))
                    txn.put(key, body, db=db)

        _rewrite(path, name, strip)
    _rewrite(path, b"sys", lambda txn, db: txn.put(b"format", struct.pack(">I", 2), db=db))


def test_a_layout_2_store_reads_as_it_is_read_only_and_is_upgraded_by_a_writable_open(tmp_path: Path) -> None:
    """A store of layout 2 (no CRCs) gives the same counts read-only; a writable open rebuilds it into
    layout 5, after which verify() is clean and the counts are the same."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        counts = [s.at(seq).count(CountRequest(namespace=NS)).count for seq in range(s.head + 1)]
    _unseal_to_layout_2(tmp_path / "s")
    with LogBackend(tmp_path / "s", read_only=True) as s:
        assert [s.at(seq).count(CountRequest(namespace=NS)).count for seq in range(s.head + 1)] == counts
    with LogBackend(tmp_path / "s") as s:
        assert s.verify().ok
        assert [s.at(seq).count(CountRequest(namespace=NS)).count for seq in range(s.head + 1)] == counts
    assert struct.unpack(">I", dict(_entries(tmp_path / "s", b"sys"))[b"format"])[0] == LAYOUT_VERSION == 6


def test_a_damage_message_names_the_namespace_as_the_cli_writes_it(tmp_path: Path) -> None:
    """A StoreCorrupted names the namespace as ``team/a``, never as a Python tuple."""
    with LogBackend(tmp_path / "s") as s:
        put(s, [rec("r1", 1.0, ("team", "a"))])
    key, value = [(k, v) for k, v in _entries(tmp_path / "s", b"ver")][0]
    _rewrite(tmp_path / "s", b"ver", lambda txn, db: txn.put(key, value[:-1] + bytes([value[-1] ^ 1]), db=db))
    with LogBackend(tmp_path / "s", read_only=True) as s, pytest.raises(StoreCorrupted) as caught:
        s.get(GetRequest(ids=["r1"], namespace=("team", "a")))
    assert "team/a" in str(caught.value) and "('team'" not in str(caught.value)
