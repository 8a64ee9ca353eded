"""Loss detection (pure): where a partition resumes and which records it could never copy."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason, detect_loss

TP = TopicPartition("orders", 0)


def test_truncation_past_progress_is_a_loss_of_exactly_the_deleted_records() -> None:
    point = detect_loss(
        "dc1->dc2",
        TP,
        400,
        2000,
        stored_topic_id="A",
        current_topic_id="A",
        last_seen_end=2000,
        now_ms=5,
    )
    assert point.next_offset == 2000
    assert point.loss is not None
    assert (point.loss.first_offset, point.loss.last_offset, point.loss.count) == (400, 1999, 1600)
    assert point.loss.reason is LossReason.TRUNCATED


def test_recreated_topic_loses_the_unreplicated_tail_of_the_old_topic() -> None:
    point = detect_loss(
        "dc1->dc2",
        TP,
        300,
        0,
        stored_topic_id="old",
        current_topic_id="new",
        last_seen_end=500,
        now_ms=5,
    )
    assert point.next_offset == 0
    assert point.loss is not None
    assert (point.loss.first_offset, point.loss.count, point.loss.topic_id) == (300, 200, "old")
    assert point.loss.reason is LossReason.RECREATED


def test_recreated_topic_fully_replicated_before_deletion_lost_nothing() -> None:
    point = detect_loss(
        "dc1->dc2",
        TP,
        500,
        0,
        stored_topic_id="old",
        current_topic_id="new",
        last_seen_end=500,
        now_ms=5,
    )
    assert point.next_offset == 0 and point.loss is None


def test_empty_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty loss range"):
        LossEvent("f", TP, 5, 4, LossReason.TRUNCATED, 0)


@given(
    next_offset=st.integers(0, 10_000),
    log_start=st.integers(0, 10_000),
    same_id=st.booleans(),
    end=st.one_of(st.none(), st.integers(0, 20_000)),
)
def test_resume_point_never_hides_a_hole(
    next_offset: int, log_start: int, same_id: bool, end: int | None
) -> None:
    point = detect_loss(
        "f",
        TP,
        next_offset,
        log_start,
        stored_topic_id="A",
        current_topic_id="A" if same_id else "B",
        last_seen_end=end,
        now_ms=0,
    )
    assert point.next_offset >= log_start  # never before what the source still has
    if same_id:
        # Whatever is skipped between progress and the resume point is recorded as lost.
        skipped = point.next_offset - next_offset
        assert (point.loss.count if point.loss else 0) == max(0, skipped)
    elif point.loss is not None:
        assert point.loss.first_offset == next_offset and end is not None
        assert point.loss.last_offset == end - 1
