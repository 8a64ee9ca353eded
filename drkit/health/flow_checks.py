"""The checks of a flow probe: one class per thing measured, each owning its fields.

A check is built from the flow's :class:`FlowContext` (its names, both clusters' admins, the
probe's timeout) and measures, in :meth:`FlowCheck.observe`, the fields of
:class:`drkit.health.observations.FlowObservation` it ``owns`` - declared there once, with how
status, readiness and the metrics use them.  :class:`drkit.health.probes.FlowProber` runs
:data:`FLOW_CHECKS` in order, once per probe; a check's ``reads`` names the cluster whose
``KafkaError`` ends the probe (the error named ``target: ...`` or ``source: ...``), and a
probe keeps the fields of the clusters that answered all their checks:

====================  ========  =====================================================
check                 reads     fields
====================  ========  =====================================================
``HeartbeatCheck``    target    ``heartbeat_age_s``
``CheckpointsCheck``  target    ``checkpoint_age_s``, ``groups``
``ProgressRead``      target    (the workers' progress, for ``LagCheck``)
``LagCheck``          source    ``lag_records``, ``lag_by_topic``, ``lag_exact``,
                                ``rpo_s``, ``rpo_s_unknown``
``WorkersCheck``      source    ``workers``
``DriftCheck``        (itself)  ``drift``, ``drift_total``: topic configs, ACLs, schemas
====================  ========  =====================================================

Adding one: a class here placed in :data:`FLOW_CHECKS`, and its fields (with their
metadata) in drkit/health/observations.py.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from drkit.clock import age_s
from drkit.config.model import ClusterConfig
from drkit.errors import KafkaError
from drkit.health.observations import DRIFT_LINES, GroupCheckpoints
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import ClusterAdmin
from drkit.kafka.tailer import TopicTailer
from drkit.lag import (
    PartitionRpo,
    count_visible,
    known_seconds,
    lacking_span,
    partition_rpo,
    progress_age,
    record_age,
    total_records,
)
from drkit.offsets.checkpoint_store import CheckpointSnapshot, CheckpointStore
from drkit.records import TopicPartition
from drkit.replication.acl_sync import AclSynchronizer, drift_lines
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.progress import Progress, ProgressStore
from drkit.replication.topic_sync import TopicSynchronizer, differences
from drkit.schemas.sync import SchemaDriftWatch, flow_schema_sync
from drkit.topology import internal_topics
from drkit.topology.flow import FlowTopology

# Offsets a probe reads at most to count a flow's lag in visible records; a wider lag is
# reported as its offset width (an upper bound, ``lag_exact`` false).
LAG_COUNT_LIMIT = 20_000
DRIFT_EVERY_S = 60.0  # how often a flow probe compares the replicas' topic configs
FIRST_DRIFT_AFTER_S = 5.0


@dataclass(frozen=True)
class FlowContext:
    """What a flow's checks are built from: its names, both clusters, the probe's timeout."""

    topology: FlowTopology
    source: ClusterAdmin
    target: ClusterAdmin
    source_cluster: ClusterConfig
    target_cluster: ClusterConfig
    timeout: float

    @property
    def target_endpoint(self) -> ClusterEndpoint:
        return ClusterEndpoint(self.topology.target, self.target_cluster)


@dataclass
class Round:
    """One probe of a flow: its moment, and what a check read for a later one."""

    now: float
    progress: Mapping[TopicPartition, Progress] = field(default_factory=dict)


class FlowCheck(ABC):
    """One check of a flow: built once per prober from the flow's :class:`FlowContext`,
    observed once per probe."""

    owns: ClassVar[tuple[str, ...]] = ()  # the FlowObservation fields it measures
    # The cluster whose KafkaError ends the probe ("target", "source"); None: it never raises.
    reads: ClassVar[str | None] = None

    def __init__(self, flow: FlowContext) -> None:
        self.flow = flow

    @abstractmethod
    def observe(self, probe: Round) -> dict[str, Any]:
        """The values of the fields it owns (those it knows), read now."""

    def close(self) -> None:  # noqa: B027 - most checks hold nothing to release
        """Release what it holds (clients); nothing by default."""


class HeartbeatCheck(FlowCheck):
    """The age of the newest heartbeat replicated onto the target (its replica's name after
    route renames): whether the link carries records."""

    owns = ("heartbeat_age_s",)
    reads = "target"

    def __init__(self, flow: FlowContext) -> None:
        super().__init__(flow)
        self._heartbeats = TopicTailer(flow.target_endpoint, flow.topology.heartbeats_replica)
        self._latest_beat_ms: int | None = None

    def observe(self, probe: Round) -> dict[str, Any]:
        topology = self.flow.topology
        if topology.heartbeats_replica in self.flow.target.list_topics():
            for record in self._heartbeats.catch_up(self.flow.timeout):
                beat = Heartbeat.decode(record.key or b"", record.value or b"")
                if (beat.source, beat.target) == (topology.source, topology.target):
                    self._latest_beat_ms = max(self._latest_beat_ms or 0, beat.timestamp_ms)
        beat_age = (
            None if self._latest_beat_ms is None else age_s(probe.now, self._latest_beat_ms / 1000)
        )
        return {"heartbeat_age_s": None if beat_age is None else round(beat_age, 3)}

    def close(self) -> None:
        self._heartbeats.close()


class CheckpointsCheck(FlowCheck):
    """The checkpoints on the target: how old the last round is, and per group what moving it
    now would cost."""

    owns = ("checkpoint_age_s", "groups")
    reads = "target"

    def __init__(self, flow: FlowContext) -> None:
        super().__init__(flow)
        self._checkpoints = CheckpointStore(flow.target_endpoint, flow.topology.checkpoints_topic)

    def observe(self, probe: Round) -> dict[str, Any]:
        snapshot = self._checkpoints.refresh(self.flow.timeout)
        return {
            "checkpoint_age_s": snapshot.age_s(probe.now),
            "groups": _group_checkpoints(snapshot),
        }

    def close(self) -> None:
        self._checkpoints.close()


class ProgressRead(FlowCheck):
    """The workers' progress on the target, which :class:`LagCheck` counts from (no field)."""

    owns = ()
    reads = "target"

    def __init__(self, flow: FlowContext) -> None:
        super().__init__(flow)
        self._progress = ProgressStore(
            flow.target_endpoint, flow.topology.progress_topic, missing_ok=True
        )

    def observe(self, probe: Round) -> dict[str, Any]:
        probe.progress = self._progress.refresh(self.flow.timeout)
        return {}

    def close(self) -> None:
        self._progress.close()


