"""The demo: `coniti demo` as a subprocess of the installed console script, and coniti.demo.run."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_support import CONSOLE_SCRIPT, ROOT, run_script

from coniti import demo
from coniti.cli import main
from coniti.impl.log import LogBackend


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """One `coniti demo --json` run in a fresh working directory (./coniti-demo/), output piped."""
    cwd = tmp_path_factory.mktemp("demo")
    result = run_script("demo", "--json", cwd=cwd, env={"CONITI_STORE": str(cwd / "mine")})
    assert result.code == 0, result.err
    assert result.err == "", "piped: no progress bar, nothing on stderr"
    return cwd, json.loads(result.out)


def test_demo_uses_coniti_demo_in_the_working_directory(
    demo_run: tuple[Path, dict[str, object]],
) -> None:
    """Without --store the demo works in ./coniti-demo/, with the store in ./coniti-demo/store;
    it ignores CONITI_STORE (the user's own store)."""
    cwd, report = demo_run
    assert not (cwd / "mine").exists()
    assert (cwd / "coniti-demo" / demo.MARKER).is_file()
    assert report["store"] == "coniti-demo/store"


def test_demo_ingests_the_whole_corpus(demo_run: tuple[Path, dict[str, object]]) -> None:
    """Every note of the bundled corpus is admitted, in several namespaces."""
    _, report = demo_run
    assert report["notes"] == len(demo.load_corpus()) >= 300
    assert len(report["namespaces"]) >= 5  # type: ignore[arg-type]


def test_demo_embeds_with_minilm(demo_run: tuple[Path, dict[str, object]]) -> None:
    """The demo's notes are embedded with the real model, minilm (384 dims), in every namespace."""
    from coniti.embedding import EMBEDDERS

    cwd, _ = demo_run
    spec = EMBEDDERS.create("minilm").spec_id
    with LogBackend(cwd / "coniti-demo" / "store", read_only=True) as store:
        for ns in store.namespaces():
            assert store.get_meta(store.meta_get_request("embedding_id", ns)).value == spec
            assert next(store.iter_all(namespace=ns)).vector.shape == (384,)


def test_demo_store_matches_its_report(demo_run: tuple[Path, dict[str, object]]) -> None:
    """The store left behind has the reported head, verifies clean, and has lost the deleted notes."""
    cwd, report = demo_run
    with LogBackend(cwd / "coniti-demo" / "store", read_only=True) as store:
        assert store.head == report["figures"]["events"]  # type: ignore[index]
        assert store.head_hash == report["verify"]["head_hash"]  # type: ignore[index]
        assert store.verify().ok
        for edit in demo.EDITS:
            found = store.get(store.get_request([edit.id], edit.namespace)).records
            assert [r.note.text for r in found] == ([edit.new_text] if edit.new_text else [])


def test_demo_corrects_with_one_update_carrying_actor_and_reason(
    demo_run: tuple[Path, dict[str, object]],
) -> None:
    """The corrected record's trail shows the ingest, then the actor's update: one put that
    replaces the ingested version (as the README recommends), not a delete and a put."""
    _, report = demo_run
    trail = report["trails"][0]["events"]  # type: ignore[index]
    assert [(e["kind"], e["actor"]) for e in trail] == [("put", "assistant"), ("put", "bob")]
    assert trail[1]["replaces"] == trail[0]["seq"] and trail[1]["reason"] == demo.EDITS[0].reason


def test_demo_erasure_leaves_a_receipt_and_no_content(
    demo_run: tuple[Path, dict[str, object]],
) -> None:
    """The erased record's trail keeps who and when, not the content; no file of the demo (store,
    dump, log export) holds the erased text after the compaction."""
    cwd, report = demo_run
    erased = next(e for e in demo.EDITS if e.erase)
    trail = report["trails"][1]["events"]  # type: ignore[index]
    assert [(e["kind"], e["erased"]) for e in trail] == [("put", True), ("erase", False)]
    assert trail[1]["actor"] == erased.actor and trail[1]["reason"] == erased.reason
    secret = next(c.text for c in demo.load_corpus() if c.id == erased.id)
    for path in (cwd / "coniti-demo").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
            assert secret.encode() not in data, path


def test_demo_earlier_answers_differ(demo_run: tuple[Path, dict[str, object]]) -> None:
    """Asked as of an earlier point, the same question gets a different answer."""
    _, report = demo_run
    for group in report["earlier"]:  # type: ignore[union-attr]
        now = [h["text"] for h in group["now"]["hits"]]
        for then in group["then"]:
            assert [h["text"] for h in then["hits"]] != now, then["as_of"]
            assert then["why"]


def test_demo_changes_between_points(demo_run: tuple[Path, dict[str, object]]) -> None:
    """The diff lists every edit: corrections as changed, deletions as removed."""
    _, report = demo_run
    changes = {(c["id"], c["change"]) for c in report["changes"]}  # type: ignore[union-attr]
    expected = {(e.id, "changed" if e.new_text else "removed") for e in demo.EDITS if not e.erase}
    assert changes >= expected


def test_demo_writes_its_files(demo_run: tuple[Path, dict[str, object]]) -> None:
    """The memory dump and the log export exist, and the export holds every event."""
    cwd, report = demo_run
    dump, export = report["dump"], report["export"]
    assert (cwd / dump["file"]).stat().st_size > 0  # type: ignore[index]
    assert export["events"] == report["figures"]["events"]  # type: ignore[index]
    assert (cwd / export["file"]).stat().st_size > 0  # type: ignore[index]


def test_demo_is_quick(demo_run: tuple[Path, dict[str, object]]) -> None:
    """The demo's own work takes well under a minute."""
    _, report = demo_run
    assert report["figures"]["seconds"] < 30  # type: ignore[index]


def test_demo_rerun_replaces_its_directory(tmp_path: Path) -> None:
    """Running the demo twice in one directory works: the second run starts from a fresh store."""
    first = demo.run(tmp_path / "d")
    second = demo.run(tmp_path / "d")
    assert second.events == first.events and second.notes == first.notes


def test_demo_refuses_a_foreign_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-empty directory the demo did not make is refused and left untouched (exit 1)."""
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    assert main(["demo", "--store", str(foreign)]) == 1
    err = capsys.readouterr().err
    assert "was not made by the demo" in err and "Traceback" not in err
    assert sorted(p.name for p in foreign.iterdir()) == ["precious.txt"]


def test_demo_help_says_what_store_means_for_it(capsys: pytest.CaptureFixture[str]) -> None:
    """demo --help describes --store as the demo's own directory (PATH/store, $CONITI_STORE
    ignored), as its text says, not as the store option of the other commands."""
    assert main(["demo", "--help"]) == 0
    options = capsys.readouterr().out.partition("Options:")[2]
    store_help = " ".join(options.partition("--store PATH")[2].partition("--json")[0].split())
    assert "PATH/store" in store_help and "$CONITI_STORE is ignored" in store_help
    assert "default: $CONITI_STORE" not in store_help


def test_demo_prints_every_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json the demo prints its nine sections, the head hash and the figures."""
    assert main(["demo", "--store", str(tmp_path / "d")]) == 0
    captured = capsys.readouterr()
    for title in ("1. Ingest", "2. Corrections", "3. Questions", "4. The same question, earlier",
                  "5. Audit trail", "6. What changed", "7. Keeping memory true", "8. verify",
                  "9. Files written", "10. Figures"):
        assert title in captured.out
    assert "hash chain and projections clean" in captured.out
    assert captured.err == ""


