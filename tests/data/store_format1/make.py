"""Writes ``store.tar.gz`` and ``expected.json``: a store in layout format 1 (with the ``atix`` and
``tmax`` tables and 8-byte ``cnt`` values) and what every read of it must return.

It was run once with coniti at commit cea4ca5, the last commit that wrote format 1; later coniti
writes format 2, so running it again would not reproduce a format-1 store. Kept to show how the
fixture was made: ``python tests/data/store_format1/make.py``.
"""

from __future__ import annotations

import json
import random
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from coniti.actor import Note, TimeRange
from coniti.impl.log import LogBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    MemoryRecord,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
)

HERE = Path(__file__).parent
NAMESPACES = [(), ("alice", "notes")]


def observe(view: LogBackend) -> dict[str, object]:
    out: dict[str, object] = {}
    for ns in NAMESPACES:
        key = "/".join(ns)
        records = view.scan(ScanRequest(namespace=ns)).records
        out[key] = {
            "scan": [[r.note.id, r.note.timestamp, r.note.text] for r in records],
            "count": view.count(CountRequest(namespace=ns)).count,
            "count_20_60": view.count(
                CountRequest(namespace=ns, time_range=TimeRange(start=20.0, end=60.0))
            ).count,
            "scan_20_60": [
                r.note.id
                for r in view.scan(
                    ScanRequest(namespace=ns, time_range=TimeRange(start=20.0, end=60.0))
                ).records
            ],
        }
    return out


def main() -> None:
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        with LogBackend(path) as store:
            n = 0
            for step in range(12):
                ns = NAMESPACES[step % 2]
                batch = []
                for _ in range(rng.randrange(1, 4)):
                    n += 1
                    batch.append(
                        MemoryRecord(
                            note=Note(id=f"r{n}", text=f"text {n}", timestamp=float(rng.randrange(100))),
                            vector=np.array([n, 1.0, -0.5], dtype=np.float32),
                            namespace=ns,
                        )
                    )
                store.put(PutRequest(records=batch))
                time.sleep(0.002)
                if step % 3 == 2:
                    store.delete(DeleteRequest(ids=[f"r{n - 1}", f"r{n - 2}"], namespace=ns))
                if step == 5:
                    store.set_meta(MetaSetRequest(key="embedding_id", value="emb-x", namespace=ns))
                if step == 7:
                    store.erase(["r3"], namespace=(), reason="fixture")
                if step == 9:
                    store.clear(ClearRequest(namespace=("alice", "notes")))
                time.sleep(0.002)
            head = store.head
            states = [observe(store.at(seq)) for seq in range(head + 1)]
            times = [[e.at, e.seq] for e in store.events()]
        with tarfile.open(HERE / "store.tar.gz", "w:gz") as tar:
            tar.add(path / "data.mdb", arcname="store/data.mdb")
    expected = {"head": head, "states": states, "recorded": times}
    (HERE / "expected.json").write_text(json.dumps(expected) + "\n")


if __name__ == "__main__":
    main()
