"""await_settled: a worker taking partitions over never reads progress below an open
transaction (a paused zombie's copies and progress may still commit)."""

from __future__ import annotations

import pytest

from drkit.errors import RetriableKafkaError
from drkit.replication.assigner import await_settled
from tests.fake_kafka import FakeCluster

PROGRESS = "drkit-progress.dc1.internal"
REPLICA = "dc1.orders"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def _cluster() -> FakeCluster:
    cluster = FakeCluster("dc2")
    cluster.add_topic(PROGRESS, 2)
    cluster.add_topic(REPLICA, 3)
    cluster.append(PROGRESS, 0, 40)
    cluster.append(PROGRESS, 1, 10)
    return cluster


def test_settled_topic_returns_at_once() -> None:
    clock = _Clock()
    await_settled(_cluster(), [PROGRESS], sleep=clock.sleep, clock=clock)
    assert clock.sleeps == 0


def test_waits_until_the_transaction_open_now_has_ended() -> None:
    cluster = _cluster()
    cluster.open_transaction(PROGRESS, 1)
    cluster.append(PROGRESS, 1, 5)  # the zombie's progress, not committed yet
    clock = _Clock()

    def later(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.sleeps == 30:  # the zombie wakes up and commits three seconds later
            cluster.end_transaction(PROGRESS, 1)

    await_settled(cluster, [PROGRESS], sleep=later, clock=clock)
    assert clock.sleeps == 30


def test_later_transactions_do_not_hold_the_wait() -> None:
    """Only what is open at the start counts: busy members keep opening new transactions."""
    cluster = _cluster()
    clock = _Clock()

    def open_new() -> None:  # after the ends were read, a live member opens a transaction
        cluster.open_transaction(PROGRESS, 0)
        cluster.append(PROGRESS, 0, 3)

    cluster.before_next("topic_offsets", lambda: cluster.before_next("topic_offsets", open_new))

    await_settled(cluster, [PROGRESS], sleep=clock.sleep, clock=clock)
    assert clock.sleeps == 0


def test_a_transaction_that_never_ends_is_an_error_naming_the_partitions() -> None:
    cluster = _cluster()
    cluster.append(PROGRESS, 0, 1)
    cluster.open_transaction(PROGRESS, 0)
    cluster.append(PROGRESS, 0, 1)
    clock = _Clock()
    with pytest.raises(RetriableKafkaError, match=f"open for 5s on {PROGRESS}:0;"):
        await_settled(cluster, [PROGRESS], timeout_s=5, sleep=clock.sleep, clock=clock)


def test_copies_without_progress_yet_hold_the_takeover_too() -> None:
    """Frozen while copying: the zombie's open transaction holds replica records but no progress
    record yet.  Resuming now would copy them again if it commits after waking."""
    cluster = _cluster()
    cluster.open_transaction(REPLICA, 2)
    cluster.append(REPLICA, 2, 500)
    clock = _Clock()

    def later(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.sleeps == 5:
            cluster.end_transaction(REPLICA, 2)

    await_settled(cluster, [PROGRESS, REPLICA], sleep=later, clock=clock)
    assert clock.sleeps == 5
