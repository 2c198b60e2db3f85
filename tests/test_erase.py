"""erase(): content of every version of a record leaves the log and every read; the chain holds."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from coniti.errors import ContractError, ReadOnlyError
from coniti.events import EraseResult
from coniti.impl.log import LogBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MemoryRecord,
    MetaSetRequest,
)
from coniti.testing.helpers import exact, ids, put, record, scan_all

SECRET = "SECRET-7f3a"
SECRET_META = "meta-secret-91c2"
SECRET_VECTOR = [1234.5678, -8765.4321, 0.000123]


def _secret(rid: str, ts: float, n: int, namespace: tuple[str, ...] = ()) -> MemoryRecord:
    return record(rid, ts, namespace=namespace, text=f"{SECRET} {n}", metadata={"m": SECRET_META},
                  vector=SECRET_VECTOR)


def secret_bytes() -> list[bytes]:
    """Byte patterns of the erased content: the text, a metadata value and the vector's raw bytes."""
    return [SECRET.encode(), SECRET_META.encode(), np.asarray(SECRET_VECTOR, "float64").tobytes()]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LogBackend]:
    backend = LogBackend(tmp_path / "store", actor="svc")
    put(backend, _secret("p", 1.0, 1), record("keep", 2.0))  # 1, 2
    backend.delete(DeleteRequest(ids=["p"]))  # 3
    put(backend, _secret("p", 0.5, 2))  # 4
    backend.clear(ClearRequest())  # 5
    put(backend, _secret("p", 3.0, 3), record("keep", 2.0))  # 6, 7
    put(backend, record("p", 1.0, namespace=("other",)))  # 8
    backend.set_meta(MetaSetRequest(key="k", value="v"))  # 9
    yield backend
    backend.close()


def _erase(store: LogBackend) -> EraseResult:
    with store.audit(actor="dpo", reason="ignored: the explicit reason wins"):
        return store.erase(["p"], reason="GDPR art. 17, ticket 42")


def test_erase_reports_erased_missing_and_the_receipt(store: LogBackend) -> None:
    """erase returns the ids erased, the ids never held, and the receipt's sequence number."""
    result = store.erase(["p", "never", "p"], reason="request")
    assert (result.erased, result.missing, result.receipts) == (["p"], ["never"], [10])
    assert store.head == 10


def test_erased_record_is_gone_from_current_reads(store: LogBackend) -> None:
    """A live record that is erased disappears from get, scan and count, like a delete."""
    _erase(store)
    assert store.get(GetRequest(ids=["p", "keep"])).missing == ["p"]
    assert ids(scan_all(store)) == ["keep"]
    assert store.count(CountRequest()).count == 1


def test_no_view_of_any_point_returns_the_content(store: LogBackend) -> None:
    """At every earlier point the erased record reads as absent from get, scan and count (they
    agree), and every other record reads as before."""
    before = {seq: [exact(r) for r in scan_all(store.at(seq))] for seq in range(store.head + 1)}
    _erase(store)
    for seq, rows in before.items():
        view = store.at(seq)
        expected = [r for r in rows if r[0] != "p"]
        assert [exact(r) for r in scan_all(view)] == expected
        assert [exact(r) for r in view.iter_all(page_size=1)] == expected
        assert view.count(CountRequest()).count == len(expected)
        assert view.get(GetRequest(ids=["p"])).missing == ["p"]


def test_other_namespaces_keep_the_same_id(store: LogBackend) -> None:
    """Erasing p in the root namespace leaves p of another namespace intact."""
    _erase(store)
    assert ids(scan_all(store, ("other",))) == ["p"]
    assert [e.erased for e in store.history("p", ("other",))] == [False]


