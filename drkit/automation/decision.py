"""Whether the monitor fails over on its own now (pure).

Input: an :class:`AutomationSnapshot` - every observer's latest view of the source and target
clusters, the estimated RPO, the active pointer, the last failover, the operator's pause and
acknowledgements, and the policy.  Output: a :class:`Decision` with one :class:`Check` per rule,
passed or not, so every evaluation can be logged with its evidence.  It acts only when every
check passes:

* ``enabled``: ``failover.automatic`` is on;
* ``consent``: a quorum of at least two observers, or ``failover.allow_single_observer``;
* ``not_paused``: no ``drkit automation pause`` in force;
* ``acknowledged``: every earlier automatic failover was acknowledged
  (``drkit automation ack RUN``);
* ``block_window``: no failover finished within ``failover.block_window_s``;
* ``idle``: no failover run in progress;
* ``pointer``: the active pointer is on the source (or was never set);
* ``source_down``: a quorum of fresh observers report the source UNAVAILABLE
  (drkit.health.quorum);
* ``sustained``: at least a quorum of those have not seen the source answer a single probe for
  ``failover.after_s`` - a cluster that flaps answers now and then and never qualifies;
* ``target_healthy``: the quorum's state of the target is HEALTHY;
* ``rpo``: the records the target lacks of what the source last showed (in total) are within
  ``failover.max_rpo_records``, and the window of writes it may have taken unseen - from the
  last evidence that replication was caught up to when the source stopped (drkit.lag's
  ``loss_window``) - within ``max_rpo_s``; or ``failover.accept_any_rpo`` is set.  The source
  stopped by the moment a quorum of the observers reporting it down had each seen a probe go
  unanswered after its last sign of life: the latest answer any observer had, or replication's
  evidence when that is newer (a probe that timed out while the source still served the
  replicator proves nothing).  Without such a quorum the window runs to now (an upper bound).

The RPO is estimated only when everything else passes (it reads the target); until then the
``rpo`` check reads "not estimated".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import ClusterState
from drkit.health.quorum import ObserverReport, QuorumVerdict, verdict
from drkit.lag import loss_window


@dataclass(frozen=True)
class ObserverVote:
    """One observer's latest state of one cluster."""

    observer: str
    state: ClusterState
    since: float  # when this state began
    reported_at: float
    last_answered_at: float | None = None  # the last probe of this observer the cluster answered
    # When this observer's probes went unanswered since then, oldest first (a bounded few:
    # drkit.health.evaluation.UNANSWERED_KEPT).
    unanswered_at: tuple[float, ...] = ()

    def silent_since(self) -> float:
        """Since when this observer has had no answer from the cluster."""
        if self.last_answered_at is None:
            return self.since
        return max(self.since, self.last_answered_at)


@dataclass(frozen=True)
class RpoEstimate:
    """What the target lacks, from the failover plan: total records and the worst age."""

    records: int | None  # None: unknown for some partition
    seconds: float | None  # age of the newest evidence of caught-up replication (worst partition)
    # When ``seconds`` was measured (the decision's clock); a later decision ages it by the
    # time since.  None: measured at the snapshot's ``now``.
    measured_at: float | None = None

    def age_at(self, now: float) -> float | None:
        """The evidence's age at ``now``."""
        if self.seconds is None or self.measured_at is None:
            return self.seconds
        return self.seconds + max(0.0, now - self.measured_at)


@dataclass(frozen=True)
class Pause:
    by: str
    reason: str
    at: float


@dataclass(frozen=True)
class AutomationSnapshot:
    source: str
    target: str
    now: float
    source_views: tuple[ObserverVote, ...]
    target_views: tuple[ObserverVote, ...]
    failover: FailoverPolicy
    health: HealthPolicy
    pointer: str | None = None
    last_failover_at: float | None = None  # when the latest completed failover finished
    unacknowledged_runs: tuple[int, ...] = ()  # automatic runs nobody acknowledged yet
    running_run: int | None = None
    paused: Pause | None = None
    rpo: RpoEstimate | None = None  # None: not estimated


class CheckName(StrEnum):
    ENABLED = "enabled"
    CONSENT = "consent"
    NOT_PAUSED = "not_paused"
    ACKNOWLEDGED = "acknowledged"
    BLOCK_WINDOW = "block_window"
    IDLE = "idle"
    POINTER = "pointer"
    SOURCE_DOWN = "source_down"
    SUSTAINED = "sustained"
    TARGET_HEALTHY = "target_healthy"
    RPO = "rpo"
    ENGINE = "engine"  # added after the fact: the engine refused to run (lease held, stale plan)
    # Added after the fact when the source has several standbys whose decisions act: passed for
    # the one drkit.failover.standby_choice picks, failed (with why) for the others.
    STANDBY = "standby"


@dataclass(frozen=True)
class Check:
    name: CheckName
    passed: bool
    detail: str
    # The detail holds a clock (e.g. "no answer for 12s"): a new value is not a new reason.
    ticking: bool = False


