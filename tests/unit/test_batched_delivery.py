"""Batched delivery reports: a sentinel's report confirms the records before it only when their
target offsets prove that none was lost (drkit.replication.delivery, drkit.replication.copier).

A fake producer stands in for librdkafka: it appends records to per-partition logs, calls each
record's own callback (if any) in produce order when polled, and can drop records silently -
the way a timed-out or refused batch fails without a report when no callback is attached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from drkit.config.model import FlowConfig
from drkit.kafka.flow_clients import DeliveryFailureKind
from drkit.records import TopicPartition
from drkit.replication.copier import RecordCopier
from drkit.replication.delivery import DeliveryTracker
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import PartitionState
from drkit.topology.flow import FlowTopology

TOPIC = "orders"


class Msg:
    """A consumed source record, or a delivered target record, as librdkafka shows one."""

    def __init__(
        self, topic: str, partition: int, offset: int, error: Any = None, key: bytes = b"k"
    ) -> None:
        self._topic, self._partition, self._offset, self._error = topic, partition, offset, error
        self._key = key

    def error(self) -> Any:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes]]:
        return []

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return b"v"

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)


class TimedOut:
    """A librdkafka delivery error, as far as drkit reads one."""

    def name(self) -> str:
        return "REQUEST_TIMED_OUT"

    def str(self) -> str:
        return "Broker: Request timed out"

    def code(self) -> int:
        return 7


class FakeProducer:
    """Per-partition logs; reports are served by ``poll`` in produce order."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], int] = {}  # next target offset per partition
        self.sent: list[tuple[int, bool]] = []  # (partition, carried a callback)
        self._reports: list[tuple[Callable[[Any, Any], None], Msg]] = []
        self.drop: set[int] = set()  # indexes (in self.sent) of records lost without a trace
        self.foreign: dict[int, int] = {}  # before send index i, another producer writes n

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        callback: Callable[[Any, Any], None] | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """confluent-kafka's signature, positional order included."""
        on_delivery = callback or on_delivery
        index = len(self.sent)
        where = (topic, partition)
        self.logs[where] = self.logs.get(where, 0) + self.foreign.get(index, 0)
        self.sent.append((partition, on_delivery is not None))
        if index in self.drop:
            return  # failed; a record without a callback fails silently
        offset = self.logs[where]
        self.logs[where] = offset + 1
        if on_delivery is not None:
            self._reports.append((on_delivery, Msg(topic, partition, offset)))

    def poll(self, _timeout: float = 0) -> int:
        reports, self._reports = self._reports, []
        for callback, message in reports:
            callback(None, message)
        return len(reports)


def _copier(
    partitions: int = 2, flow: FlowConfig | None = None
) -> tuple[RecordCopier, DeliveryTracker, dict[Any, Any]]:
    topology = FlowTopology.of(flow or FlowConfig(source="dc1", target="dc2"))
    tracker = DeliveryTracker(lambda _s: None)
    parts: dict[tuple[str, int], PartitionState] = {}
    for p in range(partitions):
        parts[(TOPIC, p)] = PartitionState(
            TopicPartition(TOPIC, p), f"dc1.{TOPIC}", partitions, "dc1", 0, b"o"
        )

    def consume_error(error: Any, message: Any) -> None:
        raise AssertionError(f"unexpected consume error {error}")

    copier = RecordCopier(
        topology,
        ReplicationMetrics.create(CollectorRegistry()),
        tracker,
        parts,
        consume_error,
        lambda: None,
    )
    return copier, tracker, parts


def _batch(*runs: tuple[int, range]) -> list[Any]:
    return [Msg(TOPIC, p, o) for p, offsets in runs for o in offsets]


def test_only_the_base_and_the_last_record_of_each_run_carry_a_report() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 5)), (1, range(0, 3)), (0, range(5, 8))), producer)  # type: ignore[arg-type]
    carried = [i for i, (_p, cb) in enumerate(producer.sent) if cb]
    # p0: base (0), end of run (4); p1: base (5), end (7); p0 again: end (10)
    assert carried == [0, 4, 5, 7, 10]
    producer.poll()
    assert parts[(TOPIC, 0)].next_offset == 8 and not parts[(TOPIC, 0)].pending
    assert parts[(TOPIC, 1)].next_offset == 3
    tracker0 = parts[(TOPIC, 0)].tracker
    assert tracker0 is not None
    runs = [(s.run.src_start, s.run.dst_start, s.run.length) for s in tracker0.drain()]
    assert runs == [(0, 0, 8)]  # one exact run, built from three confirmations
    assert tracker.failure is None


def test_a_record_lost_without_a_report_confirms_nothing_of_its_chunk() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 5))), producer)  # type: ignore[arg-type]
    producer.poll()
    assert parts[(TOPIC, 0)].next_offset == 5
    producer.drop = {7}  # the third record of the next run (source offset 7) is lost
    copier.copy(_batch((0, range(5, 12))), producer)  # type: ignore[arg-type]
    producer.poll()
    state = parts[(TOPIC, 0)]
    assert state.next_offset == 5, "progress passed a record the target never got"
    failure = tracker.take_failure()
    assert failure is not None
    _state, offset, reason = failure
    assert offset == 5 and reason.kind is DeliveryFailureKind.TRANSIENT
    assert "should end at" in reason.text
    assert tracker.per_record_reason is not None and not tracker.batched


