"""Container: pieces by name or instance, option routing, resolved(), registries and entry points."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from coniti import Container, ContractError, EmbeddingMismatch, Note, Query
from coniti.container import MEMORIES, ResolvedPiece
from coniti.embedding import EMBEDDERS, LocalHashEmbedder, RandomProjectionEmbedder
from coniti.errors import UnknownPiece
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.registry import Registry
from coniti.strategy import STRATEGIES, DefaultStrategy
from coniti.structure import STRUCTURES, FlatStructure, SegmentTreeStructure


def test_defaults() -> None:
    """The default container is in_memory + local_hash + flat + default."""
    c = Container()
    assert isinstance(c.memory, InMemoryBackend)
    assert isinstance(c.embedder, LocalHashEmbedder)
    assert isinstance(c.structure, FlatStructure)
    assert isinstance(c.strategy, DefaultStrategy)
    assert {p: v.name for p, v in c.resolved().items()} == {
        "memory": "in_memory",
        "embedding": "local_hash",
        "structure": "flat",
        "strategy": "default",
    }


def test_resolved_lists_name_options_and_spec_id() -> None:
    """resolved() gives each piece's name, full options and a prefixed spec id."""
    resolved = Container(structure="segment_tree", leaf_size=16).resolved()
    assert resolved["structure"].options["leaf_size"] == 16
    assert resolved["embedding"].options["dim"] == 256
    prefixes = {p: v.spec_id.split("-")[0] for p, v in resolved.items()}
    assert prefixes == {"memory": "mem", "embedding": "emb", "structure": "str", "strategy": "stg"}
    assert all(len(v.spec_id) == 16 for v in resolved.values())


def test_embedding_spec_id_is_the_one_in_memory() -> None:
    """resolved()['embedding'].spec_id is what the engine writes into the memory."""
    c = Container()
    c.engine.ingest(Note.create("hello"))
    stored = c.memory.get_meta(c.memory.meta_get_request("embedding_id")).value
    assert stored == c.resolved()["embedding"].spec_id == c.embedder.spec_id


def test_resolved_pieces_are_frozen_models_readable_both_ways() -> None:
    """Each resolved piece is a frozen ResolvedPiece; piece["spec_id"] reads piece.spec_id, and an
    unknown key raises KeyError."""
    piece = Container().resolved()["structure"]
    assert isinstance(piece, ResolvedPiece)
    assert piece["spec_id"] == piece.spec_id and piece["name"] == "flat"
    with pytest.raises(KeyError):
        piece["nope"]
    with pytest.raises(pydantic.ValidationError):
        piece.name = "other"  # type: ignore[misc]


def test_same_choices_give_same_spec_ids() -> None:
    """Two containers built alike resolve to identical spec ids (for non-path memories)."""
    a = Container(dim=64, structure="segment_tree").resolved()
    b = Container(dim=64, structure="segment_tree").resolved()
    assert a == b


def test_options_route_to_the_piece_that_takes_them() -> None:
    """An unprefixed option goes to the only piece that accepts it."""
    c = Container(embedding="random_projection", dim=32, seed=7, refuse_duplicates=False)
    assert c.embedder.options["dim"] == 32 and c.embedder.options["seed"] == 7
    assert c.strategy.options == {"refuse_duplicates": False, "duplicate_key": "text_timestamp"}


def test_prefixed_options(tmp_path: Path) -> None:
    """<piece>_<option> routes explicitly."""
    c = Container(memory="log", memory_path=tmp_path / "s", embedding_dim=16)
    try:
        assert isinstance(c.memory, LogBackend)
        assert c.embedder.dim == 16
        assert c.resolved()["memory"].options["path"] == str(tmp_path / "s")
    finally:
        c.close()


def test_unknown_option_lists_what_is_accepted() -> None:
    """An option no piece takes raises ContractError listing each piece's options."""
    with pytest.raises(ContractError, match="unknown option 'dimm'.*embedding 'local_hash': dim"):
        Container(dimm=3)


class SeededStrategy(DefaultStrategy):
    """A third-party strategy that also takes a ``seed``."""

    name = "seeded"

    def __init__(self, *, seed: int = 0) -> None:
        super().__init__()
        self.seed = seed


@pytest.fixture
def seeded() -> Iterator[None]:
    STRATEGIES.register("seeded", SeededStrategy)
    yield
    STRATEGIES.unregister("seeded")


