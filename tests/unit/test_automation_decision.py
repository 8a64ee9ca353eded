"""The automatic failover decision over generated snapshots (pure, hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.automation.decision import (
    AutomationSnapshot,
    CheckName,
    ObserverVote,
    Pause,
    RpoEstimate,
    decide,
)
from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import ClusterState

NOW = 10_000.0
STATES = st.sampled_from(list(ClusterState))


@st.composite
def views(draw: st.DrawFn, count: int) -> tuple[ObserverVote, ...]:
    out = []
    for index in range(count):
        since = draw(st.floats(NOW - 600, NOW))
        answered = draw(st.none() | st.floats(NOW - 600, NOW))
        unanswered = draw(st.lists(st.floats(answered or NOW - 600, NOW), max_size=4))
        out.append(
            ObserverVote(
                f"o{index}",
                draw(STATES),
                since,
                draw(st.floats(NOW - 60, NOW)),
                answered,
                tuple(sorted(unanswered)),
            )
        )
    return tuple(out)


@st.composite
def snapshots(draw: st.DrawFn) -> AutomationSnapshot:
    quorum = draw(st.integers(1, 3))
    observers = draw(st.integers(0, 4))
    failover = FailoverPolicy(
        automatic=draw(st.booleans()),
        allow_single_observer=draw(st.booleans()),
        after_s=draw(st.sampled_from([0.0, 10.0, 60.0, 300.0])),
        max_rpo_records=draw(st.integers(0, 100)),
        max_rpo_s=draw(st.sampled_from([0.0, 30.0, 60.0])),
        accept_any_rpo=draw(st.booleans()),
        block_window_s=draw(st.sampled_from([0.0, 600.0, 3600.0])),
    )
    health = HealthPolicy(observer_quorum=quorum)
    rpo = draw(
        st.none()
        | st.builds(
            RpoEstimate,
            st.none() | st.integers(0, 1_000),
            st.none() | st.floats(0, 600),
        )
    )
    return AutomationSnapshot(
        "dc1",
        "dc2",
        NOW,
        draw(views(observers)),
        draw(views(observers)),
        failover,
        health,
        pointer=draw(st.sampled_from([None, "dc1", "dc2", "dc3"])),
        last_failover_at=draw(st.none() | st.floats(NOW - 7200, NOW)),
        unacknowledged_runs=draw(st.sampled_from([(), (7,)])),
        running_run=draw(st.sampled_from([None, 3])),
        paused=draw(st.none() | st.just(Pause("ops", "maintenance", NOW - 5))),
        rpo=rpo,
    )


@settings(max_examples=400, deadline=None)
@given(snapshots())
def test_never_acts_when_a_rule_forbids_it(snapshot: AutomationSnapshot) -> None:
    decision = decide(snapshot)
    policy, health = snapshot.failover, snapshot.health
    if not decision.act:
        assert decision.summary() and decision.failed
        return
    assert policy.automatic
    assert snapshot.paused is None
    assert not snapshot.unacknowledged_runs
    assert snapshot.running_run is None
    assert health.observer_quorum >= 2 or policy.allow_single_observer
    if snapshot.last_failover_at is not None:
        assert NOW - snapshot.last_failover_at >= policy.block_window_s
    assert snapshot.pointer in (None, "dc1")
    # A quorum of distinct fresh observers says the source is down, each silent for after_s.
    window = health.observation_window_s
    silent_down = {
        v.observer
        for v in snapshot.source_views
        if v.state is ClusterState.UNAVAILABLE
        and NOW - v.reported_at <= window
        and NOW - v.silent_since() >= policy.after_s
    }
    assert len(silent_down) >= health.observer_quorum
    # The target is healthy by the fresh observers' agreement.
    fresh_target = [v for v in snapshot.target_views if NOW - v.reported_at <= window]
    assert any(v.state is ClusterState.HEALTHY for v in fresh_target)
    if not policy.accept_any_rpo:
        assert snapshot.rpo is not None
        assert snapshot.rpo.records is not None and snapshot.rpo.seconds is not None
        assert snapshot.rpo.records <= policy.max_rpo_records
        # The source was silent within max_rpo_s of its last sign of life: counted to now, or
        # by a quorum of the fresh observers reporting it down, each with a probe unanswered
        # after every answer any observer had and after replication's evidence.
        evidence_at = NOW - snapshot.rpo.seconds
        alive = max(
            [evidence_at, *(v.last_answered_at or evidence_at for v in snapshot.source_views)]
        )
        prompt = [
            v
            for v in snapshot.source_views
            if v.state is ClusterState.UNAVAILABLE
            and NOW - v.reported_at <= window
            and any(alive < t <= evidence_at + policy.max_rpo_s for t in v.unanswered_at)
        ]
        assert NOW - evidence_at <= policy.max_rpo_s or len(prompt) >= health.observer_quorum


def _good() -> AutomationSnapshot:
    down = tuple(
        ObserverVote(f"o{i}", ClusterState.UNAVAILABLE, NOW - 120, NOW - 1) for i in (1, 2)
    )
    up = tuple(
        ObserverVote(f"o{i}", ClusterState.HEALTHY, NOW - 900, NOW - 1, NOW - 1) for i in (1, 2)
    )
    return AutomationSnapshot(
        "dc1",
        "dc2",
        NOW,
        down,
        up,
        FailoverPolicy(automatic=True, after_s=60),
        HealthPolicy(observer_quorum=2),
        rpo=RpoEstimate(0, 0.0),
    )


def test_a_source_gone_for_a_quorum_acts() -> None:
    decision = decide(_good())
    assert decision.act, decision.summary()


def test_each_rule_alone_stops_it_and_says_why() -> None:
    good = _good()
    flapping = tuple(replace(v, last_answered_at=NOW - 4) for v in good.source_views)
    one_voter = (good.source_views[0], replace(good.source_views[1], state=ClusterState.HEALTHY))
    cases = {
        CheckName.ENABLED: replace(
            good, failover=good.failover.model_copy(update={"automatic": False})
        ),
        CheckName.NOT_PAUSED: replace(good, paused=Pause("ana", "db upgrade", NOW)),
        CheckName.ACKNOWLEDGED: replace(good, unacknowledged_runs=(4,)),
        CheckName.BLOCK_WINDOW: replace(good, last_failover_at=NOW - 60),
        CheckName.IDLE: replace(good, running_run=9),
        CheckName.POINTER: replace(good, pointer="dc2"),
        CheckName.SOURCE_DOWN: replace(good, source_views=one_voter),
        CheckName.SUSTAINED: replace(good, source_views=flapping),
        CheckName.TARGET_HEALTHY: replace(
            good,
            target_views=tuple(replace(v, state=ClusterState.DEGRADED) for v in good.target_views),
        ),
        CheckName.RPO: replace(good, rpo=RpoEstimate(5, 3.0)),
    }
    for name, snapshot in cases.items():
        decision = decide(snapshot)
        assert [c.name for c in decision.failed] == [name] or (
            name is CheckName.SOURCE_DOWN
            and {c.name for c in decision.failed} == {CheckName.SOURCE_DOWN, CheckName.SUSTAINED}
        ), (name, decision.summary())
        assert not decision.act


def test_rpo_is_estimated_only_once_everything_else_passes() -> None:
    assert decide(replace(_good(), rpo=None)).needs_rpo
    assert not decide(replace(_good(), rpo=None, running_run=2)).needs_rpo


def test_accept_any_rpo_overrides_the_bounds() -> None:
    good = _good()
    snapshot = replace(
        good,
        failover=good.failover.model_copy(update={"accept_any_rpo": True}),
        rpo=RpoEstimate(10**6, 900.0),
    )
    assert decide(snapshot).act


def _gone(good: AutomationSnapshot, answered_s_ago: float) -> tuple[ObserverVote, ...]:
    """``good``'s source views, the source last answering ``answered_s_ago``: every 5 s probe
    unanswered since."""
    unanswered = tuple(NOW - answered_s_ago + 5.0 * k for k in range(1, 33))
    return tuple(
        replace(v, last_answered_at=NOW - answered_s_ago, unanswered_at=unanswered)
        for v in good.source_views
    )


def test_the_rpo_window_ends_where_the_source_stopped_answering() -> None:
    """Issue 44, finding 3: the shipped defaults (after_s 60, max_rpo_s 60), the source's broker
    killed 311 s ago, replication caught up 2 s before its last answer.  main measured the RPO
    seconds from that evidence to *now* - 313 s, past the bound for good, so automation could
    never fire; the window that can hold lost writes ends at the first unanswered probe."""
    good = _good()
    shipped = replace(good, source_views=_gone(good, 311), rpo=RpoEstimate(0, 313.0))
    decision = decide(shipped)
    assert decision.act, decision.summary()
    rpo = next(c for c in decision.checks if c.name is CheckName.RPO)
    assert "up to 7s" in rpo.detail  # 2 s + one 5 s probe interval
    stale = replace(shipped, rpo=RpoEstimate(0, 400.0))  # caught up 89 s before the end
    assert [c.name for c in decide(stale).failed] == [CheckName.RPO]


def test_a_probe_unanswered_while_replication_still_read_the_source_does_not_end_it() -> None:
    """A fresh-clone run under load: both monitors' probes timed out (1 s interval, 0.8 s
    timeout) twice while the source still served the replicator, whose evidence is 90.5 s old;
    then the broker was killed.  main ended the window one probe after the last answer, 92 s
    ago, read the newer evidence as "the hosts' clocks disagree", and held for good.  The probes
    that failed before the evidence prove nothing; the first one after it (90 s ago) ends it."""
    good = _good()
    unanswered = (NOW - 92, NOW - 91, *(NOW - 90 + k for k in range(30)))
    flaky = tuple(
        replace(v, last_answered_at=NOW - 93, unanswered_at=unanswered) for v in good.source_views
    )
    quiet = replace(good, source_views=flaky, rpo=RpoEstimate(0, 90.5))
    decision = decide(replace(quiet, failover=quiet.failover.model_copy(update={"max_rpo_s": 15})))
    assert decision.act, decision.summary()
    rpo = next(c for c in decision.checks if c.name is CheckName.RPO)
    assert "up to 0s" in rpo.detail and "90s ago" in rpo.detail, rpo.detail


def test_no_quorum_silent_after_the_last_sign_of_life_counts_the_window_to_now() -> None:
    """The end needs a quorum of the observers reporting the source down to have seen a probe
    unanswered after its last sign of life.  One observer that did (the other kept none: a
    monitor frozen since, or one whose kept moments all came before) is not a quorum: the
    window runs to now - 120 s here, past the 60 s bound."""
    good = _good()
    [first, second] = _gone(good, 125)
    early = replace(second, unanswered_at=(NOW - 124,))  # all before the evidence (121 s)
    for views in ((first, replace(second, unanswered_at=())), (first, early)):
        decision = decide(replace(good, source_views=views, rpo=RpoEstimate(0, 121.0)))
        assert [c.name for c in decision.failed] == [CheckName.RPO], decision.summary()
        assert "up to 121s" in decision.failed[0].detail
        assert "counted to now" in decision.failed[0].detail
    single = good.failover.model_copy(update={"allow_single_observer": True})
    one = replace(good, health=HealthPolicy(observer_quorum=1), failover=single)
    alone = decide(replace(one, source_views=(first,), rpo=RpoEstimate(0, 121.0)))
    assert alone.act, alone.summary()  # a quorum of one: its first probe after, 1 s on


def test_the_window_starts_again_at_any_observers_later_answer() -> None:
    """An observer that is not reporting the source down (it reaches it) answered 10 s ago,
    after replication's evidence: the source served until then, so the down observers'
    probes unanswered before that prove nothing, and those after it are the end."""
    good = _good()
    gone = _gone(good, 125)  # unanswered every 5 s from 120 s ago
    reaching = replace(
        gone[0], observer="o3", state=ClusterState.HEALTHY, last_answered_at=NOW - 10
    )
    snapshot = replace(good, source_views=(*gone, reaching), rpo=RpoEstimate(0, 121.0))
    rpo = next(c for c in decide(snapshot).checks if c.name is CheckName.RPO)
    assert "up to 116s" in rpo.detail and "5s ago" in rpo.detail, rpo.detail


def test_a_decision_taken_again_later_ages_the_plans_evidence_by_the_time_since() -> None:
    """The automation decides again under the lease, with the RPO estimate of the plan it made
    before (a monitor stalled in between, or an engine waited for maintenance's lease).  The
    estimate's ages were measured when the plan was made: judged against a later ``now`` as
    they stood, the evidence looked newer than the source's last answer - "the hosts' clocks
    disagree" - and a failover that held at the plan was refused (found on real brokers with
    the monitor frozen 20 s between its decision and the start)."""
    good = _good()
    planned = replace(
        good, source_views=_gone(good, 311), rpo=RpoEstimate(0, 313.0, measured_at=NOW)
    )
    assert decide(planned).act
    later = replace(planned, now=NOW + 20.0)  # the same plan's estimate, 20 s on
    decision = decide(later)
    assert decision.act, decision.summary()
    rpo = next(c for c in decision.checks if c.name is CheckName.RPO)
    assert "up to 7s" in rpo.detail  # the same window: nothing about it changed
