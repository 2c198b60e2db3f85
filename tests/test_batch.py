"""Columnar batches: NoteBatch/RecordBatch accept what Note/MemoryRecord accept, name the first bad
row, and write exactly what the equivalent list of records writes (byte-identical events)."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import Note
from coniti.batch import NoteBatch, RecordBatch
from coniti.container import Container
from coniti.errors import ContractError, DuplicateRecord
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, MetaSetRequest, PutRequest, ScanRequest

# -- generated columns: valid and invalid values mixed -------------------------------------------

_ids = st.one_of(st.text(min_size=1, max_size=6), st.just(""), st.integers(0, 3))
_texts = st.one_of(st.text(max_size=12), st.none())
_times = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.floats(),  # NaN and infinities too
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(),  # naive: refused
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
_metadata = st.one_of(st.dictionaries(st.text(max_size=3), _json, max_size=2), st.integers())
_rows = st.lists(st.tuples(_ids, _texts, _times, _metadata), max_size=6)


def _note_error(row: tuple[Any, Any, Any, Any]) -> str | None:
    try:
        Note(id=row[0], text=row[1], timestamp=row[2], metadata=row[3])
    except ContractError as exc:
        return str(exc)
    return None


@settings(max_examples=150, deadline=None)
@given(_rows)
def test_note_batch_accepts_exactly_what_note_accepts(rows: list[tuple[Any, Any, Any, Any]]) -> None:
    """A NoteBatch is refused iff some row's Note is; the error names the first such row (index and
    id) with that Note's message; an accepted batch holds the notes Note() builds, bit for bit."""
    errors = [_note_error(r) for r in rows]
    columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], [], []]
    first = next((i for i, e in enumerate(errors) if e is not None), None)
    if first is not None:
        with pytest.raises(ContractError) as caught:
            NoteBatch(*columns)
        assert str(caught.value) == f"notes[{first}] (id {rows[first][0]!r}): {errors[first]}"
        return
    batch = NoteBatch(*columns)
    expected = [Note(id=r[0], text=r[1], timestamp=r[2], metadata=r[3]) for r in rows]
    got = batch.notes()
    assert got == expected
    assert [n.timestamp.hex() for n in got] == [n.timestamp.hex() for n in expected]


_ascii = st.text(st.characters(max_codepoint=127), max_size=5)
_spoiler = st.sampled_from(["", "é", "\ud800", 7, None, 2**64, float("nan"), True, ["x"], {"a": "b"}])


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            _ascii.filter(bool), _ascii, st.floats(0, 1e9),
            st.dictionaries(_ascii, _ascii, max_size=2),
        ),
        min_size=1, max_size=6,
    ),
    spoil=st.none() | st.tuples(st.integers(0, 5), st.integers(0, 4), _spoiler),
)
def test_plain_columns_are_accepted_and_refused_as_note_does(
    rows: list[tuple[Any, Any, Any, Any]], spoil: tuple[int, int, Any] | None
) -> None:
    """Columns of ASCII strings with flat string metadata (the batch's column-at-once checks), with
    at most one row spoiled in one place (id, text, a metadata key or value, or the metadata
    itself): the same notes, or the same error naming the same row, as Note builds one by one; the
    metadata copied (a change to the caller's dicts after it changes nothing)."""
    if spoil is not None:
        at, where, value = spoil
        at %= len(rows)
        row = list(rows[at])
        if where < 2:
            row[where] = value
        elif where == 2:
            row[3] = {**row[3], "k": value}
        elif where == 3:
            row[3] = {value: "v"} if isinstance(value, str | int | None) else value
        else:
            row[3] = value
        rows[at] = tuple(row)
    test_note_batch_accepts_exactly_what_note_accepts.hypothesis.inner_test(rows)  # type: ignore[attr-defined]
    if all(_note_error(r) is None for r in rows):
        batch = NoteBatch(*[list(c) for c in zip(*rows, strict=True)])
        before = copy.deepcopy(batch.metadata)
        for r in rows:
            r[3]["added later"] = "x"
        assert batch.metadata == before
        for r in rows:
            r[3].pop("added later", None)


