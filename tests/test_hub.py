"""coniti.hub: pinned model files fetched into the Hugging Face cache, against a local stand-in of the
hub on 127.0.0.1 (tests/hub_server.py) serving the installed model package's files. Never the internet.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import HubServer

from coniti import hub, minilm
from coniti.errors import ModelFileError

MODEL = minilm.HUB_MODEL
FILES = [f.path for f in MODEL.files]


@pytest.fixture(scope="module")
def packaged() -> Path:
    return minilm.packaged_model_dir()


@pytest.fixture
def server(packaged: Path) -> Iterator[HubServer]:
    with HubServer(packaged, MODEL.repo, MODEL.revision) as running:
        yield running


@pytest.fixture
def env(server: HubServer, tmp_path: Path) -> dict[str, str]:
    return {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": server.url}


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if not p.is_dir()] if path.exists() else []


def git_blob_sha1(blob: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(blob) + blob).hexdigest()


# -- the pins ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_pins_are_those_of_the_packaged_files(packaged: Path, name: str) -> None:
    """Each hub file's pinned size and SHA-256 are the installed model package's file's, and its etag
    is what the hub names it by: the SHA-256 of the LFS weights, the Git blob SHA-1 of the others."""
    pin = next(f for f in MODEL.files if f.path == name)
    blob = (packaged / name).read_bytes()
    assert (len(blob), hashlib.sha256(blob).hexdigest()) == (pin.size, pin.sha256)
    assert pin.etag == (pin.sha256 if name == "model.safetensors" else git_blob_sha1(blob))


def test_model_files_pins_agree_with_the_spec_pins() -> None:
    """The hub pins of the three model files are PINNED_SHA256, the digests in the spec."""
    pinned = {f.path: f.sha256 for f in MODEL.files if f.path in minilm.PINNED_SHA256}
    assert pinned == minilm.PINNED_SHA256


# -- where ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"HF_HUB_CACHE": "/a/hub", "HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}, "/a/hub"),
        ({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}, "/b/hub"),
        ({"XDG_CACHE_HOME": "/c"}, "/c/huggingface/hub"),
    ],
)
def test_cache_dir_follows_huggingface_hub(environ: dict[str, str], expected: str) -> None:
    """The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub."""
    assert hub.cache_dir(environ) == Path(expected)


def test_cache_dir_defaults_to_the_home_cache() -> None:
    """Without any of the variables, the cache is ~/.cache/huggingface/hub."""
    assert hub.cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_endpoint_defaults_to_huggingface_co() -> None:
    """$HF_ENDPOINT (trailing / dropped), else https://huggingface.co."""
    assert hub.endpoint({}) == "https://huggingface.co"
    assert hub.endpoint({"HF_ENDPOINT": "http://127.0.0.1:9/"}) == "http://127.0.0.1:9"


# -- fetching ---------------------------------------------------------------------------------


def test_fetch_lays_out_the_snapshot_as_huggingface_hub_does(
    env: dict[str, str], packaged: Path
) -> None:
    """A fetch leaves models--org--name/blobs/{etag} holding each file's bytes and
    snapshots/{revision}/{path} a relative symlink to it; cached() then finds the snapshot."""
    snapshot = hub.fetch(MODEL, env)
    root = Path(env["HF_HUB_CACHE"]) / "models--sentence-transformers--all-MiniLM-L6-v2"
    assert snapshot == root / "snapshots" / MODEL.revision
    for f in MODEL.files:
        link = snapshot / f.path
        assert link.is_symlink() and not os.readlink(link).startswith("/")
        assert link.resolve() == (root / "blobs" / f.etag).resolve()
        assert link.read_bytes() == (packaged / f.path).read_bytes()
    assert hub.cached(MODEL, env) == snapshot


def test_fetch_follows_the_lfs_redirect(env: dict[str, str], server: HubServer) -> None:
    """The weights are fetched through the hub's redirect, the small files directly."""
    hub.fetch(MODEL, env)
    resolve = f"/{MODEL.repo}/resolve/{MODEL.revision}/"
    assert sorted(server.requests) == sorted(
        [f"{resolve}{name}" for name in FILES] + ["/lfs/model.safetensors"]
    )


def test_second_fetch_makes_no_request(env: dict[str, str], server: HubServer) -> None:
    """Once the snapshot is complete, fetch returns it without contacting the hub."""
    hub.fetch(MODEL, env)
    server.requests.clear()
    assert hub.fetch(MODEL, env) == hub.snapshot_dir(MODEL, env)
    assert server.requests == []


