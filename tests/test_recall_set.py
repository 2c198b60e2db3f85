"""The labelled recall set (tools/data/recall/) keeps its rules, and tools/bench_recall.py runs on it.

The set's rules are read from the raw JSONL here, independently of the benchmark's loader; the
loader's own refusals are tested on small broken copies. No test here asserts a recall figure or a
time.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from coniti import Container, Note

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tools" / "data" / "recall"
BENCH = ROOT / "tools" / "bench_recall.py"

MAX_JACCARD = 0.3
"""No paraphrase question shares more than this Jaccard of content words with an answer note."""
MEAN_JACCARD = 0.12
"""The mean over paraphrase questions stays below this."""


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_recall", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_recall"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _rows(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


NOTES = _rows("notes.jsonl")
QUESTIONS = _rows("questions.jsonl")
NOTE = {n["id"]: n for n in NOTES}
NAMESPACES = {tuple(n["namespace"]) for n in NOTES}


def _covered(scope: dict[str, list[str]]) -> set[tuple[str, ...]]:
    if "namespace" in scope:
        return {tuple(scope["namespace"])} & NAMESPACES
    prefix = tuple(scope["prefix"])
    return {ns for ns in NAMESPACES if ns[: len(prefix)] == prefix}


def _paraphrase_overlaps() -> list[tuple[float, str]]:
    """(highest Jaccard with any answer note, question id) for every paraphrase question."""
    return [
        (max(bench.jaccard(q["question"], NOTE[a]["text"]) for a in q["answer"]), q["id"])
        for q in QUESTIONS
        if "paraphrase" in q["tags"]
    ]


# -- the set's rules -----------------------------------------------------------------------------


def test_the_set_has_enough_notes_questions_and_literal_questions() -> None:
    """At least 300 notes, 120 questions and 25 questions tagged literal."""
    assert len(NOTES) >= 300
    assert len(QUESTIONS) >= 120
    assert sum("literal" in q["tags"] for q in QUESTIONS) >= 25


def test_prefix_and_filter_questions_are_present() -> None:
    """At least 10 questions use a prefix scope and at least 10 a metadata filter."""
    assert sum("prefix" in q["scope"] for q in QUESTIONS) >= 10
    assert sum("filter" in q for q in QUESTIONS) >= 10


def test_note_ids_are_unique() -> None:
    """No two notes share an id."""
    assert [i for i, c in Counter(n["id"] for n in NOTES).items() if c > 1] == []


def test_note_texts_are_unique() -> None:
    """No two notes share a text."""
    assert [t for t, c in Counter(n["text"] for n in NOTES).items() if c > 1] == []


def test_question_ids_are_unique() -> None:
    """No two questions share an id."""
    assert [i for i, c in Counter(q["id"] for q in QUESTIONS).items() if c > 1] == []


def test_every_note_is_a_valid_note_of_2025() -> None:
    """Each note has exactly id, text, timestamp, metadata and namespace; Note accepts it; its
    timestamp falls in 2025; its metadata names a kind, a topic and a source."""
    start = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    end = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    kinds = {"fact", "preference", "event", "task", "decision"}
    for n in NOTES:
        assert set(n) == {"id", "text", "timestamp", "metadata", "namespace"}, n["id"]
        Note(id=n["id"], text=n["text"], timestamp=n["timestamp"], metadata=n["metadata"])
        assert start <= n["timestamp"] < end, n["id"]
        assert n["metadata"]["kind"] in kinds, n["id"]
        assert set(n["metadata"]) == {"kind", "topic", "source"}, n["id"]


def test_namespaces_are_people_with_two_or_three_parts_and_team_projects() -> None:
    """At least four people each have two or three sub-namespaces; at least three team projects."""
    parts: dict[str, set[str]] = {}
    for first, second in NAMESPACES:
        parts.setdefault(first, set()).add(second)
    teams = parts.pop("team")
    assert len(teams) >= 3
    assert len(parts) >= 4
    assert all(2 <= len(subs) <= 3 for subs in parts.values()), parts


def test_every_answer_is_a_note() -> None:
    """Every id in an answer list is a note id."""
    assert [(q["id"], a) for q in QUESTIONS for a in q["answer"] if a not in NOTE] == []


def test_every_scope_covers_an_existing_namespace() -> None:
    """A namespace scope names a namespace of the notes; a prefix scope covers at least one."""
    assert [q["id"] for q in QUESTIONS if not _covered(q["scope"])] == []


def test_every_answer_lies_within_its_scope() -> None:
    """Each answer note's namespace is covered by its question's scope."""
    outside = [
        (q["id"], a)
        for q in QUESTIONS
        for a in q["answer"]
        if tuple(NOTE[a]["namespace"]) not in _covered(q["scope"])
    ]
    assert outside == []


def test_every_answer_matches_its_filter() -> None:
    """Each answer note's metadata has every key-value pair of its question's filter."""
    bad = [
        (q["id"], a)
        for q in QUESTIONS
        for a in q["answer"]
        if any(NOTE[a]["metadata"].get(k) != v for k, v in q.get("filter", {}).items())
    ]
    assert bad == []


def test_filters_leave_out_other_notes_of_the_scope() -> None:
    """Every filter excludes at least one note of its scope, so it changes what can be returned."""
    idle = [
        q["id"]
        for q in QUESTIONS
        if "filter" in q
        and all(
            all(n["metadata"].get(k) == v for k, v in q["filter"].items())
            for n in NOTES
            if tuple(n["namespace"]) in _covered(q["scope"])
        )
    ]
    assert idle == []


def test_tags_say_the_kind_of_question_and_its_scope_and_filter() -> None:
    """Each question is tagged exactly one of paraphrase or literal; `prefix` iff its scope is a
    prefix; `filter` iff it has a filter."""
    for q in QUESTIONS:
        tags = set(q["tags"])
        assert len(tags & {"paraphrase", "literal"}) == 1, q["id"]
        assert ("prefix" in tags) == ("prefix" in q["scope"]), q["id"]
        assert ("filter" in tags) == ("filter" in q), q["id"]


def test_no_paraphrase_question_overlaps_much_with_its_answer() -> None:
    """No paraphrase question's content-word Jaccard with any of its answer notes exceeds 0.3."""
    assert [(round(j, 3), i) for j, i in _paraphrase_overlaps() if j > MAX_JACCARD] == []


