"""The monitor process: scheduled probes -> pure evaluation -> metrics, store, HTTP.

One ``Monitor`` per observer.  Jobs (all named, budgeted and isolated, see :mod:`jobs`):

* ``probe:<cluster>``  - probe one cluster, evaluate this observer's state, persist;
* ``flow:<flow>``      - observe one flow (heartbeat age, lag, checkpoints, workers);
* ``groups:<flow>``    - Burrow-style lag status of the flow's consumer groups on its source;
* ``quorum``           - combine every observer's states from the store, persist verdict changes;
* ``prune``            - drop raw observations older than a week.

Each job is two steps: the Kafka side (probing, within the job's budget) and the state-store
side (within its own budget, through :class:`StoreWatch`).  So:

* failures never stop the scheduler: a job that raises or overruns is logged and counted in
  ``drkit_monitor_task_failures_total``; an overrunning cluster probe is a failed probe -
  unless this process was starved of CPU meanwhile: then it is inconclusive (kind
  ``starved``), no evidence either way, and ``/healthz`` fails once they run in a row;
* the state store being down (or hanging) never stops probing: the in-memory evaluation and
  the metrics go on, ``/healthz`` fails naming the store, and once the store answers again the
  newest state - with the transition it missed, from the state last stored - is written.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import KafkaError, StateStoreError
from drkit.health import jobs
from drkit.health.evaluation import (
    ClusterHealth,
    ClusterState,
    ProbeOutcome,
    ProbeResult,
    evaluate,
    resumed,
)
from drkit.health.group_lag import LagSample, LagStatus, group_status, partition_status
from drkit.health.identity import is_vote
from drkit.health.jobs import JobKind, parse_job
from drkit.health.metrics import STATE_VALUE, MonitorMetrics, default_metrics
from drkit.health.observations import FlowObservation
from drkit.health.probes import ClusterProbe, ClusterProber, FlowProber
from drkit.health.quorum import KNOWN_WINDOWS, ObserverReport, verdict
from drkit.health.store_watch import StoreOperation, StoreWatch
from drkit.health.subjects import SubjectKind
from drkit.kafka.admin import GroupOffsets
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin, read_group_offsets
from drkit.lag import group_total
from drkit.records import TopicPartition
from drkit.replication.loss_repo import LossRepository
from drkit.store.db import StateStore, safe_url, shown_error
from drkit.store.guard import WriteGuard
from drkit.store.health_repo import HealthRepository
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import is_own_group
from drkit.topology.topic_filter import NameMatcher

log = logging.getLogger(__name__)
T = TypeVar("T")

OBSERVATION_RETENTION_S = 7 * 24 * 3600
_GROUP_WINDOW = 10  # samples per group partition (Burrow's default window)
# /healthz fails when no job finished for this many probe intervals (the scheduler is stuck).
_STALL_INTERVALS = 5


@dataclass(frozen=True)
class Liveness:
    """``/healthz``: is this monitor doing its job?  ``problems`` say what is wrong."""

    ok: bool
    problems: tuple[str, ...]


class Monitor:
    def __init__(
        self,
        config: DrkitConfig,
        observer: str,
        store: StateStore,
        metrics: MonitorMetrics | None = None,
        probers: Mapping[str, ClusterProbe] | None = None,
        runner: jobs.BudgetedRunner | None = None,
        claim: WriteGuard | None = None,
        *,
        connect: AdminFactory,
    ) -> None:
        """``connect``: how it reaches the clusters (drkit.kafka.ports); ``probers``: how to
        probe some clusters instead of a :class:`ClusterProber` (tests pass probes that hang,
        fail or count); ``runner``: the jobs' runner (tests pass one that reads CPU waits of
        their choosing); ``claim``: the observer id's claim, which fences every vote this
        monitor writes (drkit.health.identity)."""
        self.config = config
        self.observer = observer
        self.store = store
        self.connect = connect
        self.repo = HealthRepository(store, claim)
        self.losses = LossRepository(store)
        self.metrics = metrics or default_metrics()
        self.store_watch = StoreWatch(self.metrics)
        self.policy = config.health
        given = probers or {}
        self.clusters: dict[str, ClusterProbe] = {
            alias: given[alias]
            if alias in given
            else ClusterProber(alias, cluster, self.policy, connect)
            for alias, cluster in config.clusters.items()
        }
        self.topologies = {flow.name: FlowTopology.of(flow) for flow in config.flows}
        self.health: dict[str, ClusterHealth] = {a: ClusterHealth(a) for a in config.clusters}
        # This observer's state of each cluster as last written to the store: a transition is
        # written from it, so one missed while the store was down is written when it is back.
        self._stored_state: dict[str, ClusterState] = dict.fromkeys(
            config.clusters, ClusterState.UNKNOWN
        )
        self.quorum_states: dict[str, ClusterState] = {}
        self._flows: dict[str, FlowProber] = {}
        self._group_windows: dict[tuple[str, str, TopicPartition], deque[LagSample]] = {}
        self._group_states: dict[tuple[str, str], LagStatus] = {}
        self._runner = runner or jobs.BudgetedRunner()
        self._last_job_done = time.monotonic()

    def resume_views(self) -> None:
        """Go on from this observer's stored views that are still fresh (within the
        observation window): a process that probes now and then - ``drkit status`` - counts
        its failures in a row across runs, as a monitor does across probes."""
        _now, rows = self.repo.observer_states(self.policy.observation_window_s)
        for row in rows:
            if row.observer == self.observer and row.cluster in self.health:
                since = row.since.timestamp() if row.since else None  # this observer's clock
                self.health[row.cluster] = resumed(row.cluster, row.state, since, row.evidence)
                self._stored_state[row.cluster] = ClusterState(row.state)

    # -- jobs -----------------------------------------------------------------------------

    def job_names(self) -> list[str]:
        names = [f"{JobKind.PROBE}:{alias}" for alias in sorted(self.config.clusters)]
        names += [f"{JobKind.FLOW}:{flow.name}" for flow in self.config.flows]
        names += [f"{JobKind.GROUPS}:{flow.name}" for flow in self.config.flows]
        return [*names, JobKind.QUORUM.value, JobKind.PRUNE.value]

    @property
    def interval_s(self) -> float:
        return self.policy.probe_interval_s

    def budget(self, name: str) -> float:
        # A probe may use its Kafka timeout plus the canary; never more than one interval.
        return max(self.policy.probe_timeout_s * 2, self.policy.probe_interval_s)

    def run_job(self, name: str) -> None:
        """Run one job; its failures are counted, logged and contained."""
        kind, subject = parse_job(name)
        started = time.monotonic()
        try:
            if kind is JobKind.PROBE:
                self._probe_job(name, subject)
            elif kind is JobKind.FLOW:
                self._flow_job(name, self.config.flow(subject))
            elif kind is JobKind.GROUPS:
                self._groups_job(name, self.config.flow(subject))
            elif kind is JobKind.QUORUM:
                self.evaluate_quorum()
            else:
                self._store(
                    StoreOperation.PRUNE,
                    name,
                    lambda: self.repo.prune_observations(OBSERVATION_RETENTION_S),
                )
        except jobs.JobAbandoned:
            return  # the monitor is stopping: not a failure
        except Exception as err:  # isolation: one failing job never stops the others
            self._job_failed(name, "error", err)
        finally:
            self.metrics.task_duration.labels(name).observe(time.monotonic() - started)
            self._last_job_done = time.monotonic()

    def _job_failed(self, name: str, kind: str, err: BaseException) -> None:
        self.metrics.task_failures.labels(name, kind).inc()
        log.warning("job failed", extra={"job": name, "kind": kind, "error": str(err)})

    def _kafka(self, name: str, work: Callable[[], T], *, watch_cpu: bool = False) -> T:
        """``work()`` (the Kafka side of a job) within the job's budget; ``watch_cpu``: an
        overrun says whether this process was starved meanwhile (jobs.BudgetExceeded)."""
        return self._runner.run(  # type: ignore[no-any-return]
            work, self.budget(name), name, watch_cpu=watch_cpu
        )

    def _store(
        self,
        operation: StoreOperation,
        name: str,
        work: Callable[[], object],
        *,
        writes: bool = True,
    ) -> bool:
        """Run a state-store call within its own budget; False (recorded) when it failed.

        Only a call that ``writes`` marks the store available again when it succeeds: a store
        that answers reads and refuses writes (read-only, a full disk) must not flap back to
        "up" - and /healthz to 200 - on every successful read."""
        try:
            self._runner.run(work, self.budget(name), f"store:{name}")
        except (StateStoreError, SQLAlchemyError, jobs.BudgetExceeded) as err:
            # /healthz shows it: never SQLAlchemy's text (the statement and its parameters).
            error = shown_error(err)
            self.store_watch.failed(operation, error)
            log.warning(
                "state store failed",
                extra={"job": name, "operation": operation.value, "error": error},
            )
            return False
        if writes:
            self.store_watch.succeeded()
        return True

    # -- clusters -------------------------------------------------------------------------

    def _probe_job(self, name: str, alias: str) -> None:
        try:
            result = self._kafka(name, self.clusters[alias].probe, watch_cpu=True)
        except jobs.BudgetExceeded as err:
            # An overrun while this process waited for a CPU is no evidence against the
            # cluster (drkit.health.evaluation: inconclusive).
            self._job_failed(name, "starved" if err.starved else "timeout", err)
            result = ProbeResult(
                alias, time.time(), reachable=False, error=str(err), inconclusive=err.starved
            )
        self.record_probe(alias, result)

    def probe_cluster(self, alias: str) -> ClusterHealth:
        """Probe ``alias`` now (no budget: for callers that own their time, like the CLI)."""
        return self.record_probe(alias, self.clusters[alias].probe())

    def record_probe(self, alias: str, result: ProbeResult) -> ClusterHealth:
        """Evaluate ``result``, update the metrics, and persist (if the store takes it)."""
        previous = self.health[alias]
        current = evaluate(previous, result, self.policy)
        self.health[alias] = current
        if current.changed_from(previous):
            log.info(
                "cluster state changed",
                extra={
                    "cluster": alias,
                    "observer": self.observer,
                    "from": previous.state.value,
                    "to": current.state.value,
                    "reason": current.reason,
                },
            )
        m = self.metrics
        m.cluster_state.labels(alias).set(STATE_VALUE[current.state])
        if result.outcome is not ProbeOutcome.INCONCLUSIVE:  # it measured nothing
            m.brokers.labels(alias).set(result.brokers)
            m.offline.labels(alias).set(result.offline_partitions)
            m.under_min_isr.labels(alias).set(result.under_min_isr_partitions)
        if result.latency_ms is not None:
            m.probe_latency.labels(alias).set(result.latency_ms / 1000)
        if result.canary_ms is not None:
            m.canary.labels(alias).set(result.canary_ms / 1000)
        stored = self._stored_state[alias]
        since = current.since if current.since is not None else result.at
        written = self._store(
            StoreOperation.PROBE,
            f"{JobKind.PROBE}:{alias}",
            lambda: self.repo.record_probe(
                self.observer,
                alias,
                result.at,
                result.outcome is ProbeOutcome.OK,
                result.latency_ms,
                result.evidence(),
                current.state.value,
                since,
                current.evidence(),
                stored.value if stored is not current.state else None,
            ),
        )
        if written:
            self._stored_state[alias] = current.state
        return current

    def evaluate_quorum(self) -> dict[str, ClusterState]:
        """Every observer's fresh state from the store -> the agreed state per cluster."""
        name = JobKind.QUORUM.value
        rows: list[ObserverReport] = []
        clock: list[float] = []

        def read() -> None:
            # Freshness on the store's clock: observers on other hosts write with it too.
            now, states = self.repo.observer_states(
                self.policy.observation_window_s * KNOWN_WINDOWS
            )
            clock.append(now)
            rows.extend(
                ObserverReport(
                    r.observer, r.cluster, ClusterState(r.state), r.updated_at.timestamp()
                )
                for r in states
                if is_vote(r.observer)  # drkit status's own probes are no vote
            )

        if not self._store(StoreOperation.QUORUM, name, read, writes=False):
            return dict(self.quorum_states)
        now = clock[0]
        for alias in sorted(self.config.clusters):
            decided = verdict(alias, rows, self.policy, now)
            self.metrics.quorum_state.labels(alias).set(STATE_VALUE[decided.state])
            self.metrics.down_votes.labels(alias).set(len(decided.down_votes))
            old = self.quorum_states.get(alias)
            if old is decided.state:
                continue
            record = functools.partial(
                self.repo.record_transition,
                SubjectKind.QUORUM,
                alias,
                self.observer,
                old.value if old is not None else None,
                decided.state.value,
                {
                    "reason": decided.explain(),
                    "voters": list(decided.voters),
                    "down_votes": list(decided.down_votes),
                },
                now,
            )
            if self._store(StoreOperation.QUORUM, name, record):
                self.quorum_states[alias] = decided.state
        return dict(self.quorum_states)

    # -- flows ----------------------------------------------------------------------------

    def _flow_prober(self, flow: FlowConfig) -> FlowProber:
        prober = self._flows.get(flow.name)
        if prober is None:
            prober = FlowProber(
                self.topologies[flow.name],
                self.config.clusters[flow.source],
                self.config.clusters[flow.target],
                self.policy,
                self.connect,
            )
            self._flows[flow.name] = prober
        return prober

    def _flow_job(self, name: str, flow: FlowConfig) -> None:
        try:
            observation = self._kafka(name, self._flow_prober(flow).probe)
        except jobs.BudgetExceeded as err:
            self._job_failed(name, "timeout", err)
            return
        self.record_flow(observation)

    def observe_flow(self, flow: FlowConfig) -> FlowObservation:
        """Observe ``flow`` now (no budget: for the CLI) and record it."""
        return self.record_flow(self._flow_prober(flow).probe())

    def record_flow(self, observation: FlowObservation) -> FlowObservation:
        group_lag = {
            group: status.value
            for (flow, group), status in self._group_states.items()
            if flow == observation.flow
        }
        observation = replace(observation, group_lag=group_lag)
        name = observation.flow
        for field_name, gauge in self.metrics.flows.items():
            value = getattr(observation, field_name, None)
            if value is not None:  # unknown: the gauge keeps its last value
                gauge.labels(name).set(value)
        self._store(
            StoreOperation.FLOW,
            f"{JobKind.FLOW}:{name}",
            lambda: self.repo.save_flow_status(
                self.observer, name, observation.at, observation.to_json()
            ),
        )
        return observation

    def _groups_job(self, name: str, flow: FlowConfig) -> None:
        try:
            sampled = self._kafka(name, lambda: self._sample_groups(flow))
        except jobs.BudgetExceeded as err:
            self._job_failed(name, "timeout", err)
            return
        if sampled is not None:
            self.record_groups(flow, *sampled)

    def observe_groups(self, flow: FlowConfig) -> dict[str, LagStatus]:
        """Sample the flow's groups now (no budget) and record their Burrow status."""
        sampled = self._sample_groups(flow)
        return {} if sampled is None else self.record_groups(flow, *sampled)

    def _sample_groups(
        self, flow: FlowConfig
    ) -> tuple[dict[str, GroupOffsets], dict[TopicPartition, int]] | None:
        """Committed and end offsets of the flow's groups on its source (None: no answer).

        Bulk work (one offsets request per group: thousands on a busy cluster) with the whole
        job budget for its requests, not a probe's timeout, and in a helper process of its own
        (drkit.kafka.isolated): the probes' group requests never queue behind it, and a client
        crash while sampling leaves them alone."""
        known = [g for (f, g) in self._group_states if f == flow.name]
        with closing(
            self.connect(
                ClusterEndpoint(flow.source, self.config.clusters[flow.source]),
                default_timeout_s=self.budget(f"{JobKind.GROUPS}:{flow.name}"),
                helper="group-sampling",
            )
        ) as admin:
            try:
                return sample_groups(admin, NameMatcher.of(flow.groups), known)
            except KafkaError as err:
                log.debug("group sampling failed", extra={"flow": flow.name, "error": str(err)})
                return None

    def record_groups(
        self,
        flow: FlowConfig,
        committed: dict[str, GroupOffsets],
        ends: dict[TopicPartition, int],
    ) -> dict[str, LagStatus]:
        """Judge each group's lag and store the transitions.  ``committed`` holds every group of
        the flow still on the source (sample_groups asks the known ones too), so a group not in
        it is gone: forgotten here, or every later round would ask for it again."""
        now = time.time()
        self._forget_groups_except(flow.name, committed)
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
            statuses[group] = group_status(per_partition)
        for status in LagStatus:
            self.metrics.groups.labels(flow.name, status.value).set(
                sum(1 for s in statuses.values() if s is status)
            )
        for group, status in statuses.items():
            old = self._group_states.get((flow.name, group))
            if old is status:
                continue
            lag = group_total(committed[group].offsets, ends)
            record = functools.partial(
                self.repo.record_transition,
                SubjectKind.GROUP,
                f"{flow.source}/{group}",
                self.observer,
                old.value if old is not None else None,
                status.value,
                {"reason": f"lag status {status.value}", "lag": lag},
                now,
            )
            if self._store(StoreOperation.GROUPS, f"{JobKind.GROUPS}:{flow.name}", record):
                self._group_states[(flow.name, group)] = status
        return statuses

    def _forget_groups_except(self, flow: str, present: Mapping[str, object]) -> None:
        gone = [k for k in self._group_states if k[0] == flow and k[1] not in present]
        for state in gone:
            del self._group_states[state]
        windows = [k for k in self._group_windows if k[0] == flow and k[1] not in present]
        for window in windows:
            del self._group_windows[window]

    # -- status ---------------------------------------------------------------------------

    def status_failed(self, error: str) -> None:
        """Reading the status picture failed (the web server calls this): the store is away."""
        self.store_watch.failed(StoreOperation.STATUS, error)

    def liveness(self, now: float | None = None) -> Liveness:
        """What ``/healthz`` reports: the state store takes our writes, jobs keep finishing."""
        problems: list[str] = []
        store = self.store_watch.health
        if not store.available:
            when = (
                time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(store.since))
                if store.since is not None
                else "?"
            )
            doing = store.operation.value if store.operation is not None else "?"
            url = safe_url(self.store.url)
            error = " ".join((store.error or "").split())  # one line per problem
            # A StateStoreError names the store already; a timeout does not.
            what = "state store" if url in error else f"state store {url}"
            problems.append(f"{what} unavailable since {when} ({doing}): {error}")
        idle = (time.monotonic() if now is None else now) - self._last_job_done
        stalled_after = _STALL_INTERVALS * self.policy.probe_interval_s + self.budget("")
        if idle > stalled_after:
            problems.append(f"no monitor job finished for {idle:.0f}s (the scheduler is stuck)")
        for alias, health in sorted(self.health.items()):
            if health.consecutive_inconclusive >= self.policy.failure_threshold:
                problems.append(
                    f"{health.consecutive_inconclusive} probes of {alias} in a row inconclusive:"
                    " this monitor is starved of CPU (a CPU limit, an overloaded host) and"
                    " cannot tell whether the cluster is up"
                )
        return Liveness(not problems, tuple(problems))

    def close(self) -> None:
        """Stop: no job is waited for any longer (a hung probe's budget would hold the exit),
        then the flows' probers close."""
        self._runner.abandon()
        for prober in self._flows.values():
            prober.close()


def sample_groups(
    admin: ClusterAdmin, matcher: NameMatcher, known: Iterable[str]
) -> tuple[dict[str, GroupOffsets], dict[TopicPartition, int]]:
    """The committed offsets of the groups ``matcher`` selects, and their partitions' ends.

    The groups earlier rounds saw (``known``) are asked too: a listing right after the source's
    broker started names none, and the status would read "0 groups" for a round
    (drkit.kafka.ports.read_group_offsets)."""
    committed = read_group_offsets(
        admin, known, lambda g: matcher.matches(g) and not is_own_group(g)
    )
    partitions = {tp for o in committed.values() for tp in o.offsets}
    return committed, admin.list_offsets(partitions, "latest")