def test_timestamps_may_be_a_float_array() -> None:
    """A numpy column of real numbers is read as float64; a non-finite entry names its row."""
    batch = NoteBatch(["a", "b"], ["x", "y"], np.array([1, 2], dtype=np.int32))
    assert batch.timestamps.dtype == np.float64 and batch.timestamps.tolist() == [1.0, 2.0]
    with pytest.raises(ContractError, match=r"^notes\[1\] \(id 'b'\): Note.timestamp: .*finite"):
        NoteBatch(["a", "b"], ["x", "y"], np.array([1.0, np.inf]))


def test_columns_of_different_lengths_are_refused() -> None:
    """Every column must have one item per id; the message names the column."""
    with pytest.raises(ContractError, match="texts has 1 items, ids 2"):
        NoteBatch(["a", "b"], ["x"], [1.0, 2.0])
    with pytest.raises(ContractError, match="metadata has 3 items, ids 2"):
        NoteBatch(["a", "b"], ["x", "y"], [1.0, 2.0], [{}, {}, {}])


def test_a_string_is_not_a_column() -> None:
    """ids given as one string (not a sequence of them) is refused naming the column."""
    with pytest.raises(ContractError, match="ids must be a sequence"):
        NoteBatch("ab", ["x", "y"], [1.0, 2.0])  # type: ignore[arg-type]


def test_metadata_is_copied_in() -> None:
    """Changing a metadata dict after building the batch changes nothing in the batch."""
    md = {"k": [1]}
    batch = NoteBatch(["a"], ["x"], [1.0], [md])
    md["k"].append(2)
    assert batch.metadata[0] == {"k": [1]}


def _notes(n: int, start: int = 0) -> NoteBatch:
    return NoteBatch(
        [f"r{i}" for i in range(start, start + n)],
        [f"text {i}" for i in range(start, start + n)],
        [100.0 + i for i in range(start, start + n)],
        [{"i": i} for i in range(start, start + n)],
    )


def test_a_non_finite_vector_row_is_named() -> None:
    """RecordBatch refuses a vector row with NaN, naming its index and id."""
    vectors = np.ones((3, 4), dtype=np.float32)
    vectors[2, 1] = np.nan
    with pytest.raises(ContractError, match=r"^records\[2\] \(id 'r2'\): MemoryRecord.vector"):
        RecordBatch(_notes(3), vectors, "emb")


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        (np.ones((2, 4)), "shape \\(3, dim\\)"),
        (np.ones(3), "shape \\(3, dim\\)"),
        (np.ones((3, 4), dtype=np.int64), "dtype must be one of"),
        ([[1.0]] * 3, "must be a 2-D numpy array"),
    ],
)
def test_a_bad_vector_matrix_is_refused(vectors: Any, message: str) -> None:
    """The matrix must be a 2-D float array with one row per note."""
    with pytest.raises(ContractError, match=message):
        RecordBatch(_notes(3), vectors, "emb")


def test_no_vectors_needs_no_embedding_id() -> None:
    """A batch without vectors has no embedding id (as a record without a vector)."""
    with pytest.raises(ContractError, match="embedding_id must be None"):
        RecordBatch(_notes(2), None, "emb")
    assert [r.vector for r in RecordBatch(_notes(2), None).records()] == [None, None]


def test_vectors_are_copied_in_and_keep_their_dtype() -> None:
    """The batch holds its own float16 copy of the matrix."""
    vectors = np.ones((2, 3), dtype=np.float16)
    batch = RecordBatch(_notes(2), vectors, "emb")
    vectors[0, 0] = 5.0
    assert batch.vectors is not None and batch.vectors.dtype == np.float16
    assert batch.vectors[0, 0] == 1.0


# -- what the backends store: the same as the equivalent records ---------------------------------


