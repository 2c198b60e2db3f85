"""erase_meta() and erase_namespace(): metadata values and whole namespaces leave the log and every
read, with a receipt; the chain holds (event version 3, ``log/FORMAT.md`` §3.4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti.errors import ContractError, ReadOnlyError, StoreCorrupted
from coniti.impl.log import LogBackend
from coniti.log.codec import erase_payload
from coniti.log.keys import seq_key
from coniti.memory import CountRequest, GetRequest, MetaGetRequest, MetaSetRequest
from coniti.testing.helpers import ids, put, record, scan_all

SECRET_A = "meta-secret-one-5b1e"
SECRET_B = "meta-secret-two-77d0"
TENANT = ("tenant",)
TENANT_TEXT = "tenant-secret-text-0c4f"
TENANT_META = "tenant-secret-meta-a9e3"


def _meta(store: LogBackend, key: str, namespace: tuple[str, ...] = (), view: LogBackend | None = None) -> object:
    reader = store if view is None else view
    return reader.get_meta(MetaGetRequest(key=key, namespace=namespace)).value


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store", actor="svc")
    put(backend, record("r", 1.0))  # 1
    backend.set_meta(MetaSetRequest(key="address", value=SECRET_A))  # 2
    backend.set_meta(MetaSetRequest(key="keep", value="kept"))  # 3
    backend.set_meta(MetaSetRequest(key="address", value={"street": SECRET_B}))  # 4
    backend.set_meta(MetaSetRequest(key="address", value=SECRET_A, namespace=("other",)))  # 5
    put(backend, record("t1", 1.0, namespace=TENANT, text=TENANT_TEXT),
        record("t2", 2.0, namespace=TENANT, text=TENANT_TEXT))  # 6, 7
    backend.set_meta(MetaSetRequest(key="plan", value=TENANT_META, namespace=TENANT))  # 8
    yield backend
    backend.close()


def _data(store: LogBackend) -> bytes:
    return (Path(store.path) / "data.mdb").read_bytes()


def test_erase_meta_reports_erased_and_missing_keys_and_the_receipt(store: LogBackend) -> None:
    """erase_meta returns the keys erased, the keys never held, and one receipt per erased key."""
    result = store.erase_meta(["address", "never", "address"], reason="request")
    assert (result.erased_keys, result.missing_keys, result.receipts) == (["address"], ["never"], [9])
    assert (result.erased, result.missing) == ([], [])
    assert store.head == 9


def test_erased_key_reads_as_unset_now_and_at_every_point(store: LogBackend) -> None:
    """After erase_meta the key gives None now and in the view of every point; other keys and the
    same key in another namespace read as before."""
    before = {seq: _meta(store, "keep", view=store.at(seq)) for seq in range(store.head + 1)}
    store.erase_meta(["address"], reason="request")
    assert _meta(store, "address") is None
    for seq in range(store.head + 1):
        view = store.at(seq)
        assert _meta(store, "address", view=view) is None, seq
        assert _meta(store, "keep", view=view) == before.get(seq, "kept"), seq
    assert _meta(store, "address", ("other",)) == SECRET_A


def test_receipt_and_erased_events_are_in_the_log(store: LogBackend) -> None:
    """The erase event names the key, the actor and the reason; the meta events of the key stay in
    the log, erased (no value), with their key and recorded times."""
    with store.audit(actor="dpo"):
        store.erase_meta(["address"], reason="GDPR art. 17")
    events = {e.seq: e for e in store.events()}
    receipt = events[9]
    assert (receipt.kind, receipt.key, receipt.id, receipt.actor, receipt.reason) == (
        "erase", "address", None, "dpo", "GDPR art. 17"
    )
    for seq in (2, 4):
        assert (events[seq].kind, events[seq].key, events[seq].erased, events[seq].value) == (
            "meta", "address", True, None
        )
    assert events[3].value == "kept" and events[5].value == SECRET_A


def test_hashes_and_verify_are_unchanged_by_erase_meta(store: LogBackend) -> None:
    """Every event keeps its hash; verify() finds nothing; a rebuild reads the same."""
    hashes = [e.hash for e in store.events()]
    store.erase_meta(["address"], reason="request")
    assert [e.hash for e in store.events()][: len(hashes)] == hashes
    assert store.verify().problems == ()
    store.rebuild()
    assert _meta(store, "address") is None and _meta(store, "keep") == "kept"


def test_no_byte_of_an_erased_value_remains_after_compact(store: LogBackend) -> None:
    """After erase_meta and compact, data.mdb holds no byte of either erased value; the same value in
    another namespace, not erased, is still there."""
    store.erase_meta(["address"], reason="request")
    store.erase_meta(["address"], namespace=("other",), reason="request")
    store.compact()
    data = _data(store)
    assert SECRET_A.encode() not in data and SECRET_B.encode() not in data
    assert b"kept" in data
    assert store.verify().ok


def test_the_key_can_be_set_again_after_erasure(store: LogBackend) -> None:
    """A key set after its erasure holds the new value; views before the new write still give None."""
    store.erase_meta(["address"], reason="request")
    store.set_meta(MetaSetRequest(key="address", value="new"))
    assert _meta(store, "address") == "new"
    assert _meta(store, "address", view=store.at(store.head - 1)) is None
    assert store.verify().ok


def test_erasing_a_key_twice_appends_a_second_receipt(store: LogBackend) -> None:
    """A key already erased is still held: a second erase_meta records a second receipt."""
    first = store.erase_meta(["address"], reason="one")
    second = store.erase_meta(["address"], reason="two")
    assert (first.receipts, second.receipts) == ([9], [10])
    assert store.verify().ok


def test_export_carries_the_erasure_and_imports_with_the_same_head(store: LogBackend, tmp_path: Path) -> None:
    """The log export holds no erased value; its import has the same head hash and reads the key as
    unset at every point."""
    store.erase_meta(["address"], reason="request")
    store.export_log(tmp_path / "log.jsonl")
    text = (tmp_path / "log.jsonl").read_text()
    assert SECRET_B not in text
    copy = LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy")
    with copy:
        assert copy.head_hash == store.head_hash
        assert all(_meta(copy, "address", view=copy.at(seq)) is None for seq in range(copy.head + 1))
        assert copy.verify().ok


def test_a_meta_frame_emptied_without_a_receipt_is_reported(store: LogBackend) -> None:
    """A meta frame whose payload is gone while no erase event of its key follows is damage: the read
    raises StoreCorrupted naming the key, never None."""
    log = store._log  # the test plants damage below the API
    with log.store.env.begin(write=True) as txn:
        frame = bytes(txn.get(seq_key(4), db=log.store.dbs[b"log"]))
        txn.put(seq_key(4), erase_payload(frame), db=log.store.dbs[b"log"])
    with pytest.raises(StoreCorrupted, match="'address'"):
        _meta(store, "address")


def test_erase_meta_of_an_unknown_namespace_appends_nothing(store: LogBackend) -> None:
    """Keys of a namespace never used are all missing and no event is appended."""
    result = store.erase_meta(["address"], namespace=("nobody",), reason="request")
    assert (result.erased_keys, result.missing_keys, result.receipts) == ([], ["address"], [])
    assert store.head == 8


@pytest.mark.parametrize(
    ("keys", "reason", "field"),
    [("address", "r", "keys must be a list"), ([""], "r", r"keys\[0\]"), (["address"], " ", "reason")],
)
def test_bad_erase_meta_arguments_are_refused_and_change_nothing(
    store: LogBackend, keys: object, reason: str, field: str
) -> None:
    """A key list that is a string, an empty key or a blank reason is a ContractError naming it."""
    with pytest.raises(ContractError, match=field):
        store.erase_meta(keys, reason=reason)  # type: ignore[arg-type]
    assert store.head == 8 and _meta(store, "address") == {"street": SECRET_B}


def test_erase_meta_on_a_read_only_handle_is_refused(store: LogBackend, tmp_path: Path) -> None:
    """A read-only handle refuses erase_meta and erase_namespace."""
    with LogBackend(store.path, read_only=True) as reader:
        with pytest.raises(ReadOnlyError):
            reader.erase_meta(["address"], reason="r")
        with pytest.raises(ReadOnlyError):
            reader.erase_namespace((), reason="r")
    assert store.head == 8


# -- a whole namespace ---------------------------------------------------------------------------


def test_erase_namespace_erases_every_record_and_key_with_receipts(store: LogBackend) -> None:
    """erase_namespace names every record and every key it erased, one receipt each, records first."""
    result = store.erase_namespace(TENANT, reason="tenant left")
    assert (result.erased, result.erased_keys, result.receipts) == (["t1", "t2"], ["plan"], [9, 10, 11])
    assert [(e.kind, e.id, e.key) for e in store.events(after=8)] == [
        ("erase", "t1", None), ("erase", "t2", None), ("erase", None, "plan")
    ]


def test_an_erased_namespace_reads_as_empty_at_every_point(store: LogBackend) -> None:
    """After erase_namespace the namespace has no record, count 0 and no metadata now and as of
    every point; the other namespaces read exactly as before."""
    before = [
        (ids(scan_all(store.at(seq))), _meta(store, "address", view=store.at(seq)))
        for seq in range(store.head + 1)
    ]
    store.erase_namespace(TENANT, reason="tenant left")
    for seq in range(store.head + 1):
        view = store.at(seq)
        assert scan_all(view, namespace=TENANT) == [], seq
        assert view.count(CountRequest(namespace=TENANT)).count == 0, seq
        assert view.get(GetRequest(ids=["t1", "t2"], namespace=TENANT)).missing == ["t1", "t2"]
        assert _meta(store, "plan", TENANT, view=view) is None, seq
        if seq < len(before):
            assert (ids(scan_all(view)), _meta(store, "address", view=view)) == before[seq], seq
    assert store.verify().ok


def test_history_of_a_record_shows_the_namespace_erasure(store: LogBackend) -> None:
    """history(id) of a record of an erased namespace shows its put, erased, then the receipt."""
    store.erase_namespace(TENANT, reason="tenant left")
    history = store.history("t1", TENANT)
    assert [(e.kind, e.erased, e.reason) for e in history] == [
        ("put", True, None), ("erase", False, "tenant left")
    ]


def test_no_byte_of_an_erased_namespace_remains_after_compact(store: LogBackend) -> None:
    """After erase_namespace and compact, data.mdb holds no byte of the namespace's texts or
    metadata values; the chain still verifies."""
    store.erase_namespace(TENANT, reason="tenant left")
    store.compact()
    data = _data(store)
    assert TENANT_TEXT.encode() not in data and TENANT_META.encode() not in data
    assert store.verify().ok


def test_erasing_an_erased_namespace_again_appends_nothing(store: LogBackend) -> None:
    """Records and keys with no content left get no second receipt; a namespace never used neither."""
    store.erase_namespace(TENANT, reason="tenant left")
    head = store.head
    again = store.erase_namespace(TENANT, reason="again")
    never = store.erase_namespace(("nobody",), reason="never")
    assert again.receipts == never.receipts == [] and store.head == head


def test_records_written_after_a_namespace_erasure_are_kept(store: LogBackend) -> None:
    """The namespace can be used again; a later erase_namespace erases only what came after."""
    store.erase_namespace(TENANT, reason="tenant left")
    put(store, record("t3", 3.0, namespace=TENANT))
    assert ids(scan_all(store, namespace=TENANT)) == ["t3"]
    assert store.erase_namespace(TENANT, reason="again").erased == ["t3"]


def test_erase_namespace_needs_a_reason(store: LogBackend) -> None:
    """A blank reason is a ContractError and nothing is erased."""
    with pytest.raises(ContractError, match="reason"):
        store.erase_namespace(TENANT, reason="")
    assert store.head == 8 and store.count(CountRequest(namespace=TENANT)).count == 2


def test_diff_across_a_metadata_erasure_compares_the_records(store: LogBackend) -> None:
    """diff() over a span holding an erase receipt of a metadata key (no record id) reports the
    records' changes only: the receipt touches no record."""
    store.erase_meta(["address"], reason="request")  # 9
    put(store, record("s", 2.0))  # 10
    d = store.diff(0, store.head)
    assert (d.added, d.removed, d.changed) == (["r", "s"], [], [])
    assert store.diff(8, 9).empty
