"""LangGraph's own store tests, run against :class:`~coniti.integrations.langgraph.ConitiStore`.

The sdists of the installed ``langgraph-checkpoint`` and ``langgraph-checkpoint-sqlite`` carry
LangGraph's store tests. At test time pip downloads the sdist of the installed version into a
temporary directory; the test files are extracted there beside our ``conftest.py``
(``langgraph_store_conftest.py``, which makes the store classes they build ConitiStores) and run in a
pytest subprocess. Nothing of LangGraph's is committed here. :data:`DESELECTED` holds the only tests
not run: tests of SQLite internals, each with its reason; every other test must pass.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

SUITES: dict[str, list[str]] = {
    "langgraph-checkpoint-sqlite": ["tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py"],
    "langgraph-checkpoint": ["tests/test_store.py"],
}
"""The store test files of each distribution (its ``tests/*.py`` helpers are extracted too)."""

DESELECTED: dict[str, dict[str, str]] = {
    "langgraph-checkpoint-sqlite": {
        "tests/test_store.py::test_vector_store_initialization": (
            "reads the SQLite connection (store.conn) and its sqlite_master tables"
        ),
        "tests/test_store.py::test_nonnull_migrations": "checks SqliteStore.MIGRATIONS, the SQL schema migrations",
        "tests/test_store.py::test_sql_injection_vulnerability": (
            "expects the SQLite store's 'Invalid filter key' message for a filter key written as SQL; "
            "coniti's filters are not SQL, and it refuses that key with its own message"
        ),
        "tests/test_store.py::test_escape_glob_literal": "tests a SQLite GLOB-escaping helper, not a store",
        "tests/test_store.py::test_namespace_match_pattern": "tests the SQLite store's regex helper, not a store",
        "tests/test_store.py::test_list_namespaces_prefix_uses_indexable_condition": (
            "tests the SQL text BaseSqliteStore generates, not a store"
        ),
    },
    "langgraph-checkpoint": {},
}


@dataclass(frozen=True)
class Outcome:
    """One suite's run: the pytest exit code, the counts from its JUnit report, its output."""

    returncode: int
    passed: int
    failed: int
    errors: int
    skipped: int
    deselected: int
    collected: list[str]
    output: str


def _download(dist: str, into: Path) -> Path:
    version = importlib.metadata.version(dist)
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
            "--disable-pip-version-check", f"{dist}=={version}", "-d", str(into),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    name = dist.replace("-", "_")
    found = sorted(into.glob(f"{name}-{version}.tar.gz"))
    assert found, f"pip downloaded no sdist of {dist}=={version} into {into}"
    return found[0]


def _extract(sdist: Path, into: Path) -> Path:
    """The sdist's ``tests/*.py`` files under ``into/tests``, with our conftest beside them."""
    tests = into / "tests"
    tests.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and parts[2].endswith(".py") and member.isfile():
                source = tar.extractfile(member)
                assert source is not None
                (tests / parts[2]).write_bytes(source.read())
    (tests / "__init__.py").touch()
    assert not (tests / "conftest.py").exists(), "the sdist now ships a conftest.py; merge it with ours"
    shutil.copy(HERE / "langgraph_store_conftest.py", tests / "conftest.py")
    return into


def _run(root: Path, files: list[str], deselect: dict[str, str]) -> Outcome:
    report = root / "junit.xml"
    base = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
        "--rootdir", str(root),
    ]
    listing = subprocess.run(
        [*base, "--collect-only", "-q", *files], cwd=root, capture_output=True, text=True, timeout=600
    )
    collected = [line for line in listing.stdout.splitlines() if "::" in line]
    command = [*base, "-q", f"--junitxml={report}", *files]
    for node in deselect:
        command += ["--deselect", node]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=1800)
    output = done.stdout + done.stderr
    tree = ET.parse(report).getroot()
    suite = tree if tree.tag == "testsuite" else tree.find("testsuite")
    assert suite is not None, output
    total = int(suite.get("tests", "0"))
    failed = int(suite.get("failures", "0"))
    errors = int(suite.get("errors", "0"))
    skipped = int(suite.get("skipped", "0"))
    summary = re.search(r"(\d+) deselected", output)
    return Outcome(
        done.returncode, total - failed - errors - skipped, failed, errors, skipped,
        int(summary.group(1)) if summary else 0, collected, output,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    downloads = tmp_path_factory.mktemp("sdists")
    for dist, files in SUITES.items():
        root = _extract(_download(dist, downloads), tmp_path_factory.mktemp(dist))
        out[dist] = _run(root, files, DESELECTED[dist])
    return out


@pytest.mark.parametrize("dist", sorted(SUITES))
def test_langgraph_store_tests_pass_on_coniti(outcomes: dict[str, Outcome], dist: str) -> None:
    """Every store test of the installed LangGraph distribution passes against ConitiStore, none is
    skipped, and only the tests of :data:`DESELECTED` are left out."""
    run = outcomes[dist]
    tail = "\n".join(run.output.splitlines()[-60:])
    assert (run.failed, run.errors, run.skipped) == (0, 0, 0), tail
    assert run.returncode == 0, tail
    assert run.passed > 0, tail
    print(f"{dist}: {run.passed} passed, {run.deselected} deselected")


@pytest.mark.parametrize("dist", sorted(SUITES))
def test_every_deselected_test_exists(outcomes: dict[str, Outcome], dist: str) -> None:
    """Each entry of the deselect list names tests that the suite holds (a renamed upstream test
    must not hide behind a stale entry), and the run left out exactly those."""
    run = outcomes[dist]
    matched = [n for n in run.collected if any(n == d or n.startswith(d + "[") for d in DESELECTED[dist])]
    for node in DESELECTED[dist]:
        assert any(n == node or n.startswith(node + "[") for n in run.collected), node
    assert run.deselected == len(matched)


def test_the_readme_quotes_the_measured_counts(outcomes: dict[str, Outcome]) -> None:
    """docs/integrations.md's table of pass counts names the installed versions and what this run
    measured."""
    readme = (HERE.parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    for dist, run in outcomes.items():
        version = importlib.metadata.version(dist)
        total = run.passed + run.deselected
        row = f"| {dist} {version} |"
        assert row in readme, row
        line = next(line for line in readme.splitlines() if line.startswith(row))
        assert f"| {run.passed} of {total} |" in line, line


def test_deselections_all_have_reasons() -> None:
    """Every deselected test carries its reason."""
    for dist, entries in DESELECTED.items():
        for node, reason in entries.items():
            assert node.split("::")[0] in SUITES[dist], node
            assert reason.strip(), node
