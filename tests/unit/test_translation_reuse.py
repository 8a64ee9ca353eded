"""Incremental checkpoint rounds: an answer carried over from the previous round is always the
answer a fresh translation gives (drkit.translation.carry_over / stable_below).

The previous round saw the offset syncs written up to some point of a random replication
history (restarts, re-replication, gaps, truncation - tests/unit/test_translation.py's
histories); the next round sees them all, with other target bounds and another source end.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.run_map import RunTable, merge_runs
from drkit.translation import (
    EVERYWHERE,
    Method,
    PartitionInputs,
    PartitionMapping,
    TargetBounds,
    Translated,
    carry_over,
    stable_below,
    translate,
    translate_group,
)
from tests.unit.test_translation import DST, SRC, History, histories


def _mapping(runs: list[OffsetRun], progress: int) -> PartitionMapping:
    return PartitionMapping(SRC, DST, runs, replicated_end=progress)


def _bounds(data: st.DataObject, end: int) -> TargetBounds:
    start = data.draw(st.integers(0, max(0, end)))
    return TargetBounds(start, data.draw(st.integers(start, end + 3)))


@given(histories(), st.data())
@settings(max_examples=300, deadline=None)
def test_an_answer_carried_over_equals_a_fresh_translation(
    history: History, data: st.DataObject
) -> None:
    seen = data.draw(st.integers(0, len(history.syncs)))
    older = _mapping([s.run for s in merge_runs(history.syncs[:seen]).get(SRC, [])], 0)
    newer = _mapping(history.runs, history.progress)
    source_offset = data.draw(st.integers(0, history.source_end + 2))
    end = max(older.dst_end if older.runs else 0, newer.dst_end if newer.runs else 0)
    before = translate(source_offset, older, _bounds(data, end), data.draw(st.integers(0, 9)))
    bounds, source_end = _bounds(data, end), history.source_end
    kept = carry_over(before, source_offset, newer, bounds, source_end, stable_below(older, newer))
    if kept is not None:
        assert kept == translate(source_offset, newer, bounds, source_end)


@st.composite
def growing_tables(draw: st.DrawFn) -> tuple[list[OffsetRun], list[OffsetRun]]:
    """Runs as a replicator copying on without a restart writes them (gaps on both sides from
    compaction, markers, filtered records), and the same runs a round later: the last one
    longer, new ones after it."""
    runs: list[OffsetRun] = []
    src, dst = draw(st.integers(0, 20)), draw(st.integers(0, 20))
    for _ in range(draw(st.integers(1, 6)) + draw(st.integers(0, 4))):
        length = draw(st.integers(1, 12))
        runs.append(OffsetRun(src, dst, length))
        src += length + draw(st.integers(1, 3))
        dst += length + draw(st.integers(0, 2))
    split = draw(st.integers(1, len(runs)))
    older = runs[:split]
    last = older[-1]
    older[-1] = OffsetRun(last.src_start, last.dst_start, draw(st.integers(1, last.length)))
    return older, runs


@given(growing_tables(), st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_while_the_replicator_copies_on_groups_that_did_not_move_are_not_translated_again(
    tables: tuple[list[OffsetRun], list[OffsetRun]], more: int
) -> None:
    """Without a restart the table only grows at its end: every group committed inside what the
    previous round's runs mapped keeps its answer (with its RPO counted again)."""
    older_runs, newer_runs = tables
    if more:  # the open run grew too
        tail = newer_runs[-1]
        newer_runs = [
            *newer_runs[:-1],
            OffsetRun(tail.src_start, tail.dst_start, tail.length + more),
        ]
    older = _mapping(older_runs, older_runs[-1].src_end)
    newer = _mapping(newer_runs, newer_runs[-1].src_end)
    stable = stable_below(older, newer)
    assert stable == older.table.src_end
    whole = TargetBounds(0, newer.dst_end)
    source_end = newer_runs[-1].src_end + 5
    for source_offset in range(0, older.table.src_end):
        before = translate(source_offset, older, TargetBounds(0, older.dst_end))
        kept = carry_over(before, source_offset, newer, whole, source_end, stable)
        assert kept is not None, (source_offset, before)
        assert kept == translate(source_offset, newer, whole, source_end)


def test_a_table_grown_at_its_end_extends_it_and_a_rewritten_one_does_not() -> None:
    base = RunTable.of([OffsetRun(0, 0, 10), OffsetRun(12, 10, 5)])
    assert RunTable.of([OffsetRun(0, 0, 10), OffsetRun(12, 10, 8)]).extends(base)
    assert RunTable.of([OffsetRun(0, 0, 10), OffsetRun(12, 10, 5), OffsetRun(20, 15, 3)]).extends(
        base
    )
    # A restart re-replicated the tail: a later record's copy lands before older copies end.
    assert not RunTable.of(
        [OffsetRun(0, 0, 10), OffsetRun(12, 10, 5), OffsetRun(20, 12, 3)]
    ).extends(base)
    assert not RunTable.of([OffsetRun(0, 0, 10), OffsetRun(12, 10, 4)]).extends(base)  # shorter
    assert not RunTable.of([OffsetRun(2, 2, 8), OffsetRun(12, 10, 5)]).extends(base)  # trimmed
    assert not base.extends(RunTable.of([]))


def test_a_clamped_or_moved_answer_is_translated_again() -> None:
    mapping = _mapping([OffsetRun(0, 0, 100)], 100)
    exact = translate(40, mapping, TargetBounds(0, 100), 100)
    assert isinstance(exact, Translated) and exact.method is Method.EXACT
    assert carry_over(exact, 40, mapping, TargetBounds(0, 100), 120, EVERYWHERE) == Translated(
        SRC, DST, 40, 40, Method.EXACT, unreplicated=20
    )
    assert carry_over(exact, 41, mapping, TargetBounds(0, 100), 100, EVERYWHERE) is None
    assert carry_over(exact, 40, mapping, TargetBounds(50, 100), 100, EVERYWHERE) is None
    assert carry_over(exact, 40, mapping, TargetBounds(0, 100), 100, 40) is None
    clamped = translate(40, mapping, TargetBounds(50, 100), 100)
    assert carry_over(clamped, 40, mapping, TargetBounds(50, 100), 100, EVERYWHERE) is None


def test_a_group_translated_again_gets_translate_groups_answers_and_counts_the_fresh_ones() -> None:
    older = _mapping([OffsetRun(0, 0, 100)], 100)
    newer = _mapping([OffsetRun(0, 0, 150)], 150)
    gone = TopicPartition("orders", 7)  # its replica is not on the target
    previous = translate_group({SRC: 30}, {SRC: PartitionInputs(older, TargetBounds(0, 100), 100)})
    inputs = {SRC: PartitionInputs(newer, TargetBounds(0, 150), 160, stable_below(older, newer))}
    for committed, fresh in (({SRC: 30}, 0), ({SRC: 120}, 1), ({SRC: 30, gone: 5}, 1)):
        again = translate_group(committed, inputs, previous)
        translated = again.fresh
        assert again == translate_group(
            committed,
            {
                SRC: PartitionInputs(newer, TargetBounds(0, 150), 160),
                gone: PartitionInputs(newer, None, None),
            },
        )
        assert translated == fresh
