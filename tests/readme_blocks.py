"""Helpers for tests that run the README's examples."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str) -> str:
    """The text of the README section whose ``## `` heading is ``title`` (up to the next one)."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if match is None:
        raise AssertionError(f"README has no section {title!r}")
    return match.group(1)


def python_blocks(title: str) -> list[str]:
    """The ```python code blocks of one README section, in order."""
    return re.findall(r"```python\n(.*?)```", section(title), re.S)
