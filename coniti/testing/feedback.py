"""Conformance: feedback (``feedback`` / ``feedback_weights``), for backends that declare
:attr:`~coniti.memory.MemoryBackend.supports_feedback`; others must refuse it with
:class:`~coniti.errors.NotSupported`. Every write runs on the sync and the async path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coniti.errors import ContractError, NotSupported, RecordNotFound
from coniti.memory import DeleteRequest, FeedbackRequest, FeedbackResult, MemoryBackend
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import put, record

__all__ = ["FeedbackTests"]


class FeedbackTests(BackendFixtures):
    """Feedback weights: recorded on live records, summed per id and namespace, refused otherwise."""

    @pytest.fixture(params=["sync", "async"])
    def give(self, request: pytest.FixtureRequest) -> Any:
        """``give(backend, id, weight, namespace=())`` through ``feedback`` or ``afeedback``."""

        def call(backend: MemoryBackend, id_: str, weight: float, namespace: tuple[str, ...] = ()) -> FeedbackResult:
            req = FeedbackRequest(id=id_, weight=weight, namespace=namespace)
            if request.param == "sync":
                return backend.feedback(req)
            return asyncio.run(backend.afeedback(req))

        return call

    @pytest.fixture
    def fed(self, backend: MemoryBackend) -> MemoryBackend:
        if not backend.supports_feedback:
            pytest.skip("the backend does not declare supports_feedback")
        put(backend, record("a", 1.0), record("b", 2.0))
        return backend

    def test_an_undeclared_backend_refuses_feedback(self, backend: MemoryBackend) -> None:
        """Without supports_feedback, feedback and feedback_weights raise NotSupported."""
        if backend.supports_feedback:
            pytest.skip("the backend declares supports_feedback")
        put(backend, record("a", 1.0))
        with pytest.raises(NotSupported):
            backend.feedback(FeedbackRequest(id="a", weight=1.0))
        with pytest.raises(NotSupported):
            backend.feedback_weights()

    def test_weights_of_an_id_add_up(self, fed: MemoryBackend, give: Any) -> None:
        """Each feedback adds its weight; the result and feedback_weights give the sum."""
        assert give(fed, "a", 1.0).weight == 1.0
        assert give(fed, "a", -0.25).weight == 0.75
        assert fed.feedback_weights() == {"a": 0.75}

    def test_feedback_on_an_id_that_is_not_live_is_refused(self, fed: MemoryBackend, give: Any) -> None:
        """An unknown or deleted id raises RecordNotFound naming it and records nothing."""
        fed.delete(DeleteRequest(ids=["b"]))
        for missing in ("ghost", "b"):
            with pytest.raises(RecordNotFound, match=repr(missing)):
                give(fed, missing, 1.0)
        assert fed.feedback_weights() == {}

    def test_feedback_is_per_namespace(self, fed: MemoryBackend, give: Any) -> None:
        """The same id in another namespace has its own weights."""
        put(fed, record("a", 1.0, namespace=("x",)))
        give(fed, "a", 2.0, ("x",))
        assert fed.feedback_weights() == {} and fed.feedback_weights(("x",)) == {"a": 2.0}

    def test_weights_outlive_a_delete(self, fed: MemoryBackend, give: Any) -> None:
        """Feedback is about the id: deleting the record keeps its weight in feedback_weights."""
        give(fed, "a", 1.5)
        fed.delete(DeleteRequest(ids=["a"]))
        assert fed.feedback_weights() == {"a": 1.5}

    @pytest.mark.parametrize("weight", [float("nan"), float("inf"), True, "1"])
    def test_a_weight_that_is_not_a_finite_number_is_refused(self, weight: Any) -> None:
        """FeedbackRequest refuses a weight that is not a finite number, naming the field."""
        with pytest.raises(ContractError, match="weight"):
            FeedbackRequest(id="a", weight=weight)
