"""One system's round of the peers benchmark (``bench/peers.py``), run as a child process:
``python peer_worker.py SYSTEM DATA_DIR WORK_DIR`` prints one JSON object of figures.

It imports only the standard library, numpy and the one system it measures (coniti is imported only
for ``coniti``), so the same file runs under the shared venv (coniti) and under the peers' own venv
(chromadb, lancedb, qdrant-client, sqlite-vec, LangGraph's SqliteStore).

Every system gets the same workload from ``DATA_DIR`` (``bench/peers.py`` writes it): ``n`` notes in
``NS`` namespaces with a 384-dim unit vector, a text, a ``user`` and a timestamp each; ingested in
batches of ``batch`` notes, each batch one namespace, the namespaces taking turns. The phases, in
order, each timed alone (``time.perf_counter``; what is inside each timer is said at its phase):

* ``ingest``: every batch written and made durable as the system's settings allow (the open of the
  fresh store and the data's loading outside the timer);
* ``all``, ``filtered``, ``window``, ``one_ns``: top-10 over every namespace; with ``user == X``;
  among the notes of the last 30 days; in one namespace. One untimed warm-up query, then each query
  timed alone; the ids answered are returned for recall@10. Right after each query the same ask is
  timed as numpy brute force in this process (:func:`numpy_top` over the workload's matrix, the
  rows of the filtered, window and one-namespace asks computed before any clock starts: "numpy with
  a precomputed mask"), so the system and numpy share the process, the minutes and the load;
* ``update``: one note's text and vector replaced, durably, each call timed;
* ``close``; ``disk``: bytes of the store's directory after close;
* ``reopen``: open the closed store and answer one ``all`` query (same process: imports and the OS
  page cache are warm);
* ``delete``: a tenth of the notes removed in batches of ``batch`` (one namespace a batch).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

K = 10


def numpy_top(matrix: np.ndarray, q: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Row numbers of the exact top-10 of ``q`` (among ``rows``), best first: ``matrix @ q`` (numpy's
    BLAS, threaded as it chooses) then ``argpartition``."""
    sub = matrix if rows is None else matrix[rows]
    scores = sub @ q
    k = min(K, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    best = part[np.argsort(-scores[part], kind="stable")]
    return best if rows is None else rows[best]


class Data:
    """The workload, as ``bench/peers.py`` wrote it."""

    def __init__(self, folder: Path) -> None:
        arrays = np.load(folder / "data.npz")
        self.vectors: np.ndarray = arrays["vectors"]
        self.ns: np.ndarray = arrays["ns"]
        self.users: np.ndarray = arrays["users"]
        self.times: np.ndarray = arrays["times"]
        self.queries: np.ndarray = arrays["queries"]
        self.updates: np.ndarray = arrays["updates"]
        meta = json.loads((folder / "meta.json").read_text())
        self.batch: int = meta["batch"]
        self.namespaces: int = meta["namespaces"]
        self.query_users: list[int] = meta["query_users"]
        self.query_ns: list[int] = meta["query_ns"]
        self.since: float = meta["since"]
        self.update_ids: list[int] = meta["update_ids"]
        self.n = len(self.vectors)
        self.order: list[np.ndarray] = [np.asarray(b) for b in meta["batches"]]
        self.deletes: list[np.ndarray] = [np.asarray(b) for b in meta["deletes"]]

    @staticmethod
    def id(i: int) -> str:
        return f"n{i:07d}"

    @staticmethod
    def text(i: int) -> str:
        return f"note {i} about topic {i % 97}"

    @staticmethod
    def ns_name(j: int) -> str:
        return f"ns{j}"

    @staticmethod
    def user(u: int) -> str:
        return f"u{u}"


# -- the systems ---------------------------------------------------------------------------------


class Coniti:
    """coniti's engine over the log backend (``durability="sync"``: every batch one fsynced
    commit), structure ``flat``, strategy ``semantic``; vectors given by an embedder that looks the
    text up in the workload's table (``ingest_many`` of a ``NoteBatch``)."""

    syncs = "yes (fsync per commit)"

    def __init__(self, data: Data, path: Path) -> None:
        import coniti  # noqa: F401 - the shared venv's coniti (PYTHONPATH)
        from coniti.embedding import Embedder, EmbeddingSpec

        table: dict[str, np.ndarray] = {}
        for i in range(data.n):
            table[data.text(i)] = data.vectors[i]
        for j, q in enumerate(data.queries):
            table[f"query {j}"] = q
        for j, v in enumerate(data.updates):
            table[f"updated {j}"] = v

        class Table(Embedder):
            name = "bench_table"
            spec_ = EmbeddingSpec(name="bench_table", version=1, dim=int(data.vectors.shape[1]))

            @property
            def spec(self) -> EmbeddingSpec:
                return self.spec_

            def _embed(self, texts: list[str]) -> np.ndarray:
                return np.stack([table[t] for t in texts]).astype(np.float64)

        self.embedder = Table()
        self.data = data
        self.path = path
        self.open()

    def structure(self) -> Any:
        return "flat"

    def open(self) -> None:
        from coniti import Container

        self.box = Container(
            "log", path=str(self.path), embedding=self.embedder, structure=self.structure()
        )
        self.engine = self.box.engine

    def ingest(self, rows: np.ndarray) -> None:
        from coniti import NoteBatch

        d = self.data
        rows_l = rows.tolist()
        batch = NoteBatch(
            [d.id(i) for i in rows_l],
            [d.text(i) for i in rows_l],
            [float(d.times[i]) for i in rows_l],
            [{"user": d.user(int(d.users[i]))} for i in rows_l],
        )
        self.engine.ingest_many(batch, namespace=(d.ns_name(int(d.ns[rows_l[0]])),))

    def _ask(self, j: int, **kw: Any) -> list[str]:
        from coniti import Query

        where = kw.pop("namespace", None)
        query = Query(text=f"query {j}", k=K, strategy="semantic", **kw)
        if where is None:
            answer = self.engine.ask(query, prefix=())
        else:
            answer = self.engine.ask(query, namespace=(where,))
        return [h.note.id for h in answer.hits]

    def all(self, j: int) -> list[str]:
        return self._ask(j)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._ask(j, filter={"user": user})

    def window(self, j: int, since: float) -> list[str]:
        from coniti import TimeRange

        return self._ask(j, time_range=TimeRange(start=since))

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._ask(j, namespace=ns)

    def update(self, i: int, j: int) -> None:
        d = self.data
        self.engine.update(d.id(i), text=f"updated {j}", namespace=(d.ns_name(int(d.ns[i])),))

    def delete(self, rows: np.ndarray) -> None:
        d = self.data
        ns = d.ns_name(int(d.ns[int(rows[0])]))
        self.engine.remove([d.id(int(i)) for i in rows], namespace=(ns,))

    def close(self) -> None:
        self.box.close()


ANN_OPTIONS = {"connectivity": 16, "expansion_add": 128, "expansion_search": 512}
"""coniti's ``ann`` structure in the approximate row (``coniti-ann``): usearch's HNSW graph per
namespace, M=16, ef_construction=128, ef_search=512. On this workload (Gaussian 384-dim vectors,
10,000 a namespace at N=100,000) one namespace's recall@10 against exact was 0.42 at ef 64, 0.61 at
128, 0.81 at 256, 0.93 at 512, 0.99 at 1,024 (20 queries), at 0.9, 1.3, 1.8, 2.6, 3.7 ms a search:
512 is the first above 0.9."""


class ConitiAnn(Coniti):
    """coniti as :class:`Coniti`, with structure ``ann`` (:data:`ANN_OPTIONS`); only ingest and the
    top-10 over all namespaces are run (``only``): the approximate row."""

    syncs = Coniti.syncs
    only = ("all",)

    def structure(self) -> Any:
        from coniti.structure import AnnStructure

        return AnnStructure(**ANN_OPTIONS)


class Chroma:
    """chromadb ``PersistentClient``: one collection (cosine HNSW, the library's defaults) with the
    namespace, user and timestamp as metadata; namespaces and filters as ``where``."""

    syncs = "yes (fsync: 600 calls for 1,000 notes in 10 batches, strace)"

    def __init__(self, data: Data, path: Path) -> None:
        self.data = data
        self.path = path
        self.open()

    def open(self) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )
        self.col = self.client.get_or_create_collection("notes", metadata={"hnsw:space": "cosine"})

    def ingest(self, rows: np.ndarray) -> None:
        d = self.data
        r = rows.tolist()
        self.col.add(
            ids=[d.id(i) for i in r],
            embeddings=d.vectors[rows],
            documents=[d.text(i) for i in r],
            metadatas=[
                {
                    "ns": d.ns_name(int(d.ns[i])),
                    "user": d.user(int(d.users[i])),
                    "ts": float(d.times[i]),
                }
                for i in r
            ],
        )

    def _q(self, j: int, where: dict[str, Any] | None) -> list[str]:
        out = self.col.query(query_embeddings=[self.data.queries[j]], n_results=K, where=where)
        return list(out["ids"][0])

    def all(self, j: int) -> list[str]:
        return self._q(j, None)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._q(j, {"user": user})

    def window(self, j: int, since: float) -> list[str]:
        return self._q(j, {"ts": {"$gte": since}})

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._q(j, {"ns": ns})

    def update(self, i: int, j: int) -> None:
        self.col.update(
            ids=[self.data.id(i)], embeddings=[self.data.updates[j]], documents=[f"updated {j}"]
        )

    def delete(self, rows: np.ndarray) -> None:
        self.col.delete(ids=[self.data.id(int(i)) for i in rows])

    def close(self) -> None:
        # chromadb has no close; dropping the client and clearing the shared system cache releases it
        self.client.clear_system_cache()
        del self.col, self.client


