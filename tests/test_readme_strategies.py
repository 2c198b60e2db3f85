"""The README's "Strategies" section runs and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from readme_blocks import python_blocks, section


def _expected(block: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]


def test_section_has_one_example() -> None:
    """The Strategies section holds one Python example."""
    assert len(python_blocks("Strategies")) == 1


def test_example_prints_what_its_comments_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each print of the example prints the line in its comment."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    (block,) = python_blocks("Strategies")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == _expected(block)


def test_section_comes_right_before_embedders() -> None:
    """## Strategies is the section immediately before ## Embedders."""
    text = Path(__file__).resolve().parent.parent.joinpath("README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[headings.index("Embedders") - 1] == "Strategies"


def test_section_names_every_strategy() -> None:
    """Every Query.strategy name appears in the section's table."""
    from coniti.actor import STRATEGY_NAMES

    body = section("Strategies")
    assert all(f"| `{name}`" in body for name in STRATEGY_NAMES)
