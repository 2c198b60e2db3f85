"""set, update and sweep through main(argv): corrections keep history, versions guard writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli, no_traceback


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(tmp_path / "store", capsys, monkeypatch)


def test_set_creates_then_replaces_with_a_new_version(cli: Cli) -> None:
    """set writes a note, set again replaces it under a greater version; get shows it."""
    first = cli.ok("set", "n1", "stand-up at 9:30", "--meta", "room=a", "--json").json()
    second = cli.ok("set", "n1", "stand-up at 10:00", "--json").json()
    assert second["version"] > first["version"] and not second["unchanged"]
    record = cli.ok("get", "n1", "--json").json()
    assert (record["text"], record["metadata"], record["version"]) == ("stand-up at 10:00", {}, second["version"])


def test_set_with_a_stale_version_fails_and_writes_nothing(cli: Cli) -> None:
    """--if-version with a version that is not the live one exits 1 naming both versions."""
    v = cli.ok("set", "n1", "one", "--json").json()["version"]
    cli.ok("set", "n1", "two")
    result = cli("set", "n1", "three", "--if-version", str(v))
    assert result.code == 1 and f"expected version {v}" in result.err and no_traceback(result)
    assert cli.ok("get", "n1", "--json").json()["text"] == "two"


def test_write_errors_name_the_namespace_as_the_command_line_writes_it(cli: Cli) -> None:
    """A stale version, a missing id and a reused op id in bob/home are reported in bob/home, not
    as the Python tuple ('bob', 'home')."""
    v = cli.ok("set", "n1", "one", "--ns", "bob/home", "--op-id", "x", "--json").json()["version"]
    cli.ok("set", "n1", "two", "--ns", "bob/home")
    errors = [
        cli("set", "n1", "three", "--ns", "bob/home", "--if-version", str(v)).err,
        cli("update", "nope", "--ns", "bob/home", "--text", "x").err,
        cli("set", "n1", "other", "--ns", "bob/home", "--op-id", "x").err,
    ]
    for err in errors:
        assert "namespace bob/home" in err and "('bob'" not in err, err


def test_set_with_an_op_id_replays(cli: Cli) -> None:
    """The same set with the same --op-id replays; the note is written once."""
    cli.ok("set", "n1", "one", "--time", "2025-01-01", "--op-id", "x")
    again = cli.ok("set", "n1", "one", "--time", "2025-01-01", "--op-id", "x", "--json").json()
    assert again["replayed"] is True
    assert len(cli.ok("history", "n1", "--json").out.strip().splitlines()) >= 1


def test_update_of_the_text_with_an_op_id_replays(cli: Cli) -> None:
    """The same update --text with the same --op-id, run twice: the second replays and writes
    nothing (it raised IdempotencyConflict before)."""
    cli.ok("set", "n1", "one")
    first = cli.ok("update", "n1", "--text", "two", "--op-id", "x", "--json").json()
    again = cli.ok("update", "n1", "--text", "two", "--op-id", "x", "--json").json()
    assert again["replayed"] is True and first["replayed"] is False and again["version"] == first["version"]


def test_update_keeps_time_and_other_metadata(cli: Cli) -> None:
    """update --meta changes one key and keeps the time and the other keys; --patch null removes."""
    cli.ok("set", "n1", "text", "--time", "2025-03-01", "--meta", "a=1", "--meta", "b=2")
    cli.ok("update", "n1", "--meta", "b=3")
    cli.ok("update", "n1", "--patch", '{"a": null}')
    record = cli.ok("get", "n1", "--json").json()
    assert record["metadata"] == {"b": 3} and record["time"] == "2025-03-01T00:00:00Z"


def test_update_with_nothing_to_change_is_refused(cli: Cli) -> None:
    """update without --text, --time, --meta or --patch exits 1."""
    cli.ok("set", "n1", "text")
    result = cli("update", "n1")
    assert result.code == 1 and "nothing to update" in result.err


def test_update_patch_must_be_an_object(cli: Cli) -> None:
    """--patch that is not a JSON object is a usage error naming the option."""
    cli.ok("set", "n1", "text")
    result = cli("update", "n1", "--patch", "[1]")
    assert result.code == 2 and "--patch" in result.err


def test_sweep_deletes_expired_notes(cli: Cli) -> None:
    """set --expires in the past hides the note; sweep deletes it as coniti-ttl."""
    cli.ok("set", "old", "gone soon", "--expires", "2001-01-01")
    cli.ok("set", "new", "stays", "--expires", "7d")
    assert cli("get", "old").code == 1
    assert cli.ok("sweep", "--json").json() == {"deleted": 1}
    assert "coniti-ttl" in cli.ok("history", "old").out


def test_ls_versions_adds_a_column(cli: Cli) -> None:
    """ls --versions shows each record's version."""
    v = cli.ok("set", "n1", "text", "--json").json()["version"]
    out = cli.ok("ls", "--versions").out
    assert "version" in out and str(v) in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--expires", "99999999999d"), "Invalid value for '--expires': '99999999999d' from now is after year 9999 (UTC)"),
        (("--expires", "1e20"), "Invalid value for '--expires': '1e20' is outside years 1 to 9999 (UTC)"),
        (("--time", "-62135596801"), "Invalid value for '--time': '-62135596801' is outside years 1 to 9999 (UTC)"),
    ],
    ids=["expires-duration", "expires-seconds", "time-before-year-1"],
)
def test_a_time_outside_years_1_to_9999_is_a_usage_error(cli: Cli, args: tuple[str, ...], message: str) -> None:
    """set with an expiry or a time past the horizon exits 2 naming the option and writes nothing
    (before, the expiry was stored and get failed on it with an internal error)."""
    result = cli("set", "z5", "x", *args)
    assert result.code == 2 and message in result.err and no_traceback(result)
    assert cli("get", "z5").code == 1


