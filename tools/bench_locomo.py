#!/usr/bin/env python3
r"""Recall on LoCoMo conversations, scored as LoCoMo scores it, beside BM25 and cosine baselines.

Usage (from the repository root)::

    .venv/bin/python tools/bench_locomo.py --data ../shared/data/locomo-dev
    .venv/bin/python tools/bench_locomo.py --data DIR --convs 26,30 --strategies hybrid --json out.json

``--data`` is a directory of LoCoMo conversation files (``<id>.json``, each one conversation as the
authors release them in ``data/locomo10.zip`` of ``snap-research/locomo``: ``speaker_a``,
``session_N`` turn lists, ``session_N_date_time``, ``qa``). Every conversation goes into its own
namespace ``("locomo", <id>)`` of one fresh store, one note per turn through the public API:

* id: the turn's ``dia_id`` (``D3:7``); text: ``"Speaker: text"``, with a shared photo's caption
  appended as ``[shares a photo: caption]``;
* timestamp: the session's date and time (``1:56 pm on 8 May, 2023``, read as UTC) plus the turn's
  position in seconds, so turns keep their order;
* metadata: ``speaker``, ``session`` (the number) and ``turn`` (the position in the session).

Each question is asked in its conversation's namespace with ``engine.ask(Query(text=q, k=50,
strategy=s))`` for every strategy of ``--strategies``, and ranked the same way by two baselines
computed here from the same turns: **bm25** (Okapi BM25 as ``rank_bm25``'s defaults have it: k1 1.5,
b 0.75, idf floored at 0.25 of the mean idf, over lower-cased word tokens ``\w+``) and **cosine**
(plain cosine similarity of the embedder's vectors of question and turns, no index).

Scores, as the LoCoMo paper and its followers report them:

* turn **R@k**: the fraction of a question's evidence turns among the first k hits, averaged;
* session **Hit@5**: 1 when an evidence turn's session is among the first 5 distinct sessions of the
  turn ranking, averaged (the form engram-search reports);
* **MRR**: the mean of 1/rank of the first evidence turn among the 50 hits (0 when none).

Evidence ids are repaired as the data set's README says (``D8:6; D9:17`` split, ``D:11:26`` and
``D30:05`` normalised) and ids that name no turn are dropped; a question left without evidence is
not scored. Figures are given over all scored questions and per category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial).

Latency: **ingest** is turns/s of the ``ingest_many`` calls (one per session: embedding, indexing,
the memory write); **ask** is the median and 95th percentile ms of one ``engine.ask``.

**Cross-validation** (``--cv``): leave-one-conversation-out over the conversations of ``--data``,
for the parameters of the default recall (hybrid by score): the keyword index's conversation
window (``KeywordIndex(context_before, context_after, context_weight)``, :data:`CV_WINDOWS`) and
the fusion weights (``Fusion(semantic, keyword, date)``, :data:`CV_SEMANTIC`, :data:`CV_DATE`;
``keyword`` stays 1). For each window the turns are ingested once (each text embedded once over
the whole run) and every question asked once through ``engine.ask`` with ``Query(k=`` every turn
``)``, so that each hit carries its signals; the ranking of every weight setting is then
``coniti.fusion.fuse_scores`` of the candidates the default ask fuses (those within the first
``max(4k, 50)`` of either side for k = 50), the engine's own fusion, exact. For each held-out
conversation the setting with the best mean of turn R@5 and session Hit@5 over the questions of
the other conversations is chosen and scored on it; the report gives each fold, the mean of the
held-out scores (the honest figure), and the setting chosen on all conversations (the shipped
default).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coniti import Container, Note, Query  # noqa: E402
from coniti.embedding import EMBEDDERS, Embedder, EmbeddingSpec  # noqa: E402
from coniti.fusion import Fusion, fuse_scores  # noqa: E402
from coniti.hybrid import depth  # noqa: E402
from coniti.keyword import KeywordIndex, question_text  # noqa: E402

DEPTH = 50
"""Hits asked for per question (``Query.k``) and ranked by the baselines."""
STRATEGIES = ("semantic", "keyword", "hybrid", "auto")
BASELINES = ("bm25", "cosine")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_SESSION = re.compile(r"^session_(\d+)$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august", "september",
         "october", "november", "december"],
        1,
    )
}  # fmt: skip
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class DataError(ValueError):
    """A conversation file is not LoCoMo's layout; the message names the file and field."""