def test_digest_mismatch_is_refused_and_nothing_is_left(
    env: dict[str, str], server: HubServer
) -> None:
    """A served file whose SHA-256 is not the pinned one is refused, naming it, and the fetch leaves
    no file and no directory in the cache (the files that did match are not kept either)."""
    server.corrupt.add("model.safetensors")
    with pytest.raises(ModelFileError, match=r"model\.safetensors: SHA-256 \w+ is not the pinned"):
        hub.fetch(MODEL, env)
    assert not Path(env["HF_HUB_CACHE"]).exists()


def test_interrupted_download_leaves_no_partial_file(
    env: dict[str, str], server: HubServer
) -> None:
    """A connection closed halfway through a file fails the fetch naming the file and how far it got;
    no partial file (nor any other) is left in the cache."""
    server.cut.add("model.safetensors")
    with pytest.raises(ModelFileError, match=r"model\.safetensors: the download broke off after"):
        hub.fetch(MODEL, env)
    assert files_under(Path(env["HF_HUB_CACHE"])) == []


def test_a_missing_file_on_the_server_is_an_http_error(
    env: dict[str, str], packaged: Path, tmp_path: Path
) -> None:
    """A 404 for a pinned file fails the fetch naming the URL and the status."""
    partial = tmp_path / "served"
    partial.mkdir()
    (partial / "config.json").write_bytes((packaged / "config.json").read_bytes())
    with (
        HubServer(partial, MODEL.repo, MODEL.revision) as other,
        pytest.raises(ModelFileError, match=r"sentence_bert_config\.json: HTTP 404"),
    ):
        hub.fetch(MODEL, {**env, "HF_ENDPOINT": other.url})
    assert files_under(Path(env["HF_HUB_CACHE"])) == []


def test_unreachable_endpoint_says_so(tmp_path: Path) -> None:
    """An endpoint nobody listens on fails the fetch with 'cannot reach' and the URL."""
    with socket.socket() as bound:  # a port taken then released: nothing listens on it
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
    env = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": url}
    with pytest.raises(ModelFileError, match=rf"cannot reach {url}/"):
        hub.fetch(MODEL, env, timeout=5)
    assert files_under(tmp_path / "cache") == []


def test_offline_makes_no_request(env: dict[str, str], server: HubServer) -> None:
    """With HF_HUB_OFFLINE=1 a fetch of missing files contacts nobody and names the variable."""
    with pytest.raises(ModelFileError, match="HF_HUB_OFFLINE is set"):
        hub.fetch(MODEL, {**env, "HF_HUB_OFFLINE": "1"})
    assert server.requests == []


def test_a_blob_already_cached_is_linked_without_download(
    env: dict[str, str], server: HubServer, packaged: Path
) -> None:
    """A blob of the same content already in the cache (say, another revision's, fetched by
    sentence-transformers) is checked and linked, not downloaded again."""
    weights = next(f for f in MODEL.files if f.path == "model.safetensors")
    blobs = Path(env["HF_HUB_CACHE"]) / MODEL.folder / "blobs"
    blobs.mkdir(parents=True)
    (blobs / weights.etag).write_bytes((packaged / "model.safetensors").read_bytes())
    hub.fetch(MODEL, env)
    assert not [r for r in server.requests if r.endswith("model.safetensors")]


def test_a_damaged_cached_blob_is_fetched_again(
    env: dict[str, str], server: HubServer, packaged: Path
) -> None:
    """A cached blob whose content is not the pinned one is replaced by a fetched, checked copy."""
    config = next(f for f in MODEL.files if f.path == "config.json")
    blobs = Path(env["HF_HUB_CACHE"]) / MODEL.folder / "blobs"
    blobs.mkdir(parents=True)
    (blobs / config.etag).write_bytes(b"{}")
    snapshot = hub.fetch(MODEL, env)
    assert (snapshot / "config.json").read_bytes() == (packaged / "config.json").read_bytes()


def test_a_partial_file_left_by_a_killed_fetch_is_removed(
    env: dict[str, str], server: HubServer
) -> None:
    """A temporary file a killed fetch left beside a blob is removed by the next fetch."""
    weights = next(f for f in MODEL.files if f.path == "model.safetensors")
    blobs = Path(env["HF_HUB_CACHE"]) / MODEL.folder / "blobs"
    blobs.mkdir(parents=True)
    stale = blobs / f".{weights.etag}.0123456789abcdef.partial"
    stale.write_bytes(b"half a file")
    hub.fetch(MODEL, env)
    assert not stale.exists()
    assert sorted(p.name for p in blobs.iterdir()) == sorted(f.etag for f in MODEL.files)
