"""Small synchronous produce/consume helpers for tools, demos and tests.

Not for the replication hot path (see drkit.replication.worker): these block until done.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as RdTP
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from drkit.errors import KafkaError, RetriableKafkaError
from drkit.kafka.clients import ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.errors import callback_failure, translate
from drkit.records import Headers, Record, TopicPartition

# (key, value), or (key, value, headers of this record - after the batch's own headers)
Payload = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers]


def produce_batch(
    endpoint: ClusterEndpoint,
    topic: str,
    payloads: Iterable[Payload],
    partition: int | None = None,
    headers: Headers | None = None,
    timeout_s: float = 60.0,
    extra: dict[str, object] | None = None,
) -> int:
    """Produce every (key, value[, headers]) with acks=all, one producer for the whole
    stream (``payloads`` may be a generator: nothing is held but what is in flight), and wait
    for all acknowledgements.

    Returns the count delivered; raises KafkaError on the first delivery failure.
    """
    producer = make_producer(endpoint, extra)
    first_failure: list[object] = [None]

    def on_delivery(error: object, _message: object) -> None:
        # Runs inside poll/flush, possibly while confluent-kafka holds a fatal error as the
        # pending exception: plain bytecode only - a call into C here would turn that error
        # into a SystemError (drkit.kafka.errors.callback_failure).
        if error is not None and first_failure[0] is None:
            first_failure[0] = error

    count = 0
    header_list: list[tuple[str, str | bytes | None]] | None = list(headers) if headers else None
    for key, value, *own in payloads:
        record_headers = [*(header_list or ()), *own[0]] if own else header_list
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=-1 if partition is None else partition,
                    headers=record_headers or None,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        serve_producer(producer.poll, 0, topic)
    remaining = serve_producer(producer.flush, timeout_s, topic)
    if first_failure[0] is not None:
        raise translate(first_failure[0], f"produce to {topic}")
    if remaining:
        raise KafkaError(f"{endpoint.alias}: {remaining} records to {topic} not acknowledged")
    return count


def serve_producer(call: Callable[[float], int], timeout_s: float, topic: str) -> int:
    """``producer.poll``/``flush`` with a fatal client error raised as drkit's exception."""
    try:
        return call(timeout_s)
    except (SystemError, KafkaException) as err:
        cause = callback_failure(err)
        if cause is None:
            raise
        raise translate(cause, f"produce to {topic}") from None


def consume_all(
    endpoint: ClusterEndpoint,
    topic: str,
    expected: int | None = None,
    timeout_s: float = 30.0,
    partitions: Sequence[int] | None = None,
    isolation: str = "read_committed",
    complete: bool = False,
) -> list[Record]:
    """Read ``topic`` from the beginning to the end of every partition (throw-away consumer).

    Stops when every partition reported its end (and ``expected`` records arrived, if given),
    or at ``timeout_s`` with whatever was read - unless ``complete``: then a read that did not
    reach every partition's end raises KafkaError naming them (a recount must never be made of
    part of a topic: it would report what it did not read as not there).
    """
    from confluent_kafka import OFFSET_BEGINNING

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
            try:
                metadata = consumer.list_topics(topic, timeout=10)
            except KafkaException as err:
                raise translate(err.args[0], f"{endpoint.alias}: metadata of {topic}") from None
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
        behind = sorted(set(partitions) - at_end)
        if complete and behind:
            raise KafkaError(
                f"{endpoint.alias}: reading {topic}: partitions {behind} did not reach their end "
                f"within {timeout_s:g}s ({len(records)} records read)"
            )
        return records
    finally:
        consumer.close()


def consume_ranges(
    endpoint: ClusterEndpoint,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    timeout_s: float = 60.0,
    isolation: str = "read_committed",
) -> Iterator[Record]:
    """Every record at offsets ``[start, end)`` of each partition, partition by partition.

    Offsets without records (transaction markers, compacted or aborted records) are skipped;
    a range the source no longer has raises.  Raises RetriableKafkaError at ``timeout_s``.
    """
    consumer = make_consumer(
        endpoint,
        f"drkit-range-{uuid.uuid4().hex[:8]}",
        {
            "isolation.level": isolation,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        },
    )
    deadline = time.monotonic() + timeout_s
    try:
        for tp, (start, end) in sorted(ranges.items()):
            if end <= start:
                continue
            consumer.assign([RdTP(tp.topic, tp.partition, start)])
            position = start
            while position < end:
                if time.monotonic() > deadline:
                    raise RetriableKafkaError(
                        f"{endpoint.alias}: reading {tp} [{start}, {end}) took over {timeout_s}s"
                    )
                message = consumer.poll(0.5)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == RdKafkaError._PARTITION_EOF:
                        break  # nothing visible up to end (markers, aborted records)
                    raise translate(error, f"read {tp}")
                position = (message.offset() or 0) + 1
                if (message.offset() or 0) < end:
                    yield to_record(message)
    finally:
        consumer.close()


