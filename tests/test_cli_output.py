"""The command line's output (coniti/cli/output.py): a plain line off a terminal is written without
rich exactly as rich would print it."""

from __future__ import annotations

import io
import string
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coniti.cli import output
from coniti.cli.output import Output


def _printed(text: str, *, verbatim: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(output, "_verbatim", (lambda _: True) if verbatim else (lambda _: False))
    Output(json_mode=False).line(text, style="bold")
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + "é", max_size=140))
def test_a_verbatim_line_is_what_rich_prints(text: str) -> None:
    """For every line _verbatim accepts, writing it as is gives rich's output off a terminal."""
    if not output._verbatim(text):
        return
    with pytest.MonkeyPatch.context() as mp:
        direct = _printed(text, verbatim=True, monkeypatch=mp)
    with pytest.MonkeyPatch.context() as mp:
        through_rich = _printed(text, verbatim=False, monkeypatch=mp)
    assert direct == through_rich == text + "\n"


@pytest.mark.parametrize("text", ["a :smile: b", "ends with \\", "tab\there", "ünï", "a\x1bb"])
def test_lines_rich_would_change_are_not_verbatim(text: str) -> None:
    """Emoji codes, backslashes, control characters and non-ASCII text go through rich."""
    assert not output._verbatim(text)


def test_a_variable_forcing_a_terminal_sends_lines_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """With FORCE_COLOR set rich may style a piped line, so the line goes through rich."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not output._verbatim("added n1 to /")
