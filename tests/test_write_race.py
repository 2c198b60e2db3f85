"""Two processes race compare-and-set updates of one record in one LogBackend store.

Each process repeats: read the record (its version and counter), write counter + 1 with
``expect={id: version}``; a ``VersionConflict`` is a lost round, retried. If two writers could both
win a round, an increment would be lost: the final counter would be below the number of wins.
Run as a script (``python tests/test_write_race.py STORE WRITER WINS``) it is one racing process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from coniti.actor import Note
from coniti.errors import VersionConflict
from coniti.impl.log import LogBackend
from coniti.memory import GetRequest, MemoryRecord, PatchOp, PutRequest, WriteRequest

HERE = Path(__file__).resolve()
WINS = 40


def race(store: str, writer: int, wins: int) -> dict[str, int]:
    """Win ``wins`` compare-and-set rounds on record ``c``; report wins and lost rounds."""
    won = lost = 0
    with LogBackend(store) as backend:
        while won < wins:
            [record] = backend.get(GetRequest(ids=["c"])).records
            assert record.version is not None
            request = WriteRequest(
                ops=[PatchOp(id="c", metadata={"n": record.note.metadata["n"] + 1, "by": writer})],
                expect={"c": record.version},
            )
            try:
                backend.write(request)
            except VersionConflict as conflict:
                assert conflict.expected == record.version and conflict.actual != record.version
                lost += 1
            else:
                won += 1
    return {"won": won, "lost": lost}


def test_two_processes_racing_updates_lose_nothing(tmp_path: Path) -> None:
    """Every round has one winner: the counter equals the wins of both processes, the history is a
    chain in which each version replaces the one before it, and losers got VersionConflict."""
    store = str(tmp_path / "store")
    with LogBackend(store) as backend:
        start = MemoryRecord(note=Note(id="c", text="counter", timestamp=0.0, metadata={"n": 0}), vector=np.ones(2))
        backend.put(PutRequest(records=[start]))
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE), store, str(w), str(WINS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    with LogBackend(store) as backend:
        [record] = backend.get(GetRequest(ids=["c"])).records
        history = backend.history("c")
        assert backend.verify().ok
    assert record.note.metadata["n"] == sum(r["won"] for r in results) == 2 * WINS
    assert len(history) == 1 + 2 * WINS
    assert [e.replaces for e in history[1:]] == [e.seq for e in history[:-1]]
    assert record.version == history[-1].seq


if __name__ == "__main__":
    print(json.dumps(race(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
