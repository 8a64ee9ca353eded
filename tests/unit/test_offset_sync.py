"""Dense offset syncs: the run tracker and the merge, checked against a simulated target log."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync, RunTracker
from drkit.replication.run_map import RunMap, RunTable, merge_runs
from drkit.translation import Method, PartitionMapping, TargetBounds, Translated, translate

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


def _reference(originals: list[OffsetSync]) -> dict[int, int]:
    """Per source offset, the target offset of its copy last in target order (the definition)."""
    newest: dict[tuple[int, int], OffsetSync] = {}
    for sync in originals:  # one record key each, longest version wins
        key = (sync.target.partition, sync.run.dst_start)
        if key not in newest or sync.run.length > newest[key].run.length:
            newest[key] = sync
    best: dict[int, tuple[tuple[int, int], int]] = {}
    for sync in newest.values():
        for i in range(sync.run.length):
            position = (sync.target.partition, sync.run.dst_start + i)
            src = sync.run.src_start + i
            if src not in best or position > best[src][0]:
                best[src] = (position, position[1])
    return {src: dst for src, (_, dst) in best.items()}


def _mapped(table: Sequence[OffsetRun]) -> dict[int, int]:
    out: dict[int, int] = {}
    for run in table:
        for i in range(run.length):
            assert run.src_start + i not in out, "merged runs overlap"
            out[run.src_start + i] = run.dst_start + i
    return out


@given(replication_history(), st.data())
@settings(max_examples=200, deadline=None)
def test_run_map_merges_incrementally_in_any_arrival_order_and_after_tombstones(
    history: tuple[list[tuple[int, int]], int], data: st.DataObject
) -> None:
    """The incremental merge equals the definition, whatever order records arrive in (late
    records, compaction dropping old versions) and whichever runs are tombstoned."""
    writes, _ = history
    tracker = RunTracker(SRC, DST)
    records: list[OffsetSync] = []
    previous_src = None
    for src, dst in writes:
        if previous_src is not None and src <= previous_src:
            tracker.restart()
        tracker.observe(src, dst)
        previous_src = src
        if data.draw(st.integers(0, 3)) == 0:
            records.extend(tracker.drain())
    records.extend(tracker.drain())
    if data.draw(st.booleans()):  # compaction: only the last version of each key survives
        last = {sync.key(): index for index, sync in enumerate(records)}
        records = [sync for index, sync in enumerate(records) if last[sync.key()] == index]
    if data.draw(st.booleans()):  # some records arrive late
        records = data.draw(st.permutations(records))
    run_map = RunMap(SRC)
    tables = []
    for index, sync in enumerate(records):
        run_map.add(sync.target, sync.run)
        if data.draw(st.integers(0, 9)) == 0:
            tables.append((run_map.table(), _reference(records[: index + 1])))
    finals = {(s.run.src_start, s.run.dst_start): s for s in records}
    gone = data.draw(st.lists(st.sampled_from(sorted(finals)), unique=True, max_size=5))
    for src_start, dst_start in gone:
        assert run_map.remove(DST, src_start, dst_start)
        assert not run_map.remove(DST, src_start, dst_start)
    kept = [s for s in records if (s.run.src_start, s.run.dst_start) not in gone]
    assert _mapped(run_map.table()) == _reference(kept)
    for table, _ in [*tables, (run_map.table(), None)]:  # the order the map claims is right
        assert table.in_target_order == RunTable(table.src, table.dst, table.length).in_target_order
    assert len(run_map) == len({(s.run.src_start, s.run.dst_start) for s in kept})
    for table, expected in tables:  # earlier snapshots never change afterwards
        assert _mapped(table) == expected


def test_unchanged_map_returns_the_same_snapshot_and_a_new_one_after_a_change() -> None:
    run_map = RunMap(SRC)
    run_map.add(DST, OffsetRun(0, 0, 10))
    first = run_map.table()
    assert run_map.table() is first
    version = run_map.version
    assert not run_map.add(DST, OffsetRun(0, 0, 5))  # an older, shorter version: no change
    assert run_map.version == version and run_map.table() is first
    run_map.add(DST, OffsetRun(0, 0, 12))
    assert run_map.table() is not first and list(run_map.table()) == [OffsetRun(0, 0, 12)]
    assert list(first) == [OffsetRun(0, 0, 10)]


@pytest.mark.parametrize("marker_on", ["target", "source"])
def test_runs_stay_bounded_by_retention_not_by_uptime(marker_on: str) -> None:
    """An exactly-once target (a marker after every commit) or a transactional source (a marker
    after every transaction) starts a run per commit.  With the periodic trim the map holds the
    runs of the retention window, not one per commit since the flow started - and translation
    inside the window stays exact."""
    per_commit, commits, retention, trim_every = 100, 3000, 20_000, 25
    tracker, run_map = RunTracker(SRC, DST), RunMap(SRC)
    src = dst = 0
    peak = 0
    for commit in range(commits):
        for _ in range(per_commit):
            tracker.observe(src, dst)
            src, dst = src + 1, dst + 1
        if marker_on == "target":
            dst += 1
        else:
            src += 1
        for sync in tracker.drain():
            run_map.add(sync.target, sync.run)
        if commit % trim_every == 0:  # the checkpointer's trim step, both logs at retention
            expired = run_map.expired(max(0, src - retention), {DST: max(0, dst - retention)})
            for target, run in expired:
                run_map.remove(target, run.src_start, run.dst_start)
        peak = max(peak, len(run_map))
    # The window's runs, the runs of one trim interval, and the run straddling the log start.
    bound = retention // per_commit + trim_every + 1
    assert peak <= bound < commits
    table = run_map.table()
    mapping = PartitionMapping(SRC, DST, table, replicated_end=src)
    for source_offset in range(src - retention // 2, src, 997):  # held by both clusters
        result = translate(source_offset, mapping, TargetBounds(dst - retention, dst))
        assert isinstance(result, Translated)
        if marker_on == "target":  # every source offset is a record: exact, no re-reads
            commit_no, within = divmod(source_offset, per_commit)
            assert result.target_offset == commit_no * (per_commit + 1) + within
            assert result.method is Method.EXACT and result.expected_rereads == 0
