"""The README's Embedders and Recall examples run and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from readme_blocks import python_blocks

from coniti.embedding import EMBEDDERS


def expected_lines(block: str) -> list[str]:
    """The ``# ...`` comment after each ``print(...)``; ``...`` inside one stands for any text."""
    return [m.group(1).strip() for m in re.finditer(r"print\(.*\)\s+# (.*)$", block, re.M)]


def run(block: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    return out.getvalue().splitlines()


def same(printed: list[str], expected: list[str]) -> bool:
    return len(printed) == len(expected) and all(
        re.fullmatch(".*".join(map(re.escape, want.split("..."))), got)
        for got, want in zip(printed, expected, strict=True)
    )


@pytest.fixture
def registry_restored() -> object:
    names = set(EMBEDDERS.names())
    yield None
    for name in set(EMBEDDERS.names()) - names:
        EMBEDDERS.unregister(name)


@pytest.mark.parametrize("index", [0, 1])
def test_embedders_examples_print_what_they_say(index: int, registry_restored: object) -> None:
    """Each python block of the Embedders section prints its comments."""
    block = python_blocks("Embedders")[index]
    expected = expected_lines(block)
    assert expected
    assert same(run(block), expected)


def test_recall_example_prints_what_it_says() -> None:
    """The Recall section's example (scopes, filters, min_score, a context block, async) prints
    its comments."""
    [block] = python_blocks("Recall: scopes, filters, context blocks")
    expected = expected_lines(block)
    assert len(expected) == 8
    assert same(run(block), expected)
