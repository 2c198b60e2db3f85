"""Conversation.state on a log store folds the conversation's write events (an append-only
sequence): a turn rewritten, deleted or expired after a checkpoint leaves the fold from the
checkpoint equal to the full fold; an erased write is left out; in memory, the live turns."""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.container import Container
from coniti.conversation import Checkpoint, Conversation, FromCheckpoint, Last, Turn


def _turn(i: int, text: str = "") -> Turn:
    return Turn(id=f"t{i}", speaker="s", text=text or f"turn {i}", timestamp=float(i))


def _collect(state: list[str], turn: Turn) -> list[str]:
    return [*state, f"{turn.id}:{turn.text}"]


def _log(tmp_path: Path) -> Container[Any]:
    return Container(memory="log", path=tmp_path / "s")


def test_a_rewrite_after_a_checkpoint_keeps_the_fold_equal_to_the_full_fold(tmp_path: Path) -> None:
    """t0 rewritten after the checkpoint: both folds see t0, t1, then t0's new text."""
    with _log(tmp_path) as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        cp = conv.state([], _collect).checkpoint()
        c.engine.upsert(_turn(0, "turn 0 corrected").to_note(), namespace=conv.namespace)
        full = conv.state([], _collect)
        assert full.value == ["t0:turn 0", "t1:turn 1", "t0:turn 0 corrected"]
        assert conv.state(None, _collect, FromCheckpoint(cp)).value == full.value and full.turns == 3


def test_a_deleted_turn_stays_in_the_fold(tmp_path: Path) -> None:
    """A turn removed after the checkpoint was said: the full fold still folds it, as the checkpoint did."""
    with _log(tmp_path) as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        cp = conv.state([], _collect).checkpoint()
        c.engine.remove(["t0"], namespace=conv.namespace)
        conv.append(_turn(2))
        full = conv.state([], _collect)
        assert full.value == ["t0:turn 0", "t1:turn 1", "t2:turn 2"]
        assert conv.state(None, _collect, FromCheckpoint(cp)).value == full.value
        assert [t.id for t in conv.window()] == ["t1", "t2"]


def test_an_expired_turn_stays_in_the_fold(tmp_path: Path) -> None:
    """Turns past their retention are gone from windows but not from the state fold."""
    with Container(memory="log", path=tmp_path / "s", kind_retention={"message": timedelta(seconds=1)}) as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        cp = conv.state([], _collect).checkpoint()
        time.sleep(1.1)
        c.memory.sweep()
        assert conv.window() == []
        assert conv.state([], _collect).value == cp.state == ["t0:turn 0", "t1:turn 1"]


def test_an_erased_write_is_left_out_of_later_folds(tmp_path: Path) -> None:
    """After erase, the erased turn's writes (content gone) are not folded."""
    with _log(tmp_path) as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        c.memory.erase(["t0"], namespace=conv.namespace, reason="asked to forget")
        assert conv.state([], _collect).value == ["t1:turn 1"]


def test_last_counts_writes(tmp_path: Path) -> None:
    """Last(n) folds the last n writes: a rewrite is one of them."""
    with _log(tmp_path) as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        c.engine.upsert(_turn(0, "again").to_note(), namespace=conv.namespace)
        assert conv.state([], _collect, Last(2)).value == ["t1:turn 1", "t0:again"]


def test_written_in_memory_is_the_live_turns_by_version() -> None:
    """Without an event feed the fold reads the live turns in version order (a rewrite moves a turn last)."""
    with Container() as c:
        conv = c.conversation("c")
        conv.append([_turn(0), _turn(1)])
        c.engine.upsert(_turn(0, "again").to_note(), namespace=conv.namespace)
        assert [f"{t.id}:{t.text}" for t in conv.written()] == ["t1:turn 1", "t0:again"]


_ops = st.lists(st.tuples(st.sampled_from(["append", "rewrite", "remove"]), st.integers(0, 4)), max_size=10)


@settings(max_examples=15, deadline=None)
@given(_ops, _ops)
def test_property_fold_from_checkpoint_equals_full_fold_under_any_mutation(
    before: list[tuple[str, int]], after: list[tuple[str, int]]
) -> None:
    """Any appends, rewrites and removals before and after a checkpoint (carried through its dict
    form and a reopen): the fold from the checkpoint equals the full fold."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s"
        n = 0

        def run(conv: Conversation, c: Container[Any], ops: list[tuple[str, int]]) -> None:
            nonlocal n
            for op, i in ops:
                live = {t.id for t in conv.turns()}
                n += 1
                if op == "append" and f"t{i}" not in live:
                    conv.append(_turn(i, f"said {n}"))
                elif op == "rewrite" and f"t{i}" in live:
                    c.engine.upsert(_turn(i, f"rewritten {n}").to_note(), namespace=conv.namespace)
                elif op == "remove":
                    c.engine.remove([f"t{i}"], namespace=conv.namespace)

        with Container(memory="log", path=path) as c:
            conv = c.conversation("p")
            run(conv, c, before)
            saved = conv.state([], _collect).checkpoint().to_dict()
        with Container(memory="log", path=path) as c:
            conv = c.conversation("p")
            run(conv, c, after)
            resumed = conv.state(None, _collect, FromCheckpoint(Checkpoint.from_dict(saved)))
            full = conv.state([], _collect)
            assert (resumed.value, resumed.turns, resumed.next_seq) == (full.value, full.turns, full.next_seq)
