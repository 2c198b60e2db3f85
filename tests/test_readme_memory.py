"""The README's memory and memory-file examples run and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest
from readme_blocks import python_blocks


def _expected(block: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]


def _run(blocks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    return out.getvalue().splitlines()


def test_memory_example_prints_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan example prints the pages and the final None the comments promise."""
    block = python_blocks("Memory: notes, records and backends")[0]
    lines = _run([block], tmp_path, monkeypatch)
    assert lines == [e.split(":")[0] if e.startswith("None") else e for e in _expected(block)]


def test_blob_example_stores_a_record_without_a_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blob example stores a record without a vector and reads its bytes back."""
    blocks = python_blocks("Memory: notes, records and backends")[:2]
    lines = _run(blocks, tmp_path, monkeypatch)
    assert lines[-1] == _expected(blocks[1])[-1]


def test_memory_file_example_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dump/load example writes both files (0600) and re-homes the three records."""
    blocks = python_blocks("Memory: notes, records and backends") + python_blocks("The memory file")
    lines = _run(blocks, tmp_path, monkeypatch)
    assert lines[-1] == _expected(blocks[-1])[-1]
    for name in ("backup.jsonl", "backup.jsonl.gz"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob("*.partial"))
    assert os.path.getsize(tmp_path / "backup.jsonl") > 0
