"""The adapter survives librdkafka crashing on consumer-group requests during broker restarts.

librdkafka 2.11-2.16 abort or segfault the process when a broker restarts while
DescribeConsumerGroups / ListConsumerGroupOffsets are in flight (drkit.kafka.isolated).  drkit
runs those requests in a helper process; this test hammers them through restarts and checks that
this process is still here, errors were retriable, and answers are right afterwards.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import TopicPartition as RdTP

from drkit.errors import RetriableKafkaError
from drkit.kafka import KafkaAdmin, make_consumer
from drkit.kafka.admin import TopicSpec
from drkit.kafka.records import TopicPartition
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import wait_until


def test_group_requests_survive_broker_restarts(scratch: ClusterUnderTest, names: Names) -> None:
    topic, group = names.topic(), names.group()
    admin = KafkaAdmin(scratch.endpoint, default_timeout_s=1.0)
    admin.create_topics([TopicSpec(topic, 1)])
    consumer = make_consumer(scratch.endpoint, group)
    consumer.commit(offsets=[RdTP(topic, 0, 42)], asynchronous=False)
    consumer.close()
    stop = threading.Event()
    outcomes = {"ok": 0, "retriable": 0}

    def hammer() -> None:
        while not stop.is_set():
            try:
                admin.groups_offsets([group], timeout_s=1.0)
                admin.describe_groups([group], timeout_s=1.0)
                outcomes["ok"] += 1
            except RetriableKafkaError:
                outcomes["retriable"] += 1

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for thread in threads:
        thread.start()
    assert scratch.local is not None
    try:
        for _ in range(3):
            time.sleep(2)
            scratch.local.stop_broker(scratch.name)
            time.sleep(2)
            scratch.local.start_broker(scratch.name)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)

    # Still alive, and answering correctly after the storm (retriable errors are retried).
    def answer() -> dict[TopicPartition, int] | None:
        try:
            return dict(admin.groups_offsets([group], timeout_s=10)[group].offsets)
        except RetriableKafkaError:
            return None

    assert wait_until(answer, 60, 1.0) == {TopicPartition(topic, 0): 42}
    assert outcomes["ok"] > 0
    print(f"calls ok={outcomes['ok']} retriable={outcomes['retriable']}")
