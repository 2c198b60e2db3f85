"""Every golden log in log/golden/ (written once by the event version that defines it) still reads:
its frames import with the same hashes, verify clean, and fold to the recorded state at every event.

A set's ``events.jsonl`` is a ``coniti-log`` export (what tools/golden.py writes), imported with
``LogBackend.import_log``; the sets released before that (log/golden/v1) are in the earlier
``coniti-log-golden`` events format and are read as they are, frame by frame."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from coniti.impl.log import LogBackend
from coniti.log import EVENT_VERSION, EventLog
from coniti.log.codec import decode_event

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "log" / "golden"
CASES = sorted(p for p in GOLDEN.glob("v*/*") if (p / "events.jsonl").is_file())
RELEASED_EVENTS_FORMAT = "coniti-log-golden"
"""The events format of the golden sets released before tools/golden.py wrote log exports."""


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden_tool", ROOT / "tools" / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


golden = _tool()


def _read(case: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    lines = [json.loads(line) for line in (case / "events.jsonl").read_text("utf-8").splitlines()]
    state = json.loads((case / "state.json").read_text("utf-8"))
    return lines[0], lines[1:], state


def _open(case: Path, store: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], LogBackend]:
    """The case's files and a new store at ``store`` holding its events."""
    header, events, state = _read(case)
    if header["format"] == RELEASED_EVENTS_FORMAT:
        log = EventLog(store)
        log.import_frames(base64.b64decode(e["frame"]) for e in events)
        log.close()
        return header, events, state, LogBackend(store)
    return header, events, state, LogBackend.import_log(case / "events.jsonl", store)


@pytest.fixture(params=CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = _open(request.param, tmp_path / "store")
    yield opened
    opened[3].close()


def _assert_folds_to_every_state(state: dict[str, Any], backend: LogBackend) -> None:
    namespaces = [tuple(ns) for ns in state["namespaces"]]
    for point in state["states"]:
        got = golden.state_of(backend.at(point["seq"]), namespaces, state["meta_keys"])
        assert json.loads(json.dumps(got)) == point["namespaces"], f"after event {point['seq']}"


def test_there_is_a_golden_set_for_the_current_format() -> None:
    """log/golden/v<EVENT_VERSION>/ exists and holds cases."""
    assert any(p.parent.name == f"v{EVENT_VERSION}" for p in CASES)


def test_frames_decode_to_their_recorded_fields(case: Any) -> None:
    """Each stored frame decodes to the readable fields written beside it, hash included."""
    _, events, _, _ = case
    for e in events:
        event = decode_event(base64.b64decode(e["frame"]), e["seq"])
        got = {"kind": event.kind, "at": event.at, "namespace": list(event.namespace), "id": event.id,
               "timestamp": event.timestamp, "key": event.key, "actor": event.actor,
               "reason": event.reason, "hash": event.hash.hex()}
        assert got == {k: e[k] for k in got}, f"event {e['seq']}"


def test_imported_log_has_the_recorded_head_and_verifies(case: Any) -> None:
    """The imported log ends at the recorded head hash and verify() finds nothing."""
    header, events, state, backend = case
    report = backend.verify()
    assert report.problems == ()
    assert report.head_hash == header["head_hash"]
    assert backend.head == state["head"] == header["events"] == len(events)


def test_log_folds_to_the_recorded_state_after_every_event(case: Any) -> None:
    """at(seq) for every seq gives exactly the recorded records, counts and metadata."""
    _, _, state, backend = case
    _assert_folds_to_every_state(state, backend)


def test_rebuild_of_a_golden_log_keeps_the_state(case: Any) -> None:
    """rebuild() of a golden log gives the same current state."""
    _, _, state, backend = case
    namespaces = [tuple(ns) for ns in state["namespaces"]]
    backend.rebuild()
    got = golden.state_of(backend, namespaces, state["meta_keys"])
    assert json.loads(json.dumps(got)) == state["states"][-1]["namespaces"]


def test_golden_tool_refuses_to_overwrite(tmp_path: Path) -> None:
    """tools/golden.py writes missing cases only; with every case present it writes nothing and
    exits 1, leaving the files byte for byte."""
    root = tmp_path / "golden"
    assert golden.main(["--root", str(root)]) == 0
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert golden.main(["--root", str(root)]) == 1
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_set_written_now_is_a_log_export_that_reads_back(tmp_path: Path) -> None:
    """tools/golden.py writes each case's events as a coniti-log export of the current event version;
    it imports (every check of import_log), verifies, and folds to its state.json at every event."""
    root = tmp_path / "golden"
    assert golden.main(["--root", str(root)]) == 0
    written = sorted(p for p in (root / f"v{EVENT_VERSION}").iterdir())
    assert [p.name for p in written] == sorted(golden.CASES)
    for case in written:
        header, events, state, backend = _open(case, tmp_path / f"store-{case.name}")
        with backend:
            assert (header["format"], header["log_format"]) == ("coniti-log", EVENT_VERSION)
            assert backend.verify().ok
            assert backend.head == state["head"] == len(events)
            _assert_folds_to_every_state(state, backend)
