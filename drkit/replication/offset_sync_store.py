"""Load the dense offset-sync runs of a flow from the target cluster (for translation)."""

from __future__ import annotations

import logging

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.kafka.tailer import TopicTailer
from drkit.replication.offset_sync import OffsetSync, merge_runs

log = logging.getLogger(__name__)


class OffsetSyncStore:
    """Incrementally reads ``drkit-offset-syncs.<source>.internal`` and keeps merged runs."""

    def __init__(self, target: ClusterEndpoint, topic: str) -> None:
        self._tailer = TopicTailer(target, topic)
        self._syncs: list[OffsetSync] = []
        self._merged: dict[TopicPartition, list[OffsetSync]] = {}

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, list[OffsetSync]]:
        """Catch up and return non-overlapping runs per source partition (see merge_runs)."""
        added = 0
        for record in self._tailer.catch_up(timeout_s):
            if record.key is None or record.value is None:
                continue
            try:
                self._syncs.append(OffsetSync.decode(record.key, record.value))
                added += 1
            except (ValueError, UnicodeDecodeError, IndexError):
                log.warning(
                    "skipping malformed offset-sync record", extra={"offset": record.offset}
                )
        if added or not self._merged:
            self._merged = merge_runs(self._syncs)
            # Keep only the merged runs: they carry everything later merges need.
            self._syncs = [s for runs in self._merged.values() for s in runs]
        return self._merged

    def close(self) -> None:
        self._tailer.close()
