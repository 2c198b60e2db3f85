#!/usr/bin/env python3
"""Recall on a labelled set: recall@1, recall@5 and MRR per embedder and strategy, scoped and
unscoped.

Usage (from the repository root)::

    .venv/bin/python tools/bench_recall.py                                # local_hash
    .venv/bin/python tools/bench_recall.py --embedders local_hash,minilm --json recall.json
    .venv/bin/python tools/bench_recall.py --strategies keyword,hybrid --limit-questions 10 --memory log

The set (``tools/data/recall/``, see its README) holds notes about several people and projects in
namespaces such as ``("alice", "work")`` and ``("team", "atlas")``, and questions, each with the ids of
the notes that answer it, a scope (``{"namespace": [...]}`` or ``{"prefix": [...]}``, ``[]`` = all),
an optional metadata filter (``coniti.filters``) and tags (``paraphrase``:
little word overlap with the answer; ``literal``: codes, ids and rare names; ``prefix``; ``filter``).

For each embedder the notes go into a fresh ``Container(embedding=name, memory=...)`` through the
public API, one ``engine.ingest_many`` per namespace. Every question is then asked with each
strategy of ``--strategies`` (``Query(strategy=...)``: ``semantic``, ``keyword`` and ``hybrid`` by
default; ``auto`` is ``hybrid`` for these text questions), twice:

* **scoped**: within the question's scope (``engine.ask(query, namespace=...)`` or
  ``prefix=...``), with its filter (``Query(filter=...)``);
* **unscoped**: across every namespace of the set (``prefix=()``), without the filter.

A question's rank is the position (1-based) of the first answer id among the top ``K`` = 10 hits.
recall@1 and recall@5 are the fractions of questions ranked at most 1 and 5; MRR is the mean of
1/rank (0 when no answer is in the top 10). Figures are given for every tag slice and overall.

Throughput: **embed** is texts/s of one ``embedder.embed`` call over every note text (after the
ingest, so a model is loaded and warm); **ingest** is notes/s of the ``ingest_many`` calls
(embedding, admission, structures and the memory write); **ask** is the median ms of a scoped ask
per strategy.

An embedder that is not registered is skipped with a message; one that is registered but fails to
build (``minilm`` without its model package) is reported and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coniti import Container, ContinuityEngine, Note, Query  # noqa: E402
from coniti.embedding import EMBEDDERS  # noqa: E402
from coniti.filters import compile_filter  # noqa: E402

DATA = ROOT / "tools" / "data" / "recall"
K = 10
STRATEGIES = ("semantic", "keyword", "hybrid")
"""The strategies asked by default (``--strategies``)."""

STOPWORDS = frozenset(
    """
    a an the and or but of to in on at by for with from as into onto about over under after before
    is are was were be been being am do does did done has have had having will would shall should
    can could may might must i me my we our you your he him his she her it its they them their this
    that these those there here what which who whom whose when where why how not no s t than then
    so if up out off too very just also any all each every some such only own same other
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Words left out of the overlap measure (:func:`content_words`)."""

_WORD = re.compile(r"\w+")


class SetError(ValueError):
    """The recall set is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Question:
    """One labelled question. ``prefix`` is True for a prefix scope, False for one namespace."""

    id: str
    text: str
    answer: tuple[str, ...]
    scope: tuple[str, ...]
    prefix: bool
    filter: dict[str, Any]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class RecallSet:
    """Notes by namespace (in file order) and questions."""

    notes: dict[tuple[str, ...], list[Note]]
    questions: list[Question]

    @property
    def namespaces(self) -> list[tuple[str, ...]]:
        return list(self.notes)

    def in_scope(self, question: Question) -> list[tuple[str, ...]]:
        """The namespaces a question's scope covers."""
        if not question.prefix:
            return [question.scope]
        n = len(question.scope)
        return [ns for ns in self.notes if ns[:n] == question.scope]

    def counts(self) -> dict[str, Any]:
        """Notes, namespaces, questions and questions per tag."""
        tags: dict[str, int] = {}
        for q in self.questions:
            for tag in q.tags:
                tags[tag] = tags.get(tag, 0) + 1
        return {
            "notes": sum(len(v) for v in self.notes.values()),
            "namespaces": len(self.notes),
            "questions": len(self.questions),
            "tags": dict(sorted(tags.items())),
        }


