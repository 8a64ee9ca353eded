"""What rejected offset syncs cost a translation (security review 6, M6): a handful of forged
claims over a whole partition must not make the loader walk every run once per claim, nor
every translation scan every doubted range.  Counted in reads of the columns, not timed; the
numbers are in bench/translation.py ("forged full-range claims")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from types import SimpleNamespace
from typing import Any, overload

from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.offsets.mapping_loader import UNBOUNDED, doubt
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.run_map import RunTable
from drkit.translation import Flag, PartitionMapping, TargetBounds, Translated, translate

SOURCE = TopicPartition("orders", 0)
TARGET = TopicPartition("dc1.orders", 0)


class _Counted(Sequence[Any]):
    """A sequence that counts the items read from it."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = list(items)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        self.reads += 1
        return self.items[index]

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            self.reads += 1
            yield item


def _gappy(runs: int) -> list[OffsetRun]:
    """Runs of 9 records with a 1-offset gap after each (a transaction marker's)."""
    return [OffsetRun(i * 10, i * 10, 9) for i in range(runs)]


def test_many_forged_full_range_claims_cost_one_pass_over_the_runs() -> None:
    runs = _gappy(2000)
    table = RunTable.of(runs)
    counted = SimpleNamespace(src=_Counted(table.src), length=_Counted(table.length))
    claims = [(0, 20_000)] * 100 + [(5, 5)] * 100  # full-range values and tombstones
    doubted = doubt(claims, counted)  # type: ignore[arg-type]
    assert len(doubted) == len(runs)  # every gap, and past the last run
    assert doubted[0] == (9, 10) and doubted[-1] == (19_999, 20_000)
    reads = counted.src.reads + counted.length.reads
    assert reads < 4 * len(runs) + 200 * 32, reads  # it was ~200 walks of every run


def test_a_translation_over_many_doubted_ranges_reads_a_few_of_them() -> None:
    runs = _gappy(10_000)
    ranges = _Counted(doubt([(0, 100_000)], RunTable.of(runs)))
    mapping = PartitionMapping(SOURCE, TARGET, runs, 100_000, doubt=ranges)  # type: ignore[arg-type]
    result = translate(99_989, mapping, TargetBounds(0, 100_000))  # a marker near the end
    assert isinstance(result, Translated) and Flag.UNVERIFIED in result.flags
    assert result.target_offset == 99_989  # the end of the verified copy below
    assert ranges.reads <= 64, ranges.reads  # it scanned all 10,000


@st.composite
def _inputs(draw: st.DrawFn) -> tuple[list[OffsetRun], list[tuple[int, int]]]:
    runs: list[OffsetRun] = []
    src, dst = draw(st.integers(0, 5)), 0
    for _ in range(draw(st.integers(0, 6))):
        length = draw(st.integers(1, 8))
        runs.append(OffsetRun(src, dst, length))
        src += length + draw(st.integers(0, 3))
        dst += length + draw(st.integers(0, 3))
    claims = draw(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), max_size=6))
    return runs, [(start, start + length) for start, length in claims]


@settings(max_examples=300, deadline=None)
@given(_inputs())
def test_doubt_is_what_the_claims_reach_and_no_verified_run_covers(
    given_inputs: tuple[list[OffsetRun], list[tuple[int, int]]],
) -> None:
    """The merged single pass against the definition, offset by offset: a claim reaches from
    its start to the next verified run's start, or its claimed end if further (invariant 9)."""
    runs, claims = given_inputs
    starts = [run.src_start for run in runs]
    horizon = 120

    def reach(start: int, end: int) -> int:
        following = [s for s in starts if s > start]
        return max(end, following[0] if following else UNBOUNDED)

    covered = {run.src_start + i for run in runs for i in range(run.length)}
    wanted = {
        o
        for start, end in claims
        for o in range(start, min(reach(start, end), horizon))
        if o not in covered
    }
    doubted = doubt(claims, RunTable.of(runs))
    got = {o for a, b in doubted for o in range(a, min(b, horizon))}
    assert got == wanted
    assert all(a < b for a, b in doubted)
    assert all(b < c for (_a, b), (c, _d) in pairwise(doubted))