def test_tools_demo_script(tmp_path: Path) -> None:
    """./tools/demo (with .venv already installed) runs the demo in the caller's directory."""
    stamp = ROOT / ".venv" / ".coniti-installed"
    if not stamp.exists() or (ROOT / "pyproject.toml").stat().st_mtime > stamp.stat().st_mtime:
        pytest.skip("tools/demo would install into .venv first; ./tools/test installs it")
    env = {**os.environ, "COLUMNS": "120"}
    proc = subprocess.run([str(ROOT / "tools" / "demo"), "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verify"]["problems"] == []
    assert (tmp_path / "coniti-demo" / "store").is_dir()


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO once the child has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_progress_shows_on_a_terminal_only(tmp_path: Path) -> None:
    """On a terminal the demo's ingest shows a progress bar."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "demo", "--store", str(tmp_path / "tty")],
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    output = _read_all(master)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    assert b"ingesting the corpus" in output


def test_demo_keeps_memory_true_on_a_copy(demo_run: tuple[Path, dict[str, object]]) -> None:
    """On a copy of the store the April 1 plan is superseded: hidden now, the answer for a day when it
    held, shown marked on request; a conversation is consolidated into one summary citing its turns.
    The tour's store is left without either."""
    cwd, report = demo_run
    truth: dict = report["truth"]  # type: ignore[assignment]
    assert truth["superseded"]["old"] == "atlas-launch-plan"
    assert "atlas-launch-plan" not in [h["id"] for h in truth["now"]["hits"]]
    assert truth["then"]["hits"][0]["id"] == "atlas-launch-plan"
    assert {"id": "atlas-launch-plan", "superseded": True} in truth["marked"]
    assert (truth["consolidation"]["summarized"], truth["consolidation"]["derived"]) == (4, 1)
    assert "from sync-0@" in truth["blame"]
    with LogBackend(cwd / "coniti-demo" / "store", read_only=True) as store:
        assert store.get(store.get_request(["atlas-launch-date"], ("team", "atlas"))).records == []
