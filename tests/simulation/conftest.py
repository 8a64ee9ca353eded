"""What the simulation's tests share: a migrated store template per test module."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.simulation.world import Template


@pytest.fixture(scope="module")
def template() -> Iterator[Template]:
    """A store template for a module's schedules; drkit's own logs off meanwhile (the trace
    says what happened)."""
    logging.disable(logging.CRITICAL)
    found = Template()
    yield found
    found.close()
    logging.disable(logging.NOTSET)
