"""Memory commands through main(argv): get, rm, ls, count, meta (add and ask: test_cli_engine.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import Cli, no_traceback

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.memory import MemoryRecord, PutRequest

DAY = 86400.0
T0 = 1740787200.0  # 2025-03-01T00:00:00Z


def _rec(rid: str, text: str, t: float, ns: tuple[str, ...]) -> MemoryRecord:
    return MemoryRecord(
        note=Note(id=rid, text=text, timestamp=t, metadata={"n": rid}),
        vector=np.ones(4, dtype=np.float32),
        namespace=ns,
    )


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A store with three notes in alice/notes (1, 2, 3 days after T0) and one in bob."""
    store = tmp_path / "store"
    with LogBackend(store, actor="setup") as backend:
        backend.put(PutRequest(records=[
            _rec("a1", "first note", T0 + DAY, ("alice", "notes")),
            _rec("a2", "second note", T0 + 2 * DAY, ("alice", "notes")),
            _rec("a3", "third note", T0 + 3 * DAY, ("alice", "notes")),
            _rec("b1", "bob's note", T0, ("bob",)),
        ]))
    return Cli(store, capsys, monkeypatch)


def test_ls_lists_in_time_order(cli: Cli) -> None:
    """ls shows the namespace's notes oldest first."""
    out = cli.ok("ls", "--ns", "alice/notes").out
    assert out.index("first note") < out.index("second note") < out.index("third note")
    assert "bob" not in out


def test_ls_json_lines(cli: Cli) -> None:
    """ls --json prints one JSON object per record with id, namespace, time and text."""
    rows = cli.ok("ls", "--ns", "alice/notes", "--json").lines()
    assert [r["id"] for r in rows] == ["a1", "a2", "a3"]
    assert rows[0]["namespace"] == ["alice", "notes"]
    assert rows[0]["time"] == "2025-03-02T00:00:00Z"
    assert rows[0]["metadata"] == {"n": "a1"}
    assert "vector" not in rows[0] and rows[0]["dim"] == 4


def test_ls_time_window_and_limit(cli: Cli) -> None:
    """--from/--to select a half-open note-time window; --limit caps the count."""
    rows = cli.ok("ls", "--ns", "alice/notes", "--from", "2025-03-03", "--to", "2025-03-04",
                  "--json").lines()
    assert [r["id"] for r in rows] == ["a2"]
    rows = cli.ok("ls", "--ns", "alice/notes", "--limit", "2", "--json").lines()
    assert [r["id"] for r in rows] == ["a1", "a2"]


def test_global_options_before_the_command(cli: Cli) -> None:
    """Shared options work before the command name too."""
    rows = cli.ok("--json", "ls", "--ns", "alice/notes").lines()
    assert len(rows) == 3


def test_ns_before_the_command(cli: Cli) -> None:
    """--ns works before the command name as after it (the README says every option does)."""
    assert cli.ok("--ns", "alice/notes", "count").out.strip() == "3"
    assert [r["id"] for r in cli.ok("--ns", "bob", "ls", "--json").lines()] == ["b1"]
    assert cli.ok("--ns", "bob", "meta", "get", "k", "--json").json()["namespace"] == ["bob"]


def test_ns_after_the_command_wins(cli: Cli) -> None:
    """Given both before and after the command, the --ns after it wins (as for every option)."""
    assert cli.ok("--ns", "bob", "count", "--ns", "alice/notes").out.strip() == "3"


def test_ns_before_a_command_without_one_is_a_usage_error(cli: Cli) -> None:
    """--ns before a command that takes no namespace exits 2 naming the command."""
    result = cli("--ns", "bob", "verify")
    assert result.code == 2 and "--ns does not apply to 'verify'" in result.err


def test_ls_prefix_lists_every_namespace_under_it(cli: Cli) -> None:
    """ls --prefix alice lists the notes of every namespace under alice, with their namespace;
    --prefix / lists the whole store."""
    out = cli.ok("ls", "--prefix", "alice").out
    assert "alice/notes" in out and "first note" in out and "third note" in out and "bob" not in out
    rows = cli.ok("ls", "--prefix", "/", "--json").lines()
    assert sorted((tuple(r["namespace"]), r["id"]) for r in rows) == [
        (("alice", "notes"), "a1"), (("alice", "notes"), "a2"), (("alice", "notes"), "a3"), (("bob",), "b1"),
    ]


def test_ls_prefix_limit_caps_the_total(cli: Cli) -> None:
    """--limit with --prefix caps the number of records over all the namespaces."""
    assert len(cli.ok("ls", "--prefix", "/", "--limit", "2", "--json").lines()) == 2


def test_count_prefix_sums_the_namespaces(cli: Cli) -> None:
    """count --prefix / counts every namespace; --json gives each namespace's count too."""
    assert cli.ok("count", "--prefix", "/").out.strip() == "4"
    doc = cli.ok("count", "--prefix", "/", "--json").json()
    assert doc == {"prefix": [], "count": 4, "namespaces": {"alice/notes": 3, "bob": 1}}


def test_ns_and_prefix_together_is_a_usage_error(cli: Cli) -> None:
    """ls with both --ns and --prefix exits 2."""
    assert cli("ls", "--ns", "bob", "--prefix", "alice").code == 2


@pytest.mark.parametrize(("args", "prefix"), [(["ls", "--ns", "alice"], "alice"), (["count"], "/")])
def test_a_parent_namespace_hint_names_prefix(cli: Cli, args: list[str], prefix: str) -> None:
    """ls/count on a namespace that holds no notes itself but is a parent of namespaces that do
    (the root of a store, alice of alice/notes) name those namespaces and --prefix."""
    result = cli.ok(*args)
    assert f"--prefix {prefix}" in result.err and "alice/notes" in result.err


