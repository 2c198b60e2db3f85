"""Restored rows merged with a row that lands before them (issue 28, item 1), and snapshots of the
format written by the code that merged them wrongly.

The scenario: 1,200 notes (timestamps 1000 + i) ingested into a LogBackend engine, one of them
removed (or moved later by an upsert), the engine closed (its snapshot saved). Reopened, the rows
are the snapshot's, their ids still packed; one note with timestamp 500 lands before every row, so
it is buffered, and ``persist()`` or ``verify()`` merges it into the rows. Before the fix the merge
moved the rows' liveness before it decoded the ids, so each id was paired with the liveness of the
row before it: a removed id looked live (pointing at its neighbour's row), or an id with an earlier
version looked live twice (``StructureError``). The answers must equal those of the same store
opened without ``derived/`` (rebuilt from the log). ``ann`` passes these on the old code too: its
restore checks its graph's ids against the rows, and past 1,024 lookups that decodes the ids (the
state machine of ``test_derived_stateful.py`` covers it with fewer notes).

Also here: a snapshot of format 1 (what that code wrote) is rebuilt rather than used, and verify()
while another process writes compares its three states at one event.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers_derived import read_parts

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.derived import FORMAT, DerivedDir
from coniti.embedding import LocalHashEmbedder
from coniti.errors import AnchorNotFound
from coniti.impl.log import LogBackend
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "lunch", "gym", "ana", "bob", "report", "trip", "code", "plan", "tea"]


def _ann() -> Structure:
    pytest.importorskip("usearch")
    from coniti.structure import AnnStructure

    return AnnStructure()


KINDS: dict[str, Callable[[], Structure]] = {
    "flat": FlatStructure,
    "segment_tree": SegmentTreeStructure,
    "ann": _ann,
}


def text_of(i: int) -> str:
    return f"{WORDS[i % 10]} {WORDS[i * 7 % 10]} item {i}"


def engine(store: LogBackend, kind: str) -> ContinuityEngine:
    return ContinuityEngine(store, EMBEDDER, [KINDS[kind]()], DefaultStrategy())


def removed(e: ContinuityEngine) -> None:
    """n600 removed: its row stays, ended."""
    e.remove(["n600"])


def moved(e: ContinuityEngine) -> None:
    """n600 moved later (after n700): its earlier version's row stays, ended."""
    e.upsert(Note(id="n600", text="n600 moved", timestamp=1700.5))


HISTORIES: dict[str, Callable[[ContinuityEngine], None]] = {"removed": removed, "moved": moved}


