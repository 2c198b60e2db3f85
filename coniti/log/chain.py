"""The hash chain: the one walker that checks that each event follows the one before it.

Events follow each other when their sequence numbers run 1, 2, ... without a gap and each event's
``prev`` is the hash of the event before it (:data:`~coniti.log.codec.GENESIS` for event 1); see
``log/FORMAT.md`` §3.1. Every reader that walks the log in order checks this here: ``rebuild`` and
``verify`` (:mod:`coniti.log.checks`), :meth:`EventLog.import_frames` (and with it the log export's
importer), and the gap checks of :mod:`coniti.log.feed`. Whether an event *applies* to the state
before it (recorded times not going backwards included) is the fold's business
(:meth:`coniti.log.projections.Projections.fold`); both refuse with :class:`FoldError`.
"""

from __future__ import annotations

from coniti.errors import StoreCorrupted
from coniti.log.codec import GENESIS, LogEvent, decode_event

__all__ = ["Chain", "FoldError"]


class FoldError(StoreCorrupted):
    """The log, or frames offered to it, does not fold at event ``seq`` (the position in the log: a
    frame found there may carry another number): the frame does not decode,
    the sequence numbers have a gap or are out of order, the hash chain is broken, or the event does
    not apply to the state before it (a recorded time going backwards, a put of a record that is
    live, a delete of one that is not)."""

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


class Chain:
    """The position of a walk along the log: the last event's sequence number ``seq``, its ``hash``
    (None when unknown: the next link is then not checked) and its recorded time ``at`` (None before
    the first event).

    A failed check raises :class:`FoldError` *after* moving on to the event it refused, so a caller
    that reports a problem and goes on (``verify``) stays in step; a strict caller stops there."""

    __slots__ = ("at", "hash", "seq")

    def __init__(self, seq: int = 0, hash: bytes | None = GENESIS, at: float | None = None) -> None:
        self.seq = seq
        self.hash = hash
        self.at = at

    def number(self, seq: int) -> None:
        """Move to event ``seq``, which must be the next sequence number. The hash is not checked
        (:meth:`link` does, once the event is decoded)."""
        expected = self.seq + 1
        self.seq = seq
        if seq != expected:
            raise FoldError(
                expected,
                f"expected event {expected}, found event {seq} (the log has a gap after event "
                f"{expected - 1}, or is out of order)",
            )

    def link(self, event: LogEvent) -> None:
        """Take ``event`` (numbered by :meth:`number`) as the current one; its ``prev`` must be the
        hash of the event before."""
        known = self.hash
        self.hash, self.at = event.hash, event.at
        if known is not None and event.prev != known:
            raise FoldError(
                event.seq,
                f"event {event.seq} does not chain onto event {event.seq - 1}: the hash chain is broken",
            )

    def unreadable(self, hash: bytes | None) -> None:
        """The event numbered by :meth:`number` does not decode; go on from ``hash``, its hash if it
        could still be computed (None: the next link is not checked)."""
        self.hash = hash

    def follow(self, event: LogEvent) -> None:
        """:meth:`number` then :meth:`link`: ``event`` must be the next event of the chain."""
        self.number(event.seq)
        self.link(event)

    def read(self, frame: bytes) -> LogEvent:
        """Decode ``frame`` strictly (payload against its digest) as the next event and
        :meth:`follow` it. A frame that does not decode raises :class:`FoldError` naming the
        sequence number it should have (a newer event version still raises
        :class:`~coniti.errors.StoreVersionError`)."""
        try:
            event = decode_event(frame)
        except StoreCorrupted as exc:
            cause = exc.__cause__ or exc
            raise FoldError(self.seq + 1, f"event {self.seq + 1} does not decode: {cause}") from exc
        self.follow(event)
        return event
