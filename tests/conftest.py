"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coniti.structure import scoring


@pytest.fixture(scope="module", params=["compiled", "numpy"])
def kernel_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a module's tests once on the compiled kernels (``coniti.structure._kernels``) and once
    on their numpy twins (``scoring.kernels`` set to None), so that both must pass. Module-scoped:
    hypothesis refuses function-scoped fixtures around ``@given`` tests."""
    if request.param == "compiled" and scoring.kernels is None:
        pytest.skip("coniti.structure._kernels was not built (no C compiler at install)")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "numpy":
            patch.setattr(scoring, "kernels", None)
        yield request.param


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (soaks) are skipped unless ``-m`` selects tests: ``-m slow`` runs
    them alone, ``-m "slow or not slow"`` everything."""
    if config.getoption("markexpr"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