@dataclass(frozen=True)
class Turn:
    id: str
    session: int
    position: int
    speaker: str
    text: str
    timestamp: float


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question]
    dropped_evidence: int = 0
    unscored: int = 0

    def session_of(self) -> dict[str, int]:
        return {t.id: t.session for t in self.turns}


def session_time(text: str, where: str) -> float:
    """Epoch seconds (UTC) of a LoCoMo session date such as ``1:56 pm on 8 May, 2023``."""
    found = _DATE.match(text)
    if found is None:
        raise DataError(f"{where}: {text!r} is not a date like '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month, year = found.groups()
    month_no = _MONTHS.get(month.lower())
    if month_no is None:
        raise DataError(f"{where}: {month!r} is not a month name")
    hour_no = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month_no, int(day), hour_no, int(minute), tzinfo=UTC).timestamp()


def repair_evidence(raw: Sequence[Any]) -> list[str]:
    """Evidence ids split on ``;`` and normalised to ``D<session>:<turn>`` (``D:11:26`` ->
    ``D11:26``, ``D30:05`` -> ``D30:5``)."""
    out: list[str] = []
    for item in raw:
        for part in str(item).split(";"):
            found = _EVIDENCE.search(part.strip())
            if found is not None:
                out.append(f"D{int(found.group(1))}:{int(found.group(2))}")
    return out


