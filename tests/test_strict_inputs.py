"""String fields take strings only, and results hold only JSON-able finite values: no silent coercion."""

from __future__ import annotations

import pytest

from coniti import ContractError, GetRequest, MetaGetRequest, MetaResult, Note, Query, TimeRange
from coniti.memory import MemoryRecord


@pytest.mark.parametrize(
    "build",
    [
        lambda: Note(id=b"n1", text="x", timestamp=1.0),
        lambda: Note(id="n1", text=b"x", timestamp=1.0),
        lambda: Query(text=b"x"),
        lambda: Query(near=b"n1"),
        lambda: GetRequest(ids=[b"n1"]),
        lambda: MetaGetRequest(key=b"k"),
    ],
    ids=["note.id", "note.text", "query.text", "query.near", "get.ids", "meta.key"],
)
def test_bytes_are_not_coerced_to_str(build: object) -> None:
    """Bytes given for a string field raise ContractError instead of being decoded silently."""
    with pytest.raises(ContractError):
        build()  # type: ignore[operator]


def test_meta_result_refuses_non_finite_value() -> None:
    """MetaResult.from_dict refuses NaN like every other JSON value coniti accepts."""
    with pytest.raises(ContractError, match="value"):
        MetaResult.from_dict({"value": float("nan")})


LATIN1 = "caf\udce9"
"""``café`` read from Latin-1 bytes with ``surrogateescape``: a lone surrogate where the é was."""


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Note(id="n1", text=LATIN1, timestamp=1.0), "Note.text"),
        (lambda: Note(id=LATIN1, text="x", timestamp=1.0), "Note.id"),
        (lambda: Note(id="n1", text="x", timestamp=1.0, metadata={"k": LATIN1}), "metadata.k"),
        (lambda: Note(id="n1", text="x", timestamp=1.0, metadata={"k": [{"j": LATIN1}]}),
         r"metadata.k\[0\].j"),
        (lambda: Note(id="n1", text="x", timestamp=1.0, metadata={LATIN1: 1}), "metadata key"),
        (lambda: Query(text=LATIN1), "Query.text"),
        (lambda: Query(near=LATIN1), "Query.near"),
        (lambda: GetRequest(ids=["ok", LATIN1]), "GetRequest.ids.1"),
        (lambda: MetaGetRequest(key=LATIN1), "MetaGetRequest.key"),
        (lambda: GetRequest(ids=["n1"], namespace=("alice", LATIN1)), r"namespace\[1\]"),
    ],
    ids=["note.text", "note.id", "metadata", "nested-metadata", "metadata-key", "query.text",
         "query.near", "get.ids", "meta.key", "namespace"],
)
def test_a_lone_surrogate_is_refused_naming_the_field(build: object, field: str) -> None:
    """Text with a lone surrogate (bytes that were not UTF-8) is refused with a ContractError that
    names the field and says the text is not valid Unicode, before any embedder sees it."""
    with pytest.raises(ContractError, match=field) as caught:
        build()  # type: ignore[operator]
    assert "not valid Unicode" in str(caught.value) and "U+DCE9" in str(caught.value)


@pytest.mark.parametrize("text", ["", " \n\t"])
def test_a_query_with_empty_or_blank_text_is_refused(text: str) -> None:
    """Query(text="") is refused naming Query.text (it used to rank every note arbitrarily);
    leaving text out (a time range alone) is the way to ask without words."""
    with pytest.raises(ContractError, match="Query.text: empty or blank"):
        Query(text=text)
    assert Query(time_range=TimeRange(start=0.0)).text is None


def test_a_note_batch_refuses_a_lone_surrogate_naming_the_row() -> None:
    """NoteBatch refuses a text Note refuses, naming the row, as it does for every rule of Note."""
    from coniti.batch import NoteBatch

    with pytest.raises(ContractError, match=r"notes\[1\] \(id 'b'\): Note.text: not valid Unicode"):
        NoteBatch(["a", "b"], ["fine", LATIN1], [1.0, 2.0])


@pytest.mark.parametrize("where", ["text", "id", "metadata-value", "metadata-key", "namespace"])
def test_a_memory_file_line_with_a_lone_surrogate_is_not_loaded(where: str) -> None:
    """A memory-file line whose JSON escapes a lone surrogate (\\udce9) is refused naming its line
    and the field, on the fast paths as on the contract's, and nothing is loaded."""
    import io

    import orjson

    from coniti.errors import MemoryFileError
    from coniti.impl.memory import InMemoryBackend
    from coniti.testing.memfile_cases import header, jsonl, rec

    line = rec("n1", vector=[1.0, 2.0], namespace=("alice",))
    escaped = "caf\\udce9"
    marker = {"text": ("text", "T"), "id": ("id", "T"), "metadata-value": ("metadata", {"k": "T"}),
              "metadata-key": ("metadata", {"T": 1})}  # fmt: skip
    if where == "namespace":
        line["namespace"] = ["T"]
    else:
        key, value = marker[where]
        line["note"][key] = value
    text = jsonl(header(1, namespace=line["namespace"]), orjson.dumps(line).decode().replace("T", escaped))
    memory = InMemoryBackend()
    with pytest.raises(MemoryFileError, match="line 2: .*not valid Unicode"):
        memory.load(io.StringIO(text))
    assert memory.namespaces() == []


def test_valid_unicode_beyond_ascii_is_accepted() -> None:
    """Accented letters, CJK and emoji (a surrogate pair in UTF-16, one code point here) pass."""
    text = "café 東京 \U0001f600"
    note = Note(id=text, text=text, timestamp=1.0, metadata={text: text})
    assert note.text == text and note.metadata == {text: text}


def test_an_audit_stamp_with_a_lone_surrogate_is_refused(tmp_path: object) -> None:
    """LogBackend.audit refuses a reason that is not valid Unicode before anything is written."""
    import pathlib

    from coniti.impl.log import LogBackend

    with LogBackend(pathlib.Path(str(tmp_path)) / "store") as store:
        with pytest.raises(ContractError, match="reason is not valid Unicode"), store.audit(reason=LATIN1):
            store.set_meta(store.meta_set_request("k", 1))
        assert store.head == 0


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Note(id="n1", text="x", timestamp=10**400), "timestamp"),
        (lambda: Note(id="n1", text="x", timestamp=-(10**400)), "timestamp"),
        (lambda: TimeRange(start=10**400), "start"),
        (lambda: TimeRange(end=10**400), "end"),
        (lambda: _record([1.0, 10**400]), "vector"),
        (lambda: _record([10**400], dtype="float32"), "vector"),
    ],
    ids=["note.timestamp", "note.timestamp-negative", "range.start", "range.end", "vector", "vector-f32"],
)
def test_an_integer_beyond_float_range_is_a_contract_error(build: object, field: str) -> None:
    """An int too large for a float (Python's float() raises OverflowError on it) is refused as a
    ContractError naming the field, like every other bad value."""
    with pytest.raises(ContractError, match=field):
        build()  # type: ignore[operator]


def _record(vector: list[float], dtype: str | None = None) -> MemoryRecord:
    note = Note(id="n1", text="x", timestamp=1.0)
    if dtype is None:
        return MemoryRecord(note=note, vector=vector)
    return MemoryRecord(note=note, vector=vector, dtype=dtype)
