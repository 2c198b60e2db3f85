"""``import coniti.testing`` without its test dependencies fails with a message naming them."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCKED_IMPORT = """
import sys
sys.modules[{name!r}] = None  # makes `import {name}` raise ModuleNotFoundError
try:
    import coniti.testing
except ImportError as exc:
    print(type(exc).__name__, exc.name, str(exc), sep="\\n")
else:
    print("imported")
"""


@pytest.mark.parametrize("missing", ["pytest", "hypothesis"])
def test_missing_test_dependency_is_named_with_the_extra(missing: str) -> None:
    """With pytest or hypothesis missing, ``import coniti.testing`` raises ImportError naming the
    missing package and the ``coniti[test]`` extra that installs it."""
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT.format(name=missing)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, name, message = proc.stdout.rstrip("\n").split("\n", 2)
    assert kind == "ImportError" and name == missing
    assert f"{missing} is not installed" in message and "coniti[test]" in message
