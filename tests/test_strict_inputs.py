"""String fields take strings only, and results hold only JSON-able finite values: no silent coercion."""

from __future__ import annotations

import pytest

from coniti import ContractError, GetRequest, MetaGetRequest, MetaResult, Note, Query


@pytest.mark.parametrize(
    "build",
    [
        lambda: Note(id=b"n1", text="x", timestamp=1.0),
        lambda: Note(id="n1", text=b"x", timestamp=1.0),
        lambda: Query(text=b"x"),
        lambda: Query(near=b"n1"),
        lambda: GetRequest(ids=[b"n1"]),
        lambda: MetaGetRequest(key=b"k"),
    ],
    ids=["note.id", "note.text", "query.text", "query.near", "get.ids", "meta.key"],
)
def test_bytes_are_not_coerced_to_str(build: object) -> None:
    """Bytes given for a string field raise ContractError instead of being decoded silently."""
    with pytest.raises(ContractError):
        build()  # type: ignore[operator]


def test_meta_result_refuses_non_finite_value() -> None:
    """MetaResult.from_dict refuses NaN like every other JSON value coniti accepts."""
    with pytest.raises(ContractError, match="value"):
        MetaResult.from_dict({"value": float("nan")})
