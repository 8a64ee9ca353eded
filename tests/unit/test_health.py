"""Pure health logic: thresholds and hysteresis, observer quorum, Burrow lag status, status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from drkit.config import load_config_text
from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import ClusterHealth, ClusterState, ProbeResult, evaluate
from drkit.health.group_lag import LagSample, LagStatus, group_status, partition_status
from drkit.health.quorum import ObserverReport, automation_gate, verdict
from drkit.health.status import build_status
from drkit.store.models import FlowStatus, ObserverState

POLICY = HealthPolicy(
    failure_threshold=3, recovery_threshold=2, observer_quorum=2, observation_window_s=30
)
OK = {"reachable": True, "brokers": 1, "canary_ok": True}
DOWN = {"reachable": False, "error": "unreachable"}


def run(*probes: Mapping[str, object], start: ClusterHealth | None = None) -> list[ClusterState]:
    health = start or ClusterHealth("dc1")
    states = []
    for index, probe in enumerate(probes):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
        states.append(health.state)
    return states


def test_unknown_becomes_healthy_at_once_but_unavailable_only_after_the_threshold() -> None:
    assert run(OK) == [ClusterState.HEALTHY]
    assert run(DOWN, DOWN, DOWN) == [
        ClusterState.UNKNOWN,
        ClusterState.UNKNOWN,
        ClusterState.UNAVAILABLE,
    ]


def test_a_single_failed_probe_does_not_change_the_state() -> None:
    assert run(OK, DOWN, OK, DOWN, DOWN, OK)[-1] is ClusterState.HEALTHY


def test_unavailable_after_threshold_and_healthy_only_after_recovery_threshold() -> None:
    states = run(OK, DOWN, DOWN, DOWN, OK, OK, OK)
    assert states == [
        ClusterState.HEALTHY,
        ClusterState.HEALTHY,
        ClusterState.HEALTHY,
        ClusterState.UNAVAILABLE,
        ClusterState.UNAVAILABLE,
        ClusterState.HEALTHY,
        ClusterState.HEALTHY,
    ]


def test_degraded_partitions_or_missing_broker() -> None:
    degraded = {"reachable": True, "brokers": 3, "canary_ok": True, "offline_partitions": 2}
    assert run(OK, degraded, degraded, degraded)[-1] is ClusterState.DEGRADED
    short = {"reachable": True, "brokers": 2, "expected_brokers": 3, "canary_ok": True}
    assert run(short, short, short) == [
        ClusterState.UNKNOWN,
        ClusterState.UNKNOWN,
        ClusterState.DEGRADED,
    ]


def test_failed_canary_counts_as_a_failed_probe() -> None:
    no_writes = {"reachable": True, "brokers": 1, "canary_ok": False, "error": "canary failed"}
    assert run(OK, no_writes, no_writes, no_writes)[-1] is ClusterState.UNAVAILABLE


def test_transition_evidence_names_the_reason() -> None:
    health = ClusterHealth("dc1")
    for index, probe in enumerate([OK, DOWN, DOWN, DOWN]):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
    assert health.evidence["reason"] == "3 consecutive failed probes (threshold 3)"
    assert health.evidence["probe"]["error"] == "unreachable"
    assert health.since == 3.0


def reports(*entries: tuple[str, ClusterState, float]) -> list[ObserverReport]:
    return [ObserverReport(o, "dc1", s, at) for o, s, at in entries]


def test_one_observer_cannot_take_a_cluster_down_with_quorum_two() -> None:
    found = verdict(
        "dc1",
        reports(("a", ClusterState.UNAVAILABLE, 100), ("b", ClusterState.HEALTHY, 100)),
        POLICY,
        now=105,
    )
    assert not found.down and found.state is ClusterState.HEALTHY
    assert found.down_votes == ("a",)


def test_two_observers_agreeing_take_it_down() -> None:
    found = verdict(
        "dc1",
        reports(("a", ClusterState.UNAVAILABLE, 100), ("b", ClusterState.UNAVAILABLE, 101)),
        POLICY,
        now=105,
    )
    assert found.down and found.state is ClusterState.UNAVAILABLE


def test_stale_observers_do_not_vote() -> None:
    found = verdict(
        "dc1",
        reports(("a", ClusterState.UNAVAILABLE, 100), ("b", ClusterState.UNAVAILABLE, 10)),
        POLICY,
        now=105,
    )
    assert not found.down and found.voters == ("a",)


def test_automation_needs_quorum_or_explicit_single_observer() -> None:
    single = HealthPolicy(observer_quorum=1)
    assert not automation_gate(FailoverPolicy(automatic=True), single, 1).allowed
    allowed = FailoverPolicy(automatic=True, allow_single_observer=True)
    assert automation_gate(allowed, single, 1).allowed
    assert not automation_gate(FailoverPolicy(automatic=False), POLICY, 2).allowed
    assert not automation_gate(FailoverPolicy(automatic=True), POLICY, 1).allowed
    assert automation_gate(FailoverPolicy(automatic=True), POLICY, 2).allowed


def samples(*rows: tuple[float, int, int, float | None]) -> list[LagSample]:
    return [LagSample(at, committed, end, commit_at) for at, committed, end, commit_at in rows]


def test_burrow_rules() -> None:
    ok = samples((0, 10, 10, 0), (10, 15, 20, 10))
    assert partition_status(ok, now=10) is LagStatus.OK
    stall = samples((0, 10, 20, 0), (10, 10, 25, 0), (20, 10, 30, 0))
    assert partition_status(stall, now=20) is LagStatus.STALL
    rewind = samples((0, 10, 20, 0), (10, 5, 25, 10), (20, 8, 30, 20))
    assert partition_status(rewind, now=20) is LagStatus.REWIND
    warn = samples((0, 10, 20, 0), (10, 12, 30, 10), (20, 14, 40, 20))
    assert partition_status(warn, now=20) is LagStatus.WARN
    stop = samples((0, 10, 20, 0), (10, 10, 25, 0))
    assert partition_status(stop, now=100) is LagStatus.STOP
    assert group_status([LagStatus.OK, LagStatus.STALL, LagStatus.WARN]) is LagStatus.STALL


def test_status_reports_quorum_state_and_failover_readiness() -> None:
    config = load_config_text(
        "clusters: {dc1: {bootstrap_servers: 'a:1'}, dc2: {bootstrap_servers: 'b:1'}}\n"
        "flows: [{source: dc1, target: dc2}]\nhealth: {observer_quorum: 1}\n",
        env={},
    )
    now = 1_000_000.0
    at = datetime.fromtimestamp(now - 2, UTC)
    states = [
        ObserverState(
            observer="o1",
            cluster="dc1",
            state="UNAVAILABLE",
            since=at,
            updated_at=at,
            evidence={"reason": "3 consecutive failed probes"},
        ),
        ObserverState(
            observer="o1", cluster="dc2", state="HEALTHY", since=at, updated_at=at, evidence={}
        ),
    ]
    flows = [
        FlowStatus(
            observer="o1",
            flow="dc1->dc2",
            observed_at=at,
            data={"heartbeat_age_s": 0.8, "lag_records": 12, "checkpoint_age_s": 0.5, "workers": 1},
        )
    ]
    picture = build_status(config, states, flows, [], None, now=now)
    assert picture["clusters"]["dc1"]["state"] == "UNAVAILABLE"
    assert picture["clusters"]["dc1"]["down"] is True
    ready = picture["flows"]["dc1->dc2"]["failover"]
    assert ready == {"possible": True, "reasons": [], "rpo_records": 12, "rpo_seconds": 0.8}
    assert picture["active_cluster"] == "dc1"
    assert picture["automation"]["allowed"] is False
