"""Cluster mode: the event log replicated through a stream, each node's store a folded copy of it.

The stream (a NATS JetStream stream in :mod:`coniti.cluster`; here any :class:`Transport`) is the
log of record. Each stream message is one write transaction of some node: the frames of the events
it appended, without the payloads of content events, which go to a content bucket keyed by event
hash so that erasure can remove them (``log/FORMAT.md`` §17 gives the layout and the erasure). A
node's store is a complete copy: its log, hash chain and projections are the fold of the stream's
messages in order, through the one append routine
(:meth:`Appends.stored <coniti.log.append.Appends.stored>`), so every node holds the same bytes
and the same head hash. Recorded times come from the frames (set by the writing node), never from
the folding node's clock.

:class:`Replica` is the :class:`~coniti.log.store.WriteHook` of such a store:

* **Writes.** A write transaction runs as on a single store, planned against the node's folded
  state, which is the stream up to sequence ``s`` (the store's *position*, kept in
  ``sys/stream`` in the same transaction as the fold). Before it commits, the frames it appended
  are published as one message that requires the stream's last sequence to be ``s``. If another
  node's write came first the stream refuses, the transaction is rolled back, the node folds what
  it lacks and the write runs (and is decided) again: compare-and-set and op ids are checked
  against the whole history, so op ids are permanent. The transaction commits, and the caller is
  answered, only once the stream has stored the message (on a quorum of its replicas); position
  ``s + 1`` commits with it.
* **Folding** (:meth:`Replica.catch_up`) takes the messages after the position, at most
  :data:`FOLD_CHUNK` per transaction; each frame must decode strictly and follow the one before it
  on the hash chain, else :class:`~coniti.log.chain.FoldError`: a store is never merged with a
  stream it diverges from.
* **Attaching** (:meth:`Replica.attach`) binds an empty store to the stream, binds an unbound
  store whose events are the stream's first ones up to the end of a message (its head hash the
  stream's there: an import of a node's export, which then folds only the rest), or checks that a
  bound store is this stream's copy: the same stream name, a position the stream still holds, and the
  stream's message at that position ending at the store's head hash. Anything else is refused with
  :class:`~coniti.errors.ClusterError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from coniti.errors import ClusterError
from coniti.log.append import Appends
from coniti.log.chain import Chain
from coniti.log.codec import (
    ERASE,
    FEEDBACK,
    META,
    PUT,
    LogEvent,
    decode_envelope,
    decode_event,
    erase_payload,
    split_frame,
)
from coniti.log.erasure import erase_for_receipt
from coniti.log.keys import name_key, ns_bytes
from coniti.log.projections import Projections
from coniti.log.store import SYS_STREAM, Replan, Store

__all__ = [
    "FOLD_CHUNK",
    "FOLD_EVENTS",
    "Conflict",
    "Position",
    "Replica",
    "Transport",
    "decode_message",
    "encode_message",
]

FOLD_CHUNK = 2048
"""The most stream messages one fold transaction takes (a fold cut short resumes from there)."""
FOLD_EVENTS = 1024
"""A fold transaction takes no more messages once it holds this many events."""
_FETCH = 256
_LEN = struct.Struct(">I")
_CONTENT_KINDS = (PUT, META, FEEDBACK)
"""The kinds of event whose payload is content (erasable): kept in the content bucket, not the stream."""
_POS = struct.Struct(">QQ")


class Conflict(Exception):
    """The stream's last sequence is not the one a publish expected: another write came first."""