class Lance:
    """lancedb: one table (id, ns, user, ts, text, vector), no vector index (exact, flat search),
    cosine; filters as SQL ``where`` applied before the search (``prefilter``)."""

    syncs = "no (no fsync, fdatasync or msync: strace)"

    def __init__(self, data: Data, path: Path) -> None:
        self.data = data
        self.path = path
        self.table: Any = None
        self.open()

    def open(self) -> None:
        import lancedb

        self.db = lancedb.connect(str(self.path))
        if "notes" in self.db.table_names():
            self.table = self.db.open_table("notes")

    def _frame(self, rows: np.ndarray, vectors: np.ndarray, texts: list[str]) -> Any:
        import pyarrow as pa

        d = self.data
        r = rows.tolist()
        dim = vectors.shape[1]
        return pa.table({
            "id": [d.id(i) for i in r],
            "ns": [d.ns_name(int(d.ns[i])) for i in r],
            "user": [d.user(int(d.users[i])) for i in r],
            "ts": d.times[rows].astype(np.float64),
            "text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
        })  # fmt: skip

    def ingest(self, rows: np.ndarray) -> None:
        frame = self._frame(
            rows, self.data.vectors[rows], [self.data.text(i) for i in rows.tolist()]
        )
        if self.table is None:
            self.table = self.db.create_table("notes", frame)
        else:
            self.table.add(frame)

    def _q(self, j: int, where: str | None) -> list[str]:
        q = self.table.search(self.data.queries[j]).metric("cosine").limit(K).select(["id"])
        if where is not None:
            q = q.where(where, prefilter=True)
        return [str(x) for x in q.to_arrow()["id"].to_pylist()]

    def all(self, j: int) -> list[str]:
        return self._q(j, None)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._q(j, f"user = '{user}'")

    def window(self, j: int, since: float) -> list[str]:
        return self._q(j, f"ts >= {since!r}")

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._q(j, f"ns = '{ns}'")

    def update(self, i: int, j: int) -> None:
        rows = np.asarray([i])
        frame = self._frame(rows, self.data.updates[j : j + 1], [f"updated {j}"])
        (
            self.table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(frame)
        )

    def delete(self, rows: np.ndarray) -> None:
        ids = ", ".join(f"'{self.data.id(int(i))}'" for i in rows)
        self.table.delete(f"id IN ({ids})")

    def close(self) -> None:
        self.table = None
        self.db = None


