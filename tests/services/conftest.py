"""Fixtures shared by the service tests."""
from __future__ import annotations

import pytest

from scheduler.pipelines import registry
from tests.services.semantics_helpers import counting_factory


@pytest.fixture
def counter():
    """`test.counting`: a pipeline whose source counts its extracts and records each window (see counting_factory)."""
    counter: dict = {}
    registry.register_pipeline("test.counting", counting_factory(counter), replace=True)
    yield counter
    registry._pipelines.pop("test.counting", None)
