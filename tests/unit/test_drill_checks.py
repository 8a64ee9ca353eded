"""Drill checks that are pure: judged on the figures alone."""

from __future__ import annotations

from drkit.drills.checks import accounting_agrees
from drkit.drills.report import GroupOutcome, PartitionLoss


def _group(skipped: int, reread: int) -> GroupOutcome:
    return GroupOutcome("billing", 100, 80, skipped, reread, 1.0, True)


def test_records_lost_at_the_tail_are_what_verify_calls_the_unreplicated_tail() -> None:
    """Records dc1 acknowledged that never reached dc2 sit above the last replicated offset:
    verify counts them as the unreplicated tail, not as missing (a gap below it).  CI's
    consumers-lagging drill lost 40 records that way and the check read 0 against 40."""
    rpo = [PartitionLoss("events", 0, 40, 4000, 0.7), PartitionLoss("events", 1, 0, 0, 0.0)]
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
        [PartitionLoss("events", 0, 0, 0, 0.0)], [_group(0, 0)], {"totals": totals}
    )
    assert not check.passed
