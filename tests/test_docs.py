"""The documentation runs: every example of README.md and docs/*.md prints what its page says.

The conventions are in tests/docs_pages.py (and docs/development.md). Each page runs once per
session in a temporary directory of its own; the tests below read that run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from docs_pages import DOCS, README, ROOT, PageRun, blocks, output_matches, pages, run_page, section

_RUNS: dict[Path, PageRun] = {}


@pytest.fixture
def page_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], PageRun]:
    """run(page) -> the page's run, made once per session."""

    def run(page: Path) -> PageRun:
        if page not in _RUNS:
            _RUNS[page] = run_page(page, tmp_path_factory.mktemp(page.stem))
        return _RUNS[page]

    return run


PAGES = pages()


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_page_examples_print_what_the_page_says(page: Path, page_run: Callable[[Path], PageRun]) -> None:
    """Every python and console block of the page runs, in order, and prints what the page shows."""
    run = page_run(page)
    assert not run.problems, "\n".join(run.problems)


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_blocks_left_out_say_why(page: Path) -> None:
    """A block marked no-run gives its reason in the info string (```python no-run: reason)."""
    for block in blocks(page.read_text(encoding="utf-8")):
        if block.no_run:
            reason = block.info.strip().removeprefix("no-run").lstrip(":").strip()
            assert reason, f"{page.name} {block.where}: no-run without a reason"


def test_every_page_is_linked_from_the_readme() -> None:
    """README.md links every page of docs/."""
    readme = README.read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def test_readme_is_short() -> None:
    """README.md stays a front page: at most 400 lines; the guides are in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 400


def test_docs_link_to_files_that_exist() -> None:
    """Relative links from docs/ to files of the repository (not to other pages) resolve."""
    for page in sorted(DOCS.glob("*.md")):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if target.endswith(".md") and "/" not in target:
                continue  # another page: some arrive from other branches
            assert (page.parent / target).exists(), f"{page.name} links {target}, which does not exist"


# -- what the matching itself promises -------------------------------------------------------


def test_an_elided_line_stands_for_any_number_of_lines() -> None:
    """A '...' line matches zero or more lines; other lines must match exactly (after masking)."""
    assert output_matches(["a", "b", "c"], ["a", "...", "c"])
    assert output_matches(["a", "c"], ["a", "...", "c"])
    assert not output_matches(["a", "b", "d"], ["a", "...", "c"])
    assert output_matches(["took 3.16 s", "1,024 bytes"], ["took 16.56 s", "2 bytes"])
    assert not output_matches(["a"], ["b"])


def test_a_wrong_comment_is_reported(tmp_path: Path) -> None:
    """A page whose print comment disagrees with what the code prints is reported, with its line."""
    page = tmp_path / "wrong.md"
    page.write_text("# t\n\n```python\nprint(1 + 1)  # 3\n```\n", encoding="utf-8")
    run = run_page(page, tmp_path)
    assert run.problems == ["wrong.md:3: printed ['2'], its comments say ['3']"]


def test_a_wrong_console_output_is_reported(tmp_path: Path) -> None:
    """A console block whose shown output differs from what coniti prints is reported; a command
    that is not coniti's is refused unless the block is marked no-run."""
    page = tmp_path / "console.md"
    page.write_text("```console\n$ coniti --version\nconiti 0.0\n$ ls\n```\n\n"
                    "```console no-run: shows a shell\n$ ls\n```\n", encoding="utf-8")
    run = run_page(page, tmp_path)
    assert len(run.problems) == 2
    assert run.problems[0].startswith("console.md:1: '$ coniti --version' printed")
    assert "'$ ls' is neither coniti" in run.problems[1]


# -- what particular pages leave behind ------------------------------------------------------


def test_memory_page_dumps_private_whole_files(page_run: Callable[[Path], PageRun]) -> None:
    """docs/memory.md's dump example writes both files 0600 and leaves no .partial file."""
    run = page_run(DOCS / "memory.md")
    for name in ("backup.jsonl", "backup.jsonl.gz"):
        assert (run.directory / name).stat().st_mode & 0o777 == 0o600
        assert (run.directory / name).stat().st_size > 0
    assert not list(run.directory.glob("*.partial"))


def test_log_page_tour_erases_for_good(page_run: Callable[[Path], PageRun]) -> None:
    """docs/log.md leaves its store, the export and the restored copy, and after erase + compact
    no byte of Bob's note is in the store's file."""
    run = page_run(DOCS / "log.md")
    assert (run.directory / "memory-store" / "data.mdb").is_file()
    assert (run.directory / "history.jsonl.gz").is_file()
    assert (run.directory / "restored-memory" / "data.mdb").is_file()
    assert b"Bob's birthday" not in (run.directory / "team-memory" / "data.mdb").read_bytes()


def test_engine_page_names_every_strategy() -> None:
    """Every Query.strategy name has a row in docs/engine.md's Strategies table."""
    from coniti.actor import STRATEGY_NAMES

    body = section((DOCS / "engine.md").read_text(encoding="utf-8"), "Strategies")
    assert all(f"| `{name}`" in body for name in STRATEGY_NAMES)


def test_a_comment_in_code_is_not_a_heading() -> None:
    """A section runs to the next heading outside code: a '# comment' line of a block is not one."""
    text = "## A\n\n```python\n# not a heading\nx = 1\n```\n\nmore\n\n## B\n\nb\n"
    assert section(text, "A") == "\n```python\n# not a heading\nx = 1\n```\n\nmore\n\n"


def test_the_versions_the_docs_name_are_the_code_s() -> None:
    """docs/log.md names the store layout and event version this coniti writes."""
    from coniti.log.codec import EVENT_VERSION
    from coniti.log.store import LAYOUT_VERSION

    text = (DOCS / "log.md").read_text(encoding="utf-8")
    assert f"store layout {LAYOUT_VERSION}," in text
    assert f"event version {EVENT_VERSION}," in text
    for page in (DOCS / "log.md", DOCS / "engine.md", DOCS / "reliability.md"):
        for named in re.findall(r"store layout (\d+)", page.read_text(encoding="utf-8")):
            assert int(named) <= LAYOUT_VERSION, f"{page.name} names store layout {named}"
