"""coniti.llm against a local OpenAI-compatible endpoint (tests/chat_server.py): requests, replies,
retries, timeouts, clear errors, and a consolidation that writes nothing when the endpoint fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chat_server import ChatServer

from coniti.actor import Note
from coniti.container import Container
from coniti.conversation import Turn
from coniti.engine.consolidate import Proposal
from coniti.llm import LLMError, OpenAIExtractor, OpenAISummarizer

TURNS = [Note(id="a", text="The launch is April 14.", timestamp=1, metadata={"turn": {"speaker": "ana"}})]


def test_summarizer_sends_the_turns_and_returns_the_reply() -> None:
    """One POST to /chat/completions with the model, temperature 0, the bearer key and the turns
    as speaker lines; the reply's content, stripped, is the summary."""
    with ChatServer([" Ana: launch April 14. "]) as server:
        summary = OpenAISummarizer(base_url=server.url, model="m1", api_key="k").summarize(TURNS)
    assert summary == "Ana: launch April 14."
    (body,) = server.bodies
    assert (body["model"], body["temperature"], server.auth) == ("m1", 0, ["Bearer k"])
    assert body["messages"][-1]["content"] == "ana: The launch is April 14."


def test_defaults_come_from_the_environment() -> None:
    """base_url, model and api_key default to OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY."""
    with ChatServer(["ok"]) as server:
        env = {"OPENAI_BASE_URL": server.url, "OPENAI_MODEL": "env-model", "OPENAI_API_KEY": "env-key"}
        OpenAISummarizer(environ=env).summarize(TURNS)
    assert (server.bodies[0]["model"], server.auth[0]) == ("env-model", "Bearer env-key")


def test_no_model_is_a_clear_error() -> None:
    """Without model= or OPENAI_MODEL the adapter refuses to start, naming OPENAI_MODEL."""
    with pytest.raises(LLMError, match="OPENAI_MODEL"):
        OpenAISummarizer(environ={})


def test_server_errors_are_retried() -> None:
    """A 503 then a 429 are retried; the third attempt's reply is returned."""
    with ChatServer(["fine"], faults=[503, 429]) as server:
        assert OpenAISummarizer(base_url=server.url, model="m", retries=2, backoff=0.01).summarize(TURNS) == "fine"
    assert len(server.bodies) == 3


def test_retries_run_out_with_an_error_naming_the_endpoint_and_cause() -> None:
    """When every attempt fails the error names the URL, the number of attempts and the last cause."""
    with ChatServer(["x"], faults=[500, 500]) as server, pytest.raises(LLMError, match=r"chat/completions failed after 2 attempts: HTTP 500"):
        OpenAISummarizer(base_url=server.url, model="m", retries=1, backoff=0.01).summarize(TURNS)


def test_a_client_error_is_not_retried() -> None:
    """A 401 fails at once: one request."""
    with ChatServer(["x"], faults=[401]) as server, pytest.raises(LLMError, match="HTTP 401"):
        OpenAISummarizer(base_url=server.url, model="m", retries=3, backoff=0.01).summarize(TURNS)
    assert len(server.bodies) == 1


def test_a_slow_endpoint_times_out() -> None:
    """An endpoint slower than the timeout fails with an error after the retries."""
    with ChatServer(["x"], faults=["slow", "slow"]) as server, pytest.raises(LLMError, match="2 attempts"):
        OpenAISummarizer(base_url=server.url, model="m", timeout=0.2, retries=1, backoff=0.01).summarize(TURNS)


def test_a_reply_that_is_not_json_is_an_error() -> None:
    """A body that is not JSON is an LLMError saying so."""
    with ChatServer(["x"], faults=["garbage"]) as server, pytest.raises(LLMError, match="no JSON"):
        OpenAISummarizer(base_url=server.url, model="m").summarize(TURNS)


def test_extractor_reads_facts_and_supersessions() -> None:
    """The extractor sends the current facts and reads {"facts": [...]} (also inside a code fence)."""
    reply = "```json\n" + json.dumps({"facts": [{"text": "Launch on April 14", "supersedes": "f1"}]}) + "\n```"
    current = [Note(id="f1", text="Launch on March 3", timestamp=0, kind="fact")]
    with ChatServer([reply]) as server:
        got = OpenAIExtractor(base_url=server.url, model="m").extract(TURNS, current)
    assert got == [Proposal("Launch on April 14", supersedes="f1")]
    assert "f1: Launch on March 3" in server.bodies[0]["messages"][-1]["content"]


def test_extractor_refuses_a_reply_without_facts() -> None:
    """A reply that is not the facts JSON is an LLMError quoting it."""
    with ChatServer(["sure, here you go"]) as server, pytest.raises(LLMError, match="sure, here you go"):
        OpenAIExtractor(base_url=server.url, model="m").extract(TURNS, [])


def test_consolidation_with_the_adapters_and_a_failing_endpoint(tmp_path: Path) -> None:
    """A consolidation through the adapters writes the model's summary and facts; when the endpoint
    fails, it raises and writes nothing."""
    with Container(memory="log", path=tmp_path / "s") as c:
        chat = c.conversation("x")
        chat.append([Turn.create(speaker="ana", text="The launch moved to April 14.")])
        with ChatServer(["x"], faults=[500]) as server:
            head = c.memory.head
            with pytest.raises(LLMError):
                c.engine.consolidate(chat, summarizer=OpenAISummarizer(base_url=server.url, model="m", retries=0))
            assert c.memory.head == head
        replies = ["Ana moved the launch.", json.dumps({"facts": [{"text": "Launch on April 14", "supersedes": None}]})]
        with ChatServer(replies) as server:
            options = {"base_url": server.url, "model": "m"}
            report = c.engine.consolidate(chat, summarizer=OpenAISummarizer(**options), extractor=OpenAIExtractor(**options))
        texts = sorted(r.note.text for r in c.memory.iter_all(namespace=chat.namespace) if r.note.kind in ("summary", "fact"))
        assert report.derived == 2 and texts == ["Ana moved the launch.", "Launch on April 14"]