def test_ambiguous_option_asks_for_a_prefix(seeded: None) -> None:
    """An option two pieces take must be prefixed; the prefixed form works."""
    with pytest.raises(ContractError, match="fits several pieces; write embedding_seed or strategy_seed"):
        Container(embedding="random_projection", strategy="seeded", seed=1)
    c = Container(embedding="random_projection", strategy="seeded", embedding_seed=1, strategy_seed=2)
    assert c.embedder.options["seed"] == 1
    assert isinstance(c.strategy, SeededStrategy) and c.strategy.seed == 2


def test_option_for_an_instance_is_refused() -> None:
    """Options cannot go to a piece given as an instance."""
    with pytest.raises(ContractError, match="embedding, which was given as an instance"):
        Container(embedding=LocalHashEmbedder(), embedding_dim=3)
    with pytest.raises(ContractError, match="unknown option 'dim'"):
        Container(embedding=LocalHashEmbedder(), dim=3)


def test_instances_are_used_as_given() -> None:
    """Pieces passed as instances are used, and named by their kind or name."""
    memory, embedder = InMemoryBackend(), RandomProjectionEmbedder(dim=8)
    c = Container(memory=memory, embedding=embedder, structure=SegmentTreeStructure(leaf_size=4))
    assert c.memory is memory and c.embedder is embedder
    assert c.resolved()["structure"].to_dict() == {
        "name": "segment_tree",
        "options": SegmentTreeStructure(leaf_size=4).options,
        "spec_id": c.resolved()["structure"].spec_id,
    }


def test_wrong_piece_type_is_refused() -> None:
    """A piece that is neither a name nor an instance of its kind raises ContractError."""
    with pytest.raises(ContractError, match="structure must be a registered name or a Structure"):
        Container(structure=FlatStructure)  # type: ignore[arg-type]


def test_unknown_piece_name_lists_registered() -> None:
    """An unknown name raises UnknownPiece listing the registered names."""
    with pytest.raises(UnknownPiece, match="unknown memory 'redis'; registered: in_memory, log"):
        Container(memory="redis")


def test_log_memory_needs_a_path() -> None:
    """memory='log' without path raises ContractError naming the option."""
    with pytest.raises(ContractError, match="memory 'log' needs option 'path'"):
        Container(memory="log")


def test_log_memory_end_to_end(tmp_path: Path) -> None:
    """With memory='log', notes survive closing and reopening the store."""
    with Container(memory="log", path=tmp_path / "s") as c:
        c.engine.ingest(Note(id="n1", text="met Ana about the budget", timestamp=1.0))
    with Container(memory="log", path=tmp_path / "s") as c:
        assert [h.note.id for h in c.engine.ask(Query(text="budget")).hits] == ["n1"]


def test_close_closes_only_a_memory_it_created(tmp_path: Path) -> None:
    """close() leaves a caller's memory open."""
    with LogBackend(tmp_path / "s") as store:
        with Container(memory=store) as c:
            c.engine.ingest(Note.create("x"))
        assert store.count(store.count_request()).count == 1


def test_other_embedding_on_existing_memory_is_refused() -> None:
    """Opening memory written by another embedding raises EmbeddingMismatch."""
    memory = InMemoryBackend()
    Container(memory=memory).engine.ingest(Note.create("x"))
    with pytest.raises(EmbeddingMismatch):
        Container(memory=memory, embedding="random_projection")


# -- third-party pieces -----------------------------------------------------------------------


class ReversedFlat(FlatStructure):
    """A third-party structure: flat under another name."""

    name = "reversed_flat"


@pytest.fixture
def registered() -> Iterator[None]:
    STRUCTURES.register("reversed_flat", ReversedFlat)
    yield
    STRUCTURES.unregister("reversed_flat")


def test_piece_registered_in_code(registered: None) -> None:
    """A structure registered by name is chosen by that name."""
    c = Container(structure="reversed_flat")
    assert isinstance(c.structure, ReversedFlat)
    assert c.resolved()["structure"].name == "reversed_flat"


def test_registering_a_taken_name_needs_replace() -> None:
    """Registering another factory under a taken name raises unless replace=True."""
    registry: Registry[object] = Registry("thing", "coniti.test-things")
    registry.register("a", dict)
    with pytest.raises(UnknownPiece, match="already registered"):
        registry.register("a", list)
    registry.register("a", list, replace=True)
    assert registry.create("a") == []