class Transport(Protocol):
    """The log of record as the replica sees it: an append-only sequence of messages numbered from
    1, a publish that succeeds only at an expected position, reads by sequence number."""

    @property
    def stream(self) -> str:
        """The stream's name (recorded in each node's store)."""

    def last_seq(self) -> int:
        """The stream's last sequence number (0: empty)."""

    def publish(self, payload: bytes, *, expected_last: int, msg_id: str) -> int:
        """Append ``payload`` if the stream's last sequence is ``expected_last`` (raise
        :class:`Conflict` if not); the sequence number it got. ``msg_id`` identifies the message
        for deduplication of a retried publish."""

    def fetch(self, first: int, last: int) -> list[bytes]:
        """The payloads of messages ``first`` to ``last`` (inclusive), in order."""

    def put_contents(self, contents: dict[str, bytes]) -> list[int]:
        """Store each value of ``contents`` under its key in the content bucket (all stored, on a
        quorum, before it returns); the bucket's numbers for them (for :meth:`discard_contents`)."""

    def discard_contents(self, numbers: Sequence[int]) -> None:
        """Remove the values :meth:`put_contents` stored as ``numbers`` from the content bucket."""

    def get_contents(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The content bucket's values of ``keys`` (as the bucket's leader has them); a key that
        is absent or purged is left out."""

    def purge_contents(self, keys: Sequence[str]) -> None:
        """Remove ``keys`` and every earlier value of them from the content bucket."""


class Position(NamedTuple):
    """How far a store has folded its stream: the stream's sequence number ``stream_seq``, the
    store's event ``event_seq`` that message ended at, and the stream's name."""

    stream_seq: int
    event_seq: int
    stream: str

    def encode(self) -> bytes:
        return _POS.pack(self.stream_seq, self.event_seq) + self.stream.encode("utf-8")

    @classmethod
    def decode(cls, raw: bytes) -> Position:
        stream_seq, event_seq = _POS.unpack_from(raw)
        return cls(stream_seq, event_seq, bytes(raw[_POS.size :]).decode("utf-8"))


def encode_message(frames: Sequence[bytes]) -> bytes:
    """The stream message of a write that appended ``frames``: each frame as a 4-byte big-endian
    length and the frame's bytes, in order."""
    return b"".join(_LEN.pack(len(f)) + f for f in frames)


def decode_message(payload: bytes, stream_seq: int) -> list[bytes]:
    """The frames of stream message ``stream_seq``; :class:`ClusterError` if it is not one."""
    frames: list[bytes] = []
    view = memoryview(payload)
    i = 0
    while i < len(view):
        if i + _LEN.size > len(view):
            raise ClusterError(f"stream message {stream_seq} is not a coniti message (truncated length)")
        (n,) = _LEN.unpack_from(view, i)
        i += _LEN.size
        if n == 0 or i + n > len(view):
            raise ClusterError(f"stream message {stream_seq} is not a coniti message (bad frame length)")
        frames.append(bytes(view[i : i + n]))
        i += n
    if not frames:
        raise ClusterError(f"stream message {stream_seq} is empty")
    return frames


