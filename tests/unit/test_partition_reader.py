"""PartitionReader.end_offset tells a partition the cluster does not have from a read that
failed (security review 11, R11-L3): the first refutes an offset-sync claim there, the second
leaves it unchecked.  librdkafka answers ``_UNKNOWN_PARTITION`` for a partition its metadata
says does not exist (rd_kafka_topic_partition_list_query_leaders); where it times out instead
(a topic it has not cached as unknown), the topic's metadata is asked."""

from __future__ import annotations

from typing import Any

import pytest

# librdkafka's own errors and metadata, as the adapter sees them (test_kafka_errors.py alike)
from confluent_kafka import KafkaError as RdKafkaError  # noqa: TID251
from confluent_kafka import KafkaException  # noqa: TID251
from confluent_kafka.admin import (  # noqa: TID251
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)

from drkit.errors import KafkaError, RetriableKafkaError
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.partition_reader import PartitionMissing, PartitionReader
from drkit.records import TopicPartition


class _Consumer:
    def __init__(self, error: int, topics: dict[str, TopicMetadata] | None) -> None:
        self.error, self.topics = error, topics

    def get_watermark_offsets(self, *_args: Any, **_kwargs: Any) -> tuple[int, int]:
        raise KafkaException(RdKafkaError(self.error))

    def list_topics(self, topic: str, timeout: float) -> ClusterMetadata:
        if self.topics is None:
            raise KafkaException(RdKafkaError(RdKafkaError._TIMED_OUT))
        metadata = ClusterMetadata()
        metadata.topics = {k: v for k, v in self.topics.items() if k == topic}
        return metadata


def _topic(name: str, partitions: int, error: int | None = None) -> TopicMetadata:
    topic = TopicMetadata()
    topic.topic = name
    topic.partitions = {i: PartitionMetadata() for i in range(partitions)}
    topic.error = RdKafkaError(error) if error is not None else None
    return topic


def _reader(consumer: _Consumer) -> PartitionReader:
    reader = PartitionReader.__new__(PartitionReader)
    reader.endpoint = ClusterEndpoint.plain("dc2", "127.0.0.1:1")
    reader._consumer = consumer  # type: ignore[assignment]
    return reader


TP = TopicPartition("dc1.orders", 999)


@pytest.mark.parametrize(
    ("error", "topics", "raised"),
    [
        (RdKafkaError._UNKNOWN_PARTITION, None, PartitionMissing),
        (RdKafkaError._UNKNOWN_TOPIC, None, PartitionMissing),
        (RdKafkaError.UNKNOWN_TOPIC_OR_PART, None, PartitionMissing),
        # Timed out: the metadata says whether the partition exists.
        (RdKafkaError._TIMED_OUT, {"dc1.orders": _topic("dc1.orders", 3)}, PartitionMissing),
        (
            RdKafkaError.LEADER_NOT_AVAILABLE,
            {"dc1.orders": _topic("dc1.orders", 0, RdKafkaError.UNKNOWN_TOPIC_OR_PART)},
            PartitionMissing,
        ),
        (RdKafkaError._TIMED_OUT, {"dc1.orders": _topic("dc1.orders", 1000)}, RetriableKafkaError),
        (RdKafkaError._TIMED_OUT, None, RetriableKafkaError),  # metadata unanswered: no verdict
        (RdKafkaError._TIMED_OUT, {}, RetriableKafkaError),
        # Other errors are no answer about the partition: no metadata asked.
        (RdKafkaError._TRANSPORT, {"dc1.orders": _topic("dc1.orders", 3)}, RetriableKafkaError),
    ],
)
def test_the_end_of_a_partition_the_cluster_does_not_have(
    error: int, topics: dict[str, TopicMetadata] | None, raised: type[KafkaError]
) -> None:
    with pytest.raises(raised) as caught:
        _reader(_Consumer(error, topics)).end_offset(TP, timeout_s=0.1)
    assert caught.type is raised
