"""drkit.lag: the one definition of lag, RPO and divergence - visible records in a span; one
span rule, one seconds rule, one group-lag rule - and readiness and the failover plan judging
``failover.max_rpo_s`` on the same figure (issue 47)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from drkit.config.loader import load_config_text
from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.failover.facts import GroupFacts, PartitionFacts
from drkit.failover.model import Procedure
from drkit.failover.plan import make_plan, partition_rpo
from drkit.failover.runbook import load_runbook
from drkit.failover.snapshot import count_unreplicated
from drkit.health.evaluation import ClusterState
from drkit.health.group_lag import LagSample, lag_rows
from drkit.health.observations import FlowObservation
from drkit.health.probes import FlowProber
from drkit.health.readiness import failover_readiness
from drkit.lag import (
    PartitionRpo,
    SpanCount,
    count_visible,
    group_lag,
    group_total,
    known_seconds,
    lacking_records,
    lacking_span,
    lacking_total,
    rpo_seconds,
    total_records,
    worst_seconds,
)
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.progress import Progress
from drkit.topology.flow import FlowTopology
from drkit.translation import (
    EVERYWHERE,
    PartitionInputs,
    PartitionMapping,
    TargetBounds,
    carry_over,
    translate,
    unreplicated_total,
)
from tests.fake_kafka import FakeCluster, FakeClusters
from tests.unit.test_failover_plan import _partition, _snapshot

A, B = TopicPartition("orders", 0), TopicPartition("orders", 1)


def _cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_topic("orders", 2)
    cluster.append("orders", 0, 10)
    cluster.append_invisible("orders", 0, 3)  # an aborted batch and its marker
    cluster.append("orders", 0, 2)
    cluster.append("orders", 1, 4)
    return cluster


def test_aborted_records_and_markers_are_not_records() -> None:
    counts = count_visible(_cluster(), {A: (5, 15), B: (0, 4)}, limit=None)
    assert counts == {A: SpanCount(10, 7), B: SpanCount(4, 4)}
    assert counts[A].exact and counts[A].at_most == 7


def test_an_empty_or_inverted_span_is_zero_without_a_read() -> None:
    cluster = _cluster()
    counts = count_visible(cluster, {A: (15, 15), B: (4, 2)}, limit=0)
    assert counts == {A: SpanCount(0, 0), B: SpanCount(0, 0)}
    assert "visible_records" not in cluster.calls and "stable_offsets" not in cluster.calls


def test_spans_wider_than_the_limit_are_bounded_not_counted() -> None:
    counts = count_visible(_cluster(), {A: (0, 15), B: (0, 4)}, limit=18)
    assert counts == {A: SpanCount(15), B: SpanCount(4)}
    assert not counts[A].exact and counts[A].at_most == 15


def test_a_span_with_an_open_transaction_is_not_counted_the_others_are() -> None:
    cluster = _cluster()
    cluster.open_transaction("orders", 1)
    cluster.append("orders", 1, 5)  # inside the open transaction: may still abort
    counts = count_visible(cluster, {A: (0, 15), B: (0, 9)}, limit=None)
    assert counts == {A: SpanCount(15, 12), B: SpanCount(9)}


SRC = TopicPartition("orders", 0)
NOW = 1_000_000.0
POLICY = FailoverPolicy(max_rpo_records=100, max_rpo_s=60)


def _max_rpo_s_judged(facts: PartitionFacts, heartbeat_age_s: float) -> tuple[bool, bool]:
    """One flow of one partition (``facts``, the source answering) whose heartbeat copy is
    ``heartbeat_age_s`` old: (readiness fails ``failover.max_rpo_s``, the plan warns of it).
    The observation holds what the monitor's probe measures of the same partition."""
    snapshot = _snapshot(source_reachable=True, partitions={SRC: facts}, policy=POLICY)
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    observed = FlowObservation.from_json(
        "dc1->dc2",
        NOW,
        {
            "heartbeat_age_s": heartbeat_age_s,
            "lag_records": plan.rpo_records,
            "lag_exact": True,
            "rpo_s": max(p.seconds or 0.0 for p in plan.rpo),
            "checkpoint_age_s": 1.0,
            "workers": 1,
        },
    )
    ready = failover_readiness(observed, ClusterState.HEALTHY, NOW, HealthPolicy(), POLICY)
    plan_warns = "rpo_seconds" in {f.code for f in plan.findings}
    return "failover.max_rpo_s" in ready.failed_bounds, plan_warns


