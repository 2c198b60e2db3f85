#!/usr/bin/env python3
"""Rewrite the outputs of the command-line tour in docs/cli.md by running its commands.

The page holds ```console blocks of ``$ coniti ...`` commands, each followed by what it printed. This
script runs ``coniti demo`` in a temporary directory, then every other command of the page in order
through ``coniti.cli.main`` (``CONITI_STORE=coniti-demo/store``, 100 columns), and writes the new
outputs into the page. ``$ echo $?`` lines get the exit status of the command before; the block of
``$ coniti demo`` (an excerpt, with ``...`` lines) is left alone, and each of its lines the demo no
longer prints is named (tests/test_docs.py checks the excerpt too).
Differences in recorded times, hashes, sizes and durations alone do not count (as in
tests/docs_pages.py): the page is then left as it is unless ``--force``; ``--check`` only reports.
Run: ``.venv/bin/python tools/docs_tour.py [--check|--force]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
VARIES = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3}Z?"), "<recorded>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<hash>"),
    (re.compile(r'"at": [0-9.]+'), '"at": <at>'),
    (re.compile(r"[\d,]+ bytes"), "<size> bytes"),
    (re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),
]


def masked(text: str) -> str:
    """``text`` with the parts that differ between runs replaced by placeholders."""
    for pattern, replacement in VARIES:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def run_coniti(argv: list[str]) -> tuple[int, str]:
    """Exit status and stdout+stderr of one command, run in process."""
    from coniti.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def rerun_block(block: str, last_code: list[int]) -> str:
    """The block with every command's output replaced by what it prints now."""
    parts = re.split(r"^(?=\$ )", block, flags=re.M)
    out = [parts[0]]
    for part in parts[1:]:
        command, _, old = part.partition("\n")
        gap = old[len(old.rstrip("\n")):]
        if command.startswith("$ coniti "):
            code, printed = run_coniti(shlex.split(command)[2:])
            last_code[0] = code
            out.append(f"{command}\n{printed.rstrip(chr(10))}{gap or chr(10)}")
        elif command.startswith("$ echo $?"):
            out.append(f"{command}\n{last_code[0]}{gap or chr(10)}")
        else:
            out.append(part)
    return "".join(out)


def stale_demo_lines(block: str, printed: str) -> list[str]:
    """The lines the page shows for ``$ coniti demo`` (``...`` aside) that its output no longer has,
    compared after masking."""
    have = {masked(line) for line in printed.split("\n")}
    shown = block.split("\n")[1:]
    return [line for line in shown if line.strip() and line != "..." and masked(line) not in have]


def rewrite(page: str, stale: list[str]) -> str:
    """The page with the tour's outputs rerun (in the current directory, which must be empty); the
    demo excerpt's lines that the demo no longer prints are added to ``stale``."""
    _, printed = run_coniti(["demo"])
    last_code = [0]

    def replace(match: re.Match[str]) -> str:
        body = match.group(1)
        if body.startswith("$ coniti demo"):
            stale.extend(stale_demo_lines(body, printed))
            return match.group(0)
        if not re.search(r"^\$ coniti ", body, re.M):
            return match.group(0)
        return "```console\n" + rerun_block(body, last_code) + "```"

    return re.sub(r"```console\n(.*?)```", replace, page, flags=re.S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report only; exit 1 if out of date")
    parser.add_argument("--force", action="store_true",
                        help="rewrite even when only recorded times, hashes and sizes differ")
    args = parser.parse_args()
    old = PAGE.read_text(encoding="utf-8")
    os.environ.update(CONITI_STORE="coniti-demo/store", COLUMNS="100")
    os.environ.pop("CONITI_ACTOR", None)
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        stale: list[str] = []
        try:
            new = rewrite(old, stale)
        finally:
            os.chdir(here)
    for line in stale:
        print(f"the demo excerpt shows a line the demo no longer prints (edit it by hand): {line}",
              file=sys.stderr)
    same = masked(new) == masked(old) and not stale
    if args.check or (same and not args.force):
        print("the tour is up to date" if same else "the tour is out of date", file=sys.stderr)
        return 0 if same or not args.check else 1
    PAGE.write_text(new, encoding="utf-8")
    print(f"rewrote the tour in {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