def load_conversation(path: Path) -> Conversation:
    """One LoCoMo conversation file: turns in order, questions with repaired evidence."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a JSON object")
    body = data.get("conversation", data)
    if not isinstance(body, dict):
        raise DataError(f"{path}: 'conversation' is not an object")
    sessions = sorted(int(m.group(1)) for k in body if (m := _SESSION.match(k)))
    turns: list[Turn] = []
    for number in sessions:
        items = body[f"session_{number}"]
        if not items:
            continue
        start = session_time(
            str(body.get(f"session_{number}_date_time")), f"{path}: session_{number}_date_time"
        )
        for position, item in enumerate(items):
            text = str(item["text"])
            if item.get("blip_caption"):
                text = f"{text} [shares a photo: {item['blip_caption']}]"
            turns.append(
                Turn(
                    id=str(item["dia_id"]), session=number, position=position,
                    speaker=str(item["speaker"]), text=text, timestamp=start + position,
                )
            )  # fmt: skip
    known = {t.id for t in turns}
    conversation = Conversation(id=path.stem, turns=turns, questions=[])
    for qa in data.get("qa", []):
        evidence = repair_evidence(qa.get("evidence", []))
        kept = tuple(dict.fromkeys(e for e in evidence if e in known))
        conversation.dropped_evidence += len(evidence) - len(kept)
        if not kept:
            conversation.unscored += 1
            continue
        conversation.questions.append(Question(str(qa["question"]), int(qa["category"]), kept))
    return conversation


def load(data: Path, convs: Sequence[str] | None) -> list[Conversation]:
    """The conversations of ``data`` (all ``*.json`` files, or those named by ``convs``)."""
    if not data.is_dir():
        raise DataError(f"--data {data}: not a directory")
    paths = sorted(data.glob("*.json"))
    if convs:
        by_name = {p.stem: p for p in paths}
        missing = [c for c in convs if c not in by_name]
        if missing:
            raise DataError(f"--convs: no file for {', '.join(missing)} in {data}")
        paths = [by_name[c] for c in convs]
    if not paths:
        raise DataError(f"--data {data}: no conversation files (*.json)")
    return [load_conversation(p) for p in paths]


# -- scoring ---------------------------------------------------------------------------------------


@dataclass
class Scores:
    """Running sums of the per-question metrics."""

    n: int = 0
    r5: float = 0.0
    r10: float = 0.0
    hit5: float = 0.0
    mrr: float = 0.0

    def add(
        self, ranking: Sequence[str], evidence: Sequence[str], session_of: dict[str, int]
    ) -> None:
        wanted = set(evidence)
        self.n += 1
        self.r5 += len(wanted & set(ranking[:5])) / len(wanted)
        self.r10 += len(wanted & set(ranking[:10])) / len(wanted)
        sessions = list(dict.fromkeys(session_of[i] for i in ranking if i in session_of))[:5]
        self.hit5 += any(session_of[e] in sessions for e in wanted)
        first = next((r for r, i in enumerate(ranking[:DEPTH], 1) if i in wanted), None)
        self.mrr += 0.0 if first is None else 1.0 / first

    def row(self) -> dict[str, float | int]:
        n = max(self.n, 1)
        return {
            "n": self.n, "turn_r@5": self.r5 / n, "turn_r@10": self.r10 / n,
            "session_hit@5": self.hit5 / n, "mrr": self.mrr / n,
        }  # fmt: skip


@dataclass
class Method:
    """One way of ranking: a strategy of the engine or a baseline; scores overall and per category,
    and ask latencies."""

    name: str
    overall: Scores = field(default_factory=Scores)
    by_category: dict[int, Scores] = field(default_factory=dict)
    ask_ms: list[float] = field(default_factory=list)

    def add(self, q: Question, ranking: Sequence[str], session_of: dict[str, int]) -> None:
        self.overall.add(ranking, q.evidence, session_of)
        self.by_category.setdefault(q.category, Scores()).add(ranking, q.evidence, session_of)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"all": self.overall.row()}
        for c in sorted(self.by_category):
            out[CATEGORIES.get(c, str(c))] = self.by_category[c].row()
        if self.ask_ms:
            ordered = sorted(self.ask_ms)
            out["ask_ms"] = {
                "median": statistics.median(ordered),
                "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            }
        return out


# -- baselines --------------------------------------------------------------------------------------


class BM25:
    """Okapi BM25 with ``rank_bm25``'s defaults (k1 1.5, b 0.75, epsilon 0.25) over lower-cased
    word tokens (``\\w+``)."""

    def __init__(
        self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ):
        self.k1, self.b = k1, b
        self.docs = [Counter(_words(d)) for d in docs]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) if len(docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(docs)
        idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
        floor = epsilon * (sum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs), dtype=np.float64)
        norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.avgdl, 1e-9))
        for word in set(_words(query)):
            idf = self.idf.get(word)
            if idf is None:
                continue
            tf = np.array([d.get(word, 0) for d in self.docs], dtype=np.float64)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def ranked(ids: Sequence[str], scores: np.ndarray) -> list[str]:
    """The first :data:`DEPTH` ids by score, ties by position (stable)."""
    order = np.argsort(-scores, kind="stable")[:DEPTH]
    return [ids[i] for i in order]


# -- the run ---------------------------------------------------------------------------------------


def note_of(turn: Turn) -> Note:
    return Note(
        id=turn.id,
        text=f"{turn.speaker}: {turn.text}",
        timestamp=turn.timestamp,
        metadata={"speaker": turn.speaker, "session": turn.session, "turn": turn.position},
    )


def run(
    conversations: Sequence[Conversation],
    strategies: Sequence[str],
    baselines: Sequence[str],
    embedding: str,
    memory: str,
    workdir: Path,
    ask: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Ingest every conversation, ask every question with every strategy and baseline."""
    methods = {name: Method(name) for name in [*strategies, *baselines]}
    options: dict[str, Any] = {"path": workdir / "store"} if memory == "log" else {}
    ingest_s = 0.0
    turns = 0
    with Container(memory=memory, embedding=embedding, **options) as container:
        engine = container.engine
        embedder: Embedder = container.embedder
        for conv in conversations:
            ns = ("locomo", conv.id)
            notes = [note_of(t) for t in conv.turns]
            start = time.perf_counter()
            for session in sorted({t.session for t in conv.turns}):
                engine.ingest_many(
                    [n for n, t in zip(notes, conv.turns, strict=True) if t.session == session],
                    namespace=ns,
                )
            ingest_s += time.perf_counter() - start
            turns += len(notes)
            session_of = conv.session_of()
            ids = [n.id for n in notes]
            bm25 = BM25([n.text for n in notes]) if "bm25" in baselines else None
            unit = None
            if "cosine" in baselines:
                vectors = np.asarray(embedder.embed([n.text for n in notes]), dtype=np.float64)
                unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            for q in conv.questions:
                for strategy in strategies:
                    start = time.perf_counter()
                    answer = engine.ask(
                        Query(text=q.text, k=DEPTH, strategy=strategy), namespace=ns
                    )  # type: ignore[arg-type]
                    methods[strategy].ask_ms.append((time.perf_counter() - start) * 1000)
                    methods[strategy].add(q, [h.note.id for h in answer.hits], session_of)
                if bm25 is not None:
                    methods["bm25"].add(q, ranked(ids, bm25.scores(q.text)), session_of)
                if unit is not None:
                    v = np.asarray(embedder.embed([q.text])[0], dtype=np.float64)
                    v = v / max(float(np.linalg.norm(v)), 1e-12)
                    methods["cosine"].add(q, ranked(ids, unit @ v), session_of)
        spec_id = embedder.spec_id
    return {
        "embedding": spec_id,
        "memory": memory,
        "conversations": [c.id for c in conversations],
        "turns": turns,
        "questions": sum(len(c.questions) for c in conversations),
        "unscored_questions": sum(c.unscored for c in conversations),
        "dropped_evidence_ids": sum(c.dropped_evidence for c in conversations),
        "ingest_turns_per_s": turns / ingest_s if ingest_s else 0.0,
        "methods": {name: m.report() for name, m in methods.items()},
    }


