#!/usr/bin/env python3
"""Write a golden set of event logs for the current log format: ``log/golden/v<N>/<case>/``.

Each case is a small scripted history written through ``LogBackend``. For each case two files are
written (format: ``log/FORMAT.md``, "Golden logs"):

* ``events.jsonl``: the store's log export (``coniti-log``, ``log/FORMAT.md`` §9): a header line,
  then one line per event with its exact stored frame (base64) and its decoded fields, readable.
  (The sets of event version 1 were released in an earlier events format, ``coniti-log-golden``,
  and stay as they are.)
* ``state.json``: the memory the log must fold to, after *every* event (records in scan order with
  exact vector bits, counts, metadata).

A case that already exists is never touched: golden logs are written once, by the version that
defines their format, and kept forever (``tests/test_log_golden.py`` replays every one). Exit status
1 when every case already exists.

Usage: ``tools/golden.py [--root log/golden] [--case NAME ...]`` (only the named cases).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.log import EVENT_VERSION
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteOp,
    DeleteRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    UpsertOp,
    WriteRequest,
)

ROOT = Path(__file__).resolve().parent.parent / "log" / "golden"

Namespace = tuple[str, ...]


def rec(rid: str, ts: float, ns: Namespace = (), *, dtype: str = "float32", dim: int = 4,
        text: str | None = None, metadata: dict[str, Any] | None = None,
        embedding_id: str | None = "emb-golden", vectorless: bool = False,
        blob: bytes | None = None) -> MemoryRecord:
    """A record with a vector derived from its id (deterministic across runs and machines), or
    without one (``vectorless``: no embedding id either), and an optional blob."""
    seed = sum(rid.encode("utf-8", "surrogatepass")) + len(rid)
    vector = np.random.default_rng(seed).standard_normal(dim).astype(dtype)
    return MemoryRecord(
        note=Note(id=rid, text=text if text is not None else f"note {rid[:24]}", timestamp=ts,
                  metadata=metadata or {}),
        vector=None if vectorless else vector,
        embedding_id=None if vectorless else embedding_id,
        namespace=ns,
        blob=blob,
    )


def _basic(store: LogBackend) -> None:
    store.put(PutRequest(records=[rec("a", 1.0), rec("b", 2.0), rec("c", 2.0), rec("d", -3.5)]))
    store.set_meta(MetaSetRequest(key="embedding_id", value="emb-golden"))
    store.delete(DeleteRequest(ids=["b", "missing"]))
    store.put(PutRequest(records=[rec("b", 0.5, text="b again")]))
    store.clear(ClearRequest())
    store.put(PutRequest(records=[rec("e", 10.0, metadata={"after": "clear"})]))


LONG_ID = "long-" + "\u00e9" * 300  # 605 UTF-8 bytes: keyed by hash
LONG_NS = ("tenant-" + "x" * 600, "inbox")


def _namespaces_and_keys(store: LogBackend) -> None:
    with store.audit(actor="golden-writer", reason="format fixture"):
        store.put(PutRequest(records=[
            rec("shared", 1.0, ("alice",), dtype="float16"),
            rec("shared", 1.0, ("bob",), dtype="float64", dim=3),
            rec(LONG_ID, -0.0, LONG_NS, metadata={"big": 2**63 - 1, "neg": -(2**63), "nested": [1, {"x": None}]}),
            rec("\u2603 snow", 5e-324, LONG_NS, embedding_id=None, text=""),
        ]))
    store.set_meta(MetaSetRequest(key="k" * 450, value={"deep": [1.5, "two", None]}, namespace=LONG_NS))
    store.set_meta(MetaSetRequest(key="plain", value=None, namespace=("alice",)))
    store.delete(DeleteRequest(ids=[LONG_ID], namespace=LONG_NS))
    store.clear(ClearRequest(namespace=("nobody",)))
    store.put(PutRequest(records=[rec(LONG_ID, 2.0, LONG_NS, text="back")]))


def _history(store: LogBackend) -> None:
    store.put(PutRequest(records=[rec(f"r{i}", float(i % 3), dim=2) for i in range(6)]))
    store.set_meta(MetaSetRequest(key="v", value=1))
    store.delete(DeleteRequest(ids=["r1", "r4"]))
    store.set_meta(MetaSetRequest(key="v", value=2))
    store.put(PutRequest(records=[rec("r1", 9.0, dim=2, text="r1 v2")]))
    store.clear(ClearRequest())
    store.put(PutRequest(records=[rec("r4", 1.0, dim=2, text="r4 v2"), rec("r1", 1.0, dim=2)]))
    store.delete(DeleteRequest(ids=["r1"]))
    store.set_meta(MetaSetRequest(key="v", value=[3]))


def _write_model(store: LogBackend) -> None:
    """Version 2: replaces (upsert, patch) that name the version they end, a delete in a write,
    op receipts (one for a request that wrote nothing else), expectations."""
    store.put(PutRequest(records=[rec("f1", 1.0, text="stand-up at 9:30", metadata={"room": "a"}),
                                  rec("f2", 2.0), rec("f3", 3.0)]))
    with store.audit(actor="alice", reason="moved"):
        store.write(WriteRequest(
            ops=[PatchOp(id="f1", text="stand-up at 10:00", vector=rec("f1", 1.0).vector,
                         metadata_patch={"room": None, "floor": 2})],
            expect={"f1": 1}, op_id="run-1/step-1",
        ))
    store.write(WriteRequest(ops=[UpsertOp(record=rec("f2", 2.5, text="f2 replaced")),
                                  DeleteOp(id="f3"), UpsertOp(record=rec("f4", 4.0))]))
    store.write(WriteRequest(ops=[UpsertOp(record=rec("f4", 4.0))], op_id="unchanged"))
    store.write(WriteRequest(ops=[DeleteOp(id="nobody")], namespace=("other",), op_id="empty"))
    store.write(WriteRequest(ops=[PatchOp(id="f2", timestamp=0.5)], expect={"f2": 6}))


def _expiry(store: LogBackend) -> None:
    """Version 2: puts with an expiry (one long past, one that passes between events, one far
    ahead), an upsert over an expired record, a patch that sets an expiry, and a sweep."""
    store.put(PutRequest(records=[rec("gone", 1.0).model_copy(update={"expires_at": 1.0}),
                                  rec("soon", 2.0).model_copy(update={"expires_at": time.time() + 0.2}),
                                  rec("later", 3.0).model_copy(update={"expires_at": 4.0e9}),
                                  rec("kept", 4.0)]))
    time.sleep(0.3)
    store.write(WriteRequest(ops=[UpsertOp(record=rec("gone", 1.5, text="gone, back"))]))
    store.write(WriteRequest(ops=[PatchOp(id="kept", expires_at=2.0)]))
    store.sweep()


ALL_BYTES = bytes(range(256))
"""Every byte value once: a blob that no text encoding would carry."""


def _payloads(store: LogBackend) -> None:
    """Version 3: puts without a vector, blobs (empty, every byte value, with and without a
    vector), an upsert and patches that replace, add and remove a blob, a text patch of a record
    without a vector, a delete, and an erasure of a record with a blob."""
    store.put(PutRequest(records=[
        rec("plain", 1.0, vectorless=True, metadata={"kind": "no vector"}),
        rec("bytes", 2.0, vectorless=True, blob=ALL_BYTES),
        rec("empty", 3.0, vectorless=True, blob=b""),
        rec("both", 4.0, dtype="float64", blob=b"\x00checkpoint\xff" * 3),
        rec("usual", 5.0),
    ]))
    with store.audit(actor="saver", reason="checkpoint"):
        store.write(WriteRequest(ops=[UpsertOp(record=rec("bytes", 2.0, vectorless=True, blob=b"v2"))]))
        store.write(WriteRequest(ops=[PatchOp(id="plain", text="plain, edited", blob=b"added")],
                                 op_id="blob-op"))
        store.write(WriteRequest(ops=[PatchOp(id="both", clear_blob=True)]))
    store.delete(DeleteRequest(ids=["empty"]))
    store.erase(["bytes"], reason="right to erasure")
    store.put(PutRequest(records=[rec("bytes", 6.0, vectorless=True, blob=b"after erasure")]))


CASES: dict[str, tuple[Callable[[LogBackend], None], list[Namespace], list[str]]] = {
    "basic": (_basic, [()], ["embedding_id", "absent"]),
    "namespaces_and_long_keys": (
        _namespaces_and_keys,
        [("alice",), ("bob",), LONG_NS, ("nobody",), ()],
        ["k" * 450, "plain"],
    ),
    "history": (_history, [()], ["v"]),
    "write_model": (_write_model, [(), ("other",)], ["embedding_id"]),
    "expiry": (_expiry, [()], ["embedding_id"]),
    "payloads": (_payloads, [()], ["embedding_id"]),
}
"""Case name -> (script, namespaces to record, metadata keys to record)."""


def vector_json(vector: np.ndarray) -> dict[str, str]:
    return {"dtype": vector.dtype.str, "hex": vector.tobytes().hex()}


def state_of(backend: MemoryBackend, namespaces: Sequence[Namespace], keys: Sequence[str]) -> list[Any]:
    """The memory as JSON: per namespace, records in scan order (exact), count and metadata."""
    out = []
    for ns in namespaces:
        records = [
            {
                "id": r.note.id,
                "timestamp": r.note.timestamp,
                "text": r.note.text,
                "metadata": r.note.metadata,
                "embedding_id": r.embedding_id,
                "vector": None if r.vector is None else vector_json(r.vector),
                **({} if r.expires_at is None else {"expires_at": r.expires_at}),
                **({} if r.blob is None else {"blob": r.blob.hex()}),
            }
            for r in backend.iter_all(namespace=ns, page_size=2)
        ]
        meta = {k: backend.get_meta(MetaGetRequest(key=k, namespace=ns)).value for k in keys}
        count = backend.count(CountRequest(namespace=ns)).count
        out.append({"namespace": list(ns), "count": count, "records": records, "meta": meta})
    return out


def write_case(directory: Path, name: str) -> None:
    """Run case ``name`` in a fresh store and write its two files into ``directory`` (new)."""
    script, namespaces, keys = CASES[name]
    with tempfile.TemporaryDirectory() as tmp, LogBackend(Path(tmp) / "store") as store:
        script(store)
        head = store.head
        states = [
            {"seq": seq, "namespaces": state_of(store.at(seq), namespaces, keys)}
            for seq in range(head + 1)
        ]
        if not store.verify().ok:
            raise SystemExit(f"golden: case {name} does not verify")
        directory.mkdir(parents=True)
        store.export_log(directory / "events.jsonl")
    state = {"format_version": EVENT_VERSION, "case": name, "head": head,
             "namespaces": [list(ns) for ns in namespaces], "meta_keys": keys, "states": states}
    (directory / "state.json").write_text(
        json.dumps(state, ensure_ascii=True, sort_keys=True, indent=1) + "\n", encoding="utf-8"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="golden root (default: log/golden)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="write only this case")
    args = parser.parse_args(argv)
    target = args.root / f"v{EVENT_VERSION}"
    written = 0
    for name in args.case or CASES:
        directory = target / name
        if directory.exists():
            print(f"golden: {directory} exists; golden logs are never overwritten, left untouched")
            continue
        write_case(directory, name)
        print(f"golden: wrote {directory}")
        written += 1
    if not written:
        print(f"golden: nothing written: every case of format v{EVENT_VERSION} exists")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
