"""Dense offset syncs: a run-length map from source offsets to target offsets.

A run ``(src_start, dst_start, length)`` says: the source records at ``src_start + i`` were
written to the target at ``dst_start + i`` for ``0 <= i < length``.  A new run starts only at a
discontinuity on either side (source gaps from compaction, transaction markers or filtered
records; target gaps from transaction markers; restarts and re-replication), so a steady flow is
one run per partition and every replicated offset is covered - unlike MirrorMaker 2, which keeps
a sparse sample and rounds translations down.

Record format on the offset-syncs topic (Kafka protocol types, big-endian):

key   = source topic (STRING) + source partition (INT32) + src_start (INT64)
        + target partition (INT32) + dst_start (INT64)
value = version (INT16, 0) + target topic (STRING) + target partition (INT32)
        + dst_start (INT64) + length (INT64)

The key names one run (one target copy of a source range), so a compacted topic keeps the newest
(longest) version of each run and never merges two copies.  A null value (tombstone) for a run's
key removes the run: the checkpointer writes them for runs with no record left on either cluster
(drkit/replication/run_map.py ``RunMap.expired``), which keeps the topic and every reader's map
bounded.

Invariants (checked by tests/unit/test_offset_sync.py):
* a re-replicated source range (restart after a crash) yields a second run for the same source
  offsets; after :func:`drkit.replication.run_map.merge_runs` the copy last in the target log
  maps them, and merged runs of one source partition never overlap;
* ``length >= 1``; within a run both offsets advance by exactly one per record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from drkit.records import TopicPartition
from drkit.replication.heartbeat import decode_string, encode_string

_VERSION = 0


@dataclass(frozen=True, order=True, slots=True)
class OffsetRun:
    src_start: int
    dst_start: int
    length: int

    @property
    def src_end(self) -> int:
        """One past the last source offset of the run."""
        return self.src_start + self.length

    @property
    def dst_end(self) -> int:
        """One past the last target offset of the run."""
        return self.dst_start + self.length

    def covers_source(self, offset: int) -> bool:
        return self.src_start <= offset < self.src_end


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """One record of the offset-syncs topic: a run between two partitions."""

    source: TopicPartition
    target: TopicPartition
    run: OffsetRun

    def key(self) -> bytes:
        return encode_string(self.source.topic) + struct.pack(
            ">iqiq",
            self.source.partition,
            self.run.src_start,
            self.target.partition,
            self.run.dst_start,
        )

    def value(self) -> bytes:
        return (
            struct.pack(">h", _VERSION)
            + encode_string(self.target.topic)
            + struct.pack(">iqq", self.target.partition, self.run.dst_start, self.run.length)
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        src_topic, offset = decode_string(key, 0)
        src_partition, src_start, _dst_partition, _dst_start = struct.unpack_from(
            ">iqiq", key, offset
        )
        (_version,) = struct.unpack_from(">h", value, 0)
        dst_topic, offset = decode_string(value, 2)
        dst_partition, dst_start, length = struct.unpack_from(">iqq", value, offset)
        return cls(
            TopicPartition(src_topic, src_partition),
            TopicPartition(dst_topic, dst_partition),
            OffsetRun(src_start, dst_start, length),
        )


class RunTracker:
    """Builds runs for one (source partition → target partition) pair from acknowledged writes.

    Not thread-safe: owned by the worker thread that handles delivery reports.  ``observe`` is
    on the hot path (once per replicated record) and only compares integers.
    """

    __slots__ = ("_dirty", "_dst_start", "_length", "_src_start", "source", "target")

    def __init__(self, source: TopicPartition, target: TopicPartition) -> None:
        self.source = source
        self.target = target
        self._src_start = -1
        self._dst_start = -1
        self._length = 0
        self._dirty: list[OffsetRun] = []

    def observe(self, src: int, dst: int) -> None:
        """Record that source offset ``src`` was written at target offset ``dst``."""
        length = self._length
        if length and src == self._src_start + length and dst == self._dst_start + length:
            self._length = length + 1
            return
        if length:
            self._dirty.append(OffsetRun(self._src_start, self._dst_start, length))
        self._src_start, self._dst_start, self._length = src, dst, 1

    def observe_range(self, src: int, dst: int, count: int) -> None:
        """Record that source offsets ``src .. src+count-1`` were written at target offsets
        ``dst .. dst+count-1`` (a batch confirmed at once; ``count`` >= 1)."""
        length = self._length
        if length and src == self._src_start + length and dst == self._dst_start + length:
            self._length = length + count
            return
        if length:
            self._dirty.append(OffsetRun(self._src_start, self._dst_start, length))
        self._src_start, self._dst_start, self._length = src, dst, count

    def drain(self) -> list[OffsetSync]:
        """Runs closed since the last drain plus the current run as it stands now."""
        runs = self._dirty
        self._dirty = []
        if self._length:
            runs.append(OffsetRun(self._src_start, self._dst_start, self._length))
        return [OffsetSync(self.source, self.target, run) for run in runs]

    def restart(self) -> None:
        """Forget the open run (after a seek): the next write starts a new run."""
        if self._length:
            self._dirty.append(OffsetRun(self._src_start, self._dst_start, self._length))
        self._length = 0


def decode_key(key: bytes) -> tuple[bytes, int, int, int]:
    """(source prefix, src_start, target partition, dst_start) of an offset-sync record key.

    The source prefix (topic string + partition, as encoded) identifies the source partition
    without decoding it: the store decodes each distinct prefix once (:func:`decode_prefix`).
    Raises ValueError (or struct.error) on malformed input.
    """
    (length,) = _SHORT.unpack_from(key, 0)
    end = 2 + length + 4
    src_start, dst_partition, dst_start = _KEY_TAIL.unpack_from(key, end)
    return key[:end], src_start, dst_partition, dst_start


def decode_value(value: bytes) -> tuple[bytes, int, int]:
    """(target prefix, dst_start, length) of an offset-sync record value (see decode_key)."""
    (length,) = _SHORT.unpack_from(value, 2)
    end = 4 + length + 4
    dst_start, run_length = _VALUE_TAIL.unpack_from(value, end)
    return value[2:end], dst_start, run_length


def decode_prefix(prefix: bytes) -> TopicPartition:
    """The partition a key's source prefix or a value's target prefix names."""
    topic, offset = decode_string(prefix, 0)
    (partition,) = struct.unpack_from(">i", prefix, offset)
    return TopicPartition(topic, partition)


_SHORT = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">qiq")
_VALUE_TAIL = struct.Struct(">qq")