@pytest.fixture(scope="module")
def saved_stores(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """The store of ``(kind, history)``, built once: 1,200 notes, the history's write, closed (the
    snapshot saved)."""
    built: dict[tuple[str, str], Path] = {}

    def get(kind: str, history: str) -> Path:
        if (kind, history) not in built:
            path = tmp_path_factory.mktemp(f"{kind}-{history}") / "s"
            with LogBackend(path, durability="nosync") as store:
                e = engine(store, kind)
                e.ingest_many(
                    [Note(id=f"n{i}", text=text_of(i), timestamp=1000.0 + i) for i in range(1200)]
                )
                HISTORIES[history](e)
                e.persist()
                e.close()
                assert list(Path(store.derived_path).glob("*.json")), "persist saved no snapshot"
            built[kind, history] = path
        return built[kind, history]

    return get


@contextmanager
def merged(
    saved_stores: Callable[[str, str], Path], tmp_path: Path, kind: str, history: str, op: str,
    *, derived: bool = True,
) -> Iterator[ContinuityEngine]:
    """A copy of the saved store reopened (from its snapshot unless ``derived`` is False), one note
    ingested before every row, then ``op`` (``persist`` or ``verify``) called."""
    path = tmp_path / ("s" if derived else "rebuilt")
    shutil.copytree(saved_stores(kind, history), path)
    if not derived:
        shutil.rmtree(path / "derived")
    with LogBackend(path, durability="nosync") as store:
        e = engine(store, kind)
        e.ingest(Note(id="early", text="early note", timestamp=500.0))
        getattr(e, op)()
        yield e
        e.close()


def answers(e: ContinuityEngine) -> list[Any]:
    """Hits (id, score, version) of asks around the rows the merge moved; an error by its type."""
    queries = [
        Query(near="n599", k=5),
        Query(near="n601", k=5),
        Query(text=text_of(599), k=5),
        Query(text=text_of(601), k=5, strategy="semantic"),
        Query(text="item", k=5, time_range=TimeRange(start=1590.0, end=1610.0)),
        Query(time_range=TimeRange(start=1595.0, end=1605.0), k=20),
        Query(near="n600", k=5),
    ]
    out: list[Any] = []
    for query in queries:
        try:
            out.append([(h.note.id, h.score, h.version) for h in e.ask(query).hits])
        except AnchorNotFound as exc:
            out.append(type(exc).__name__)
    return out


PARAMS = pytest.mark.parametrize(
    ("kind", "op"), [(k, op) for k in KINDS for op in ("persist", "verify")]
)


@PARAMS
def test_a_removed_id_is_no_anchor_after_a_merge_of_restored_rows(
    saved_stores: Callable[[str, str], Path], tmp_path: Path, kind: str, op: str
) -> None:
    """After the merge, ask(near=the removed id) raises AnchorNotFound (it answered the neighbours
    of the row before it)."""
    with merged(saved_stores, tmp_path, kind, "removed", op) as e, pytest.raises(AnchorNotFound):
        e.ask(Query(near="n600"))


@PARAMS
def test_writing_a_removed_id_again_leaves_its_neighbour_found_by_its_text(
    saved_stores: Callable[[str, str], Path], tmp_path: Path, kind: str, op: str
) -> None:
    """After the merge and an upsert of the removed id, the live note n599 is still the best
    semantic hit for its own text (the upsert ended n599's row)."""
    with merged(saved_stores, tmp_path, kind, "removed", op) as e:
        e.upsert(Note(id="n600", text="n600 again", timestamp=1600.0))
        hits = e.ask(Query(text=text_of(599), k=1, strategy="semantic")).hits
        assert [h.note.id for h in hits] == ["n599"]


@PARAMS
def test_verify_is_clean_after_a_removed_id_is_written_again(
    saved_stores: Callable[[str, str], Path], tmp_path: Path, kind: str, op: str
) -> None:
    """After the merge and an upsert of the removed id, verify() finds the rows equal to a fresh
    fold of the log (it reported n599's row as differing)."""
    with merged(saved_stores, tmp_path, kind, "removed", op) as e:
        e.upsert(Note(id="n600", text="n600 again", timestamp=1600.0))
        report = e.verify()
        assert report.ok, report.problems


@PARAMS
@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_answers_after_the_merge_equal_the_store_rebuilt_without_derived_state(
    saved_stores: Callable[[str, str], Path], tmp_path: Path, kind: str, op: str, history: str
) -> None:
    """After the merge (and an upsert of n600), the answers (ids, scores, versions, or
    AnchorNotFound) equal those of the same store opened with derived/ removed, which rebuilds
    its rows from the log. With an earlier version of n600 among the rows the merge raised
    StructureError."""
    with merged(saved_stores, tmp_path, kind, history, op) as e:
        e.upsert(Note(id="n600", text="n600 again", timestamp=1600.0))
        got = answers(e)
    with merged(saved_stores, tmp_path, kind, history, op, derived=False) as rebuilt:
        rebuilt.upsert(Note(id="n600", text="n600 again", timestamp=1600.0))
        want = answers(rebuilt)
    assert got == want


# -- snapshots of format 1 (written by the code above's merge) are rebuilt --------------------


def resave_with_n10_ended(store: LogBackend, fmt: int) -> None:
    """Rewrite the store's one snapshot with n10's live row ended at its birth (what the wrong
    merge and a later write could save), as format ``fmt``; checksums, key and seq stay valid."""
    (manifest_path,) = Path(store.derived_path).glob("*.json")
    manifest = json.loads(manifest_path.read_bytes())
    parts = read_parts(manifest_path)
    rows = parts["structure.0"]
    ends = rows["id_ends"].tolist()
    ids = [bytes(rows["id_bytes"][a:b]).decode() for a, b in zip([0, *ends], ends, strict=False)]
    died = rows["died"].copy()
    died[ids.index("n10")] = rows["born"][ids.index("n10")] + 1
    rows["died"] = died
    name = manifest_path.name.removesuffix(".json")
    DerivedDir(store.derived_path, store.store_id).save(
        name, seq=manifest["seq"], seq_hash=manifest["seq_hash"], key=manifest["key"], parts=parts
    )
    manifest = json.loads(manifest_path.read_bytes())
    manifest["format"] = fmt
    manifest_path.write_text(json.dumps(manifest))


def best_for_n10(store: LogBackend) -> list[str]:
    e = engine(store, "flat")
    try:
        return [h.note.id for h in e.ask(Query(text=text_of(10), k=1, strategy="semantic")).hits]
    finally:
        e.close()


def test_a_format_1_snapshot_is_rebuilt_not_used(tmp_path: Path) -> None:
    """A snapshot whose manifest says format 1 is refused at open and the rows rebuilt from the
    log: the note its rows wrongly ended is found again, and the snapshot the next writer saves
    (persist) is the current format. (The same doctored rows in the current format are used: the
    premise.)"""
    with LogBackend(tmp_path / "s", durability="nosync") as store:
        e = engine(store, "flat")
        e.ingest_many([Note(id=f"n{i}", text=text_of(i), timestamp=1000.0 + i) for i in range(40)])
        e.persist()
        e.close()
        resave_with_n10_ended(store, FORMAT)
        assert best_for_n10(store) != ["n10"], "premise: the doctored rows hide n10 when used"
        resave_with_n10_ended(store, 1)
        assert best_for_n10(store) == ["n10"]
        writer = engine(store, "flat")
        writer.structures()
        assert writer.persist() == 1
        (manifest_path,) = Path(store.derived_path).glob("*.json")
        assert json.loads(manifest_path.read_bytes())["format"] == FORMAT


# -- verify while another process writes --------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_derived_merge import engine, text_of
    from coniti import Note
    from coniti.impl.log import LogBackend
    stop = Path({stop!r})
    with LogBackend({path!r}, durability="nosync") as store:
        e = engine(store, "flat")
        print("ready", flush=True)
        i = 0
        while not stop.exists() and i < 20000:
            e.ingest(Note(id=f"w{{i}}", text=text_of(i) + " w", timestamp=2000.0 - i))
            if i % 5 == 0:
                e.persist()
            i += 1
""")


def test_verify_while_another_process_writes_and_saves_is_clean(tmp_path: Path) -> None:
    """While another process ingests (each note before the stored rows) and saves snapshots,
    every verify() is clean: the loaded rows, the snapshot and the fresh fold are compared at one
    event (the fold read the events written after the refresh, and reported them)."""
    path, stop = tmp_path / "s", tmp_path / "stop"
    with LogBackend(path, durability="nosync") as store:
        e = engine(store, "flat")
        e.ingest_many([Note(id=f"n{i}", text=text_of(i), timestamp=1000.0 + i) for i in range(40)])
        e.persist()
        code = WRITER.format(tests=str(Path(__file__).parent), stop=str(stop), path=str(path))
        writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
            reports = [e.verify() for _ in range(6)]
        finally:
            stop.touch()
            assert writer.wait(timeout=120) == 0
        assert len({r.seq for r in reports}) > 1, "premise: the writer wrote during the verifies"
        assert [r.problems for r in reports if not r.ok] == []
