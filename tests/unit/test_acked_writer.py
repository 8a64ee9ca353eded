"""A write counts once the broker acknowledged it: the checkpointer remembers a checkpoint as
written only then, so one whose delivery failed is written again the next round instead of
being believed on the target.

A fake producer stands in for librdkafka: ``produce`` queues, ``flush`` runs each record's
delivery callback, failing the ones the test marks, with ``flush`` returning 0 as librdkafka's
does for a record whose delivery failed (it is no longer queued).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from drkit.config.model import ClusterConfig, FlowConfig
from drkit.errors import KafkaError
from drkit.kafka.acked_writer import AckedWriter
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.offsets.checkpointer import Checkpointer
from drkit.offsets.metrics import CheckpointMetrics
from drkit.records import TopicPartition
from drkit.translation import Method, Translated


class Refused:
    """What librdkafka hands a delivery callback for a failed record."""

    def __str__(self) -> str:
        return "REQUEST_TIMED_OUT"


class FakeProducer:
    def __init__(self) -> None:
        self.queued: list[tuple[bytes | None, Callable[[object, object], None]]] = []
        self.on_cluster: list[bytes | None] = []
        self.fail_next = 0  # the next n deliveries fail
        self.stuck = 0  # the last n queued records are still queued at the deadline

    def produce(self, topic: str, **kwargs: Any) -> None:
        self.queued.append((kwargs["value"], kwargs["on_delivery"]))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        served = self.queued[: len(self.queued) - self.stuck]
        self.queued = self.queued[len(served) :]
        for value, delivered in served:
            if self.fail_next:
                self.fail_next -= 1
                delivered(Refused(), None)
            else:
                self.on_cluster.append(value)
                delivered(None, None)
        return len(self.queued)


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> FakeProducer:
    fake = FakeProducer()
    monkeypatch.setattr("drkit.kafka.acked_writer.make_producer", lambda *_a, **_k: fake)
    return fake


ENDPOINT = ClusterEndpoint("dc2", ClusterConfig(bootstrap_servers="127.0.0.1:1"))


def test_confirm_returns_what_was_acknowledged_and_counts_the_rest(
    producer: FakeProducer,
) -> None:
    writer = AckedWriter(ENDPOINT)
    for n in range(4):
        writer.send("t", b"v%d" % n, None, token=n)
    producer.fail_next, producer.stuck = 1, 1
    confirmed = writer.confirm(1.0, "t")
    assert confirmed.acknowledged == (1, 2)
    assert confirmed.unconfirmed == 2  # one failed, one still queued
    assert confirmed.error is not None and "REQUEST_TIMED_OUT" in confirmed.error
    with pytest.raises(KafkaError, match=r"2 records not acknowledged: .*REQUEST_TIMED_OUT"):
        confirmed.raise_unless_all("records")
    producer.stuck = 0
    assert writer.confirm(1.0, "t").acknowledged == (3,)  # the queued one, once delivered


def test_a_checkpoint_whose_delivery_failed_is_written_again(producer: FakeProducer) -> None:
    flow = FlowConfig(source="dc1", target="dc2")
    cluster = ClusterConfig(bootstrap_servers="127.0.0.1:1")
    checkpointer = Checkpointer(
        flow, cluster, cluster, CheckpointMetrics.create(CollectorRegistry()), connect=KafkaAdmin
    )
    result = Translated(
        TopicPartition("orders", 0), TopicPartition("dc1.orders", 0), 120, 117, Method.EXACT
    )
    producer.fail_next = 1
    checkpointer._emit("billing", result, 1_700_000_000.0)
    with pytest.raises(KafkaError, match="checkpoints not acknowledged"):
        checkpointer._confirm_checkpoints(1.0)
    assert producer.on_cluster == []
    checkpointer._emit("billing", result, 1_700_000_001.0)  # the next round: again
    checkpointer._confirm_checkpoints(1.0)
    assert len(producer.on_cluster) == 1
    checkpointer._emit("billing", result, 1_700_000_002.0)  # written: not again
    checkpointer._confirm_checkpoints(1.0)
    assert len(producer.on_cluster) == 1
