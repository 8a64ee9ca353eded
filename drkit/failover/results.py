"""What a run's steps recorded, as typed values.

A step stores its outcome as a JSON document in its ``failover_steps`` row (the audit trail,
``drkit.failover.run/v1``).  Other steps, the maintenance duties and the drills read some of
those outcomes back: they do so through these values - written with ``to_detail`` and read with
``of`` -, so a document has one definition (``fence_source``'s ``pending`` is also read by
``RunRecord.write_pause_s``, below this module: through ``FENCE_PENDING_KEY``, the name both
use).  The keys any step may
record (why it failed or was skipped, its warning, its after-hooks' mark) are read through
``StepRecord``'s properties (drkit.failover.runs), their one home.

* :class:`SourceFence` (``fence_source``): the topics fenced, and whether the fence is pending
  (the source did not answer); drills judge writes after the fence by it.
* :class:`FencePoint` (``record_fence_point``): the source's end offsets once the fence held;
  ``drain`` waits for them, ``confirm_fence`` checks nothing moved past them.
* :class:`Translation` (``translate_offsets``): every group's S -> T per partition, the groups
  left without a checkpoint and the RPO per partition; ``commit_group_offsets`` writes its
  positions, the failover point (where a returning old primary's divergent tail begins) is its
  replicated ends, and drills and verify judge the groups against it.
* :class:`GroupsCommitted` (``commit_group_offsets``): the groups written and those left alone
  with why; ``drkit failover show`` names the latter.
* :class:`TransactionsSettled` (``abort_open_transactions``): drkit's transactional ids fenced
  on the target, the other producers' open transactions named (and, asked, aborted).
* :class:`DivergentTail` (``capture_divergent_tail``, failback): the records the old primary
  held beyond the failover point, exported; drills compare it with their recount.

The run as a whole keeps its own result - among it the same tail counted once a failed-over
primary answers again (``Divergence``) -: drkit.failover.run_result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drkit.failover.model import (
    PACKED_MOVES,
    PartitionMove,
    StepName,
    packed_moves,
    unpacked_moves,
)
from drkit.failover.runs import FENCE_PENDING_KEY, RunRecord
from drkit.kafka.transactions_tool import OpenTransaction
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition, shared_partition


def partition_key(tp: TopicPartition) -> str:
    """``topic:partition`` - how step documents name a partition."""
    return f"{tp.topic}:{tp.partition}"


def partition_of(key: str) -> TopicPartition:
    """The partition a step document's ``topic:partition`` key names."""
    topic, partition = key.rsplit(":", 1)
    return TopicPartition(topic, int(partition))


