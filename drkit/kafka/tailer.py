"""Read a (small, bookkeeping) topic up to its end, then keep catching up incrementally.

Used for drkit's own state topics: progress, offset syncs, checkpoints, heartbeats.  ``catch_up``
returns every record appended since the previous call and stops at the end of each partition
(the last stable offset under read_committed), so a caller sees a consistent prefix.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition as RdTP

from drkit.errors import RetriableKafkaError
from drkit.kafka.clients import ClusterEndpoint, make_consumer
from drkit.kafka.errors import translate
from drkit.kafka.io import to_record
from drkit.kafka.records import Record


class TopicTailer:
    """Incremental reader of every partition of one topic.

    Not thread-safe.  Partitions added to the topic later are picked up on the next call.
    """

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        topic: str,
        isolation: str = "read_committed",
    ) -> None:
        self.endpoint = endpoint
        self.topic = topic
        self._consumer: Consumer = make_consumer(
            endpoint,
            f"drkit-tailer-{uuid.uuid4().hex[:12]}",
            {
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "enable.auto.offset.store": False,
            },
        )
        # Next offset to read per partition.  Every call re-assigns at these positions because
        # librdkafka emits PARTITION_EOF only once per end position: a fresh assignment resets
        # that, so an unchanged partition reports its end again instead of hanging.
        self._next: dict[int, int] = {}

    def _assign(self, timeout_s: float) -> None:
        metadata = self._consumer.list_topics(self.topic, timeout=timeout_s)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            return
        for partition in topic.partitions:
            self._next.setdefault(partition, OFFSET_BEGINNING)
        self._consumer.assign([RdTP(self.topic, p, offset) for p, offset in self._next.items()])

    def catch_up(self, timeout_s: float = 30.0) -> Iterator[Record]:
        """Yield records appended since the last call, up to the end of every partition."""
        self._assign(min(timeout_s, 10.0))
        if not self._next:
            return
        pending = set(self._next)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise RetriableKafkaError(
                    f"{self.endpoint.alias}: reading {self.topic} did not reach its end "
                    f"within {timeout_s:.0f}s"
                )
            for message in self._consumer.consume(10000, 0.2):
                error = message.error()
                partition, offset = message.partition() or 0, message.offset() or 0
                if error is not None:
                    if error.code() == RdKafkaError._PARTITION_EOF:
                        pending.discard(partition)
                        self._next[partition] = offset
                        continue
                    raise translate(error, f"{self.endpoint.alias}: read {self.topic}")
                self._next[partition] = offset + 1
                yield to_record(message)

    def close(self) -> None:
        self._consumer.close()