@dataclass(frozen=True)
class Decision:
    source: str
    target: str
    at: float
    checks: tuple[Check, ...]

    @property
    def act(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.passed)

    def refused(self, why: str) -> Decision:
        """This decision after the engine refused to act on it (another monitor's run holds the
        lease, or moved the pointer since the plan): recorded as not acted."""
        return Decision(
            self.source, self.target, self.at, (*self.checks, Check(CheckName.ENGINE, False, why))
        )

    def standby(self, chosen: bool, why: str) -> Decision:
        """This decision with the best-standby choice among its source's standbys added:
        ``chosen`` passes it (the figures and the others' verdicts in ``why``); otherwise it
        no longer acts, and says which standby was chosen instead and why."""
        check = Check(CheckName.STANDBY, chosen, why, ticking=True)  # its figures move
        return Decision(self.source, self.target, self.at, (*self.checks, check))

    @property
    def source_gone(self) -> bool:
        """A quorum has had no answer from the source for ``after_s``: only other rules can
        keep automation back (then it is *blocked*, worth telling someone)."""
        passed = {check.name for check in self.checks if check.passed}
        return {CheckName.SOURCE_DOWN, CheckName.SUSTAINED} <= passed

    @property
    def needs_rpo(self) -> bool:
        """Everything but the (not yet estimated) RPO passes: estimate it and decide again."""
        return [c.name for c in self.failed] == [CheckName.RPO]

    def summary(self) -> str:
        if self.act:
            return f"fail over {self.source}->{self.target}: every check passed"
        return "; ".join(f"{check.name.value}: {check.detail}" for check in self.failed)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "at": self.at,
            "act": self.act,
            "summary": self.summary(),
            "checks": [
                {"name": c.name.value, "passed": c.passed, "detail": c.detail, "ticking": c.ticking}
                for c in self.checks
            ],
        }


def decide(snapshot: AutomationSnapshot) -> Decision:
    """See the module docstring; evaluates every check, whatever fails first."""
    s = snapshot
    source = _verdict(s.source, s.source_views, s.health, s.now)
    target = _verdict(s.target, s.target_views, s.health, s.now)
    checks = (
        _enabled(s.failover),
        _consent(s.failover, s.health),
        _not_paused(s.paused),
        _acknowledged(s.unacknowledged_runs),
        _block_window(s.failover, s.last_failover_at, s.now),
        _idle(s.running_run),
        _pointer(s.pointer, s.source, s.target),
        _source_down(source),
        _sustained(s.source_views, source, s.failover.after_s, s.health.observer_quorum, s.now),
        _target_healthy(target),
        _rpo(s.rpo, s.failover, s.source_views, source, s.health, s.now),
    )
    return Decision(s.source, s.target, s.now, checks)


@dataclass(frozen=True)
class StandbyHealth:
    """How a quorum of observers sees a standby: HEALTHY by a quorum, and in words."""

    healthy: bool
    detail: str


def standby_health(
    cluster: str, views: tuple[ObserverVote, ...], health: HealthPolicy, now: float
) -> StandbyHealth:
    """``cluster``'s state by the observers' quorum at ``now`` (the store's clock) - the rule
    of the ``target_healthy`` check, for a standby chosen without an automatic decision
    (``drkit failover --from X`` without ``--to``).  No fresh observer: not healthy (unknown)."""
    agreed = _verdict(cluster, views, health, now)
    if not agreed.voters:
        return StandbyHealth(False, f"{cluster} is UNKNOWN: no monitor has reported it lately")
    up = f"{len(agreed.up_votes)} of {len(agreed.known)} observers reach it"
    return StandbyHealth(
        agreed.state is ClusterState.HEALTHY, f"{cluster} is {agreed.state.value} ({up})"
    )


def _verdict(
    cluster: str, views: tuple[ObserverVote, ...], health: HealthPolicy, now: float
) -> QuorumVerdict:
    reports = [ObserverReport(v.observer, cluster, v.state, v.reported_at) for v in views]
    return verdict(cluster, reports, health, now)


def _enabled(policy: FailoverPolicy) -> Check:
    on = policy.automatic
    return Check(CheckName.ENABLED, on, "on" if on else "failover.automatic is off")


def _consent(policy: FailoverPolicy, health: HealthPolicy) -> Check:
    if health.observer_quorum >= 2:
        return Check(CheckName.CONSENT, True, f"observer quorum {health.observer_quorum}")
    if policy.allow_single_observer:
        return Check(CheckName.CONSENT, True, "a single observer, allowed by the config")
    return Check(
        CheckName.CONSENT,
        False,
        "observer_quorum is 1 and failover.allow_single_observer is false",
    )


def _not_paused(paused: Pause | None) -> Check:
    if paused is None:
        return Check(CheckName.NOT_PAUSED, True, "automation running")
    return Check(
        CheckName.NOT_PAUSED, False, f"paused by {paused.by}: {paused.reason or 'no reason given'}"
    )