def test_readiness_and_the_plan_judge_max_rpo_s_alike() -> None:
    """Before issue 47 readiness judged ``max_rpo_s`` on the heartbeat's age and the plan on
    progress: a flow copied to the last record whose heartbeat copy is 2 minutes old (the
    heartbeat thread stalled) was "not possible: max_rpo_s" in ``drkit status`` while its plan
    said nothing is lost.  Both judge drkit.lag's seconds now: 0 for a partition caught up,
    else the age of its last progress - and the slow link fails
    ``health.max_replication_lag_s`` instead."""
    caught_up = _partition(replicated_end=100, source_end=100)
    assert _max_rpo_s_judged(caught_up, heartbeat_age_s=120.0) == (False, False)
    # The link carries heartbeats, but this partition's progress is 90 s old, 20 behind.
    stuck = replace(_partition(replicated_end=80, source_end=100), progress_age_s=90.0)
    assert _max_rpo_s_judged(stuck, heartbeat_age_s=1.0) == (True, True)
    young = replace(stuck, progress_age_s=5.0)
    assert _max_rpo_s_judged(young, heartbeat_age_s=1.0) == (False, False)


def test_the_span_the_target_lacks_starts_at_progress_the_log_start_or_a_position() -> None:
    assert lacking_span(80, 100) == (80, 100)
    assert lacking_span(10, 100, log_start=30) == (30, 100)  # below it: a loss, not lag
    assert lacking_span(None, 100, log_start=30) == (30, 100)  # no progress: all of it
    assert lacking_span(80, 100, position=90) == (90, 100)  # what the group read it has
    assert lacking_records(80, 100, position=120) == 0
    # Unknown - never a made-up 0: no source end, or neither progress nor a log start.
    assert lacking_span(80, None) is None and lacking_span(None, 100) is None
    assert lacking_records(None, 100) is None


@given(
    st.integers(0, 200),
    st.integers(0, 200),
    st.one_of(st.none(), st.integers(0, 200)),
    st.lists(st.integers(0, 300), max_size=8),
)
def test_a_total_over_positions_is_the_sum_of_each_position_s_records(
    replicated_end: int, source_end: int, log_start: int | None, positions: list[int]
) -> None:
    span = lacking_span(replicated_end, source_end, log_start=log_start)
    each = [
        lacking_records(replicated_end, source_end, log_start=log_start, position=p)
        for p in positions
    ]
    assert lacking_total(span, positions) == sum(n or 0 for n in each)


def test_translation_counts_a_group_s_unreplicated_records_by_the_same_span() -> None:
    mapping = PartitionMapping(SRC, TopicPartition("dc1.orders", 0), (OffsetRun(0, 0, 80),), 80)
    for committed in (10, 80, 95, 130):
        result = translate(committed, mapping, TargetBounds(0, 80), 100)
        assert result.unreplicated == lacking_records(80, 100, position=committed)  # type: ignore[union-attr]
    offsets = [10, 80, 95, 130]
    assert unreplicated_total(offsets, PartitionInputs(mapping, None, 100)) == 20 + 20 + 5 + 0
    assert unreplicated_total(offsets, PartitionInputs(mapping, None, None)) == 0


def test_seconds_are_zero_only_when_caught_up_with_an_end_read_now() -> None:
    assert rpo_seconds(0, True, 30.0, 40.0) == 0.0
    assert rpo_seconds(0, False, 30.0, 40.0) == 40.0  # the source may have taken more since
    assert rpo_seconds(5, True, 30.0, 40.0) == 30.0  # lagging: since progress last moved
    assert rpo_seconds(5, False, 30.0, 40.0) == 30.0
    assert rpo_seconds(None, True, None, 40.0) is None
    rows = [PartitionRpo("t", p, 10, 10, 0, None, s) for p, s in enumerate((0.0, 7.0, 3.0))]
    assert (worst_seconds(rows), total_records(rows)) == (7.0, 0)
    unknown = [*rows, PartitionRpo("t", 9, None, None, None, None, None)]
    assert (worst_seconds(unknown), total_records(unknown)) == (None, None)
    assert worst_seconds([]) == 0.0


def test_the_plan_counts_from_the_source_log_start_as_the_monitor_does() -> None:
    """Progress below a live source's log start: the records below it are gone (a loss event),
    not part of the RPO; a partition without progress lacks everything from the log start."""
    truncated = replace(_partition(replicated_end=10, source_end=100), source_start=30)
    assert (partition_rpo(truncated).records, partition_rpo(truncated).exact) == (70, False)
    fresh = replace(truncated, replicated_end=None, progress_age_s=None)
    assert partition_rpo(fresh).records == 70 and partition_rpo(fresh).seconds is None
    gone = replace(fresh, source_end_live=False, source_start=None)
    assert partition_rpo(gone).records is None


