"""Cluster health evaluation (pure): one decision per probe round.

Input: the previous :class:`ClusterHealth` of a cluster, as seen by one observer, and the newest
:class:`ProbeResult`.  Output: the new :class:`ClusterHealth`, with the evidence that decided it.

Rules (thresholds from :class:`drkit.config.model.HealthPolicy`):

* a probe *fails* when the cluster did not answer metadata requests or the acks=all canary round
  trip failed; it is *degraded* when it answered but offline partitions, under-min-ISR
  partitions, a missing broker or a failing canary show it cannot serve every write;
* UNAVAILABLE after ``failure_threshold`` consecutive failed probes - one failed probe never
  changes the state;
* DEGRADED after ``failure_threshold`` consecutive degraded-or-failed probes that are not all
  failures;
* back to HEALTHY only after ``recovery_threshold`` consecutive healthy probes (hysteresis);
* a cluster starts UNKNOWN: one healthy probe makes it HEALTHY, but it needs the same
  ``failure_threshold`` consecutive bad probes as anyone else to become DEGRADED or UNAVAILABLE
  (a monitor starting next to a cluster that is still starting must not report an outage).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from drkit.config.model import HealthPolicy


class ClusterState(StrEnum):
    UNKNOWN = "UNKNOWN"
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    UNAVAILABLE = "UNAVAILABLE"


class ProbeOutcome(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"


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

    @property
    def outcome(self) -> ProbeOutcome:
        if not self.reachable or (self.canary_ok is False and self.brokers == 0):
            return ProbeOutcome.FAILED
        if self.canary_ok is False:
            return ProbeOutcome.FAILED
        if self.offline_partitions or self.under_min_isr_partitions:
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
    """One observer's view of one cluster after the latest probe."""

    cluster: str
    state: ClusterState = ClusterState.UNKNOWN
    since: float = 0.0
    consecutive_failed: int = 0
    consecutive_bad: int = 0  # failed or degraded
    consecutive_ok: int = 0
    last: ProbeResult | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def changed_from(self, previous: ClusterHealth) -> bool:
        return self.state is not previous.state


def evaluate(previous: ClusterHealth, probe: ProbeResult, policy: HealthPolicy) -> ClusterHealth:
    """The new health of ``probe.cluster`` (pure; see the module docstring)."""
    outcome = probe.outcome
    failed = previous.consecutive_failed + 1 if outcome is ProbeOutcome.FAILED else 0
    bad = previous.consecutive_bad + 1 if outcome is not ProbeOutcome.OK else 0
    ok = previous.consecutive_ok + 1 if outcome is ProbeOutcome.OK else 0
    state = _next_state(previous.state, outcome, failed, bad, ok, policy)
    reason = _reason(state, previous.state, outcome, failed, bad, ok, policy)
    return replace(
        previous,
        state=state,
        since=previous.since if state is previous.state else probe.at,
        consecutive_failed=failed,
        consecutive_bad=bad,
        consecutive_ok=ok,
        last=probe,
        evidence={
            "reason": reason,
            "probe": probe.evidence(),
            "consecutive_failed": failed,
            "consecutive_bad": bad,
            "consecutive_ok": ok,
        },
    )


def _next_state(
    current: ClusterState,
    outcome: ProbeOutcome,
    failed: int,
    bad: int,
    ok: int,
    policy: HealthPolicy,
) -> ClusterState:
    if current is ClusterState.UNKNOWN and outcome is ProbeOutcome.OK:
        return ClusterState.HEALTHY
    if failed >= policy.failure_threshold:
        return ClusterState.UNAVAILABLE
    if bad >= policy.failure_threshold and current in (ClusterState.HEALTHY, ClusterState.UNKNOWN):
        return ClusterState.DEGRADED
    if current is not ClusterState.HEALTHY and ok >= policy.recovery_threshold:
        return ClusterState.HEALTHY
    if current is ClusterState.UNAVAILABLE and outcome is ProbeOutcome.DEGRADED:
        # Answering again but not well: degraded, not yet healthy.
        return ClusterState.DEGRADED if bad >= policy.recovery_threshold else current
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
        return f"{outcome.value} probe; state held ({failed} failed / {bad} bad / {ok} ok in a row)"
    if previous is ClusterState.UNKNOWN and state is ClusterState.HEALTHY:
        return "first probe ok"
    if state is ClusterState.UNAVAILABLE:
        return f"{failed} consecutive failed probes (threshold {policy.failure_threshold})"
    if state is ClusterState.DEGRADED:
        return f"{bad} consecutive degraded probes (threshold {policy.failure_threshold})"
    return f"{ok} consecutive healthy probes (recovery threshold {policy.recovery_threshold})"
