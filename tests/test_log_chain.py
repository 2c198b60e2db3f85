"""The hash chain walker (coniti.log.chain): one error, FoldError, naming the event where a walk of
the log breaks."""

from __future__ import annotations

import numpy as np
import pytest

from coniti.errors import StoreCorrupted
from coniti.log.chain import Chain, FoldError
from coniti.log.codec import DELETE, GENESIS, PUT, decode_event, encode_event, encode_put_payload


def _frames(n: int) -> list[bytes]:
    frames = []
    h = GENESIS
    payload = encode_put_payload("t", {}, None, np.ones(2, "float32"))
    for seq in range(1, n + 1):
        frame, h = encode_event(seq, 1.0, PUT, (), h, payload, id=f"r{seq}", timestamp=0.0)
        frames.append(frame)
    return frames


def test_a_chain_of_events_is_followed_to_its_last_hash() -> None:
    """Events 1..n, each chained onto the one before, are followed; the position ends at event n."""
    frames = _frames(3)
    chain = Chain()
    for frame in frames:
        chain.read(frame)
    assert (chain.seq, chain.hash, chain.at) == (3, decode_event(frames[-1]).hash, 1.0)


def test_a_broken_link_raises_fold_error_naming_the_event() -> None:
    """An event whose prev is not the hash of the one before raises FoldError (a StoreCorrupted)
    with that event's seq, saying the hash chain is broken."""
    frames = _frames(2)
    forged, _ = encode_event(3, 1.0, DELETE, (), b"\x07" * 32, id="r1")
    chain = Chain()
    for frame in frames:
        chain.read(frame)
    with pytest.raises(FoldError, match="event 3 does not chain onto event 2") as info:
        chain.read(forged)
    assert info.value.seq == 3 and isinstance(info.value, StoreCorrupted)


def test_a_gap_raises_fold_error_at_the_missing_position() -> None:
    """An event numbered past the next sequence number raises FoldError naming the position it
    should have filled (the event missing there)."""
    frames = _frames(3)
    chain = Chain()
    chain.read(frames[0])
    with pytest.raises(FoldError, match="expected event 2, found event 3") as info:
        chain.read(frames[2])
    assert info.value.seq == 2


def test_a_frame_that_does_not_decode_raises_fold_error_naming_its_position() -> None:
    """A frame that is not an event raises FoldError with the sequence number it should have had."""
    chain = Chain()
    chain.read(_frames(1)[0])
    with pytest.raises(FoldError, match="event 2 does not decode") as info:
        chain.read(b"\x00\x00\x00\x01")
    assert info.value.seq == 2
