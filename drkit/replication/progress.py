"""Replication progress, stored on the target cluster so it survives losing the source.

One compacted record per source partition on ``drkit-progress.<source>.internal``:

key   = ``<target alias>/<source topic>/<source partition>`` (UTF-8)
value = JSON ``{"next": N, "worker": id, "ts": ms, "hashed": bool, "tid": str, "end": E}``

``next`` is the first source offset not yet durably on the target: every source record below it
was acknowledged by the target (or deliberately filtered).  A worker taking over a partition
resumes there.  ``tid`` is the source topic's id when ``next`` was recorded (a topic deleted and
recreated gets a new id) and ``end`` the source high watermark the worker last saw; both let a
worker that resumes tell and count records lost before replication (drkit.replication.loss).
They are absent in records written before drkit recorded them.

Ordering: a progress record is written only after the offset-sync runs that cover every offset
below its ``next`` are durable (drkit.replication.commit), so progress never claims a record the
offset map cannot translate.  In exactly-once mode progress, runs and data share a transaction.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.records import TopicPartition


@dataclass(frozen=True)
class Progress:
    source: TopicPartition
    next_offset: int
    worker: str = ""
    timestamp_ms: int = 0
    hashed: bool = False
    topic_id: str | None = None
    source_end: int | None = None

    def key(self, target_alias: str) -> bytes:
        return progress_key(target_alias, self.source)

    def value(self) -> bytes:
        body: dict[str, object] = {
            "next": self.next_offset,
            "worker": self.worker,
            "ts": self.timestamp_ms or int(time.time() * 1000),
            "hashed": self.hashed,
        }
        if self.topic_id is not None:
            body["tid"] = self.topic_id
        if self.source_end is not None:
            body["end"] = self.source_end
        return json.dumps(body, separators=(",", ":")).encode()


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
            str(body["tid"]) if body.get("tid") else None,
            int(body["end"]) if body.get("end") is not None else None,
        )
    except (ValueError, KeyError, UnicodeDecodeError):
        return None


class ProgressStore:
    """Latest progress per source partition for one flow, read from the target cluster."""

    def __init__(self, target: ClusterEndpoint, topic: str, missing_ok: bool = False) -> None:
        """``missing_ok``: a progress topic that does not exist (the flow never ran) reads as no
        progress - for readers such as verify, probes and failover plans.  The worker, which
        creates the topic, leaves it False: for it a missing topic is an error, never "start
        from scratch"."""
        self.target_alias = target.alias
        self.topic = topic
        self._tailer = TopicTailer(target, topic, missing_ok=missing_ok)
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
