"""The README's time-travel and audit tour runs and prints exactly the output the README shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from readme_blocks import python_blocks, section


def test_time_travel_tour_prints_what_the_readme_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tour (views by time, history, diff, follow, a subscription, export/import, erase and
    compact) prints the README's 'It prints' block line for line and leaves its files behind."""
    [block] = python_blocks("Time travel and audit")
    [expected] = re.findall(r"```text\n(.*?)```", section("Time travel and audit"), re.S)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_tour"})
    assert out.getvalue().splitlines() == expected.splitlines()
    assert (tmp_path / "history.jsonl.gz").is_file()
    assert (tmp_path / "restored-memory" / "data.mdb").is_file()
    assert b"Bob's birthday" not in (tmp_path / "team-memory" / "data.mdb").read_bytes()
