"""Reading and running the documentation's examples: README.md and every page of docs/.

The conventions a page follows (docs/development.md, "Documentation that runs"):

- Every ```python block runs, in the order of the page, in one namespace per page, with a fresh
  temporary directory as the working directory (and as ``tempfile``'s directory).
- A block's output is given either by a ``# text`` comment after each ``print(...)`` call (the
  printed lines, in order, are those comments; ``...`` inside one stands for any text), or by a
  ```text block that follows it directly, introduced by a line ending in ``prints:`` (the whole
  output, line for line).
- Every ```console block runs too, in the same directory: each ``$ coniti ...`` line through
  ``coniti.cli.main`` (100 columns, no ``CONITI_ACTOR``), ``$ export NAME=VALUE`` sets a variable
  for the rest of the page and ``$ echo $?`` shows the exit status of the command before it. The
  lines after a command are what it prints (stdout and stderr), recorded times, hashes, byte sizes
  and durations aside; a line ``...`` stands for any number of lines.
- A block that must not run says so and why in its info string: ```python no-run: needs a GPU.
  Other languages (```sh, ```json, ```text) are not run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
PRINT_COMMENT = re.compile(r"print\(.*\)\s+# (.*)$", re.M)
RUNNABLE = ("python", "console")
VARIES = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3}Z?"), "<recorded>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<hash>"),
    (re.compile(r'"at": [0-9.]+'), '"at": <at>'),
    (re.compile(r"[\d,]+ bytes"), "<size> bytes"),
    (re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),
]


def pages() -> list[Path]:
    """README.md and every docs/*.md, in a fixed order."""
    return [README, *sorted(DOCS.glob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, the rest of its info string, text and line."""

    lang: str
    info: str
    text: str
    line: int
    output: str | None = None  # the ```text block that follows a python block after "...prints:"

    @property
    def no_run(self) -> bool:
        return self.info.strip().startswith("no-run")

    @property
    def where(self) -> str:
        return f"line {self.line}"


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a page, each python block paired with the output block that follows it."""
    found = [
        Block(m.group(1), m.group(2), m.group(3), text.count("\n", 0, m.start()) + 1, None)
        for m in FENCE.finditer(text)
    ]
    spans = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    out: list[Block] = []
    skip = False
    for i, block in enumerate(found):
        if skip:
            skip = False
            continue
        if block.lang == "python" and i + 1 < len(found) and found[i + 1].lang == "text":
            between = text[spans[i][1] : spans[i + 1][0]].strip()
            if between.endswith("prints:") and "\n\n" not in between:
                out.append(Block(block.lang, block.info, block.text, block.line, found[i + 1].text))
                skip = True
                continue
        out.append(block)
    return out


def section(text: str, title: str, level: int = 2) -> str:
    """The text under the heading ``title`` of the given level (``##`` for 2), up to the next
    heading of that level or higher; lines inside fenced blocks (a ``# comment`` of code) are not
    headings."""
    lines = text.split("\n")
    fenced = False
    start: int | None = None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        if heading is None:
            continue
        if start is not None and len(heading.group(1)) <= level:
            return "\n".join(lines[start:i]) + "\n"
        if start is None and heading.group(1) == "#" * level and heading.group(2) == title:
            start = i + 1
    if start is None:
        raise AssertionError(f"no section {'#' * level} {title}")
    return "\n".join(lines[start:]) + "\n"


def expected_prints(code: str) -> list[str]:
    """The ``# ...`` comment after each ``print(...)`` of a block."""
    return [m.group(1).strip() for m in PRINT_COMMENT.finditer(code)]


def line_matches(got: str, want: str) -> bool:
    """``got`` equals ``want``, where ``...`` inside ``want`` stands for any text."""
    return re.fullmatch(".*".join(map(re.escape, want.split("..."))), got) is not None


def masked(line: str) -> str:
    for pattern, replacement in VARIES:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def output_matches(got: list[str], want: list[str]) -> bool:
    """``got`` equals ``want`` line for line after masking, where a ``...`` line of ``want`` stands
    for any number of lines."""
    got = [masked(line) for line in got]
    want = [masked(line) for line in want]

    def match(i: int, j: int) -> bool:
        if j == len(want):
            return i == len(got)
        if want[j] == "...":
            return any(match(k, j + 1) for k in range(i, len(got) + 1))
        return i < len(got) and got[i] == want[j] and match(i + 1, j + 1)

    return match(0, 0)


@dataclass
class PageRun:
    """What running one page left: its directory, its namespace and every mismatch found."""

    page: Path
    directory: Path
    namespace: dict[str, object] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _page_environment(directory: Path) -> Iterator[None]:
    """cwd, tempfile's directory and the environment of a page run, restored afterwards."""
    saved_env = dict(os.environ)
    saved_cwd = Path.cwd()
    saved_tempdir = tempfile.tempdir
    os.chdir(directory)
    tempfile.tempdir = str(directory)
    os.environ["COLUMNS"] = "100"
    os.environ.pop("CONITI_ACTOR", None)
    os.environ.pop("CONITI_STORE", None)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        tempfile.tempdir = saved_tempdir
        os.environ.clear()
        os.environ.update(saved_env)


def _run_python(block: Block, run: PageRun, label: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, label, "exec", dont_inherit=True), run.namespace)
    printed = out.getvalue().splitlines()
    if block.output is not None:
        if printed != block.output.splitlines():
            run.problems.append(f"{label}: printed {printed!r}, the page shows {block.output.splitlines()!r}")
        return
    want = expected_prints(block.text)
    if len(printed) != len(want) or not all(map(line_matches, printed, want)):
        run.problems.append(f"{label}: printed {printed!r}, its comments say {want!r}")


def _run_console(block: Block, run: PageRun, label: str, status: list[int]) -> None:
    from coniti.cli import main

    for chunk in re.split(r"^\$ ", block.text, flags=re.M)[1:]:
        command, _, shown = chunk.partition("\n")
        want = shown.rstrip("\n").split("\n") if shown.strip() else []
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            os.environ[name.strip()] = value.strip()
            continue
        if command.strip() == "echo $?":
            if want != [str(status[0])]:
                run.problems.append(f"{label}: exit status {status[0]}, the page shows {want!r}")
            continue
        argv = shlex.split(command)
        if not argv or argv[0] != "coniti":
            run.problems.append(f"{label}: '$ {command}' is neither coniti, export nor echo $? "
                                "(mark the block no-run with a reason)")
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status[0] = main(argv[1:])
        printed = out.getvalue().rstrip("\n").split("\n") if out.getvalue().strip() else []
        if not output_matches(printed, want):
            run.problems.append(f"{label}: '$ {command}' printed {printed!r}, the page shows {want!r}")


def _close_leftovers(namespace: dict[str, object]) -> None:
    """Close what a page left open (stores, savers, containers), so no handle outlives the run."""
    for value in list(namespace.values()):
        if type(value).__module__.startswith("coniti") and callable(getattr(value, "close", None)):
            with contextlib.suppress(Exception):
                value.close()  # type: ignore[attr-defined]


def run_page(page: Path, directory: Path) -> PageRun:
    """Run every runnable block of ``page`` in order inside ``directory`` (see the module docstring)."""
    from coniti.embedding import EMBEDDERS

    run = PageRun(page, directory, {"__name__": f"docs_{page.stem}"})
    registered = set(EMBEDDERS.names())
    status = [0]
    name = page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name
    try:
        with _page_environment(directory):
            for block in blocks(page.read_text(encoding="utf-8")):
                if block.lang not in RUNNABLE or block.no_run:
                    continue
                label = f"{name}:{block.line}"
                if block.lang == "python":
                    _run_python(block, run, label)
                else:
                    _run_console(block, run, label, status)
    finally:
        _close_leftovers(run.namespace)
        for added in set(EMBEDDERS.names()) - registered:
            EMBEDDERS.unregister(added)
    return run
