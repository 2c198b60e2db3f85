"""What importing coniti loads: the public names on first access, and nothing a command does not use.

Each probe runs in a fresh interpreter (``sys.modules`` of this test process is shared by every test).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

import coniti


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(sorted(sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded: set[str] = set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))
    return loaded


def test_exports_table_equals_all() -> None:
    """coniti's table of lazily imported names holds exactly the names of ``__all__``."""
    assert set(coniti._EXPORTS) == set(coniti.__all__)


@pytest.mark.parametrize("name", coniti.__all__)
def test_each_export_comes_from_the_module_it_names(name: str) -> None:
    """``coniti.X`` is the object its table's module defines under that name."""
    module = importlib.import_module(coniti._EXPORTS[name])
    assert getattr(coniti, name) is getattr(module, name)


def test_unknown_attribute_raises_attribute_error() -> None:
    """A name coniti does not export raises AttributeError naming it (so hasattr() works)."""
    with pytest.raises(AttributeError, match="no_such_name"):
        coniti.no_such_name  # noqa: B018
    assert not hasattr(coniti, "no_such_name")


def test_dir_lists_the_exports() -> None:
    """dir(coniti) lists every exported name before any of them is used."""
    assert set(coniti.__all__) <= set(dir(coniti))


def test_import_coniti_loads_neither_numpy_nor_pydantic() -> None:
    """``import coniti`` (and its errors module) imports no third-party package: names load on use."""
    loaded = _loaded_after("import coniti, coniti.errors")
    assert not {"numpy", "pydantic", "lmdb", "click"} & loaded


def test_first_access_imports_the_defining_module() -> None:
    """``coniti.Note`` imports coniti.actor, and not the engine, nor the stores."""
    loaded = _loaded_after("import coniti\nconiti.Note")
    assert "coniti.actor" in loaded
    assert not {"coniti.engine", "coniti.impl.log", "coniti.log"} & loaded


def test_what_ask_and_add_import_leaves_out_asyncio() -> None:
    """The modules ``coniti ask`` and ``coniti add`` import (engine, container, LogBackend, minilm,
    the CLI) do not import asyncio: the async twins import it when they run."""
    loaded = _loaded_after(
        "import coniti.cli.app, coniti.cli.engine_cmds, coniti.container, coniti.impl.log, "
        "coniti.minilm"
    )
    assert "asyncio" not in loaded
    assert "difflib" not in loaded


def test_an_engine_in_memory_never_loads_crc32c() -> None:
    """crc32c (snapshot checksums) is imported on the first checksum: an engine over memory, which
    keeps no snapshot, ingests and asks without it."""
    loaded = _loaded_after(
        "from coniti import ContinuityEngine\n"
        "from coniti.embedding import LocalHashEmbedder\n"
        "from coniti.impl.memory import InMemoryBackend\n"
        "from coniti.strategy import DefaultStrategy\n"
        "from coniti.structure import FlatStructure\n"
        "e = ContinuityEngine(InMemoryBackend(), LocalHashEmbedder(dim=16), FlatStructure(),"
        " DefaultStrategy())\n"
        "e.ingest('a note'); e.ask('note')"
    )
    assert "coniti.derived" in loaded and "crc32c" not in loaded


def test_what_ask_and_add_import_leaves_out_cryptography() -> None:
    """The modules ``coniti ask`` and ``coniti add`` import do not import cryptography (30 ms here):
    signing and checking checkpoints import it when they run."""
    loaded = _loaded_after(
        "import coniti.cli.app, coniti.cli.engine_cmds, coniti.container, coniti.impl.log, "
        "coniti.minilm"
    )
    assert "cryptography" not in loaded and "coniti.checkpoint" not in loaded
