"""The README's "LangGraph checkpointer" section runs and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^### LangGraph checkpointer\n(.*?)(?=^##)", text, re.S | re.M)
    assert match is not None, "README has no section 'LangGraph checkpointer'"
    return re.findall(r"```python\n(.*?)```", match.group(1), re.S)


def _expected(block: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]


def test_section_sits_in_the_integrations_section() -> None:
    """The section is a ``###`` part of ``## Integrations``, right after the LangGraph store."""
    text = README.read_text(encoding="utf-8")
    pattern = r"^## Integrations\n(?:(?!^## ).)*^### LangGraph store\n(?:(?!^##).)*^### LangGraph checkpointer\n"
    assert re.search(pattern, text, re.S | re.M)


def test_section_holds_the_graph_and_the_erasure_examples() -> None:
    """Two blocks: running the graph (history, fork), then delete and erase."""
    assert len(_blocks()) == 2


def test_examples_print_what_their_comments_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in order in one namespace, each block prints exactly its commented lines."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    namespace: dict[str, object] = {}
    try:
        for block in _blocks():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, "README.md", "exec", dont_inherit=True), namespace)
            assert out.getvalue().splitlines() == _expected(block)
    finally:
        saver = namespace.get("saver")
        if saver is not None:
            saver.close()  # type: ignore[attr-defined]
        store = namespace.get("store")
        if store is not None:
            store.close()  # type: ignore[attr-defined]
