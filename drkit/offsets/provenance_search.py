"""Find a source record's copy on the target from the data alone (provenance headers).

When the offset-sync map is missing or suspect, binary-search the target partition: every
replicated record carries ``drkit-src`` = its source cluster/topic/partition/offset, and within
a target partition source offsets increase except where a crash re-replicated a short range.
The search returns the smallest target offset whose record's source offset is ``>= S`` - the
same position translation would give - and checks it by reading that record.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as RdTP

from drkit.kafka.clients import ClusterEndpoint, make_consumer
from drkit.kafka.records import TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.translation import TargetBounds


class ProvenanceReader:
    """Reads the source offset recorded in the record at (or first after) a target offset."""

    def __init__(self, target: ClusterEndpoint) -> None:
        self._consumer: Consumer = make_consumer(
            target,
            f"drkit-provenance-{uuid.uuid4().hex[:8]}",
            {
                "isolation.level": "read_uncommitted",
                "fetch.max.bytes": 1048576,
                "max.partition.fetch.bytes": 262144,
            },
        )
        self.reads = 0

    def source_offset_at(
        self, tp: TopicPartition, offset: int, timeout_s: float = 10.0
    ) -> tuple[int, int] | None:
        """(actual target offset, source offset) of the first record at ``>= offset``."""
        self._consumer.assign([RdTP(tp.topic, tp.partition, offset)])
        self.reads += 1
        message = self._consumer.poll(timeout_s)
        if message is None or message.error() is not None:
            return None
        headers: list[tuple[str, bytes]] = list(message.headers() or [])  # type: ignore[arg-type]
        for name, value in headers:
            if name == SOURCE_HEADER and isinstance(value, bytes):
                try:
                    return int(message.offset() or 0), Provenance.decode(value).offset
                except ValueError:
                    return None
        return None

    def close(self) -> None:
        self._consumer.close()


def find_target_offset(
    reader: ProvenanceReader, target: TopicPartition, source_offset: int, bounds: TargetBounds
) -> tuple[int, bool] | None:
    """(T, exact) for committed source offset ``S`` by binary search over the target partition.

    ``exact`` is True when the record at T is the copy of the source record at S.  Returns None
    when the partition holds no record with provenance.  ``T == bounds.end`` means every record
    on the target precedes S.
    """
    low, high = bounds.start, bounds.end  # invariant: answer in [low, high]
    while low < high:
        middle = (low + high) // 2
        found = reader.source_offset_at(target, middle)
        if found is None:
            return None
        actual, source = found
        if source >= source_offset:
            high = middle
        else:
            low = min(actual + 1, high)
    if low >= bounds.end:
        return bounds.end, False
    found = reader.source_offset_at(target, low)
    if found is None:
        return None
    actual, source = found
    return actual, source == source_offset