@contextmanager
def _frozen_clock(at: float = 1_800_000_000.0) -> Iterator[None]:
    """The log's recorded time fixed (two stores then write byte-identical events)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("coniti.log.projections.time.time", lambda: at)
        yield


def _frames(store: LogBackend) -> list[dict[str, Any]]:
    return [e.to_dict() for e in store.events()]


_vec_dtypes = st.sampled_from([np.float16, np.float32, np.float64])
_batch_rows = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=8),
        st.text(max_size=20),
        st.floats(-6e10, 2e11, allow_nan=False),
        st.dictionaries(st.text(max_size=3), _json.filter(lambda v: v == v), max_size=2),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda r: r[0],
)


def _finite_json(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_json(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_json(v) for v in value)
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    _batch_rows.filter(
        lambda rows: all(_finite_json(r[3]) and r[0] not in ("r0", "r1") for r in rows)  # _notes(2)
    ),
    _vec_dtypes,
    st.integers(1, 5),
)
def test_a_batch_writes_the_events_of_its_records(
    tmp_path_factory: pytest.TempPathFactory, rows: list[Any], dtype: Any, dim: int
) -> None:
    """LogBackend.put_batch appends byte-identical events (same frames, same head hash) to what
    put(PutRequest(records=batch.records())) appends, also with the claiming meta event."""
    columns = [list(c) for c in zip(*rows, strict=True)]
    rng = np.random.default_rng(len(rows))
    batch = RecordBatch(
        NoteBatch(*columns), rng.standard_normal((len(rows), dim)).astype(dtype), "emb", ("ns",)
    )
    meta = MetaSetRequest(key="embedding_id", value="emb", namespace=("ns",))
    base = tmp_path_factory.mktemp("pair")
    with _frozen_clock(), LogBackend(base / "a") as a, LogBackend(base / "b") as b:
        a.put_batch(batch, meta)
        b.put_with_meta(PutRequest(records=batch.records()), meta)
        a.put_batch(RecordBatch(_notes(2), np.ones((2, dim), dtype=dtype), "emb", ("ns",)))
        b.put(PutRequest(records=RecordBatch(_notes(2), np.ones((2, dim), dtype=dtype), "emb", ("ns",)).records()))
        assert a.head_hash == b.head_hash
        assert _frames(a) == _frames(b)


def _backends(tmp_path: Path) -> list[MemoryBackend]:
    return [InMemoryBackend(), LogBackend(tmp_path / "store")]


def _everything(memory: MemoryBackend, ns: tuple[str, ...] = ()) -> list[Any]:
    records = memory.scan(ScanRequest(namespace=ns, limit=1000)).records
    return [(r.to_dict(), r.vector.dtype.str if r.vector is not None else None) for r in records]


@pytest.mark.parametrize("kind", ["in_memory", "log"])
def test_put_batch_stores_what_put_stores(tmp_path: Path, kind: str) -> None:
    """After put_batch, scan returns what put of the same records returns (vectors, dtype, metadata)."""
    one, two = (
        (InMemoryBackend(), InMemoryBackend())
        if kind == "in_memory"
        else (LogBackend(tmp_path / "a"), LogBackend(tmp_path / "b"))
    )
    batch = RecordBatch(_notes(5), np.arange(15, dtype=np.float32).reshape(5, 3), "emb", ("x",))
    assert one.put_batch(batch).written == 5
    two.put(PutRequest(records=batch.records()))
    assert _everything(one, ("x",)) == _everything(two, ("x",))


@pytest.mark.parametrize("kind", ["in_memory", "log"])
def test_a_live_id_refuses_the_batch_naming_it(tmp_path: Path, kind: str) -> None:
    """An id already stored refuses the whole batch with put's DuplicateRecord message; nothing
    of the batch is written (no event either)."""
    memory = InMemoryBackend() if kind == "in_memory" else LogBackend(tmp_path / "s")
    memory.put_batch(RecordBatch(_notes(1, start=3), np.ones((1, 2)), "emb"))
    before = _everything(memory)
    head = getattr(memory, "head", None)
    batch = RecordBatch(_notes(5), np.ones((5, 2)), "emb")
    with pytest.raises(DuplicateRecord) as caught:
        memory.put_batch(batch)
    with pytest.raises(DuplicateRecord) as expected:
        memory.put(PutRequest(records=batch.records()))
    assert str(caught.value) == str(expected.value)
    assert "record id 'r3' already exists" in str(caught.value)
    assert _everything(memory) == before
    assert getattr(memory, "head", None) == head


@pytest.mark.parametrize("kind", ["in_memory", "log"])
def test_a_repeated_id_refuses_the_batch(tmp_path: Path, kind: str) -> None:
    """An id twice in one batch raises put's DuplicateRecord message; nothing is written."""
    memory = InMemoryBackend() if kind == "in_memory" else LogBackend(tmp_path / "s")
    notes = NoteBatch(["a", "b", "a"], ["x", "y", "z"], [1.0, 2.0, 3.0])
    with pytest.raises(DuplicateRecord, match=r"record id 'a' appears twice in one put"):
        memory.put_batch(RecordBatch(notes, np.ones((3, 2)), "emb"))
    assert _everything(memory) == []