def content_words(text: str) -> set[str]:
    """Lowercased word tokens of ``text`` minus :data:`STOPWORDS`."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the content words of two texts (0.0 when both have none)."""
    x, y = content_words(a), content_words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def matches(metadata: dict[str, Any], filter: dict[str, Any]) -> bool:
    """True when ``metadata`` matches ``filter`` (the engine's filter language, coniti.filters)."""
    return compile_filter(filter)(metadata)


# -- loading -------------------------------------------------------------------------------------


def _lines(path: Path, required: set[str]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) for each non-blank line, which must be an object with ``required``."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SetError(f"{where}: invalid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise SetError(f"{where}: expected an object")
            missing = required - set(row)
            if missing:
                raise SetError(f"{where}: missing {', '.join(sorted(missing))}")
            yield where, row


def _strings(value: Any, where: str, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SetError(f"{where}: {field} must be a list of non-empty strings")
    return tuple(value)


def load_set(directory: Path = DATA) -> RecallSet:
    """Read ``notes.jsonl`` and ``questions.jsonl`` from ``directory``.

    Raises :class:`SetError` naming the file and line for invalid JSON, a missing or mistyped field,
    a repeated id or note text, an answer id that is not a note, a scope that covers no namespace,
    an answer outside its question's scope, or an answer that does not match the question's filter.
    """
    notes: dict[tuple[str, ...], list[Note]] = {}
    where_is: dict[str, tuple[tuple[str, ...], Note]] = {}
    texts: set[str] = set()
    for where, row in _lines(directory / "notes.jsonl", {"id", "text", "timestamp", "metadata", "namespace"}):
        ns = _strings(row["namespace"], where, "namespace")
        try:
            note = Note(
                id=row["id"], text=row["text"], timestamp=row["timestamp"], metadata=row["metadata"]
            )
        except ValueError as exc:
            raise SetError(f"{where}: {exc}") from None
        if note.id in where_is:
            raise SetError(f"{where}: note id {note.id!r} repeats")
        if note.text in texts:
            raise SetError(f"{where}: note {note.id!r} repeats the text of another note")
        texts.add(note.text)
        where_is[note.id] = (ns, note)
        notes.setdefault(ns, []).append(note)
    recall_set = RecallSet(notes=notes, questions=[])
    seen: set[str] = set()
    for where, row in _lines(directory / "questions.jsonl", {"id", "question", "answer", "scope", "tags"}):
        if not isinstance(row["id"], str) or row["id"] in seen:
            raise SetError(f"{where}: question id {row['id']!r} is not a string or repeats")
        seen.add(row["id"])
        scope = row["scope"]
        if not isinstance(scope, dict) or len(scope) != 1 or set(scope) - {"namespace", "prefix"}:
            raise SetError(f"{where}: scope must be {{'namespace': [...]}} or {{'prefix': [...]}}")
        is_prefix = "prefix" in scope
        value = scope["prefix" if is_prefix else "namespace"]
        path = () if is_prefix and value == [] else _strings(value, where, "scope")
        filter = row.get("filter", {})
        if not isinstance(filter, dict):
            raise SetError(f"{where}: filter must be an object")
        if not isinstance(row["question"], str) or not row["question"].strip():
            raise SetError(f"{where}: question must be a non-empty string")
        question = Question(
            id=row["id"],
            text=row["question"],
            answer=_strings(row["answer"], where, "answer"),
            scope=path,
            prefix=is_prefix,
            filter=filter,
            tags=_strings(row["tags"], where, "tags"),
        )
        covered = recall_set.in_scope(question)
        if not covered or covered[0] not in notes:
            raise SetError(f"{where}: scope {scope} covers no namespace of the notes")
        for id_ in question.answer:
            if id_ not in where_is:
                raise SetError(f"{where}: answer {id_!r} is not a note id")
            ns, note = where_is[id_]
            if ns not in covered:
                raise SetError(f"{where}: answer {id_!r} is in {list(ns)}, outside scope {scope}")
            if not matches(note.metadata, filter):
                raise SetError(f"{where}: answer {id_!r} does not match filter {filter}")
        recall_set.questions.append(question)
    return recall_set


# -- asking --------------------------------------------------------------------------------------


def search(
    engine: ContinuityEngine,
    text: str,
    namespace: tuple[str, ...] | None,
    prefix: tuple[str, ...] | None,
    filter: dict[str, Any],
    strategy: str = "auto",
) -> list[str]:
    """The ids of the top :data:`K` hits for ``text`` in ``namespace``, or over every namespace under
    ``prefix``, keeping only notes that match ``filter`` (the engine's own scope and filter), ranked
    by ``strategy``."""
    query = Query(text=text, k=K, filter=filter or None, strategy=strategy)  # type: ignore[arg-type]
    if prefix is not None:
        return [h.note.id for h in engine.ask(query, prefix=prefix).hits]
    return [h.note.id for h in engine.ask(query, namespace=namespace or ()).hits]


def rank(ids: Sequence[str], answer: Sequence[str]) -> int | None:
    """The 1-based position of the first answer id in ``ids``, or None."""
    for position, id_ in enumerate(ids, 1):
        if id_ in answer:
            return position
    return None


def scores(ranks: Sequence[int | None]) -> dict[str, float | int]:
    """``n``, ``recall@1``, ``recall@5`` and ``mrr`` of a list of ranks."""
    n = len(ranks)
    if n == 0:
        return {"n": 0, "recall@1": 0.0, "recall@5": 0.0, "mrr": 0.0}
    return {
        "n": n,
        "recall@1": sum(r == 1 for r in ranks) / n,
        "recall@5": sum(r is not None and r <= 5 for r in ranks) / n,
        "mrr": sum(1.0 / r for r in ranks if r is not None) / n,
    }


def slices(questions: Sequence[Question], ranks: Sequence[int | None]) -> dict[str, dict[str, Any]]:
    """:func:`scores` overall (``all``) and per tag."""
    out = {"all": scores(ranks)}
    for tag in sorted({t for q in questions for t in q.tags}):
        out[tag] = scores([r for q, r in zip(questions, ranks, strict=True) if tag in q.tags])
    return out


def run_embedder(
    name: str,
    recall_set: RecallSet,
    questions: Sequence[Question],
    memory: str,
    workdir: Path,
    strategies: Sequence[str] = STRATEGIES,
) -> dict[str, Any]:
    """Ingest the set under embedder ``name``, ask every question scoped and unscoped with each
    strategy."""
    options: dict[str, Any] = {"path": workdir / name} if memory == "log" else {}
    with Container(memory=memory, embedding=name, **options) as container:
        engine = container.engine
        start = time.perf_counter()
        for ns, notes in recall_set.notes.items():
            engine.ingest_many(notes, namespace=ns)
        ingest_s = time.perf_counter() - start
        texts = [n.text for notes in recall_set.notes.values() for n in notes]
        start = time.perf_counter()
        container.embedder.embed(texts)
        embed_s = time.perf_counter() - start
        by_strategy = {
            strategy: _ask_all(engine, questions, strategy) for strategy in strategies
        }
        return {
            "spec_id": container.embedder.spec_id,
            "throughput": {
                "embed_texts_per_s": len(texts) / embed_s,
                "ingest_notes_per_s": len(texts) / ingest_s,
            },
            "strategies": by_strategy,
        }


def _ask_all(engine: ContinuityEngine, questions: Sequence[Question], strategy: str) -> dict[str, Any]:
    """Every question scoped and unscoped under ``strategy``: slices, ranks and ask latency."""
    scoped: list[int | None] = []
    unscoped: list[int | None] = []
    ask_ms: list[float] = []
    for q in questions:
        start = time.perf_counter()
        ids = search(
            engine, q.text, None if q.prefix else q.scope, q.scope if q.prefix else None, q.filter,
            strategy,
        )
        ask_ms.append((time.perf_counter() - start) * 1000.0)
        scoped.append(rank(ids, q.answer))
        ids = search(engine, q.text, None, (), {}, strategy)
        unscoped.append(rank(ids, q.answer))
    return {
        "ask_ms_median": statistics.median(ask_ms) if ask_ms else 0.0,
        "scoped": slices(questions, scoped),
        "unscoped": slices(questions, unscoped),
        "questions": [
            {"id": q.id, "scoped_rank": s, "unscoped_rank": u}
            for q, s, u in zip(questions, scoped, unscoped, strict=True)
        ],
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    """The figures as a plain Markdown table, then the throughput lines."""
    lines = [
        "| embedder | strategy | mode | slice | n | recall@1 | recall@5 | MRR |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for name, result in results.items():
        for strategy, figures in result["strategies"].items():
            for mode in ("scoped", "unscoped"):
                for label, s in figures[mode].items():
                    lines.append(
                        f"| {name} | {strategy} | {mode} | {label} | {s['n']} | {s['recall@1']:.3f} "
                        f"| {s['recall@5']:.3f} | {s['mrr']:.3f} |"
                    )
    lines.append("")
    for name, result in results.items():
        t = result["throughput"]
        asks = ", ".join(
            f"{strategy} {figures['ask_ms_median']:.2f} ms" for strategy, figures in result["strategies"].items()
        )
        lines.append(
            f"{name} ({result['spec_id']}): embed {t['embed_texts_per_s']:,.0f} texts/s, "
            f"ingest {t['ingest_notes_per_s']:,.0f} notes/s, scoped ask median: {asks}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", default="local_hash", help="comma-separated names")
    parser.add_argument("--data", type=Path, default=DATA, help="directory of the set")
    parser.add_argument("--memory", choices=("in_memory", "log"), default="in_memory")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="comma-separated Query.strategy names (default: %(default)s)")  # fmt: skip
    parser.add_argument("--limit-questions", type=int, default=None, metavar="N",
                        help="ask only the first N questions")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write figures here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    if not names:
        parser.error("--embedders names no embedder")
    if args.limit_questions is not None and args.limit_questions < 1:
        parser.error("--limit-questions must be at least 1")
    strategies = [n.strip() for n in args.strategies.split(",") if n.strip()]
    known = ("auto", "semantic", "keyword", "hybrid", "recent")
    if not strategies or any(n not in known for n in strategies):
        parser.error(f"--strategies must name some of {', '.join(known)}")
    try:
        recall_set = load_set(args.data)
    except (OSError, SetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    questions = recall_set.questions[: args.limit_questions]
    command = shlex.join(sys.orig_argv if argv is None else ["tools/bench_recall.py", *argv])
    counts = recall_set.counts()
    print(f"command: {command}")
    print(
        f"set: {counts['notes']} notes in {counts['namespaces']} namespaces, "
        f"{counts['questions']} questions (asked: {len(questions)}); tags: "
        + ", ".join(f"{t} {n}" for t, n in counts["tags"].items())
    )
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    failed = False
    registered = set(EMBEDDERS.names())
    with tempfile.TemporaryDirectory(prefix="bench_recall_") as tmp:
        for name in names:
            if name not in registered:
                skipped[name] = f"not registered (registered: {', '.join(sorted(registered))})"
                print(f"skipping embedder {name!r}: {skipped[name]}", file=sys.stderr)
                continue
            try:
                results[name] = run_embedder(
                    name, recall_set, questions, args.memory, Path(tmp), strategies
                )
            except Exception as exc:  # a registered embedder that cannot run (missing model, ...)
                skipped[name] = f"failed: {type(exc).__name__}: {exc}"
                print(f"embedder {name!r} {skipped[name]}", file=sys.stderr)
                failed = True
    print(table(results))
    if args.json is not None:
        report = {
            "command": command,
            "set": {**counts, "asked": len(questions)},
            "k": K,
            "memory": args.memory,
            "results": results,
            "skipped": skipped,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