class LagCheck(FlowCheck):
    """What the target lacks of every partition the flow selects, as a plan states it
    (:func:`flow_rpo`): in records, per topic, and the worst partition's seconds."""

    owns = ("lag_records", "lag_by_topic", "lag_exact", "rpo_s", "rpo_s_unknown")
    reads = "source"

    def observe(self, probe: Round) -> dict[str, Any]:
        rpo = flow_rpo(self.flow, probe.progress, probe.now)
        lag: dict[str, int] = {}
        for part in rpo:
            lag[part.topic] = lag.get(part.topic, 0) + (part.records or 0)
        seconds, timeless = known_seconds(rpo)
        return {
            "lag_by_topic": lag,
            "lag_records": total_records(rpo),
            "lag_exact": all(part.exact for part in rpo),
            "rpo_s": seconds,
            "rpo_s_unknown": timeless,
        }


class WorkersCheck(FlowCheck):
    """The members of the flow's replication group on the source."""

    owns = ("workers",)
    reads = "source"

    def observe(self, probe: Round) -> dict[str, Any]:
        group = self.flow.topology.replicate_group
        state = self.flow.source.describe_groups([group]).get(group)
        return {"workers": state.members if state is not None else 0}


class DriftCheck(FlowCheck):
    """How the replicas differ from their sources - topic configs (parity), with ``acl_sync``
    the consumers' ACLs, with ``schema_sync`` the schema registry: the first DRIFT_LINES and
    how many.  Compared once a minute (all change rarely); None until a comparison worked, and
    again when a cluster did not answer (unknown, not "no drift")."""

    owns = ("drift", "drift_total")
    reads = None

    def __init__(self, flow: FlowContext) -> None:
        super().__init__(flow)
        topology = flow.topology
        parity = TopicSynchronizer(
            flow.source, flow.target, topology.selects, topology.target_topic, None, False
        )
        # Each source of drift lines in turn; a KafkaError from one leaves the drift unknown.
        self._sources: list[Callable[[], list[str]]] = [lambda: differences(parity.compare()[1])]
        if topology.flow.acl_sync.enabled:
            acls = AclSynchronizer(topology, flow.source, flow.target)
            self._sources.append(lambda: drift_lines(acls.compare(), topology.target))
        schemas = flow_schema_sync(topology.flow, flow.source_cluster, flow.target_cluster)
        if schemas is not None:  # compared in the background: never spends the probe's budget
            self._sources.append(SchemaDriftWatch(schemas).lines)
        self._drift: tuple[tuple[str, ...], int] | None = None
        # monotonic; the first comparison waits a little: a monitor's first probes are busy
        self._read_at = time.monotonic() - DRIFT_EVERY_S + FIRST_DRIFT_AFTER_S

    def observe(self, probe: Round) -> dict[str, Any]:
        if time.monotonic() - self._read_at > DRIFT_EVERY_S:
            self._read_at = time.monotonic()
            try:
                lines = [line for source in self._sources for line in source()]
            except KafkaError:
                self._drift = None
            else:
                self._drift = (tuple(lines[:DRIFT_LINES]), len(lines))
        if self._drift is None:
            return {}
        return {"drift": self._drift[0], "drift_total": self._drift[1]}


