"""History commands through main(argv): log, history, diff, at, export, import, stats."""

from __future__ import annotations

import gzip
import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from cli_support import CONSOLE_SCRIPT, Cli, no_traceback, run_script

from coniti.impl.log import LogBackend


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Events 1-2: meta + put of 'a' (alice); 3-4: put 'b', 'c'; 5: bob deletes 'b' with a reason."""
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    cli.ok("add", "Alice likes tea", "--ns", "alice", "--id", "a", "--actor", "agent")
    cli.ok("add", "Alice runs on Mondays", "--ns", "alice", "--id", "b", "--actor", "agent")
    cli.ok("add", "Alice moved to Lyon", "--ns", "alice", "--id", "c", "--actor", "agent")
    cli.ok("rm", "b", "--ns", "alice", "--actor", "bob", "--reason", "wrong person")
    return cli


def test_log_lines(cli: Cli) -> None:
    """log prints one line per event with seq, actor, kind, namespace, id and reason."""
    lines = cli.ok("log").out.splitlines()
    assert len(lines) == 5
    last = lines[-1]
    for part in ("5", "bob", "delete", "alice", "b", "(wrong person)"):
        assert part in last.split("  ") or part in last


def test_log_json_lines(cli: Cli) -> None:
    """log --json prints one JSON object per event, gap-free from 1, with hash and prev."""
    events = cli.ok("log", "--json").lines()
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert events[0]["kind"] == "meta" and events[1]["kind"] == "put"
    assert events[1]["record"]["text"] == "Alice likes tea" and "vector" not in events[1]["record"]
    assert all(events[i]["prev"] == events[i - 1]["hash"] for i in range(1, 5))
    assert events[4]["actor"] == "bob" and events[4]["reason"] == "wrong person"
    assert events[4]["recorded"].endswith("Z")


def test_log_after_limit_and_namespace(cli: Cli) -> None:
    """--after, --limit and --ns select events."""
    assert [e["seq"] for e in cli.ok("log", "--after", "2", "--limit", "2", "--json").lines()] == [3, 4]
    cli.ok("meta", "set", "k", "1", "--ns", "other")
    assert [e["seq"] for e in cli.ok("log", "--ns", "other", "--json").lines()] == [6]


def test_log_json_as_a_subprocess(cli: Cli) -> None:
    """The console script's log --json is JSON lines that parse."""
    result = run_script("log", "--json", "--store", str(cli.store))
    assert result.code == 0, result.err
    assert [json.loads(line)["seq"] for line in result.out.splitlines()] == [1, 2, 3, 4, 5]


