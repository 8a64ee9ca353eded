"""Read the latest checkpoints of a flow from the target (works with the source gone)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpoint import Checkpoint
from drkit.records import TopicPartition


@dataclass(frozen=True)
class CheckpointSnapshot:
    latest: dict[tuple[str, TopicPartition], Checkpoint]
    last_tick_ms: int | None

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since the checkpoint worker last completed a round."""
        if self.last_tick_ms is None:
            return None
        return max(0.0, (now or time.time()) - self.last_tick_ms / 1000)

    @cached_property
    def _by_group(self) -> dict[str, dict[TopicPartition, Checkpoint]]:
        out: dict[str, dict[TopicPartition, Checkpoint]] = {}
        for (group, tp), checkpoint in self.latest.items():
            out.setdefault(group, {})[tp] = checkpoint
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

    def refresh(self, timeout_s: float = 30.0) -> CheckpointSnapshot:
        for record in self._tailer.catch_up(timeout_s):
            if record.key is None or record.value is None:
                continue
            try:
                checkpoint = Checkpoint.decode(record.key, record.value, record.headers)
            except (ValueError, UnicodeDecodeError):
                continue
            if checkpoint.is_tick:
                self._tick = max(self._tick or 0, checkpoint.upstream_offset)
            else:
                self._latest[(checkpoint.group, checkpoint.target)] = checkpoint
        return CheckpointSnapshot(dict(self._latest), self._tick)

    def close(self) -> None:
        self._tailer.close()
