"""Translation invariants, checked against a simulated replication history (hypothesis).

The simulation replays what a worker does: it walks a source partition whose offsets have gaps
(compaction, transaction markers), filters some records, writes the rest to a target log that
has its own gaps (transaction markers), commits progress now and then, and crashes, resuming from
the last committed progress (re-replicating the uncommitted tail).  The target may have been
truncated by retention.  The ground truth is the simulated target log itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync, RunTracker
from drkit.replication.run_map import RunMap, merge_runs
from drkit.translation import (
    NO_MAPPING,
    NO_REPLICA,
    CannotTranslate,
    Flag,
    Method,
    PartitionInputs,
    PartitionMapping,
    TargetBounds,
    Translated,
    rereads,
    translate,
    translate_back,
    translate_group,
)

SRC = TopicPartition("orders", 0)
DST = TopicPartition("dc1.orders", 0)


@dataclass
class History:
    source_offsets: list[int]  # offsets that exist on the source
    log: list[tuple[int, int]]  # target log in order: (dst offset, src offset)
    runs: list[OffsetRun]  # merged
    progress: int  # first source offset not done (committed)
    source_end: int
    target_start: int
    syncs: list[OffsetSync]  # every offset-sync record written, in order

    @property
    def target_end(self) -> int:
        return self.log[-1][0] + 1 if self.log else self.target_start

    def last_copy(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for dst, src in self.log:
            out[src] = dst
        return out


@st.composite
def histories(draw: st.DrawFn, crash_free: bool = False) -> History:
    offsets: list[int] = []
    offset = draw(st.integers(0, 20))
    for _ in range(draw(st.integers(0, 80))):
        offsets.append(offset)
        offset += draw(st.sampled_from([1, 1, 1, 1, 2, 3]))  # compaction / markers
    source_end = offset
    filtered = {o for o in offsets if draw(st.integers(0, 12)) == 0}
    log: list[tuple[int, int]] = []
    syncs: list[OffsetSync] = []
    dst = draw(st.integers(0, 5))
    committed = 0  # index into offsets: first not committed
    index = 0
    caught_up = 0  # highest index reached: below it the worker is re-replicating
    tracker = RunTracker(SRC, DST)
    while index < len(offsets):
        src = offsets[index]
        if src not in filtered:
            log.append((dst, src))
            tracker.observe(src, dst)
            dst += draw(st.sampled_from([1, 1, 1, 2]))
        index += 1
        caught_up = max(caught_up, index)
        # crash_free: no crash (or stop) while re-replicating an uncommitted tail
        settled = not crash_free or index >= caught_up
        action = draw(st.integers(0, 15))
        if action == 0:  # commit progress (and the runs written with it)
            committed = index
            syncs.extend(tracker.drain())
        elif action == 1 and settled:
            # crash: resume at progress (re-replicating the uncommitted tail)
            syncs.extend(tracker.drain())  # runs are written before/with progress
            tracker = RunTracker(SRC, DST)
            index = committed
        if draw(st.integers(0, 40)) == 0 and settled:
            break  # the worker stops here: the rest is unreplicated
    syncs.extend(tracker.drain())
    if draw(st.booleans()):  # graceful stop: everything handled is committed
        committed = index
    progress = offsets[committed] if committed < len(offsets) else source_end
    truncate = draw(st.integers(0, 3)) == 0 and len(log) > 4
    target_start = (
        log[draw(st.integers(0, len(log) // 2))][0] if truncate else (log[0][0] if log else 0)
    )
    log = [(d, s) for d, s in log if d >= target_start]
    runs = [s.run for s in merge_runs(syncs).get(SRC, [])]
    # Retention on the target removed the runs' head too: the mapping still knows it.
    return History(offsets, log, runs, progress, source_end, target_start, syncs)


def mapping_of(history: History) -> PartitionMapping:
    return PartitionMapping(SRC, DST, history.runs, replicated_end=history.progress)


@given(histories(crash_free=True), st.data())
@settings(max_examples=200, deadline=None)
def test_without_crashes_mid_rereplication_translation_is_exact_with_zero_rereads(
    history: History, data: st.DataObject
) -> None:
    if not history.runs:
        return
    source_offset = data.draw(st.sampled_from(sorted(history.last_copy())))
    result = translate(source_offset, mapping_of(history), TargetBounds(0, history.target_end))
    assert isinstance(result, Translated)
    assert result.method is Method.EXACT
    assert result.target_offset == history.last_copy()[source_offset]
    assert result.expected_rereads == 0


@given(histories(), st.data())
@settings(max_examples=400, deadline=None)
def test_translation_invariants(history: History, data: st.DataObject) -> None:
    if not history.runs:
        return
    source_offset = data.draw(st.integers(0, history.source_end + 3))
    bounds = TargetBounds(history.target_start, history.target_end)
    result = translate(source_offset, mapping_of(history), bounds, history.source_end)
    assert isinstance(result, Translated)
    target = result.target_offset
    assert bounds.start <= target <= bounds.end, "outside the target log"
    last = history.last_copy()
    mapped = {
        run.src_start + i: run.dst_start + i for run in history.runs for i in range(run.length)
    }
    # The merged map says where the last copy of every replicated record is (on the full log).
    for src, dst in last.items():
        assert mapped[src] == dst
    # 1. never skip: the last copy of every replicated record >= S is at or after T.
    if Flag.TARGET_TRUNCATED not in result.flags:
        assert all(dst >= target for src, dst in last.items() if src >= source_offset)
    # 2./3. T is the last copy of S unless a later record's only copy precedes it; otherwise
    # the first position not skipping anything, or right after the last replica.
    later = [dst for src, dst in mapped.items() if src >= source_offset]
    expected = min(later) if later else max(d for d, _ in history.log) + 1
    assert target == min(max(expected, bounds.start), bounds.end)
    # Re-reads are reported exactly: distinct already-processed records (src < S) at >= T.
    reread = {s for d, s in history.log if d >= target and s < source_offset}
    assert result.expected_rereads == len(reread)
    if result.method is Method.EXACT:
        assert target == mapped[source_offset]
    elif result.method is Method.MAPPED:
        assert result.flags & {Flag.GAP, Flag.BEFORE_MAPPING, Flag.PAST_REPLICATED, Flag.REORDERED}
        assert (source_offset in mapped) == (Flag.REORDERED in result.flags)
    # 4. RPO: records the group has not read that never reached the target.
    done = max(source_offset, history.progress)
    assert result.unreplicated == max(0, history.source_end - done)


def test_exact_hit_inside_a_run() -> None:
    mapping = PartitionMapping(SRC, DST, [OffsetRun(100, 0, 50)], replicated_end=150)
    result = translate(120, mapping, TargetBounds(0, 50), source_end=160)
    assert isinstance(result, Translated)
    assert (result.target_offset, result.method, result.unreplicated) == (20, Method.EXACT, 10)
    assert result.flags == frozenset()


def test_gap_points_at_the_next_replicated_record() -> None:
    mapping = PartitionMapping(SRC, DST, [OffsetRun(0, 0, 10), OffsetRun(15, 10, 5)])
    result = translate(12, mapping, TargetBounds(0, 15))
    assert isinstance(result, Translated)
    assert (result.target_offset, result.method) == (10, Method.MAPPED)
    assert result.flags == {Flag.GAP}


def test_past_replicated_resumes_after_the_last_replica_and_reports_rpo() -> None:
    mapping = PartitionMapping(SRC, DST, [OffsetRun(0, 0, 10)], replicated_end=10)
    result = translate(25, mapping, TargetBounds(0, 10), source_end=40)
    assert isinstance(result, Translated)
    assert (result.target_offset, result.unreplicated) == (10, 15)
    assert Flag.PAST_REPLICATED in result.flags


def test_truncated_target_is_clamped_and_says_what_became_unreachable() -> None:
    mapping = PartitionMapping(SRC, DST, [OffsetRun(0, 0, 100)])
    result = translate(10, mapping, TargetBounds(30, 100))
    assert isinstance(result, Translated)
    assert (result.target_offset, result.method, result.unreachable) == (30, Method.CLAMPED, 20)


@pytest.mark.parametrize(
    ("mapping", "reason"),
    [
        (PartitionMapping(SRC, DST, []), "no offset mapping"),
        (PartitionMapping(SRC, DST, [OffsetRun(0, 0, 1)], hashed=True), "several target"),
    ],
)
def test_cannot_translate_is_a_distinct_result(mapping: PartitionMapping, reason: str) -> None:
    result = translate(5, mapping, TargetBounds(0, 10))
    assert isinstance(result, CannotTranslate)
    assert reason in result.reason


def test_rereads_counts_processed_records_after_t() -> None:
    runs = [OffsetRun(0, 0, 100), OffsetRun(50, 100, 50)]  # unmerged: two copies of 50..99
    assert rereads(runs, source_offset=70, target_offset=70) == 20  # 50..69 again at 100..119
    assert rereads(runs, source_offset=70, target_offset=120) == 0


@given(histories(), st.data())
@settings(max_examples=300, deadline=None)
def test_trimmed_map_translates_like_the_full_one_and_skips_nothing_the_target_holds(
    history: History, data: st.DataObject
) -> None:
    """Runs with no record left on either cluster are trimmed (tombstoned): translation over
    what remains gives the full map's answer whenever that answer lay inside the target log,
    and otherwise still skips no last copy the target holds."""
    if not history.runs:
        return
    more_retention: bool = data.draw(st.booleans())
    if history.log and more_retention:  # more retention on the target
        cut = data.draw(st.integers(0, len(history.log) - 1))
        history = replace(
            history,
            log=history.log[cut:],
            target_start=max(history.target_start, history.log[cut][0]),
        )
    source_start = data.draw(st.integers(0, history.source_end))
    run_map = RunMap(SRC)
    for sync in history.syncs:
        run_map.add(sync.target, sync.run)
    for target, run in run_map.expired(source_start, {DST: history.target_start}):
        assert run.src_end <= source_start and run.dst_end <= history.target_start
        assert run_map.remove(target, run.src_start, run.dst_start)
    full = mapping_of(history)
    trimmed = PartitionMapping(SRC, DST, run_map.table(), replicated_end=history.progress)
    source_offset = data.draw(st.integers(0, history.source_end + 3))
    bounds = TargetBounds(history.target_start, history.target_end)
    expected = translate(source_offset, full, bounds, history.source_end)
    result = translate(source_offset, trimmed, bounds, history.source_end)
    assert isinstance(expected, Translated) and isinstance(result, Translated)
    assert bounds.start <= result.target_offset <= bounds.end
    assert result.unreplicated == expected.unreplicated
    if Flag.TARGET_TRUNCATED not in expected.flags:
        assert (result.target_offset, result.method, result.expected_rereads) == (
            expected.target_offset,
            expected.method,
            expected.expected_rereads,
        )
    # Never skip: every record >= S whose last copy the target still holds is at or after T.
    for src, dst in history.last_copy().items():
        if src >= source_offset:
            assert dst >= result.target_offset, (src, dst)


def test_trimming_keeps_what_either_cluster_still_holds_and_the_newest_run() -> None:
    run_map = RunMap(SRC)
    for run in (OffsetRun(0, 0, 10), OffsetRun(10, 11, 10), OffsetRun(20, 22, 10)):
        run_map.add(DST, run)  # an exactly-once target: a marker after each commit
    # The source still holds 15..: the second run stays; the target holds 11..: the same.
    assert run_map.expired(15, {DST: 11}) == [(DST, OffsetRun(0, 0, 10))]
    assert run_map.expired(5, {DST: 40}) == []  # the source still holds 5..9
    assert run_map.expired(40, {DST: 5}) == []  # the target still holds 5..9
    # Everything gone from both: all but the newest run (it may still grow).
    assert [run for _, run in run_map.expired(40, {DST: 40})] == [
        OffsetRun(0, 0, 10),
        OffsetRun(10, 11, 10),
    ]
    assert run_map.expired(40, {}) == []  # target log start unknown: keep


def test_a_groups_translation_names_a_missing_replica_before_a_missing_map() -> None:
    """translate_group: the one rule behind the checkpointer, `drkit offsets translate` and
    a failover plan - no number where the inputs allow none, and the same reason everywhere."""
    mapped, no_map, no_replica = SRC, TopicPartition("orders", 1), TopicPartition("orders", 2)
    mapping = PartitionMapping(SRC, DST, [OffsetRun(0, 0, 100)], replicated_end=100)
    results = translate_group(
        {no_replica: 5, no_map: 7, mapped: 40},
        {
            mapped: PartitionInputs(mapping, TargetBounds(0, 100), 100),
            no_map: PartitionInputs(None, TargetBounds(0, 10), None),
            no_replica: PartitionInputs(mapping, None, None),  # a map, but its replica is gone
        },
    )
    assert list(results) == [mapped, no_map, no_replica]  # sorted: a stable document
    assert results[mapped] == translate(40, mapping, TargetBounds(0, 100), 100)
    assert results[no_map] == CannotTranslate(no_map, 7, NO_MAPPING)
    assert results[no_replica] == CannotTranslate(no_replica, 5, NO_REPLICA)


# -- the way back (invariant 8) ----------------------------------------------------------------


@given(
    runs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 4)), max_size=6),
    progress_gap=st.integers(0, 3),
    offset=st.integers(0, 60),
)
def test_the_way_back_skips_nothing_and_reads_nothing_again(
    runs: list[tuple[int, int, int]], progress_gap: int, offset: int
) -> None:
    """Copies in source order with gaps on both sides: a group that read the replica below T
    resumes on the origin where it read every record whose copy lies below T and none other."""
    built_runs, src, dst = [], 0, 0
    for src_gap, dst_gap, length in runs:
        src, dst = src + src_gap, dst + dst_gap
        built_runs.append(OffsetRun(src, dst, length))
        src, dst = src + length, dst + length
    replica, origin = TopicPartition("dc1.orders", 0), TopicPartition("orders", 0)
    mapping = PartitionMapping(origin, replica, built_runs, replicated_end=src + progress_gap)
    result = translate_back(replica, offset, mapping)
    assert isinstance(result, Translated) and result.target == origin
    copies = {r.dst_start + i: r.src_start + i for r in built_runs for i in range(r.length)}
    read = {s for d, s in copies.items() if d < offset}
    unread = {s for d, s in copies.items() if d >= offset}
    assert all(s < result.target_offset for s in read)  # nothing read again
    assert all(s >= result.target_offset for s in unread)  # nothing skipped
    if not unread:  # past every copy: from what the flow had not replicated yet
        assert result.target_offset == src + progress_gap


def test_no_way_back_where_the_copies_are_not_in_source_order() -> None:
    replica, origin = TopicPartition("dc1.orders", 0), TopicPartition("orders", 0)
    crossed = PartitionMapping(origin, replica, [OffsetRun(0, 10, 5), OffsetRun(5, 0, 5)])
    result = translate_back(replica, 3, crossed)
    assert isinstance(result, CannotTranslate) and "source order" in result.reason
    hashed = PartitionMapping(origin, replica, [OffsetRun(0, 0, 5)], hashed=True)
    assert isinstance(translate_back(replica, 3, hashed), CannotTranslate)
