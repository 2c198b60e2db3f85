"""A summariser and an extractor for consolidation over any OpenAI-compatible chat endpoint.

:class:`OpenAISummarizer` and :class:`OpenAIExtractor` (for
:meth:`ContinuityEngine.consolidate <coniti.engine.ContinuityEngine.consolidate>`) send one
``POST {base_url}/chat/completions`` request (``{"model", "messages", "temperature": 0}``, bearer
``api_key`` when given) and read ``choices[0].message.content``. ``base_url``, ``model`` and
``api_key`` default to ``$OPENAI_BASE_URL`` (else ``https://api.openai.com/v1``), ``$OPENAI_MODEL``
(required) and ``$OPENAI_API_KEY``. Each attempt has a ``timeout`` (seconds); a connection error, a
timeout, HTTP 429 or 5xx is retried ``retries`` times with a doubling ``backoff``; any other
failure, or a reply that is not what is asked for, raises :class:`LLMError` naming the endpoint and
the cause (a consolidation then writes nothing). Standard library only (``urllib``); the
``coniti[llm]`` extra adds nothing to install.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from coniti.actor import Note
from coniti.engine.consolidate import Proposal
from coniti.errors import ConitiError

__all__ = ["LLMError", "OpenAIChat", "OpenAIExtractor", "OpenAISummarizer"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class LLMError(ConitiError, RuntimeError):
    """A chat endpoint failed or answered with something else than asked for."""


def _lines(turns: Sequence[Note]) -> str:
    out = []
    for note in turns:
        turn = note.metadata.get("turn")
        speaker = turn.get("speaker") if isinstance(turn, dict) else None
        out.append(f"{speaker}: {note.text}" if isinstance(speaker, str) else note.text)
    return "\n".join(out)


class OpenAIChat:
    """One chat completions endpoint (module docstring)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.base_url = (base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        model = model or env.get("OPENAI_MODEL")
        if not model:
            raise LLMError("no model: give model= or set OPENAI_MODEL")
        self.model = model
        self.api_key = api_key if api_key is not None else env.get("OPENAI_API_KEY")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise LLMError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if type(retries) is not int or retries < 0:
            raise LLMError(f"retries must be a non-negative int, got {retries!r}")
        self.timeout, self.retries, self.backoff = float(timeout), retries, float(backoff)

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The assistant's reply to ``messages``; :class:`LLMError` after the retries."""
        url = f"{self.base_url}/chat/completions"
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        cause = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    data = json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                cause = f"HTTP {exc.code}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                break
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                cause = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            except ValueError as exc:
                raise LLMError(f"{url} answered with no JSON ({exc})") from None
            try:
                content = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise LLMError(f"{url} answered without choices[0].message.content") from None
            if not isinstance(content, str):
                raise LLMError(f"{url} answered with a {type(content).__name__} content, not text")
            return content
        raise LLMError(f"{url} failed after {self.retries + 1} attempts: {cause}")


class OpenAISummarizer(OpenAIChat):
    """A consolidation summariser: the turns as ``speaker: text`` lines, asked for a short summary."""

    prompt = (
        "Summarise this conversation in at most five sentences. Keep names, dates and decisions. "
        "Answer with the summary only."
    )

    def summarize(self, turns: Sequence[Note]) -> str:
        return self.complete([
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": _lines(turns)},
        ]).strip()


class OpenAIExtractor(OpenAIChat):
    """A consolidation extractor: the turns and the current facts (``id: text``), asked for JSON
    ``{"facts": [{"text": ..., "supersedes": id or null}]}``."""

    prompt = (
        "Extract the durable facts stated in this conversation. Current facts are listed as 'id: text'. "
        "For a fact that replaces a current one, give that id as supersedes; skip facts already known. "
        'Answer with JSON only: {"facts": [{"text": "...", "supersedes": null}]}'
    )

    def extract(self, turns: Sequence[Note], facts: Sequence[Note]) -> list[Proposal]:
        known = "\n".join(f"{f.id}: {f.text}" for f in facts if f.valid_to is None) or "(none)"
        reply = self.complete([
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": f"Current facts:\n{known}\n\nConversation:\n{_lines(turns)}"},
        ])
        return _proposals(reply, self.base_url)


def _proposals(reply: str, where: str) -> list[Proposal]:
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data: Any = json.loads(text)
        items = data["facts"]
        if not isinstance(items, list):
            raise TypeError
        out = []
        for item in items:
            fact, old = item["text"], item.get("supersedes")
            if not isinstance(fact, str) or not (old is None or isinstance(old, str)):
                raise TypeError
            out.append(Proposal(fact, supersedes=old))
        return out
    except (ValueError, KeyError, TypeError):
        raise LLMError(f"{where} did not answer with facts as JSON: {reply[:200]!r}") from None
