"""The README's LogBackend example runs and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from readme_blocks import python_blocks


def test_log_backend_example_prints_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put, delete, reopen, get, a view at event 2 and verify print the values in the comments."""
    [block] = python_blocks("LogBackend")
    expected = [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == expected
    assert (tmp_path / "memory-store" / "data.mdb").is_file()
