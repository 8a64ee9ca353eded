"""Small synchronous produce/consume helpers for tools, demos and tests.

Not for the replication hot path (see drkit.replication.worker): these block until done.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence

from drkit.errors import KafkaError
from drkit.kafka.clients import ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.errors import translate
from drkit.kafka.records import Headers, Record

Payload = tuple[bytes | None, bytes | None]


def produce_batch(
    endpoint: ClusterEndpoint,
    topic: str,
    payloads: Iterable[Payload],
    partition: int | None = None,
    headers: Headers | None = None,
    timeout_s: float = 60.0,
    extra: dict[str, object] | None = None,
) -> int:
    """Produce every (key, value) with acks=all and wait for all acknowledgements.

    Returns the count delivered; raises KafkaError on the first delivery failure.
    """
    producer = make_producer(endpoint, extra)
    failures: list[KafkaError] = []

    def on_delivery(error: object, _message: object) -> None:
        if error is not None:
            failures.append(translate(error, f"produce to {topic}"))

    count = 0
    header_list: list[tuple[str, str | bytes | None]] | None = list(headers) if headers else None
    for key, value in payloads:
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=-1 if partition is None else partition,
                    headers=header_list,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    if failures:
        raise failures[0]
    if remaining:
        raise KafkaError(f"{endpoint.alias}: {remaining} records to {topic} not acknowledged")
    return count


def consume_all(
    endpoint: ClusterEndpoint,
    topic: str,
    expected: int | None = None,
    timeout_s: float = 30.0,
    partitions: Sequence[int] | None = None,
    isolation: str = "read_committed",
) -> list[Record]:
    """Read ``topic`` from the beginning to the end of every partition (throw-away consumer).

    Stops when every partition reported its end (and ``expected`` records arrived, if given),
    or at ``timeout_s`` with whatever was read.
    """
    from confluent_kafka import OFFSET_BEGINNING
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import TopicPartition as RdTP

    consumer = make_consumer(
        endpoint,
        f"drkit-reader-{uuid.uuid4().hex[:8]}",
        {
            "isolation.level": isolation,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        },
    )
    try:
        if partitions is None:
            metadata = consumer.list_topics(topic, timeout=10)
            partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([RdTP(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Record] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            enough = expected is None or len(records) >= expected
            if enough and len(at_end) == len(partitions):
                break
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() == RdKafkaError._PARTITION_EOF:
                        at_end.add(message.partition() or 0)
                        continue
                    raise translate(error, f"consume {topic}")
                at_end.discard(message.partition() or 0)
                records.append(to_record(message))
        return records
    finally:
        consumer.close()


def to_record(message: object) -> Record:
    """A drkit Record from a confluent_kafka Message."""
    ts_type, ts = message.timestamp()  # type: ignore[attr-defined]
    raw_headers = message.headers() or ()  # type: ignore[attr-defined]
    return Record(
        topic=message.topic(),  # type: ignore[attr-defined]
        partition=message.partition(),  # type: ignore[attr-defined]
        offset=message.offset(),  # type: ignore[attr-defined]
        key=message.key(),  # type: ignore[attr-defined]
        value=message.value(),  # type: ignore[attr-defined]
        headers=tuple(raw_headers),
        timestamp_ms=ts if ts_type != 0 else None,
    )
