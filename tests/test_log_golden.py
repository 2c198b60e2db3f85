"""Every golden log in log/golden/ (written once by the format version that defines it) still reads:
its frames import with the same hashes, verify clean, and fold to the recorded state at every event."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from coniti.impl.log import LogBackend
from coniti.log import FORMAT_VERSION, EventLog
from coniti.log.codec import decode_event

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "log" / "golden"
CASES = sorted(p for p in GOLDEN.glob("v*/*") if (p / "events.jsonl").is_file())


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


@pytest.fixture(params=CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    header, events, state = _read(request.param)
    log = EventLog(tmp_path / "store")
    log.import_frames(base64.b64decode(e["frame"]) for e in events)
    log.close()
    backend = LogBackend(tmp_path / "store")
    yield header, events, state, backend
    backend.close()


def test_there_is_a_golden_set_for_the_current_format() -> None:
    """log/golden/v<FORMAT_VERSION>/ exists and holds cases."""
    assert any(p.parent.name == f"v{FORMAT_VERSION}" for p in CASES)


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
    namespaces = [tuple(ns) for ns in state["namespaces"]]
    for point in state["states"]:
        got = golden.state_of(backend.at(point["seq"]), namespaces, state["meta_keys"])
        assert json.loads(json.dumps(got)) == point["namespaces"], f"after event {point['seq']}"


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
