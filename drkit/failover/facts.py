"""What the failover planner decides from, as frozen values (pure; no client library).

:func:`drkit.failover.snapshot.gather` reads both clusters into a :class:`Snapshot`; the planner
(drkit.failover.plan) and the translation step decide over it only, the way Patroni's HA loop
decides over a snapshot of the DCS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from drkit.config.model import FailoverPolicy
from drkit.failover.model import Procedure
from drkit.records import TopicPartition
from drkit.translation import PartitionInputs, PartitionMapping, TargetBounds


@dataclass(frozen=True)
class PartitionFacts:
    """One replicated source partition as both sides see it."""

    source: TopicPartition
    target: TopicPartition
    mapping: PartitionMapping | None
    target_bounds: TargetBounds | None  # None: the replica does not exist on the target
    source_end: int | None  # live high watermark, or the last one the workers saw
    source_end_live: bool
    replicated_end: int | None  # progress
    progress_age_s: float | None  # seconds since the workers last stored progress
    # Seconds since the flow's workers last proved themselves caught up on a partition with
    # nothing left to copy: the newest progress of any of the flow's partitions (heartbeats
    # are copied every second) - a worker fetching all its partitions would have copied a new
    # record here as well.  None: no progress at all.
    evidence_age_s: float | None = None
    # Visible records (read committed) of the span the target lacks (drkit.lag.lacking_span),
    # counted when the source answers and the span is small enough to read; None: not counted.
    unreplicated_visible: int | None = None
    # The source's log start, read now (None: the source does not answer): below it records
    # are gone - a loss event, not RPO - and a partition without progress lacks everything
    # from it (drkit.lag.lacking_span).
    source_start: int | None = None
    # Seconds since the first visible record of that span was written (drkit.lag.record_age),
    # when it was read with the count; None: not read.
    unreplicated_age_s: float | None = None

    @classmethod
    def of(
        cls,
        source: TopicPartition,
        target: TopicPartition,
        inputs: PartitionInputs,
        live: bool,
        replicated_end: int | None,
        progress_age_s: float | None,
        evidence_age_s: float | None,
    ) -> PartitionFacts:
        """The facts of a partition whose translation inputs drkit.offsets.inputs read."""
        return cls(
            source, target, inputs.mapping, inputs.bounds, inputs.source_end, live,
            replicated_end, progress_age_s, evidence_age_s, source_start=inputs.source_start,
        )  # fmt: skip

    @cached_property
    def inputs(self) -> PartitionInputs:
        """What a group's position on this partition translates with (drkit.translation's
        one value per partition), from these facts."""
        return PartitionInputs(
            self.mapping, self.target_bounds, self.source_end, source_start=self.source_start
        )


@dataclass(frozen=True)
class GroupFacts:
    group: str
    committed: Mapping[TopicPartition, int]  # S per *source* partition
    from_checkpoints: bool
    target_state: str  # empty / stable / preparingrebalance / ... / absent
    target_members: int
    # Offsets committed on the source's replicas of the target's own topics (the reverse
    # flow's copies): carried back to their origin on the target (Snapshot.returning).
    returning: Mapping[TopicPartition, int] = field(default_factory=dict)
    # The group's offsets on those origins, committed on the target before the move (an
    # unplanned one's divergent tail, read there: drkit.translation, invariant 8).
    returning_origin: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SchemaFacts:
    """The flow's two schema registries compared (``schema_sync`` flows only)."""

    missing_ids: tuple[int, ...]  # schema ids the target's registry lacks
    missing_versions: int  # subject versions it lacks
    conflicts: tuple[str, ...]  # one id, two schemas (drkit.schemas.catalogue)
    error: str | None  # why they could not be compared (a registry did not answer)


