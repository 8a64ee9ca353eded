"""Applications on KIP-848's rebalance protocol (``group.protocol=consumer``, Kafka 4): real
members that join a group, commit, and read - with the client directly, as an application
would, not through drkit's adapter."""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import TopicPartition as RdTP
from confluent_kafka.admin import AdminClient

from drkit.kafka import ClusterEndpoint, KafkaAdmin, make_consumer
from drkit.kafka.clients import client_settings
from drkit.records import TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from tests.replication_support import wait_until

NEW_PROTOCOL = {"group.protocol": "consumer"}


def kip848_member_commits(
    endpoint: ClusterEndpoint, group: str, offsets: Mapping[TopicPartition, int]
) -> str:
    """A real member on the new protocol joins ``group`` (subscribed to the offsets' topic),
    commits ``offsets`` and leaves; returns the group's type as the broker reports it."""
    [topic] = {tp.topic for tp in offsets}
    consumer = make_consumer(endpoint, group, NEW_PROTOCOL)
    try:
        consumer.subscribe([topic])
        wanted = {tp.partition for tp in offsets}

        def assigned() -> bool:
            consumer.poll(0.2)  # the protocol's heartbeats run from poll
            return {tp.partition for tp in consumer.assignment()} >= wanted

        wait_until(assigned, 60, 0.0, what=f"{group} assigned on the new protocol")
        request = [RdTP(tp.topic, tp.partition, o) for tp, o in sorted(offsets.items())]
        consumer.commit(offsets=request, asynchronous=False)
    finally:
        consumer.close()
    return group_type(endpoint, group)


def group_type(endpoint: ClusterEndpoint, group: str) -> str:
    admin = AdminClient(client_settings(endpoint, {}))
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return str(description.type.name)


def kip848_first_offsets(
    endpoint: ClusterEndpoint, replica: str, group: str, partitions: int
) -> dict[int, int]:
    """A member on the new protocol joins ``group`` on ``replica`` and reads until it got a
    record from every partition that has one left; per partition, the source offset
    (provenance) of the first record it read.  It commits nothing."""
    consumer = make_consumer(endpoint, group, NEW_PROTOCOL)
    first: dict[int, int] = {}
    ends = KafkaAdmin(endpoint).list_offsets(
        [TopicPartition(replica, p) for p in range(partitions)], "latest"
    )
    committed = KafkaAdmin(endpoint).group_offsets(group).offsets
    left = {tp.partition for tp, end in ends.items() if committed.get(tp, 0) < end}
    try:
        consumer.subscribe([replica])
        deadline = time.monotonic() + 60
        while set(first) < left and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                partition = message.partition()
                if message.error() is None and partition is not None and partition not in first:
                    header = dict(message.headers() or []).get(SOURCE_HEADER) or b""
                    raw = header.encode() if isinstance(header, str) else header
                    first[partition] = Provenance.decode(raw).offset
    finally:
        consumer.close()
    return first
