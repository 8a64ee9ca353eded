"""Dense offset syncs: the run tracker and the merge, checked against a simulated target log."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.kafka.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync, RunTracker, merge_runs

SRC = TopicPartition("orders", 3)
DST = TopicPartition("dc1.orders", 3)


def test_steady_stream_is_one_run() -> None:
    tracker = RunTracker(SRC, DST)
    for i in range(1000):
        tracker.observe(100 + i, i)
    (sync,) = tracker.drain()
    assert sync.run == OffsetRun(100, 0, 1000)


def test_gap_on_either_side_starts_a_new_run() -> None:
    tracker = RunTracker(SRC, DST)
    for src, dst in [(0, 0), (1, 1), (5, 2), (6, 3), (7, 5)]:
        tracker.observe(src, dst)
    assert [s.run for s in tracker.drain()] == [
        OffsetRun(0, 0, 2),
        OffsetRun(5, 2, 2),
        OffsetRun(7, 5, 1),
    ]


def test_drain_reports_the_open_run_again_as_it_grows() -> None:
    tracker = RunTracker(SRC, DST)
    tracker.observe(0, 0)
    assert [s.run for s in tracker.drain()] == [OffsetRun(0, 0, 1)]
    tracker.observe(1, 1)
    assert [s.run for s in tracker.drain()] == [OffsetRun(0, 0, 2)]


def test_record_format_round_trips() -> None:
    sync = OffsetSync(SRC, DST, OffsetRun(2**40, 7, 12345))
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


def test_restart_copy_overrides_the_source_range_it_repeats() -> None:
    first = OffsetSync(SRC, DST, OffsetRun(0, 0, 100))
    second = OffsetSync(SRC, DST, OffsetRun(50, 100, 80))  # re-replicated from 50
    merged = merge_runs([first, second])[SRC]
    assert [s.run for s in merged] == [OffsetRun(0, 0, 50), OffsetRun(50, 100, 80)]


def test_shorter_version_of_a_run_is_superseded() -> None:
    syncs = [OffsetSync(SRC, DST, OffsetRun(0, 0, n)) for n in (1, 5, 3)]
    assert [s.run for s in merge_runs(syncs)[SRC]] == [OffsetRun(0, 0, 5)]


@st.composite
def replication_history(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    """(src, dst) writes of a worker that crashes and resumes from an earlier source offset.

    The source has gaps (compaction / markers); the target gets a gap after some writes
    (transaction markers).  Returns the writes in target order and the source end.
    """
    src_offsets: list[int] = []
    offset = draw(st.integers(0, 50))
    for _ in range(draw(st.integers(1, 120))):
        src_offsets.append(offset)
        offset += draw(st.sampled_from([1, 1, 1, 2, 5]))
    writes: list[tuple[int, int]] = []
    dst = 0
    index = 0
    while index < len(src_offsets):
        writes.append((src_offsets[index], dst))
        dst += draw(st.sampled_from([1, 1, 1, 2]))
        index += 1
        if draw(st.integers(0, 30)) == 0 and index > 1:
            index = draw(st.integers(0, index - 1))  # crash: resume from stored progress
    return writes, offset


@given(replication_history())
@settings(max_examples=300, deadline=None)
def test_merged_runs_map_every_source_offset_to_its_last_target_copy(
    history: tuple[list[tuple[int, int]], int],
) -> None:
    writes, _ = history
    tracker = RunTracker(SRC, DST)
    syncs: list[OffsetSync] = []
    previous_src = None
    for src, dst in writes:
        if previous_src is not None and src <= previous_src:
            tracker.restart()
        tracker.observe(src, dst)
        previous_src = src
        syncs.extend(tracker.drain())  # drained often, as the worker does at each commit
    last_copy: dict[int, int] = {}
    for src, dst in writes:
        last_copy[src] = dst  # target order: later writes come later in the log
    merged = merge_runs(syncs)[SRC]
    mapped: dict[int, int] = {}
    for sync in merged:
        for i in range(sync.run.length):
            assert sync.run.src_start + i not in mapped, "merged runs overlap"
            mapped[sync.run.src_start + i] = sync.run.dst_start + i
    # Runs may also map offsets of records that never existed (source gaps) only if they lie
    # inside a run, which cannot happen: a gap always starts a new run.
    assert mapped == last_copy
    assert all(a.run.src_end <= b.run.src_start for a, b in itertools.pairwise(merged))
