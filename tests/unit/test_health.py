"""Pure health logic: thresholds and hysteresis, observer quorum, Burrow lag status, status."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from drkit.config import load_config_text
from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import (
    UNANSWERED_KEPT,
    ClusterHealth,
    ClusterState,
    ProbeResult,
    evaluate,
    resumed,
)
from drkit.health.group_lag import LagSample, LagStatus, group_status, partition_status
from drkit.health.quorum import (
    KNOWN_WINDOWS,
    ObserverReport,
    QuorumVerdict,
    automation_gate,
    verdict,
)
from drkit.status import build_status
from drkit.store.models import FlowStatus, ObserverState

POLICY = HealthPolicy(
    failure_threshold=3, recovery_threshold=2, observer_quorum=2, observation_window_s=30
)
OK = {"reachable": True, "brokers": 1, "canary_ok": True}
DOWN = {"reachable": False, "error": "unreachable"}
STARVED = {"reachable": False, "inconclusive": True, "error": "the monitor waited for a CPU"}


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


def test_a_restarting_cluster_with_one_failed_canary_goes_straight_back_to_healthy() -> None:
    """Leaving UNAVAILABLE takes recovery_threshold answering probes: one degraded probe of a
    broker still starting (its canary fails once) is not yet a state of its own."""
    canary_failed = {"reachable": True, "brokers": 1, "canary_ok": False}
    states = run(OK, DOWN, DOWN, DOWN, canary_failed, OK, OK)
    assert states[3:] == [
        ClusterState.UNAVAILABLE,
        ClusterState.UNAVAILABLE,
        ClusterState.UNAVAILABLE,
        ClusterState.HEALTHY,
    ]
    # Answering but degraded for recovery_threshold probes in a row: DEGRADED, then healthy.
    states = run(OK, DOWN, DOWN, DOWN, canary_failed, canary_failed, OK, OK)
    assert states[3:] == [
        ClusterState.UNAVAILABLE,
        ClusterState.UNAVAILABLE,
        ClusterState.DEGRADED,
        ClusterState.DEGRADED,
        ClusterState.HEALTHY,
    ]


def test_a_broker_shutting_down_goes_straight_to_unavailable() -> None:
    """A stopping broker still answers but refuses the canary before it stops answering: failures
    piling up are on their way to UNAVAILABLE, not a DEGRADED state of their own."""
    shutting_down = {"reachable": True, "brokers": 1, "canary_ok": False}
    states = run(OK, shutting_down, DOWN, DOWN, DOWN)
    assert ClusterState.DEGRADED not in states
    assert states[-1] is ClusterState.UNAVAILABLE
    # Answering badly again and again is DEGRADED, even mixed with failures.
    flaky = run(OK, shutting_down, DOWN, shutting_down)
    assert flaky[-1] is ClusterState.DEGRADED


def test_degraded_partitions_or_missing_broker() -> None:
    degraded = {"reachable": True, "brokers": 3, "canary_ok": True, "offline_partitions": 2}
    assert run(OK, degraded, degraded, degraded)[-1] is ClusterState.DEGRADED
    short = {"reachable": True, "brokers": 2, "expected_brokers": 3, "canary_ok": True}
    assert run(short, short, short) == [
        ClusterState.UNKNOWN,
        ClusterState.UNKNOWN,
        ClusterState.DEGRADED,
    ]


def test_a_failed_canary_alone_is_degraded_never_unavailable() -> None:
    # The cluster answers metadata but cannot take an acks=all write: DEGRADED, not gone.
    no_writes = {"reachable": True, "brokers": 1, "canary_ok": False, "error": "canary failed"}
    assert run(OK, *[no_writes] * 6) == [ClusterState.HEALTHY] * 3 + [ClusterState.DEGRADED] * 4
    assert run(*[no_writes] * 3)[-1] is ClusterState.DEGRADED  # from UNKNOWN as well
    assert run(OK, no_writes, no_writes, no_writes, OK, OK)[-1] is ClusterState.HEALTHY


def test_an_inconclusive_probe_neither_changes_the_state_nor_breaks_a_run() -> None:
    assert run(OK, *[STARVED] * 10) == [ClusterState.HEALTHY] * 11
    assert run(*[STARVED] * 5) == [ClusterState.UNKNOWN] * 5
    # Two failures, the monitor starved a while, one more failure: three in a row.
    assert run(OK, DOWN, DOWN, STARVED, STARVED, DOWN)[-1] is ClusterState.UNAVAILABLE
    # Recovering: healthy, starved, healthy is two healthy probes in a row.
    assert run(DOWN, DOWN, DOWN, OK, STARVED, OK)[-3:] == [
        ClusterState.UNAVAILABLE,
        ClusterState.UNAVAILABLE,
        ClusterState.HEALTHY,
    ]
    health = ClusterHealth("dc1")
    for index, probe in enumerate([OK, STARVED, STARVED]):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
    assert health.since == 0.0 and health.last_answered == 0.0
    assert health.consecutive_inconclusive == 2
    assert health.reason == (
        "probe inconclusive (2 in a row: this monitor was starved of CPU); still HEALTHY"
    )
    health = evaluate(health, ProbeResult("dc1", 3.0, **OK), POLICY)  # type: ignore[arg-type]
    assert health.consecutive_inconclusive == 0


def test_a_view_keeps_when_probes_went_unanswered_since_the_last_answer() -> None:
    """Automation ends a dead source's loss window at the first probe unanswered after its
    last sign of life (drkit.automation.decision), so each view keeps those moments: failed
    probes only (a starved monitor's say nothing), emptied by any answer (a degraded one
    too), the first UNANSWERED_KEPT kept, and through the stored evidence."""
    probes = [OK, DOWN, STARVED, DOWN, {**OK, "canary_ok": False}, DOWN, DOWN]
    health = ClusterHealth("dc1")
    kept = []
    for index, probe in enumerate(probes):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
        kept.append(health.unanswered)
    assert kept == [(), (1.0,), (1.0,), (1.0, 3.0), (), (5.0,), (5.0, 6.0)]
    assert health.last_answered == 4.0
    for index in range(7, 7 + UNANSWERED_KEPT):
        health = evaluate(health, ProbeResult("dc1", float(index), **DOWN), POLICY)  # type: ignore[arg-type]
    assert len(health.unanswered) == UNANSWERED_KEPT and health.unanswered[:2] == (5.0, 6.0)
    stored = resumed("dc1", health.state.value, health.since, health.evidence())
    assert stored.unanswered == health.unanswered
    assert resumed("dc1", "UNAVAILABLE", 1.0, {"last_answered_at": 4.0}).unanswered == ()


def test_transition_evidence_names_the_reason() -> None:
    health = ClusterHealth("dc1")
    for index, probe in enumerate([OK, DOWN, DOWN, DOWN]):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
    assert health.reason == "3 consecutive failed probes (threshold 3)"
    assert health.evidence()["probe"]["error"] == "unreachable"
    assert health.evidence()["consecutive_failed"] == 3
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


def _two_cut_off_and_c(third: ClusterState) -> QuorumVerdict:
    """Observers a and b cut off from dc1 (UNAVAILABLE); c reports ``third``."""
    three = reports(
        ("a", ClusterState.UNAVAILABLE, 100),
        ("b", ClusterState.UNAVAILABLE, 100),
        ("c", third, 100),
    )
    return verdict("dc1", three, POLICY, now=105)


def test_a_healthy_vote_counts_against_two_observers_cut_off_from_a_live_cluster() -> None:
    """Three observers, two cut off from a live dc1, one still talking to it: not down (main
    counted only the down votes and failed over)."""
    found = _two_cut_off_and_c(ClusterState.HEALTHY)
    assert not found.down
    assert found.up_votes == ("c",) and found.down_votes == ("a", "b")
    everyone = reports(*((o, ClusterState.UNAVAILABLE, 100.0) for o in "abc"))
    assert verdict("dc1", everyone, POLICY, now=105).down


def test_an_observer_that_has_not_decided_yet_counts_against_down() -> None:
    """Three observers: two cut off from a live dc1 report it UNAVAILABLE while the third has
    just started and not answered its first probes yet (UNKNOWN).  Main counted it as no vote:
    2 down, 0 up, a quorum - and failed over a live primary (CI, a monitor starting under load).
    """
    found = _two_cut_off_and_c(ClusterState.UNKNOWN)
    assert not found.down and found.undecided == ("c",)
    assert "1 undecided" in found.explain()
    # Once it decides the cluster is gone too, it is a down vote like the others.
    decided = reports(*((o, ClusterState.UNAVAILABLE, 101.0) for o in "abc"))
    assert verdict("dc1", decided, POLICY, now=105).down


def test_down_needs_a_majority_of_the_known_observers_not_just_the_fresh_ones() -> None:
    """Five observers known; three went silent (cut off from the store, dead): the two left
    standing are a quorum of two but not a majority - not down.  Observers silent for longer
    than KNOWN_WINDOWS windows are forgotten."""
    window = POLICY.observation_window_s
    silent_at = 105 - 2 * window  # stale, but still known
    five = reports(
        ("a", ClusterState.UNAVAILABLE, 100),
        ("b", ClusterState.UNAVAILABLE, 100),
        *((o, ClusterState.HEALTHY, silent_at) for o in "cde"),
    )
    found = verdict("dc1", five, POLICY, now=105)
    assert not found.down and found.known == ("a", "b", "c", "d", "e")
    long_gone = 105 - (KNOWN_WINDOWS + 1) * window
    forgotten = reports(
        ("a", ClusterState.UNAVAILABLE, 100),
        ("b", ClusterState.UNAVAILABLE, 100),
        *((o, ClusterState.HEALTHY, long_gone) for o in "cde"),
    )
    assert verdict("dc1", forgotten, POLICY, now=105).down


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abcdefg"),
            st.sampled_from(list(ClusterState)),
            st.floats(min_value=0, max_value=2000),
        ),
        max_size=20,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_down_always_means_a_net_quorum_and_a_known_majority(
    entries: list[tuple[str, ClusterState, float]], quorum: int
) -> None:
    policy = POLICY.model_copy(update={"observer_quorum": quorum})
    found = verdict("dc1", reports(*entries), policy, now=2000)
    if found.down:
        assert len(found.down_votes) - len(found.up_votes) - len(found.undecided) >= quorum
        assert 2 * len(found.down_votes) > len(found.known)
        assert set(found.up_votes).isdisjoint(found.down_votes)


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


STATUS_CONFIG = (
    "clusters: {dc1: {bootstrap_servers: 'a:1'}, dc2: {bootstrap_servers: 'b:1'}}\n"
    "flows: [{source: dc1, target: dc2}]\nhealth: {observer_quorum: 1}\n"
)
NOW = 1_000_000.0


def observer_states(dc1: str = "UNAVAILABLE", dc2: str = "HEALTHY") -> list[ObserverState]:
    at = datetime.fromtimestamp(NOW - 2, UTC)
    return [
        ObserverState(
            observer="o1",
            cluster=alias,
            state=state,
            since=at,
            updated_at=at,
            evidence={"reason": "3 consecutive failed probes"} if state == "UNAVAILABLE" else {},
        )
        for alias, state in (("dc1", dc1), ("dc2", dc2))
    ]


def flow_row(age: float = 2, data: Mapping[str, float | None] | None = None) -> FlowStatus:
    observed = datetime.fromtimestamp(NOW - age, UTC)
    values = {
        "heartbeat_age_s": 0.8, "lag_records": 12, "rpo_s": 0.8, "checkpoint_age_s": 0.5,
        "workers": 1,
    }  # fmt: skip
    return FlowStatus(
        observer="o1", flow="dc1->dc2", observed_at=observed, data=values | dict(data or {})
    )


ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _moments(document: Any) -> Iterator[Any]:
    """Every value of a moment field (``*_at``, ``at``, ``since``) anywhere in ``document``."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in ("at", "since") or key.endswith("_at"):
                yield value
            else:
                yield from _moments(value)
    elif isinstance(document, list):
        for item in document:
            yield from _moments(item)


