"""Plain value objects for Kafka records and partitions: what the adapter (drkit.kafka) hands
out and the pure parts (translation, recounts, plans) compute with - importing them loads no
Kafka client library."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, TypeVar

_Frozen = TypeVar("_Frozen")

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A topic partition; orderable so that reports and maps are deterministic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class VisibleSpan:
    """What a read_committed read of one offset span of a partition found: its records, and
    the timestamp of the first (epoch ms, as the broker reports it - the producer's clock, or
    the broker's with log-append time; None with no record, or none reported)."""

    records: int
    first_timestamp_ms: int | None = None


@functools.lru_cache(maxsize=1 << 16)
def shared_partition(topic: str, partition: int) -> TopicPartition:
    """One shared value per topic partition, for decoders that name few partitions many times
    (10,000 groups' checkpoints name a flow's 50 partitions 500,000 times): a cache look-up
    costs a fraction of building a frozen dataclass."""
    return TopicPartition(topic, partition)


def built(cls: type[_Frozen], fields: dict[str, Any]) -> _Frozen:
    """A frozen dataclass instance with ``fields`` set at once, for the few values made
    hundreds of thousands of times (a 10,000-group plan's translations and moves): a frozen
    dataclass's ``__init__`` sets its fields one ``object.__setattr__`` at a time (1.1 us for
    nine fields here, 0.4 us this way).  ``fields`` must name every field, in declaration
    order (the order ``vars()`` and so a JSON form show), and ``cls`` must have no
    ``__post_init__`` - the caller's contract; values compare, hash and pickle as constructed.
    """
    value: _Frozen = object.__new__(cls)
    value.__dict__.update(fields)
    return value


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
