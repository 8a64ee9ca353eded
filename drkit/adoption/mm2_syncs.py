"""MirrorMaker 2's offset-sync records, read so ``drkit adopt`` can continue MM2's flows (pure).

MM2 writes one record to ``mm2-offset-syncs.<target>.internal`` (on the source cluster by
default) every time it pairs a source record with its copy, sparsely (every ``offset.lag.max``
records, and on every discontinuity).  Layout (Kafka protocol types, big-endian), as
``org.apache.kafka.connect.mirror.OffsetSync``:

key   = topic (STRING) + partition (INT32)                       - the *source* partition
value = upstreamOffset (INT64) + offset (INT64)                   - source and target offsets

The topic is compacted by partition, so only recent syncs survive; :func:`sync_points` turns
what is left into the increasing points :class:`drkit.translation.Mm2Syncs` rounds down to.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from drkit.records import TopicPartition
from drkit.replication.heartbeat import decode_string


def mm2_offset_syncs_topic(target: str) -> str:
    """MirrorMaker 2's default offset-syncs topic for flows into ``target``."""
    return f"mm2-offset-syncs.{target}.internal"


def decode_mm2_sync(key: bytes, value: bytes) -> tuple[TopicPartition, int, int]:
    """(source partition, upstream offset, downstream offset) of one MM2 offset sync.

    Raises ValueError (or struct.error / UnicodeDecodeError) for a record of another shape."""
    topic, offset = decode_string(key, 0)
    (partition,) = struct.unpack_from(">i", key, offset)
    if len(value) != 16:
        raise ValueError(f"an MM2 offset sync value has 16 bytes, not {len(value)}")
    upstream, downstream = struct.unpack(">qq", value)
    if upstream < 0 or downstream < 0:
        raise ValueError("negative offset in an MM2 offset sync")
    return TopicPartition(topic, partition), upstream, downstream


def sync_points(history: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The points a translation may round down to, from one partition's syncs in write order.

    A sync written after a restart (upstream at or below an earlier sync's) means MM2 copied
    that range again further on in the target log: the later copy is the one every record from
    its upstream offset on is found at (or after), so earlier syncs at or above it go.  The
    result increases strictly on both sides.
    """
    points: list[tuple[int, int]] = []
    for upstream, downstream in history:
        while points and (points[-1][0] >= upstream or points[-1][1] >= downstream):
            points.pop()
        points.append((upstream, downstream))
    return points