def test_paraphrase_overlap_is_low_on_average() -> None:
    """The mean content-word Jaccard of paraphrase questions with their answers is below 0.12."""
    assert statistics.mean(j for j, _ in _paraphrase_overlaps()) < MEAN_JACCARD


def test_content_words_are_lowercased_tokens_without_stopwords() -> None:
    """content_words lowercases, splits on non-word characters and drops stopwords."""
    assert bench.content_words("Where does Alice's cat, Pistache, sleep?") == {
        "alice", "cat", "pistache", "sleep",
    }  # fmt: skip


# -- the benchmark's loader --------------------------------------------------------------------


def test_loader_reads_the_whole_set() -> None:
    """load_set reads every note into its namespace and every question."""
    loaded = bench.load_set(DATA)
    assert loaded.counts()["notes"] == len(NOTES)
    assert loaded.counts()["questions"] == len(QUESTIONS)
    assert set(loaded.namespaces) == NAMESPACES


def _copy_set(tmp_path: Path, notes: list[dict[str, Any]], questions: list[dict[str, Any]]) -> Path:
    for name, rows in (("notes.jsonl", notes), ("questions.jsonl", questions)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return tmp_path


def test_loader_refuses_an_answer_outside_the_scope_naming_the_line(tmp_path: Path) -> None:
    """An answer in another namespace than the question's scope is refused with file and line."""
    question = {**QUESTIONS[0], "answer": [NOTES[-1]["id"]]}
    directory = _copy_set(tmp_path, NOTES, [QUESTIONS[1], question])
    with pytest.raises(bench.SetError, match=r"questions\.jsonl:2: answer .* outside scope"):
        bench.load_set(directory)


def test_loader_refuses_a_repeated_note_text_naming_the_line(tmp_path: Path) -> None:
    """A note repeating another's text is refused with file and line."""
    copy = {**NOTES[0], "id": "copy"}
    directory = _copy_set(tmp_path, [NOTES[0], copy], [])
    with pytest.raises(bench.SetError, match=r"notes\.jsonl:2: note 'copy' repeats the text"):
        bench.load_set(directory)


def test_loader_refuses_an_answer_that_fails_the_filter(tmp_path: Path) -> None:
    """An answer whose metadata does not match the question's filter is refused."""
    question = {**QUESTIONS[0], "filter": {"kind": "no-such-kind"}}
    directory = _copy_set(tmp_path, NOTES, [question])
    with pytest.raises(bench.SetError, match=r"questions\.jsonl:1: answer .* does not match filter"):
        bench.load_set(directory)


# -- the search --------------------------------------------------------------------------------


def _small_set() -> Any:
    notes = {
        ("p", "a"): [Note(id="a1", text="red apples in the orchard", timestamp=1.0,
                          metadata={"kind": "fact"})],
        ("p", "b"): [Note(id="b1", text="red apples for the pie", timestamp=2.0,
                          metadata={"kind": "preference"}),
                     Note(id="b2", text="blue boats on the lake", timestamp=3.0,
                          metadata={"kind": "fact"})],
    }  # fmt: skip
    return bench.RecallSet(notes=notes, questions=[])


def _search(filter: dict[str, Any]) -> list[str]:
    """bench.search over the small set under prefix ("p",)."""
    small = _small_set()
    with Container() as container:
        for ns, notes in small.notes.items():
            container.engine.ingest_many(notes, namespace=ns)
        ids: list[str] = bench.search(container.engine, "red apples orchard", None, ("p",), filter)
    return ids


def test_search_ranks_the_namespaces_of_a_prefix_together() -> None:
    """search with a prefix ranks every namespace under it in one order."""
    ids = _search({})
    assert ids[:2] == ["a1", "b1"]
    assert sorted(ids) == ["a1", "b1", "b2"]


def test_search_applies_the_filter() -> None:
    """search keeps only notes whose metadata matches the question's filter."""
    assert _search({"kind": "preference"}) == ["b1"]


def test_rank_and_scores_follow_their_definitions() -> None:
    """rank is the 1-based position of the first answer; recall@k and MRR follow from ranks."""
    assert bench.rank(["x", "y", "z"], ["z", "y"]) == 2
    assert bench.rank(["x"], ["z"]) is None
    s = bench.scores([1, 3, None, 6])
    assert s == {"n": 4, "recall@1": 0.25, "recall@5": 0.5, "mrr": (1 + 1 / 3 + 1 / 6) / 4}


# -- the benchmark, end to end -----------------------------------------------------------------


def test_bench_smoke_run_on_the_real_set_writes_every_figure(tmp_path: Path) -> None:
    """tools/bench_recall.py with local_hash and 10 questions exits 0, prints the command, the
    set's counts and the table, and writes JSON with scoped and unscoped figures per slice and
    strategy plus throughput; an unregistered embedder is skipped by name."""
    out = tmp_path / "recall.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--embedders", "local_hash,no_such_embedder",
         "--limit-questions", "10", "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "command: " in proc.stdout
    assert f"set: {len(NOTES)} notes" in proc.stdout
    assert "| local_hash | hybrid | scoped | all | 10 |" in proc.stdout
    assert "skipping embedder 'no_such_embedder': not registered" in proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report) == {"command", "set", "k", "memory", "results", "skipped"}
    assert report["set"]["asked"] == 10
    assert set(report["skipped"]) == {"no_such_embedder"}
    result = report["results"]["local_hash"]
    assert set(result["throughput"]) == {"embed_texts_per_s", "ingest_notes_per_s"}
    assert set(result["strategies"]) == {"semantic", "keyword", "hybrid"}
    for by_strategy in result["strategies"].values():
        assert by_strategy["ask_ms_median"] > 0
        for mode in ("scoped", "unscoped"):
            assert by_strategy[mode]["all"]["n"] == 10
            for figures in by_strategy[mode].values():
                assert set(figures) == {"n", "recall@1", "recall@5", "mrr"}
                assert 0.0 <= figures["recall@1"] <= figures["recall@5"] <= 1.0
        assert [q["id"] for q in by_strategy["questions"]] == [q["id"] for q in QUESTIONS[:10]]
