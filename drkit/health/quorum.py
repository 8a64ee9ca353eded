"""Combine several observers' views of a cluster (pure).

A cluster counts as *down* only when at least ``quorum`` distinct observers reported it
UNAVAILABLE within the last ``window_s`` seconds.  Observers whose latest report is older than the
window do not count either way (a dead observer is not a vote).  Automated failover must also
see the *target* healthy, and with fewer than two observers it stays off unless the failover
policy explicitly allows a single observer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import ClusterState


@dataclass(frozen=True)
class ObserverReport:
    observer: str
    cluster: str
    state: ClusterState
    at: float


@dataclass(frozen=True)
class QuorumVerdict:
    cluster: str
    state: ClusterState  # the state a quorum agrees on, else the most common fresh state
    down: bool
    voters: tuple[str, ...]  # fresh observers
    down_votes: tuple[str, ...]
    quorum: int


def verdict(
    cluster: str, reports: Iterable[ObserverReport], policy: HealthPolicy, now: float
) -> QuorumVerdict:
    fresh: dict[str, ObserverReport] = {}
    for report in reports:
        if report.cluster != cluster or now - report.at > policy.observation_window_s:
            continue
        known = fresh.get(report.observer)
        if known is None or report.at > known.at:
            fresh[report.observer] = report
    down_votes = tuple(sorted(o for o, r in fresh.items() if r.state is ClusterState.UNAVAILABLE))
    down = len(down_votes) >= policy.observer_quorum
    if down:
        state = ClusterState.UNAVAILABLE
    elif fresh:
        counts: dict[ClusterState, int] = {}
        for report in fresh.values():
            if report.state is not ClusterState.UNAVAILABLE:
                counts[report.state] = counts.get(report.state, 0) + 1
        # Without a quorum for "down", the cluster is at worst DEGRADED from here.
        state = (
            max(counts, key=lambda s: (counts[s], s is ClusterState.DEGRADED))
            if counts
            else ClusterState.DEGRADED
        )
    else:
        state = ClusterState.UNKNOWN
    return QuorumVerdict(
        cluster, state, down, tuple(sorted(fresh)), down_votes, policy.observer_quorum
    )


@dataclass(frozen=True)
class AutomationGate:
    allowed: bool
    reason: str


def automation_gate(
    failover: FailoverPolicy,
    health: HealthPolicy,
    observers_seen: int,
    last_failover_at: float | None = None,
    now: float | None = None,
) -> AutomationGate:
    """Whether health-triggered failover may act at all with this observer set-up.

    ``last_failover_at`` is when the latest completed failover finished (None: none yet); for
    ``failover.block_window_s`` after it automation stays blocked (anti-flap).
    """
    if not failover.automatic:
        return AutomationGate(False, "automatic failover is off in the config")
    if health.observer_quorum < 2 and not failover.allow_single_observer:
        return AutomationGate(
            False, "observer_quorum < 2 and failover.allow_single_observer is false"
        )
    if last_failover_at is not None and now is not None:
        blocked_for = last_failover_at + failover.block_window_s - now
        if blocked_for > 0:
            return AutomationGate(
                False,
                f"blocked for {blocked_for:.0f}s more after the last failover "
                f"(failover.block_window_s {failover.block_window_s:g})",
            )
    if observers_seen < health.observer_quorum:
        return AutomationGate(
            False,
            f"only {observers_seen} observer(s) reporting, quorum is {health.observer_quorum}",
        )
    return AutomationGate(True, "quorum of observers available")
