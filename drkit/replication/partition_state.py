"""Replication state of one assigned source partition, and in-flight queues per target partition.

Owned by the worker thread (the consume loop, delivery reports and rebalance callbacks all run
on it), so nothing here locks.

Invariant of :class:`PartitionState`: ``next_offset`` is the first source offset not yet durable
on the target - every offset below it was acknowledged by the target or deliberately skipped
(filtered, a loop, a transaction marker).  Offsets in ``pending`` were sent (or skipped while
earlier ones were in flight), in source order; ``acked`` holds those acknowledged out of order.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from drkit.kafka.flow_clients import key_partition
from drkit.records import TopicPartition
from drkit.replication.offset_sync import RunTracker
from drkit.replication.provenance import source_prefix


class PartitionState:
    """See the module docstring."""

    __slots__ = (
        "acked",
        "bytes",
        "dirty",
        "hashed",
        "native_origin",
        "next_offset",
        "pending",
        "prefix",
        "queue",
        "records",
        "reported",
        "source",
        "source_end",
        "target_partition",
        "target_partitions",
        "target_topic",
        "topic_bytes",
        "topic_id",
        "tracker",
    )

    def __init__(
        self,
        source: TopicPartition,
        target_topic: str,
        target_partitions: int,
        source_alias: str,
        next_offset: int | None,
        native_origin: bytes,
        topic_id: str | None = None,
    ) -> None:
        self.source = source
        self.target_topic = target_topic
        self.target_partitions = target_partitions
        # Keep the partition number whenever the target has it; otherwise hash keys.
        self.hashed = source.partition >= target_partitions
        self.target_partition: int | None = None if self.hashed else source.partition
        self.prefix = source_prefix(source_alias, source.topic, source.partition)
        self.topic_bytes = source.topic.encode()
        # drkit-origin of records first written on the source (the common case), precomputed.
        self.native_origin = native_origin
        self.topic_id = topic_id
        self.source_end: int | None = None  # the source high watermark last seen
        self.pending: deque[int] = deque()
        self.acked: set[int] = set()
        self.next_offset = next_offset
        self.dirty = False
        self.queue: InflightQueue | None = None
        self.records = 0
        self.bytes = 0
        self.reported = (0, 0)  # (records, bytes) already added to the metrics
        self.tracker = (
            None
            if self.hashed
            else RunTracker(source, TopicPartition(target_topic, source.partition))
        )

    def placed(self, key: bytes | None, source_offset: int) -> int:
        """The target partition of a record (only called for hashed partitions)."""
        if self.target_partition is not None:
            return self.target_partition
        if key is None:
            return source_offset % self.target_partitions
        return key_partition(key, self.target_partitions)

    def done(self, offset: int) -> None:
        """``offset`` is durable on the target (or deliberately not replicated)."""
        pending = self.pending
        if pending and pending[0] == offset:
            pending.popleft()
            self.next_offset = offset + 1
            acked = self.acked
            while pending and pending[0] in acked:
                head = pending.popleft()
                acked.discard(head)
                self.next_offset = head + 1
            self.dirty = True
        else:
            self.acked.add(offset)

    def skip(self, offset: int) -> None:
        """A record that is consumed but intentionally not produced."""
        if not self.pending:
            self.next_offset = offset + 1
            self.dirty = True
        else:
            self.pending.append(offset)
            self.acked.add(offset)

    def passed(self, position: int) -> None:
        """The consumer is at ``position`` with nothing of ours in flight: what lies between
        ``next_offset`` and it are offsets without records (transaction markers, aborted
        records under read_committed), so progress may move over them."""
        if not self.pending and self.next_offset is not None and position > self.next_offset:
            self.next_offset = position
            self.dirty = True

    @property
    def idle(self) -> bool:
        """Nothing sent and not yet acknowledged."""
        return not self.pending

    def unreported(self) -> tuple[int, int]:
        """(records, bytes) replicated since the last call (for counters)."""
        records, size = self.records - self.reported[0], self.bytes - self.reported[1]
        self.reported = (self.records, self.bytes)
        return records, size


class InflightQueue:
    """Source offsets in flight to one target partition, in produce (= acknowledgement) order.

    Usually one source partition feeds a target partition and entries are plain offsets; when a
    route transform merges several into one, ``owner`` becomes None and entries carry their
    state: ``(state, offset)``.  Timestamps are kept only for records sampled for latency.

    Batched delivery reports (drkit.replication.delivery): ``covered`` counts the oldest entries
    that a sentinel record's report will confirm; ``last_target`` is the target offset of the
    last confirmed record (None until a report fixed it, and again after a transaction marker).
    """

    __slots__ = ("covered", "entries", "last_target", "owner", "sampled")

    def __init__(self, owner: PartitionState) -> None:
        self.owner: PartitionState | None = owner
        self.entries: deque[Any] = deque()
        self.sampled: dict[int, int] = {}
        self.covered = 0
        self.last_target: int | None = None

    def uncovered(self) -> int:
        """Entries no sentinel covers yet (the records since the last sentinel)."""
        return len(self.entries) - self.covered

    def needs_base(self) -> bool:
        """No confirmed target offset to check the next sentinel against, and none coming."""
        return self.last_target is None and not self.entries

    def share_with(self, state: PartitionState) -> None:
        """A second source partition feeds this target partition: tag every entry from now."""
        owner = self.owner
        if owner is None or owner is state:
            return
        self.entries = deque(
            entry if isinstance(entry, tuple) else (owner, entry) for entry in self.entries
        )
        self.owner = None

    def add(self, state: PartitionState, offset: int) -> None:
        self.entries.append(offset if self.owner is state else (state, offset))

    def head(self) -> tuple[PartitionState, int] | None:
        """The oldest entry, left in place."""
        if not self.entries:
            return None
        entry = self.entries[0]
        if self.owner is not None and not isinstance(entry, tuple):
            return self.owner, entry
        state, offset = entry
        return state, offset

    def pop(self) -> tuple[PartitionState, int] | None:
        """The oldest entry, removed: (state, source offset) of the record just acknowledged."""
        entry = self.head()
        if entry is not None:
            self.entries.popleft()
        return entry
