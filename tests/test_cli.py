"""The ``coniti`` command: global options, exit statuses and error reporting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coniti.cli import main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints usage, documents the store choice, and exits 0."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: coniti" in out
    assert "CONITI_STORE" in out
    assert "XDG_DATA_HOME" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version."""
    assert main(["--version"]) == 0
    assert "0.1.0" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown command exits 2 with a one-line reason and no traceback."""
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "No such command" in err
    assert "Traceback" not in err


def test_no_command_shows_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """Running with no command shows the usage (click's group behaviour) and exits 2 or 0."""
    code = main([])
    captured = capsys.readouterr()
    assert code in (0, 2)
    assert "Usage: coniti" in captured.out + captured.err


def test_missing_rich_is_named(tmp_path: Path) -> None:
    """Without rich (imported on first output for people), the command exits 1 with one line that
    names the package to install, and no traceback."""
    probe = (
        "import sys; sys.modules['rich'] = None\n"
        "from coniti.cli import main\n"
        f"sys.exit(main(['meta', 'set', 'k', '1', '--store', {str(tmp_path / 's')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == "coniti: the command line needs rich: pip install click rich\n"
