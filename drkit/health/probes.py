"""Probes: measure a cluster or a flow once.  The I/O edge of health monitoring.

Every probe is bounded by the caller's time budget (see :mod:`drkit.health.jobs`); the Kafka
calls inside also carry their own timeouts, so a probe that hangs is cut off twice over.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from drkit.clock import age_s
from drkit.config.model import ClusterConfig, HealthPolicy
from drkit.errors import KafkaError
from drkit.health.evaluation import ProbeResult
from drkit.health.observations import DRIFT_LINES, FlowObservation, GroupCheckpoints
from drkit.kafka.admin import TopicInfo, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, not_kafka, tcp_unreachable
from drkit.kafka.io import canary_round_trip
from drkit.kafka.ports import AdminFactory
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

# How long a failed probe waits to learn what answered instead of Kafka (an HTTP server, a
# TLS listener and a closed connection answer in milliseconds; a hung broker was waited for).
WHY_WAIT_S = 0.25


class ClusterProbe(Protocol):
    """Measures one cluster once; never raises for the cluster's faults (they are results)."""

    def probe(self) -> ProbeResult: ...


class ClusterProber:
    """Metadata, controller, brokers, partition health and an acks=all canary round trip."""

    def __init__(
        self, alias: str, cluster: ClusterConfig, policy: HealthPolicy, connect: AdminFactory
    ) -> None:
        self.alias = alias
        self.endpoint = ClusterEndpoint(alias, cluster)
        self.policy = policy
        self.admin = connect(self.endpoint, default_timeout_s=policy.probe_timeout_s)
        self.expected_brokers: int | None = None  # the most brokers ever seen
        self._min_isr: dict[str, int] = {}
        self._min_isr_read_at: float | None = None  # monotonic; None: never read
        self._canary_ready = False

    def probe(self) -> ProbeResult:
        started = time.monotonic()
        now = time.time()
        timeout = self.policy.probe_timeout_s
        refused = self._tcp_unreachable(timeout)
        if refused is not None:
            return ProbeResult(self.alias, now, reachable=False, error=refused)
        try:
            brokers = self.admin.wait_ready(timeout_s=timeout)
            _cluster_id, controller, _nodes = self.admin.describe_cluster(timeout_s=timeout)
            latency = (time.monotonic() - started) * 1000
            topics = self.admin.list_topics(timeout_s=timeout, include_internal=True)
        except KafkaError as err:
            return ProbeResult(self.alias, now, reachable=False, error=self._why(err))
        self.expected_brokers = max(self.expected_brokers or 0, brokers)
        offline = sum(1 for t in topics.values() for p in t.partitions if p.offline)
        under_min_isr = self._under_min_isr(topics)
        canary_ok, canary_ms, error = self._canary()
        return ProbeResult(
            self.alias,
            now,
            reachable=True,
            latency_ms=round(latency, 1),
            brokers=brokers,
            expected_brokers=self.expected_brokers,
            controller=controller,
            canary_ok=canary_ok,
            canary_ms=canary_ms,
            offline_partitions=offline,
            under_min_isr_partitions=under_min_isr,
            error=error,
        )

    def _wait_for_leader(self, topic: str) -> None:
        """A just-created canary topic has no leader for a moment: don't call that a failure."""
        deadline = time.monotonic() + self.policy.probe_timeout_s * 3
        while time.monotonic() < deadline:
            info = self.admin.list_topics(include_internal=True).get(topic)
            if info is not None and all(not p.offline for p in info.partitions):
                return
            time.sleep(0.1)

    def _why(self, err: KafkaError) -> str:
        """``err``, or - where the client's word is only 'Broker transport failure' or a
        timeout - what answered instead: HTTP, TLS, a closed connection, or nothing (hung).
        Asked after a failure only (a healthy cluster's probes cost no extra connection), and
        briefly: what is not Kafka answers at once, and a hung one was waited for already."""
        found = not_kafka(self.endpoint, min(WHY_WAIT_S, self.policy.probe_timeout_s))
        return found if found is not None else str(err)

    def _tcp_unreachable(self, timeout: float) -> str | None:
        """Why no bootstrap server accepts a TCP connection, or None if one does (a stopped
        broker refuses at once; the Kafka client would retry until its timeout)."""
        return tcp_unreachable(self.endpoint, timeout)

    def _under_min_isr(self, topics: dict[str, TopicInfo]) -> int:
        # Topic configs change rarely: read min.insync.replicas once a minute, not every probe.
        read_at = self._min_isr_read_at
        if read_at is None or time.monotonic() - read_at > 60:
            try:
                configs = self.admin.topic_configs(list(topics))
                self._min_isr = {
                    name: int(values["min.insync.replicas"].value or 1)
                    for name, values in configs.items()
                    if "min.insync.replicas" in values
                }
                self._min_isr_read_at = time.monotonic()
            except KafkaError:
                pass
        return sum(
            1
            for name, topic in topics.items()
            for p in topic.partitions
            if not p.offline and len(p.isr) < min(self._min_isr.get(name, 1), len(p.replicas))
        )

    def _canary(self) -> tuple[bool, float | None, str | None]:
        """Produce one record with acks=all and read it back; (ok, round trip ms, error)."""
        topic = self.policy.canary_topic
        try:
            if not self._canary_ready:
                self.admin.create_topics([TopicSpec(topic, 1, None, {"retention.ms": "3600000"})])
                self._wait_for_leader(topic)
                self._canary_ready = True
            round_trip_ms = canary_round_trip(self.endpoint, topic, self.policy.probe_timeout_s)
            return True, round(round_trip_ms, 1), None
        except (KafkaError, Exception) as err:
            return False, None, f"canary failed: {err}"


