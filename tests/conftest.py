"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from coniti.structure import scoring

# No test reaches the Hugging Face hub: the minilm model comes from its package (or a test's own
# stand-in hub on 127.0.0.1, which sets HF_ENDPOINT and lifts this). Set in the environment, so
# every process a test starts inherits it.
os.environ["HF_HUB_OFFLINE"] = "1"


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
