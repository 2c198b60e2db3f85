"""Content ids (Note.content_id) and ingest(dedup=True)."""

from __future__ import annotations

import hashlib

import pytest

from coniti.actor import Note
from coniti.container import Container
from coniti.errors import ContractError
from coniti.memory import CountRequest


def test_content_id_test_vector() -> None:
    """The documented test vector: SHA-256 of the compact JSON [namespace, kind, normalised text]."""
    note = Note(id="x", text="  Hello\n  world ", timestamp=0, kind="fact")
    body = b'[["alice"],"fact","Hello world"]'
    assert note.content_id(("alice",)) == "c1:" + hashlib.sha256(body).hexdigest()
    assert note.content_id(("alice",)) == "c1:2bb17d7cf2f021efbaf79c25e53fac4f6d6a07694466492a4214d2dceac8a3c5"


def test_content_id_of_a_plain_note_hashes_null_kind_and_non_ascii_as_utf8() -> None:
    """A plain note hashes kind as null; non-ASCII text is hashed as UTF-8, NFC-normalised."""
    note = Note(id="x", text="cafe\u0301", timestamp=0)
    body = '[[],null,"caf\u00e9"]'.encode()
    assert note.content_id() == "c1:" + hashlib.sha256(body).hexdigest()


def test_content_id_ignores_id_timestamp_metadata_but_not_kind_or_namespace() -> None:
    """Id, timestamp and metadata do not change the content id; kind, namespace and text do."""
    a = Note(id="a", text="tea", timestamp=1, metadata={"x": 1}, kind="fact")
    assert a.content_id() == Note(id="b", text=" tea ", timestamp=9, kind="fact").content_id()
    assert a.content_id() != Note(id="a", text="tea", timestamp=1, kind="summary").content_id()
    assert a.content_id() != a.content_id(("other",))
    assert a.content_id() != Note(id="a", text="Tea", timestamp=1, kind="fact").content_id()


def test_content_id_refuses_a_bad_namespace() -> None:
    """A namespace that is a bare string is refused, naming namespace."""
    with pytest.raises(ContractError, match="namespace"):
        Note(id="a", text="tea", timestamp=1).content_id("alice")  # type: ignore[arg-type]


def test_dedup_refuses_the_same_content_at_another_time_with_the_reason() -> None:
    """With dedup=True a note of the same namespace, kind and normalised text is refused whatever
    its timestamp; the reason names the content id and the stored note; nothing is written."""
    with Container() as c:
        assert c.engine.ingest(Note(id="a", text="Alice likes tea", timestamp=1, kind="fact")).admitted
        second = Note(id="b", text="Alice  likes tea", timestamp=500, kind="fact")
        result = c.engine.ingest(second, dedup=True)
        assert not result.admitted
        assert result.reason == f"duplicate content {second.content_id()} of stored note 'a'"
        assert c.memory.count(CountRequest()).count == 1


def test_dedup_admits_another_kind_or_namespace() -> None:
    """The same text of another kind, or in another namespace, is not a duplicate."""
    with Container() as c:
        c.engine.ingest(Note(id="a", text="Alice likes tea", timestamp=1, kind="fact"))
        assert c.engine.ingest(Note(id="b", text="Alice likes tea", timestamp=2, kind="message"), dedup=True).admitted
        assert c.engine.ingest(Note(id="c", text="Alice likes tea", timestamp=3), namespace=("x",), dedup=True).admitted


def test_dedup_refuses_a_repeat_within_one_batch() -> None:
    """Two notes of one content in one batch: the first is admitted, the second refused naming it."""
    with Container() as c:
        results = c.engine.ingest_many(
            [Note(id="a", text="tea", timestamp=1), Note(id="b", text="tea ", timestamp=2)], dedup=True
        )
        assert [r.admitted for r in results] == [True, False]
        assert results[1].reason is not None and "earlier in this batch" in results[1].reason


def test_without_dedup_the_same_text_at_another_time_is_admitted() -> None:
    """dedup defaults to False: the default strategy admits the same text at another timestamp."""
    with Container() as c:
        c.engine.ingest(Note(id="a", text="tea", timestamp=1))
        assert c.engine.ingest(Note(id="b", text="tea", timestamp=2)).admitted


def test_dedup_must_be_a_bool() -> None:
    """dedup="yes" is refused naming dedup."""
    with Container() as c, pytest.raises(ContractError, match="dedup"):
        c.engine.ingest(Note(id="a", text="tea", timestamp=1), dedup="yes")  # type: ignore[arg-type]
