"""Helpers for tests that read one section of the documentation: README.md, then docs/*.md."""

from __future__ import annotations

import re

from docs_pages import README, pages


def section(title: str) -> str:
    """The text of the first ``## title`` section of README.md or a docs/ page (up to the next
    ``#`` or ``##`` heading)."""
    for page in pages():
        text = page.read_text(encoding="utf-8")
        match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^##? |\Z)", text, re.S | re.M)
        if match is not None:
            return match.group(1)
    raise AssertionError(f"neither {README.name} nor docs/ has a section {title!r}")


def python_blocks(title: str) -> list[str]:
    """The ```python code blocks of that section, in order."""
    return re.findall(r"```python[^\n]*\n(.*?)```", section(title), re.S)
