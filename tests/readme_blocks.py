"""Helpers for tests that read one section of the documentation: README.md, then docs/*.md."""

from __future__ import annotations

import re

import docs_pages
from docs_pages import README, pages


def section(title: str) -> str:
    """The text of the first ``## title`` section of README.md or a docs/ page (up to the next
    ``#`` or ``##`` heading)."""
    for page in pages():
        try:
            return docs_pages.section(page.read_text(encoding="utf-8"), title)
        except AssertionError:
            continue
    raise AssertionError(f"neither {README.name} nor docs/ has a section {title!r}")


def python_blocks(title: str) -> list[str]:
    """The ```python code blocks of that section, in order."""
    return re.findall(r"```python[^\n]*\n(.*?)```", section(title), re.S)