# The group coordinator is loading, moving or not elected yet (a broker just started or
# restarted): the commit succeeds once it is there.
_COORDINATOR_BUSY = ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")


def _coordinator_busy(err: BaseException) -> bool:
    return isinstance(err, RetriableKafkaError) and any(c in str(err) for c in _COORDINATOR_BUSY)


def commit_group_offsets(
    endpoint: ClusterEndpoint,
    group: str,
    offsets: Mapping[TopicPartition, int],
    coordinator_wait_s: float = 30.0,
) -> None:
    """Commit ``offsets`` for ``group`` the way an application that consumed up to them does
    (a consumer's synchronous commit, without joining the group).

    The broker refuses it while the group has active members.  Raises KafkaError naming the
    group and the first partition it refused - after trying again for ``coordinator_wait_s``
    while the group coordinator is loading or moving (any other refusal at once).
    """
    if not offsets:
        return
    for attempt in Retrying(
        retry=retry_if_exception(_coordinator_busy),
        stop=stop_after_delay(coordinator_wait_s),
        wait=wait_exponential(multiplier=0.1, max=2.0),
        reraise=True,
    ):
        with attempt:
            _commit_once(endpoint, group, offsets)


def _commit_once(
    endpoint: ClusterEndpoint, group: str, offsets: Mapping[TopicPartition, int]
) -> None:
    request = [RdTP(tp.topic, tp.partition, offset) for tp, offset in sorted(offsets.items())]
    consumer = make_consumer(endpoint, group)
    try:
        committed = consumer.commit(offsets=request, asynchronous=False) or []
    except KafkaException as err:
        raise translate(err, f"{endpoint.alias}: commit offsets of group {group}") from None
    finally:
        consumer.close()
    for tp in committed:
        if tp.error is not None:
            raise translate(tp.error, f"{endpoint.alias}: commit {group} {tp.topic}-{tp.partition}")


def canary_round_trip(endpoint: ClusterEndpoint, topic: str, timeout_s: float) -> float:
    """Produce one unique record to partition 0 of ``topic`` with acks=all, read it back at
    the offset the broker acknowledged; returns the round trip in milliseconds.

    Raises KafkaError saying which half failed (no acknowledgement, a delivery error, the
    record not read back within ``timeout_s``).
    """
    started = time.monotonic()
    token = uuid.uuid4().hex.encode()
    producer = make_producer(
        endpoint,
        {"linger.ms": 0, "message.timeout.ms": int(timeout_s * 1000), "compression.type": "none"},
    )
    delivered: list[tuple[object, int | None]] = []
    producer.produce(
        topic, token, None, 0, on_delivery=lambda err, msg: delivered.append((err, msg.offset()))
    )
    producer.flush(timeout_s)
    if not delivered:
        raise RetriableKafkaError(f"{endpoint.alias}: canary to {topic}: no acknowledgement")
    error, offset = delivered[0]
    if error is not None or offset is None:
        raise translate(error, f"{endpoint.alias}: canary to {topic}")
    consumer = make_consumer(endpoint, f"drkit-canary-{uuid.uuid4().hex[:8]}")
    try:
        consumer.assign([RdTP(topic, 0, offset)])
        message = consumer.poll(timeout_s)
    finally:
        consumer.close()
    if message is None or message.error() is not None or message.value() != token:
        raise RetriableKafkaError(
            f"{endpoint.alias}: canary record {topic}-0@{offset} not read back within {timeout_s}s"
        )
    return (time.monotonic() - started) * 1000


def to_record(message: object) -> Record:
    """A drkit Record from a confluent_kafka Message."""
    m: Any = message
    ts_type, ts = m.timestamp()
    # Positional, in Record's field order: a reader of drkit's own topics builds 500,000 of
    # these for one failover plan at 10,000 groups.
    return Record(
        m.topic(),
        m.partition(),
        m.offset(),
        m.key(),
        m.value(),
        tuple(m.headers() or ()),
        ts if ts_type != 0 else None,
    )
