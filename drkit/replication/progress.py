"""Replication progress, stored on the target cluster so it survives losing the source.

One compacted record per source partition on ``drkit-progress.<source>.internal``:

key   = ``<target alias>/<source topic>/<source partition>`` (UTF-8)
value = JSON ``{"next": N, "worker": id, "ts": ms, "hashed": bool}``

``next`` is the first source offset not yet durably on the target: every source record below it
was acknowledged by the target (or deliberately filtered).  A worker taking over a partition
resumes there.  In exactly-once mode progress is written in the same transaction as the data.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.kafka.tailer import TopicTailer


@dataclass(frozen=True)
class Progress:
    source: TopicPartition
    next_offset: int
    worker: str = ""
    timestamp_ms: int = 0
    hashed: bool = False

    def key(self, target_alias: str) -> bytes:
        return progress_key(target_alias, self.source)

    def value(self) -> bytes:
        return json.dumps(
            {
                "next": self.next_offset,
                "worker": self.worker,
                "ts": self.timestamp_ms or int(time.time() * 1000),
                "hashed": self.hashed,
            },
            separators=(",", ":"),
        ).encode()


def progress_key(target_alias: str, source: TopicPartition) -> bytes:
    return f"{target_alias}/{source.topic}/{source.partition}".encode()


def decode_progress(key: bytes, value: bytes | None) -> tuple[str, Progress] | None:
    """(target alias, progress) from a progress record; None for tombstones or foreign keys."""
    if value is None:
        return None
    try:
        target, topic, partition = key.decode().split("/")
        body = json.loads(value)
        return target, Progress(
            TopicPartition(topic, int(partition)),
            int(body["next"]),
            str(body.get("worker", "")),
            int(body.get("ts", 0)),
            bool(body.get("hashed", False)),
        )
    except (ValueError, KeyError, UnicodeDecodeError):
        return None


class ProgressStore:
    """Latest progress per source partition for one flow, read from the target cluster."""

    def __init__(self, target: ClusterEndpoint, topic: str) -> None:
        self.target_alias = target.alias
        self._tailer = TopicTailer(target, topic)
        self._latest: dict[TopicPartition, Progress] = {}

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, Progress]:
        """Catch up with the topic and return the latest progress per source partition."""
        for record in self._tailer.catch_up(timeout_s):
            if record.key is None:
                continue
            decoded = decode_progress(record.key, record.value)
            if decoded is not None and decoded[0] == self.target_alias:
                self._latest[decoded[1].source] = decoded[1]
        return dict(self._latest)

    def close(self) -> None:
        self._tailer.close()
