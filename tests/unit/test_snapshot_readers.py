"""The plan's readers of a flow's target topics: kept open, cumulative, and patient with a
target that drops a connection (drkit.failover.snapshot.TargetReaders)."""

from __future__ import annotations

from typing import Any

import pytest

from drkit.config.model import FlowConfig
from drkit.errors import FatalKafkaError, RetriableKafkaError
from drkit.failover import snapshot
from drkit.kafka.clients import ClusterEndpoint
from drkit.offsets.checkpoint_store import CheckpointSnapshot


class FlakyCheckpoints:
    """Fails its first ``failures`` refreshes, then answers; counts stores made and closed."""

    made = 0
    closed = 0

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        FlakyCheckpoints.made += 1
        self.failures = 2
        self.calls = 0

    def refresh(self, timeout_s: float = 30.0) -> CheckpointSnapshot:
        self.calls += 1
        if self.calls <= self.failures:
            raise RetriableKafkaError("dc2: Broker transport failure")
        return CheckpointSnapshot({}, self.calls)

    def close(self) -> None:
        FlakyCheckpoints.closed += 1


def _readers(monkeypatch: pytest.MonkeyPatch) -> snapshot.TargetReaders:
    monkeypatch.setattr(snapshot, "CheckpointStore", FlakyCheckpoints)
    FlakyCheckpoints.made = FlakyCheckpoints.closed = 0
    flow = FlowConfig(source="dc1", target="dc2")
    return snapshot.TargetReaders(flow, ClusterEndpoint.plain("dc2", "127.0.0.1:1"))


def test_a_retriable_read_failure_is_tried_again_on_the_same_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readers = _readers(monkeypatch)
    first = readers.checkpoints()
    assert first.last_tick_ms == 3  # two failures, then the answer - from one reader
    assert readers.checkpoints().last_tick_ms == 4  # kept open: the next read continues it
    assert FlakyCheckpoints.made == 1
    readers.close()
    assert FlakyCheckpoints.closed == 1


def test_a_fatal_read_failure_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    readers = _readers(monkeypatch)

    def fatal(_self: Any, timeout_s: float = 30.0) -> CheckpointSnapshot:
        raise FatalKafkaError("dc2: not authorized")

    monkeypatch.setattr(FlakyCheckpoints, "refresh", fatal)
    with pytest.raises(FatalKafkaError):
        readers.checkpoints()
