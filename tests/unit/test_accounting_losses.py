"""Records lost before replication, as verify counts them (pure)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from drkit.accounting.losses import LostBy, OffsetRange, lost_before_replication, merge
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason

TP = TopicPartition("orders", 0)


def event(first: int, last: int, tp: TopicPartition = TP, **kw: object) -> LossEvent:
    return LossEvent("dc1->dc2", tp, first, last, LossReason.TRUNCATED, 0, **kw)  # type: ignore[arg-type]


def test_progress_below_the_log_start_is_a_loss_nobody_recorded() -> None:
    (loss,) = lost_before_replication([], {TP: 400}, {TP: 2000})
    assert (loss.source, loss.records, loss.recorded, loss.unrecorded) == (TP, 1600, 0, 1600)
    assert loss.ranges == (OffsetRange(400, 1999),)
    assert loss.reasons == (LostBy.UNRECORDED,)
    assert loss.as_record()["ranges"] == [{"from_offset": 400, "to_offset": 1999, "records": 1600}]


def test_a_recorded_loss_still_counts_after_replication_moved_past_it() -> None:
    (loss,) = lost_before_replication([event(400, 1999)], {TP: 2400}, {TP: 2000})
    assert (loss.records, loss.recorded, loss.unrecorded) == (1600, 1600, 0)
    assert loss.reasons == (LostBy.TRUNCATED,)


def test_an_event_and_the_same_gap_seen_by_verify_count_once() -> None:
    (loss,) = lost_before_replication([event(400, 1999)], {TP: 400}, {TP: 2000})
    assert (loss.records, loss.recorded, loss.unrecorded) == (1600, 1600, 0)


def test_verify_counts_only_what_the_event_does_not_cover() -> None:
    # The worker recorded 400..999 earlier; since then retention removed up to 2999.
    (loss,) = lost_before_replication([event(400, 999)], {TP: 400}, {TP: 3000})
    assert (loss.records, loss.recorded, loss.unrecorded) == (2600, 600, 2000)
    assert loss.reasons == (LostBy.TRUNCATED, LostBy.UNRECORDED)


def test_no_progress_or_progress_at_the_log_start_is_no_loss() -> None:
    other = TopicPartition("orders", 1)
    assert lost_before_replication([], {TP: 2000}, {TP: 2000, other: 50}) == []


def test_offsets_of_an_earlier_incarnation_of_the_topic_are_other_records() -> None:
    old = LossEvent("dc1->dc2", TP, 100, 499, LossReason.RECREATED, 0, topic_id="old")
    (loss,) = lost_before_replication(
        [old, event(100, 199, topic_id="new")], {TP: 100}, {TP: 200}, {"orders": "new"}
    )
    assert (loss.records, loss.recorded, loss.unrecorded) == (500, 500, 0)
    assert loss.reasons == (LostBy.RECREATED, LostBy.TRUNCATED)


_ranges = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: OffsetRange(t[0], t[0] + t[1])),
    max_size=6,
)


@given(_ranges)
def test_merge_keeps_exactly_the_union(ranges: list[OffsetRange]) -> None:
    merged = merge(ranges)
    covered = {o for r in ranges for o in range(r.first, r.last + 1)}
    assert {o for r in merged for o in range(r.first, r.last + 1)} == covered
    assert all(a.last + 1 < b.first for a, b in itertools.pairwise(merged))


@given(events=_ranges, progress=st.integers(0, 80), log_start=st.integers(0, 80))
def test_each_lost_offset_counts_once_and_recorded_plus_unrecorded_is_the_total(
    events: list[OffsetRange], progress: int, log_start: int
) -> None:
    found = lost_before_replication(
        [event(r.first, r.last) for r in events], {TP: progress}, {TP: log_start}
    )
    by_events = {o for r in events for o in range(r.first, r.last + 1)}
    gap = set(range(progress, log_start))
    if not by_events | gap:
        assert found == []
        return
    (loss,) = found
    assert loss.records == len(by_events | gap) == loss.recorded + loss.unrecorded
    assert loss.recorded == len(by_events)