class Replica:
    """The write hook of a store that is a copy of ``transport``'s stream (see the module
    docstring); ``dbs()`` gives the store's sub-databases (new ones after a compaction)."""

    def __init__(self, transport: Transport, dbs: Callable[[], Any]) -> None:
        self.transport = transport
        self._dbs = dbs
        self.target = 0
        """The stream sequence the current catch-up folds up to (0: ask the stream)."""

    @property
    def dbs(self) -> Any:
        return self._dbs()

    def position(self, txn: Any) -> Position | None:
        """The store's position in its stream (None: the store is not bound to one)."""
        raw = txn.get(SYS_STREAM, db=self.dbs.sys)
        return None if raw is None else Position.decode(bytes(raw))

    def _set_position(self, txn: Any, pos: Position) -> None:
        txn.put(SYS_STREAM, pos.encode(), db=self.dbs.sys)

    def attach(self, store: Store) -> None:
        """Bind ``store`` to the stream (an empty store) or check it is the stream's copy, then run
        its writes through this hook. Raises :class:`~coniti.errors.ClusterError` if the store
        holds events of another history (see the module docstring)."""
        name = self.transport.stream

        def bind(txn: Any) -> None:
            pos = self.position(txn)
            head = Projections(txn, self.dbs).head()
            if pos is None:
                at = self._join_point(store, head.seq, head.hash) if head.seq else 0
                self._set_position(txn, Position(at, head.seq, name))
                return
            if pos.stream != name:
                raise ClusterError(
                    f"store {store.path} is a copy of stream {pos.stream!r}, not {name!r}"
                )
            if head.seq != pos.event_seq:
                raise ClusterError(
                    f"store {store.path} holds events {pos.event_seq + 1}..{head.seq} that stream "
                    f"{name!r} never acknowledged"
                )
            if pos.stream_seq:
                last = self.transport.last_seq()
                if last < pos.stream_seq:
                    raise ClusterError(
                        f"stream {name!r} ends at message {last} but store {store.path} has folded "
                        f"{pos.stream_seq}: the stream was reset or is another one"
                    )
                frames = decode_message(self.transport.fetch(pos.stream_seq, pos.stream_seq)[0], pos.stream_seq)
                if decode_event(frames[-1]).hash != head.hash:
                    raise ClusterError(
                        f"store {store.path} diverges from stream {name!r}: its head (event "
                        f"{head.seq}) is not the stream's event at message {pos.stream_seq}"
                    )

        store.replicate(self)
        try:
            store.write(bind)
        except BaseException:
            store.replicate(None)
            raise

    def _messages(self, after: int) -> Iterator[tuple[int, list[bytes]]]:
        """The stream's messages after message ``after`` up to its last (as of the call), as
        ``(stream seq, frames)``, fetched :data:`_FETCH` at a time as the caller goes on."""
        last = self.transport.last_seq()
        seq = after
        while seq < last:
            upto = min(last, seq + _FETCH)
            for stream_seq, payload in enumerate(self.transport.fetch(seq + 1, upto), seq + 1):
                yield stream_seq, decode_message(payload, stream_seq)
            seq = upto

    def _join_point(self, store: Store, events: int, head_hash: bytes) -> int:
        """The stream message that ends at event ``events`` with hash ``head_hash``: where an
        unbound store holding the stream's first ``events`` events (an import of a node's export)
        joins the stream. Raises :class:`ClusterError` when the stream's history does not pass
        through that head on a message boundary (the store is then not a copy of the stream)."""
        name = self.transport.stream
        seen = 0
        for stream_seq, frames in self._messages(0):
            seen += len(frames)
            if seen < events:
                continue
            if seen == events and decode_event(frames[-1], strict=False).hash == head_hash:
                return stream_seq
            raise ClusterError(
                f"store {store.path} holds {events} events and is not a copy of stream {name!r}: its "
                f"head (event {events}) is not the stream's event {events} at the end of a message"
            )
        raise ClusterError(
            f"store {store.path} holds {events} events and is not a copy of stream {name!r}: the "
            f"stream holds {seen} events"
        )

    def event_hashes(self, pos: Position, size: int) -> list[bytes]:
        """The chain hashes of the stream's events after position ``pos`` up to event ``size``
        (fewer when the stream ends before), read from the messages without folding them."""
        hashes: list[bytes] = []
        want = size - pos.event_seq
        if want <= 0:
            return hashes
        for _, frames in self._messages(pos.stream_seq):
            hashes += [decode_event(f, strict=False).hash for f in frames[: want - len(hashes)]]
            if len(hashes) >= want:
                break
        return hashes

    # -- WriteHook ---------------------------------------------------------------------------------

    def before_commit(self, txn: Any) -> None:
        """Publish the events ``txn`` appended beyond the position as one message expecting the
        stream's last sequence to be the position; :class:`~coniti.log.store.Replan` when the stream
        has moved on. Nothing appended: nothing published. The content of each event goes to the
        content bucket first, and the message carries the frames without it (``log/FORMAT.md``
        §17.2); once the stream has the message, the content its ``erase`` receipts erase is purged
        from the bucket."""
        pos = self.position(txn)
        if pos is None:
            raise ClusterError("the store lost its stream binding during a write")
        p = Projections(txn, self.dbs)
        head = p.head()
        if head.seq == pos.event_seq:
            return
        frames: list[bytes] = []
        contents: dict[str, bytes] = {}
        receipts: list[LogEvent] = []
        for seq in range(pos.event_seq + 1, head.seq + 1):
            frame = p.frame(seq)
            event = decode_event(frame, seq, strict=False)
            if event.kind in _CONTENT_KINDS and not event.erased:
                contents[event.hash.hex()] = split_frame(frame)[2]
                frame = erase_payload(frame)
            elif event.kind == ERASE:
                receipts.append(event)
            frames.append(frame)
        stored = self.transport.put_contents(contents) if contents else []
        try:
            seq = self.transport.publish(
                encode_message(frames), expected_last=pos.stream_seq, msg_id=head.hash.hex()
            )
        except Conflict:
            self.target = 0
            if stored:  # these events will never exist: their content must not stay behind
                self.transport.discard_contents(stored)
            raise Replan() from None
        if seq != pos.stream_seq + 1:
            raise ClusterError(
                f"stream {pos.stream!r} stored the write at message {seq}, expected {pos.stream_seq + 1}"
            )
        self._set_position(txn, Position(seq, head.seq, pos.stream))
        if receipts:
            self._purge(p, [s for r in receipts for s in _erased_by(p, r)])

    def _purge(self, p: Projections, seqs: list[int]) -> None:
        """Purge from the content bucket the content of events ``seqs`` (erased) that it holds."""
        keys = sorted({decode_event(p.frame(s), s, strict=False).hash.hex() for s in seqs})
        if keys:
            held = self.transport.get_contents(keys)
            if held:
                self.transport.purge_contents(sorted(held))

    def catch_up(self, txn: Any) -> bool:
        """Fold the next messages after the position (at most :data:`FOLD_CHUNK`) up to the
        stream's last sequence, as it was when this catch-up began; whether more remain. Each
        frame gets its content back from the content bucket (none: it folds as erased); an
        ``erase`` receipt first erases what it covers in this copy (as the erasing node did) and
        purges that content from the bucket if it is still there."""
        pos = self.position(txn)
        if pos is None:
            raise ClusterError("the store is not bound to a stream")
        if self.target <= pos.stream_seq:
            self.target = self.transport.last_seq()
        end = min(self.target, pos.stream_seq + FOLD_CHUNK)
        if end <= pos.stream_seq:
            self.target = 0
            return False
        frames: list[bytes] = []
        last = pos.stream_seq
        window = 16  # messages; then as many as the events per message seen so far allow
        while last < end and len(frames) < FOLD_EVENTS:
            upto = min(end, last + window)
            for stream_seq, payload in enumerate(self.transport.fetch(last + 1, upto), last + 1):
                frames += decode_message(payload, stream_seq)
            last = upto
            per_message = len(frames) / (last - pos.stream_seq)
            window = max(1, min(_FETCH, int((FOLD_EVENTS - len(frames)) / per_message)))
        wanted: dict[int, str] = {}
        for i, frame in enumerate(frames):
            event = decode_event(frame, strict=False)
            if event.kind in _CONTENT_KINDS and event.erased:
                wanted[i] = event.hash.hex()
        found = self.transport.get_contents(list(wanted.values())) if wanted else {}
        p = Projections(txn, self.dbs)
        appends = Appends(p, None, None)
        head = p.head()
        chain = Chain(head.seq, head.hash, head.at if head.seq else None)
        erased: list[int] = []
        for i, frame in enumerate(frames):
            content = found.get(wanted[i]) if i in wanted else None
            if content:
                frame = frame + content
            prev_at = chain.at
            event = chain.read(frame)
            if event.kind == ERASE:
                erased += erase_for_receipt(p, event)
            appends.stored(frame, event, prev_at)
        appends.commit()
        self._set_position(txn, Position(last, appends.seq, pos.stream))
        if erased:
            self._purge(p, erased)
        more = last < self.target
        if not more:
            self.target = 0
        return more


def _erased_by(p: Projections, receipt: LogEvent) -> list[int]:
    """The events whose content the ``erase`` receipt ``receipt`` (in the log) covers: the
    versions of its record and the feedback on them, or the values of its key."""
    nsid = p.nsid(ns_bytes(receipt.namespace))
    if nsid is None:
        return []
    if receipt.key is not None:
        candidates = [s for s in p.meta_events(nsid, name_key(receipt.key)) if s < receipt.seq]
        return [s for s in candidates if decode_envelope(p.frame(s), s).key == receipt.key]
    assert receipt.id is not None
    idk = name_key(receipt.id)
    candidates = [put_seq for put_seq, _ in p.versions(nsid, idk) if put_seq < receipt.seq]
    candidates += [s for s in p.feedback_seqs(nsid, idk) if s < receipt.seq]
    return [s for s in candidates if decode_envelope(p.frame(s), s).id == receipt.id]