class Qdrant:
    """qdrant-client in local mode (``QdrantClient(path=...)``): one collection, cosine, payload
    ns/user/ts; exact search (local mode is brute force) with payload filters."""

    syncs = "yes (sqlite fdatasync: 4,604 calls for 1,000 notes, strace)"

    def __init__(self, data: Data, path: Path) -> None:
        self.data = data
        self.path = path
        self.open(create=True)

    def open(self, create: bool = False) -> None:
        import warnings

        from qdrant_client import QdrantClient, models

        warnings.filterwarnings("ignore")
        self.m = models
        self.client = QdrantClient(path=str(self.path))
        if create:
            self.client.create_collection(
                "notes",
                vectors_config=models.VectorParams(size=int(self.data.vectors.shape[1]), distance=models.Distance.COSINE),
            )  # fmt: skip

    def _points(self, rows: list[int], vectors: np.ndarray, texts: list[str]) -> list[Any]:
        d = self.data
        return [
            self.m.PointStruct(
                id=i,
                vector=vectors[n].tolist(),
                payload={
                    "nid": d.id(i),
                    "ns": d.ns_name(int(d.ns[i])),
                    "user": d.user(int(d.users[i])),
                    "ts": float(d.times[i]),
                    "text": texts[n],
                },
            )  # fmt: skip
            for n, i in enumerate(rows)
        ]

    def ingest(self, rows: np.ndarray) -> None:
        r = rows.tolist()
        self.client.upsert(
            "notes", self._points(r, self.data.vectors[rows], [self.data.text(i) for i in r])
        )

    def _q(self, j: int, cond: Any) -> list[str]:
        flt = None if cond is None else self.m.Filter(must=[cond])
        res = self.client.query_points(
            "notes", query=self.data.queries[j].tolist(), limit=K, query_filter=flt
        )
        return [self.data.id(int(p.id)) for p in res.points]

    def all(self, j: int) -> list[str]:
        return self._q(j, None)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._q(j, self.m.FieldCondition(key="user", match=self.m.MatchValue(value=user)))

    def window(self, j: int, since: float) -> list[str]:
        return self._q(j, self.m.FieldCondition(key="ts", range=self.m.Range(gte=since)))

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._q(j, self.m.FieldCondition(key="ns", match=self.m.MatchValue(value=ns)))

    def update(self, i: int, j: int) -> None:
        self.client.upsert(
            "notes", self._points([i], self.data.updates[j : j + 1], [f"updated {j}"])
        )

    def delete(self, rows: np.ndarray) -> None:
        self.client.delete(
            "notes", points_selector=self.m.PointIdsList(points=[int(i) for i in rows])
        )

    def close(self) -> None:
        self.client.close()


