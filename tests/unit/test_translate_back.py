"""The way back after an unplanned move (drkit.translation.translate_back, invariant 8).

The flow stopped with its origin ahead: past the copies its map places, the replica may hold
copies it never recorded (a worker killed between the copy and the offset sync), and the
origin holds a divergent tail a group may have read there before the move.  Found by
tests/integration/test_failback_groups.py: the failback sent such groups back to the failover
point and they read again what they had read (issue 48, item 4).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.translation import PartitionMapping, Translated, translate_back

REPLICA, ORIGIN = TopicPartition("dc1.orders", 0), TopicPartition("orders", 0)


def _back(offset: int, mapping: PartitionMapping, **facts: object) -> int:
    result = translate_back(REPLICA, offset, mapping, **facts)  # type: ignore[arg-type]
    assert isinstance(result, Translated) and result.target == ORIGIN
    return result.target_offset


def test_a_copy_past_the_map_that_the_group_read_is_not_read_again() -> None:
    # Records 0..199 copied and mapped; record 200's copy at 200, never recorded.
    mapping = PartitionMapping(ORIGIN, REPLICA, [OffsetRun(0, 0, 200)], replicated_end=200)
    assert _back(201, mapping, held={200: 200}) == 201
    assert _back(200, mapping, held={200: 200}) == 200  # not read yet
    assert _back(201, mapping) == 200  # what the map alone says: one read again


def test_a_group_that_read_into_the_divergent_tail_on_the_origin_resumes_past_it() -> None:
    mapping = PartitionMapping(ORIGIN, REPLICA, [OffsetRun(0, 0, 200)], replicated_end=200)
    assert _back(200, mapping, origin_committed=215) == 215
    # Inside the copies the group's old position on the origin says nothing (a rewind, a
    # checkpoint behind): the replica's position is the answer.
    assert _back(150, mapping, origin_committed=180) == 150
    assert _back(200, mapping, origin_committed=120) == 200


@given(
    copied=st.integers(1, 30),
    held=st.lists(st.integers(0, 5), max_size=8),
    read_past=st.integers(0, 10),
    tail=st.integers(0, 10),
    read_on_origin=st.integers(0, 50),
)
def test_the_unplanned_way_back_skips_nothing_and_reads_nothing_again(
    copied: int, held: list[int], read_past: int, tail: int, read_on_origin: int
) -> None:
    """A history: records [0, copied) copied and mapped; then a worker copied some records past
    the progress without recording them, restarting from the progress after each crash (each
    entry of ``held``: a run of copies from ``copied``); the origin took ``tail`` records more.
    The group read the replica below T (at most every copy) and, on the origin before the
    move, up to its commit there (past the copies, inside the tail, or not at all).  It
    resumes where every record it read lies below and every other at or above."""
    mapping = PartitionMapping(ORIGIN, REPLICA, [OffsetRun(0, 0, copied)], replicated_end=copied)
    past: list[int] = []  # source offsets of the unrecorded copies, in replica order
    for run in held:
        past += range(copied, copied + run)
    end = copied + max([0, *held]) + tail  # the origin's end (every copy is of a record there)
    at = min(copied + read_past, copied + len(past))
    committed = min(read_on_origin, end) if read_on_origin else None  # its offset there
    positions = {copied + i: source for i, source in enumerate(past)}
    back = _back(at, mapping, held=positions, origin_committed=committed)
    read = set(range(min(at, copied))) | {s for p, s in positions.items() if p < at}
    read |= set(range(committed)) if committed is not None else set()
    unread = set(range(end)) - read
    assert all(s < back for s in read), (back, sorted(read))  # nothing read again
    assert all(s >= back for s in unread), (back, sorted(unread))  # nothing skipped