@pytest.fixture
def entry_point_package(tmp_path: Path) -> Iterator[None]:
    """An installed-looking distribution declaring pieces in coniti's entry-point groups."""
    (tmp_path / "coniti_plugin_demo.py").write_text(
        textwrap.dedent(
            """
            from coniti.embedding import LocalHashEmbedder
            from coniti.structure import FlatStructure

            class PluginFlat(FlatStructure):
                name = "plugin_flat"

            def tiny_hash(dim: int = 8) -> LocalHashEmbedder:
                return LocalHashEmbedder(dim=dim)
            """
        )
    )
    info = tmp_path / "coniti_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coniti-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[coniti.structures]\nplugin_flat = coniti_plugin_demo:PluginFlat\n"
        "broken = coniti_plugin_demo:Missing\n\n"
        "[coniti.embedders]\ntiny_hash = coniti_plugin_demo:tiny_hash\n"
    )
    sys.path.insert(0, str(tmp_path))
    STRUCTURES.rescan()
    EMBEDDERS.rescan()
    yield
    sys.path.remove(str(tmp_path))
    sys.modules.pop("coniti_plugin_demo", None)
    for registry, name in ((STRUCTURES, "plugin_flat"), (EMBEDDERS, "tiny_hash")):
        registry.unregister(name)
        registry.rescan()


def test_pieces_from_entry_points(entry_point_package: None) -> None:
    """Pieces declared in the coniti.* entry-point groups are listed and built by name."""
    assert "plugin_flat" in STRUCTURES.names()
    c = Container(structure="plugin_flat", embedding="tiny_hash", dim=12)
    assert type(c.structure).__name__ == "PluginFlat"
    assert c.embedder.dim == 12


def test_broken_entry_point_is_a_clear_error(entry_point_package: None) -> None:
    """An entry point that fails to load raises UnknownPiece naming it."""
    with pytest.raises(UnknownPiece, match="structure 'broken': entry point 'coniti_plugin_demo:Missing'"):
        Container(structure="broken")


def test_memories_registry_has_both_builtins() -> None:
    """in_memory and log are registered memory names."""
    assert {"in_memory", "log"} <= set(MEMORIES.names())


def test_stored_embedding_names_the_embedder_that_wrote_the_memory() -> None:
    """stored_embedding finds the registered embedder whose spec id the memory holds, in any
    namespace; memory with none gets the default."""
    from coniti.container import stored_embedding
    from coniti.memory import MetaSetRequest

    memory = InMemoryBackend()
    assert stored_embedding(memory) == "minilm"
    assert stored_embedding(memory, default="local_hash") == "local_hash"
    with Container(memory=memory, embedding="random_projection") as c:
        c.engine.ingest("a note", namespace=("alice", "work"))
    assert stored_embedding(memory) == "random_projection"
    memory.set_meta(MetaSetRequest(key="embedding_id", value="emb-000000000000", namespace=()))
    with pytest.raises(EmbeddingMismatch, match="emb-000000000000"):
        stored_embedding(memory)


def test_stored_embedding_of_a_built_in_embedder_reads_no_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memory written with an embedder registered in code is matched without reading the entry
    points (a scan of every installed distribution, paid by every CLI command)."""
    import importlib.metadata

    from coniti.container import stored_embedding
    from coniti.embedding import EMBEDDERS

    memory = InMemoryBackend()
    with Container(memory=memory, embedding="local_hash") as c:
        c.engine.ingest("a note")
    monkeypatch.setattr(EMBEDDERS, "_entry_points", None)

    def refuse(**kw: object) -> object:
        raise AssertionError("entry points read")

    monkeypatch.setattr(importlib.metadata, "entry_points", refuse)
    assert stored_embedding(memory) == "local_hash"


def test_in_order_yields_the_registered_names_then_the_other_entry_points() -> None:
    """Registry.in_order gives the names of names(registered_first=True), in the same order."""
    from coniti.embedding import EMBEDDERS

    assert list(EMBEDDERS.in_order()) == EMBEDDERS.names(registered_first=True)


def test_a_factory_given_as_an_import_path_loads_on_first_lookup() -> None:
    """register(name, "module:attribute") imports nothing until the name is looked up."""
    from coniti.registry import Registry

    registry: Registry[object] = Registry("piece", "coniti.test_pieces")
    registry.register("od", "collections:OrderedDict")
    assert registry.names(registered_first=True) == ["od"]
    import collections

    assert registry.get("od") is collections.OrderedDict
    registry.register("gone", "coniti_no_such_module:Thing")
    with pytest.raises(UnknownPiece, match="factory 'coniti_no_such_module:Thing'"):
        registry.get("gone")
    with pytest.raises(UnknownPiece, match="module:attribute"):
        registry.register("bad", "not a path")


def test_minilm_is_registered_without_importing_it() -> None:
    """Importing coniti does not import coniti.minilm (its extra is optional)."""
    import subprocess

    code = "import sys, coniti, coniti.container; print('coniti.minilm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