class _PlainBackend(InMemoryBackend):
    """A backend that inherits MemoryBackend's default put_batch (built from its records)."""

    put_batch = MemoryBackend.put_batch


def test_the_default_put_batch_goes_through_put() -> None:
    """The base class's put_batch writes the batch's records with put (any backend has it)."""
    memory = _PlainBackend()
    batch = RecordBatch(_notes(3), np.ones((3, 2), dtype=np.float32), "emb")
    assert memory.put_batch(batch).written == 3
    other = InMemoryBackend()
    other.put(PutRequest(records=batch.records()))
    assert _everything(memory) == _everything(other)


def test_put_batch_refuses_anything_but_a_record_batch(tmp_path: Path) -> None:
    """A list of records is not a batch: ContractError naming the type, on every backend."""
    for memory in [*_backends(tmp_path), _PlainBackend()]:
        with pytest.raises(ContractError, match="batch must be a RecordBatch, got list"):
            memory.put_batch([])  # type: ignore[arg-type]


# -- the engine ------------------------------------------------------------------------------


def _engine_notes(n: int) -> list[Note]:
    t0 = datetime(2025, 1, 1, tzinfo=timezone(timedelta(hours=1))).timestamp()
    return [Note(id=f"n{i}", text=f"note {i} about budget {i % 7}", timestamp=t0 + i) for i in range(n)]


def test_engine_ingests_a_note_batch_as_it_ingests_the_notes(tmp_path: Path) -> None:
    """ingest_many(NoteBatch) returns the same admissions and writes byte-identical events as
    ingest_many of the same notes (duplicates and blank texts refused alike)."""
    notes = [*_engine_notes(6), Note(id="dup", text="note 1 about budget 1", timestamp=0.0),
             Note(id="blank", text="  ", timestamp=1.0), _engine_notes(2)[1]]  # fmt: skip
    notes[-1] = Note(id="same-text", text=notes[1].text, timestamp=notes[1].timestamp)
    with (
        _frozen_clock(),
        Container(memory="log", path=tmp_path / "a") as a,
        Container(memory="log", path=tmp_path / "b") as b,
    ):
        got = a.engine.ingest_many(NoteBatch.from_notes(notes), namespace=("n",))
        want = b.engine.ingest_many(notes, namespace=("n",))
        assert got == want
        assert [r.admitted for r in got].count(False) == 2
        assert a.memory.head_hash == b.memory.head_hash  # type: ignore[attr-defined]


def test_engine_answers_from_a_note_batch() -> None:
    """Notes ingested as a batch are in the structures: ask finds them."""
    with Container() as c:
        c.engine.ingest_many(NoteBatch.from_notes(_engine_notes(5)))
        assert c.engine.ask("note 3 about budget 3").hits[0].note.id == "n3"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 1.0, 2.5, 2.5, 7.0, -3.0, 1e9]), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    )
)
def test_in_memory_put_batch_orders_like_put(stamps: list[list[float]]) -> None:
    """Batches whose timestamps come in order, out of order, repeated or before the held ones
    scan in the order put of the same records gives (time, then arrival)."""
    one, two = InMemoryBackend(), InMemoryBackend()
    start = 0
    for batch_stamps in stamps:
        n = len(batch_stamps)
        notes = NoteBatch([f"r{start + i}" for i in range(n)], ["t"] * n, batch_stamps)
        batch = RecordBatch(notes, np.ones((n, 2), dtype=np.float32), "emb")
        one.put_batch(batch)
        two.put(PutRequest(records=batch.records()))
        start += n
    assert _everything(one) == _everything(two)
