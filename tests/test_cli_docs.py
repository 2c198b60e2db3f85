"""Every command is documented: help text on each command and option, and a mention in the README
or a guide of docs/."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_support import CONSOLE_SCRIPT, ROOT, no_traceback, run_script

from coniti.cli.app import cli
from coniti.impl.log import LogBackend

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCUMENTED = "\n".join([README, *(page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md")))])
"""The README and every guide of docs/ (where commands are mentioned)."""


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
def test_command_is_in_the_readme(name: str, command: click.Command) -> None:
    """Each command appears in the README or a guide of docs/ as it is typed: `coniti NAME`."""
    assert re.search(rf"\bconiti (--\S+ )*{re.escape(name)}\b", DOCUMENTED), (
        f"neither the README nor docs/ shows 'coniti {name}'"
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


def _tour() -> list[tuple[list[str], list[str], int]]:
    """The README tour's commands: (argv after 'coniti', expected output lines, exit status)."""
    section = README.split("## The command line", 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[list[str], list[str], int]] = []
    for block in re.findall(r"```text\n(.*?)```", section, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            if command.startswith("echo $?"):
                argv, lines, _ = steps[-1]
                steps[-1] = (argv, lines, int(output.strip()))
            elif command.startswith("coniti "):
                steps.append((shlex.split(command)[1:], output.rstrip("\n").split("\n"), 0))
    return steps


_VARIES = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3}Z?"), "<recorded>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<hash>"),
    (re.compile(r'"at": [0-9.]+'), '"at": <at>'),
    (re.compile(r"[\d,]+ bytes"), "<size> bytes"),
]


def _masked(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        for pattern, replacement in _VARIES:
            line = pattern.sub(replacement, line)
        out.append(line.rstrip())
    return out


def test_readme_tour_is_real_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `$ coniti ...` of the README tour, run in order on a fresh demo store, exits as shown and
    prints what is shown (recorded times, hashes and file sizes aside)."""
    from coniti import demo
    from coniti.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONITI_STORE", "coniti-demo/store")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("CONITI_ACTOR", raising=False)
    demo.run(Path("coniti-demo"))
    steps = _tour()
    assert len(steps) >= 20
    for argv, expected, status in steps:
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        printed = (captured.out + captured.err).rstrip("\n").split("\n")
        assert code == status, (argv, captured.err)
        assert _masked(printed) == _masked(expected), (argv, "run tools/readme_tour.py")
