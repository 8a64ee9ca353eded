"""The monitor's automatic failover job: snapshot -> :func:`decide` -> the engine.

Every tick (one per probe interval), for each active flow ``source -> target``:

1. read a typed snapshot from the state store - every observer's latest view of both clusters
   (the same rows the quorum job reads), the active pointer, runs, pauses and acks;
2. :func:`drkit.automation.decision.decide`; when everything but the RPO passes, plan the
   unplanned failover (the engine's own plan, same as ``drkit failover --plan``), put its RPO in
   the snapshot and decide again;
3. log the decision with its evidence (always) and store it (when it acts or changed);
4. when it acts: run the engine's unplanned failover - the same code path, lease and audit trail
   as ``drkit failover --yes``, with ``requested_by`` ``automation:<observer>``.

When the active source has several standbys (dc1 -> dc2 and dc1 -> dc3) and more than one
pair's decision acts, the tick acts on the one :func:`drkit.failover.standby_choice.choose`
picks - the smallest RPO of the plans, as ``drkit failover --from dc1`` without ``--to``
chooses - and adds a ``standby`` check to every acting pair's decision saying why (passed for
the chosen one, failed for the others, which are recorded as held).

Several monitors may decide at once; the engine's lease lets one run, and a plan whose pointer
moved in the meantime is refused (drkit.failover.engine), so there is never a second failover.
:meth:`AutomaticFailover.tick` never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from drkit import failpoints
from drkit.automation.decision import (
    AutomationSnapshot,
    CheckName,
    Decision,
    ObserverVote,
    RpoEstimate,
    StandbyHealth,
    decide,
)
from drkit.automation.journal import AUTOMATION, AutomationJournal
from drkit.config.model import DrkitConfig
from drkit.config.model import NotificationEvent as Event
from drkit.control.model import DesiredState, default_state
from drkit.control.repo import ControlRepository
from drkit.errors import DrkitError
from drkit.failover.engine import Engine
from drkit.failover.lease import LeaseHeld
from drkit.failover.model import Plan, Procedure, RunState
from drkit.failover.pointer import PointerRepository
from drkit.failover.pointer_topic import PointerTopics
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import RunRecord, RunRepository
from drkit.failover.standby_choice import StandbyCandidate, StandbyChoice, choose
from drkit.health.evaluation import ClusterState, unanswered_moments
from drkit.health.identity import is_vote
from drkit.health.metrics import MonitorMetrics, default_metrics
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory
from drkit.lag import worst_seconds
from drkit.notifications import Notifier
from drkit.store.db import StateStore
from drkit.store.health_repo import HealthRepository, on_store_clock
from drkit.store.models import ObserverState

log = logging.getLogger(__name__)


def rpo_of(plan: Plan, measured_at: float | None = None) -> RpoEstimate:
    """Total records the target lacks and the worst partition's age, from a failover plan
    made at ``measured_at`` (the decision's clock: a later decision ages it by the time since)."""
    return RpoEstimate(plan.rpo_records, worst_seconds(plan.rpo), measured_at)


def observer_views(
    rows: list[ObserverState], clusters: tuple[str, ...]
) -> dict[str, tuple[ObserverVote, ...]]:
    """Every monitor's latest view of each of ``clusters`` (times on the store's clock), from
    the observer states the quorum job reads; the CLI's own observations are no votes."""
    views: dict[str, list[ObserverVote]] = {cluster: [] for cluster in clusters}
    for row in rows:
        if row.cluster in views and is_vote(row.observer):  # monitors only, not the CLI
            answered = row.evidence.get("last_answered_at") if row.evidence else None
            views[row.cluster].append(
                ObserverVote(
                    row.observer,
                    ClusterState(row.state),
                    on_store_clock(row, row.since.timestamp()),
                    row.updated_at.timestamp(),
                    on_store_clock(row, float(answered)) if answered is not None else None,
                    tuple(on_store_clock(row, t) for t in unanswered_moments(row.evidence)),
                )
            )
    return {cluster: tuple(found) for cluster, found in views.items()}


def candidate_of(
    plan: Plan,
    estimate: RpoEstimate,
    health: StandbyHealth,
    now: float,
    excluded_because: str | None = None,
) -> StandbyCandidate:
    """``plan``'s target as a standby to choose (drkit.failover.standby_choice): its RPO
    estimate with the evidence aged to ``now`` - one moment for every candidate, as their plans
    were made one after another - its health, and why it is out (``excluded_because``, else the
    plan's blockers, else a target that did not answer the plan's reads)."""
    why = excluded_because
    if why is None and plan.blockers:
        why = "the plan is blocked: " + "; ".join(f.message for f in plan.blockers)
    if why is None and not plan.target_reachable:
        why = f"{plan.target} did not answer the plan's reads"
    return StandbyCandidate(
        plan.target, health.healthy, health.detail, estimate.records, estimate.age_at(now), why
    )


class AutomaticFailover:
    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        state_dir: Path,
        observer: str,
        engine: Callable[[], Engine] | None = None,
        clock: Callable[[], float] | None = None,
        metrics: MonitorMetrics | None = None,
        *,
        connect: AdminFactory,
        pointer_topics: PointerTopics | None = None,
    ) -> None:
        """``connect``: how it reaches the clusters (drkit.kafka.ports) - its own probe of a
        source, and its engine's; ``pointer_topics``: where its engine's move_pointer writes
        the pointer for applications (drkit.failover.pointer_topic; None: the store only)."""
        self.config = config
        self.connect = connect
        self.metrics = metrics or default_metrics()
        self.store = store
        self.observer = observer
        self.journal = AutomationJournal(store)
        self.health = HealthRepository(store)
        self.runs = RunRepository(store)
        self.pointers = PointerRepository(store)
        # The store's clock by default: observers on other hosts wrote with it (tests inject).
        self.clock = clock or self.health.now
        self.notify = Notifier(config.notifications.webhooks)
        self._engine = engine or (
            lambda: Engine(
                config,
                store,
                state_dir,
                role=f"{AUTOMATION}:{observer}",
                connect=connect,
                pointer_topics=pointer_topics,
            )
        )

    def pairs(self) -> list[tuple[str, str]]:
        """(source, target) of every flow that replicates now - by its directive, a standby
        flow once a move started it - out of the active cluster (any, before the first move):
        the pair to protect follows the pointer, so the new primary is watched after a move
        and the old pair, whose source is no longer where the applications write, is not."""
        pointer = self.pointers.get()
        active = pointer.cluster if pointer is not None else None
        directives = ControlRepository(self.store).directives(
            {f.name: default_state(f) for f in self.config.flows}
        )
        return sorted(
            {(f.source, f.target) for f in self.config.flows
             if (active is None or f.source == active)
             and directives[f.name].desired is DesiredState.RUNNING}
        )  # fmt: skip

    def snapshot(self, source: str, target: str) -> AutomationSnapshot:
        # Every time on the store's clock: observers on other hosts judge by their own.
        views = observer_views(self.health.all_observer_states(), (source, target))
        pointer = self.pointers.get()
        recent = self.runs.latest(20)
        finished = [
            r.finished_at for r in recent if r.state is RunState.SUCCEEDED and r.finished_at
        ]
        running = [r.id for r in recent if r.state.unfinished]  # an engine's, or to resume
        return AutomationSnapshot(
            source,
            target,
            self.clock(),
            views[source],
            views[target],
            self.config.failover,
            self.config.health,
            pointer=pointer.cluster if pointer is not None else None,
            last_failover_at=max(f.timestamp() for f in finished) if finished else None,
            unacknowledged_runs=self.journal.unacknowledged(),
            running_run=running[0] if running else None,
            paused=self.journal.paused(),
        )

    def evaluate(
        self, source: str, target: str
    ) -> tuple[Decision, Plan | None, RpoEstimate | None]:
        """The decision for one pair now, the plan it was estimated with (if any) and that
        plan's RPO estimate (its ages measured when the plan was made)."""
        snapshot = self.snapshot(source, target)
        decision = decide(snapshot)
        if not (decision.needs_rpo or decision.act):
            return decision, None, None
        # The plan gives the RPO estimate - and, when any RPO is accepted, the run its steps.
        plan = self._engine().plan(Procedure.FAILOVER, source, target, RunOptions())
        estimate = rpo_of(plan, self.clock())
        if decision.act:
            return decision, plan, estimate
        return decide(replace(snapshot, rpo=estimate)), plan, estimate

    def still_true(
        self, source: str, target: str, plan: Plan, estimate: RpoEstimate | None = None
    ) -> str | None:
        """Under the failover lease, just before the run is recorded: why the decision no
        longer holds (None: it does).  The monitor may have stalled between deciding and
        starting, an operator may have paused automation, the source may answer again - an
        automatic failover never moves off a primary that answers."""
        if plan.source_reachable:
            return f"{source} answered while the failover was planned"
        # The plan's estimate, aged by the time since it was made (a stalled monitor, a wait
        # for the lease): judged as it stood against a later "now", its evidence would look
        # as new as when the plan was made, a window of writes that never closes.
        estimate = estimate or rpo_of(plan)
        again = decide(replace(self.snapshot(source, target), rpo=estimate))
        if not again.act:
            return again.summary()
        if self.source_answers(source):
            return f"{source} answers again"
        return None

    def source_answers(self, source: str) -> bool:
        """One probe of ``source`` (the health policy's timeout)."""
        endpoint = ClusterEndpoint(source, self.config.clusters[source])
        return self.connect(endpoint).answers(self.config.health.probe_timeout_s)

    def tick(self) -> list[Decision]:
        """Evaluate every pair and act on at most one - among the acting pairs of one source,
        the standby :func:`choose_among` picks; never raises."""
        decisions: list[Decision] = []
        if not self.config.failover.automatic:
            return decisions
        by_source: dict[str, list[str]] = {}
        for source, target in self.pairs():
            by_source.setdefault(source, []).append(target)
        for source, targets in by_source.items():
            evaluated: list[tuple[Decision, Plan | None, RpoEstimate | None]] = []
            for target in targets:
                try:
                    evaluated.append(self.evaluate(source, target))
                except Exception:  # a scheduled job must never kill the scheduler
                    log.exception(
                        "automatic failover evaluation failed",
                        extra={"source": source, "target": target},
                    )
            acted = False
            for decision, plan, estimate in choose_among(evaluated, self.clock()):
                try:
                    decision = self._conclude(decision, plan, estimate)
                except Exception:  # as above
                    log.exception(
                        "automatic failover failed",
                        extra={"source": source, "target": decision.target},
                    )
                    continue
                decisions.append(decision)
                acted = acted or decision.act
            if acted:
                break  # one failover per tick; the others are decided again next tick
        return decisions

    def _conclude(
        self, decision: Decision, plan: Plan | None, estimate: RpoEstimate | None
    ) -> Decision:
        """Log ``decision``, then act on it (the engine's run) or record it as held."""
        source, target = decision.source, decision.target
        log.info(
            "automatic failover %s",
            "ACTS" if decision.act else "holds",
            extra={
                "source": source,
                "target": target,
                "act": decision.act,
                "reasons": decision.summary(),
                "checks": {c.name.value: c.passed for c in decision.checks},
            },
        )
        if not decision.act or plan is None:
            self._record(decision)
            self.metrics.automation_decisions.labels("held").inc()
            return decision

        def started(run: RunRecord) -> None:
            self.notify(
                Event.FAILOVER_STARTED, source, target, decision.to_json(), run.id,
                f"automatic failover {source}->{target}: {decision.summary()}",
            )  # fmt: skip

        failpoints.reach("automation.before_start")
        try:
            run = self._engine().start(
                plan, RunOptions(), requested_by=f"{AUTOMATION}:{self.observer}",
                reason=decision.summary(), on_started=started,
                recheck=lambda: self.still_true(source, target, plan, estimate),
            )  # fmt: skip
        except LeaseHeld as err:
            log.warning("another failover holds the lease", extra={"error": str(err)})
            refused = decision.refused(str(err))
            self._record(refused)
            self.metrics.automation_decisions.labels("refused").inc()
            return refused
        except DrkitError as err:
            log.error("automatic failover did not run", extra={"error": str(err)})
            refused = decision.refused(str(err))
            self._record(refused)
            self.metrics.automation_decisions.labels("refused").inc()
            return refused
        self.metrics.automation_decisions.labels("acted").inc()
        self.journal.record(self.observer, decision, run.id)
        log.warning(
            "automatic failover finished",
            extra={"run": run.id, "state": run.state.value, "source": source, "target": target},
        )
        self.notify(
            Event.FAILOVER_FINISHED, source, target,
            {"state": run.state.value, "rpo": run.result.rpo_json()}, run.id,
            f"automatic failover {source}->{target}: {run.state.value}",
        )  # fmt: skip
        return decision

    def _record(self, decision: Decision) -> None:
        """Store a decision that did not act; tell the webhooks when its reasons changed."""
        if not self.journal.record(self.observer, decision):
            return
        self.notify(
            Event.DECISION, decision.source, decision.target, decision.to_json(), None,
            decision.summary(),
        )  # fmt: skip
        # Another monitor's run, or another standby of the source chosen, is no news.
        elsewhere = any(c.name in (CheckName.ENGINE, CheckName.STANDBY) for c in decision.failed)
        if decision.source_gone and not elsewhere:
            self.notify(
                Event.BLOCKED, decision.source, decision.target, decision.to_json(), None,
                f"{decision.source} is gone but automatic failover holds: {decision.summary()}",
            )  # fmt: skip


