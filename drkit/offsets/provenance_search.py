"""Find a source record's copy on the target from the data alone (provenance headers).

When the offset-sync map is missing or suspect, binary-search the target partition: every
replicated record carries ``drkit-src`` = its source cluster/topic/partition/offset.

Only copies of the source partition being translated count.  A target partition may also hold
copies of other source partitions (route merges, key-hash placement), copies from another
cluster or topic, or records written there directly; their offsets say nothing about this
partition, so every read skips forward to the first record whose ``drkit-src`` names the flow's
source cluster alias, the topic and the partition (:func:`copy_offset`).

Within a target partition the copies of one source partition follow source order (except where
a crash re-replicated a short range), so "source offset of the first copy at or after p" grows
with p and the search finds the first copy whose source offset is ``>= S`` - the same position
translation gives.  For a target partition shared by several source partitions this is the
answer for *this* source partition only; a caller that commits one offset for the shared
partition must combine the answers (the smallest never skips).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass
from typing import Protocol

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.partition_reader import PartitionReader
from drkit.records import Record, TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.translation import TargetBounds


class RecordSource(Protocol):
    """Reads one partition from a position (the adapter's PartitionReader, or a test fake)."""

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        """Records at offsets ``>= offset`` in order, up to the partition's end."""
        ...


@dataclass(frozen=True)
class SourcePartition:
    """A source partition as ``drkit-src`` names it: the flow's source alias, topic, partition."""

    cluster: str
    tp: TopicPartition


def copy_offset(record: Record, source: SourcePartition) -> int | None:
    """The source offset ``record`` is a copy of, if it is a copy of ``source`` (else None)."""
    raw = record.header(SOURCE_HEADER)
    if raw is None:
        return None
    try:
        provenance = Provenance.decode(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if (provenance.cluster, provenance.topic, provenance.partition) != (
        source.cluster,
        source.tp.topic,
        source.tp.partition,
    ):
        return None
    return provenance.offset


class ProvenanceReader:
    """Finds copies of one source partition in a target partition; not thread-safe."""

    def __init__(self, records: RecordSource, owned: PartitionReader | None = None) -> None:
        self._records = records
        self._owned = owned

    @classmethod
    def on(cls, target: ClusterEndpoint) -> ProvenanceReader:
        """A reader of ``target`` under read_committed (what the resuming consumer will see)."""
        reader = PartitionReader(target)
        return cls(reader, reader)

    def first_copy(
        self, target: TopicPartition, offset: int, source: SourcePartition
    ) -> tuple[int, int] | None:
        """(target offset, source offset) of the first copy of ``source`` at ``>= offset``."""
        with closing(self._records.records_from(target, offset)) as records:
            for record in records:
                found = copy_offset(record, source)
                if found is not None:
                    return record.offset, found
        return None

    def first_record(self, target: TopicPartition, offset: int) -> Record | None:
        """The first record at ``>= offset``, whatever it is (what a consumer there reads)."""
        with closing(self._records.records_from(target, offset)) as records:
            return next(records, None)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()


def find_target_offset(
    reader: ProvenanceReader,
    target: TopicPartition,
    source: SourcePartition,
    source_offset: int,
    bounds: TargetBounds,
) -> tuple[int, bool] | None:
    """(T, exact) for committed source offset ``S`` by binary search over the target partition.

    T is the position of the first copy of ``source`` whose source offset is ``>= S``;
    ``exact`` is True when it is the copy of the record at S.  When every copy precedes S, T is
    the position right after the last one (``exact`` False).  Returns None when the partition
    holds no copy of ``source``.
    """
    if reader.first_copy(target, bounds.start, source) is None:
        return None
    # Invariant: the answer's position p (the smallest p whose first copy at >= p has a source
    # offset >= S, or bounds.end) lies in [low, high].
    low, high = bounds.start, bounds.end
    while low < high:
        middle = (low + high) // 2
        found = reader.first_copy(target, middle, source)
        if found is None or found[1] >= source_offset:
            high = middle
        else:
            low = min(found[0] + 1, high)
    found = reader.first_copy(target, low, source) if low < bounds.end else None
    if found is None:
        return low, False
    actual, copied = found
    return actual, copied == source_offset
