"""The filter selects candidates before scoring (coniti.engine.where): a filtered semantic ask over
a prefix equals the unfiltered full ranking with the non-matching notes removed, and reads only the
records of the hits it answers once the namespace's metadata column is made."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.embedding import LocalHashEmbedder
from coniti.impl.log import LogBackend
from coniti.memory import GetRequest, GetResult
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "kitchen", "holiday", "review", "plan", "garden"]
VALUES = st.sampled_from(["a", "b", 1, 1.0, 2, True, None])


class Reads(LogBackend):
    """A log backend that counts the records its ``get`` returns (the real backend underneath)."""

    read = 0

    def get(self, request: GetRequest) -> GetResult:
        result = super().get(request)
        self.read += len(result.records)
        return result


def engine(path: Path, structure: str = "flat") -> ContinuityEngine:
    first = FlatStructure() if structure == "flat" else SegmentTreeStructure(leaf_size=2)
    return ContinuityEngine(Reads(path), EMBEDDER, [first], DefaultStrategy())


def notes(data: st.DataObject, count: int, start: int) -> list[Note]:
    return [
        Note(
            id=f"n{start + i:03}",
            text=" ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
            + f" {start + i}",
            timestamp=float(data.draw(st.integers(0, 50))),
            metadata={"user": data.draw(VALUES), "tag": data.draw(st.sampled_from(["x", "y"]))},
        )
        for i in range(count)
    ]


def expected(
    e: ContinuityEngine, query: Query, keep: object
) -> list[tuple[tuple[str, ...], str, float]]:
    full = e.ask(query.model_copy(update={"k": 10_000, "filter": None}), prefix=()).hits
    kept = [h for h in full if keep(h.note.metadata)]  # type: ignore[operator]
    return [(h.namespace, h.note.id, h.score) for h in kept][: query.k]


def answered(e: ContinuityEngine, query: Query) -> list[tuple[tuple[str, ...], str, float]]:
    return [(h.namespace, h.note.id, h.score) for h in e.ask(query, prefix=()).hits]


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_filtered_prefix_ask_equals_filtering_the_full_ranking(
    tmp_path_factory: object, data: st.DataObject
) -> None:
    """Over several namespaces, with an equality filter on a scalar (numbers equal by value, a bool
    not a number, null), an ``$in`` filter, or a time range too, and after writes (a new note, an
    update of a note's metadata, a delete) between asks: the hits (namespace, id, score) are those of
    the full unfiltered ranking that match, in its order, cut to k."""
    path = tmp_path_factory.mktemp("where")  # type: ignore[attr-defined]
    e = engine(path, data.draw(st.sampled_from(["flat", "segment_tree"])))
    spaces = [("a", "one"), ("a", "two"), ("b",)]
    n = 0
    ids: dict[tuple[str, ...], list[str]] = {}
    for ns in spaces:
        batch = notes(data, data.draw(st.integers(1, 8)), n)
        n += len(batch)
        e.ingest_many(batch, namespace=ns)
        ids[ns] = [b.id for b in batch]
    for _ in range(3):
        value = data.draw(VALUES)
        k = data.draw(st.integers(1, 6))
        window = data.draw(st.sampled_from([None, TimeRange(start=10.0, end=40.0)]))
        if data.draw(st.booleans()):
            flt: dict[str, object] = {"user": value}
        else:
            flt = {"user": {"$in": [value, "b"]}}
        query = Query(
            text=data.draw(st.sampled_from(WORDS)),
            k=k,
            strategy="semantic",
            filter=flt,
            time_range=window,
        )

        def keep(meta: dict[str, object], flt: dict[str, object] = flt, w: object = window) -> bool:
            from coniti.filters import compile_filter

            return compile_filter(flt)(meta)

        want = expected(e, query, keep)
        if window is not None:  # the full ranking of the windowed query, filtered
            full = e.ask(query.model_copy(update={"k": 10_000, "filter": None}), prefix=()).hits
            want = [(h.namespace, h.note.id, h.score) for h in full if keep(h.note.metadata)][:k]
        assert answered(e, query) == want
        ns = data.draw(st.sampled_from(spaces))  # then a write the next ask must see
        action = data.draw(st.sampled_from(["ingest", "update", "delete"]))
        live = ids[ns]
        if action == "ingest" or not live:
            batch = notes(data, 1, n)
            n += 1
            e.ingest_many(batch, namespace=ns)
            live += [b.id for b in batch]
        elif action == "update":
            e.update(live[0], metadata={"user": data.draw(VALUES), "tag": "x"}, namespace=ns)
        else:
            e.remove([live.pop(0)], namespace=ns)


def test_a_filtered_prefix_ask_reads_only_its_hits_once_the_column_is_made(tmp_path: Path) -> None:
    """After the first filtered ask made each namespace's metadata column, a filtered ask over the
    prefix reads from memory only the records of the notes it ranks first (k of them), not the
    records of every candidate its filter turns away."""
    e = engine(tmp_path)
    memory = e.memory
    assert isinstance(memory, Reads)
    for j in range(3):
        e.ingest_many(
            [
                Note(
                    id=f"n{j}-{i}",
                    text=f"budget plan {i} {j}",
                    timestamp=float(i),
                    metadata={"user": f"u{i % 20}"},
                )
                for i in range(200)
            ],
            namespace=("s", str(j)),
        )
    e.ask(Query(text="budget", k=5, strategy="semantic", filter={"user": "u0"}), prefix=())
    memory.read = 0
    hits = e.ask(
        Query(text="budget plan", k=5, strategy="semantic", filter={"user": "u7"}), prefix=()
    ).hits
    assert len(hits) == 5 and all(h.note.metadata["user"] == "u7" for h in hits)
    assert memory.read <= 3 * 5


def test_a_kind_filter_selects_candidates_by_kind(tmp_path: Path) -> None:
    """A ``$kind`` filter over a prefix answers the notes of that kind (the candidate step reads each
    note's kind beside its metadata), as the full ranking filtered by kind."""
    e = engine(tmp_path / "s")
    for ns in (("a",), ("b",)):
        e.ingest_many([Note(id=f"{ns[0]}{i}", text=f"budget plan {i}", timestamp=float(i),
                            kind="fact" if i % 2 else None) for i in range(12)], namespace=ns)  # fmt: skip
    query = Query(text="budget plan", k=5, strategy="semantic", filter={"$kind": "fact"})
    full = e.ask(query.model_copy(update={"k": 100, "filter": None}), prefix=()).hits
    want = [(h.namespace, h.note.id) for h in full if h.note.kind == "fact"][:5]
    got = e.ask(query, prefix=()).hits
    assert [(h.namespace, h.note.id) for h in got] == want and want


def test_prefix_hits_carry_their_relevance(tmp_path: Path) -> None:
    """A semantic ask over a prefix, filtered or not, gives each hit its relevance (the cosine)."""
    e = engine(tmp_path / "s")
    for ns in (("a",), ("b",)):
        e.ingest_many([Note(id=f"{ns[0]}{i}", text=f"garden review {i}", timestamp=float(i),
                            metadata={"user": i % 2}) for i in range(6)], namespace=ns)  # fmt: skip
    for where in (None, {"user": 1}):
        hits = e.ask(Query(text="garden", k=4, strategy="semantic", filter=where), prefix=()).hits
        assert hits and all(h.relevance is not None and 0 <= h.relevance <= 1 for h in hits)


def test_a_long_notes_passages_count_in_a_filtered_prefix_ask(tmp_path: Path) -> None:
    """With an embedder that splits long notes into passages (minilm), a filtered semantic ask over
    a prefix ranks a long note by its best passage, as the unfiltered ranking does: the note whose
    answer sits past the first passage is found with the filter too."""
    from coniti.minilm import MiniLMEmbedder

    e = ContinuityEngine(Reads(tmp_path / "s"), MiniLMEmbedder(), [FlatStructure()], DefaultStrategy())
    filler = " ".join(f"Meeting notes item {i} about the quarterly logistics schedule." for i in range(60))
    long = Note(id="long", text=filler + " Ada's favourite fruit is the mango.", timestamp=1.0,
                metadata={"user": "ada"})  # fmt: skip
    others = [Note(id=f"o{i}", text=f"Shipping forms for warehouse {i}.", timestamp=2.0,
                   metadata={"user": "ada"}) for i in range(5)]  # fmt: skip
    e.ingest_many([long, *others], namespace=("a",))
    e.ingest_many([Note(id="x", text="Bob likes apples.", timestamp=1.0, metadata={"user": "bob"})], namespace=("b",))
    query = Query(text="Which fruit does Ada like?", k=3, strategy="semantic")
    full = [h for h in e.ask(query, prefix=()).hits if h.note.metadata.get("user") == "ada"]
    filtered = e.ask(query.model_copy(update={"filter": {"user": "ada"}}), prefix=()).hits
    assert full and full[0].note.id == "long"
    assert [(h.note.id, h.score) for h in filtered][: len(full)] == [(h.note.id, h.score) for h in full]


def test_a_postings_kept_row_numbers_are_read_again_once_the_rows_move() -> None:
    """The metadata column keeps a posting's row numbers beside it; once the rows move under it (rows
    added before the newest, merged from the buffer; a row removed), the rows it answers are those the
    structure holds now, as ``rows_among`` of the posting gives them."""
    import numpy as np

    from coniti.engine.where import MetadataColumn
    from coniti.filters import compile_filter

    rng = np.random.default_rng(3)
    s = FlatStructure(buffer_min=4)
    ids = [f"n{i:02}" for i in range(12)]
    s.add(ids, rng.standard_normal((12, 8)), np.arange(12, dtype=np.float64) * 10)
    users = {i: {"user": "u7" if n % 3 == 0 else "u1"} for n, i in enumerate(ids)}
    column = MetadataColumn(1, users)
    spec = {"user": "u7"}
    match = compile_filter(spec)

    def same(got: tuple[list[str], np.ndarray, np.ndarray]) -> bool:
        want = s.rows_among(column.posting("user", "u7"))
        same_rows = np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])
        return got[0] == want[0] and same_rows

    assert same(column.rows(spec, match, s))
    s.add([f"m{i}" for i in range(6)], rng.standard_normal((6, 8)), np.arange(6) + 0.5)  # merged in
    assert same(column.rows(spec, match, s))
    s.remove(["n03"], seq=5)
    got = column.rows(spec, match, s)
    assert same(got) and "n03" not in got[0]
