"""Output for people (rich tables, progress on a terminal) and for programs (``--json``).

``--json`` prints one JSON document per command, or one JSON object per line for streams (``ls``,
``log``, ``history``). Tables and messages go to stdout; progress bars go to stderr and only appear
when both stdout and stderr are terminals and ``--json`` is off.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

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
        tty = sys.stdout.isatty()
        width = None if tty or os.environ.get("COLUMNS") else PIPE_WIDTH
        self.console = Console(file=sys.stdout, highlight=False, soft_wrap=False, width=width)
        self.err = Console(file=sys.stderr, highlight=False)
        self._plain = not tty

    # -- programs ------------------------------------------------------------------------------

    def json(self, document: Any) -> None:
        """One JSON document on stdout."""
        with reader_gone():
            sys.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")
            sys.stdout.flush()

    def json_lines(self, documents: Iterable[Any]) -> int:
        """One JSON object per line, flushed as each is written; returns how many."""
        n = 0
        with reader_gone():
            for document in documents:
                sys.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n")
                sys.stdout.flush()
                n += 1
        return n

    # -- people --------------------------------------------------------------------------------

    def line(self, text: str = "", *, style: str | None = None) -> None:
        """A line of plain text (no markup interpretation)."""
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

    def note(self, text: str) -> None:
        """A remark for people on stderr (not part of the command's output)."""
        self.err.print(escape(text), style="dim")

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        title: str | None = None,
        wrap: Sequence[str] = (),
    ) -> int:
        """A table; columns named in ``wrap`` wrap, the others stay on one line. Returns row count."""
        table = Table(title=title, title_justify="left", header_style="bold", show_edge=False)
        for name in columns:
            if name in wrap:
                table.add_column(name, overflow="fold", ratio=1)
            else:
                table.add_column(name, no_wrap=True)
        n = 0
        for row in rows:
            table.add_row(*(escape(_cell(v)) for v in row))
            n += 1
        self.rich(table)
        return n

    def fields(self, pairs: Iterable[tuple[str, Any]], *, title: str | None = None) -> None:
        """A two-column key/value table."""
        table = Table(title=title, title_justify="left", show_header=False, show_edge=False, box=None)
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
        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        columns.append(TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)

            def tick(n: int = 1) -> None:
                bar.advance(task, n)

            yield tick


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
