"""The failover plan is a pure function of a snapshot: decision rules, translations, RPO."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.cli.context import INDENT_LIMIT_BYTES, echo_json
from drkit.config.model import FailoverPolicy
from drkit.failover.facts import GroupFacts, PartitionFacts, Snapshot
from drkit.failover.model import PartitionMove, Procedure, Severity, StepName
from drkit.failover.plan import TranslationMemo, group_moves, make_plan
from drkit.failover.render import plan_text
from drkit.failover.runbook import load_runbook
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.translation import PartitionMapping, TargetBounds, Translated, translate

SRC = TopicPartition("orders", 0)
DST = TopicPartition("dc1.orders", 0)


def _partition(replicated_end: int = 100, source_end: int | None = 100) -> PartitionFacts:
    mapping = PartitionMapping(SRC, DST, (OffsetRun(0, 0, replicated_end),), replicated_end)
    return PartitionFacts(
        SRC, DST, mapping, TargetBounds(0, replicated_end), source_end, True, replicated_end, 1.0
    )


def _snapshot(procedure: Procedure = Procedure.FAILOVER, **changes: object) -> Snapshot:
    base = Snapshot(
        procedure=procedure,
        flow="dc1->dc2",
        source="dc1",
        target="dc2",
        reverse_flow="dc2->dc1",
        source_reachable=False,
        target_reachable=True,
        source_error="unreachable",
        partitions={SRC: _partition()},
        groups=(GroupFacts("billing", {SRC: 60}, True, "absent", 0),),
        groups_without_checkpoint=(),
        missing_replicas=(),
        short_replicas=(),
        open_transactions=(),
        pointer=None,
        policy=FailoverPolicy(max_rpo_records=10),
        force=False,
        now_ms=0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def _codes(snapshot: Snapshot) -> dict[str, Severity]:
    plan = make_plan(snapshot, load_runbook(snapshot.procedure))
    return {f.code: f.severity for f in plan.findings}


def test_unplanned_failover_of_a_dead_source_translates_exactly_and_has_no_blocker() -> None:
    plan = make_plan(_snapshot(), load_runbook(Procedure.FAILOVER))
    assert plan.blockers == []
    [group] = plan.groups
    [move] = group.partitions
    assert (move.source_offset, move.target_offset, move.expected_rereads) == (60, 60, 0)
    assert move.method == "checkpoint+exact"
    assert plan.steps[0].name is StepName.STOP_REPLICATION
    assert plan.translation_mode == "checkpoints"


def test_rpo_is_the_records_the_target_never_got() -> None:
    snapshot = _snapshot(partitions={SRC: _partition(replicated_end=80, source_end=100)})
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    assert plan.rpo_records == 20
    assert _codes(snapshot)["rpo_records"] is Severity.WARNING  # 20 > max_rpo_records=10


def test_planned_moves_need_the_source_and_the_replicas() -> None:
    gone = _snapshot(Procedure.SWITCHOVER)
    assert _codes(gone)["source_unreachable"] is Severity.BLOCKER
    missing = _snapshot(Procedure.SWITCHOVER, source_reachable=True, missing_replicas=("x",))
    assert _codes(missing)["replicas_missing"] is Severity.BLOCKER
    assert _codes(_snapshot(missing_replicas=("x",)))["replicas_missing"] is Severity.WARNING


def test_nothing_can_be_promoted_without_the_target_or_twice() -> None:
    assert _codes(_snapshot(target_reachable=False))["target_unreachable"] is Severity.BLOCKER
    assert _codes(_snapshot(pointer="dc2"))["already_active"] is Severity.BLOCKER


def test_active_target_groups_are_skipped_unless_forced() -> None:
    active = (GroupFacts("billing", {SRC: 60}, True, "stable", 2),)
    plan = make_plan(_snapshot(groups=active), load_runbook(Procedure.FAILOVER))
    assert plan.groups[0].blocked
    forced = make_plan(_snapshot(groups=active, force=True), load_runbook(Procedure.FAILOVER))
    assert not forced.groups[0].blocked
    assert "group_forced" in {f.code for f in forced.findings}


def test_a_switchover_can_roll_back_until_the_pointer_moves() -> None:
    plan = make_plan(
        _snapshot(Procedure.SWITCHOVER, source_reachable=True), load_runbook(Procedure.SWITCHOVER)
    )
    rollbacks = {s.name: s.rollback for s in plan.steps}
    assert rollbacks[StepName.FENCE_SOURCE] is StepName.UNFENCE_SOURCE
    assert rollbacks[StepName.STOP_REPLICATION] is StepName.RESTART_REPLICATION
    assert rollbacks[StepName.MOVE_POINTER] is None
    # An unplanned failover never rolls back.
    assert all(
        s.rollback is None for s in make_plan(_snapshot(), load_runbook(Procedure.FAILOVER)).steps
    )


def test_the_switchover_timeout_governs_the_drain() -> None:
    snapshot = _snapshot(
        Procedure.SWITCHOVER, source_reachable=True, policy=FailoverPolicy(switchover_timeout_s=7)
    )
    plan = make_plan(snapshot, load_runbook(Procedure.SWITCHOVER))
    assert {s.name: s.timeout_s for s in plan.steps}[StepName.DRAIN] == 7


def test_rpo_is_unknown_not_zero_when_the_target_does_not_answer() -> None:
    """main printed "RPO: 0 records" with the target unreachable (no partition known)."""
    plan = make_plan(
        _snapshot(target_reachable=False, partitions={}), load_runbook(Procedure.FAILOVER)
    )
    assert plan.rpo_records is None
    assert "RPO: unknown" in plan_text(plan)
    assert plan.to_json()["rpo"]["records"] is None


def test_rpo_seconds_are_the_age_of_the_evidence_never_zero_by_default() -> None:
    """The source is gone and the target has everything the workers last saw: 0 records - but
    the source may have taken writes since that evidence (main said "0 records, 0 s")."""
    caught_up = replace(_partition(), source_end_live=False, evidence_age_s=42.0)
    plan = make_plan(_snapshot(partitions={SRC: caught_up}), load_runbook(Procedure.FAILOVER))
    [rpo] = plan.rpo
    assert rpo.records == 0 and rpo.seconds == 42.0
    unknown = replace(caught_up, evidence_age_s=None)
    plan = make_plan(_snapshot(partitions={SRC: unknown}), load_runbook(Procedure.FAILOVER))
    assert plan.rpo[0].seconds is None
    live = make_plan(
        _snapshot(source_reachable=True, partitions={SRC: _partition()}),
        load_runbook(Procedure.FAILOVER),
    )
    assert live.rpo[0].seconds == 0.0  # measured now


def test_groups_the_checkpoints_do_not_cover_are_listed_with_where_they_start() -> None:
    """Source gone: a group whose checkpoints cover p0 only, and a group the monitor saw with no
    checkpoint at all - main dropped both without a word (auto.offset.reset decided)."""
    p1 = TopicPartition("orders", 1)
    second = replace(_partition(), source=p1, target=TopicPartition("dc1.orders", 1))
    snapshot = _snapshot(
        partitions={SRC: _partition(), p1: second},
        groups_seen=("billing", "audit"),
    )
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    [billing] = plan.groups
    uncovered = [m for m in billing.partitions if m.source_partition == 1]
    assert uncovered[0].target_offset is None and uncovered[0].source_offset is None
    assert "auto.offset.reset (earliest: T=0, latest: T=100)" in uncovered[0].reason
    assert plan.groups_without_checkpoint == ("audit",)
    warning = next(f for f in plan.findings if f.code == "groups_without_checkpoint")
    assert "audit" in warning.message and "auto.offset.reset" in warning.message
    assert "S=?" in plan_text(plan)


def test_share_groups_are_named_as_not_moved_never_dropped_silently() -> None:
    plan = make_plan(
        _snapshot(untranslatable_groups=("queue-workers",)), load_runbook(Procedure.FAILOVER)
    )
    warning = next(f for f in plan.findings if f.code == "untranslatable_groups")
    assert warning.severity is Severity.WARNING
    assert "queue-workers" in warning.message and "share.auto.offset.reset" in warning.message
    assert "queue-workers" in plan_text(plan)


def test_failback_needs_the_pointer_on_the_cluster_it_leaves() -> None:
    snapshot = _snapshot(Procedure.FAILBACK, source_reachable=True, pointer="dc3")
    assert _codes(snapshot)["pointer_elsewhere"] is Severity.BLOCKER
    assert "pointer_elsewhere" not in _codes(replace(snapshot, pointer="dc1"))


def test_rpo_records_are_visible_records_when_counted_else_an_upper_bound_in_offsets() -> None:
    """Transaction markers and aborted records take offsets but are not loss: counted on the
    live source the RPO is exact; from the offsets alone (source gone) it says "at most"."""
    behind = replace(_partition(replicated_end=80, source_end=100), unreplicated_visible=14)
    live = make_plan(
        _snapshot(source_reachable=True, partitions={SRC: behind}), load_runbook(Procedure.FAILOVER)
    )
    assert live.rpo_records == 14 and live.rpo[0].exact
    assert "RPO: 14 records" in plan_text(live)
    gone = replace(_partition(replicated_end=80, source_end=100), source_end_live=False)
    plan = make_plan(_snapshot(partitions={SRC: gone}), load_runbook(Procedure.FAILOVER))
    assert plan.rpo_records == 20 and not plan.rpo[0].exact
    assert "RPO: at most 20 records not on dc2 of what dc1 last showed" in plan_text(plan)


def test_rpo_with_the_source_gone_is_never_an_exact_zero() -> None:
    """Issue 44, finding 2: the target holds everything the workers last saw of a source that
    is gone - main said "RPO: 0 records" (exact) while the source may have taken writes since
    that last sighting; the figure names what it covers and what it cannot."""
    gone = replace(_partition(), source_end_live=False, evidence_age_s=42.0)
    plan = make_plan(_snapshot(partitions={SRC: gone}), load_runbook(Procedure.FAILOVER))
    [rpo] = plan.rpo
    assert rpo.records == 0 and not rpo.exact
    text = plan_text(plan)
    assert "RPO: 0 records not on dc2 of what dc1 last showed" in text
    assert "writes after that are not counted (up to 42s)" in text
    assert "RPO: 0 records not on dc2\n" not in text


def test_plan_json_is_versioned_and_complete() -> None:
    document = make_plan(_snapshot(), load_runbook(Procedure.FAILOVER)).to_json()
    assert document["schema"] == "drkit.failover.plan/v2"
    assert document["groups"][0]["partitions"][0]["target_offset"] == 60
    assert document["rpo"]["records"] == 0
    assert {"blockers", "warnings", "steps", "pointer", "notes"} <= set(document)
    assert document["created_at"].endswith("Z") and "created_at_ms" not in document
    # A run stored before v2 keeps its plan as v1 (epoch milliseconds): still read.
    from drkit.failover.model import Plan

    plan = Plan.from_json(document)
    older = {k: v for k, v in document.items() if k != "created_at"}
    assert Plan.from_json({**older, "created_at_ms": plan.created_at_ms}) == plan


@given(
    committed=st.integers(0, 200),
    replicated=st.integers(0, 200),
    extra=st.integers(0, 50),
)
def test_translations_never_skip_a_replicated_record(
    committed: int, replicated: int, extra: int
) -> None:
    """T never passes the copy of the first replicated record at or after S."""
    snapshot = _snapshot(
        partitions={SRC: _partition(replicated, replicated + extra)},
        groups=(GroupFacts("g", {SRC: committed}, True, "absent", 0),),
    )
    [move] = make_plan(snapshot, load_runbook(Procedure.FAILOVER)).groups[0].partitions
    assert move.target_offset is not None
    assert move.target_offset == min(committed, replicated)
    if committed > replicated:
        assert move.unreplicated is not None


@given(
    procedure=st.sampled_from(list(Procedure)),
    committed=st.integers(0, 200),
    replicated=st.integers(0, 200),
    extra=st.integers(0, 50),
    live=st.booleans(),
    counted=st.one_of(st.none(), st.integers(0, 50)),
    seen=st.lists(st.sampled_from(["audit", "billing", "ledger"]), max_size=3),
)
def test_a_plan_reads_back_from_its_json_as_the_same_value(
    procedure: Procedure,
    committed: int,
    replicated: int,
    extra: int,
    live: bool,
    counted: int | None,
    seen: list[str],
) -> None:
    """A run stores its plan as drkit.failover.plan/v2; what the engine reads back (the run's
    partitions, the pointer it started from) is the plan it made - one definition, no keys."""
    from drkit.failover.model import Plan
    from drkit.failover.results import GroupTranslation, Translation

    partition = replace(
        _partition(replicated, replicated + extra),
        source_end_live=live,
        unreplicated_visible=counted,
        evidence_age_s=3.5,
    )
    snapshot = _snapshot(
        procedure,
        source_reachable=live,
        partitions={SRC: partition},
        groups=(GroupFacts("g", {SRC: committed}, not live, "absent", 0),),
        groups_seen=tuple(seen),
    )
    plan = make_plan(snapshot, load_runbook(procedure))
    assert Plan.from_json(plan.to_json()) == plan
    translation = Translation(
        plan.translation_mode,
        tuple(GroupTranslation(g.group, g.target_state, False, g.partitions) for g in plan.groups),
        plan.groups_without_checkpoint,
        plan.rpo,
    )
    assert Translation.from_detail(translation.to_detail()) == translation


def test_a_group_named_with_group_that_the_flow_has_no_trace_of_is_not_silently_dropped() -> None:
    """Once, ``--group no-such-group`` planned and ran a move of "groups: 0"."""
    asked = ("billing", "biling")
    live = _snapshot(
        Procedure.SWITCHOVER, source_reachable=True, source_error=None, requested_groups=asked
    )
    plan = make_plan(live, load_runbook(Procedure.SWITCHOVER))
    [unknown] = [f for f in plan.findings if f.code == "unknown_groups"]
    assert unknown.severity is Severity.BLOCKER and "--group biling:" in unknown.message
    assert "billing" not in unknown.message.split(":")[0]
    # With the source gone the group may just lack a checkpoint: said, not blocking.
    assert _codes(_snapshot(requested_groups=asked))["unknown_groups"] is Severity.WARNING
    assert "unknown_groups" not in _codes(_snapshot(requested_groups=("billing",)))
    assert "unknown_groups" not in _codes(_snapshot())  # every group of the flow


# -- the plan's partition rows: fast to write and to read back, same document ---------------

_moves = st.builds(
    PartitionMove,
    st.text(max_size=8),
    st.integers(0, 99),
    st.text(max_size=8),
    st.integers(0, 99),
    st.none() | st.integers(0, 2**40),
    st.none() | st.integers(0, 2**40),
    st.sampled_from(["exact", "mm2", "checkpoint"]),
    st.none() | st.integers(0, 10**6),
    st.none() | st.integers(0, 10**6),
    st.text(max_size=20),
)


@given(_moves)
def test_a_partition_move_is_written_as_asdict_and_read_back_equal(move: PartitionMove) -> None:
    document = json.loads(json.dumps(move.to_json()))
    assert document == asdict(move)
    assert PartitionMove.from_json(document) == move


def test_a_partition_move_written_before_a_field_existed_still_reads() -> None:
    old = {"source_topic": "t", "source_partition": 1, "target_topic": "dc1.t",
           "target_partition": 1, "source_offset": 5, "target_offset": "7", "method": "exact",
           "expected_rereads": 0}  # fmt: skip
    move = PartitionMove.from_json(old)
    assert (move.target_offset, move.unreplicated, move.reason) == (7, None, "")


@given(st.builds(PartitionRpo, st.text(max_size=8), st.integers(0, 99),
                 st.none() | st.integers(0), st.none() | st.integers(0),
                 st.none() | st.integers(0), st.none() | st.integers(0),
                 st.none() | st.floats(0, 1e6), st.booleans(), st.booleans()))  # fmt: skip
def test_an_rpo_row_is_written_as_asdict(row: PartitionRpo) -> None:
    assert row.to_json() == asdict(row)


def test_a_large_json_document_is_printed_on_one_line_a_small_one_indented(
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo_json({"a": [1]})
    assert capsys.readouterr().out.count("\n") > 1
    big = {"rows": [{"n": i} for i in range(INDENT_LIMIT_BYTES // 8)]}
    echo_json(big)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == big


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)),
        st.integers(0, 99),
        max_size=12,
    ),
    st.sets(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 5)), max_size=18),
)
def test_uncovered_partitions_are_those_of_the_groups_topics_without_a_checkpoint(
    committed: dict[tuple[str, int], int], replicated: set[tuple[str, int]]
) -> None:
    """The per-topic index answers what a scan of every partition did: each replicated
    partition of a topic the group's checkpoints name, not covered by one, in (topic,
    partition) order; topics the group never named stay out."""
    partitions = {
        TopicPartition(t, p): replace(
            _partition(), source=TopicPartition(t, p), target=TopicPartition(f"dc1.{t}", p)
        )
        for t, p in replicated
    }
    offsets = {TopicPartition(t, p): s for (t, p), s in committed.items()}
    snapshot = _snapshot(
        partitions=partitions, groups=(GroupFacts("billing", offsets, True, "absent", 0),)
    )
    [group] = make_plan(snapshot, load_runbook(Procedure.FAILOVER)).groups
    uncovered = [
        (m.source_topic, m.source_partition)
        for m in group.partitions
        if m.method == "none" and m.source_offset is None
    ]
    named = {t for t, _ in committed}
    assert uncovered == sorted(k for k in replicated if k[0] in named and k not in committed)


_changes = st.sampled_from(["none", "offset", "mapping", "bounds", "source_end", "same_value"])


@given(st.lists(st.tuples(_changes, st.integers(1, 99)), min_size=1, max_size=6))
def test_the_translation_memo_answers_what_translating_again_would(
    changes: list[tuple[str, int]],
) -> None:
    """The run's translation step reuses the plan's moves only for groups whose inputs did not
    change: whatever changes between snapshots (the group's offset, the mapping, the target's
    bounds, the source's end), the memo answers what a fresh translation does - and it does
    reuse a group nothing changed for, even when a mapping is rebuilt equal to the last."""
    memo = TranslationMemo()
    snapshot = _snapshot()
    assert memo.moves(snapshot, snapshot.groups[0]) == group_moves(snapshot, snapshot.groups[0])
    for change, n in changes:
        part, facts = snapshot.partitions[SRC], snapshot.groups[0]
        if change == "offset":
            facts = replace(facts, committed={SRC: n})
        elif change == "mapping":
            part = replace(part, mapping=_partition(replicated_end=100 + n).mapping)
        elif change == "bounds":
            part = replace(part, target_bounds=TargetBounds(n % 7, 100))
        elif change == "source_end":
            part = replace(part, source_end=100 + n)
        elif change == "same_value":
            part = replace(part, mapping=replace(part.mapping))  # type: ignore[type-var]
        snapshot = _snapshot(partitions={SRC: part}, groups=(facts,))
        reused = memo.reused
        assert memo.moves(snapshot, facts) == group_moves(snapshot, facts), change
        if change in ("none", "same_value"):
            assert memo.reused == reused + 1, change


_offsets = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3)), st.integers(0, 120), max_size=8
)


@given(
    st.lists(st.tuples(_offsets, st.booleans()), min_size=1, max_size=6),
    st.sets(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), max_size=12),
    st.sets(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), max_size=4),
)
def test_groups_sharing_offsets_get_the_moves_translating_each_one_would(
    groups: list[tuple[dict[tuple[str, int], int], bool]],
    replicated: set[tuple[str, int]],
    changed: set[tuple[str, int]],
) -> None:
    """The memo translates each (partition, offset) once for all groups, skips the scan for
    uncovered partitions when a group covers all of its topics, and keeps a partition's moves
    into the next snapshot only while its facts are unchanged: every group's moves equal a
    fresh translation of that group, in both snapshots (offsets past the replicated end,
    uncovered partitions and partitions the flow does not replicate included)."""

    def parts(shift: set[tuple[str, int]]) -> dict[TopicPartition, PartitionFacts]:
        out = {}
        for t, p in replicated:
            end = 90 if (t, p) in shift else 100
            out[TopicPartition(t, p)] = replace(
                _partition(replicated_end=end, source_end=110),
                source=TopicPartition(t, p),
                target=TopicPartition(f"dc1.{t}", p),
            )
        return out

    facts = tuple(
        GroupFacts(
            f"g{i}",
            {TopicPartition(t, p): s for (t, p), s in offsets.items()},
            from_checkpoints,
            "absent",
            0,
        )
        for i, (offsets, from_checkpoints) in enumerate(groups)
    )
    moved = tuple(replace(f, committed={tp: s + 1 for tp, s in f.committed.items()}) for f in facts)
    memo = TranslationMemo()
    for snapshot in (
        _snapshot(partitions=parts(set()), groups=facts),
        _snapshot(partitions=parts(set()), groups=facts),  # the same mappings: kept whole
        _snapshot(partitions=parts(changed), groups=facts),
        _snapshot(partitions=parts(changed), groups=moved),  # new offsets, same partitions
        _snapshot(partitions=parts(changed), groups=facts),
    ):
        for group in snapshot.groups:
            assert memo.moves(snapshot, group) == group_moves(snapshot, group), group


def test_moves_and_translations_built_field_by_field_hold_every_field_in_order() -> None:
    """Moves and translations are made without their dataclass's ``__init__``
    (drkit.records.built): a field added to either and not set there would be missing from the
    value - and from its JSON form - instead of failing loudly; the order is the JSON's."""
    (group,) = make_plan(_snapshot(), load_runbook(Procedure.FAILOVER)).groups
    for move in group.partitions:
        assert list(vars(move)) == [f.name for f in fields(PartitionMove)]
        assert move.to_json() == asdict(move)
    part = _partition()
    assert part.mapping is not None and part.target_bounds is not None
    result = translate(50, part.mapping, part.target_bounds, part.source_end)
    assert isinstance(result, Translated)
    assert list(vars(result)) == [f.name for f in fields(Translated)]


def test_a_target_that_is_down_is_named_never_the_source_that_answers() -> None:
    """M3 (issue 45): with dc2 down and dc1 answering, the plan said "source UNREACHABLE" and
    blocked a switchover on "dc1 does not answer" - the snapshot gave up before asking dc1."""
    from drkit.config.model import ClusterConfig, DrkitConfig, FlowConfig
    from drkit.failover import snapshot as snapshots
    from tests.fake_kafka import FakeClusters

    fakes = FakeClusters("dc1", "dc2")
    fakes["dc2"].up = False
    flow = FlowConfig(source="dc1", target="dc2")
    config = DrkitConfig(
        clusters={a: ClusterConfig(bootstrap_servers="127.0.0.1:1") for a in ("dc1", "dc2")},
        flows=(flow,),
    )
    for procedure in (Procedure.FAILOVER, Procedure.SWITCHOVER, Procedure.CUTOVER):
        gathered = snapshots.gather(config, config.flows[0], procedure, None, connect=fakes.connect)
        assert (gathered.source_reachable, gathered.target_reachable) == (True, False)
        plan = make_plan(gathered, load_runbook(procedure))
        assert [b.code for b in plan.blockers] == ["target_unreachable"]
        text = plan_text(plan)
        assert "source reachable, target UNREACHABLE" in text, text
        assert "dc1 does not answer" not in text and "dc1 is unreachable" not in text, text
        assert "dc1 answers: a planned" not in text  # a switchover would be blocked as well


def test_a_source_that_lists_none_of_the_flows_topics_blocks_the_move() -> None:
    """Issue 45 trial: an ACL hid dc1's topics from drkit's principal; the failover fenced no
    topic, moved no group and reported success ("groups: 0", no blocker).  A source that lists
    none of the topics the flow replicated blocks the move; one that lists some warns."""
    hidden = _snapshot(Procedure.FAILOVER, source_reachable=True, partitions={}, groups=(),
                       unlisted_topics=("orders",))  # fmt: skip
    plan = make_plan(hidden, load_runbook(Procedure.FAILOVER))
    [blocker] = [f for f in plan.findings if f.code == "source_topics_unlisted"]
    assert blocker.severity is Severity.BLOCKER
    assert "dc1 lists none of the 1 topic(s) this flow replicated (orders)" in blocker.message
    some = _snapshot(Procedure.SWITCHOVER, source_reachable=True, unlisted_topics=("old",))
    assert _codes(some)["source_topics_unlisted"] is Severity.WARNING


def test_no_verified_offset_sync_blocks_a_planned_move_and_warns_before_a_failover() -> None:
    """A store without the key the workers signed with (replaced, restored without its
    flow_keys): every sync fails verification.  A switchover waits for the key; a failover
    goes on, re-reading from the replicas' start - and says so."""
    switchover = _snapshot(Procedure.SWITCHOVER, source_reachable=True, unverified_syncs=14)
    assert _codes(switchover)["offset_syncs_unverifiable"] is Severity.BLOCKER
    failover = make_plan(_snapshot(unverified_syncs=14), load_runbook(Procedure.FAILOVER))
    [finding] = [f for f in failover.findings if f.code == "offset_syncs_unverifiable"]
    assert finding.severity is Severity.WARNING
    assert "none of the 14 offset syncs on dc2 verifies" in finding.message
    assert "re-reads its replicas from their start" in finding.message
    # Some verify: forgeries (or old syncs) beside real ones - the ordinary warning only.
    codes = _codes(_snapshot(Procedure.SWITCHOVER, unverified_syncs=2, verified_syncs=9))
    assert "offset_syncs_unverifiable" not in codes
    assert codes["unverified_offset_syncs"] is Severity.WARNING
    assert "offset_sync_claims_unchecked" not in codes
    # Claimed copies the plan's reads did not reach: answers lowered and flagged 'unchecked'
    # - a failover goes on with the re-reads; a planned move blocks (review 9, R9-M1).
    codes = _codes(_snapshot(unverified_syncs=5000, verified_syncs=9, unchecked_claims=3000))
    assert codes["offset_sync_claims_unchecked"] is Severity.WARNING
    for procedure in (Procedure.SWITCHOVER, Procedure.CUTOVER, Procedure.FAILBACK):
        planned = _snapshot(
            procedure,
            source_reachable=True,
            unverified_syncs=5000,
            verified_syncs=9,
            unchecked_claims=3000,
        )
        assert _codes(planned)["offset_sync_claims_unchecked"] is Severity.BLOCKER, procedure


def test_a_move_rounded_down_past_unverified_syncs_says_its_re_reads_are_unknown() -> None:
    """No verified run (a store without the workers' key): T is the replica's start, and
    how many records the group reads again is not known - the plan must not print 0."""
    mapping = PartitionMapping(SRC, DST, (), 100, doubt=((0, 100),))
    part = PartitionFacts(SRC, DST, mapping, TargetBounds(0, 100), 100, True, 100, 1.0)
    plan = make_plan(
        _snapshot(partitions={SRC: part}, unverified_syncs=3), load_runbook(Procedure.FAILOVER)
    )
    [move] = plan.groups[0].partitions
    assert (move.source_offset, move.target_offset, move.expected_rereads) == (60, 0, None)
    assert "T=0 (checkpoint+mapped, re-reads unknown (unverified syncs))" in plan_text(plan)
    # The offsets translate row says the same ('-' in its table).
    from drkit.config import load_config_text
    from drkit.offsets.lookup import _row
    from drkit.topology.flow import FlowTopology

    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    result = translate(60, mapping, TargetBounds(0, 100))
    row = _row(FlowTopology.of(config.flows[0]), result, mapping, DST, TargetBounds(0, 100),
               None, None)  # fmt: skip
    assert row is not None and (row.target_offset, row.expected_rereads) == (0, None)