@contextmanager
def _prober(clusters: FakeClusters) -> Iterator[FlowProber]:
    config = load_config_text(
        "clusters: {dc1: {bootstrap_servers: 'a:1'}, dc2: {bootstrap_servers: 'b:1'}}\n"
        "flows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    flow = config.flows[0]
    prober = FlowProber(
        FlowTopology.of(flow),
        config.clusters["dc1"],
        config.clusters["dc2"],
        config.health,
        clusters.connect,
    )
    try:
        yield prober
    finally:
        prober.close()


def test_the_monitor_s_probe_states_each_partition_as_the_plan_does() -> None:
    clusters = FakeClusters("dc1", "dc2")
    source = clusters["dc1"]
    source.add_topic("orders", 3)
    source.append("orders", 0, 100)
    source.append("orders", 1, 50)
    source.truncate("orders", 1, 20)
    source.append("orders", 2, 10)
    source.append_invisible("orders", 2, 5)  # markers: offsets, not records
    stamp = int(NOW * 1000)
    progress = {
        TopicPartition("orders", 0): Progress(TopicPartition("orders", 0), 100, "w", stamp - 5000),
        TopicPartition("orders", 1): Progress(TopicPartition("orders", 1), 10, "w", stamp - 90_000),
    }
    with _prober(clusters) as prober:
        rows = prober.rpo(progress, NOW)
    assert [(r.partition, r.records, r.exact, r.seconds) for r in rows] == [
        (0, 0, True, 0.0),  # caught up, read now
        (1, 30, True, 90.0),  # from the log start (20), not progress (10); progress 90 s old
        (2, 10, True, None),  # no progress: every record, since when unknown
    ]
    for row in rows:  # the plan's rule over the same facts gives the same row
        facts = PartitionFacts(
            TopicPartition(row.topic, row.partition), TopicPartition("dc1.orders", row.partition),
            None, None, row.source_end, True, row.replicated_end, row.seconds if row.records
            else None, None, row.records, source_start=None,
        )  # fmt: skip
        assert partition_rpo(facts) == row


def test_a_group_s_lag_is_unknown_without_an_end_and_never_negative() -> None:
    assert (group_lag(40, 100), group_lag(140, 100), group_lag(40, None)) == (60, 0, None)
    a, b = TopicPartition("orders", 0), TopicPartition("orders", 1)
    assert group_total({a: 40, b: 10}, {a: 100}) == 60  # b's end unknown: not counted
    assert LagSample(0.0, 140, 100).lag == 0
    [row] = lag_rows({"g": {("orders", 0): 40}}, {("orders", 0): 100}, {})
    assert row.lag_offsets == group_lag(40, 100)


def test_one_unknown_partition_does_not_hide_the_others_seconds() -> None:
    """The source is gone: partition 0 is known only from its offset map (no progress, no end),
    partition 1 is 3600 s behind.  The plan warned only ``rpo_unknown`` - the 3600 s went
    unjudged because one partition's seconds were unknown; it judges the known ones against
    ``failover.max_rpo_s`` and still names the unknown ones, and readiness (over the figures the
    monitor's probe states of the same partitions) fails ``max_rpo_s`` naming both."""
    p1 = TopicPartition("orders", 1)
    known_by_map = replace(
        _partition(), replicated_end=None, source_end=None, source_end_live=False,
        progress_age_s=None,
    )  # fmt: skip
    behind = replace(
        _partition(replicated_end=80, source_end=100), source=p1,
        target=TopicPartition("dc1.orders", 1), source_end_live=False, progress_age_s=3600.0,
    )  # fmt: skip
    snapshot = _snapshot(partitions={SRC: known_by_map, p1: behind}, policy=POLICY)
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    messages = {f.code: f.message for f in plan.findings}
    assert "rpo_unknown" in messages
    assert messages.get("rpo_seconds", "").startswith("up to 3600s of writes may be lost")
    worst, unknown = known_seconds(plan.rpo)
    assert (worst, unknown) == (3600.0, 1)
    observed = FlowObservation(
        "dc1->dc2", NOW, heartbeat_age_s=1.0, lag_records=20, lag_exact=True, rpo_s=worst,
        rpo_s_unknown=unknown, checkpoint_age_s=1.0, workers=1,
    )  # fmt: skip
    assert FlowObservation.from_json("dc1->dc2", NOW, observed.to_json()) == observed
    ready = failover_readiness(observed, ClusterState.HEALTHY, NOW, HealthPolicy(), POLICY)
    assert ready.failed_bounds == ("failover.max_rpo_s",)
    assert "rpo_s 3600 exceeds failover.max_rpo_s 60" in ready.reasons
    assert "rpo_s of 1 partition(s) unknown (failover.max_rpo_s 60 cannot be checked)" in (
        ready.reasons
    )
    assert ready.rpo_seconds == 3600.0
    # The readiness document names each check's measure by its field alone - a reader grouping
    # checks by measure must not meet one name per count - and gives the count beside it.
    assert [c.measure for c in ready.checks if c.bound == "failover.max_rpo_s"] == ["rpo_s"] * 2
    unknown_check = next(c.to_json() for c in ready.checks if c.value is None)
    assert unknown_check["measure"] == "rpo_s" and unknown_check["unknown_partitions"] == 1
    # Nothing known at all: unknown, never a made-up 0.
    assert known_seconds([PartitionRpo("t", 0, None, None, None, None, None)]) == (None, 1)
    assert known_seconds([]) == (0.0, 0)


def test_a_group_s_unreplicated_records_count_from_the_source_log_start_as_the_rpo_does() -> None:
    """Progress at 100, the live source's log start at 500 and end at 600, a group committed at
    100: the plan's RPO row said 100 records while the same plan's move of the group (and the
    checkpointer's gauge, over the same translation inputs) said 500 unreplicated - the records
    below the log start are gone (a loss event), not lag, for the group too."""
    facts = replace(_partition(replicated_end=100, source_end=600), source_start=500)
    group = GroupFacts("billing", {SRC: 100}, False, "absent", 0)
    snapshot = _snapshot(source_reachable=True, partitions={SRC: facts}, groups=(group,))
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    [row] = plan.rpo
    [move] = plan.groups[0].partitions
    assert (row.records, move.unreplicated) == (100, 100)
    assert facts.mapping is not None
    assert unreplicated_total([100, 550], facts.inputs) == 100 + 50
    result = translate(100, facts.mapping, TargetBounds(0, 100), 600, 500)
    assert result.unreplicated == 100  # type: ignore[union-attr]
    # Reused next round (the checkpointer's carry_over): counted by the same span.
    kept = carry_over(result, 100, facts.mapping, TargetBounds(0, 100), 700, EVERYWHERE, 500)
    assert kept is not None and kept.unreplicated == 200


def test_a_lagging_partition_s_seconds_are_the_age_of_the_oldest_record_the_target_lacks() -> None:
    """A quiet topic: progress at 100 was stored 2 h ago (it is stamped only when it moves), one
    record was written at offset 100 half a second ago and not copied yet.  The probe said
    7200 s (readiness: "rpo_s 7200 exceeds failover.max_rpo_s 60", flapping) and the plan "up to
    7200s of writes may be lost": the target lacks half a second of writes - the age of the
    first record it lacks, read on the live source with the count.  A producer's clock ahead of
    ours gives 0, never a negative age; a span not read (a transaction open in it, over the
    read budget, the source gone) keeps the time since the partition last moved."""
    clusters = FakeClusters("dc1", "dc2")
    source = clusters["dc1"]
    source.add_topic("orders", 3)
    stamp = int(NOW * 1000)
    source.append("orders", 0, 100, timestamp_ms=stamp - 7_300_000)
    source.append("orders", 0, 1, timestamp_ms=stamp - 500)
    source.append("orders", 1, 10, timestamp_ms=stamp + 5_000)  # the producer's clock is ahead
    source.append("orders", 2, 10, timestamp_ms=stamp - 500)
    source.open_transaction("orders", 2)
    source.append("orders", 2, 5, timestamp_ms=stamp - 400)  # may still abort: not read
    parts = [TopicPartition("orders", p) for p in range(3)]
    moved = stamp - 7_200_000
    progress = {tp: Progress(tp, o, "w", moved) for tp, o in zip(parts, (100, 5, 8), strict=True)}
    with _prober(clusters) as prober:
        rows = prober.rpo(progress, NOW)
    assert [(r.partition, r.records, r.seconds) for r in rows] == [
        (0, 1, 0.5),
        (1, 5, 0.0),
        (2, 7, 7200.0),  # not read: since progress last moved
    ]
    # The plan's snapshot reads the same spans the same way.
    facts = {}
    for tp, row in zip(parts, rows, strict=True):
        facts[tp] = PartitionFacts(
            tp, TopicPartition("dc1.orders", tp.partition), None, None, row.source_end, True,
            progress[tp].next_offset, 7200.0, 7200.0, source_start=0,
        )  # fmt: skip
    counted = count_unreplicated(source, facts, stamp)
    snapshot = _snapshot(source_reachable=True, partitions=counted, groups=(), policy=POLICY)
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    assert [(r.records, r.seconds) for r in plan.rpo] == [(1, 0.5), (5, 0.0), (7, 7200.0)]
    quiet = {tp: f for tp, f in counted.items() if tp.partition < 2}
    plan = make_plan(replace(snapshot, partitions=quiet), load_runbook(Procedure.FAILOVER))
    assert "rpo_seconds" not in {f.code for f in plan.findings}
    # Gone: the span cannot be read - the time since the partition last moved.
    gone = replace(counted[parts[0]], source_end_live=False, unreplicated_visible=None)
    assert partition_rpo(replace(gone, unreplicated_age_s=None)).seconds == 7200.0