def choose_among(
    evaluated: Sequence[tuple[Decision, Plan | None, RpoEstimate | None]], now: float
) -> list[tuple[Decision, Plan | None, RpoEstimate | None]]:
    """The evaluations of one source's pairs, at most one of them acting: when several act,
    the standby :func:`drkit.failover.standby_choice.choose` picks among them (the smallest
    RPO, estimates aged to ``now``) keeps acting with a passed ``standby`` check naming the
    others' figures, and each other acting one gets a failed ``standby`` check saying which
    was chosen and why.  Pairs that do not act are candidates excluded by their own summary,
    named in the chosen one's check.  Pure; one acting pair (or none) is returned unchanged."""
    acting = [e for e in evaluated if e[0].act and e[1] is not None and e[2] is not None]
    if len(acting) < 2:
        return list(evaluated)
    choice = standby_choice_of(evaluated, now)
    out: list[tuple[Decision, Plan | None, RpoEstimate | None]] = []
    for decision, plan, estimate in evaluated:
        if decision.act:
            verdict = choice.verdict_of(decision.target)
            chosen = choice.chosen is not None and choice.chosen.target == decision.target
            why = choice.summary() if chosen else f"{verdict.line()}; {choice.summary()}"
            decision = decision.standby(chosen, why)
        out.append((decision, plan, estimate))
    return out


def standby_choice_of(
    evaluated: Sequence[tuple[Decision, Plan | None, RpoEstimate | None]], now: float
) -> StandbyChoice:
    """The standby choice over one source's evaluated pairs: an acting pair is a healthy
    candidate with its plan's figures (the decision checked the target's health, the plan's
    blockers still exclude it); a pair that does not act is excluded by its decision."""
    candidates: list[StandbyCandidate] = []
    for decision, plan, estimate in evaluated:
        if decision.act and plan is not None and estimate is not None:
            target = next(c for c in decision.checks if c.name is CheckName.TARGET_HEALTHY)
            healthy = StandbyHealth(True, target.detail)
            candidates.append(candidate_of(plan, estimate, healthy, now))
        else:
            why = f"its decision holds: {decision.summary()}"
            candidates.append(StandbyCandidate(decision.target, False, "", None, None, why))
    return choose(evaluated[0][0].source, candidates)
