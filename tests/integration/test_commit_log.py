"""Checkpoints that follow the source's ``__consumer_offsets`` (``checkpoint_commits_from:
offsets_topic``), on real brokers: every way a group's offsets get committed reaches the
standby's checkpoints - and a transaction that was aborted never does."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as RdTP

from drkit.errors import CommitLogUnreadable
from drkit.kafka import make_consumer, make_producer
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.offsets.commit_follower import STALE_AFTER_S, CommitFollower, CommitsRead
from drkit.records import Record, TopicPartition
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import OFFSETS_TOPIC
from tests.conftest import Names
from tests.failover_support import checkpointed
from tests.kafka_backends import ClusterUnderTest
from tests.kip848 import kip848_member_commits
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until


def _transactional_commit(
    setup: FlowSetup, group: str, tp: TopicPartition, offset: int, *, abort: bool
) -> None:
    """What an exactly-once application does: its offsets committed inside a transaction."""
    consumer = make_consumer(setup.source_endpoint, group)
    producer = make_producer(setup.source_endpoint, {"transactional.id": f"{group}-tx"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [RdTP(tp.topic, tp.partition, offset)], consumer.consumer_group_metadata(), 30
        )
        if abort:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    finally:
        consumer.close()


def test_checkpoints_follow_every_kind_of_commit_on_the_log_and_never_an_aborted_one(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(
        tmp_path, dc1, dc2, [topic], groups={"include": [f"{names.prefix}.*"]},
        checkpoint_commits_from="offsets_topic",
    )  # fmt: skip
    admin = dc1.admin()
    admin.create_topics([TopicSpec(topic, 2)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    for p in (0, 1):
        produce_batch(setup.source_endpoint, topic, [(None, b"x")] * 100, partition=p)
    before = names.group("before")  # committed before the worker starts: its admin snapshot
    admin.alter_group_offsets(before, {tp0: 10, tp1: 20})
    classic, new_protocol = names.group("classic"), names.group("kip848")
    exactly_once, aborted = names.group("eos"), names.group("aborted")
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: checkpointed(setup, {before: {tp0: 10, tp1: 20}}), 60, 0.5,
                   what="the snapshot's group checkpointed")  # fmt: skip
        # Then only the log tells: a consumer's commit, a KIP-848 member's, a transaction's,
        # an admin's move - and a transaction aborted after sending its offsets.
        consumer = make_consumer(setup.source_endpoint, classic)
        consumer.commit(offsets=[RdTP(topic, 0, 30)], asynchronous=False)
        consumer.close()
        kip848_member_commits(setup.source_endpoint, new_protocol, {tp1: 40})
        _transactional_commit(setup, exactly_once, tp0, 50, abort=False)
        _transactional_commit(setup, aborted, tp0, 60, abort=True)
        admin.alter_group_offsets(before, {tp0: 70, tp1: 20})
        expected = {
            before: {tp0: 70, tp1: 20},
            classic: {tp0: 30},
            new_protocol: {tp1: 40},
            exactly_once: {tp0: 50},
        }
        wait_until(lambda: checkpointed(setup, expected), 60, 0.5,
                   what="every commit checkpointed")  # fmt: skip
    topology = FlowTopology.of(setup.config.flows[0])
    store = CheckpointStore(setup.target_endpoint, topology.checkpoints_topic)
    try:
        assert store.refresh().for_group(aborted) == {}  # never committed: never checkpointed
    finally:
        store.close()


def test_a_follower_whose_last_read_is_too_old_starts_again_from_a_snapshot(
    dc1: ClusterUnderTest, names: Names
) -> None:
    """A follower frozen or failing for longer than the log keeps its tombstones would miss a
    group's deletion: its next read is a fresh snapshot (every group named), not the log from
    where it stopped.  A follower read recently goes on from the log (only the moved group)."""
    topic = names.topic("stale")
    admin = dc1.admin()
    admin.create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    produce_batch(dc1.endpoint, topic, [(None, b"x")] * 10)
    kept, deleted = names.group("kept"), names.group("deleted")
    admin.alter_groups_offsets({kept: {tp: 3}, deleted: {tp: 4}})
    now = [1_000_000.0]
    follower = CommitFollower(admin, lambda g: g in (kept, deleted), clock=lambda: now[0])
    try:
        first = follower.read()
        assert first.changed is None and set(first.committed) == {kept, deleted}
        admin.alter_group_offsets(kept, {tp: 5})
        now[0] += 60
        moved = wait_for_read(follower, lambda read: read.committed.get(kept) == {tp: 5})
        assert moved.changed == {kept}
        admin.alter_group_offsets(kept, {tp: 6})
        admin.delete_groups([deleted])
        now[0] += STALE_AFTER_S + 1
        fresh = follower.read()
        assert fresh.changed is None  # a snapshot, not the log from where it was
        assert dict(fresh.committed) == {kept: {tp: 6}}
    finally:
        follower.close()


def wait_for_read(
    follower: CommitFollower, done: Callable[[CommitsRead], bool], timeout_s: float = 30
) -> CommitsRead:
    """Reads until ``done`` (a commit reaches the log a moment after the admin call returns)."""
    found: list[CommitsRead] = []

    def check() -> bool:
        found.append(follower.read())
        return done(found[-1])

    wait_until(check, timeout_s, 0.2, what="the commit on the log")
    return found[-1]


class _Garbling:
    """A tailer of the source's log that hands one offset commit of ``group`` on as garbage -
    what a record this drkit cannot decode looks like to the follower."""

    def __init__(self, inner: TopicTailer, group: str) -> None:
        self.inner, self.group, self.garbled = inner, group.encode(), False

    def catch_up(self, timeout_s: float = 30.0) -> Iterator[Record]:
        for record in self.inner.catch_up(timeout_s):
            if not self.garbled and record.key is not None and self.group in record.key:
                self.garbled = True
                record = replace(record, key=b"\x00\x01\x00\xff")  # a key version, then junk
            yield record

    def close(self) -> None:
        self.inner.close()


def test_a_commit_the_follower_cannot_read_is_taken_from_a_snapshot_not_skipped(
    dc1: ClusterUnderTest, names: Names
) -> None:
    """The follower stops at a record it cannot decode (the round fails, naming it).  The
    tailer has moved past that record by then: reading on would never apply the commit it
    carried.  The next read starts again from a snapshot, which has it."""
    topic = names.topic("garbled")
    admin = dc1.admin()
    admin.create_topics([TopicSpec(topic, 1)])
    tp = TopicPartition(topic, 0)
    produce_batch(dc1.endpoint, topic, [(None, b"x")] * 10)
    group = names.group("garbled")
    admin.alter_group_offsets(group, {tp: 2})
    garbling: list[_Garbling] = []

    def tailer(start: Mapping[int, int]) -> TopicTailer:
        inner = TopicTailer(dc1.endpoint, OFFSETS_TOPIC, missing_ok=True, start=start)
        garbling.append(_Garbling(inner, group))
        return garbling[-1]  # type: ignore[return-value]

    follower = CommitFollower(admin, lambda g: g == group, tailer=tailer)
    try:
        assert follower.read().committed[group] == {tp: 2}
        admin.alter_group_offsets(group, {tp: 7})  # the commit the follower cannot read
        with pytest.raises(CommitLogUnreadable, match="malformed offset-commit key"):
            wait_for_read(follower, lambda read: False, timeout_s=30)
        assert garbling[0].garbled
        again = follower.read()  # a fresh start: the new tailer begins past the garbled record
        assert again.changed is None and again.committed[group] == {tp: 7}
    finally:
        follower.close()
