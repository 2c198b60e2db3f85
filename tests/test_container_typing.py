"""Container's static typing, checked by running mypy --strict (as tools/test runs it on coniti/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from readme_blocks import python_blocks

ROOT = Path(__file__).resolve().parent.parent


def mypy_strict(path: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on ``path`` with the project's configuration and cache."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_readme_engine_example_passes_mypy_strict(tmp_path: Path) -> None:
    """docs/engine.md's first example (which reads c.memory.head of a log) type-checks under --strict."""
    [block] = python_blocks("The container and its pieces")
    example = tmp_path / "readme_engine.py"
    example.write_text(block, encoding="utf-8")
    result = mypy_strict(example)
    assert result.returncode == 0, result.stdout + result.stderr


def test_container_memory_is_typed_by_the_memory_argument() -> None:
    """Container(memory=...) types .memory as LogBackend, InMemoryBackend, the instance's type, or
    MemoryBackend for another name; resolved() gives ResolvedPiece values (tests/typing_container.py)."""
    result = mypy_strict(ROOT / "tests" / "typing_container.py")
    assert result.returncode == 0, result.stdout + result.stderr
