"""The README's "Proving what the memory holds" example runs, and its checks bite."""

from __future__ import annotations

import pytest
from readme_blocks import python_blocks

from coniti.errors import ProofError


def _block() -> str:
    [block] = python_blocks("Proving what the memory holds")
    return block


def test_the_proofs_example_runs() -> None:
    """The example signs a checkpoint, verifies it and both proofs against it without an error."""
    namespace: dict[str, object] = {}
    exec(compile(_block(), "README.md", "exec"), namespace)
    assert namespace["head"].size == 10  # type: ignore[attr-defined]


def test_the_proofs_example_fails_on_a_rewritten_event() -> None:
    """With event 4's chain hash changed after the checkpoint, the inclusion check refuses it."""
    block = _block().replace(
        "leaf_hash=leaf_hash(chain_hashes[3])", "leaf_hash=leaf_hash(b'\\xff' * 32)"
    )
    assert "b'\\xff' * 32" in block
    with pytest.raises(ProofError, match="does not lead to the root"):
        exec(compile(block, "README.md", "exec"), {})