def table(result: dict[str, Any]) -> str:
    """The result as text: one row per method, then one block per category."""
    lines = [
        f"LoCoMo recall: conversations {', '.join(result['conversations'])}; {result['turns']} turns, "
        f"{result['questions']} questions scored ({result['unscored_questions']} without evidence); "
        f"embedding {result['embedding']}; memory {result['memory']}",
        f"ingest: {result['ingest_turns_per_s']:,.0f} turns/s",
        "",
    ]
    groups = ["all", *[CATEGORIES[c] for c in sorted(CATEGORIES)]]
    for group in groups:
        rows = [(name, r[group]) for name, r in result["methods"].items() if group in r]
        if not rows:
            continue
        lines.append(f"{group} (n={rows[0][1]['n']})")
        lines.append(
            f"  {'method':<10} {'turn R@5':>9} {'turn R@10':>10} {'sess Hit@5':>11} {'MRR':>7}  ask ms (median / p95)"
        )
        for name, r in rows:
            latency = result["methods"][name].get("ask_ms")
            ms = (
                f"{latency['median']:.1f} / {latency['p95']:.1f}"
                if latency and group == "all"
                else ""
            )
            lines.append(
                f"  {name:<10} {r['turn_r@5']:>9.3f} {r['turn_r@10']:>10.3f} {r['session_hit@5']:>11.3f} "
                f"{r['mrr']:>7.3f}  {ms}"
            )
        lines.append("")
    return "\n".join(lines)