def test_status_reports_quorum_state_and_failover_readiness() -> None:
    config = load_config_text(STATUS_CONFIG + "failover: {max_rpo_records: 12}\n", env={})
    picture = build_status(config, observer_states(), [flow_row()], [], None, now=NOW).to_json()
    assert picture["schema"] == "drkit.status/v2"
    moments = list(_moments(picture))
    assert len(moments) >= 4 and all(
        value is None or ISO_UTC.fullmatch(value) for value in moments
    ), moments
    assert picture["clusters"]["dc1"]["state"] == "UNAVAILABLE"
    assert picture["clusters"]["dc1"]["down"] is True
    flow = picture["flows"]["dc1->dc2"]
    assert (flow["lag_records"], flow["workers"], flow["lost_records"], flow["losses"]) == (
        12, 1, 0, []
    )  # fmt: skip
    ready = flow["failover"]
    assert (ready["possible"], ready["reasons"], ready["failed_bounds"]) == (True, [], [])
    # Ages are as of now: observed 2 s ago (rpo_s 0.8 then).
    assert (ready["rpo_records"], ready["rpo_seconds"]) == (12, 2.8)
    assert picture["active_cluster"] == "dc1"
    assert build_status(config, observer_states(), [flow_row()], [], None,
                        now=NOW).active_unavailable  # fmt: skip
    assert picture["automation"]["allowed"] is False