def test_history_keeps_the_shape_without_the_content(store: LogBackend) -> None:
    """history(id) still lists every put (erased: no record, timestamp kept), the delete and the
    clear, then the erase receipt with who and why."""
    _erase(store)
    hist = store.history("p")
    assert [(e.seq, e.kind, e.erased) for e in hist] == [
        (1, "put", True), (3, "delete", False), (4, "put", True), (5, "clear", False),
        (6, "put", True), (10, "erase", False),
    ]
    assert all(e.record is None for e in hist)
    assert [e.timestamp for e in hist if e.kind == "put"] == [1.0, 0.5, 3.0]
    assert (hist[-1].actor, hist[-1].reason) == ("dpo", "GDPR art. 17, ticket 42")


def test_receipt_of_a_record_no_longer_live_is_in_its_history(store: LogBackend) -> None:
    """Erasing a record that was already deleted appends a receipt that history() shows."""
    store.delete(DeleteRequest(ids=["p"]))
    result = store.erase(["p"], reason="late request")
    assert [e.seq for e in store.history("p")][-1] == result.receipts[0]


def test_events_and_their_json_hold_no_content(store: LogBackend) -> None:
    """No event of the audit trail carries the erased text, metadata or vector, even as JSON."""
    _erase(store)
    text = "\n".join(e.to_json() for e in store.events())
    assert SECRET not in text and SECRET_META not in text and "1234.5678" not in text


def test_hashes_and_verify_are_unchanged(store: LogBackend) -> None:
    """Every event's hash is what it was; the chain and projections verify clean; rebuild agrees."""
    hashes = [e.hash for e in store.events()]
    _erase(store)
    assert [e.hash for e in store.events()][: len(hashes)] == hashes
    assert store.verify().ok
    store.rebuild()
    assert store.verify().ok


def test_dump_of_a_view_has_no_content(store: LogBackend, tmp_path: Path) -> None:
    """A memory file dumped from a point where the record was live no longer holds it."""
    _erase(store)
    assert store.at(2).dump(tmp_path / "m.jsonl") == 1
    assert SECRET not in (tmp_path / "m.jsonl").read_text()


def test_export_has_no_content_and_imports_with_the_same_head(store: LogBackend, tmp_path: Path) -> None:
    """The log export after erasure holds none of the content (frames decoded too), and imports
    into a store with the same head hash whose history shows the erasure."""
    _erase(store)
    store.export_log(tmp_path / "log.jsonl")
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    frames = b"".join(base64.b64decode(json.loads(line)["frame"]) for line in lines[1:])
    assert not any(pattern in frames for pattern in secret_bytes())
    assert SECRET not in "".join(lines)
    with LogBackend.import_log(tmp_path / "log.jsonl", tmp_path / "copy") as copy:
        assert copy.head_hash == store.head_hash and copy.verify().ok
        assert [e.erased for e in copy.history("p") if e.kind == "put"] == [True, True, True]
        assert ids(scan_all(copy.at(1))) == []


def test_diff_agrees_with_views_after_erasure(store: LogBackend) -> None:
    """diff between points no longer sees erased versions: it agrees with the views."""
    _erase(store)
    head = store.head
    visible = [{r.id for r in store.at(s).iter_all()} for s in range(head + 1)]
    for a in range(head + 1):
        for b in range(head + 1):
            d = store.diff(a, b)
            assert (set(d.added), set(d.removed)) == (visible[b] - visible[a], visible[a] - visible[b])


def test_the_id_can_be_put_again_after_erasure(store: LogBackend) -> None:
    """After an erase, a new put of the same id is a new, readable version."""
    _erase(store)
    put(store, record("p", 9.0, text="new life"))
    assert [r.note.text for r in store.get(GetRequest(ids=["p"])).records] == ["new life"]
    assert store.verify().ok


def test_erasing_twice_appends_a_second_receipt(store: LogBackend) -> None:
    """A second erasure of the same id is recorded too (the request is on record); still clean."""
    _erase(store)
    again = store.erase(["p"], reason="again")
    assert again.erased == ["p"] and store.verify().ok
    assert [e.kind for e in store.history("p")][-2:] == ["erase", "erase"]


def test_erase_of_unknown_ids_appends_nothing(store: LogBackend) -> None:
    """Ids the namespace never held are missing and no event is written."""
    head = store.head
    result = store.erase(["nope"], namespace=("x",), reason="r")
    assert (result.erased, result.missing, store.head) == ([], ["nope"], head)