def _names(text: str, allowed: Sequence[str], option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(
            f"{option}: unknown {', '.join(bad)} (choose from {', '.join(allowed)})"
        )
    return names


# -- cross-validation ------------------------------------------------------------------------------

CV_WINDOWS = ((2, 1, 0.5), (2, 2, 0.5), (3, 2, 0.5), (2, 2, 0.3), (2, 2, 0.7), (3, 3, 0.5))
"""(context_before, context_after, context_weight) of the keyword index tried by ``--cv``."""
CV_SEMANTIC = (0.6, 0.8, 1.0, 1.25)
"""Fusion semantic weights tried (the keyword weight is 1)."""
CV_DATE = (0.0, 0.2, 0.4, 0.6, 0.8)
"""Fusion date weights tried."""


class CachedEmbedder(Embedder):
    """Another embedder with a cache of its vectors by text: the same spec (so the same store
    identity); each text is embedded once per run, whatever the number of ingests."""

    name = "cached"

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    @property
    def spec(self) -> EmbeddingSpec:
        return self.inner.spec

    def _embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for text, row in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = row
        return np.stack([self.cache[t] for t in texts]).astype(np.float64)


def _candidates(hits: Sequence[Any], k: int) -> dict[str, dict[str, float]]:
    """The signals of the hits the default ask for ``k`` fuses (within the first ``depth(k)`` of a
    side)."""
    wide = depth(k)
    out = {}
    for hit in hits:
        sig = hit.signals
        ranks = sig.ranks
        if ranks.get("semantic", wide + 1) <= wide or ranks.get("keyword", wide + 1) <= wide:
            out[hit.note.id] = {
                "semantic": sig.semantic or 0.0, "keyword": sig.keyword or 0.0, "date": sig.date or 0.0,
            }  # fmt: skip
    return out


def cross_validate(
    conversations: Sequence[Conversation], embedding: str, *, windows: Sequence[tuple[int, int, float]] = CV_WINDOWS
) -> dict[str, Any]:
    """Leave-one-conversation-out choice of the keyword window and the fusion weights (module
    docstring): per window, per conversation, per question the candidates' signals; then every
    weight setting ranked by ``fuse_scores`` and scored."""
    inner = EMBEDDERS.create(embedding) if isinstance(embedding, str) else embedding
    embedder = CachedEmbedder(inner)
    settings = [(w, s, d) for w in windows for s in CV_SEMANTIC for d in CV_DATE]
    # per setting, per conversation: (sum of r5, sum of hit5, n, Scores)
    scored: dict[tuple[Any, ...], dict[str, Scores]] = {x: {} for x in settings}
    for window in windows:
        before, after, weight = window
        keyword = KeywordIndex(context_before=before, context_after=after, context_weight=weight)
        with Container(embedding=embedder, keyword=keyword) as container:
            engine = container.engine
            for conv in conversations:
                ns = ("locomo", conv.id)
                notes = [note_of(t) for t in conv.turns]
                for session in sorted({t.session for t in conv.turns}):
                    engine.ingest_many(
                        [n for n, t in zip(notes, conv.turns, strict=True) if t.session == session], namespace=ns
                    )
                times = {n.id: n.timestamp for n in notes}
                session_of = conv.session_of()
                vectors = embedder.embed([q.text for q in conv.questions])
                for q, v in zip(conv.questions, vectors, strict=True):
                    query = Query(text=q.text, vector=v, k=len(notes), strategy="hybrid")
                    found = _candidates(engine.ask(query, namespace=ns).hits, DEPTH)
                    ceiling = engine.keyword_index(ns).ceiling(question_text(q.text))
                    for semantic in CV_SEMANTIC:
                        for date in CV_DATE:
                            fusion = Fusion(semantic=semantic, keyword=1.0, date=date)
                            fused = fuse_scores(found, times, fusion=fusion, ceiling=ceiling)
                            ranking = [i for i, _ in fused][:DEPTH]
                            scored[(window, semantic, date)].setdefault(conv.id, Scores()).add(
                                ranking, q.evidence, session_of
                            )
        print(f"cv: window {window} done", file=sys.stderr)

    def objective(setting: tuple[Any, ...], convs: Sequence[str]) -> float:
        parts = [scored[setting][c] for c in convs]
        n = sum(p.n for p in parts)
        return (sum(p.r5 for p in parts) + sum(p.hit5 for p in parts)) / max(n, 1)

    def pooled(rows: Sequence[Scores]) -> dict[str, float | int]:
        total = Scores()
        for r in rows:
            total.n += r.n
            total.r5 += r.r5
            total.r10 += r.r10
            total.hit5 += r.hit5
            total.mrr += r.mrr
        return total.row()

    def describe(setting: tuple[Any, ...]) -> dict[str, Any]:
        (before, after, weight), semantic, date = setting
        return {
            "context_before": before, "context_after": after, "context_weight": weight,
            "semantic": semantic, "keyword": 1.0, "date": date,
        }  # fmt: skip

    ids = [c.id for c in conversations]
    folds = []
    held_out: list[Scores] = []
    for held in ids:
        train = [c for c in ids if c != held]
        best = max(settings, key=lambda x: (objective(x, train), -settings.index(x)))
        held_out.append(scored[best][held])
        folds.append({"held_out": held, "chosen": describe(best), "scores": scored[best][held].row()})
    final = max(settings, key=lambda x: (objective(x, ids), -settings.index(x)))
    return {
        "conversations": ids,
        "objective": "mean of turn R@5 and session Hit@5 over the training conversations' questions",
        "folds": folds,
        "held_out_mean": pooled(held_out),
        "chosen_on_all": describe(final),
        "in_sample_with_chosen": pooled([scored[final][c] for c in ids]),
    }


def cv_table(result: dict[str, Any]) -> str:
    lines = [f"Leave-one-conversation-out over {', '.join(result['conversations'])} ({result['objective']})"]
    for fold in result["folds"]:
        r, c = fold["scores"], fold["chosen"]
        lines.append(
            f"  held out {fold['held_out']:>4}: turn R@5 {r['turn_r@5']:.3f}  R@10 {r['turn_r@10']:.3f}  "
            f"sess Hit@5 {r['session_hit@5']:.3f}  MRR {r['mrr']:.3f}   chosen on the rest: {c}"
        )
    r = result["held_out_mean"]
    lines.append(
        f"  held-out (pooled, n={r['n']}): turn R@5 {r['turn_r@5']:.3f}  R@10 {r['turn_r@10']:.3f}  "
        f"sess Hit@5 {r['session_hit@5']:.3f}  MRR {r['mrr']:.3f}"
    )
    lines.append(f"  chosen on all: {result['chosen_on_all']}")
    r = result["in_sample_with_chosen"]
    lines.append(
        f"  in sample with it: turn R@5 {r['turn_r@5']:.3f}  R@10 {r['turn_r@10']:.3f}  "
        f"sess Hit@5 {r['session_hit@5']:.3f}  MRR {r['mrr']:.3f}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, required=True, help="directory of LoCoMo conversation files"
    )
    parser.add_argument(
        "--convs", default="", help="comma-separated conversation ids (file stems); default all"
    )
    parser.add_argument(
        "--strategies", default=",".join(STRATEGIES), help="engine strategies, comma-separated"
    )
    parser.add_argument("--baselines", default=",".join(BASELINES), help="bm25,cosine or empty")
    parser.add_argument("--embedding", default="minilm", help="the embedder (default minilm)")
    parser.add_argument("--memory", default="in_memory", choices=["in_memory", "log"])
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument(
        "--cv", action="store_true",
        help="leave-one-conversation-out cross-validation of the default recall's parameters instead",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        strategies = _names(args.strategies, STRATEGIES, "--strategies")
        baselines = _names(args.baselines, BASELINES, "--baselines")
        conversations = load(args.data, [c for c in args.convs.split(",") if c])
    except (argparse.ArgumentTypeError, DataError) as exc:
        parser.error(str(exc))
    if args.cv:
        outcome = cross_validate(conversations, args.embedding)
        print(cv_table(outcome))
        if args.json is not None:
            args.json.write_text(json.dumps(outcome, indent=2) + "\n", encoding="utf-8")
        return 0
    with tempfile.TemporaryDirectory(prefix="coniti-locomo-") as tmp:
        result = run(conversations, strategies, baselines, args.embedding, args.memory, Path(tmp))
    print(table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