def test_a_note_at_the_ends_of_the_horizon_is_shown(cli: Cli) -> None:
    """A note timestamped at the first moment of year 1 and expiring in the last second of year
    9999 is written, and get prints both times."""
    cli.ok("set", "z5", "x", "--time", "0001-01-01", "--expires", "9999-12-31T23:59:59")
    shown = cli.ok("get", "z5", "--json").json()
    assert shown["time"] == "0001-01-01T00:00:00Z" and shown["expires_at"] == 253402300799.0
    assert "9999-12-31 23:59:59 UTC" in cli.ok("get", "z5").out


def _nested(depth: int, kind: str) -> str:
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    if kind == "and":
        return '{"$and":[' * depth + '{"a":1}' + "]}" * depth
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("update", "n1", "--patch", _nested(5_000, "object")), "Invalid value for '--patch': nested deeper than 64 levels"),
        (("update", "n1", "--patch", _nested(65, "object")), "Invalid value for '--patch': nested deeper than 64 levels"),
        (("set", "n1", "x", "--meta", "k=" + _nested(5_000, "list")), "Invalid value for '--meta': k: nested deeper than 64 levels"),
        (("ask", "tea", "--filter", _nested(10_000, "and")), "Invalid value for '--filter': --filter is nested deeper than 32 levels"),
        (("meta", "set", "k", _nested(5_000, "list")), "coniti: error: VALUE: nested deeper than 64 levels"),
    ],
    ids=["patch-5000", "patch-65", "meta-5000", "filter-10000", "meta-set-5000"],
)
def test_deep_json_on_the_command_line_is_refused_naming_the_option(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    """JSON nested past the library's limit (or too deep for Python's parser) is refused with one
    line naming the option, not an internal error, and nothing is written."""
    cli.ok("set", "n1", "tea at noon")
    before = cli.ok("get", "n1", "--json").json()
    result = cli(*args)
    assert result.code in (1, 2) and message in result.err and no_traceback(result)
    assert "internal error" not in result.err
    assert cli.ok("get", "n1", "--json").json() == before


def test_json_at_the_depth_limit_is_accepted(cli: Cli) -> None:
    """A --patch nested exactly 64 levels is written, as the Python API accepts it."""
    cli.ok("set", "n1", "tea at noon")
    cli.ok("update", "n1", "--patch", _nested(64, "object"))
    value = cli.ok("get", "n1", "--json").json()["metadata"]
    for _ in range(63):
        value = value["a"]
    assert value == {"a": 1}
