"""dump and load through main(argv), and as subprocesses of the installed console script."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from cli_support import Cli, no_traceback, run_script

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.memory import MemoryRecord, PutRequest


def _seed(store: Path, n: int = 5) -> None:
    records = [
        MemoryRecord(
            note=Note(id=f"n{i}", text=f"note {i}", timestamp=1000.0 + i, metadata={}),
            vector=np.arange(1, 5, dtype=np.float32) * i,
            namespace=("alice",),
        )
        for i in range(n)
    ]
    with LogBackend(store) as backend:
        backend.put(PutRequest(records=records))


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    store = tmp_path / "store"
    _seed(store)
    return Cli(store, capsys, monkeypatch)


def test_dump_writes_a_memory_file(cli: Cli, tmp_path: Path) -> None:
    """dump FILE writes a coniti-memory file of the namespace and reports the count."""
    target = tmp_path / "alice.jsonl"
    doc = cli.ok("dump", str(target), "--ns", "alice", "--json").json()
    assert doc == {"file": str(target), "namespace": ["alice"], "records": 5}
    lines = target.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "coniti-memory"
    assert len(lines) == 6


def test_dump_of_a_namespace_without_notes_says_so(cli: Cli, tmp_path: Path) -> None:
    """dump of a namespace with no notes writes the empty file but says on stderr that it holds
    none, naming the namespaces that do."""
    target = tmp_path / "nosuch.jsonl"
    result = cli.ok("dump", str(target), "--ns", "nosuch")
    assert "wrote 0 records" in result.out
    assert "no notes in namespace nosuch" in result.err and "alice" in result.err
    assert len(target.read_text().splitlines()) == 1


def test_dump_gzip_by_name(cli: Cli, tmp_path: Path) -> None:
    """A .gz name writes gzip."""
    target = tmp_path / "alice.jsonl.gz"
    cli.ok("dump", str(target), "--ns", "alice")
    with gzip.open(target, "rt") as f:
        assert json.loads(f.readline())["count"] == 5


def test_dump_to_stdout(cli: Cli) -> None:
    """dump - writes the file to stdout and nothing else."""
    out = cli.ok("dump", "-", "--ns", "alice").out
    assert json.loads(out.splitlines()[0])["format"] == "coniti-memory"
    assert len(out.splitlines()) == 6


def test_dump_as_of(cli: Cli, tmp_path: Path) -> None:
    """dump --as-of writes the namespace as it was at that point."""
    cli.ok("rm", "n0", "n1", "--ns", "alice")
    target = tmp_path / "then.jsonl"
    cli.ok("dump", str(target), "--ns", "alice", "--as-of", "5")
    assert json.loads(target.read_text().splitlines()[0])["count"] == 5


def test_load_rehomes_into_a_namespace(cli: Cli, tmp_path: Path) -> None:
    """load FILE --ns puts every record into that namespace."""
    target = tmp_path / "alice.jsonl"
    cli.ok("dump", str(target), "--ns", "alice")
    assert cli.ok("load", str(target), "--ns", "bob/copy", "--json").json()["records"] == 5
    assert cli.ok("count", "--ns", "bob/copy").out.strip() == "5"


def test_load_creates_a_store(cli: Cli, tmp_path: Path) -> None:
    """load is a write command: it creates a missing store."""
    target = tmp_path / "alice.jsonl"
    cli.ok("dump", str(target), "--ns", "alice")
    fresh = tmp_path / "fresh"
    cli.ok("load", str(target), "--store", str(fresh))
    assert cli.ok("count", "--ns", "alice", "--store", str(fresh)).out.strip() == "5"


def test_load_of_a_bad_file_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    """A broken file exits 1 with the line number, and the store is unchanged."""
    target = tmp_path / "alice.jsonl"
    cli.ok("dump", str(target), "--ns", "alice")
    lines = target.read_text().splitlines()
    lines[3] = lines[3][:-5]
    target.write_text("\n".join(lines) + "\n")
    with LogBackend(cli.store) as store:
        head = store.head
    result = cli("load", str(target), "--ns", "other")
    assert result.code == 1 and "line 4" in result.err and no_traceback(result)
    assert len(result.err.strip().splitlines()) == 1
    with LogBackend(cli.store) as store:
        assert store.head == head


def test_load_missing_file(cli: Cli, tmp_path: Path) -> None:
    """A file that does not exist exits 1 naming it, without a traceback."""
    result = cli("load", str(tmp_path / "nope.jsonl"))
    assert result.code == 1 and "nope.jsonl" in result.err and no_traceback(result)


def test_dump_load_round_trip_as_subprocesses(tmp_path: Path) -> None:
    """The installed console script dumps one store and loads the file into another."""
    source, target, file = tmp_path / "a", tmp_path / "b", tmp_path / "m.jsonl.gz"
    _seed(source, 20)
    dumped = run_script("dump", str(file), "--ns", "alice", "--store", str(source), "--json")
    assert dumped.code == 0, dumped.err
    assert json.loads(dumped.out)["records"] == 20
    loaded = run_script("load", str(file), "--store", str(target), "--json")
    assert loaded.code == 0, loaded.err
    assert json.loads(loaded.out)["records"] == 20
    listed = run_script("ls", "--ns", "alice", "--store", str(target), "--json")
    assert [json.loads(x)["id"] for x in listed.out.splitlines()] == [f"n{i}" for i in range(20)]
    with LogBackend(source) as a, LogBackend(target) as b:
        assert list(a.iter_all(namespace=("alice",))) == list(b.iter_all(namespace=("alice",)))


def test_subprocess_error_has_no_traceback(tmp_path: Path) -> None:
    """A failing console-script run exits 1 with one line on stderr."""
    result = run_script("ls", "--store", str(tmp_path / "missing"))
    assert result.code == 1
    assert result.err.startswith("coniti: error: no store at ")
    assert len(result.err.strip().splitlines()) == 1 and no_traceback(result)


def test_failed_load_creates_no_store(cli: Cli, tmp_path: Path) -> None:
    """A load that fails (not a memory file) into a store that did not exist exits 1 and leaves no
    new directory: neither the store nor the parents it would have created."""
    bad = tmp_path / "notjsonl.md"
    bad.write_text("# notes\n")
    target = tmp_path / "new" / "deeper" / "s2"
    result = cli("load", str(bad), "--store", str(target))
    assert result.code == 1 and "line 1" in result.err
    assert not (tmp_path / "new").exists()


def test_failed_load_keeps_an_existing_store(cli: Cli, tmp_path: Path) -> None:
    """A failed load into an existing store removes nothing: the store and its records stay."""
    bad = tmp_path / "notjsonl.md"
    bad.write_text("# notes\n")
    assert cli("load", str(bad)).code == 1
    assert cli.ok("count", "--ns", "alice").out.strip().endswith("5")


def test_load_from_stdin_reports_invalid_utf8_on_its_line(tmp_path: Path) -> None:
    """load - reads stdin as bytes: an invalid UTF-8 byte on line 3 is reported as line 3."""
    import subprocess
    import sys

    from cli_support import CONSOLE_SCRIPT

    src = tmp_path / "src"
    _seed(src, 3)
    with LogBackend(src) as backend:
        text = Path(tmp_path / "m.jsonl")
        backend.dump(text, ("alice",))
    data = text.read_bytes()
    lines = data.split(b"\n")
    lines[2] = lines[2].replace(b"note 1", b"note \xff")
    proc = subprocess.run(
        [str(CONSOLE_SCRIPT), "load", "-", "--store", str(tmp_path / "dst")],
        input=b"\n".join(lines), capture_output=True, check=False,
        env={"PATH": str(Path(sys.executable).parent)},
    )
    assert proc.returncode == 1
    assert b"line 3" in proc.stderr and b"UTF-8" in proc.stderr, proc.stderr
    assert not (tmp_path / "dst").exists()


def test_dump_onto_a_directory_says_so(cli: Cli, tmp_path: Path) -> None:
    """dump onto a directory is refused in one line that names it, with no Errno or .partial."""
    result = cli("dump", str(tmp_path), "--ns", "alice")
    assert result.code == 1
    assert result.err.strip() == f"coniti: error: cannot write {tmp_path}: it is a directory, not a regular file"


def test_dump_onto_a_fifo_is_refused(cli: Cli, tmp_path: Path) -> None:
    """dump onto a FIFO (as onto a device such as /dev/full) exits 1 and the FIFO stays one."""
    import os
    import stat

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = cli("dump", str(fifo), "--ns", "alice")
    assert result.code == 1 and "FIFO" in result.err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_messages_write_namespaces_as_the_command_line_does(cli: Cli, tmp_path: Path) -> None:
    """A load refused because an id exists names the namespace as alice/work would be typed, never
    as a Python tuple."""
    file = tmp_path / "m.jsonl"
    cli.ok("dump", str(file), "--ns", "alice")
    result = cli("load", str(file))
    assert result.code == 1
    assert "already exists in namespace alice;" in result.err and "('alice',)" not in result.err


def test_namespace_text_reads_back_through_the_parser() -> None:
    """errors.namespace_text writes what cli.parse.parse_namespace reads back (escapes included)."""
    from coniti.cli.parse import parse_namespace
    from coniti.errors import namespace_text

    for ns in [(), ("alice", "work"), ("a/b", "c\\d")]:
        assert parse_namespace(namespace_text(ns)) == ns
    assert namespace_text(("bob", "home")) == "bob/home"
