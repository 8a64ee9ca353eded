"""Pure and fake-backed tests of the worker's decisions: patience, resume points, progress
behind offset syncs, fencing before an exactly-once commit, worker identities."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.config.model import FlowConfig, RetryPolicy
from drkit.kafka.flow_clients import GroupFencedError, TargetProducer
from drkit.records import TopicPartition
from drkit.replication.assignment import SourceLog, StartFrom, plan_resume
from drkit.replication.commit import ProgressWriter, commit_unless_fenced
from drkit.replication.loss import LossReason
from drkit.replication.partition_state import PartitionState
from drkit.replication.progress import Progress, decode_progress
from drkit.replication.supervision import WorkerLiveness, backoff_s, out_of_patience
from drkit.replication_service import default_worker_id
from drkit.topology.flow import FlowTopology

TP = TopicPartition("orders", 0)

# -- patience -------------------------------------------------------------------------------


def test_a_flow_up_for_a_long_time_gets_the_whole_window_after_its_first_error() -> None:
    policy = RetryPolicy(give_up_after_s=600)
    liveness = WorkerLiveness(last_success=0.0)
    # Up for ten minutes, succeeding all along; the first error comes at t=601 s.
    liveness.succeeded(now=600.5)
    # (drkit used tenacity's stop_after_delay(600) before: counted from the first attempt at
    # t=0, it gave up right here.)
    assert not out_of_patience(liveness, policy, now=601.0)
    assert not out_of_patience(liveness, policy, now=600.5 + 599)
    assert out_of_patience(liveness, policy, now=600.5 + 601)


def test_by_default_a_flow_never_gives_up() -> None:
    liveness = WorkerLiveness(last_success=0.0)
    assert not out_of_patience(liveness, RetryPolicy(), now=10**9)


@given(st.integers(0, 200), st.floats(0.5, 120))
def test_backoff_is_capped_and_grows(failures: int, cap: float) -> None:
    policy = RetryPolicy(max_backoff_s=cap)
    wait = backoff_s(failures, policy)
    assert 0 <= wait <= cap
    assert backoff_s(failures + 1, policy) >= wait


# -- resume points ----------------------------------------------------------------------------


def _logs(start: int, end: int, tid: str | None = "A") -> dict[TopicPartition, SourceLog]:
    return {TP: SourceLog(start, end, tid)}


def test_resume_at_stored_progress_without_loss() -> None:
    [plan] = plan_resume(
        "f", [TP], {TP: Progress(TP, 70, topic_id="A")}, _logs(0, 90), StartFrom.EARLIEST, 0
    )
    assert (plan.offset, plan.loss, plan.fresh, plan.rewound) == (70, None, False, False)


def test_no_progress_starts_at_the_log_start_or_end() -> None:
    [early] = plan_resume("f", [TP], {}, _logs(10, 90), StartFrom.EARLIEST, 0)
    [late] = plan_resume("f", [TP], {}, _logs(10, 90), StartFrom.LATEST, 0)
    assert (early.offset, early.fresh, early.loss) == (10, True, None)
    assert (late.offset, late.fresh) == (90, True)


def test_progress_below_the_log_start_is_a_loss_and_resumes_at_the_start() -> None:
    [plan] = plan_resume(
        "f", [TP], {TP: Progress(TP, 400, topic_id="A")}, _logs(2000, 2400), StartFrom.EARLIEST, 0
    )
    assert plan.offset == 2000
    assert plan.loss is not None and plan.loss.count == 1600
    assert plan.loss.reason is LossReason.TRUNCATED


def test_progress_past_the_log_end_resumes_at_the_end_flagged() -> None:
    [plan] = plan_resume(
        "f", [TP], {TP: Progress(TP, 500, topic_id="A")}, _logs(0, 420), StartFrom.EARLIEST, 0
    )
    assert (plan.offset, plan.rewound, plan.loss) == (420, True, None)


def test_recreated_topic_resumes_at_its_start_and_counts_what_was_known() -> None:
    stored = {TP: Progress(TP, 300, topic_id="old", source_end=350)}
    [plan] = plan_resume("f", [TP], stored, _logs(0, 500, "new"), StartFrom.EARLIEST, 0)
    assert plan.offset == 0
    assert plan.loss is not None and (plan.loss.first_offset, plan.loss.count) == (300, 50)


def test_progress_records_carry_topic_id_and_source_end() -> None:
    record = Progress(TP, 5, "w", 1, False, "tid-1", 9)
    decoded = decode_progress(b"dc2/orders/0", record.value())
    assert decoded is not None and decoded[1] == record
    legacy = decode_progress(b"dc2/orders/0", b'{"next": 5}')
    assert legacy is not None and (legacy[1].topic_id, legacy[1].source_end) == (None, None)


# -- progress behind offset syncs -----------------------------------------------------------


class _FakeProducer:
    """Collects produced records and their delivery callbacks (no Kafka)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, Callable[[Any, Any], None]]] = []

    def produce(
        self, topic: str, value: bytes, key: bytes, partition: int, on_delivery: Any = None
    ) -> None:
        self.sent.append((topic, key, on_delivery))

    def poll(self, _timeout: float) -> int:
        return 0

    def ack(self, topic: str, error: Any = None) -> int:
        """Deliver every record of ``topic`` sent so far; returns how many."""
        done = [r for r in self.sent if r[0] == topic]
        self.sent = [r for r in self.sent if r[0] != topic]
        for _t, _k, callback in done:
            callback(error, None)
        return len(done)

    def topics(self) -> list[str]:
        return [t for t, _k, _c in self.sent]


