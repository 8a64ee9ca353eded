"""A flow that ends for good: on what (topic creation the target refuses for ever, a replica
routed onto an internal topic - at start or when a new source topic appears), and the exit
code `drkit replicate` gives for it (trial 5, e16c and e36)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from drkit.config.model import FlowConfig
from drkit.errors import (
    DrkitError,
    ExitCode,
    FatalKafkaError,
    ReplicationError,
    RetriableKafkaError,
)
from drkit.replication.background import TopicWatcher
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.topic_sync import TopicState, TopicSynchronizer, plan_topic_sync
from drkit.replication_service import _exit_code
from drkit.topology.flow import FlowTopology
from tests.fake_kafka import FakeCluster

REFUSED = "create topic dc1.neworders: INVALID_REPLICATION_FACTOR: only 1 broker(s) are registered"


def test_every_flow_that_ended_for_good_exits_10_and_only_a_bug_exits_1() -> None:
    """e16c: the README's 10 is "a flow stopped on an error it cannot ride out" - a Kafka
    answer no retry cures was exit 1, as if drkit had crashed."""
    assert _exit_code({"dc1->dc2": None}) == ExitCode.OK
    assert _exit_code({"dc1->dc2": FatalKafkaError(REFUSED)}) == ExitCode.REPLICATION_STOPPED
    assert _exit_code({"a": ReplicationError("cannot replicate t")}) == 10
    out_of_patience = RetriableKafkaError("dc2: list topics: timed out after 10s")
    assert _exit_code({"a": out_of_patience}) == 10
    assert _exit_code({"a": None, "b": FatalKafkaError(REFUSED)}) == 10
    assert _exit_code({"a": KeyError("bug")}) == ExitCode.FAILED  # drkit's own bug
    assert _exit_code({"a": KeyError("bug"), "b": FatalKafkaError(REFUSED)}) == 10


def _synchronizer(
    source: FakeCluster, target: FakeCluster, rename: Any = lambda t: f"dc1.{t}"
) -> TopicSynchronizer:
    return TopicSynchronizer(source, target, lambda _t: True, rename, None, False)


def test_a_replica_routed_onto_an_internal_topic_ends_the_flow_naming_it_and_writes_nothing() -> (
    None
):
    """e36: every topic routed onto __consumer_offsets was created in one request ("Duplicate
    topic name"), and the flow retried that for ever."""
    source, target = FakeCluster("dc1"), FakeCluster("dc2")
    source.add_topic("orders", 3)
    source.add_topic("payments", 2)
    target.add_topic("__consumer_offsets", 50)
    sync = _synchronizer(source, target, lambda _t: "__consumer_offsets")
    with pytest.raises(ReplicationError) as ended:
        sync.sync()
    assert "orders -> __consumer_offsets" in str(ended.value)
    assert "payments -> __consumer_offsets" in str(ended.value)
    assert "route" in str(ended.value)
    assert "create_topics" not in target.calls
    drkit_own = _synchronizer(source, target, lambda t: f"drkit-progress.{t}.internal")
    with pytest.raises(ReplicationError) as own:
        drkit_own.sync()
    assert "orders -> drkit-progress.orders.internal" in str(own.value)


def test_topics_routed_onto_one_replica_create_it_once_with_the_widest_partition_count() -> None:
    sources = {
        "a": TopicState("a", 3, {"retention.ms": "1"}),
        "b": TopicState("b", 6, {}),
        "c": TopicState("c", 1, {}),
    }
    plan = plan_topic_sync(sources, {}, lambda _t: "merged", 3, False)
    assert [(spec.name, spec.partitions) for spec in plan.create] == [("merged", 6)]
    grown = plan_topic_sync(sources, {"merged": TopicState("merged", 2, {})}, lambda _t: "merged",
                            3, False)  # fmt: skip
    assert grown.add_partitions == (("merged", 6),) and not grown.create
    assert plan_topic_sync(sources, {"merged": TopicState("merged", 6, {})}, lambda _t: "merged",
                           3, False).is_empty  # fmt: skip


def _watch(
    source: FakeCluster, target: FakeCluster, rename: Any = lambda t: f"dc1.{t}"
) -> tuple[TopicWatcher, list[DrkitError], list[frozenset[str]]]:
    flow = FlowConfig(source="dc1", target="dc2", topic_refresh_interval_s=0.01)
    ended: list[DrkitError] = []
    seen: list[frozenset[str]] = []
    watcher = TopicWatcher(
        FlowTopology.of(flow),
        _synchronizer(source, target, rename),
        source,
        ReplicationMetrics.create(CollectorRegistry()),
        threading.Lock(),
        lambda topics, _ids: seen.append(topics),
        ended.append,
    )
    return watcher, ended, seen


def _loop_briefly(watcher: TopicWatcher, seconds: float = 0.5) -> bool:
    """Run the watcher's loop for up to ``seconds``; whether it returned on its own."""
    quit_ = threading.Event()
    thread = threading.Thread(target=watcher.loop, args=(quit_,), daemon=True)
    thread.start()
    thread.join(seconds)
    returned = not thread.is_alive()
    quit_.set()
    thread.join(5)
    return returned


def test_a_new_topic_the_target_refuses_to_create_for_good_ends_the_flow_not_a_retry_loop() -> None:
    """The periodic topic sync logged "topic sync failed; will retry" for ever on a refusal no
    retry cures: the new topic was never copied, and nothing ended."""
    source, target = FakeCluster("dc1"), FakeCluster("dc2")
    source.add_topic("neworders", 1)

    def refuse() -> None:
        raise FatalKafkaError(REFUSED)

    target.before_next("create_topics", refuse)
    watcher, ended, seen = _watch(source, target)
    assert _loop_briefly(watcher), "the watcher went on retrying a refusal for good"
    assert [str(e) for e in ended] == [REFUSED] and seen == []
    assert target.calls.count("create_topics") == 1


def test_a_new_topic_routed_onto_an_internal_name_ends_the_flow() -> None:
    source, target = FakeCluster("dc1"), FakeCluster("dc2")
    source.add_topic("orders", 1)
    watcher, ended, _seen = _watch(source, target, lambda _t: "__consumer_offsets")
    assert _loop_briefly(watcher)
    assert len(ended) == 1 and isinstance(ended[0], ReplicationError)


def test_the_topic_watcher_still_rides_out_what_may_pass() -> None:
    source, target = FakeCluster("dc1"), FakeCluster("dc2")
    source.add_topic("orders", 1)

    def timed_out() -> None:
        raise RetriableKafkaError("dc2: create topics: timed out after 10s")

    target.before_next("create_topics", timed_out)
    watcher, ended, seen = _watch(source, target)
    assert not _loop_briefly(watcher), "the watcher gave up on a timeout"
    assert ended == [] and seen and "dc1.orders" in target.topics
