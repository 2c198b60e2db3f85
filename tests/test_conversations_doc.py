"""docs/conversations.md states the content id test vector that Note.content_id gives (tests/test_docs.py
runs the page)."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "conversations.md"


def test_the_test_vector_on_the_page_is_the_content_id() -> None:
    """The content id the page states is what Note.content_id gives for its example."""
    from coniti import Note

    text = PAGE.read_text(encoding="utf-8")
    stated = re.search(r"`(c1:[0-9a-f]{64})`", text)
    assert stated is not None
    note = Note(id="x", text="  Hello\n  world ", timestamp=0, kind="fact")
    assert note.content_id(("alice",)) == stated.group(1)