@dataclass(frozen=True)
class Snapshot:
    procedure: Procedure
    flow: str
    source: str
    target: str
    reverse_flow: str | None
    source_reachable: bool
    target_reachable: bool
    source_error: str | None
    partitions: Mapping[TopicPartition, PartitionFacts]
    groups: tuple[GroupFacts, ...]
    groups_without_checkpoint: tuple[str, ...]
    missing_replicas: tuple[str, ...]
    short_replicas: tuple[str, ...]  # replicas with fewer partitions than the source topic
    open_transactions: tuple[str, ...]
    pointer: str | None
    policy: FailoverPolicy
    force: bool
    now_ms: int
    # Groups the monitor has seen consume this flow's source (state store): with the source
    # gone, those without a checkpoint are listed with where they will start.
    groups_seen: tuple[str, ...] = ()
    # The groups the operator named (--group); None: every group of the flow.
    requested_groups: tuple[str, ...] | None = None
    # The flow's groups of another type (KIP-932 share groups, streams groups): never moved,
    # always named in the plan (source reachable only: nobody can list them otherwise).
    untranslatable_groups: tuple[str, ...] = ()
    # The schema registries compared (None: the flow has no schema_sync).
    schemas: SchemaFacts | None = None
    # The way back of a round trip: the reverse flow's offset maps (read on the source, where
    # that flow writes), by the replica partition on the source.  A group that read the
    # target's topic there through its replica resumes on the target's own topic
    # (drkit.translation.translate_back).  Empty: no reverse flow, or the source is gone.
    returning: Mapping[TopicPartition, PartitionMapping] = field(default_factory=dict)
    # ... and per replica partition, its copies past the map's last one that groups read (by
    # position: the source offset their provenance names) - copied, never recorded in the map.
    returning_held: Mapping[TopicPartition, Mapping[int, int]] = field(default_factory=dict)
    # Other sources of flows into the target that the source's data never reaches (a fan-in,
    # drkit.topology.fan_in): moving the one pointer there would fence their applications.
    fan_in: tuple[str, ...] = ()
    # The source's other standbys (dc3 beside dc2: drkit.topology.fan_in.other_standbys), and
    # the configured flows from the target to them (``dc2->dc3``): the plan says how each
    # follows the new primary (docs/three-dc.md).
    other_standbys: tuple[str, ...] = ()
    onward_flows: tuple[str, ...] = ()
    # Topics the flow replicated (its progress and offset map on the target name them) that
    # the live source does not list: deleted, or hidden from drkit's principal by ACLs - then
    # nothing of them is fenced or moved.
    unlisted_topics: tuple[str, ...] = ()
    # Offset-sync records on the target that failed verification (drkit/signing.py): ignored;
    # translation rounds down where they may hide copies (drkit.translation, invariant 9).
    unverified_syncs: int = 0
    # ... and those that verified: none of them beside rejected ones means the key this
    # deployment has is not the one the workers signed with (a store replaced without its keys).
    verified_syncs: int = 0
    # Copies rejected records claim that the mapping loader did not check against the
    # replica's records yet (its reads per partition and refresh are bounded): they lower the
    # answers they could lower, flagged 'unchecked' (drkit.offsets.corroboration; translation,
    # invariant 10); a planned move blocks on them.
    unchecked_claims: int = 0
    # Why the target did not answer (target_reachable False): what answered instead, if any.
    target_error: str | None = None

    @cached_property
    def inputs(self) -> Mapping[TopicPartition, PartitionInputs]:
        """Each partition's translation inputs, as drkit.translation.translate_group takes
        them - built once per snapshot."""
        return {tp: part.inputs for tp, part in self.partitions.items()}

    @cached_property
    def partitions_by_topic(self) -> Mapping[str, tuple[PartitionFacts, ...]]:
        """The replicated partitions of each source topic, in partition order - built once, not
        scanned per group: 10,000 groups over 5,000 partitions would be 50 million visits."""
        out: dict[str, list[PartitionFacts]] = {}
        for tp, part in sorted(self.partitions.items()):
            out.setdefault(tp.topic, []).append(part)
        return {topic: tuple(parts) for topic, parts in out.items()}
