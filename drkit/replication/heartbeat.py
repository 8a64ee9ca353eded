"""MirrorMaker 2's heartbeat record format (Kafka protocol types, big-endian).

key   = source alias (STRING) + target alias (STRING)
value = version (INT16, 0) + timestamp ms (INT64)

STRING is an INT16 length followed by UTF-8 bytes.  Records in this format written to
``heartbeats`` on a flow's source are replicated like data; on the target, ``now - timestamp``
of the newest replicated heartbeat is the replication latency.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_VERSION = 0


def encode_string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def decode_string(buffer: bytes, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buffer, offset)
    start = offset + 2
    return buffer[start : start + length].decode(), start + length


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp_ms: int

    def key(self) -> bytes:
        return encode_string(self.source) + encode_string(self.target)

    def value(self) -> bytes:
        return struct.pack(">hq", _VERSION, self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        source, offset = decode_string(key, 0)
        target, _ = decode_string(key, offset)
        _version, timestamp = struct.unpack_from(">hq", value, 0)
        return cls(source, target, timestamp)
