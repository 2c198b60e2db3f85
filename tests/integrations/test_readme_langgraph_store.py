"""The README's "LangGraph store" example (section Integrations) runs and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def subsection(title: str) -> str:
    """The text under ``### title`` in the README's ``## Integrations`` section, up to the next
    heading of either level."""
    text = README.read_text(encoding="utf-8")
    integrations = re.search(r"^## Integrations\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert integrations is not None, "README has no Integrations section"
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^### |\Z)", integrations.group(1), re.S | re.M)
    assert match is not None, f"README's Integrations section has no {title!r}"
    return match.group(1)


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", subsection("LangGraph store"), re.S)


def test_the_langgraph_store_section_has_one_example() -> None:
    """The LangGraph store subsection holds one Python example."""
    assert len(_blocks()) == 1


def test_the_example_prints_what_its_comments_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every print of the example prints the text of its trailing comment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    [block] = _blocks()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]
    assert out.getvalue().splitlines() == expected
