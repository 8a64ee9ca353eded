"""Probes: measure a cluster or a flow once.  The I/O edge of health monitoring.

Every probe is bounded by the caller's time budget (see :mod:`drkit.health.jobs`); the Kafka
calls inside also carry their own timeouts, so a probe that hangs is cut off twice over.
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition as RdTP

from drkit.config.model import ClusterConfig, FlowConfig, HealthPolicy
from drkit.errors import KafkaError
from drkit.health.evaluation import ProbeResult
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.replication import internal_topics
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.policy import build_policy
from drkit.replication.progress import ProgressStore


class ClusterProber:
    """Metadata, controller, brokers, partition health and an acks=all canary round trip."""

    def __init__(self, alias: str, cluster: ClusterConfig, policy: HealthPolicy) -> None:
        self.alias = alias
        self.endpoint = ClusterEndpoint(alias, cluster)
        self.policy = policy
        self.admin = KafkaAdmin(self.endpoint, default_timeout_s=policy.probe_timeout_s)
        self.expected_brokers: int | None = None  # the most brokers ever seen
        self._min_isr: dict[str, int] = {}
        self._min_isr_read_at = 0.0
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
            return ProbeResult(self.alias, now, reachable=False, error=str(err))
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

    def _tcp_unreachable(self, timeout: float) -> str | None:
        """Why no bootstrap server accepts a TCP connection, or None if one does.

        A cheap first step: a stopped broker refuses at once, where the Kafka client would keep
        retrying until its timeout and make detection slower than the probe interval.
        """
        errors = []
        for server in self.endpoint.bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=timeout):
                    return None
            except OSError as err:
                errors.append(f"{server.strip()}: {err.strerror or err}")
        return "no bootstrap server accepts connections (" + "; ".join(errors) + ")"

    def _under_min_isr(self, topics: dict[str, Any]) -> int:
        # Topic configs change rarely: read min.insync.replicas once a minute, not every probe.
        if time.monotonic() - self._min_isr_read_at > 60:
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
                self.admin.create_topics([TopicSpec(topic, 1, -1, {"retention.ms": "3600000"})])
                self._wait_for_leader(topic)
                self._canary_ready = True
            started = time.monotonic()
            token = uuid.uuid4().hex.encode()
            producer = make_producer(
                self.endpoint,
                {
                    "linger.ms": 0,
                    "message.timeout.ms": int(self.policy.probe_timeout_s * 1000),
                    "compression.type": "none",
                },
            )
            delivered: list[Any] = []
            producer.produce(
                topic,
                token,
                None,
                0,
                on_delivery=lambda err, msg: delivered.append((err, msg.offset())),
            )
            producer.flush(self.policy.probe_timeout_s)
            if not delivered or delivered[0][0] is not None:
                reason = delivered[0][0].str() if delivered else "no acknowledgement"
                return False, None, f"canary produce failed: {reason}"
            offset = delivered[0][1]
            consumer = make_consumer(self.endpoint, f"drkit-canary-{uuid.uuid4().hex[:8]}")
            try:
                consumer.assign([RdTP(topic, 0, offset)])
                message = consumer.poll(self.policy.probe_timeout_s)
            finally:
                consumer.close()
            if message is None or message.error() is not None or message.value() != token:
                return False, None, "canary record not read back"
            return True, round((time.monotonic() - started) * 1000, 1), None
        except (KafkaError, Exception) as err:
            return False, None, f"canary failed: {err}"


@dataclass
class FlowObservation:
    """One probe of a flow: replication latency, lag, checkpoints, workers."""

    flow: str
    at: float
    heartbeat_age_s: float | None = None
    lag_records: int | None = None
    lag_by_topic: dict[str, int] = field(default_factory=dict)
    checkpoint_age_s: float | None = None
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    workers: int | None = None
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "at": self.at,
            "heartbeat_age_s": self.heartbeat_age_s,
            "lag_records": self.lag_records,
            "lag_by_topic": self.lag_by_topic,
            "checkpoint_age_s": self.checkpoint_age_s,
            "groups": self.groups,
            "workers": self.workers,
            "errors": self.errors,
        }


class FlowProber:
    """Heartbeat age on the target, lag from stored progress, checkpoint ages, worker liveness."""

    def __init__(
        self, flow: FlowConfig, source: ClusterConfig, target: ClusterConfig, policy: HealthPolicy
    ) -> None:
        self.flow = flow
        self.source = KafkaAdmin(
            ClusterEndpoint(flow.source, source), default_timeout_s=policy.probe_timeout_s
        )
        target_endpoint = ClusterEndpoint(flow.target, target)
        self.target = KafkaAdmin(target_endpoint, default_timeout_s=policy.probe_timeout_s)
        heartbeats = build_policy(flow.replication_policy).target_topic(
            flow.source, internal_topics.HEARTBEATS
        )
        self._heartbeats = TopicTailer(target_endpoint, heartbeats)
        self._heartbeat_topic = heartbeats
        self._progress = ProgressStore(target_endpoint, internal_topics.progress_topic(flow.source))
        self._checkpoints = CheckpointStore(
            target_endpoint, internal_topics.checkpoints_topic(flow.source)
        )
        self._latest_beat: int | None = None
        self.timeout = policy.probe_timeout_s

    def probe(self) -> FlowObservation:
        now = time.time()
        observation = FlowObservation(self.flow.name, now)
        try:
            if self._heartbeat_topic in self.target.list_topics():
                for record in self._heartbeats.catch_up(self.timeout):
                    beat = Heartbeat.decode(record.key or b"", record.value or b"")
                    if (beat.source, beat.target) == (self.flow.source, self.flow.target):
                        self._latest_beat = max(self._latest_beat or 0, beat.timestamp_ms)
            if self._latest_beat is not None:
                observation.heartbeat_age_s = round(max(0.0, now - self._latest_beat / 1000), 3)
            snapshot = self._checkpoints.refresh(self.timeout)
            observation.checkpoint_age_s = snapshot.age_s(now)
            for (group, _tp), checkpoint in snapshot.latest.items():
                entry = observation.groups.setdefault(
                    group, {"partitions": 0, "rereads": 0, "unreplicated": 0}
                )
                entry["partitions"] += 1
                entry["rereads"] += int(checkpoint.info.get("rereads") or 0)
                entry["unreplicated"] += int(checkpoint.info.get("unreplicated") or 0)
            progress = self._progress.refresh(self.timeout)
        except KafkaError as err:
            observation.errors.append(f"target: {err}")
            return observation
        try:
            ends = self.source.list_offsets(list(progress), "latest")
            lag: dict[str, int] = {}
            for tp, stored in progress.items():
                if tp.topic == internal_topics.HEARTBEATS or tp not in ends:
                    continue
                lag[tp.topic] = lag.get(tp.topic, 0) + max(0, ends[tp] - stored.next_offset)
            observation.lag_by_topic = lag
            observation.lag_records = sum(lag.values())
            group = f"drkit-replicate.{self.flow.source}.{self.flow.target}"
            state = self.source.describe_groups([group]).get(group)
            observation.workers = state.members if state is not None else 0
        except KafkaError as err:
            observation.errors.append(f"source: {err}")
        return observation

    def close(self) -> None:
        self._heartbeats.close()
        self._progress.close()
        self._checkpoints.close()
