"""Where an adopted flow's MirrorMaker 2 range is kept: ``drkit-adopted.<source>.internal``.

One compacted record per source partition, on the target (so a failover reads it with the
source gone), written once by ``drkit adopt`` before the flow's first drkit runs and progress:

key   = ``<target alias>/<source topic>/<source partition>`` (UTF-8, as progress keys)
value = JSON ``{"upstream": [...], "downstream": [...], "end": A, "end_target": B,
        "adopted_at_ms": ms, "from": "mirrormaker2"}``

``upstream``/``downstream`` are MM2's sync points below the adoption point (at most
:data:`MAX_POINTS`, the latest kept: rounding down further only adds re-reads), ``end`` the
first source offset drkit's runs map and ``end_target`` its copy's target offset
(drkit.translation.Mm2Syncs).
"""

from __future__ import annotations

import json
import time

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.records import TopicPartition
from drkit.replication.progress import progress_key
from drkit.translation import Mm2Syncs

MAX_POINTS = 20_000  # ~0.5 MB of JSON: well inside a record's default size limit


def adopted_key(target_alias: str, source: TopicPartition) -> bytes:
    return progress_key(target_alias, source)


def adopted_value(syncs: Mm2Syncs, adopted_at_ms: int | None = None) -> bytes:
    """The record of one partition; only the latest :data:`MAX_POINTS` points are kept."""
    body = {
        "upstream": list(syncs.upstream[-MAX_POINTS:]),
        "downstream": list(syncs.downstream[-MAX_POINTS:]),
        "end": syncs.end,
        "end_target": syncs.end_target,
        "adopted_at_ms": adopted_at_ms or int(time.time() * 1000),
        "from": "mirrormaker2",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_adopted(key: bytes, value: bytes | None) -> tuple[str, TopicPartition, Mm2Syncs] | None:
    """(target alias, source partition, syncs); None for tombstones and malformed records."""
    if value is None:
        return None
    try:
        target, topic, partition = key.decode().split("/")
        body = json.loads(value)
        syncs = Mm2Syncs(
            tuple(int(x) for x in body["upstream"]),
            tuple(int(x) for x in body["downstream"]),
            int(body["end"]),
            int(body["end_target"]),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return target, TopicPartition(topic, int(partition)), syncs


class AdoptedStore:
    """The MirrorMaker 2 ranges of one flow's partitions, read from the target cluster.

    A flow that was never adopted has no such topic: that reads as no ranges."""

    def __init__(self, target: ClusterEndpoint, topic: str) -> None:
        self.target_alias = target.alias
        self._tailer = TopicTailer(target, topic, missing_ok=True)
        self._latest: dict[TopicPartition, Mm2Syncs] = {}

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, Mm2Syncs]:
        for record in self._tailer.catch_up(timeout_s):
            if record.key is None:
                continue
            decoded = decode_adopted(record.key, record.value)
            if decoded is not None and decoded[0] == self.target_alias:
                self._latest[decoded[1]] = decoded[2]
        return dict(self._latest)

    def close(self) -> None:
        self._tailer.close()