def test_get_shows_one_record(cli: Cli) -> None:
    """get ID prints the record; --json gives one document."""
    assert "second note" in cli.ok("get", "a2", "--ns", "alice/notes").out
    doc = cli.ok("get", "a2", "--ns", "alice/notes", "--json").json()
    assert doc["id"] == "a2" and doc["text"] == "second note"


def test_get_missing_is_an_error(cli: Cli) -> None:
    """get of an unknown id exits 1 with one line on stderr naming the id and namespace."""
    result = cli("get", "zz", "--ns", "alice/notes")
    assert result.code == 1
    assert result.err.strip() == "coniti: error: no record 'zz' in namespace alice/notes"
    assert no_traceback(result)


def test_count(cli: Cli) -> None:
    """count prints the number of records of the namespace (in the window)."""
    assert cli.ok("count", "--ns", "alice/notes").out.strip() == "3"
    doc = cli.ok("count", "--ns", "alice/notes", "--from", "2025-03-03", "--json").json()
    assert doc == {"namespace": ["alice", "notes"], "count": 2}


def test_rm_deletes_and_reports_missing(cli: Cli) -> None:
    """rm deletes the ids it finds and exits 1 naming the ones it did not."""
    result = cli("rm", "a1", "nope", "--ns", "alice/notes", "--json")
    assert result.code == 1
    assert result.json() == {"deleted": ["a1"], "missing": ["nope"]}
    assert "nope" in result.err
    assert cli.ok("count", "--ns", "alice/notes").out.strip() == "2"


def test_rm_is_stamped_with_actor_and_reason(cli: Cli) -> None:
    """--actor and --reason are recorded on the delete event."""
    cli.ok("rm", "a1", "--ns", "alice/notes", "--actor", "alice", "--reason", "outdated")
    with LogBackend(cli.store) as store:
        event = next(store.events(store.head - 1))
    assert (event.actor, event.reason) == ("alice", "outdated")


def test_actor_from_environment(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """CONITI_ACTOR names the actor when --actor is not given."""
    monkeypatch.setenv("CONITI_ACTOR", "cron")
    cli.ok("rm", "a1", "--ns", "alice/notes")
    with LogBackend(cli.store) as store:
        event = next(store.events(store.head - 1))
    assert event.actor == "cron"


def test_as_of_reads_the_past(cli: Cli) -> None:
    """--as-of SEQ shows the memory as it was after that event."""
    cli.ok("rm", "a1", "a2", "--ns", "alice/notes")
    assert cli.ok("count", "--ns", "alice/notes").out.strip() == "1"
    assert cli.ok("count", "--ns", "alice/notes", "--as-of", "4").out.strip() == "3"
    rows = cli.ok("ls", "--ns", "alice/notes", "--as-of", "4", "--json").lines()
    assert [r["id"] for r in rows] == ["a1", "a2", "a3"]
    assert cli.ok("get", "a1", "--ns", "alice/notes", "--as-of", "4", "--json").json()["id"] == "a1"


def test_as_of_beyond_head_is_an_error(cli: Cli) -> None:
    """A sequence number beyond the head exits 1 with the library's message."""
    result = cli("count", "--as-of", "999")
    assert result.code == 1
    assert "999" in result.err and no_traceback(result)


def test_meta_set_and_get(cli: Cli) -> None:
    """meta set stores JSON values (text otherwise); meta get prints them as JSON."""
    cli.ok("meta", "set", "owner", "alice", "--ns", "alice/notes")
    cli.ok("meta", "set", "limit", "5", "--ns", "alice/notes")
    assert cli.ok("meta", "get", "owner", "--ns", "alice/notes").out.strip() == '"alice"'
    doc = cli.ok("meta", "get", "limit", "--ns", "alice/notes", "--json").json()
    assert doc == {"key": "limit", "namespace": ["alice", "notes"], "value": 5}
    assert cli.ok("meta", "get", "unset").out.strip() == "null"


def test_read_command_never_creates_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read command on a missing store exits 1, names the path, and creates nothing."""
    missing = tmp_path / "missing"
    cli = Cli(missing, capsys, monkeypatch)
    for args in (["ls"], ["count"], ["get", "x"], ["meta", "get", "k"], ["rm", "x"]):
        result = cli(*args)
        assert result.code == 1, args
        assert str(missing) in result.err and no_traceback(result)
    assert not missing.exists()


def test_store_option_beats_environment(cli: Cli, tmp_path: Path) -> None:
    """--store selects the store even when CONITI_STORE is set."""
    result = cli("count", "--store", str(tmp_path / "other"))
    assert result.code == 1 and "other" in result.err


def test_bad_namespace_is_a_usage_error(cli: Cli) -> None:
    """A malformed --ns exits 2 and names the option."""
    result = cli("ls", "--ns", "a//b")
    assert result.code == 2
    assert "--ns" in result.err and "empty part" in result.err and no_traceback(result)


def test_bad_time_is_a_usage_error(cli: Cli) -> None:
    """A malformed --from exits 2 and names the option."""
    result = cli("ls", "--from", "last tuesday")
    assert result.code == 2 and "--from" in result.err and no_traceback(result)


def test_debug_shows_the_traceback(cli: Cli) -> None:
    """--debug prints the traceback of an error; the exit status stays 1."""
    result = cli("count", "--as-of", "999", "--debug")
    assert result.code == 1 and "Traceback" in result.err


def test_escaped_namespace(cli: Cli) -> None:
    r"""A namespace part containing '/' is written with '\/'."""
    cli.ok("meta", "set", "k", "1", "--ns", r"a\/b")
    with LogBackend(cli.store) as store:
        assert store.get_meta(store.meta_get_request("k", ("a/b",))).value == 1
