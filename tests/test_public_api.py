"""The public surface: coniti.__all__, the import paths the spec fixes, the error tree, the ABC."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import coniti
import coniti.memory
import coniti.testing
from coniti.memory import MemoryBackend


def test_all_is_sorted() -> None:
    """coniti.__all__ is sorted and has no repeats."""
    assert coniti.__all__ == sorted(set(coniti.__all__))


@pytest.mark.parametrize("name", coniti.__all__)
def test_every_exported_name_exists(name: str) -> None:
    """Every name in coniti.__all__ is an attribute of coniti."""
    assert getattr(coniti, name) is not None


def test_star_import_gives_all() -> None:
    """from coniti import * binds exactly the names in __all__."""
    namespace: dict[str, object] = {}
    exec("from coniti import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(coniti.__all__)


def test_memory_all_is_sorted_and_importable() -> None:
    """coniti.memory.__all__ is sorted and every name in it exists."""
    assert coniti.memory.__all__ == sorted(coniti.memory.__all__)
    for name in coniti.memory.__all__:
        assert hasattr(coniti.memory, name), name


def test_spec_import_paths_from_coniti() -> None:
    """The spec's 'from coniti import Note, TimeRange, Query, ContractError, MemoryBackend' works."""
    from coniti import ContractError, MemoryBackend, Note, Query, TimeRange

    assert Note.__module__ == "coniti.actor"
    assert TimeRange.__module__ == "coniti.actor"
    assert Query.__module__ == "coniti.actor"
    assert ContractError.__module__ == "coniti.errors"
    assert MemoryBackend.__module__ == "coniti.memory"


def test_spec_import_paths_from_coniti_memory() -> None:
    """Records, every request and result, and the memory errors import from coniti.memory."""
    from coniti.memory import (  # noqa: F401
        ClearRequest,
        ClearResult,
        CountRequest,
        CountResult,
        DeleteRequest,
        DeleteResult,
        DuplicateRecord,
        GetRequest,
        GetResult,
        InvalidCursor,
        MemoryBackend,
        MemoryBackendError,
        MemoryFileError,
        MemoryRecord,
        MetaGetRequest,
        MetaResult,
        MetaSetRequest,
        Namespace,
        PutRequest,
        PutResult,
        ScanRequest,
        ScanResult,
    )

    assert DuplicateRecord is coniti.DuplicateRecord


def test_spec_import_path_of_in_memory_backend() -> None:
    """InMemoryBackend imports from coniti.impl.memory and is a MemoryBackend."""
    from coniti.impl.memory import InMemoryBackend

    assert issubclass(InMemoryBackend, MemoryBackend)


@pytest.mark.parametrize(
    "name", ["DuplicateRecord", "InvalidCursor", "MemoryFileError", "ReadOnlyError", "StoreError"]
)
def test_memory_errors_are_memory_backend_errors(name: str) -> None:
    """Every memory error derives from MemoryBackendError, a RuntimeError."""
    error = getattr(coniti, name)
    assert issubclass(error, coniti.MemoryBackendError)
    assert issubclass(error, RuntimeError)


def test_every_exported_error_has_one_root() -> None:
    """Every exception coniti exports derives from ConitiError."""
    errors = [v for v in vars(coniti).values() if isinstance(v, type) and issubclass(v, BaseException)]
    assert errors
    assert all(issubclass(e, coniti.ConitiError) for e in errors)


def test_contract_error_is_a_value_error() -> None:
    """ContractError is a ValueError; MemoryBackendError and EngineError are RuntimeErrors."""
    assert issubclass(coniti.ContractError, ValueError)
    assert issubclass(coniti.MemoryBackendError, RuntimeError)
    assert issubclass(coniti.EngineError, RuntimeError)


def test_abstract_core_is_the_eight_operations() -> None:
    """MemoryBackend's abstract methods are exactly the spec's eight operations and namespaces (no
    base class can list a backend's namespaces, so a backend must say)."""
    assert MemoryBackend.__abstractmethods__ == {
        "put", "get", "delete", "scan", "count", "get_meta", "set_meta", "clear", "namespaces"
    }


