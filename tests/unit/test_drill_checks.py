"""Drill checks that are pure: judged on the figures alone."""

from __future__ import annotations

from dataclasses import replace

from drkit.drills.checks import (
    accounting_agrees,
    failed_back,
    fencing_held,
    link_health,
    no_write_after_fence,
    open_transactions,
    run_all,
)
from drkit.drills.facts import (
    DrillFacts,
    FenceInForce,
    LinkAtMove,
    ReplicaTransactions,
    WriteAfter,
)
from drkit.drills.report import DrillCheck, GroupOutcome, UnreplicatedPartition

REFUSED = "produce to orders: TOPIC_AUTHORIZATION_FAILED: Broker: Topic authorization failed"

# A planned move that went right: copying 10 behind, fenced at t=100, every write acked before,
# the source refusing for authorization, no transaction open on the replica.
GOOD = DrillFacts(
    source="dc1",
    asked_per_s=300.0,
    link=LinkAtMove(12.0, 910, 900),
    parity=DrillCheck("topic_parity", True, "1 topics: replicas, partitions, configs match"),
    moved=True,
    fence=FenceInForce(100.0, pending=False),
    acked_at=(98.0, 99.5, 100.0),
    write_after=WriteAfter(REFUSED),
    replica_transactions=ReplicaTransactions(),
    failed_back=False,
    exported=None,
)


def _group(skipped: int, reread: int) -> GroupOutcome:
    return GroupOutcome("billing", 100, 80, skipped, reread, 1.0, True)


def test_records_lost_at_the_tail_are_what_verify_calls_the_unreplicated_tail() -> None:
    """Records dc1 acknowledged that never reached dc2 sit above the last replicated offset:
    verify counts them as the unreplicated tail, not as missing (a gap below it).  CI's
    consumers-lagging drill lost 40 records that way and the check read 0 against 40."""
    rpo = [
        UnreplicatedPartition("events", 0, 40, 4000, 0.7),
        UnreplicatedPartition("events", 1, 0, 0, 0.0),
    ]
    totals = {
        "records": 3320,
        "missing": 0,
        "unreplicated_tail": 40,
        "skipped_by_groups": 0,
        "read_again_by_groups": 380,
    }
    check = accounting_agrees(rpo, [_group(0, 380)], {"totals": totals})
    assert check.passed, check.detail
    assert "40 lost" in check.detail


def test_a_gap_verify_finds_that_the_recount_did_not_fails_the_check() -> None:
    totals = {
        "records": 100,
        "missing": 3,
        "unreplicated_tail": 0,
        "skipped_by_groups": 0,
        "read_again_by_groups": 0,
    }
    check = accounting_agrees(
        [UnreplicatedPartition("events", 0, 0, 0, 0.0)], [_group(0, 0)], {"totals": totals}
    )
    assert not check.passed


def test_a_drill_that_went_right_passes_every_check_in_report_order() -> None:
    checks = run_all(GOOD, [], [_group(0, 12)], None)
    assert [c.name for c in checks] == [
        "link_health",
        "topic_parity",
        "fencing_held",
        "no_write_after_fence",
        "open_transactions",
        "nothing_skipped",
    ]
    assert all(c.passed for c in checks), checks


def test_link_health_fails_without_copies_or_too_far_behind() -> None:
    assert link_health(None, 300.0).detail == "no sample counted the copies before the move"
    assert not link_health(LinkAtMove(5.0, 40, 0), 300.0).passed
    edge = link_health(LinkAtMove(5.0, 2400, 900), 300.0)  # 1500 behind: 5.0 s of writes
    assert edge.passed and "1500 behind (5.0s of writes) at 5.0s" in edge.detail
    assert not link_health(LinkAtMove(5.0, 2401, 900), 300.0).passed


def test_fencing_held_only_for_a_refusal_by_authorization() -> None:
    assert fencing_held(GOOD).passed
    accepted = fencing_held(replace(GOOD, write_after=WriteAfter(None)))
    assert not accepted.passed and accepted.detail == "dc1 accepted a write"
    timed_out = fencing_held(replace(GOOD, write_after=WriteAfter("_MSG_TIMED_OUT")))
    assert not timed_out.passed  # unreachable is not fenced
    assert fencing_held(replace(GOOD, moved=False)).detail == "no failover run"


def test_a_write_acknowledged_after_the_fence_is_caught_one_at_the_fence_is_not() -> None:
    assert no_write_after_fence(GOOD).passed
    late = no_write_after_fence(replace(GOOD, acked_at=(*GOOD.acked_at, 100.001)))
    assert not late.passed and late.detail.startswith("1 writes acknowledged after (fenced")
    pending = no_write_after_fence(replace(GOOD, fence=FenceInForce(99.0, pending=True)))
    assert not pending.passed and "cut off by the fault" in pending.detail
    assert not no_write_after_fence(replace(GOOD, fence=None)).passed


def test_open_transactions_fail_when_open_or_unreadable() -> None:
    assert open_transactions(GOOD).detail == "none open on the replica"
    opened = open_transactions(replace(GOOD, replica_transactions=ReplicaTransactions(("r-1",))))
    assert not opened.passed and opened.detail == "r-1"
    unread = replace(GOOD, replica_transactions=ReplicaTransactions(error="timed out"))
    assert not open_transactions(unread).passed


def test_after_a_failback_the_tail_exported_must_equal_what_was_lost_and_writes_resume() -> None:
    back = replace(GOOD, failed_back=True, exported=40, write_after=WriteAfter(None))
    lost = [
        UnreplicatedPartition("orders", 0, 25, 0, 0.1),
        UnreplicatedPartition("orders", 1, 15, 0, 0.1),
    ]
    assert failed_back(back, lost).passed
    assert [c.name for c in run_all(back, lost, [], None)][2] == "failed_back"
    assert not failed_back(replace(back, exported=39), lost).passed
    assert not failed_back(replace(back, exported=None), []).passed  # no tail recorded: -1
    assert not failed_back(replace(back, write_after=WriteAfter(REFUSED)), lost).passed
