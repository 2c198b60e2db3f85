"""The command line's readers for namespaces, times, points, metadata and store paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coniti.cli.parse import (
    ParseError,
    default_store_path,
    format_namespace,
    iso_time,
    parse_meta_pair,
    parse_meta_value,
    parse_namespace,
    parse_point,
    parse_time,
    resolve_store_path,
)


def test_namespace_splits_on_slash() -> None:
    """'alice/notes' is the namespace ('alice', 'notes')."""
    assert parse_namespace("alice/notes") == ("alice", "notes")


def test_namespace_root_forms() -> None:
    """'/' and the empty string both mean the root namespace ()."""
    assert parse_namespace("/") == ()
    assert parse_namespace("") == ()


def test_namespace_escapes() -> None:
    r"""'\/' is a literal slash and '\\' a literal backslash inside a part."""
    assert parse_namespace(r"a\/b/c\\d") == ("a/b", "c\\d")


@pytest.mark.parametrize("text", ["a//b", "a/", "/a", r"a\x", "a\\"])
def test_namespace_rejects_bad_text(text: str) -> None:
    """Empty parts and unknown or dangling escapes are refused with the text in the message."""
    with pytest.raises(ParseError, match="namespace"):
        parse_namespace(text)


@given(st.lists(st.text(min_size=1, max_size=8), max_size=4).map(tuple))
def test_namespace_round_trip(namespace: tuple[str, ...]) -> None:
    """format_namespace then parse_namespace gives back any namespace."""
    assert parse_namespace(format_namespace(namespace)) == namespace


def test_time_date_is_utc_midnight() -> None:
    """A date without a zone is midnight UTC."""
    assert parse_time("2025-03-01") == 1740787200.0


def test_time_with_zone() -> None:
    """An explicit offset is honoured."""
    assert parse_time("2025-03-01T02:00:00+02:00") == 1740787200.0


def test_time_epoch_seconds() -> None:
    """A plain number is seconds since the epoch."""
    assert parse_time("1740787200.5") == 1740787200.5


@pytest.mark.parametrize("text", ["yesterday", "", "2025-13-01", "nan", "inf"])
def test_time_rejects_bad_text(text: str) -> None:
    """Unreadable times raise ParseError naming the field."""
    with pytest.raises(ParseError, match="--from"):
        parse_time(text, field="--from")


def test_point_digits_are_a_sequence_number() -> None:
    """Digits only: a sequence number (int)."""
    assert parse_point("42") == 42
    assert isinstance(parse_point("42"), int)


def test_point_date_is_a_time() -> None:
    """An ISO date: a time (float)."""
    assert parse_point("2025-03-01") == 1740787200.0


def test_point_rejects_other_text() -> None:
    """Anything else names both accepted forms."""
    with pytest.raises(ParseError, match="sequence number nor an ISO date"):
        parse_point("-3", field="--as-of")


def test_meta_values_are_json_when_they_parse() -> None:
    """Numbers, booleans, null and lists are JSON; other text is a string."""
    assert parse_meta_value("3") == 3
    assert parse_meta_value("true") is True
    assert parse_meta_value("null") is None
    assert parse_meta_value("[1, 2]") == [1, 2]
    assert parse_meta_value("hello world") == "hello world"
    assert parse_meta_value("NaN") == "NaN"


def test_meta_pair() -> None:
    """KEY=VALUE splits on the first '='; a missing key or '=' is refused."""
    assert parse_meta_pair("tag=a=b") == ("tag", "a=b")
    with pytest.raises(ParseError):
        parse_meta_pair("novalue")
    with pytest.raises(ParseError):
        parse_meta_pair("=x")


def test_store_path_order() -> None:
    """--store beats CONITI_STORE, which beats the XDG default."""
    env = {"CONITI_STORE": "/env/store", "XDG_DATA_HOME": "/xdg"}
    assert resolve_store_path("/opt/s", env) == Path("/opt/s")
    assert resolve_store_path(None, env) == Path("/env/store")
    assert resolve_store_path(None, {"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/coniti/store")


def test_default_store_path_without_xdg() -> None:
    """Without (or with a relative) XDG_DATA_HOME the store is under ~/.local/share."""
    expected = Path.home() / ".local" / "share" / "coniti" / "store"
    assert default_store_path({}) == expected
    assert default_store_path({"XDG_DATA_HOME": "relative/dir"}) == expected


def test_iso_time() -> None:
    """Whole seconds print without a fraction; others to the millisecond."""
    assert iso_time(1740787200.0) == "2025-03-01T00:00:00Z"
    assert iso_time(1740787200.25) == "2025-03-01T00:00:00.250Z"
