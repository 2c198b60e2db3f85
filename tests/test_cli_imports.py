"""The shape of coniti.cli: no import cycle, one registry, one --ns, one point resolution, and the
library loaded only by the commands that use it."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

import coniti.cli
from coniti.cli.app import COMMANDS, cli

PACKAGE = "coniti.cli"
SOURCES = {
    (PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"): path
    for path in sorted(Path(coniti.cli.__file__).parent.glob("*.py"))
}


def _module_of(name: str) -> str:
    """The module that defines the command the registry names ``name`` (loading it)."""
    callback = COMMANDS[name]().callback
    assert callback is not None
    return callback.__module__


COMMAND_MODULES = {_module_of(name) for name in COMMANDS}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth (functions included), outside ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _targets(module: str, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The modules among ``known`` that one import statement in ``module`` names
    (``from coniti.cli import x`` names the submodule x when there is one)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = module if module == PACKAGE else module.rsplit(".", 1)[0]
            parts = package.split(".")
            parent = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{parent}.{base}" if base else parent
        names = {
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names
        }
    return names & known


def import_graph() -> dict[str, set[str]]:
    """Module -> the coniti.cli modules it imports, plus app's registry (imported on first use)."""
    graph: dict[str, set[str]] = {}
    for module, path in SOURCES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for node in _imports(tree):
            targets |= _targets(module, node, set(SOURCES))
        graph[module] = targets - {module}
    graph[f"{PACKAGE}.app"] |= COMMAND_MODULES
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that starts and ends with the same module, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph.get(module, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_imports_inside_functions_count_and_type_checking_ones_do_not() -> None:
    """The graph has an edge for an import inside a function (absolute or relative), none for one
    under ``if TYPE_CHECKING:``."""
    source = (
        "def f():\n    from coniti.cli import b\n    from .d import x\n    from . import e\n"
        "if TYPE_CHECKING:\n    import coniti.cli.c\n"
    )
    known = {PACKAGE} | {f"{PACKAGE}.{m}" for m in "abcde"}
    edges = set().union(*(_targets(f"{PACKAGE}.a", n, known) for n in _imports(ast.parse(source))))
    assert edges == {f"{PACKAGE}.b", f"{PACKAGE}.d", f"{PACKAGE}.e"}


def test_find_cycle() -> None:
    """find_cycle returns the modules of a cycle in import order, and None for a graph without."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_the_cli() -> None:
    """No module of coniti.cli imports, even inside a function, one that imports it back."""
    assert find_cycle(import_graph()) is None


def test_command_modules_import_no_other_command_module() -> None:
    """A command module depends on context, output, parse, show and types, never on another command
    module nor on the app."""
    graph = import_graph()
    for module in sorted(COMMAND_MODULES):
        assert not graph[module] & (COMMAND_MODULES | {f"{PACKAGE}.app"}), module


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_registry_names_the_command(name: str) -> None:
    """Each entry of the registry loads a click command of the same name."""
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command) and command.name == name


def _string_constants(value: str) -> int:
    return sum(
        1
        for path in SOURCES.values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value == value
    )


def test_ns_is_declared_once() -> None:
    """The --ns option is written in one place (context.ns_option); commands pass help and default."""
    assert _string_constants("--ns") == 1


def test_point_resolution_is_written_once() -> None:
    """Only context.at_point calls ``.at(time=...)``: a point is read as seq or time in one place."""
    calls = [
        module
        for module, path in SOURCES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "at"
        and any(k.arg == "time" for k in node.keywords)
    ]
    assert calls == [f"{PACKAGE}.context"]


_PROBE = """
import sys
from coniti.cli import main
code = main(sys.argv[1:])
print(sorted(m for m in sys.modules
             if m.startswith(("coniti.cli.", "coniti.impl.", "rich.")) or m == "rich"),
      file=sys.stderr)
sys.exit(code)
"""


def _loaded(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded: set[str] = set(ast.literal_eval(proc.stderr.strip().splitlines()[-1]))
    return loaded


def test_a_command_loads_only_its_own_module() -> None:
    """`coniti ask --help` imports the engine commands' module, and neither the other command
    modules, nor LogBackend, nor rich."""
    loaded = _loaded("ask", "--help")
    assert f"{PACKAGE}.engine_cmds" in loaded
    others = COMMAND_MODULES - {f"{PACKAGE}.engine_cmds"}
    assert not loaded & others
    assert not any(m.startswith(("coniti.impl.log", "rich")) for m in loaded), loaded


def test_json_output_does_not_load_rich(tmp_path: Path) -> None:
    """A command with --json writes its document without importing rich."""
    loaded = _loaded("meta", "set", "k", "1", "--json", "--store", str(tmp_path / "s"))
    assert "coniti.impl.log" in loaded
    assert not any(m == "rich" or m.startswith("rich.") for m in loaded), loaded


def test_a_plain_line_off_a_terminal_does_not_load_rich(tmp_path: Path) -> None:
    """A command whose output is one plain line (``meta set`` prints ``k = 1``) writes it to a pipe
    without importing rich."""
    loaded = _loaded("meta", "set", "k", "1", "--store", str(tmp_path / "s"))
    assert "coniti.impl.log" in loaded
    assert not any(m == "rich" or m.startswith("rich.") for m in loaded), loaded