@dataclass(frozen=True)
class SourceFence:
    """What ``fence_source`` did: DENY WRITE on ``topics`` for ``principal``, or - the source
    not answering - recorded them ``pending`` (applied when it answers)."""

    topics: tuple[str, ...]
    pending: bool
    principal: str | None = None
    note: str | None = None

    STEP = StepName.FENCE_SOURCE

    def to_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {"topics": list(self.topics), FENCE_PENDING_KEY: self.pending}
        if self.principal is not None:
            detail["principal"] = self.principal
        if self.note is not None:
            detail["note"] = self.note
        return detail

    @classmethod
    def of(cls, run: RunRecord) -> SourceFence | None:
        """The fence ``run`` applied (None: not done, or skipped - no ACL fencing)."""
        detail = run.detail(cls.STEP)
        if FENCE_PENDING_KEY not in detail:
            return None
        return cls(
            tuple(detail.get("topics", [])),
            bool(detail[FENCE_PENDING_KEY]),
            detail.get("principal"),
            detail.get("note"),
        )


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
            shared_partition(m.target_topic, m.target_partition): m.target_offset
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
        """The step's document; each group's moves packed (drkit.failover.model.packed_moves:
        the store keeps them so, and hands them back as ``partitions``)."""
        seen: dict[int, list[Any]] = {}
        return {
            "mode": self.mode,
            "groups": {
                g.group: {
                    "target_state": g.target_state,
                    "from_checkpoints": g.from_checkpoints,
                    PACKED_MOVES: packed_moves(g.partitions, seen),
                }
                for g in self.groups
            },
            "groups_without_checkpoint": list(self.groups_without_checkpoint),
            "rpo": [r.to_json() for r in self.rpo],
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
                    tuple(PartitionMove.from_json(m) for m in _moves(entry)),
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


@dataclass(frozen=True)
class DivergentTail:
    """What ``capture_divergent_tail`` read beyond the failover point and exported."""

    failover_point: Mapping[str, int]  # per source partition (``topic:partition``)
    per_partition: Mapping[str, int]  # records read beyond it
    exported_to: str

    STEP = StepName.CAPTURE_DIVERGENT_TAIL

    @property
    def records(self) -> int:
        return sum(self.per_partition.values())

    def to_detail(self) -> dict[str, Any]:
        return {
            "failover_point": dict(self.failover_point),
            "per_partition": dict(self.per_partition),
            "records": self.records,
            "exported_to": self.exported_to,
        }

    @classmethod
    def of(cls, run: RunRecord) -> DivergentTail | None:
        """The tail ``run`` exported (None: the step has not run)."""
        detail = run.detail(cls.STEP)
        if "per_partition" not in detail:
            return None
        return cls(
            {str(k): int(v) for k, v in detail.get("failover_point", {}).items()},
            {str(k): int(v) for k, v in detail["per_partition"].items()},
            str(detail.get("exported_to", "")),
        )


@dataclass(frozen=True)
class GroupsCommitted:
    """What ``commit_group_offsets`` did: the partitions written per group, and the groups it
    left alone and why (one that became active on the target meanwhile)."""

    committed: Mapping[str, int]
    skipped: Mapping[str, str]
    forced: bool = False

    STEP = StepName.COMMIT_GROUP_OFFSETS

    def to_detail(self) -> dict[str, Any]:
        return {"committed": dict(self.committed), "skipped": dict(self.skipped),
                "forced": self.forced}  # fmt: skip

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> GroupsCommitted | None:
        if "committed" not in detail:
            return None
        return cls(
            {str(k): int(v) for k, v in detail["committed"].items()},
            {str(k): str(v) for k, v in detail.get("skipped", {}).items()},
            bool(detail.get("forced", False)),
        )


@dataclass(frozen=True)
class TransactionsSettled:
    """What ``abort_open_transactions`` did on the target: drkit's own transactional ids it
    fenced, the other producers' transactions it found open on the flow's replicas (named by
    Kafka's transactions tool), those of them it aborted (``--abort-hanging-transactions``), the
    replica partitions still behind an open transaction when it ended, and - when the tool could
    not name the producers - why."""

    fenced: tuple[str, ...]
    still_open: tuple[str, ...]
    others: tuple[OpenTransaction, ...] = ()
    aborted: tuple[OpenTransaction, ...] = ()
    unnamed_because: str | None = None

    STEP = StepName.ABORT_OPEN_TRANSACTIONS

    def to_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "fenced_transactional_ids": list(self.fenced),
            "open_transactions": list(self.still_open),
            "other_producers": [t.to_json() for t in self.others],
            "aborted": [t.to_json() for t in self.aborted],
        }
        if self.unnamed_because is not None:
            detail["unnamed_because"] = self.unnamed_because
        return detail

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> TransactionsSettled | None:
        """The outcome in a step document (None: not recorded - one written before producers
        were named reads with none)."""
        if "fenced_transactional_ids" not in detail:
            return None
        return cls(
            tuple(str(t) for t in detail["fenced_transactional_ids"]),
            tuple(str(p) for p in detail.get("open_transactions", [])),
            tuple(OpenTransaction.from_json(t) for t in detail.get("other_producers", [])),
            tuple(OpenTransaction.from_json(t) for t in detail.get("aborted", [])),
            detail.get("unnamed_because"),
        )

    @classmethod
    def of(cls, run: RunRecord) -> TransactionsSettled | None:
        return cls.from_detail(run.detail(cls.STEP))


def _moves(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A group's move dicts in a translation document, packed or not."""
    packed = entry.get(PACKED_MOVES)
    return unpacked_moves(packed) if packed is not None else list(entry.get("partitions", []))
