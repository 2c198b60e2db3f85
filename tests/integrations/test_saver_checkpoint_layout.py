"""The checkpoint layout's facts: times from UUIDv6 ids are monotone in id order, record ids are
injective, namespaces of different threads and checkpoint namespaces never meet."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from coniti.integrations.langgraph.checkpoint_layout import (
    Layout,
    blob_id,
    checkpoint_time,
    write_id,
)

UUID6_TICKS = st.integers(min_value=0, max_value=2**60 - 1)


def _uuid6(ticks: int, tail: int) -> str:
    value = ((ticks >> 12) << 80) | ((0x6000 | (ticks & 0x0FFF)) << 64) | (0x8000 << 48) | tail
    return str(uuid.UUID(int=value))


@given(st.lists(st.tuples(UUID6_TICKS, st.integers(0, 2**48 - 1)), min_size=2, max_size=20))
def test_uuid6_time_never_decreases_along_id_order(parts: list[tuple[int, int]]) -> None:
    """Sorted as strings, UUIDv6 ids have non-decreasing :func:`checkpoint_time`."""
    times = [checkpoint_time(i) for i in sorted(_uuid6(t, n) for t, n in parts)]
    assert times == sorted(times)


def test_time_of_langgraphs_checkpoint_id_is_when_it_was_made() -> None:
    """A ``uuid6()`` made now has a time within a second of now."""
    import time

    from langgraph.checkpoint.base.id import uuid6

    assert abs(checkpoint_time(str(uuid6(clock_seq=-1))) - time.time()) < 1.0


def test_ids_that_are_not_canonical_uuid6_have_time_zero() -> None:
    """A UUIDv4, an upper-case UUIDv6 and any other text all have time 0.0."""
    v6 = _uuid6(0x1F0000000000000, 7)
    assert checkpoint_time(v6) > 0
    for other in (str(uuid.uuid4()), v6.upper(), "checkpoint-1", ""):
        assert checkpoint_time(other) == 0.0


@given(st.tuples(st.text(), st.text()), st.tuples(st.text(), st.text()))
def test_blob_ids_are_injective(a: tuple[str, str], b: tuple[str, str]) -> None:
    """Different (channel, version) pairs get different record ids."""
    assert (blob_id(*a) == blob_id(*b)) == (a == b)


@given(st.tuples(st.text(), st.text(), st.integers()), st.tuples(st.text(), st.text(), st.integers()))
def test_write_ids_are_injective(a: tuple[str, str, int], b: tuple[str, str, int]) -> None:
    """Different (checkpoint, task, index) triples get different record ids."""
    assert (write_id(*a) == write_id(*b)) == (a == b)


@given(
    st.tuples(st.text(min_size=1), st.text()),
    st.tuples(st.text(min_size=1), st.text()),
)
def test_checkpoint_namespaces_are_distinct_and_apart_from_the_indexes(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    """Two (thread, checkpoint_ns) pairs share a coniti namespace only when equal, and none is
    the thread or run index."""
    layout = Layout.of(("langgraph",))
    na, nb = layout.namespace(*a), layout.namespace(*b)
    assert (na == nb) == (a == b)
    assert na not in (layout.threads, layout.runs)
