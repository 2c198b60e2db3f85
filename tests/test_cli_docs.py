"""Every command is documented: help text on each command and option, and a mention in the README or
the guides (docs/). The tour of docs/cli.md runs as tests/test_docs.py runs every page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_support import CONSOLE_SCRIPT, ROOT, no_traceback, run_script

from coniti.cli.app import cli
from coniti.impl.log import LogBackend

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCUMENTED = "\n".join([README, *(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))])


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None, name
        out.append((name, command))
        if isinstance(command, click.Group):
            out.extend((f"{name} {sub}", c) for sub, c in sorted(command.commands.items()))
    return out


COMMANDS = _commands()


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_has_help(name: str, command: click.Command) -> None:
    """Each command and subcommand has a help text, and so does each of its options."""
    assert (command.help or "").strip(), f"coniti {name} has no help text"
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"coniti {name} {param.opts[0]} has no help text"


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_is_documented(name: str, command: click.Command) -> None:
    """Each command appears in the README or a page of docs/ as it is typed: `coniti NAME`."""
    assert re.search(rf"\bconiti (--\S+ )*{re.escape(name)}\b", DOCUMENTED), (
        f"neither README.md nor docs/ shows 'coniti {name}'"
    )


def test_readme_starts_with_the_two_commands() -> None:
    """The README's first code block is ./tools/demo and ./tools/test."""
    first = re.search(r"```\w*\n(.*?)```", README, re.S)
    assert first is not None
    lines = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert lines[:2] == ["./tools/demo", "./tools/test"]


def test_python_dash_m() -> None:
    """python -m coniti runs the same command line."""
    proc = subprocess.run([sys.executable, "-m", "coniti", "--version"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and "coniti" in proc.stdout


def test_console_script_installed() -> None:
    """The coniti console script is installed beside the interpreter and prints help."""
    assert CONSOLE_SCRIPT.exists()
    result = run_script("--help")
    assert result.code == 0 and "Usage: coniti" in result.out


def test_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """A reader that stops early (coniti log | head -1) ends the command with status 0, no traceback."""
    store = tmp_path / "s"
    with LogBackend(store) as backend:
        backend.set_meta(backend.meta_set_request("k", 1))
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "dump", "-", "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err
    assert no_traceback(run_script("--version"))


def test_docs_tour_names_demo_lines_the_demo_no_longer_prints() -> None:
    """tools/docs_tour.py keeps the demo excerpt as written but names each of its lines (not '...',
    recorded times and sizes aside) missing from the demo's output."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from docs_tour import stale_demo_lines
    finally:
        sys.path.remove(str(ROOT / "tools"))
    block = "$ coniti demo\n1. Ingest\n...\n    0.03  old score\n store size 1,000 bytes\n"
    printed = "1. Ingest\nmore\n    0.61  new score\n store size 2,048 bytes"
    assert stale_demo_lines(block, printed) == ["    0.03  old score"]
