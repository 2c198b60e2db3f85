"""Helpers for the command-line tests: run ``coniti`` in process (``main(argv)``) or as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coniti.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).parent / "coniti"
"""The installed console script beside the interpreter running the tests (.venv/bin/coniti)."""


@dataclass
class Result:
    """Exit status and captured output of one command."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout as one JSON document."""
        return json.loads(self.out)

    def lines(self) -> list[Any]:
        """stdout as JSON lines."""
        return [json.loads(line) for line in self.out.splitlines()]


class Cli:
    """Runs ``coniti`` through ``main(argv)`` with ``CONITI_STORE`` set to ``store``."""

    def __init__(self, store: Path, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self._capsys = capsys
        monkeypatch.setenv("CONITI_STORE", str(store))
        monkeypatch.delenv("CONITI_ACTOR", raising=False)
        monkeypatch.setenv("COLUMNS", "200")

    def __call__(self, *args: str) -> Result:
        self._capsys.readouterr()
        code = main(list(args))
        captured = self._capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str) -> Result:
        """Run and assert exit status 0."""
        result = self(*args)
        assert result.code == 0, (args, result)
        return result


def run_script(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               timeout: float = 120) -> Result:
    """Run the installed console script as a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("CONITI_ACTOR", None)
    proc = subprocess.run(
        [str(CONSOLE_SCRIPT), *args], capture_output=True, text=True, env=full_env, cwd=cwd,
        timeout=timeout, check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def no_traceback(result: Result) -> bool:
    """True when neither stream shows a Python traceback."""
    return "Traceback" not in result.err and "Traceback" not in result.out
