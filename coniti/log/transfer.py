"""Appending events copied from elsewhere (a ``coniti-log`` export) verbatim, frame for frame.

The caller decodes and chain-checks each frame first (:func:`check_next`); :func:`append_checked`
then appends a batch after the head and folds it in one write transaction, all or nothing. Frames are
stored byte for byte, so every hash, and the head hash, stay those of the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coniti.errors import StoreCorrupted
from coniti.log.codec import GENESIS, Event, decode_event
from coniti.log.projections import Dbs, Head, Projections
from coniti.log.store import Store

__all__ = ["Chain", "FoldRefused", "append_checked", "check_next"]


class FoldRefused(StoreCorrupted):
    """An event that decodes and chains but does not apply to the state before it (e.g. a put of a
    record that is live). ``seq`` names it."""

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


class Chain:
    """The running position of a chain check: last sequence number, hash and recorded time."""

    __slots__ = ("at", "hash", "seq")

    def __init__(self) -> None:
        self.seq = 0
        self.hash = GENESIS
        self.at: float | None = None


def check_next(chain: Chain, frame: bytes) -> Event:
    """Decode ``frame`` strictly as the event after ``chain`` and advance ``chain``. Raises
    :class:`StoreCorrupted` (or :class:`~coniti.errors.StoreVersionError`) saying what is wrong: it
    does not decode, its payload does not match its digest, it is not the next sequence number, it
    does not chain onto the previous hash, or its recorded time goes backwards."""
    seq = chain.seq + 1
    event = decode_event(frame, None)
    if event.seq != seq:
        raise StoreCorrupted(f"expected event {seq}, found event {event.seq} (a gap or a reordering)")
    if event.prev != chain.hash:
        raise StoreCorrupted(f"event {seq} does not chain onto event {seq - 1}: the hash chain is broken")
    if chain.at is not None and event.at < chain.at:
        raise StoreCorrupted(f"event {seq}: recorded time goes backwards")
    chain.seq, chain.hash, chain.at = seq, event.hash, event.at
    return event


def append_checked(store: Store, batch: Sequence[tuple[Event, bytes]]) -> None:
    """Append ``(event, frame)`` pairs, already passed through :func:`check_next` in order, right
    after the head, folding each; one write transaction. Raises :class:`FoldRefused` naming the first
    event that does not apply, or :class:`StoreCorrupted` if the batch does not follow the head."""
    if not batch:
        return
    dbs = Dbs(store.dbs)

    def write(txn: Any) -> None:
        p = Projections(txn, dbs)
        head = p.head()
        first = batch[0][0]
        if first.seq != head.seq + 1 or first.prev != head.hash:
            raise StoreCorrupted(f"event {first.seq} does not follow the head (event {head.seq})")
        prev_at = head.at if head.seq else None
        for event, frame in batch:
            p.append(event.seq, frame)
            try:
                p.fold(event, prev_at)
            except StoreCorrupted as exc:
                raise FoldRefused(event.seq, str(exc)) from exc
            prev_at = event.at
        last = batch[-1][0]
        p.set_head(Head(last.seq, last.at, last.hash))

    store.write(write)