@pytest.mark.parametrize(
    ("ids_arg", "reason", "match"),
    [
        ("p", "r", "ids"),
        (["p", ""], "r", r"ids\[1\]"),
        (["p", 3], "r", r"ids\[1\]"),
        (["p"], "", "reason"),
        (["p"], "   ", "reason"),
        (["p"], None, "reason"),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(
    store: LogBackend, ids_arg: Any, reason: Any, match: str
) -> None:
    """ids must be a list of non-empty strings and reason a non-empty string: ContractError, and
    nothing is erased."""
    head = store.head
    with pytest.raises(ContractError, match=match):
        store.erase(ids_arg, reason=reason)
    assert store.head == head and not any(e.erased for e in store.events())


def test_erase_on_a_readonly_handle_is_refused(tmp_path: Path, store: LogBackend) -> None:
    """A read-only handle raises ReadOnlyError."""
    with LogBackend(tmp_path / "ro", actor=None) as other:
        put(other, record("x"))
    with LogBackend(tmp_path / "ro", read_only=True) as ro, pytest.raises(ReadOnlyError):
        ro.erase(["x"], reason="r")


def test_long_ids_and_namespaces_are_erased(tmp_path: Path) -> None:
    """An id keyed by hash in a long namespace is erased without touching its neighbour."""
    ns = ("n" * 700,)
    long_id = "x" * 600
    with LogBackend(tmp_path / "s") as store:
        put(store, _secret(long_id, 1.0, 1, ns), record(long_id + "y", 1.0, namespace=ns))
        assert store.erase([long_id], namespace=ns, reason="r").erased == [long_id]
        assert ids(scan_all(store, ns)) == [long_id + "y"]
        assert ids(scan_all(store.at(2), ns)) == [long_id + "y"]
        assert store.verify().ok


# -- a property: erasure against a model -----------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from("abcd"), st.sampled_from([(), ("x",)]),
                  st.sampled_from([0.0, 1.0, 2.0])),
        st.tuples(st.just("delete"), st.sampled_from("abcd"), st.sampled_from([(), ("x",)]), st.just(0.0)),
        st.tuples(st.just("clear"), st.just(""), st.sampled_from([(), ("x",)]), st.just(0.0)),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, victims=st.sets(st.sampled_from("abcd"), min_size=1), victim_ns=st.sampled_from([(), ("x",)]))
def test_views_after_erasure_equal_the_model_without_the_erased_ids(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, str, tuple[str, ...], float]],
    victims: set[str],
    victim_ns: tuple[str, ...],
) -> None:
    """After random puts, deletes and clears then an erasure, the view at every earlier point shows
    exactly the records it showed before, minus the erased ids of that namespace, with counts to
    match; verify() is clean."""
    path = tmp_path_factory.mktemp("erase-prop") / "s"
    with LogBackend(path) as store:
        n = 0
        for kind, rid, ns, ts in ops:
            if kind == "put":
                n += 1
                if store.get(GetRequest(ids=[rid], namespace=ns)).missing:
                    put(store, record(rid, ts, namespace=ns, text=f"{rid}{n}"))
            elif kind == "delete":
                store.delete(DeleteRequest(ids=[rid], namespace=ns))
            else:
                store.clear(ClearRequest(namespace=ns))
        namespaces = [(), ("x",)]
        before = {
            (seq, ns): [exact(r) for r in scan_all(store.at(seq), ns)]
            for seq in range(store.head + 1)
            for ns in namespaces
        }
        store.erase(sorted(victims), namespace=victim_ns, reason="property")
        for (seq, ns), rows in before.items():
            view = store.at(seq)
            want = [r for r in rows if not (ns == victim_ns and r[0] in victims)]
            assert [exact(r) for r in scan_all(view, ns)] == want
            assert view.count(CountRequest(namespace=ns)).count == len(want)
        assert store.verify().ok