class SqliteVec:
    """sqlite-vec 0.1.x: one ``vec0`` table (cosine, ``ns`` a partition key, ``user`` and ``ts``
    metadata columns, the text an auxiliary column); sqlite in WAL mode with ``synchronous=FULL``
    (every commit fsynced); a KNN query with ``k = 10`` and the filter in its ``WHERE``."""

    syncs = "yes (WAL, synchronous=FULL)"

    def __init__(self, data: Data, path: Path) -> None:
        self.data = data
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.open()
        dim = int(data.vectors.shape[1])
        self.db.execute(
            f"create virtual table notes using vec0(nid text primary key, embedding float[{dim}] "
            "distance_metric=cosine, ns text partition key, user text, ts float, +text text)"
        )
        self.db.commit()

    def open(self) -> None:
        import sqlite3

        import sqlite_vec

        self.db = sqlite3.connect(str(self.path / "db.sqlite"))
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.enable_load_extension(False)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=full")

    def ingest(self, rows: np.ndarray) -> None:
        d = self.data
        r = rows.tolist()
        vecs = d.vectors[rows]
        self.db.executemany(
            "insert into notes(nid, embedding, ns, user, ts, text) values (?, ?, ?, ?, ?, ?)",
            [
                (d.id(i), vecs[n].tobytes(), d.ns_name(int(d.ns[i])), d.user(int(d.users[i])), float(d.times[i]), d.text(i))
                for n, i in enumerate(r)
            ],
        )  # fmt: skip
        self.db.commit()

    def _q(self, j: int, extra: str = "", args: tuple[Any, ...] = ()) -> list[str]:
        sql = f"select nid from notes where embedding match ? and k = {K}{extra} order by distance"
        return [r[0] for r in self.db.execute(sql, (self.data.queries[j].tobytes(), *args))]

    def all(self, j: int) -> list[str]:
        return self._q(j)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._q(j, " and user = ?", (user,))

    def window(self, j: int, since: float) -> list[str]:
        return self._q(j, " and ts >= ?", (since,))

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._q(j, " and ns = ?", (ns,))

    def update(self, i: int, j: int) -> None:
        self.db.execute(
            "update notes set embedding = ?, text = ? where nid = ?",
            (self.data.updates[j].tobytes(), f"updated {j}", self.data.id(i)),
        )
        self.db.commit()

    def delete(self, rows: np.ndarray) -> None:
        self.db.executemany(
            "delete from notes where nid = ?", [(self.data.id(int(i)),) for i in rows]
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class LangGraph:
    """LangGraph's ``SqliteStore`` (langgraph-checkpoint-sqlite) with its sqlite-vec index: the
    vectors given by an ``embed`` function that looks the text up in the workload's table; one
    ``batch`` of ``PutOp`` per ingest batch; ``search`` with a namespace prefix and ``filter``.
    The store's own sqlite settings (WAL; ``synchronous`` as the library sets it)."""

    syncs = "yes (sqlite fdatasync: 336 calls for 1,000 notes in 10 batches, strace)"

    def __init__(self, data: Data, path: Path) -> None:
        self.data = data
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        table: dict[str, np.ndarray] = {}
        for i in range(data.n):
            table[data.text(i)] = data.vectors[i]
        for j, q in enumerate(data.queries):
            table[f"query {j}"] = q
        for j, v in enumerate(data.updates):
            table[f"updated {j}"] = v
        self.table = table
        self.open()
        self.store.setup()

    def open(self) -> None:
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        table = self.table

        def embed(texts: list[str]) -> list[list[float]]:
            # the store hands a put's indexed field as JSON of the value here, a query as its text
            return [
                table[json.loads(t)["text"] if t.startswith("{") else t].tolist() for t in texts
            ]

        self.conn = sqlite3.connect(
            str(self.path / "store.sqlite"), check_same_thread=False, isolation_level=None
        )
        self.store = SqliteStore(
            self.conn,
            index={"dims": int(self.data.vectors.shape[1]), "embed": embed, "fields": ["text"]},
        )

    def ingest(self, rows: np.ndarray) -> None:
        from langgraph.store.base import PutOp

        d = self.data
        ops = [
            PutOp(
                (d.ns_name(int(d.ns[i])),),
                d.id(i),
                {"text": d.text(i), "user": d.user(int(d.users[i])), "ts": float(d.times[i])},
            )  # fmt: skip
            for i in rows.tolist()
        ]
        self.store.batch(ops)

    def _q(self, j: int, prefix: tuple[str, ...], flt: dict[str, Any] | None) -> list[str]:
        items = self.store.search(prefix, query=f"query {j}", filter=flt, limit=K)
        return [it.key for it in items]

    def all(self, j: int) -> list[str]:
        return self._q(j, (), None)

    def filtered(self, j: int, user: str) -> list[str]:
        return self._q(j, (), {"user": user})

    def window(self, j: int, since: float) -> list[str]:
        return self._q(j, (), {"ts": {"$gte": since}})

    def one_ns(self, j: int, ns: str) -> list[str]:
        return self._q(j, (ns,), None)

    def update(self, i: int, j: int) -> None:
        d = self.data
        self.store.put(
            (d.ns_name(int(d.ns[i])),), d.id(i),
            {"text": f"updated {j}", "user": d.user(int(d.users[i])), "ts": float(d.times[i])},
        )  # fmt: skip

    def delete(self, rows: np.ndarray) -> None:
        from langgraph.store.base import PutOp

        d = self.data
        self.store.batch([PutOp((d.ns_name(int(d.ns[int(i)])),), d.id(int(i)), None) for i in rows])

    def close(self) -> None:
        self.conn.close()


SYSTEMS: dict[str, Any] = {
    "coniti": Coniti,
    "coniti-ann": ConitiAnn,
    "chroma": Chroma,
    "lancedb": Lance,
    "qdrant": Qdrant,
    "sqlite-vec": SqliteVec,
    "langgraph-sqlite": LangGraph,
}


def _disk(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.stat(p).st_blocks * 512
    return total


def run(system: str, data_dir: Path, work: Path, queries: int) -> dict[str, Any]:
    data = Data(data_dir)
    path = work / system
    store = SYSTEMS[system](data, path)
    out: dict[str, Any] = {"system": system, "syncs": SYSTEMS[system].syncs}
    t = time.perf_counter()
    for rows in data.order:
        store.ingest(rows)
    out["ingest_s"] = time.perf_counter() - t

    asks = {
        "all": lambda j: store.all(j),
        "filtered": lambda j: store.filtered(j, data.user(data.query_users[j])),
        "window": lambda j: store.window(j, data.since),
        "one_ns": lambda j: store.one_ns(j, data.ns_name(data.query_ns[j])),
    }
    by_user = {u: np.flatnonzero(data.users == u) for u in set(data.query_users)}
    by_ns = {j: np.flatnonzero(data.ns == j) for j in set(data.query_ns)}
    recent = np.flatnonzero(data.times >= data.since)
    among = {
        "all": lambda j: None,
        "filtered": lambda j: by_user[data.query_users[j]],
        "window": lambda j: recent,
        "one_ns": lambda j: by_ns[data.query_ns[j]],
    }
    only = getattr(SYSTEMS[system], "only", None)
    for name, ask in asks.items():
        if only is not None and name not in only:
            continue
        ask(0)  # warm-up, untimed
        numpy_top(data.vectors, data.queries[0], among[name](0))
        times, ids, numpy_times = [], [], []
        for j in range(queries):
            t = time.perf_counter()
            got = ask(j)
            times.append(time.perf_counter() - t)
            ids.append(got)
            rows = among[name](j)
            t = time.perf_counter()
            numpy_top(data.vectors, data.queries[j], rows)
            numpy_times.append(time.perf_counter() - t)
        out[f"{name}_s"] = times
        out[f"{name}_ids"] = ids
        out[f"numpy_{name}_s"] = numpy_times
    if only is not None:  # the asks alone (the approximate row)
        store.close()
        return out

    times = []
    for j, i in enumerate(data.update_ids):
        t = time.perf_counter()
        store.update(i, j)
        times.append(time.perf_counter() - t)
    out["update_s"] = times

    t = time.perf_counter()
    store.close()
    out["close_s"] = time.perf_counter() - t
    out["disk_bytes"] = _disk(path)

    t = time.perf_counter()
    store.open()
    store.all(1)
    out["reopen_s"] = time.perf_counter() - t

    t = time.perf_counter()
    for rows in data.deletes:
        store.delete(rows)
    out["delete_s"] = time.perf_counter() - t
    out["deleted"] = int(sum(len(r) for r in data.deletes))
    store.close()
    return out


def main(argv: list[str]) -> int:
    system, data_dir, work, queries = argv[0], Path(argv[1]), Path(argv[2]), int(argv[3])
    out = run(system, data_dir, work, queries)
    sys.stdout.write("\n@@RESULT@@" + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
