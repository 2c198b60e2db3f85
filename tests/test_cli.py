"""The ``coniti`` command: global options, exit statuses and error reporting."""

from __future__ import annotations

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
