"""The real-broker history checker (tests/history.py) sees a window of two writable
primaries - tried on samples that hold one."""

from __future__ import annotations

from tests.history import History, Sample
from tests.invariants import Cluster


def test_the_history_names_every_sample_with_the_pointer_moved_and_the_source_open() -> None:
    history = History("sqlite://", Cluster("dc1", "127.0.0.1:1"), "orders")
    history.samples = [
        Sample(0.0, None, False),  # before the move: dc1 is the primary, open - fine
        Sample(0.1, None, True),  # fenced, pointer not moved yet - fine
        Sample(0.2, "dc2", True),  # moved, dc1 fenced - fine
        Sample(0.3, "dc2", False),  # moved, dc1 open again: two writable primaries
    ]
    assert history.moves() == [None, "dc2"]
    assert history.violations("dc2") == ["at 0.30s the pointer was on dc2 and dc1 was not fenced"]
