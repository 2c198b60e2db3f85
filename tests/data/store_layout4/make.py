"""Writes ``store.tar.gz`` and ``expected.json``: a store in layout 4 (payload CRCs and seals
computed with zlib's CRC-32) and what every read of it returned.

It was run once with coniti at commit be86297, the last commit that wrote layout 4; later coniti
writes layout 5 (CRC-32C), so running it again would not reproduce a layout-4 store. Kept to show
how the fixture was made: ``PYTHONPATH=<a checkout of be86297> python tests/data/store_layout4/make.py``.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteOp,
    GetRequest,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
    TimeRange,
    UpsertOp,
    WriteRequest,
)

HERE = Path(__file__).parent
NAMESPACES = [(), ("alice", "notes")]
IDS = [f"r{i}" for i in range(1, 13)]


def record(rid: str, ts: float, ns: tuple[str, ...], *, vector: bool = True, **extra: Any) -> MemoryRecord:
    n = int(rid[1:])
    return MemoryRecord(
        note=Note(id=rid, text=f"text {rid} " + "x" * n, timestamp=ts, metadata={"n": n}),
        vector=np.array([n, 1.0, -0.5, 0.25], dtype=np.float32) if vector else None,
        embedding_id="emb" if vector else None,
        namespace=ns,
        **extra,
    )


def rows(records: Any) -> list[Any]:
    return [
        [r.note.id, r.note.timestamp, r.note.text, r.note.metadata, r.version, r.expires_at,
         None if r.vector is None else r.vector.tolist(), None if r.blob is None else r.blob.hex()]
        for r in records
    ]


def observe(view: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    window = TimeRange(start=2.0, end=9.0)
    for ns in NAMESPACES:
        out["/".join(ns)] = {
            "get": rows(view.get(GetRequest(ids=IDS, namespace=ns)).records),
            "scan": rows(view.scan(ScanRequest(namespace=ns)).records),
            "scan_2_9": [r.note.id for r in view.scan(ScanRequest(namespace=ns, time_range=window)).records],
            "count": view.count(CountRequest(namespace=ns)).count,
            "count_2_9": view.count(CountRequest(namespace=ns, time_range=window)).count,
            "meta": view.get_meta(MetaGetRequest(key="k", namespace=ns)).value,
        }
    return out


def main() -> None:
    a, b = NAMESPACES
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        with LogBackend(path) as store:
            store.put(PutRequest(records=[record(f"r{i}", float(i), a) for i in range(1, 5)]))
            store.put(PutRequest(records=[record(f"r{i}", float(i), b) for i in range(5, 8)]))
            store.put(PutRequest(records=[
                record("r8", 8.0, a, expires_at=4.0e9),
                record("r9", 0.0, a, vector=False, blob=bytes(range(256))),
                record("r10", -0.0, b, vector=False),
            ]))
            store.set_meta(MetaSetRequest(key="k", value={"v": 1}, namespace=a))
            store.write(WriteRequest(ops=[UpsertOp(record=record("r2", 2.5, a)), DeleteOp(id="r3")], namespace=a))
            store.erase(["r4"], namespace=a, reason="fixture")
            store.put(PutRequest(records=[record("r11", 11.0, b, expires_at=4.1e9)]))
            store.clear(ClearRequest(namespace=b))
            store.put(PutRequest(records=[record("r12", 3.0, b, blob=b"")]))
            store.set_meta(MetaSetRequest(key="k", value="after", namespace=b))
            head = store.head
            states = [observe(store.at(seq)) for seq in range(head)] + [observe(store)]
        with tarfile.open(HERE / "store.tar.gz", "w:gz") as tar:
            tar.add(path / "data.mdb", arcname="store/data.mdb")
    (HERE / "expected.json").write_text(json.dumps({"head": head, "states": states}) + "\n")


if __name__ == "__main__":
    main()
