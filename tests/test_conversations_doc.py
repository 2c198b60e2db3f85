"""docs/conversations.md: its Python blocks run top to bottom in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "conversations.md"


def test_the_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ```python block of the page runs, in order, in one namespace, in an empty directory."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "__docs__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{PAGE.name} block {i}", "exec"), scope)


def test_the_test_vector_on_the_page_is_the_content_id() -> None:
    """The content id the page states is what Note.content_id gives for its example."""
    from coniti import Note

    text = PAGE.read_text(encoding="utf-8")
    stated = re.search(r"`(c1:[0-9a-f]{64})`", text)
    assert stated is not None
    note = Note(id="x", text="  Hello\n  world ", timestamp=0, kind="fact")
    assert note.content_id(("alice",)) == stated.group(1)