def test_failover_readiness_names_each_bound_that_fails() -> None:
    default = load_config_text(STATUS_CONFIG, env={})
    picture = build_status(default, observer_states(), [flow_row()], [], None, now=NOW)
    # Default failover.max_rpo_records is 0: 12 unreplicated records fail it.
    assert picture.flows["dc1->dc2"].failover.failed_bounds == ("failover.max_rpo_records",)
    config = load_config_text(
        STATUS_CONFIG.replace("observer_quorum: 1", "observer_quorum: 1, max_replication_lag_s: 5")
        + "failover: {max_rpo_records: 100, max_rpo_s: 10}\n",
        env={},
    )

    def ready(**data: float | None) -> dict[str, Any]:
        picture = build_status(config, observer_states(), [flow_row(data=data)], [], None, now=NOW)
        return dict(picture.to_json()["flows"]["dc1->dc2"]["failover"])

    assert ready()["possible"] is True
    # heartbeat 4 s old when observed 2 s ago: 6 s now, above max_replication_lag_s (5).
    slow = ready(heartbeat_age_s=4.0)
    assert slow["failed_bounds"] == ["health.max_replication_lag_s"]
    # The RPO in seconds is drkit.lag's (rpo_s: 0.8 s observed 2 s ago), not the heartbeat's
    # age - the link is slow, the partitions were copied (issue 47).
    assert slow["rpo_seconds"] == 2.8
    behind = ready(rpo_s=4.0)
    assert (behind["failed_bounds"], behind["rpo_seconds"]) == ([], 6.0)
    far = ready(heartbeat_age_s=11.0, rpo_s=11.0, checkpoint_age_s=9.0, lag_records=101)
    assert far["possible"] is False
    assert far["failed_bounds"] == [
        "failover.max_rpo_records",
        "failover.max_rpo_s",
        "health.max_replication_lag_s",
    ]
    checks = {(c["measure"], c["bound"]): (c["value"], c["ok"]) for c in far["checks"]}
    assert checks == {
        ("lag_records", "failover.max_rpo_records"): (101, False),
        ("rpo_s", "failover.max_rpo_s"): (13.0, False),
        ("heartbeat_age_s", "health.max_replication_lag_s"): (13.0, False),
        ("checkpoint_age_s", "health.max_replication_lag_s"): (11.0, False),
    }
    # Unknown values fail their bounds: a failover whose cost is unknown is not "possible".
    blind = ready(lag_records=None, checkpoint_age_s=None)
    assert blind["failed_bounds"] == ["failover.max_rpo_records", "health.max_replication_lag_s"]
    timeless = ready(rpo_s=None)
    assert timeless["failed_bounds"] == ["failover.max_rpo_s"]