def test_log_follow_sees_another_process(cli: Cli) -> None:
    """log --follow prints events written by another process as they commit, then times out."""
    proc = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "log", "--follow", "--after", "5", "--json", "--timeout", "20", "--limit", "1",
         "--store", str(cli.store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    writer = threading.Timer(2.0, lambda: run_script(
        "meta", "set", "late", "1", "--store", str(cli.store), "--actor", "writer"))
    writer.start()
    out, err = proc.communicate(timeout=60)
    writer.join()
    assert proc.returncode == 0, err
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert event["seq"] == 6 and event["key"] == "late" and event["actor"] == "writer"


def test_log_follow_timeout(cli: Cli) -> None:
    """--follow --timeout stops after that long without events; --after 0 first replays history."""
    start = time.monotonic()
    events = cli.ok("log", "--follow", "--after", "3", "--timeout", "0.3", "--json").lines()
    assert [e["seq"] for e in events] == [4, 5]
    assert time.monotonic() - start < 10


def test_history(cli: Cli) -> None:
    """history ID shows every event of the record: its put, then bob's delete with the reason."""
    out = cli.ok("history", "b", "--ns", "alice").out
    assert "agent" in out and "bob" in out and "wrong person" in out
    events = cli.ok("history", "b", "--ns", "alice", "--json").lines()
    assert [(e["kind"], e["actor"]) for e in events] == [("put", "agent"), ("delete", "bob")]


def test_history_of_unknown_id(cli: Cli) -> None:
    """history of an id never written exits 1 naming it."""
    result = cli("history", "zz", "--ns", "alice")
    assert result.code == 1 and "'zz'" in result.err and no_traceback(result)


def test_diff(cli: Cli) -> None:
    """diff A B lists ids added, removed and changed between two sequence numbers."""
    doc = cli.ok("diff", "2", "5", "--ns", "alice", "--json").json()
    assert (doc["added"], doc["removed"], doc["changed"]) == (["c"], [], [])
    doc = cli.ok("diff", "4", "5", "--ns", "alice", "--json").json()
    assert doc["removed"] == ["b"]
    out = cli.ok("diff", "2", "5", "--ns", "alice").out
    assert "added" in out and "Alice moved to Lyon" in out


def test_diff_without_ns_covers_the_whole_store(cli: Cli) -> None:
    """diff A B without --ns lists the changes of every namespace (it used to compare the empty
    root namespace alone and say "no change"); --prefix narrows it to a subtree."""
    cli.ok("add", "Bob likes coffee", "--ns", "bob/home", "--id", "k")
    cli.ok("rm", "c", "--ns", "alice")
    out = cli.ok("diff", "4", "now").out
    assert "the whole store" in out and "no change" not in out
    assert "bob/home" in out and "Bob likes coffee" in out and "Alice moved to Lyon" in out
    doc = cli.ok("diff", "4", "now", "--json").json()
    assert [(d["namespace"], d["added"], d["removed"]) for d in doc["namespaces"]] == [
        (["alice"], [], ["b", "c"]), (["bob", "home"], ["k"], []),
    ]
    under = cli.ok("diff", "4", "now", "--prefix", "bob", "--json").json()
    assert [d["namespace"] for d in under["namespaces"]] == [["bob", "home"]]


def test_diff_by_date(cli: Cli) -> None:
    """diff accepts ISO times: a time before the first event is the empty memory (seq 0)."""
    doc = cli.ok("diff", "2000-01-01", "now", "--ns", "alice", "--json").json()
    assert doc["a"] == 0 and doc["b"] == 5 and doc["added"] == ["a", "c"]


def test_diff_beyond_head_is_an_error(cli: Cli) -> None:
    """A point beyond the head exits 1 with one line."""
    result = cli("diff", "1", "99", "--ns", "alice")
    assert result.code == 1 and "99" in result.err and no_traceback(result)


def test_at(cli: Cli) -> None:
    """at SEQ names the event and counts the namespace's records then."""
    doc = cli.ok("at", "4", "--ns", "alice", "--json").json()
    assert doc["seq"] == 4 and doc["head"] == 5 and doc["count"] == 3
    assert doc["event"]["id"] == "c"
    assert cli.ok("at", "0", "--json").json()["event"] is None
    assert "delete" in cli.ok("at", "now", "--ns", "alice").out


def test_export_and_import(cli: Cli, tmp_path: Path) -> None:
    """export writes every event; import builds a new store with the same head and head hash."""
    file = tmp_path / "history.jsonl.gz"
    exported = cli.ok("export", str(file), "--json").json()
    assert exported["events"] == 5
    with gzip.open(file, "rt") as f:
        assert len(f.read().splitlines()) == 6
    copy = tmp_path / "copy"
    imported = cli.ok("import", str(file), "--store", str(copy), "--json").json()
    assert imported["head"] == 5 and imported["head_hash"] == exported["head_hash"]
    assert cli.ok("count", "--ns", "alice", "--store", str(copy)).out.strip() == "2"


def test_import_refuses_an_existing_store(cli: Cli, tmp_path: Path) -> None:
    """import into an existing store exits 1 and leaves it alone."""
    file = tmp_path / "h.jsonl"
    cli.ok("export", str(file))
    result = cli("import", str(file))
    assert result.code == 1 and no_traceback(result)
    with LogBackend(cli.store) as store:
        assert store.head == 5


def test_import_into_an_existing_store_says_what_to_do(cli: Cli, tmp_path: Path) -> None:
    """The refusal of import into an existing store is in the command line's words: it names the
    store and --store, not a library function."""
    file = tmp_path / "h.jsonl"
    cli.ok("export", str(file))
    err = cli("import", str(file)).err
    assert str(cli.store) in err and "--store" in err and "import_log" not in err
    assert err.count("\n") == 1


def test_import_rejects_an_edited_file(cli: Cli, tmp_path: Path) -> None:
    """An edited line fails the import with the line number, and creates no store."""
    file = tmp_path / "h.jsonl"
    cli.ok("export", str(file))
    lines = file.read_text().splitlines()
    assert '"actor":"agent"' in lines[2]
    lines[2] = lines[2].replace('"actor":"agent"', '"actor":"mallory"')
    file.write_text("\n".join(lines) + "\n")
    copy = tmp_path / "copy"
    result = cli("import", str(file), "--store", str(copy))
    assert result.code == 1 and "line" in result.err and no_traceback(result)
    assert not copy.exists() or not any(copy.iterdir())


def test_stats(cli: Cli) -> None:
    """stats gives events, records per namespace, size on disk, head seq and hash."""
    doc = cli.ok("stats", "--json").json()
    assert doc["events"] == doc["head_seq"] == 5
    assert doc["records"] == 2
    assert doc["namespaces"] == [{"namespace": ["alice"], "records": 2}]
    assert doc["bytes"] > 0 and len(doc["head_hash"]) == 64
    out = cli.ok("stats").out
    assert doc["head_hash"] in out and "alice" in out
