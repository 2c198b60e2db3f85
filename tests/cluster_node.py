"""A coniti cluster node in its own process, for tests/test_cluster.py (not a test module).

``python cluster_node.py STORE URLS STREAM WRITER COUNT [PAUSE]``: opens ``LogBackend(STORE,
cluster=Cluster(URLS.split(","), STREAM))`` and writes records ``WRITER-0`` .. ``WRITER-{COUNT-1}``
in namespace ``("load",)``, one write request each with op id ``WRITER-i`` (create-only: ``expect``
the id absent), retrying a write the cluster could not take with the same op id until it is
acknowledged. Prints ``ack WRITER-i`` (flushed) as each write is acknowledged, then ``done``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from coniti.actor import Note
from coniti.cluster import Cluster
from coniti.errors import ClusterUnavailable
from coniti.impl.log import LogBackend
from coniti.memory import MemoryRecord, UpsertOp, WriteRequest


def main() -> None:
    store, urls, stream, writer, count = sys.argv[1:6]
    pause = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    deadline = time.monotonic() + 90
    while True:
        try:
            backend = LogBackend(store, cluster=Cluster(urls.split(","), stream, timeout=2.0))
            break
        except ClusterUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for i in range(int(count)):
        rid = f"{writer}-{i}"
        record = MemoryRecord(
            note=Note(id=rid, text=f"note {rid}", timestamp=float(i)), vector=np.full(4, i, np.float32),
            namespace=("load",),
        )
        request = WriteRequest(ops=[UpsertOp(record=record)], namespace=("load",), op_id=rid)
        while True:
            try:
                backend.write(request)
                break
            except ClusterUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        print(f"ack {rid}", flush=True)
        if pause:
            time.sleep(pause)
    print("done", flush=True)
    backend.close()


if __name__ == "__main__":
    main()