def test_failover_is_not_possible_onto_an_unhealthy_target_or_from_a_stale_observation() -> None:
    config = load_config_text(STATUS_CONFIG + "failover: {max_rpo_records: 100}\n", env={})
    degraded = (
        build_status(config, observer_states(dc2="DEGRADED"), [flow_row()], [], None, now=NOW)
        .flows["dc1->dc2"]
        .failover
    )
    assert degraded.possible is False and degraded.failed_bounds == ()
    stale = build_status(config, observer_states(), [flow_row(age=31)], [], None, now=NOW)
    assert stale.flows["dc1->dc2"].failover.possible is False
    never = build_status(config, observer_states(), [], [], None, now=NOW).to_json()
    flow = never["flows"]["dc1->dc2"]
    assert (flow["observed_at"], flow["lag_records"], flow["failover"]["possible"]) == (
        None, None, False
    )  # fmt: skip
    seen = build_status(config, observer_states(), [flow_row()], [], None, now=NOW).to_json()
    # The same keys whether observed or not (nothing measured is null, not zero).
    assert set(flow) == set(seen["flows"]["dc1->dc2"])
    assert (flow["flow"], flow["workers"], flow["heartbeat_age_s"]) == ("dc1->dc2", None, None)


def test_automation_stays_blocked_for_the_block_window_after_a_failover() -> None:
    policy = FailoverPolicy(automatic=True, block_window_s=600)
    assert automation_gate(policy, POLICY, 2, last_failover_at=1000.0, now=1500.0).allowed is False
    assert automation_gate(policy, POLICY, 2, last_failover_at=1000.0, now=1601.0).allowed is True


