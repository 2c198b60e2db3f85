"""The log layer's shape (issue 29): no module of coniti/log/ over 1,000 lines and no class over 40
methods; the head is recorded by the one append routine and a resized map handled by the store's
one gate-retry loop. Read with ``ast`` from the source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "coniti"
LOG_MODULES = sorted((PACKAGE / "log").glob("*.py"))


class _Callers(ast.NodeVisitor):
    """The qualified names (``Class.method``, ``function``) of the functions that call a method
    named ``attr`` (``x.attr(...)``), nested functions named after their outer one."""

    def __init__(self, attr: str) -> None:
        self.attr = attr
        self.scope: list[str] = []
        self.found: set[str] = set()

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _enter

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == self.attr:
            self.found.add(".".join(self.scope))
        self.generic_visit(node)


class _Handlers(_Callers):
    """The qualified names of the functions with an ``except`` clause naming ``attr``."""

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None and self.attr in ast.unparse(node.type):
            self.found.add(".".join(self.scope))
        self.generic_visit(node)


def _callers(paths: list[Path], attr: str) -> set[str]:
    found: set[str] = set()
    for path in paths:
        visitor = _Callers(attr)
        visitor.visit(ast.parse(path.read_text("utf-8")))
        found |= {f"{path.relative_to(PACKAGE.parent).as_posix()}:{name}" for name in visitor.found}
    return found


def test_no_log_module_is_over_1000_lines() -> None:
    """Every module of coniti/log/ has at most 1,000 lines."""
    sizes = {path.name: len(path.read_text("utf-8").splitlines()) for path in LOG_MODULES}
    assert {name: n for name, n in sizes.items() if n > 1000} == {}


def test_no_log_class_defines_over_40_methods() -> None:
    """Every class of coniti/log/ defines at most 40 methods in its body (properties, class and
    static methods included)."""
    counts = {}
    for path in LOG_MODULES:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                counts[f"{path.name}:{node.name}"] = sum(
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body
                )
    assert counts
    assert {name: n for name, n in counts.items() if n > 40} == {}


def test_the_head_is_recorded_by_the_append_routine_alone() -> None:
    """In all of coniti/, ``set_head`` is called by ``Appends.commit`` only: every event kind
    reaches the log through the one append routine."""
    assert _callers(sorted(PACKAGE.rglob("*.py")), "set_head") == {"coniti/log/append.py:Appends.commit"}


def test_the_gate_retry_loop_is_written_once() -> None:
    """In coniti/log/store.py a map grown by another process (``MapResizedError``) is handled by
    ``_Gate.begin`` for every transaction (reads, writes and ``read_at_rest`` begin through the
    one gate-retry loop) and by ``_init_env`` for the open, before any transaction, alone."""
    visitor = _Handlers("MapResizedError")
    visitor.visit(ast.parse((PACKAGE / "log" / "store.py").read_text("utf-8")))
    assert visitor.found == {"_Gate.begin", "_init_env"}