def test_incomplete_backend_cannot_be_built() -> None:
    """A subclass missing an operation fails at construction."""

    class Incomplete(MemoryBackend):
        kind = "incomplete"

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


@pytest.mark.parametrize(
    "name",
    ["aput", "aget", "adelete", "ascan", "acount", "aget_meta", "aset_meta", "aclear", "anamespaces"],
)
def test_async_twins_are_coroutines(name: str) -> None:
    """Each async twin is a coroutine function with the sync operation's signature."""
    twin = getattr(MemoryBackend, name)
    assert inspect.iscoroutinefunction(twin)
    sync = getattr(MemoryBackend, name[1:])
    assert list(inspect.signature(twin).parameters) == list(inspect.signature(sync).parameters)


@pytest.mark.parametrize(
    "name",
    [
        "iter_all", "dump", "load", "close", "__enter__", "__exit__",
        "put_request", "get_request", "delete_request", "scan_request", "count_request",
        "meta_get_request", "meta_set_request", "clear_request",
    ],
)
def test_derived_helpers_are_concrete(name: str) -> None:
    """iter_all, dump, load, close, the context manager and the request factories are concrete."""
    assert name not in MemoryBackend.__abstractmethods__
    assert callable(getattr(MemoryBackend, name))


def test_testing_package_exports_the_suite() -> None:
    """coniti.testing exports MemoryBackendTests and its __all__ is sorted."""
    assert coniti.testing.__all__ == sorted(coniti.testing.__all__)
    assert "MemoryBackendTests" in coniti.testing.__all__


def test_write_tests_runs_every_write_mixin() -> None:
    """coniti.testing.WriteTests, which backends subclass, runs the tests of each write mixin it
    was split into (none dropped), and MemoryBackendTests runs WriteTests."""
    import coniti.testing as suite

    parts = [suite.WriteOpTests, suite.PatchTests, suite.CompareAndSetTests, suite.OpIdTests, suite.ExpiryTests]
    tests = {name for part in parts for name in vars(part) if name.startswith("test_")}
    assert len(tests) == 44  # the tests WriteTests held before the split
    assert all(issubclass(suite.WriteTests, part) for part in parts)
    assert {name for name in dir(suite.WriteTests) if name.startswith("test_")} == tests
    assert issubclass(suite.MemoryBackendTests, suite.WriteTests)


def test_testing_package_collects_nothing_by_itself() -> None:
    """No class in coniti.testing starts with 'Test', so importing it adds no tests."""
    for module_name in ["coniti.testing", *(f"coniti.testing.{m}" for m in _testing_modules())]:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if isinstance(value, type):
                assert not name.startswith("Test"), f"{module_name}.{name}"


def _testing_modules() -> list[str]:
    folder = Path(coniti.testing.__file__).parent
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def test_package_is_typed() -> None:
    """coniti ships py.typed."""
    assert (Path(coniti.__file__).parent / "py.typed").exists()


def test_the_error_tree_draws_every_error() -> None:
    """Every error class of coniti.errors appears in the tree drawn in its module docstring."""
    from coniti import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) > 10
    drawn = errors.__doc__ or ""
    assert [c.__name__ for c in classes if not re.search(rf"\b{c.__name__}\b", drawn)] == []


def test_the_conformance_table_lists_every_mixin_once() -> None:
    """coniti.testing's docstring table names each exported mixin exactly once."""
    import coniti.testing as suite

    mixins = [n for n in suite.__all__ if n.endswith("Tests") and n != "MemoryBackendTests"]
    assert len(mixins) > 20
    doc = suite.__doc__ or ""
    assert {n: len(re.findall(rf"^``{n}``", doc, re.M)) for n in mixins} == dict.fromkeys(mixins, 1)


def test_no_merge_conflict_markers_are_left_in_the_package() -> None:
    """No line of coniti/ is a merge conflict marker."""
    root = Path(coniti.__file__).parent
    marker = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)
    assert [str(p) for p in root.rglob("*.py") if marker.search(p.read_text(encoding="utf-8"))] == []