def _writer(
    immediate: bool = False,
) -> tuple[ProgressWriter, _FakeProducer, list[Mapping[TopicPartition, int]]]:
    producer = _FakeProducer()
    durable: list[Mapping[TopicPartition, int]] = []
    topology = FlowTopology.of(FlowConfig(source="dc1", target="dc2"))
    writer = ProgressWriter(
        cast(TargetProducer, producer), topology, "w", immediate, durable.append
    )
    return writer, producer, durable


def _state_with_acks(count: int) -> PartitionState:
    state = PartitionState(TP, "dc1.orders", 1, "dc1", 0, b"o")
    for offset in range(count):
        state.pending.append(offset)
        assert state.tracker is not None
        state.tracker.observe(offset, offset)
        state.done(offset)
    return state


def test_progress_is_produced_only_after_its_offset_syncs_are_acknowledged() -> None:
    writer, producer, durable = _writer()
    syncs, progress = "drkit-offset-syncs.dc1.internal", "drkit-progress.dc1.internal"
    writer.stage([_state_with_acks(10)])
    assert producer.topics() == [syncs], "progress must wait for the runs"
    assert producer.ack(syncs) == 1
    writer.release()
    assert producer.topics() == [progress]
    producer.ack(progress)
    assert durable == [{TP: 10}]


def test_a_failed_offset_sync_write_blocks_this_and_every_later_progress() -> None:
    writer, producer, durable = _writer()
    syncs = "drkit-offset-syncs.dc1.internal"
    state = _state_with_acks(10)
    writer.stage([state])
    producer.ack(syncs, error=_Error())
    for offset in range(10, 15):  # more records, a later round
        state.pending.append(offset)
        assert state.tracker is not None
        state.tracker.observe(offset, offset)
        state.done(offset)
    writer.stage([state])
    producer.ack(syncs)
    writer.release()
    assert writer.failure is not None
    assert "drkit-progress.dc1.internal" not in producer.topics()
    assert durable == []


def test_exactly_once_rounds_are_released_at_once() -> None:
    writer, producer, _durable = _writer(immediate=True)
    writer.stage([_state_with_acks(3)])
    assert sorted(producer.topics()) == [
        "drkit-offset-syncs.dc1.internal",
        "drkit-progress.dc1.internal",
    ]


class _Error:
    def name(self) -> str:
        return "REQUEST_TIMED_OUT"

    def str(self) -> str:
        return "timed out"

    def code(self) -> int:
        return 7


# -- fencing ----------------------------------------------------------------------------------


class _Member:
    def __init__(self, fenced: bool) -> None:
        self.fenced = fenced

    def commit(self, offsets: Mapping[TopicPartition, int], wait: bool) -> None:
        assert wait, "only a synchronous commit proves membership"
        if self.fenced:
            raise GroupFencedError("ILLEGAL_GENERATION")


class _Transaction:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def commit_transaction(self, timeout_s: float) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout_s: float) -> None:
        self.calls.append("abort")


def test_a_zombie_aborts_instead_of_committing() -> None:
    transaction = _Transaction()
    with pytest.raises(GroupFencedError):
        commit_unless_fenced(_Member(fenced=True), transaction, {TP: 5})
    assert transaction.calls == ["abort"]


def test_a_worker_that_lost_every_partition_aborts_instead_of_committing() -> None:
    """No offsets, nothing to prove membership with (the group commit of nothing succeeds
    without asking the coordinator): a worker whose assignment was lost while it was paused
    would otherwise commit the copies it made as a zombie.  CI caught 50 records twice."""
    transaction = _Transaction()
    with pytest.raises(GroupFencedError):
        commit_unless_fenced(_Member(fenced=False), transaction, {})
    assert transaction.calls == ["abort"]


def test_a_current_member_commits() -> None:
    transaction = _Transaction()
    commit_unless_fenced(_Member(fenced=False), transaction, {TP: 5})
    assert transaction.calls == ["commit"]


# -- partition state ------------------------------------------------------------------------


def test_progress_moves_over_offsets_without_records_only_when_idle() -> None:
    state = PartitionState(TP, "dc1.orders", 1, "dc1", 10, b"o")
    state.pending.append(10)
    state.passed(12)
    assert state.next_offset == 10  # a record is in flight: never claim past it
    state.done(10)
    state.passed(12)  # a commit marker at 11
    assert state.next_offset == 12


# -- identities -------------------------------------------------------------------------------


def test_default_worker_ids_are_unique_per_process() -> None:
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from drkit.replication_service import default_worker_id as d; print(d())",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    ).stdout.strip()
    mine = default_worker_id()
    assert other != mine
    assert other.rsplit("-", 1)[0] == mine.rsplit("-", 1)[0]  # same host part
