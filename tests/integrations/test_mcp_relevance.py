"""MCP recall (coniti.integrations.mcp): each hit's relevance (0 to 1) beside its score, and
min_relevance cutting on it, through the MCP SDK's real Client, in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mcp import connect, ok, refused, remember

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_recall_gives_relevance_and_min_relevance_cuts_on_it(tmp_path: Path) -> None:
    """recall's hits carry a relevance in [0, 1] (best first); min_relevance keeps those at or
    above it, in order; a min_relevance above 1 is refused naming it."""
    async with connect(tmp_path / "store") as client:
        for id_, text in (("t1", "tea in Lyon"), ("t2", "coffee in Paris"), ("t3", "tea and coffee"), ("t4", "rain")):
            await remember(client, id_, text)
        every = (await ok(client, "recall", {"query": "tea Lyon", "k": 10}))["hits"]
        values = [h["relevance"] for h in every]
        cut = sorted(values)[len(values) // 2]
        kept = (await ok(client, "recall", {"query": "tea Lyon", "k": 10, "min_relevance": cut}))["hits"]
        message = await refused(client, "recall", {"query": "tea", "min_relevance": 1.5})
    assert len(every) >= 3 and all(0.0 <= v <= 1.0 for v in values) and values == sorted(values, reverse=True)
    assert [h["id"] for h in kept] == [h["id"] for h in every if h["relevance"] >= cut]
    assert 0 < len(kept) < len(every)
    assert "min_relevance" in message