def _acknowledged(unacknowledged: tuple[int, ...]) -> Check:
    if not unacknowledged:
        return Check(CheckName.ACKNOWLEDGED, True, "no automatic failover awaits acknowledgement")
    runs = ", ".join(str(r) for r in unacknowledged)
    return Check(
        CheckName.ACKNOWLEDGED,
        False,
        f"automatic failover run {runs} not acknowledged "
        f"(drkit automation ack {unacknowledged[0]})",
    )


def _block_window(policy: FailoverPolicy, last: float | None, now: float) -> Check:
    if last is None:
        return Check(CheckName.BLOCK_WINDOW, True, "no earlier failover")
    left = last + policy.block_window_s - now
    if left > 0:
        return Check(
            CheckName.BLOCK_WINDOW,
            False,
            f"a failover finished {now - last:.0f}s ago; blocked {left:.0f}s more "
            f"(failover.block_window_s {policy.block_window_s:g})",
            ticking=True,
        )
    return Check(CheckName.BLOCK_WINDOW, True, f"last failover {now - last:.0f}s ago", True)


def _idle(running: int | None) -> Check:
    if running is None:
        return Check(CheckName.IDLE, True, "no failover running")
    return Check(CheckName.IDLE, False, f"failover run {running} is in progress")


def _pointer(pointer: str | None, source: str, target: str) -> Check:
    if pointer is None or pointer == source:
        return Check(CheckName.POINTER, True, f"active cluster is {pointer or source}")
    if pointer == target:
        return Check(CheckName.POINTER, False, f"already failed over: {target} is active")
    return Check(CheckName.POINTER, False, f"the active cluster is {pointer}, not {source}")


def _source_down(source: QuorumVerdict) -> Check:
    detail = (
        f"{source.cluster}: {source.explain()}; fresh observers: "
        f"{', '.join(source.voters) or 'none'}"
    )
    return Check(CheckName.SOURCE_DOWN, source.down, detail)


def _sustained(
    views: tuple[ObserverVote, ...],
    source: QuorumVerdict,
    after_s: float,
    quorum: int,
    now: float,
) -> Check:
    down = [v for v in views if v.observer in source.down_votes]
    silent = sorted(now - v.silent_since() for v in down)
    # The quorum-th longest silence: how long a quorum has agreed the source never answered.
    agreed = silent[-quorum] if len(silent) >= quorum else 0.0
    passed = len(silent) >= quorum and agreed >= after_s
    return Check(
        CheckName.SUSTAINED,
        passed,
        f"no answer for {agreed:.0f}s by a quorum (failover.after_s {after_s:g})",
        ticking=True,
    )


def _target_healthy(target: QuorumVerdict) -> Check:
    healthy = target.state is ClusterState.HEALTHY
    return Check(CheckName.TARGET_HEALTHY, healthy, f"{target.cluster} is {target.state.value}")


def _last_sign_of_life(views: tuple[ObserverVote, ...], evidence_at: float) -> float:
    """The latest moment the source is known to have served: replication's evidence, or an
    observer's answer if one is newer."""
    answers = [v.last_answered_at for v in views if v.last_answered_at is not None]
    return max([evidence_at, *answers])


def _stopped_by(down: list[ObserverVote], alive_at: float, quorum: int) -> float | None:
    """When a quorum of ``down`` had each seen a probe go unanswered after ``alive_at`` (the
    quorum-th earliest of their first such probes); None when fewer than a quorum kept one."""
    firsts = sorted(
        first
        for v in down
        if (first := next((t for t in v.unanswered_at if t > alive_at), None)) is not None
    )
    return firsts[quorum - 1] if len(firsts) >= quorum else None


def _rpo(
    rpo: RpoEstimate | None,
    policy: FailoverPolicy,
    views: tuple[ObserverVote, ...],
    source: QuorumVerdict,
    health: HealthPolicy,
    now: float,
) -> Check:
    if policy.accept_any_rpo:
        return Check(CheckName.RPO, True, "any RPO accepted (failover.accept_any_rpo)")
    if rpo is None:
        return Check(CheckName.RPO, False, "not estimated")
    age = rpo.age_at(now)
    if rpo.records is None or age is None:
        return Check(CheckName.RPO, False, "unknown for some partitions")
    # Every observer's answers are signs of life; only those reporting it down bound the end.
    alive_at = _last_sign_of_life(views, now - age)
    down = [v for v in views if v.observer in source.down_votes]
    stopped = _stopped_by(down, alive_at, health.observer_quorum)
    window = loss_window(age, stopped if stopped is not None else now, now)
    until = (
        f"until the first probe a quorum had unanswered after its last sign of life, "
        f"{now - stopped:.0f}s ago"
        if stopped is not None
        else "counted to now: no quorum saw a probe go unanswered after its last sign of life"
    )
    within = rpo.records <= policy.max_rpo_records and window <= policy.max_rpo_s
    return Check(
        CheckName.RPO,
        within,
        f"{rpo.records} records of what the source last showed, its writes of up to "
        f"{window:.0f}s after that, {until} (bounds: {policy.max_rpo_records} records, "
        f"{policy.max_rpo_s:g}s)",
    )
