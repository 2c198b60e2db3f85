"""coniti say, window and state: turns appended and read from the command line, the state store."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("CONITI_EMBEDDING", "local_hash")
    return Cli(tmp_path / "store", capsys, monkeypatch)


def _say(cli: Cli, text: str, speaker: str, *extra: str) -> None:
    cli.ok("say", "support", text, "--speaker", speaker, "--ns", "alice", *extra)


def test_say_appends_a_turn_and_reports_its_version(cli: Cli) -> None:
    """say --json gives the turn id, the conversation's namespace and the version written."""
    doc = cli.ok("--json", "say", "support", "hello", "--speaker", "alice", "--id", "t1", "--ns", "alice").json()
    assert doc["id"] == "t1" and doc["namespace"] == ["alice", "conversations", "support"]
    assert isinstance(doc["version"], int) and doc["version"] > 0


def test_window_last_gives_the_last_turns_in_order(cli: Cli) -> None:
    """window --last N --json gives the last N turns, oldest first, each with speaker and version."""
    for i, (text, who) in enumerate([("one", "alice"), ("two", "bot"), ("three", "alice")]):
        _say(cli, text, who, "--time", str(1000 + i), "--id", f"t{i}")
    rows = cli.ok("window", "support", "--ns", "alice", "--last", "2", "--json").lines()
    assert [(r["id"], r["speaker"], r["text"]) for r in rows] == [("t1", "bot", "two"), ("t2", "alice", "three")]
    assert all(isinstance(r["version"], int) for r in rows)


def test_window_filters_by_role_then_takes_the_last(cli: Cli) -> None:
    """--role keeps that role's turns before --last applies."""
    _say(cli, "q1", "alice", "--role", "user", "--time", "1")
    _say(cli, "a1", "bot", "--role", "assistant", "--time", "2")
    _say(cli, "q2", "alice", "--role", "user", "--time", "3")
    rows = cli.ok("window", "support", "--ns", "alice", "--role", "user", "--last", "5", "--json").lines()
    assert [r["text"] for r in rows] == ["q1", "q2"]


def test_window_context_prints_a_block(cli: Cli) -> None:
    """window --context prints the turns as prompt lines, speaker before text."""
    _say(cli, "hello there", "alice", "--role", "user")
    out = cli.ok("window", "support", "--ns", "alice", "--context").out
    assert "alice (user): hello there" in out


def test_say_with_an_empty_speaker_fails_naming_speaker(cli: Cli) -> None:
    """An empty --speaker is one error line naming speaker; nothing is written."""
    result = cli("say", "support", "hi", "--speaker", "", "--ns", "alice")
    assert result.code == 1 and "speaker" in result.err and len(result.err.strip().splitlines()) == 1


def test_state_set_get_ls_rm(cli: Cli) -> None:
    """state set stores a JSON value; get prints it with its version; ls lists keys; rm deletes."""
    version = cli.ok("--json", "state", "set", "cursor", '{"n": 3}').json()["version"]
    assert cli.ok("--json", "state", "get", "cursor").json() == {"key": "cursor", "value": {"n": 3}, "version": version}
    assert cli.ok("state", "ls").out.split() == ["cursor"]
    cli.ok("state", "rm", "cursor")
    assert cli("state", "get", "cursor").code == 1


def test_state_set_with_a_stale_expect_fails_and_keeps_the_value(cli: Cli) -> None:
    """state set --expect with a version that is not live fails; the value stays."""
    first = cli.ok("--json", "state", "set", "k", "1").json()["version"]
    cli.ok("state", "set", "k", "2", "--expect", str(first))
    assert cli("state", "set", "k", "3", "--expect", str(first)).code == 1
    assert cli.ok("--json", "state", "get", "k").json()["value"] == 2


def test_state_changes_are_audited(cli: Cli) -> None:
    """A state set with --actor and --reason shows both in the key's history."""
    cli.ok("--actor", "agent", "--reason", "advance", "state", "set", "k", "1")
    rows = cli.ok("history", "k", "--ns", "state", "--json").lines()
    assert [(r["actor"], r["reason"]) for r in rows] == [("agent", "advance")]