def test_another_producer_writing_to_the_partition_also_stops_batching() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 3))), producer)  # type: ignore[arg-type]
    producer.poll()
    producer.foreign = {4: 1}  # someone else writes one record in the middle of our run
    copier.copy(_batch((0, range(3, 8))), producer)  # type: ignore[arg-type]
    producer.poll()
    assert parts[(TOPIC, 0)].next_offset == 3
    assert tracker.take_failure() is not None


def test_per_record_mode_reports_every_record_and_still_confirms() -> None:
    copier, tracker, parts = _copier()
    tracker.report_per_record("test")
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 4)), (1, range(0, 2))), producer)  # type: ignore[arg-type]
    assert all(cb for _p, cb in producer.sent)
    producer.poll()
    assert parts[(TOPIC, 0)].next_offset == 4 and parts[(TOPIC, 1)].next_offset == 2


def test_after_a_transaction_marker_the_next_run_needs_a_new_base() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 3))), producer)  # type: ignore[arg-type]
    producer.poll()
    producer.logs[(f"dc1.{TOPIC}", 0)] += 1  # the commit marker takes an offset
    tracker.rebase()
    copier.copy(_batch((0, range(3, 6))), producer)  # type: ignore[arg-type]
    assert [cb for _p, cb in producer.sent[3:]] == [True, False, True]  # base, -, sentinel
    producer.poll()
    assert tracker.failure is None
    assert parts[(TOPIC, 0)].next_offset == 6


def test_a_failed_sentinel_names_the_first_unconfirmed_offset() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    copier.copy(_batch((0, range(0, 3))), producer)  # type: ignore[arg-type]
    producer.poll()
    copier.copy(_batch((0, range(3, 9))), producer)  # type: ignore[arg-type]
    queue = parts[(TOPIC, 0)].queue
    assert queue is not None
    reports, producer._reports = producer._reports, []
    for callback, message in reports:
        callback(TimedOut(), message)
    failure = tracker.take_failure()
    assert failure is not None and failure[1] == 3
    assert parts[(TOPIC, 0)].next_offset == 3


def test_a_run_ending_in_filtered_records_is_still_confirmed_by_its_last_sent_record() -> None:
    flow = FlowConfig.model_validate(
        {
            "source": "dc1",
            "target": "dc2",
            "transforms": [{"type": "filter", "options": {"key_regex": "^drop$"}}],
        }
    )
    copier, tracker, parts = _copier(flow=flow)
    producer = FakeProducer()
    batch = [Msg(TOPIC, 0, o, key=b"drop" if o in (2, 5, 6) else b"k") for o in range(7)]
    copier.copy(batch, producer)  # type: ignore[arg-type]
    assert [cb for _p, cb in producer.sent] == [True, False, False, True]  # 0 | 1 3 4
    producer.poll()
    state = parts[(TOPIC, 0)]
    assert tracker.failure is None
    assert state.next_offset == 7 and not state.pending and not state.acked
    assert state.tracker is not None
    runs = [(s.run.src_start, s.run.dst_start, s.run.length) for s in state.tracker.drain()]
    assert runs == [(0, 0, 2), (3, 2, 2)]


def test_a_run_stopped_by_an_error_still_confirms_what_was_sent_before_it() -> None:
    copier, tracker, parts = _copier()
    producer = FakeProducer()
    batch = [*_batch((0, range(0, 5))), Msg(TOPIC, 0, 5, error="broken"), Msg(TOPIC, 0, 6)]
    with pytest.raises(AssertionError, match="unexpected consume error"):
        copier.copy(batch, producer)  # type: ignore[arg-type]
    assert [cb for _p, cb in producer.sent] == [True, False, False, False, True]
    producer.poll()
    assert tracker.failure is None
    assert parts[(TOPIC, 0)].next_offset == 5


def test_the_copier_relies_on_confluent_kafkas_positional_produce_order() -> None:
    """The copier calls librdkafka's produce positionally: (topic, value, key, partition,
    callback, on_delivery, timestamp, headers).  If a client release reorders them, the
    callback would not fire or a header list would land in an integer slot: fail here."""
    from drkit.kafka.clients import ClusterEndpoint, make_producer

    producer = make_producer(
        ClusterEndpoint.plain("nowhere", "127.0.0.1:1"),
        {"message.timeout.ms": 100, "log_level": 0},
    )
    reports: list[tuple[bool, int | None, bytes | None, bytes | None]] = []
    producer.produce(
        "t",
        b"value",
        b"key",
        3,
        lambda err, msg: reports.append((err is not None, msg.partition(), msg.key(), msg.value())),
        None,
        1_700_000_000_000,
        [("drkit-src", b"dc1/t/3/7")],
    )
    producer.flush(5)
    assert reports == [(True, 3, b"key", b"value")]  # timed out, reported to the callback
    with pytest.raises(TypeError):  # headers where the timestamp goes
        producer.produce("t", b"v", b"k", 0, None, None, [("h", b"x")])  # type: ignore[arg-type]
