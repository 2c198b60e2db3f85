"""The log layer (coniti/log/) knows nothing of pydantic: its modules import only each other,
coniti.errors, coniti.jsonl, coniti.proofs and coniti.checkpoint (pure: no store, no pydantic)
among coniti's modules, and never pydantic."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOG = Path(__file__).resolve().parent.parent / "coniti" / "log"
ALLOWED = ("coniti.log", "coniti.errors", "coniti.jsonl", "coniti.proofs", "coniti.checkpoint")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", sorted(LOG.glob("*.py")), ids=lambda p: p.name)
def test_a_log_module_imports_no_pydantic_layer(path: Path) -> None:
    """Every import of the module (at any depth) is outside coniti or one of the allowed modules."""
    bad = [
        name
        for name in _imports(path)
        if name.split(".")[0] == "pydantic"
        or (name.split(".")[0] == "coniti" and not name.startswith(ALLOWED))
    ]
    assert bad == []
