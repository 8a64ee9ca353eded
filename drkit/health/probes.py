"""Probes: measure a cluster or a flow once.  The I/O edge of health monitoring.

Every probe is bounded by the caller's time budget (see :mod:`drkit.health.jobs`); the Kafka
calls inside also carry their own timeouts, so a probe that hangs is cut off twice over.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from drkit.config.model import ClusterConfig, HealthPolicy
from drkit.errors import KafkaError
from drkit.health.evaluation import ProbeResult
from drkit.health.flow_checks import FLOW_CHECKS, FlowCheck, FlowContext, Round, flow_rpo
from drkit.health.observations import FlowObservation, measures
from drkit.kafka.admin import TopicInfo, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, not_kafka, tcp_unreachable
from drkit.kafka.io import canary_round_trip
from drkit.kafka.ports import AdminFactory
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition
from drkit.replication.progress import Progress
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


class FlowProber:
    """A flow's checks (drkit.health.flow_checks: heartbeat age on the target, checkpoint ages,
    lag and RPO from stored progress, worker liveness, config drift), run in order into one
    :class:`FlowObservation`.

    Every name (the heartbeats replica after route renames, the progress and checkpoint topics,
    the replication group) comes from the flow's :class:`FlowTopology`.  A target that refuses
    a TCP connection ends the probe at once (errors only); a check's ``KafkaError`` ends it
    with the fields of the clusters whose checks all answered before it (a target that fails
    leaves errors only; a source that fails, the target's fields).
    """

    def __init__(
        self,
        topology: FlowTopology,
        source: ClusterConfig,
        target: ClusterConfig,
        policy: HealthPolicy,
        connect: AdminFactory,
        checks: Sequence[type[FlowCheck]] = FLOW_CHECKS,
        observed: type[FlowObservation] = FlowObservation,
    ) -> None:
        self.topology = topology
        self.timeout = policy.probe_timeout_s
        self.observed = observed
        self.flow = FlowContext(
            topology,
            connect(ClusterEndpoint(topology.source, source), default_timeout_s=self.timeout),
            connect(ClusterEndpoint(topology.target, target), default_timeout_s=self.timeout),
            source,
            target,
            self.timeout,
        )
        self.source, self.target = self.flow.source, self.flow.target
        self.checks: list[FlowCheck] = [check(self.flow) for check in checks]
        measured = {name for name, _known in measures(observed)}
        owned = [name for check in self.checks for name in check.owns]
        if not set(owned) <= measured or len(owned) != len(set(owned)):
            raise ValueError(f"checks must own distinct fields of {observed.__name__}: {owned}")

    def probe(self) -> FlowObservation:
        now = time.time()
        observation = self.observed(self.topology.name, now)
        refused = tcp_unreachable(self.target.endpoint, min(1.0, self.timeout))
        if refused is not None:  # down now: no use waiting out the probe's timeout for it
            return replace(observation, errors=(f"target: {refused}",))
        probe = Round(now)
        kept: dict[str, Any] = {}  # the fields of the clusters whose checks all answered
        pending: dict[str, Any] = {}  # the current cluster's, until its last check answered
        reading: str | None = None
        for check in self.checks:
            if check.reads is not None and check.reads != reading:
                kept |= pending
                pending, reading = {}, check.reads
            try:
                part = check.observe(probe)
            except KafkaError as err:
                return replace(observation, **kept, errors=(f"{check.reads}: {err}",))
            if not part.keys() <= set(check.owns):
                raise ValueError(f"{type(check).__name__} measured {sorted(part)}: not its own")
            pending |= part
        return replace(observation, **kept, **pending)

    def rpo(self, progress: Mapping[TopicPartition, Progress], now: float) -> list[PartitionRpo]:
        """What the target lacks of every partition the flow selects (flow_checks.flow_rpo)."""
        return flow_rpo(self.flow, progress, now)

    def close(self) -> None:
        for check in self.checks:
            check.close()
