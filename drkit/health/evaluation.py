"""Cluster health evaluation (pure): one decision per probe round.

Input: the previous :class:`ClusterHealth` of a cluster, as seen by one observer, and the newest
:class:`ProbeResult`.  Output: the new :class:`ClusterHealth`, with the evidence that decided it.

Rules (thresholds from :class:`drkit.config.model.HealthPolicy`):

* a probe *fails* when the cluster did not answer (no TCP connection, no metadata); it is
  *degraded* when it answered but offline partitions, under-min-ISR partitions, a missing
  broker or a failing acks=all canary round trip show it cannot serve every write (a failed
  canary alone never makes a cluster UNAVAILABLE: it answers, so it is not gone);
* UNAVAILABLE after ``failure_threshold`` consecutive failed probes - one failed probe never
  changes the state;
* DEGRADED after ``failure_threshold`` consecutive degraded-or-failed probes, decided on a
  degraded (answering) probe - a run ending in failures is on its way to UNAVAILABLE;
* back to HEALTHY only after ``recovery_threshold`` consecutive healthy probes (hysteresis);
  from UNAVAILABLE to DEGRADED only after ``recovery_threshold`` consecutive answering probes;
* a cluster starts UNKNOWN: one healthy probe makes it HEALTHY, but it needs the same
  ``failure_threshold`` consecutive bad probes as anyone else to become DEGRADED or UNAVAILABLE
  (a monitor starting next to a cluster that is still starting must not report an outage);
* an *inconclusive* probe - it overran its budget while the monitor itself was starved of CPU
  (drkit.health.cpu_wait) - says nothing about the cluster: no state change, and the runs of
  failed, bad and healthy probes neither grow nor break.  A starved monitor that failed a live
  primary over would be worse than a blind one.

Each view also keeps when probes went unanswered since the cluster last answered
(``unanswered``, the first :data:`UNANSWERED_KEPT`): automation bounds when a dead source stopped
taking writes by the first of them after its last sign of life (drkit.automation.decision).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from drkit.config.model import HealthPolicy

# Unanswered probes a view keeps the moments of, from the first after the last answer.  The one
# automation needs is the first after replication's last sign of life - a few probes into the
# silence, where probes that failed while the source still served are; past the kept ones it
# counts the silence as running to now (an upper bound).
UNANSWERED_KEPT = 32


class ClusterState(StrEnum):
    UNKNOWN = "UNKNOWN"
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    UNAVAILABLE = "UNAVAILABLE"


class ProbeOutcome(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"  # the monitor, not the cluster, was too slow


@dataclass(frozen=True)
class ProbeResult:
    """What one probe round found about one cluster."""

    cluster: str
    at: float
    reachable: bool
    latency_ms: float | None = None
    brokers: int = 0
    expected_brokers: int | None = None
    controller: int | None = None
    canary_ok: bool | None = None
    canary_ms: float | None = None
    offline_partitions: int = 0
    under_min_isr_partitions: int = 0
    error: str | None = None
    inconclusive: bool = False  # overran while the monitor was starved of CPU

    @property
    def outcome(self) -> ProbeOutcome:
        if self.inconclusive:
            return ProbeOutcome.INCONCLUSIVE
        if not self.reachable:
            return ProbeOutcome.FAILED
        if self.canary_ok is False or self.offline_partitions or self.under_min_isr_partitions:
            return ProbeOutcome.DEGRADED
        if self.expected_brokers is not None and self.brokers < self.expected_brokers:
            return ProbeOutcome.DEGRADED
        return ProbeOutcome.OK

    def evidence(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "reachable": self.reachable,
            "latency_ms": self.latency_ms,
            "brokers": self.brokers,
            "expected_brokers": self.expected_brokers,
            "canary_ok": self.canary_ok,
            "canary_ms": self.canary_ms,
            "offline_partitions": self.offline_partitions,
            "under_min_isr_partitions": self.under_min_isr_partitions,
            "error": self.error,
        }


@dataclass(frozen=True)
class ClusterHealth:
    """One observer's view of one cluster after the latest probe.

    ``since`` is when the current state began (None while UNKNOWN: no probe yet); ``reason``
    says why the latest decision was taken.
    """

    cluster: str
    state: ClusterState = ClusterState.UNKNOWN
    since: float | None = None
    consecutive_failed: int = 0
    consecutive_bad: int = 0  # failed or degraded
    consecutive_ok: int = 0
    consecutive_answering: int = 0  # ok or degraded: the cluster answered
    consecutive_inconclusive: int = 0  # the monitor starved: no verdict either way
    last_answered: float | None = None  # when a probe last got an answer (automation's clock)
    # When probes failed since ``last_answered``, oldest first (at most UNANSWERED_KEPT); a view
    # resumed from a store that did not keep them starts again empty.
    unanswered: tuple[float, ...] = ()
    last: ProbeResult | None = None
    reason: str | None = None

    def changed_from(self, previous: ClusterHealth) -> bool:
        return self.state is not previous.state

    def evidence(self) -> dict[str, Any]:
        """What decided the state, as stored with the observer state and its transitions."""
        return {
            "reason": self.reason,
            "probe": self.last.evidence() if self.last is not None else {},
            "consecutive_failed": self.consecutive_failed,
            "consecutive_bad": self.consecutive_bad,
            "consecutive_ok": self.consecutive_ok,
            "consecutive_answering": self.consecutive_answering,
            "consecutive_inconclusive": self.consecutive_inconclusive,
            "last_answered_at": self.last_answered,
            "unanswered_at": list(self.unanswered),
        }


def resumed(
    cluster: str, state: str, since: float | None, evidence: Mapping[str, Any] | None
) -> ClusterHealth:
    """An observer's view as it stored it - to go on counting "in a row" from there (a
    process that probes now and then, like ``drkit status``; the caller decides whether the
    stored view is still fresh enough to continue).  Pure."""
    found = evidence or {}

    def count(key: str) -> int:
        value = found.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    answered = found.get("last_answered_at")
    return ClusterHealth(
        cluster,
        ClusterState(state),
        since,
        consecutive_failed=count("consecutive_failed"),
        consecutive_bad=count("consecutive_bad"),
        consecutive_ok=count("consecutive_ok"),
        consecutive_answering=count("consecutive_answering"),
        consecutive_inconclusive=count("consecutive_inconclusive"),
        last_answered=float(answered) if isinstance(answered, int | float) else None,
        unanswered=unanswered_moments(found),
        reason=found.get("reason") if isinstance(found.get("reason"), str) else None,
    )


def unanswered_moments(evidence: Mapping[str, Any] | None) -> tuple[float, ...]:
    """The ``unanswered_at`` moments of a stored view's evidence (none when it has no such
    field: written before it existed)."""
    found = (evidence or {}).get("unanswered_at")
    if not isinstance(found, list):
        return ()
    return tuple(float(t) for t in found if isinstance(t, int | float))


def _unanswered(kept: tuple[float, ...], probe: ProbeResult) -> tuple[float, ...]:
    """``kept`` after a conclusive ``probe``: emptied by an answer, else grown by its moment."""
    if probe.outcome is not ProbeOutcome.FAILED:
        return ()
    return kept if len(kept) >= UNANSWERED_KEPT else (*kept, probe.at)


def evaluate(previous: ClusterHealth, probe: ProbeResult, policy: HealthPolicy) -> ClusterHealth:
    """The new health of ``probe.cluster`` (pure; see the module docstring)."""
    outcome = probe.outcome
    if outcome is ProbeOutcome.INCONCLUSIVE:
        inconclusive = previous.consecutive_inconclusive + 1
        return replace(
            previous,
            consecutive_inconclusive=inconclusive,
            last=probe,
            reason=(
                f"probe inconclusive ({inconclusive} in a row: this monitor was starved of CPU)"
                f"; still {previous.state.value}"
            ),
        )
    failed = previous.consecutive_failed + 1 if outcome is ProbeOutcome.FAILED else 0
    bad = previous.consecutive_bad + 1 if outcome is not ProbeOutcome.OK else 0
    ok = previous.consecutive_ok + 1 if outcome is ProbeOutcome.OK else 0
    answering = previous.consecutive_answering + 1 if outcome is not ProbeOutcome.FAILED else 0
    state = _next_state(previous.state, outcome, failed, bad, ok, answering, policy)
    return replace(
        previous,
        state=state,
        since=previous.since if state is previous.state else probe.at,
        consecutive_failed=failed,
        consecutive_bad=bad,
        consecutive_ok=ok,
        consecutive_answering=answering,
        consecutive_inconclusive=0,
        last_answered=probe.at if outcome is not ProbeOutcome.FAILED else previous.last_answered,
        unanswered=_unanswered(previous.unanswered, probe),
        last=probe,
        reason=_reason(state, previous.state, outcome, failed, bad, ok, policy),
    )


def _next_state(
    current: ClusterState,
    outcome: ProbeOutcome,
    failed: int,
    bad: int,
    ok: int,
    answering: int,
    policy: HealthPolicy,
) -> ClusterState:
    if current is ClusterState.UNKNOWN and outcome is ProbeOutcome.OK:
        return ClusterState.HEALTHY
    if failed >= policy.failure_threshold:
        return ClusterState.UNAVAILABLE
    if (
        bad >= policy.failure_threshold
        and outcome is ProbeOutcome.DEGRADED
        and current in (ClusterState.HEALTHY, ClusterState.UNKNOWN)
    ):
        # Decided on an answering probe: failures piling up (a broker shutting down) go on to
        # UNAVAILABLE instead of passing through DEGRADED.
        return ClusterState.DEGRADED
    if current is not ClusterState.HEALTHY and ok >= policy.recovery_threshold:
        return ClusterState.HEALTHY
    if current is ClusterState.UNAVAILABLE and outcome is ProbeOutcome.DEGRADED:
        # Answering again but not well: degraded once it has answered recovery_threshold probes
        # in a row (the earlier failures do not count: a broker still starting may fail one
        # canary on its way back to healthy).
        return ClusterState.DEGRADED if answering >= policy.recovery_threshold else current
    return current


def _reason(
    state: ClusterState,
    previous: ClusterState,
    outcome: ProbeOutcome,
    failed: int,
    bad: int,
    ok: int,
    policy: HealthPolicy,
) -> str:
    if state is previous:
        return _held(state, outcome, failed, bad, ok, policy)
    if previous is ClusterState.UNKNOWN and state is ClusterState.HEALTHY:
        return "first probe ok"
    if state is ClusterState.UNAVAILABLE:
        return f"{failed} consecutive failed probes (threshold {policy.failure_threshold})"
    if state is ClusterState.DEGRADED:
        return f"{bad} consecutive degraded probes (threshold {policy.failure_threshold})"
    return f"{ok} consecutive healthy probes (recovery threshold {policy.recovery_threshold})"


def _held(
    state: ClusterState, outcome: ProbeOutcome, failed: int, bad: int, ok: int,
    policy: HealthPolicy,
) -> str:  # fmt: skip
    """Why ``state`` did not change after this probe, and how far it is from changing."""
    still = f"; still {state.value}"
    if outcome is ProbeOutcome.OK:
        if state is ClusterState.HEALTHY:
            return "probe ok"
        return f"probe ok ({ok} of {policy.recovery_threshold} in a row to be HEALTHY){still}"
    if outcome is ProbeOutcome.FAILED:
        if state is ClusterState.UNAVAILABLE:
            return f"probe failed ({failed} in a row)"
        return (
            f"probe failed ({failed} of {policy.failure_threshold} in a row to be UNAVAILABLE)"
            + still
        )
    if state is ClusterState.DEGRADED:
        return f"probe degraded ({bad} in a row)"
    if state is ClusterState.UNAVAILABLE:
        return (
            f"probe degraded: answering again, not yet {policy.recovery_threshold} in a row" + still
        )
    return f"probe degraded ({bad} of {policy.failure_threshold} in a row to be DEGRADED){still}"
