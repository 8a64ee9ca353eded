"""What a run's steps recorded, as typed values.

A step stores its outcome as a JSON document in its ``failover_steps`` row (the audit trail,
``drkit.failover.run/v1``).  Other steps, the maintenance duties and the drills read some of
those outcomes back: they do so through these values - written with ``to_detail`` and read with
``of`` - never by string keys of their own, so a document has one definition.

* :class:`FencePoint` (``record_fence_point``): the source's end offsets once the fence held;
  ``drain`` waits for them, ``confirm_fence`` checks nothing moved past them.
* :class:`Translation` (``translate_offsets``): every group's S -> T per partition, the groups
  left without a checkpoint and the RPO per partition; ``commit_group_offsets`` writes its
  positions, the failover point (where a returning old primary's divergent tail begins) is its
  replicated ends, and drills and verify judge the groups against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from drkit.failover.model import PartitionMove, PartitionRpo, StepName
from drkit.failover.runs import RunRecord
from drkit.kafka.records import TopicPartition


def partition_key(tp: TopicPartition) -> str:
    """``topic:partition`` - how step documents name a partition."""
    return f"{tp.topic}:{tp.partition}"


@dataclass(frozen=True)
class FencePoint:
    """Per source partition (``topic:partition``), its end offset once the fence held."""

    ends: Mapping[str, int]

    STEP = StepName.RECORD_FENCE_POINT

    @property
    def records(self) -> int:
        return sum(self.ends.values())

    def to_detail(self) -> dict[str, Any]:
        return {"fence_point": dict(self.ends), "records": self.records}

    @classmethod
    def of(cls, run: RunRecord) -> FencePoint | None:
        """The fence point ``run`` recorded (None: not recorded yet)."""
        detail = run.detail(cls.STEP)
        if "fence_point" not in detail:
            return None
        return cls({str(k): int(v) for k, v in detail["fence_point"].items()})


@dataclass(frozen=True)
class GroupTranslation:
    group: str
    target_state: str
    from_checkpoints: bool
    partitions: tuple[PartitionMove, ...]

    def positions(self) -> dict[TopicPartition, int]:
        """T per replica partition; partitions that could not be translated are left out."""
        return {
            TopicPartition(m.target_topic, m.target_partition): m.target_offset
            for m in self.partitions
            if m.target_offset is not None
        }


@dataclass(frozen=True)
class Translation:
    """The translate step's outcome."""

    mode: str  # live (the source's committed offsets) or checkpoints
    groups: tuple[GroupTranslation, ...]
    groups_without_checkpoint: tuple[str, ...]
    rpo: tuple[PartitionRpo, ...]

    STEP = StepName.TRANSLATE_OFFSETS

    def to_detail(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "groups": {
                g.group: {
                    "target_state": g.target_state,
                    "from_checkpoints": g.from_checkpoints,
                    "partitions": [asdict(m) for m in g.partitions],
                }
                for g in self.groups
            },
            "groups_without_checkpoint": list(self.groups_without_checkpoint),
            "rpo": [asdict(r) for r in self.rpo],
        }

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> Translation:
        return cls(
            str(detail.get("mode", "")),
            tuple(
                GroupTranslation(
                    str(group),
                    str(entry.get("target_state", "")),
                    bool(entry.get("from_checkpoints", False)),
                    tuple(PartitionMove.from_json(m) for m in entry.get("partitions", [])),
                )
                for group, entry in detail.get("groups", {}).items()
            ),
            tuple(detail.get("groups_without_checkpoint", [])),
            tuple(PartitionRpo.from_json(r) for r in detail.get("rpo", [])),
        )

    @classmethod
    def of(cls, run: RunRecord) -> Translation:
        """What ``run`` translated (empty when the step has not run)."""
        return cls.from_detail(run.detail(cls.STEP))

    @property
    def group_names(self) -> list[str]:
        return [g.group for g in self.groups]

    def positions(self) -> dict[str, dict[TopicPartition, int]]:
        """Per group, T per replica partition (what commit_group_offsets writes)."""
        return {g.group: g.positions() for g in self.groups}

    def failover_point(self) -> dict[TopicPartition, int]:
        """Per source partition, the replicated end when offsets were translated: every
        record from there on never reached the target."""
        return {
            TopicPartition(r.topic, r.partition): r.replicated_end
            for r in self.rpo
            if r.replicated_end is not None
        }