# The checks of every flow probe, in the order they run (a cluster's reads together).
FLOW_CHECKS: tuple[type[FlowCheck], ...] = (
    HeartbeatCheck,
    CheckpointsCheck,
    ProgressRead,
    LagCheck,
    WorkersCheck,
    DriftCheck,
)


def flow_rpo(
    flow: FlowContext, progress: Mapping[TopicPartition, Progress], now: float
) -> list[PartitionRpo]:
    """What the target lacks of every partition the flow selects (drkit.lag's rules, as a
    failover plan states it): records in visible records where counted (else offset
    widths: upper bounds), and seconds (the age of the first record the target lacks where
    its span was read, else the time since the partition's progress last moved).

    Every partition of every topic the flow selects counts, with or without progress: one
    without progress lacks all its records.  Records below the log start are gone (a loss
    event, not lag)."""
    source = flow.source
    partitions = [
        TopicPartition(name, p.partition)
        for name, info in source.list_topics().items()
        if name != internal_topics.HEARTBEATS and flow.topology.selects(name)
        for p in info.partitions
    ]
    starts = source.list_offsets(partitions, "earliest")
    ends = source.list_offsets(partitions, "latest")
    known = [tp for tp in partitions if tp in starts and tp in ends]
    spans = {
        tp: span
        for tp in known
        for stored in [progress.get(tp)]
        if (
            span := lacking_span(
                stored.next_offset if stored else None, ends[tp], log_start=starts[tp]
            )
        )
        is not None
    }
    counts = count_visible(source, spans, LAG_COUNT_LIMIT, flow.timeout)
    newest_ms = max((p.timestamp_ms for p in progress.values() if p.timestamp_ms), default=0)
    out = []
    for tp in known:
        stored, count = progress.get(tp), counts[tp]
        out.append(
            partition_rpo(
                tp,
                ends[tp],
                stored.next_offset if stored else None,
                live=True,
                visible=count.records,
                log_start=starts[tp],
                progress_age_s=progress_age(now, stored.timestamp_ms) if stored else None,
                evidence_age_s=progress_age(now, newest_ms),
                lacking_age_s=record_age(now, count.first_timestamp_ms),
            )
        )
    return out


def _group_checkpoints(snapshot: CheckpointSnapshot) -> dict[str, GroupCheckpoints]:
    totals: dict[str, GroupCheckpoints] = {}
    for (group, _tp), checkpoint in snapshot.latest.items():
        known = totals.get(group, GroupCheckpoints())
        totals[group] = GroupCheckpoints(
            known.partitions + 1,
            known.rereads + int(checkpoint.info.get("rereads") or 0),
            known.unreplicated + int(checkpoint.info.get("unreplicated") or 0),
        )
    return totals
