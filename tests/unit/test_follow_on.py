"""The follow-on copy (drkit/offsets/follow_on.py) over in-memory replicas: dc2's replica of
dc1's partition read from the plan's start, dc3's replica and dc1->dc3's offset-syncs topic
written.  Each origin offset >= F reaches dc3 once - dc2's duplicates past X too -, those below
F never, each copy with its key, value, timestamp and headers, and the syncs written (signed
with dc1->dc3's key) place every copy: origin offset -> dc3 position.  A copy that fails mid-way
and is run again - its plan computed afresh from dc3 as `drkit flows repoint` does - leaves
every origin offset once, with or without transactions."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import pytest

from drkit.errors import KafkaError
from drkit.offsets import repoint_inputs
from drkit.offsets.follow_on import Copied, chosen, follow_all, follow_on, offset_syncs
from drkit.offsets.provenance_search import SourcePartition, copy_offset
from drkit.offsets.repoint_inputs import RepointReport
from drkit.records import Record, TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.replication.run_map import merge_runs
from drkit.repoint import FollowFrom, Replica, repoint
from drkit.signing import MAC_HEADER, Kind, Signer
from drkit.translation import PartitionMapping, TargetBounds

ORIGIN = TopicPartition("orders", 1)
REPLICA = TopicPartition("dc1.orders", 1)  # on dc2 and on dc3
SYNCS = "drkit-offset-syncs.dc1.internal"
ONWARD_SYNCS = "drkit-offset-syncs.dc2.internal"  # the flow dc2->dc3's, on dc3
ONWARD_PROGRESS = "drkit-progress.dc2.internal"
DC1 = SourcePartition("dc1", ORIGIN)
SIGNER = Signer(bytes(range(32)), Kind.OFFSET_SYNC, "dc1->dc3")


def _copy(position: int, origin: int | None) -> Record:
    """dc2's record at ``position``: a copy of origin offset ``origin`` (None: not a copy of
    dc1's partition - another partition's)."""
    partition = ORIGIN.partition if origin is not None else 0
    src = Provenance("dc1", ORIGIN.topic, partition, origin or 0)
    headers = ((SOURCE_HEADER, src.encode()), ("app", f"h{origin}".encode()))
    return Record(REPLICA.topic, REPLICA.partition, position, f"k{origin}".encode(),
                  f"v{origin}".encode(), headers, 1_000 + (origin or 0))  # fmt: skip


class Log:
    """One partition: records by position; a position holding None is invisible (an aborted
    or open transaction's record, a marker)."""

    def __init__(self, records: Sequence[Record] = ()) -> None:
        self.entries: list[Record | None] = list(records)

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        for position in range(max(offset, 0), len(self.entries)):
            record = self.entries[position]
            if record is not None:
                yield record

    def visible(self) -> list[Record]:
        return [r for r in self.entries if r is not None]


class Standby:
    """dc3: its replica partition and dc1->dc3's offset-syncs topic; transactional or not.
    ``fail_at``: the write call (counted from 1) that raises, after writing its records when
    ``after_writing`` (a kill between a batch's copies and its syncs, without transactions)."""

    def __init__(self, log: Log, transactional: bool = False) -> None:
        self.logs = {REPLICA.topic: log, SYNCS: Log(), ONWARD_SYNCS: Log(), ONWARD_PROGRESS: Log()}
        self.transactional = transactional
        self.open: list[tuple[Log, int, Record]] = []
        self.writes = 0
        self.fail_at: int | None = None

    def begin(self) -> None:
        assert not self.open

    def write(self, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
        self.writes += 1
        log = self.logs[topic]
        assert partition == (REPLICA.partition if topic == REPLICA.topic else 0)
        if self.fail_at == self.writes and not self.transactional:
            raise KafkaError("broker gone")
        positions = []
        for record in records:
            at = len(log.entries)
            placed = Record(topic, partition, at, record.key, record.value, record.headers,
                            record.timestamp_ms)  # fmt: skip
            positions.append(at)
            if self.transactional:
                log.entries.append(None)
                self.open.append((log, at, placed))
            else:
                log.entries.append(placed)
        if self.fail_at == self.writes:
            raise KafkaError("broker gone")
        return positions

    def commit(self) -> None:
        for log, at, record in self.open:
            log.entries[at] = record
        self._end()

    def abort(self) -> None:
        self._end()

    def _end(self) -> None:
        for log in {id(log): log for log, _at, _r in self.open}.values():
            log.entries.append(None)  # the marker
        self.open = []

    def syncs(self) -> list[OffsetSync]:
        out = []
        for record in self.logs[SYNCS].visible():
            assert SIGNER.accepts(record.key, record.value, record.headers), record
            assert record.key is not None and record.value is not None
            out.append(OffsetSync.decode(record.key, record.value))
        return out

    def origins(self) -> list[int]:
        """The origin offsets dc3's replica holds, in position order."""
        found = (copy_offset(r, DC1) for r in self.logs[REPLICA.topic].visible())
        return [o for o in found if o is not None]


def _dc3_holding(origins: Sequence[int]) -> Log:
    return Log([_copy(position, origin) for position, origin in enumerate(origins)])


def _run(plan: FollowFrom, dc2: Log, dc3: Standby, batch: int = 4) -> Copied:
    return follow_on(plan, (REPLICA, REPLICA), "dc1", dc2, dc3, SYNCS, SIGNER, batch=batch)


def _report(
    dc2: Log, dc2_runs: list[OffsetRun], dc3: Standby, dc3_runs: list[OffsetRun]
) -> RepointReport:
    """What `drkit flows repoint` reads and decides: both maps (dc3's with the follow-on's
    syncs merged in), the logs' bounds, and every unmapped position read by provenance."""
    ours = [OffsetSync(ORIGIN, REPLICA, run) for run in dc3_runs]
    merged = merge_runs(ours + dc3.syncs()).get(ORIGIN, [])
    sides = []
    for log, runs in ((dc2, dc2_runs), (dc3.logs[REPLICA.topic], [s.run for s in merged])):
        mapping = PartitionMapping(ORIGIN, REPLICA, runs)
        bare = Replica(REPLICA, TargetBounds(0, len(log.entries)), mapping)
        sides.append(repoint_inputs._scanned(bare, log, DC1))
    answer = repoint(ORIGIN, sides[0], sides[1])
    unsynced = {ORIGIN: repoint_inputs._copies(sides[1])}
    return RepointReport("dc1", "dc2", "dc3", {ORIGIN: answer}, {ORIGIN: (REPLICA, REPLICA)},
                         unsynced, {ORIGIN: (sides[0], sides[1])})  # fmt: skip


def _replanned(
    dc2: Log, dc2_runs: list[OffsetRun], dc3: Standby, dc3_runs: list[OffsetRun]
) -> FollowFrom:
    answer = _report(dc2, dc2_runs, dc3, dc3_runs).results[ORIGIN]
    assert isinstance(answer, FollowFrom), answer
    return answer


def _follow(dc2: Log, dc3: Standby, dc2_runs: list[OffsetRun] | None = None) -> Copied:
    """One run: the plan, then follow_all (syncs for dc3's unsynced copies, the copy)."""
    report = _report(dc2, dc2_runs or DC2_RUNS, dc3, DC3_RUNS)
    return follow_all(report, dc2, dc3, SYNCS, SIGNER, batch=4)[ORIGIN]


def _placed(dc3: Standby) -> dict[int, int]:
    """dc1->dc3's map as the syncs dc3 holds merge: origin offset -> position."""
    ours = [OffsetSync(ORIGIN, REPLICA, run) for run in DC3_RUNS]
    merged = merge_runs(ours + dc3.syncs()).get(ORIGIN, [])
    return {s.run.src_start + i: s.run.dst_start + i for s in merged for i in range(s.run.length)}


# dc2's replica: origin 0..11 at 0..11, then a dc1->dc2 restart re-copied 8..15 at 12..19
# (duplicates of 8..11 past X), then a copy of another partition at 20, then 16..17 at 21..22.
DC2_ORIGINS: list[int | None] = [*range(12), *range(8, 16), None, 16, 17]
DC2_RUNS = [OffsetRun(0, 0, 8), OffsetRun(8, 12, 8), OffsetRun(16, 21, 2)]
DC3_RUNS = [OffsetRun(0, 0, 6)]  # dc3 holds origin 0..5: F = 6


def _dc2() -> Log:
    return Log([_copy(p, o) for p, o in enumerate(DC2_ORIGINS)])


def test_the_rule_copies_each_origin_offset_at_or_past_f_once() -> None:
    records = _dc2().visible()
    picked = chosen(records, DC1, 6, set())
    assert [o for _r, o in picked] == [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
    assert [r.offset for r, _o in picked] == [6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 21, 22]
    assert [o for _r, o in chosen(records, DC1, 6, {6, 7, 12})] == [
        8,
        9,
        10,
        11,
        13,
        14,
        15,
        16,
        17,
    ]


def test_a_record_whose_only_copy_precedes_the_re_copies_of_lower_ones_loses_none() -> None:
    # dc1->dc2 copied origin 0..9 at 0..9 and synced 0..3; crashed; origin 8 was compacted away
    # on dc1 before the re-copy from 4 wrote 4..7 and 9 at 10..14.  8's only copy (at 8) is
    # then the lowest last copy past F = 6: X = 8, and 6 and 7 are re-copied past it.
    dc2 = Log([_copy(p, o) for p, o in enumerate([*range(10), 4, 5, 6, 7, 9])])
    runs = [OffsetRun(0, 0, 4), OffsetRun(4, 10, 4), OffsetRun(9, 14, 1)]
    dc3 = Standby(_dc3_holding(range(6)))
    plan = _replanned(dc2, runs, dc3, DC3_RUNS)
    assert (plan.start, plan.frontier, plan.to_copy) == (8, 6, 4)
    copied = _run(plan, dc2, dc3)
    assert sorted(dc3.origins()) == list(range(10)), dc3.origins()
    assert dc3.origins() == [*range(6), 8, 9, 6, 7]  # in dc2's order
    assert (copied.copied, copied.first, copied.end) == (4, 6, 10)
    assert _replanned(dc2, runs, dc3, DC3_RUNS).to_copy == 0


def test_duplicates_past_x_are_written_once_and_below_f_never() -> None:
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    plan = _replanned(dc2, DC2_RUNS, dc3, DC3_RUNS)
    assert (plan.start, plan.frontier) == (6, 6)
    copied = _run(plan, dc2, dc3)
    assert dc3.origins() == list(range(18))
    assert (copied.copied, copied.first, copied.end, copied.read) == (12, 6, 18, 17)
    # Each copy as it was on dc2: key, value, timestamp, every header (drkit-src dc1's).
    by_origin = {copy_offset(r, DC1): r for r in dc2.visible()}
    for record in dc3.logs[REPLICA.topic].visible()[6:]:
        original = by_origin[copy_offset(record, DC1)]
        assert (record.key, record.value, record.timestamp_ms, record.headers) == (
            original.key, original.value, original.timestamp_ms, original.headers,
        )  # fmt: skip


def test_the_syncs_map_each_copied_origin_offset_to_its_dc3_position() -> None:
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    _run(_replanned(dc2, DC2_RUNS, dc3, DC3_RUNS), dc2, dc3)
    placed = {}
    for sync in dc3.syncs():
        assert (sync.source, sync.target) == (ORIGIN, REPLICA)
        for i in range(sync.run.length):
            placed[sync.run.src_start + i] = sync.run.dst_start + i
    holding = {copy_offset(r, DC1): r.offset for r in dc3.logs[REPLICA.topic].visible()}
    assert placed == {o: p for o, p in holding.items() if o is not None and o >= 6}
    for record in dc3.logs[SYNCS].visible():
        assert record.header(MAC_HEADER) is not None


def test_a_second_run_copies_nothing() -> None:
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    _run(_replanned(dc2, DC2_RUNS, dc3, DC3_RUNS), dc2, dc3)
    again = _replanned(dc2, DC2_RUNS, dc3, DC3_RUNS)
    assert again.frontier == 18 and again.to_copy == 0
    assert _run(again, dc2, dc3).copied == 0
    assert dc3.origins() == list(range(18))


@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_a_copy_failing_mid_way_and_run_again_writes_each_origin_offset_once(
    transactional: bool, fail_at: int
) -> None:
    # Writes alternate copies (odd calls) and their syncs (even calls): failing at an even
    # call without transactions leaves copies no sync places - the next plan reads them, and
    # the next run places them.
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)), transactional)
    dc3.fail_at = fail_at
    with pytest.raises(KafkaError):
        _follow(dc2, dc3)
    dc3.fail_at = None
    again = _follow(dc2, dc3)
    assert dc3.origins() == list(range(18))
    # Batches of 4 records read from X = 6: the first copies 6..9, the second 10 and 11.
    unsynced = {2: 4, 4: 2}.get(fail_at, 0) if not transactional else 0
    assert again.placed == unsynced
    held = {copy_offset(r, DC1): r.offset for r in dc3.logs[REPLICA.topic].visible()}
    assert _placed(dc3) == held  # the map places every copy, the earlier ones included
    final = _follow(dc2, dc3)
    assert (final.frontier, final.copied, final.placed) == (18, 0, 0)


def test_offset_syncs_are_runs_of_consecutive_pairs() -> None:
    runs = [s.run for s in offset_syncs(ORIGIN, REPLICA, [(6, 6), (7, 7), (9, 8), (10, 9)])]
    assert runs == [OffsetRun(6, 6, 2), OffsetRun(9, 8, 2)]
