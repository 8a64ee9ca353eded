"""Plain value objects for Kafka records and partitions: what the adapter (drkit.kafka) hands
out and the pure parts (translation, recounts, plans) compute with - importing them loads no
Kafka client library."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A topic partition; orderable so that reports and maps are deterministic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@functools.lru_cache(maxsize=1 << 16)
def shared_partition(topic: str, partition: int) -> TopicPartition:
    """One shared value per topic partition, for decoders that name few partitions many times
    (10,000 groups' checkpoints name a flow's 50 partitions 500,000 times): a cache look-up
    costs a fraction of building a frozen dataclass."""
    return TopicPartition(topic, partition)


@dataclass(frozen=True)
class Record:
    """One consumed record.  ``timestamp_ms`` is None when the broker reported none."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default=())
    timestamp_ms: int | None = None

    @property
    def size(self) -> int:
        """Payload bytes (key + value + headers), the unit of byte metrics."""
        header_bytes = sum(len(k) + len(v or b"") for k, v in self.headers)
        return len(self.key or b"") + len(self.value or b"") + header_bytes

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or None."""
        found: bytes | None = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found
