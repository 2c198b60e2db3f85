"""Output for people (rich tables, progress on a terminal) and for programs (``--json``).

``--json`` prints one JSON document per command, or one JSON object per line for streams (``ls``,
``log``, ``history``). Tables and messages go to stdout; progress bars go to stderr and only appear
when both stdout and stderr are terminals and ``--json`` is off. rich is imported on the first table,
line or progress bar, so ``--json`` output never loads it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import click

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PIPE_WIDTH", "Output", "Ticker", "reader_gone"]

PIPE_WIDTH = 100
"""Columns used for tables when stdout is not a terminal and ``COLUMNS`` is not set."""


class Ticker(Protocol):
    """Advances a progress display by ``n`` items."""

    def __call__(self, n: int = 1) -> None: ...


class Output:
    """Writes one command's results; ``json_mode`` selects JSON instead of tables."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json_mode = json_mode
        self._stdout, self._stderr = sys.stdout, sys.stderr
        self._plain = not self._stdout.isatty()

    @cached_property
    def console(self) -> Console:
        """The rich console on stdout: the terminal's width, else ``COLUMNS``, else PIPE_WIDTH."""
        from rich.console import Console

        width = None if not self._plain or os.environ.get("COLUMNS") else PIPE_WIDTH
        return Console(file=self._stdout, highlight=False, soft_wrap=False, width=width)

    @cached_property
    def err(self) -> Console:
        """The rich console on stderr (progress bars)."""
        from rich.console import Console

        return Console(file=self._stderr, highlight=False)

    # -- programs ------------------------------------------------------------------------------

    def json(self, document: Any) -> None:
        """One JSON document on stdout."""
        with reader_gone():
            sys.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")
            sys.stdout.flush()

    def json_lines(self, documents: Iterable[Any]) -> None:
        """One JSON object per line, flushed as each is written."""
        with reader_gone():
            for document in documents:
                sys.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")
                sys.stdout.flush()

    def hint(self, text: str) -> None:
        """A line for the person on stderr (kept out of stdout, so --json output stays clean)."""
        with reader_gone():
            self._stderr.write(text + "\n")
            self._stderr.flush()

    # -- people --------------------------------------------------------------------------------

    def line(self, text: str = "", *, style: str | None = None) -> None:
        """A line of plain text (no markup interpretation). Off a terminal, a line rich would print
        unchanged (printable ASCII without ``:``, which may start an emoji code, or ``\\``, and
        no variable forcing a terminal) is written as is, without importing rich (~0.1 s)."""
        if self._plain and _verbatim(text):
            with reader_gone():
                self._stdout.write(text + "\n")
                self._stdout.flush()
            return
        from rich.markup import escape

        with reader_gone():
            self.console.print(escape(text), style=style, highlight=False, soft_wrap=True)

    def rich(self, renderable: Any) -> None:
        """Print a rich renderable (table, rule, markup string); off a terminal, without the
        trailing spaces rich pads lines with."""
        with reader_gone():
            if not self._plain:
                self.console.print(renderable)
                return
            with self.console.capture() as captured:
                self.console.print(renderable)
            text = "\n".join(line.rstrip() for line in captured.get().split("\n"))
            sys.stdout.write(text)
            sys.stdout.flush()

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        title: str | None = None,
        wrap: Sequence[str] = (),
    ) -> None:
        """A table; columns named in ``wrap`` wrap, the others stay on one line."""
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=title, title_justify="left", header_style="bold", show_edge=False)
        for name in columns:
            if name in wrap:
                table.add_column(name, overflow="fold", ratio=1)
            else:
                table.add_column(name, no_wrap=True)
        for row in rows:
            table.add_row(*(escape(_cell(v)) for v in row))
        self.rich(table)

    def fields(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """A two-column key/value table."""
        from rich.markup import escape
        from rich.table import Table

        table = Table(show_header=False, show_edge=False, box=None)
        table.add_column("field", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        for key, value in pairs:
            table.add_row(escape(key), escape(_cell(value)))
        self.rich(table)

    # -- progress ------------------------------------------------------------------------------

    @property
    def interactive(self) -> bool:
        """True when progress may be shown: stdout and stderr are terminals and --json is off."""
        return (
            not self.json_mode
            and sys.stdout.isatty()
            and sys.stderr.isatty()
        )

    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[Ticker]:
        """A progress bar on stderr (a spinner when ``total`` is unknown); silent off a terminal."""
        if not self.interactive:
            yield _no_tick
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        columns.append(TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)

            def tick(n: int = 1) -> None:
                bar.advance(task, n)

            yield tick


_FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""Variables that make rich treat a pipe as a terminal (then it may style a plain line)."""


def _verbatim(text: str) -> bool:
    """Whether rich would print ``text`` (escaped, soft-wrapped, off a terminal) unchanged."""
    return (
        text.isascii() and text.isprintable() and ":" not in text and "\\" not in text
        and not any(os.environ.get(name) for name in _FORCING)
    )  # fmt: skip


@contextmanager
def reader_gone() -> Iterator[None]:
    """A closed pipe on stdout (``coniti log | head``) ends the command quietly with status 0."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise click.exceptions.Exit(0) from None


def _no_tick(n: int = 1) -> None:
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
