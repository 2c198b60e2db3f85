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
