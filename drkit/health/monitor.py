"""The monitor process: scheduled probes -> pure evaluation -> store, metrics, HTTP.

One ``Monitor`` per observer.  Jobs (all named, budgeted and isolated, see :mod:`jobs`):

* ``probe:<cluster>``  - probe one cluster, evaluate this observer's state, persist;
* ``flow:<flow>``      - observe one flow (heartbeat age, lag, checkpoints, workers);
* ``groups:<flow>``    - Burrow-style lag status of the flow's consumer groups on its source;
* ``quorum``           - combine every observer's states from the store, persist verdict changes;
* ``prune``            - drop raw observations older than a week.

Failures never stop the scheduler: a job that raises or overruns is logged, counted in
``drkit_job_failures_total`` and - for cluster probes - recorded as a failed probe.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import KafkaError
from drkit.health import jobs
from drkit.health.evaluation import ClusterHealth, ClusterState, ProbeResult, evaluate
from drkit.health.group_lag import LagSample, LagStatus, group_status, partition_status
from drkit.health.metrics import STATE_VALUE, MonitorMetrics, default_metrics
from drkit.health.probes import ClusterProber, FlowProber
from drkit.health.quorum import ObserverReport, verdict
from drkit.health.status import build_status
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.replication.topic_filter import NameMatcher
from drkit.store.db import StateStore
from drkit.store.health_repo import HealthRepository

log = logging.getLogger(__name__)

OBSERVATION_RETENTION_S = 7 * 24 * 3600
_GROUP_WINDOW = 10  # samples per group partition (Burrow's default window)


class Monitor:
    def __init__(
        self,
        config: DrkitConfig,
        observer: str,
        store: StateStore,
        metrics: MonitorMetrics | None = None,
    ) -> None:
        self.config = config
        self.observer = observer
        self.store = store
        self.repo = HealthRepository(store)
        self.metrics = metrics or default_metrics()
        self.policy = config.health
        self.key = f"{observer}-{uuid.uuid4().hex[:8]}"
        self.clusters = {
            alias: ClusterProber(alias, cluster, self.policy)
            for alias, cluster in config.clusters.items()
        }
        self.health: dict[str, ClusterHealth] = {a: ClusterHealth(a) for a in config.clusters}
        self.quorum_states: dict[str, str] = {}
        self._flows: dict[str, FlowProber] = {}
        self._group_windows: dict[tuple[str, str, TopicPartition], deque[LagSample]] = {}
        self._group_states: dict[tuple[str, str], LagStatus] = {}
        self._runner = jobs.BudgetedRunner()

    # -- jobs -----------------------------------------------------------------------------

    def job_names(self) -> list[str]:
        names = [f"probe:{alias}" for alias in sorted(self.config.clusters)]
        names += [f"flow:{flow.name}" for flow in self.config.flows]
        names += [f"groups:{flow.name}" for flow in self.config.flows]
        return [*names, "quorum", "prune"]

    def _job(self, name: str) -> Callable[[], Any]:
        kind, _, subject = name.partition(":")
        if kind == "probe":
            return lambda: self.probe_cluster(subject)
        if kind == "flow":
            return lambda: self.observe_flow(self.config.flow(subject))
        if kind == "groups":
            return lambda: self.observe_groups(self.config.flow(subject))
        if kind == "quorum":
            return self.evaluate_quorum
        if kind == "prune":
            return lambda: self.repo.prune_observations(OBSERVATION_RETENTION_S)
        raise KeyError(name)

    def budget(self, name: str) -> float:
        # A probe may use its Kafka timeout plus the canary; never more than one interval.
        return max(self.policy.probe_timeout_s * 2, self.policy.probe_interval_s)

    def run_job(self, name: str) -> None:
        """Run one job within its budget; failures are counted, logged and contained."""
        started = time.monotonic()
        try:
            self._runner.run(self._job(name), self.budget(name), name)
        except jobs.BudgetExceeded as err:
            self.metrics.job_failures.labels(name, "timeout").inc()
            log.warning("job overran its budget", extra={"job": name, "error": str(err)})
            if name.startswith("probe:"):
                alias = name.partition(":")[2]
                self._record(
                    alias, ProbeResult(alias, time.time(), reachable=False, error=str(err))
                )
        except Exception as err:  # isolation: one failing job never stops the others
            self.metrics.job_failures.labels(name, "error").inc()
            log.warning("job failed", extra={"job": name, "error": str(err)})
        finally:
            self.metrics.job_duration.labels(name).observe(time.monotonic() - started)

    # -- clusters -------------------------------------------------------------------------

    def probe_cluster(self, alias: str) -> ClusterHealth:
        result = self.clusters[alias].probe()
        return self._record(alias, result)

    def _record(self, alias: str, result: ProbeResult) -> ClusterHealth:
        previous = self.health[alias]
        current = evaluate(previous, result, self.policy)
        self.health[alias] = current
        changed = current.changed_from(previous)
        self.repo.record_probe(
            self.observer,
            alias,
            result.at,
            result.outcome.value == "ok",
            result.latency_ms,
            result.evidence(),
            current.state.value,
            current.since or result.at,
            current.evidence,
            previous.state.value if changed else None,
        )
        if changed:
            log.info(
                "cluster state changed",
                extra={
                    "cluster": alias,
                    "observer": self.observer,
                    "from": previous.state.value,
                    "to": current.state.value,
                    "reason": current.evidence.get("reason"),
                },
            )
        m = self.metrics
        m.cluster_state.labels(alias).set(STATE_VALUE[current.state.value])
        m.brokers.labels(alias).set(result.brokers)
        m.offline.labels(alias).set(result.offline_partitions)
        m.under_min_isr.labels(alias).set(result.under_min_isr_partitions)
        if result.latency_ms is not None:
            m.probe_latency.labels(alias).set(result.latency_ms / 1000)
        if result.canary_ms is not None:
            m.canary.labels(alias).set(result.canary_ms / 1000)
        return current

    def evaluate_quorum(self) -> dict[str, str]:
        now = time.time()
        rows = self.repo.observer_states(now - self.policy.observation_window_s)
        reports = [
            ObserverReport(r.observer, r.cluster, ClusterState(r.state), r.updated_at.timestamp())
            for r in rows
        ]
        for alias in self.config.clusters:
            decided = verdict(alias, reports, self.policy, now)
            self.metrics.quorum_state.labels(alias).set(STATE_VALUE[decided.state.value])
            self.metrics.down_votes.labels(alias).set(len(decided.down_votes))
            old = self.quorum_states.get(alias)
            if old != decided.state.value:
                self.repo.record_transition(
                    "quorum",
                    alias,
                    self.observer,
                    old,
                    decided.state.value,
                    {
                        "reason": f"{len(decided.down_votes)}/{decided.quorum} observers report "
                        f"it unavailable",
                        "voters": list(decided.voters),
                        "down_votes": list(decided.down_votes),
                    },
                    now,
                )
                self.quorum_states[alias] = decided.state.value
        return dict(self.quorum_states)

    # -- flows ----------------------------------------------------------------------------

    def _flow_prober(self, flow: FlowConfig) -> FlowProber:
        prober = self._flows.get(flow.name)
        if prober is None:
            prober = FlowProber(
                flow,
                self.config.clusters[flow.source],
                self.config.clusters[flow.target],
                self.policy,
            )
            self._flows[flow.name] = prober
        return prober

    def observe_flow(self, flow: FlowConfig) -> dict[str, Any]:
        observation = self._flow_prober(flow).probe()
        data = observation.to_json()
        data["group_lag"] = {
            group: status.value
            for (name, group), status in self._group_states.items()
            if name == flow.name
        }
        self.repo.save_flow_status(self.observer, flow.name, observation.at, data)
        m = self.metrics
        if observation.heartbeat_age_s is not None:
            m.heartbeat_age.labels(flow.name).set(observation.heartbeat_age_s)
        if observation.lag_records is not None:
            m.flow_lag.labels(flow.name).set(observation.lag_records)
        if observation.checkpoint_age_s is not None:
            m.checkpoint_age.labels(flow.name).set(observation.checkpoint_age_s)
        if observation.workers is not None:
            m.workers.labels(flow.name).set(observation.workers)
        return data

    def observe_groups(self, flow: FlowConfig) -> dict[str, LagStatus]:
        """Sample committed and end offsets of the flow's groups on its source; Burrow status."""
        admin = KafkaAdmin(
            ClusterEndpoint(flow.source, self.config.clusters[flow.source]),
            default_timeout_s=self.policy.probe_timeout_s,
        )
        matcher = NameMatcher.of(flow.groups)
        try:
            names = [
                g
                for g in admin.list_groups()
                if matcher.matches(g) and not g.startswith(("drkit-", "__drkit"))
            ]
            committed = admin.groups_offsets(names)
            partitions = {tp for o in committed.values() for tp in o.offsets}
            ends = admin.list_offsets(partitions, "latest")
        except KafkaError as err:
            log.debug("group sampling failed", extra={"flow": flow.name, "error": str(err)})
            return {}
        now = time.time()
        statuses: dict[str, LagStatus] = {}
        for group, offsets in committed.items():
            per_partition = []
            for tp, offset in offsets.offsets.items():
                window = self._group_windows.setdefault(
                    (flow.name, group, tp), deque(maxlen=_GROUP_WINDOW)
                )
                previous = window[-1] if window else None
                commit_at = previous.commit_at if previous and previous.committed == offset else now
                window.append(LagSample(now, offset, ends.get(tp, offset), commit_at))
                per_partition.append(partition_status(list(window), now))
            status = group_status(per_partition)
            statuses[group] = status
            old = self._group_states.get((flow.name, group))
            if old is not status:
                self.repo.record_transition(
                    "group",
                    f"{flow.source}/{group}",
                    self.observer,
                    old.value if old else None,
                    status.value,
                    {
                        "reason": f"lag status {status.value}",
                        "lag": sum(
                            max(0, ends.get(tp, o) - o) for tp, o in offsets.offsets.items()
                        ),
                    },
                    now,
                )
                self._group_states[(flow.name, group)] = status
        for status in LagStatus:
            self.metrics.groups.labels(flow.name, status.value).set(
                sum(1 for s in statuses.values() if s is status)
            )
        return statuses

    # -- status ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return current_status(self.config, self.repo)

    def close(self) -> None:
        for prober in self._flows.values():
            prober.close()


def current_status(config: DrkitConfig, repo: HealthRepository) -> dict[str, Any]:
    return build_status(
        config,
        repo.all_observer_states(),
        repo.flow_statuses(),
        repo.recent_transitions(),
        repo.last_failover(),
    )
