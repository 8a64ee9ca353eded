"""The provenance reads of drkit/offsets/repoint_inputs.py over an in-memory partition: every
position no map run places is read, copies of the origin partition found by their drkit-src,
and a read the limit cut short is never taken for a complete one."""

from __future__ import annotations

from collections.abc import Generator

from drkit.offsets import repoint_inputs
from drkit.offsets.provenance_search import SourcePartition
from drkit.records import Record, TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.repoint import CannotTell, FollowFrom, Replica, repoint
from drkit.translation import PartitionMapping, TargetBounds

ORIGIN = TopicPartition("orders", 0)
REPLICA = TopicPartition("dc1.orders", 0)


class Partition:
    """A replica partition's records by position (positions left out: markers)."""

    def __init__(self, records: dict[int, int | None]) -> None:
        self.records = records  # position -> the origin offset it copies (None: not a copy)
        self.asked: list[int] = []

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        assert tp == REPLICA
        self.asked.append(offset)
        for position in sorted(p for p in self.records if p >= offset):
            origin = self.records[position]
            headers = () if origin is None else ((SOURCE_HEADER, _src(origin)),)
            yield Record(tp.topic, tp.partition, position, None, b"v", headers)


def _src(offset: int) -> bytes:
    return Provenance("dc1", ORIGIN.topic, ORIGIN.partition, offset).encode()


def _replica(runs: list[OffsetRun], end: int) -> Replica:
    return Replica(REPLICA, TargetBounds(0, end), PartitionMapping(ORIGIN, REPLICA, runs))


def test_every_unmapped_position_is_read_and_copies_found_by_provenance() -> None:
    # Runs place 0..4 at 0..4 and 5, 6 at 10, 11; positions 5..9 hold a killed worker's copies
    # (9 is a marker), 12 a copy of another partition, 13 one more unsynced copy.
    records: dict[int, int | None] = {p: p for p in range(9)}
    records.update({10: 5, 11: 6, 12: None, 13: 9})
    partition = Partition(records)
    bare = _replica([OffsetRun(0, 0, 5), OffsetRun(5, 10, 2)], 14)
    read = repoint_inputs._scanned(bare, partition, SourcePartition("dc1", ORIGIN))
    assert partition.asked == [5, 12]
    assert [(s.start, s.end) for s in read.scanned] == [(5, 10), (12, 14)]
    assert read.scanned[0].copies == ((5, 5), (6, 6), (7, 7), (8, 8))
    assert read.scanned[1].copies == ((13, 9),)
    promoted = _replica([OffsetRun(0, 0, 20)], 20)
    result = repoint(ORIGIN, promoted, read)
    assert isinstance(result, FollowFrom) and result.frontier == 10


def test_a_read_cut_short_by_the_limit_leaves_the_rest_unread() -> None:
    records: dict[int, int | None] = {p: p for p in range(10)}
    partition = Partition(records)
    origin = SourcePartition("dc1", ORIGIN)
    read = repoint_inputs._scanned(_replica([], 10), partition, origin, limit=3)
    assert [(s.start, s.end) for s in read.scanned] == [(0, 3)]
    result = repoint(ORIGIN, _replica([OffsetRun(0, 0, 10)], 10), read)
    assert isinstance(result, CannotTell) and "[3, 10)" in result.reason
