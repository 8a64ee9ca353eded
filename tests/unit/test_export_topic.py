"""Opening a divergent-tail export topic (drkit.failover.steps.divergence.open_export_topic)."""

from __future__ import annotations

import pytest

from drkit.errors import RetriableKafkaError
from drkit.failover.steps.divergence import open_export_topic
from drkit.records import TopicPartition
from tests.fake_kafka import FakeCluster


def test_a_topic_just_created_is_read_once_its_partition_has_a_leader() -> None:
    """A busy-core run failed the tail-export test: the export created its topic and asked its
    offsets at once, before the client's metadata named the partition's leader - librdkafka
    answers "Failed to query partition leaders: No leaders found", fatal by design (a topic
    deleted under a read answers the same).  The export waits for the leader instead."""
    cluster = FakeCluster("dc2")
    cluster.leaderless_after_create = 3
    partition, first, end = open_export_topic(cluster, "lost-tail", wait_s=5.0, pause_s=0.0)
    assert (partition, first, end) == (TopicPartition("lost-tail", 0), 0, 0)
    # Asked until the metadata named a leader, then the offsets, once each.
    assert cluster.calls.count("list_topics") == 1 + 3 + 1
    assert cluster.calls.count("list_offsets") == 2


def test_a_partition_never_led_is_a_retriable_error_naming_the_topic() -> None:
    cluster = FakeCluster("dc2")
    cluster.leaderless_after_create = 10**6
    with pytest.raises(RetriableKafkaError, match=r"lost-tail.*no leader"):
        open_export_topic(cluster, "lost-tail", wait_s=0.05, pause_s=0.01)
    assert "list_offsets" not in cluster.calls


def test_an_existing_export_topic_is_read_without_waiting() -> None:
    cluster = FakeCluster("dc2")
    cluster.add_topic("lost-tail", 1)
    cluster.topics["lost-tail"].partitions[0].end = 7
    assert open_export_topic(cluster, "lost-tail")[1:] == (0, 7)
    assert cluster.calls.count("list_topics") == 2
