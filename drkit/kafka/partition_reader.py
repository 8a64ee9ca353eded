"""Read one partition from a given offset: "what would a consumer at this position read first?".

Used by offset translation to look at single positions: the binary search over provenance
headers, and ``offsets translate --verify`` (the first record a consumer at S reads on the
source, the first record a consumer at T reads on the target).  Every call assigns the partition
afresh at the offset, so calls are independent; records come in offset order up to the end of
the partition (the last stable offset under ``read_committed``, what a consumer there sees).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator
from contextlib import closing

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition as RdTP

from drkit.errors import FatalKafkaError, RetriableKafkaError
from drkit.kafka.clients import ClusterEndpoint, make_consumer
from drkit.kafka.errors import is_code, translate
from drkit.kafka.io import to_record
from drkit.records import Record, TopicPartition

# librdkafka's answers for a partition its metadata says does not exist: _UNKNOWN_PARTITION for
# a known topic without it, and for a topic it knows as unknown (every partition asked errored).
_MISSING = ("_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART")
# ... and what it answers when it never learnt the leader: the topic's metadata tells.
_UNTOLD = ("_TIMED_OUT", "LEADER_NOT_AVAILABLE")


class PartitionMissing(FatalKafkaError):
    """The cluster does not have the partition asked (its topic, or that partition of it)."""


class PartitionReader:
    """Positions reads on one cluster; not thread-safe.  ``reads`` counts the positionings."""

    def __init__(
        self, endpoint: ClusterEndpoint, isolation: str = "read_committed", batch: int = 500
    ) -> None:
        self.endpoint = endpoint
        self.batch = batch
        self.reads = 0
        self._consumer: Consumer = make_consumer(
            endpoint,
            f"drkit-position-{uuid.uuid4().hex[:8]}",
            {
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "enable.auto.offset.store": False,
                # A position below the log start reads from the start: the first record at or
                # after it is the first one that still exists.
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 10,
                "fetch.max.bytes": 1048576,
                "max.partition.fetch.bytes": 262144,
            },
        )

    def records_from(
        self, tp: TopicPartition, offset: int, timeout_s: float = 10.0
    ) -> Generator[Record, None, None]:
        """Records of ``tp`` at offsets ``>= offset`` in order, until the partition's end.

        Raises KafkaError on a read error, RetriableKafkaError when neither a record nor the
        end arrives within ``timeout_s`` (measured from the last record).
        """
        self._consumer.assign([RdTP(tp.topic, tp.partition, offset)])
        self.reads += 1
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                # poll() returns as soon as one event is there (consume() would wait to fill its
                # batch); then take whatever else is already fetched without waiting.
                first = self._consumer.poll(0.2)
                if first is None:
                    if time.monotonic() > deadline:
                        raise RetriableKafkaError(
                            f"{self.endpoint.alias}: reading {tp} from {offset} got neither a "
                            f"record nor its end within {timeout_s:.0f}s"
                        )
                    continue
                for message in [first, *self._consumer.consume(self.batch - 1, 0)]:
                    error = message.error()
                    if error is not None:
                        if error.code() == RdKafkaError._PARTITION_EOF:
                            return
                        raise translate(error, f"{self.endpoint.alias}: read {tp}")
                    deadline = time.monotonic() + timeout_s
                    yield to_record(message)
        finally:
            self._consumer.unassign()

    def first_from(self, tp: TopicPartition, offset: int, timeout_s: float = 10.0) -> Record | None:
        """The first record at ``>= offset`` (None: nothing there yet)."""
        with closing(self.records_from(tp, offset, timeout_s)) as records:
            return next(records, None)

    def end_offset(self, tp: TopicPartition, timeout_s: float = 10.0) -> int:
        """The partition's high watermark, asked of its leader (one request): no record lies
        at or after it yet."""
        try:
            _low, high = self._consumer.get_watermark_offsets(
                RdTP(tp.topic, tp.partition), timeout=timeout_s, cached=False
            )
        except KafkaException as error:
            context = f"{self.endpoint.alias}: watermarks of {tp}"
            if self._missing(tp, error, timeout_s):
                raise PartitionMissing(f"{context}: the cluster does not have it") from error
            raise translate(error, context) from error
        return int(high)

    def _missing(self, tp: TopicPartition, error: KafkaException, timeout_s: float) -> bool:
        """Whether ``error`` (asking ``tp``'s watermarks) says the cluster does not have the
        partition - or, where it does not tell (a timeout: a topic librdkafka has not cached as
        unknown), whether the topic's metadata says so.  False when that is not answered."""
        cause = error.args[0] if error.args else None
        if any(is_code(cause, name) for name in _MISSING):
            return True
        if not any(is_code(cause, name) for name in _UNTOLD):
            return False
        try:
            topic = self._consumer.list_topics(tp.topic, timeout=timeout_s).topics.get(tp.topic)
        except KafkaException:
            return False
        if topic is None:
            return False
        if topic.error is not None:
            return bool(is_code(topic.error, "UNKNOWN_TOPIC_OR_PART"))
        return tp.partition not in topic.partitions

    def close(self) -> None:
        self._consumer.close()