def test_a_held_state_says_how_far_it_is_from_changing() -> None:
    health = ClusterHealth("dc1")
    reasons = []
    for index, probe in enumerate([DOWN, DOWN, DOWN, OK, OK]):
        health = evaluate(health, ProbeResult("dc1", float(index), **probe), POLICY)  # type: ignore[arg-type]
        reasons.append(health.reason)
    assert reasons == [
        "probe failed (1 of 3 in a row to be UNAVAILABLE); still UNKNOWN",
        "probe failed (2 of 3 in a row to be UNAVAILABLE); still UNKNOWN",
        "3 consecutive failed probes (threshold 3)",
        "probe ok (1 of 2 in a row to be HEALTHY); still UNAVAILABLE",
        "2 consecutive healthy probes (recovery threshold 2)",
    ]


def test_group_lag_rows_say_unknown_rather_than_zero() -> None:
    from drkit.health.group_lag import lag_rows

    rows = lag_rows(
        {"billing": {("orders", 1): 40, ("orders", 0): 90}, "audit": {("orders", 0): 100}},
        {("orders", 0): 100},  # partition 1's end did not come back
        {"billing": ("Stable", 2)},
    )
    assert [(r.group, r.partition, r.end, r.lag_offsets, r.state) for r in rows] == [
        ("audit", 0, 100, 0, "Unknown"),
        ("billing", 0, 100, 10, "Stable"),
        ("billing", 1, None, None, "Stable"),
    ]


def test_a_group_listing_shows_every_group_up_to_its_limit_then_the_worst_first() -> None:
    from drkit.health.group_lag import LISTED_GROUPS, group_listing

    few = group_listing({"b": "OK", "a": "STALL"}, ["c"])
    assert few.shown == ("a", "b", "c") and few.left_out == 0
    assert few.counts == {"OK": 1, "STALL": 1, "unknown": 1}
    many = {f"g{i:03d}": "OK" for i in range(100)} | {"g050": "WARN", "g099": "STOP"}
    listing = group_listing(many, ["zz-new"])
    assert listing.total == 101 and listing.left_out == 101 - LISTED_GROUPS
    assert listing.shown[:3] == ("g099", "g050", "zz-new")  # STOP, WARN, unknown, then OK
    assert listing.shown[3:6] == ("g000", "g001", "g002")  # the OK ones by name
    odd = group_listing({f"g{i:03d}": "OK" for i in range(30)} | {"g029": "NEW-KIND"})
    assert odd.shown[0] == "g029"  # a status this version does not know comes first
