"""The NATS JetStream stream as a :class:`~coniti.log.replica.Transport` (needs ``coniti[cluster]``).

:class:`JetStreamTransport` keeps one client connection (``nats-py``, asyncio) on a private event
loop thread and offers the replica's blocking calls. The stream is created if missing (subject
``coniti.<stream>``, file storage, ``replicas`` replicas, a two-minute duplicate window), and an
existing one must have the replica count asked for.

* ``publish`` sends the message with ``Nats-Expected-Last-Sequence`` and ``Nats-Msg-Id`` (the
  last event's hash: a publish retried after a lost answer is stored once) and waits for the
  stream's acknowledgement, which JetStream gives once a quorum of the replicas stored it. The
  stream's "wrong last sequence" answer is :class:`~coniti.log.replica.Conflict`; no server, no
  quorum or no answer within the timeout is :class:`~coniti.errors.ClusterUnavailable`.
* ``fetch`` reads messages by sequence number from the stream leader, pipelined.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from coniti.errors import ClusterError, ClusterUnavailable, ContractError
from coniti.log.replica import Conflict

__all__ = ["JetStreamTransport"]

T = TypeVar("T")
_log = logging.getLogger("coniti.cluster")

_WRONG_LAST_SEQUENCE = 10071
_STREAM_NOT_FOUND = 10059
_FETCH_WINDOW = 256


def _import_nats() -> Any:
    try:
        import nats
        import nats.js.errors
    except ImportError as exc:
        raise ContractError("cluster mode needs the nats-py package: install coniti[cluster]") from exc
    return nats


class JetStreamTransport:
    """The JetStream stream ``stream`` on the servers ``servers`` (``nats://host:port`` URLs), with
    ``replicas`` replicas; ``timeout`` bounds each request (seconds). Connects at construction:
    :class:`~coniti.errors.ClusterUnavailable` if no server answers. :meth:`close` when done."""

    def __init__(self, servers: Sequence[str], stream: str, replicas: int, timeout: float) -> None:
        self._nats = _import_nats()
        self._stream = stream
        self.subject = f"coniti.{stream}"
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="coniti-nats", daemon=True)
        self._thread.start()
        try:
            self._nc = self._run(self._connect(list(servers)))
            self._js = self._nc.jetstream(timeout=timeout)
            self._run(self._ensure_stream(replicas))
        except BaseException:
            self._stop_loop()
            raise

    @property
    def stream(self) -> str:
        return self._stream

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=(timeout or self.timeout) * 4 + 5)
        except TimeoutError as exc:
            future.cancel()
            raise ClusterUnavailable(f"stream {self._stream!r}: no answer from the cluster") from exc

    async def _connect(self, servers: list[str]) -> Any:
        nats = self._nats

        async def quiet(exc: Exception) -> None:  # reconnects are expected; calls report failures
            _log.debug("nats: %s", exc)

        try:
            return await nats.connect(
                servers=servers, connect_timeout=min(self.timeout, 2.0), allow_reconnect=True,
                max_reconnect_attempts=-1, reconnect_time_wait=0.1, name="coniti",
                error_cb=quiet,
            )
        except Exception as exc:
            raise ClusterUnavailable(f"cannot reach any NATS server of {servers}: {exc}") from exc

    async def _ensure_stream(self, replicas: int) -> None:
        errors = self._nats.js.errors
        try:
            info = await self._js.stream_info(self._stream)
        except errors.NotFoundError:
            info = None
        except Exception as exc:
            raise ClusterUnavailable(f"stream {self._stream!r}: {exc}") from exc
        if info is None:
            try:
                await self._js.add_stream(
                    name=self._stream, subjects=[self.subject], num_replicas=replicas,
                    duplicate_window=120.0, allow_direct=False,
                )
            except errors.BadRequestError:  # created concurrently by another node
                info = await self._js.stream_info(self._stream)
            except Exception as exc:
                raise ClusterUnavailable(f"cannot create stream {self._stream!r}: {exc}") from exc
        if info is not None and info.config.num_replicas != replicas:
            raise ClusterError(
                f"stream {self._stream!r} has {info.config.num_replicas} replicas, not {replicas}"
            )

    # -- Transport ---------------------------------------------------------------------------------

    def last_seq(self) -> int:
        async def last() -> int:
            try:
                info = await self._js.stream_info(self._stream)
            except Exception as exc:
                raise ClusterUnavailable(f"stream {self._stream!r}: {exc or type(exc).__name__}") from exc
            return int(info.state.last_seq)

        return self._run(last())

    def publish(self, payload: bytes, *, expected_last: int, msg_id: str) -> int:
        errors = self._nats.js.errors
        headers = {"Nats-Expected-Last-Sequence": str(expected_last), "Nats-Msg-Id": msg_id}

        async def publish() -> int:
            try:
                ack = await self._js.publish(self.subject, payload, headers=headers, stream=self._stream)
            except errors.APIError as exc:
                if exc.err_code == _WRONG_LAST_SEQUENCE:
                    raise Conflict(str(exc)) from None
                if exc.code in (503, 408) or exc.err_code is None:
                    raise ClusterUnavailable(
                        f"stream {self._stream!r} cannot commit the write now ({exc}): nothing was "
                        "written on this node"
                    ) from exc
                raise ClusterError(f"stream {self._stream!r} refused the write: {exc}") from exc
            except Exception as exc:
                raise ClusterUnavailable(
                    f"stream {self._stream!r} did not acknowledge the write "
                    f"({exc or type(exc).__name__}): nothing was written on this node; retry with "
                    "the same op_id to have it exactly once"
                ) from exc
            return int(ack.seq)

        return self._run(publish())

    def fetch(self, first: int, last: int) -> list[bytes]:
        async def fetch() -> list[bytes]:
            out: list[bytes] = []
            for lo in range(first, last + 1, _FETCH_WINDOW):
                hi = min(last, lo + _FETCH_WINDOW - 1)
                try:
                    msgs = await asyncio.gather(
                        *(self._js.get_msg(self._stream, seq=s) for s in range(lo, hi + 1))
                    )
                except Exception as exc:
                    raise ClusterUnavailable(
                        f"stream {self._stream!r}: cannot read messages {lo}..{hi}: "
                        f"{exc or type(exc).__name__}"
                    ) from exc
                out += [bytes(m.data or b"") for m in msgs]
            return out

        return self._run(fetch(), timeout=self.timeout * (1 + (last - first) // _FETCH_WINDOW))

    # -- lifetime ----------------------------------------------------------------------------------

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        with contextlib.suppress(RuntimeError):
            self._loop.close()

    def close(self) -> None:
        """Drain and close the connection, stop the loop thread. Idempotent."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._run(self._nc.close(), timeout=2.0)
        self._stop_loop()
