"""MirrorMaker 2's checkpoint record format, so MM2 clients can read drkit's checkpoints.

Layout (Kafka protocol types, big-endian), as ``org.apache.kafka.connect.mirror.Checkpoint``:

key   = group (STRING) + topic (STRING) + partition (INT32)      - the *target* topic partition
value = version (INT16, 0) + upstreamOffset (INT64) + offset (INT64) + metadata (STRING)

``upstreamOffset`` is the group's committed source offset S, ``offset`` the translated target
offset T.  drkit adds a ``drkit-checkpoint`` header (JSON: method, source topic, flags, RPO
numbers, time checked) that MM2 ignores.

A per-flow *tick* record (group ``__drkit.tick``) is written on every checkpoint round; its
timestamp tells how fresh the checkpoints are when the source cluster is gone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from drkit import json_codec
from drkit.records import TopicPartition, shared_partition
from drkit.replication.heartbeat import decode_string, encode_string

VERSION = 0
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqq")  # version, upstreamOffset, offset
HEADER = "drkit-checkpoint"
TICK_GROUP = "__drkit.tick"

# Decoded headers by their bytes.  One checkpoint round stamps every checkpoint it writes with
# the same time, and most partitions of a round share method, flags and counts: 500,000
# checkpoints at 10,000 groups carried 2 distinct headers in the failover benchmark (decoding
# each one: 0.53 s of a 1.35 s read).  Bounded: cleared when full.  The dicts are shared
# between checkpoints - read only, like the frozen value that holds them.
_INFO_CACHE: dict[bytes, dict[str, Any]] = {}
_INFO_CACHE_SIZE = 4096


@dataclass(frozen=True)
class Checkpoint:
    group: str
    target: TopicPartition
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def key(self) -> bytes:
        return (
            encode_string(self.group)
            + encode_string(self.target.topic)
            + struct.pack(">i", self.target.partition)
        )

    def value(self) -> bytes:
        return struct.pack(
            ">hqq", VERSION, self.upstream_offset, self.downstream_offset
        ) + encode_string(self.metadata)

    def headers(self) -> list[tuple[str, str | bytes | None]]:
        return [(HEADER, json_codec.dumps(self.info).encode())] if self.info else []

    @classmethod
    def decode(
        cls, key: bytes, value: bytes, headers: tuple[tuple[str, bytes | None], ...] = ()
    ) -> Checkpoint:
        """Raises ValueError, UnicodeDecodeError or struct.error for what is not a checkpoint."""
        group, at = decode_string(key, 0)
        topic, at = decode_string(key, at)
        (partition,) = _INT32.unpack_from(key, at)
        _version, upstream, downstream = _VALUE_HEAD.unpack_from(value, 0)
        metadata, _ = decode_string(value, _VALUE_HEAD.size)
        info: dict[str, Any] = {}
        for name, raw in headers:
            if name == HEADER and raw:
                info = _decoded_info(raw)
        return cls(group, shared_partition(topic, partition), upstream, downstream, metadata, info)

    @property
    def is_tick(self) -> bool:
        return self.group == TICK_GROUP


def _decoded_info(raw: bytes) -> dict[str, Any]:
    """``raw`` decoded, from the cache when another checkpoint carried the same bytes."""
    info = _INFO_CACHE.get(raw)
    if info is None:
        if len(_INFO_CACHE) >= _INFO_CACHE_SIZE:
            _INFO_CACHE.clear()
        info = _INFO_CACHE[raw] = json_codec.loads(raw)
    return info


def group_of(key: bytes) -> str:
    """The group a checkpoint's key names (its first field; nothing else is decoded).  Raises
    ValueError, UnicodeDecodeError or struct.error on a key that is not a checkpoint's."""
    return decode_string(key, 0)[0]


def tick(timestamp_ms: int, groups: int) -> Checkpoint:
    """The freshness record of one checkpoint round."""
    return Checkpoint(
        TICK_GROUP,
        TopicPartition("", 0),
        timestamp_ms,
        timestamp_ms,
        "",
        {"checked_at_ms": timestamp_ms, "groups": groups},
    )
