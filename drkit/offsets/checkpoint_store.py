"""Read the latest checkpoints of a flow from the target (works with the source gone)."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from drkit.clock import age_s
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpoint import Checkpoint
from drkit.records import TopicPartition, shared_partition


@dataclass(frozen=True)
class CheckpointSnapshot:
    latest: dict[tuple[str, TopicPartition], Checkpoint]
    last_tick_ms: int | None

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since the checkpoint worker last completed a round (None: never, or its
        host's clock runs ahead of ours - see drkit.clock.age_s)."""
        if self.last_tick_ms is None:
            return None
        return age_s(now or time.time(), self.last_tick_ms / 1000)

    @cached_property
    def _by_group(self) -> dict[str, dict[TopicPartition, Checkpoint]]:
        out: dict[str, dict[TopicPartition, Checkpoint]] = {}
        for (group, tp), checkpoint in self.latest.items():
            out.setdefault(group, {})[tp] = checkpoint
        return out

    @cached_property
    def committed_by_group(self) -> dict[str, dict[TopicPartition, int]]:
        """Per group, the committed source offset S per *source* partition, as the checkpoints
        state it (their ``source_topic`` header with the replica's partition number; those
        without one are left out).  Built once per snapshot - a failover reads the same
        unchanged snapshot for its plan and again for its translation step, 500,000
        checkpoints at 10,000 groups.  Shared: callers must not change the dicts."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for (group, target_tp), checkpoint in self.latest.items():
            topic = str(checkpoint.info.get("source_topic") or "")
            if topic:
                out.setdefault(group, {})[shared_partition(topic, target_tp.partition)] = (
                    checkpoint.upstream_offset
                )
        return out

    def for_group(self, group: str) -> dict[TopicPartition, Checkpoint]:
        """The group's latest checkpoints (indexed once: a lookup is not a scan of them all)."""
        return dict(self._by_group.get(group, {}))

    def unchecked(self, groups: Iterable[str]) -> list[str]:
        """Those of ``groups`` with no checkpoint here, in the order given."""
        return [group for group in groups if group not in self._by_group]


class CheckpointStore:
    """Latest checkpoint per (group, target partition) and the last tick of one flow.

    A checkpoints topic that does not exist yet (no checkpoint round has run) reads as "no
    checkpoints" (``missing_ok``): callers report it per group, it is not an input error.
    """

    def __init__(self, target: ClusterEndpoint, topic: str) -> None:
        self._tailer = TopicTailer(target, topic, missing_ok=True)
        self._latest: dict[tuple[str, TopicPartition], Checkpoint] = {}
        self._tick: int | None = None
        self._snapshot: CheckpointSnapshot | None = None

    def refresh(self, timeout_s: float = 30.0) -> CheckpointSnapshot:
        """Everything read so far; the same snapshot object as last time when nothing was
        appended since (its per-group indexes are then not built again)."""
        changed = False
        for key, value, headers in self._tailer.catch_up_payloads(timeout_s):
            changed = True
            if key is None or value is None:
                continue
            try:
                checkpoint = Checkpoint.decode(key, value, headers)
            except (ValueError, UnicodeDecodeError, struct.error):
                continue
            if checkpoint.is_tick:
                self._tick = max(self._tick or 0, checkpoint.upstream_offset)
            else:
                self._latest[(checkpoint.group, checkpoint.target)] = checkpoint
        if changed or self._snapshot is None:
            self._snapshot = CheckpointSnapshot(dict(self._latest), self._tick)
        return self._snapshot

    def close(self) -> None:
        self._tailer.close()
