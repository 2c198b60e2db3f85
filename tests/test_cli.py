"""The ``coniti`` command: global options, exit statuses and error reporting."""

from __future__ import annotations

import json
import os
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
    """Without rich (imported on first output for people that needs it: here a line under
    FORCE_COLOR), the command exits 1 with one line that names the package to install, and no
    traceback."""
    probe = (
        "import sys; sys.modules['rich'] = None\n"
        "from coniti.cli import main\n"
        f"sys.exit(main(['meta', 'set', 'k', '1', '--store', {str(tmp_path / 's')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=120, env={**os.environ, "FORCE_COLOR": "1"})
    assert proc.returncode == 1
    assert proc.stderr == "coniti: the command line needs rich: pip install click rich\n"


def test_errors_under_json_are_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With --json a failure is one JSON object on stderr, {"error", "kind"}, with the usual exit
    status: 1 for an error, 2 for a usage error (also when --json follows the bad option)."""
    from cli_support import Cli

    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    missing = cli("get", "nope", "--json")
    assert missing.code == 1 and missing.out == ""
    assert json.loads(missing.err) == {"error": missing_message(tmp_path), "kind": "error"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    refused = cli("--json", "load", str(bad))
    assert refused.code == 1 and json.loads(refused.err)["kind"] == "MemoryFileError"
    usage = cli("add", "x", "--time", "garbage", "--json")
    assert usage.code == 2 and json.loads(usage.err)["kind"] == "usage"


def missing_message(tmp_path: Path) -> str:
    return (
        f"no store at {tmp_path / 'store'} (choose one with --store or CONITI_STORE; "
        "'coniti add', 'load' or 'import' create one)"
    )


def test_from_after_to_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--from after --to is a usage error (exit 2) in the command line's words, not TimeRange's."""
    from cli_support import Cli

    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    cli.ok("add", "hello")
    result = cli("ls", "--from", "2025-03-02", "--to", "2025-03-01")
    assert result.code == 2
    assert "--from (2025-03-02 00:00:00) is after --to (2025-03-01 00:00:00)" in result.err
    assert "TimeRange" not in result.err


def test_bad_time_names_the_option_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad --time value is reported as "Invalid value for '--time': ...", not "--time: --time:"."""
    from cli_support import Cli

    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    result = cli("add", "x", "--time", "garbage")
    assert result.code == 2 and "'--time': 'garbage' is not an ISO date" in result.err
    assert "--time: --time" not in result.err and "'--time': --time" not in result.err
