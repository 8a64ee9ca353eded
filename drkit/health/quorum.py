"""Combine several observers' views of a cluster (pure).

Votes count both ways.  An observer whose latest report is within ``observation_window_s``
votes *down* (it reports the cluster UNAVAILABLE) or *up* (HEALTHY or DEGRADED: the cluster
answered it).  A cluster is *down* only when

* the down votes outnumber the votes against by at least ``observer_quorum`` - an observer
  that still talks to the cluster counts against (two observers cut off from a live cluster do
  not outvote the one that reaches it), and so does a fresh observer that has not decided yet
  (UNKNOWN: just started, its first probes still out): it is alive and has not seen the cluster
  fail - a monitor starting under load was counted as no vote, and two cut-off observers
  failed a live primary over before it had answered its first probe, and
* the down votes are a strict majority of the *known* observers: those that reported within
  ``KNOWN_WINDOWS`` windows, fresh or not - observers that went silent (dead, or cut off from
  the store) are not votes, but a minority left standing cannot decide alone.

Automated failover must also see the *target* healthy, and with fewer than two observers it
stays off unless the failover policy explicitly allows a single observer.  Report times must
all come from one clock (the state store's: drkit.store.clock).
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


KNOWN_WINDOWS = 10  # an observer silent for longer is forgotten (decommissioned, renamed)

_UP = (ClusterState.HEALTHY, ClusterState.DEGRADED)


@dataclass(frozen=True)
class QuorumVerdict:
    cluster: str
    state: ClusterState  # the state a quorum agrees on, else the most common fresh state
    down: bool
    voters: tuple[str, ...]  # fresh observers
    down_votes: tuple[str, ...]
    quorum: int
    up_votes: tuple[str, ...] = ()  # fresh observers the cluster answered
    known: tuple[str, ...] = ()  # observers heard from within KNOWN_WINDOWS windows
    undecided: tuple[str, ...] = ()  # fresh observers still UNKNOWN (they count against)

    def explain(self) -> str:
        waiting = f", {len(self.undecided)} undecided" if self.undecided else ""
        return (
            f"{len(self.down_votes)} down, {len(self.up_votes)} up{waiting} of "
            f"{len(self.known)} known observers (down needs {self.quorum} more down than up "
            "and undecided, and a majority)"
        )


def verdict(
    cluster: str, reports: Iterable[ObserverReport], policy: HealthPolicy, now: float
) -> QuorumVerdict:
    """The agreed state of ``cluster`` at ``now`` (the store's clock); see the module
    docstring.  Invariant: ``down`` implies more down votes than up and undecided ones by at
    least the quorum, and down votes from more than half of the known observers."""
    latest: dict[str, ObserverReport] = {}
    for report in reports:
        if report.cluster != cluster:
            continue
        seen = latest.get(report.observer)
        if seen is None or report.at > seen.at:
            latest[report.observer] = report
    window = policy.observation_window_s
    known = {o: r for o, r in latest.items() if now - r.at <= window * KNOWN_WINDOWS}
    fresh = {o: r for o, r in known.items() if now - r.at <= window}
    down_votes = tuple(sorted(o for o, r in fresh.items() if r.state is ClusterState.UNAVAILABLE))
    up_votes = tuple(sorted(o for o, r in fresh.items() if r.state in _UP))
    undecided = tuple(sorted(o for o, r in fresh.items() if r.state is ClusterState.UNKNOWN))
    against = len(up_votes) + len(undecided)
    down = len(down_votes) - against >= policy.observer_quorum and len(down_votes) * 2 > len(known)
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
        cluster, state, down, tuple(sorted(fresh)), down_votes, policy.observer_quorum,
        up_votes, tuple(sorted(known)), undecided,
    )  # fmt: skip


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
