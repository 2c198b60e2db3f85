"""The README's "Correcting memory" section runs and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from readme_blocks import python_blocks


def _blocks() -> list[str]:
    return python_blocks("Correcting memory")


def _expected(block: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    namespace: dict[str, object] = {}
    outputs = []
    for block in _blocks():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), namespace)
        outputs.append(out.getvalue().splitlines())
    return outputs


def test_page_has_the_three_examples() -> None:
    """The section holds the update/history, op-id retry and version-conflict examples."""
    assert len(_blocks()) == 3


def test_examples_print_what_their_comments_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block prints the commented lines, and the history loop prints the two versions the
    text describes."""
    outputs = _run(tmp_path, monkeypatch)
    first = outputs[0]
    assert first[1:3] == ["False False None Stand-up is at 9:30", "True True alice Stand-up is at 10:00"]
    assert [first[0], *first[3:]] == _expected(_blocks()[0])
    for block, lines in zip(_blocks()[1:], outputs[1:], strict=True):
        assert lines == _expected(block)