# Offsets a probe reads at most to count a flow's lag in visible records; a wider lag is
# reported as its offset width (an upper bound, ``lag_exact`` false).
LAG_COUNT_LIMIT = 20_000
DRIFT_EVERY_S = 60.0  # how often a flow probe compares the replicas' topic configs
FIRST_DRIFT_AFTER_S = 5.0


class FlowProber:
    """Heartbeat age on the target, lag from stored progress, checkpoint ages, worker liveness.

    Every name (the heartbeats replica after route renames, the progress and checkpoint topics,
    the replication group) comes from the flow's :class:`FlowTopology`.
    """

    def __init__(
        self,
        topology: FlowTopology,
        source: ClusterConfig,
        target: ClusterConfig,
        policy: HealthPolicy,
        connect: AdminFactory,
    ) -> None:
        self.topology = topology
        self.source = connect(
            ClusterEndpoint(topology.source, source), default_timeout_s=policy.probe_timeout_s
        )
        target_endpoint = ClusterEndpoint(topology.target, target)
        self.target = connect(target_endpoint, default_timeout_s=policy.probe_timeout_s)
        self._heartbeats = TopicTailer(target_endpoint, topology.heartbeats_replica)
        self._progress = ProgressStore(target_endpoint, topology.progress_topic, missing_ok=True)
        self._checkpoints = CheckpointStore(target_endpoint, topology.checkpoints_topic)
        self._latest_beat_ms: int | None = None
        self.timeout = policy.probe_timeout_s
        self._parity = TopicSynchronizer(
            self.source, self.target, topology.selects, topology.target_topic, None, False
        )
        self._acls = (
            AclSynchronizer(topology, self.source, self.target)
            if topology.flow.acl_sync.enabled
            else None
        )
        schemas = flow_schema_sync(topology.flow, source, target)
        self._schemas = SchemaDriftWatch(schemas) if schemas is not None else None
        self._drift: tuple[tuple[str, ...], int] | None = None
        # monotonic; the first comparison waits a little: a monitor's first probes are busy
        self._drift_read_at = time.monotonic() - DRIFT_EVERY_S + FIRST_DRIFT_AFTER_S

    def probe(self) -> FlowObservation:
        now = time.time()
        observation = FlowObservation(self.topology.name, now)
        refused = tcp_unreachable(self.target.endpoint, min(1.0, self.timeout))
        if refused is not None:  # down now: no use waiting out the probe's timeout for it
            return replace(observation, errors=(f"target: {refused}",))
        try:
            self._read_heartbeats()
            snapshot = self._checkpoints.refresh(self.timeout)
            progress = self._progress.refresh(self.timeout)
        except KafkaError as err:
            return replace(observation, errors=(f"target: {err}",))
        beat_age = None if self._latest_beat_ms is None else age_s(now, self._latest_beat_ms / 1000)
        heartbeat_age = None if beat_age is None else round(beat_age, 3)
        observation = replace(
            observation,
            heartbeat_age_s=heartbeat_age,
            checkpoint_age_s=snapshot.age_s(now),
            groups=_group_checkpoints(snapshot),
        )
        try:
            rpo = self.rpo(progress, now)
            group = self.topology.replicate_group
            state = self.source.describe_groups([group]).get(group)
        except KafkaError as err:
            return replace(observation, errors=(f"source: {err}",))
        lag: dict[str, int] = {}
        for part in rpo:
            lag[part.topic] = lag.get(part.topic, 0) + (part.records or 0)
        drift = self._config_drift()
        seconds, timeless = known_seconds(rpo)
        return replace(
            observation,
            lag_by_topic=lag,
            lag_records=total_records(rpo),
            lag_exact=all(part.exact for part in rpo),
            rpo_s=seconds,
            rpo_s_unknown=timeless,
            workers=state.members if state is not None else 0,
            drift=None if drift is None else drift[0],
            drift_total=None if drift is None else drift[1],
        )

    def _config_drift(self) -> tuple[tuple[str, ...], int] | None:
        """How the replicas differ from their sources - configs, with ``acl_sync`` the
        consumers' ACLs, with ``schema_sync`` the schema registry (the first DRIFT_LINES, and
        how many); compared once a minute (all change rarely), None until a comparison
        worked."""
        if time.monotonic() - self._drift_read_at > DRIFT_EVERY_S:
            self._drift_read_at = time.monotonic()
            try:
                _selected, plan = self._parity.compare()
                acls = self._acls.compare() if self._acls is not None else ()
            except KafkaError:
                self._drift = None  # unknown now, not "no drift"
            else:
                lines = differences(plan) + drift_lines(acls, self.topology.target)
                lines += self._schema_drift()
                self._drift = (tuple(lines[:DRIFT_LINES]), len(lines))
        return self._drift

    def _schema_drift(self) -> list[str]:
        """What the target's registry lacks or holds differently, as last compared (in the
        background: a registry's timeouts never spend the probe's budget)."""
        return self._schemas.lines() if self._schemas is not None else []

    def _read_heartbeats(self) -> None:
        if self.topology.heartbeats_replica not in self.target.list_topics():
            return
        for record in self._heartbeats.catch_up(self.timeout):
            beat = Heartbeat.decode(record.key or b"", record.value or b"")
            if (beat.source, beat.target) == (self.topology.source, self.topology.target):
                self._latest_beat_ms = max(self._latest_beat_ms or 0, beat.timestamp_ms)

    def rpo(self, progress: Mapping[TopicPartition, Progress], now: float) -> list[PartitionRpo]:
        """What the target lacks of every partition the flow selects (drkit.lag's rules, as a
        failover plan states it): records in visible records where counted (else offset
        widths: upper bounds), and seconds (the age of the first record the target lacks where
        its span was read, else the time since the partition's progress last moved).

        Every partition of every topic the flow selects counts, with or without progress: one
        without progress lacks all its records.  Records below the log start are gone (a loss
        event, not lag)."""
        partitions = [
            TopicPartition(name, p.partition)
            for name, info in self.source.list_topics().items()
            if name != internal_topics.HEARTBEATS and self.topology.selects(name)
            for p in info.partitions
        ]
        starts = self.source.list_offsets(partitions, "earliest")
        ends = self.source.list_offsets(partitions, "latest")
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
        counts = count_visible(self.source, spans, LAG_COUNT_LIMIT, self.timeout)
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

    def close(self) -> None:
        self._heartbeats.close()
        self._progress.close()
        self._checkpoints.close()


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
