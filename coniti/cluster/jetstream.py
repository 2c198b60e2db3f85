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
* ``fetch`` reads messages by sequence number from the stream leader: pipelined gets for short
  ranges, an ephemeral pull consumer for long ones.
* The content bucket is the stream ``<stream>-content`` (one message per subject
  ``coniti-content.<stream>.<event hash>``): ``put_contents`` publishes (deduplicated by key),
  ``get_contents`` reads from its leader, ``purge_contents`` and ``discard_contents`` delete with
  JetStream's secure delete (the server overwrites the message in its files).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from coniti.errors import ClusterError, ClusterUnavailable, ContractError
from coniti.log.replica import Conflict

__all__ = ["JetStreamTransport"]

T = TypeVar("T")
_log = logging.getLogger("coniti.cluster")

_WRONG_LAST_SEQUENCE = 10071
_STREAM_NAME_IN_USE = 10058


class _Transient(Exception):
    """A failure worth another attempt (see :meth:`JetStreamTransport._retry`)."""

_FETCH_WINDOW = 64
"""Ranges shorter than this are read by pipelined gets; longer ones through a consumer."""
_CONSUME_BATCH = 512
_CONTENT_WINDOW = 256
_RECONNECTS = 25
"""Attempts per server to (re)connect, 0.2 s apart; once they are spent the connection closes and
the next call opens a new one."""


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
        self._servers = list(servers)
        self.subject = f"coniti.{stream}"
        self.content_stream = f"{stream}-content"
        """The content bucket: a stream keeping the last message of each subject, one subject per
        event (``content_subject``.hex hash of the event)."""
        self.content_subject = f"coniti-content.{stream}"
        self.timeout = timeout
        self._attempt = min(timeout, 2.0)
        """Seconds one request may take before it is tried again (see :meth:`_retry`)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="coniti-nats", daemon=True)
        self._thread.start()
        try:
            self._nc = self._run(self._connect(self._servers))
            self._js = self._nc.jetstream(timeout=self._attempt)
            self._run(self._ensure_stream(replicas))
        except BaseException:
            self._stop_loop()
            raise

    @property
    def stream(self) -> str:
        return self._stream

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        nc = getattr(self, "_nc", None)
        if nc is not None and nc.is_closed:  # the client gave up reconnecting: connect again
            try:
                self._nc = self._run(self._connect(self._servers))
            except BaseException:
                coro.close()
                raise
            self._js = self._nc.jetstream(timeout=self._attempt)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=(timeout or self.timeout) + 10)
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
                max_reconnect_attempts=_RECONNECTS, reconnect_time_wait=0.2, name="coniti",
                error_cb=quiet,
            )
        except Exception as exc:
            raise ClusterUnavailable(f"cannot reach any NATS server of {servers}: {exc}") from exc

    async def _ensure_stream(self, replicas: int) -> None:
        errors = self._nats.js.errors

        async def info() -> Any:
            try:
                return await self._js.stream_info(self._stream)
            except errors.NotFoundError:
                return None

        found = await self._retry("reading the stream", info)
        if found is None:

            async def create() -> Any:
                try:
                    return await self._js.add_stream(
                        name=self._stream, subjects=[self.subject], num_replicas=replicas,
                        duplicate_window=120.0, allow_direct=False,
                    )
                except errors.APIError as exc:
                    if exc.err_code == _STREAM_NAME_IN_USE:  # created meanwhile by another node
                        return await self._js.stream_info(self._stream)
                    # A cluster just started may not place a stream yet: try again.
                    raise _Transient(str(exc)) from exc

            found = await self._retry("creating the stream", create)
        async def content() -> Any:
            try:
                return await self._js.stream_info(self.content_stream)
            except errors.NotFoundError:
                pass
            try:
                return await self._js.add_stream(
                    name=self.content_stream, subjects=[f"{self.content_subject}.>"],
                    num_replicas=replicas, max_msgs_per_subject=1, duplicate_window=120.0,
                    allow_direct=False,
                )
            except errors.APIError as exc:
                if exc.err_code == _STREAM_NAME_IN_USE:
                    return await self._js.stream_info(self.content_stream)
                raise _Transient(str(exc)) from exc

        await self._retry("creating the content bucket", content)
        if found.config.num_replicas != replicas:
            raise ClusterError(
                f"stream {self._stream!r} has {found.config.num_replicas} replicas, not {replicas}"
            )

    # -- Transport ---------------------------------------------------------------------------------

    async def _retry(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` again, 0.1 s apart, while it fails for want of a server or a leader (no
        answer, no responders, 503; a leader election takes a few seconds), until :attr:`timeout`
        seconds have passed: then :class:`ClusterUnavailable`. An API answer that is a refusal
        (wrong last sequence: :class:`Conflict`; any other 4xx but 408) is raised at once."""
        errors = self._nats.js.errors
        deadline = self._loop.time() + self.timeout
        while True:
            try:
                return await attempt()
            except errors.APIError as exc:
                if exc.err_code == _WRONG_LAST_SEQUENCE:
                    raise Conflict(str(exc)) from None
                if exc.code not in (None, 408, 503):
                    raise ClusterError(f"stream {self._stream!r}: {what}: {exc}") from exc
                failure: Exception = exc
            except (Conflict, ClusterError):
                raise
            except Exception as exc:
                failure = exc
            if self._loop.time() + 0.1 > deadline:
                raise ClusterUnavailable(
                    f"stream {self._stream!r}: {what}: no quorum answered within {self.timeout:g}s "
                    f"({failure or type(failure).__name__})"
                ) from failure
            await asyncio.sleep(0.1)

    def last_seq(self) -> int:
        async def last() -> int:
            info = await self._js.stream_info(self._stream)
            return int(info.state.last_seq)

        return self._run(self._retry("reading the last sequence", last))

    def _check_size(self, size: int, what: str) -> None:
        limit = int(self._nc.max_payload)
        if size + 1024 > limit:  # headers included
            raise ContractError(
                f"{what} is {size:,} bytes, over the cluster's message limit ({limit:,} bytes, the "
                "servers' max_payload): split the write; nothing was written"
            )

    def publish(self, payload: bytes, *, expected_last: int, msg_id: str) -> int:
        self._check_size(len(payload), "the write's message")
        headers = {"Nats-Expected-Last-Sequence": str(expected_last), "Nats-Msg-Id": msg_id}

        async def publish() -> int:
            # A retry after a lost answer is the same message: the stream stores it once (the
            # msg id is in its duplicate window) and answers with the sequence it got.
            ack = await self._js.publish(
                self.subject, payload, headers=dict(headers), stream=self._stream, timeout=self._attempt
            )
            return int(ack.seq)

        try:
            return self._run(self._retry("publishing a write", publish))
        except ClusterUnavailable as exc:
            raise ClusterUnavailable(
                f"{exc}: nothing was written on this node; retry with the same op_id to have the "
                "write exactly once"
            ) from exc

    def fetch(self, first: int, last: int) -> list[bytes]:
        async def window(lo: int, hi: int) -> list[bytes]:
            msgs = await asyncio.gather(*(self._js.get_msg(self._stream, seq=s) for s in range(lo, hi + 1)))
            return [bytes(m.data or b"") for m in msgs]

        async def consume() -> list[bytes]:
            api = self._nats.js.api
            config = api.ConsumerConfig(
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=first,
                ack_policy=api.AckPolicy.NONE, inactive_threshold=30.0, mem_storage=True,
                num_replicas=1,
            )
            sub = await self._js.pull_subscribe(self.subject, stream=self._stream, config=config)
            out: list[bytes] = []
            want = last - first + 1
            try:
                while len(out) < want:
                    for m in await sub.fetch(batch=min(_CONSUME_BATCH, want - len(out)), timeout=self._attempt):
                        seq = first + len(out)
                        if m.metadata.sequence.stream != seq:
                            raise _Transient(f"message {m.metadata.sequence.stream} came for {seq}")
                        out.append(bytes(m.data or b""))
                        if len(out) == want:
                            break
            finally:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
                    await self._js.delete_consumer(self._stream, sub._consumer)
            return out

        async def fetch() -> list[bytes]:
            if last - first >= _FETCH_WINDOW:  # a long range: one consumer pushes it in order
                return await self._retry(f"reading messages {first}..{last}", consume)
            out: list[bytes] = []
            for lo in range(first, last + 1, _FETCH_WINDOW):
                hi = min(last, lo + _FETCH_WINDOW - 1)
                out += await self._retry(f"reading messages {lo}..{hi}", functools.partial(window, lo, hi))
            return out

        return self._run(fetch(), timeout=self.timeout * (1 + (last - first) // _FETCH_WINDOW))

    async def _gather(self, what: str, make: Callable[[str], Awaitable[T]], keys: Sequence[str]) -> list[T]:
        """``make(key)`` for every key, pipelined in windows, each window retried as a whole."""
        out: list[T] = []
        for lo in range(0, len(keys), _CONTENT_WINDOW):
            window = keys[lo : lo + _CONTENT_WINDOW]

            async def run(window: Sequence[str] = window) -> list[T]:
                return list(await asyncio.gather(*(make(k) for k in window)))

            out += await self._retry(what, run)
        return out

    def put_contents(self, contents: dict[str, bytes]) -> list[int]:
        for value in contents.values():
            self._check_size(len(value), "the content of one event")
        async def put(key: str) -> int:
            ack = await self._js.publish(
                f"{self.content_subject}.{key}", contents[key], headers={"Nats-Msg-Id": key},
                stream=self.content_stream, timeout=self._attempt,
            )
            return int(ack.seq)

        return self._run(
            self._gather("storing content", put, list(contents)), timeout=self._span(len(contents))
        )

    def discard_contents(self, numbers: Sequence[int]) -> None:
        errors = self._nats.js.errors

        async def discard(number: str) -> None:
            with contextlib.suppress(errors.NotFoundError):
                await self._js.delete_msg(self.content_stream, int(number))

        self._run(
            self._gather("discarding content", discard, [str(n) for n in numbers]),
            timeout=self._span(len(numbers)),
        )

    async def _content_msg(self, key: str) -> Any:
        errors = self._nats.js.errors
        try:
            return await self._js.get_msg(self.content_stream, subject=f"{self.content_subject}.{key}")
        except errors.NotFoundError:
            return None

    def get_contents(self, keys: Sequence[str]) -> dict[str, bytes]:
        msgs = self._run(self._gather("reading content", self._content_msg, list(keys)), timeout=self._span(len(keys)))
        return {k: bytes(m.data) for k, m in zip(keys, msgs, strict=True) if m is not None and m.data}

    def purge_contents(self, keys: Sequence[str]) -> None:
        errors = self._nats.js.errors

        async def purge(key: str) -> None:
            msg = await self._content_msg(key)
            if msg is not None:
                with contextlib.suppress(errors.NotFoundError):  # deleted meanwhile
                    # Secure erase: the server overwrites the message's bytes in its files.
                    await self._js.delete_msg(self.content_stream, msg.seq)

        self._run(self._gather("purging content", purge, list(keys)), timeout=self._span(len(keys)))

    def _span(self, n: int) -> float:
        return self.timeout * (1 + n // _CONTENT_WINDOW)

    # -- lifetime ----------------------------------------------------------------------------------

    def _stop_loop(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(timeout=5)
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
