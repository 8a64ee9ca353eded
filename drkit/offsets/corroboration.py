"""Believe a rejected offset-sync record's claimed copy only where the target's data shows it.

Invariant 10 of drkit/translation.py lets the copies a *rejected* offset-sync record claims cap
a translation, exact answers included: a store that lost its flow keys rejects real runs, and a
re-replication under the new key must not send groups past records whose only copies those runs
hold.  A foreign writer of the offset-sync topic can write such records too, and it picks both
the source range (its own record doubts it) and the target position (security review 8,
R8-M1).  So a claim is believed only when the target corroborates it: every replicated record
carries ``drkit-src`` = the cluster alias, topic, partition and offset of its source record
(drkit/replication/provenance.py), and the record at a claimed position must name the flow's
source cluster, the claimed source partition and the claimed source offset.

What that rules out.  Transaction markers, aborted records, compacted-away positions and
positions past the log end hold no record; a native record of an identity-named replica, a copy
of another cluster or partition, a MirrorMaker 2 copy name no such source record.  A forger on
an append-only log can only add records at its end, above every group's position at the time;
and only a writer of the replica itself (which a guarded replica refuses) can put a ``drkit-src``
anywhere - one that can write the replica can feed consumers any data anyway.

What is read.  A claim ``(src, end, dst)`` is checked where it starts: the first record at or
after ``dst`` (a compacted target may have removed the copy at ``dst`` itself) must lie inside
the claimed target range and name ``src`` plus its distance from ``dst``; the copies below it are
gone and need no position.  Then each piece the claim leaves after splitting it by the doubt is
checked where *it* starts, in the same way.  The anchor alone is not enough: a forger can anchor
a claim at a real copy no verified run places (a copy a crash re-replication superseded, at a
position no verified copy occupies) and stretch it over a source range it doubts itself - a gap
in the source - so that a piece starts at a position holding a copy of some *other* record, and
every group below it would resume there.  With both checks, every position a believed piece gives
a group below it holds a real copy of a doubted source record at or after the group's offset:
the data, not the forger, says a copy lies there that no verified run places.  (A group inside a
piece resumes at or above that first copy; its answer is not exact anyway - the offset is
doubted.)

Cost and order.  Claims that cannot yield a piece (over verified history, at verified positions)
cost nothing.  The others are taken at the lowest target position first (the lowest positions
lower answers the most).  Each partition's end is asked once per refresh, and a position at or
past it is refuted without a read (a real claim's copies are written before its record) - a
flood "past the end" costs one request.  A read goes on from one position to the next while
they lie at most :data:`SCAN_AHEAD` offsets apart (a real history's claims, one per run, lie side
by side); a refresh makes at most :data:`CORROBORATION_READS` requests and reads on through at
most :data:`CORROBORATION_RECORDS` records.  Verdicts are kept per position for the
corroborator's lifetime: an append-only log's records do not change (compaction only removes
one - the claim was real).  A claim not checked yet is *not* believed: it is counted
(:attr:`Corroborator.unchecked`), logged, and checked on the next refresh.  The other way round
(believing unchecked claims) would hand a forger who writes more records than a refresh reads
the very rewind this check stops; this way a real claim waits only behind more claims than a
refresh reads, below it, and the operator is told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Literal, Protocol

from drkit.errors import KafkaError
from drkit.offsets.provenance_search import RecordSource, SourcePartition, copy_offset
from drkit.records import Record, TopicPartition
from drkit.replication.run_map import RunTable
from drkit.translation import CLAIMED_LIMIT, Claimable, ClaimedCopies, Piece

log = logging.getLogger(__name__)

# Requests to the target per refresh (all partitions of a flow): positioned reads and partition
# ends.  A positioned read took 14 ms on a local broker: about 15 s at most per refresh.
CORROBORATION_READS = 1024
# Records a refresh's reads may go on through (SCAN_AHEAD), all reads together.
CORROBORATION_RECORDS = 200_000

# A read that goes on from where the last one stopped, instead of positioning the reader again,
# when the next claimed position lies at most this many offsets further (claims sorted by
# position: a real history's claims, one per run, lie side by side).
SCAN_AHEAD = 1000


class TargetRecords(RecordSource, Protocol):
    """The target's records by position (drkit.kafka.partition_reader.PartitionReader, or a
    test's) and each partition's end."""

    def end_offset(self, tp: TopicPartition) -> int:
        """The partition's high watermark: no record lies at or after it yet."""
        ...


# What the first record at or after a position is: (its offset, the source offset its drkit-src
# names for the flow's partition, or None), or None when there is no record there.
Found = tuple[int, int | None] | None


class Corroborator:
    """Checks claimed copies against the target's records; not thread-safe.

    ``records``: the target's records by position (a test's, the simulation's), else
    ``opener`` makes them on the first read (drkit.kafka.partition_reader: most flows never
    read); ``source_cluster``: the flow's source alias, as ``drkit-src`` names it.
    :meth:`start_refresh` resets the read budget."""

    def __init__(
        self,
        records: TargetRecords | None,
        source_cluster: str,
        budget: int = CORROBORATION_READS,
        *,
        opener: Callable[[], TargetRecords] | None = None,
        scan_ahead: int = SCAN_AHEAD,
        scan_limit: int = CORROBORATION_RECORDS,
    ) -> None:
        if records is None and opener is None:
            raise ValueError("records or an opener of them is needed")
        self.records = records
        self._opener = opener
        self.source_cluster = source_cluster
        self.budget = budget
        self.reads = 0  # requests this refresh: positioned reads and partition ends
        self.scanned = 0  # records read on from a read this refresh
        self.scan_ahead, self.scan_limit = scan_ahead, scan_limit
        self._found: dict[tuple[TopicPartition, int], Found] = {}
        self._unchecked: dict[TopicPartition, int] = {}
        self._ends: dict[TopicPartition, int] = {}  # this refresh
        self._scan: _Scan | None = None

    @property
    def unchecked(self) -> int:
        """Claims that may matter and were not checked yet, over all partitions (as last
        built): not believed until they are."""
        return sum(self._unchecked.values())

    def unchecked_in(self, source: TopicPartition) -> int:
        return self._unchecked.get(source, 0)

    def start_refresh(self) -> None:
        self.reads = self.scanned = 0
        self._ends.clear()
        self._stop_scan()

    def claimed(
        self,
        source: TopicPartition,
        target: TopicPartition,
        claims: Sequence[Piece],
        table: RunTable,
        doubt: Sequence[tuple[int, int]],
    ) -> ClaimedCopies | None:
        """The copies of ``claims`` (rejected records' ``(src, end, dst)``) the target's
        records at ``target`` corroborate (translation, invariant 10); None when none."""
        self._unchecked.pop(source, None)
        if not claims or not doubt:
            return None
        claimable = Claimable(table, doubt)
        admitted = sorted({claim for claim in claims if claimable.admits(claim)}, key=_by_dst)
        named = SourcePartition(self.source_cluster, source)
        pieces: list[Piece] = []
        unchecked = 0
        for claim in admitted:
            if len(pieces) > CLAIMED_LIMIT:
                break  # the overflow answers from the log start wherever pieces reach
            anchored = self._check(target, claim, named)
            if anchored is None:
                unchecked += 1
                continue
            if not anchored:
                continue
            for piece in claimable.pieces(claim):
                believed = self._check(target, piece, named)
                if believed is None:
                    unchecked += 1
                    break
                if believed:
                    pieces.append(believed)
                    if len(pieces) > CLAIMED_LIMIT:
                        break
        if unchecked:
            self._unchecked[source] = unchecked
            log.warning(
                "offset-sync claims not yet checked against the target's records: not believed "
                "until they are (the next refresh goes on)",
                extra={"partition": str(source), "claims": unchecked},
            )
        self._stop_scan()
        return ClaimedCopies.believing(pieces)

    def _check(
        self, target: TopicPartition, piece: Piece, source: SourcePartition
    ) -> Piece | Literal[False] | None:
        """``piece`` as far as the target's records corroborate it (from its first record
        that still exists), False when they do not, None when it was not read (no budget, or
        the read failed)."""
        src, end, dst = piece
        key = (target, dst)
        if key in self._found:
            found = self._found[key]
        else:
            try:
                found = self._read(target, dst, source)
            except _NoBudget:
                return None
            except KafkaError as error:
                self._stop_scan()  # a read that failed reads on no further
                log.warning(
                    "cannot read the target to check an offset-sync claim",
                    extra={"partition": str(target), "offset": dst, "error": str(error)},
                )
                return None
            self._found[key] = found
        if found is None:
            return False
        at, copied = found
        shift = at - dst
        if not 0 <= shift < end - src or copied != src + shift:
            return False
        return src + shift, end, at

    def _read(self, target: TopicPartition, position: int, source: SourcePartition) -> Found:
        """The first record at or after ``position``: none at or past the partition's end
        (asked once per refresh: claims past the end cost no read), else read - going on
        with the last read when ``position`` lies a little further on the same partition."""
        records = self.records
        if records is None:
            assert self._opener is not None
            records = self.records = self._opener()
        end = self._ends.get(target)
        if end is None:
            self._spend()
            end = self._ends[target] = records.end_offset(target)
        if position >= end:
            return None
        scan = self._scan
        if scan is None or not scan.serves(target, position, self.scan_ahead):
            self._spend()
            self._stop_scan()
            scan = self._scan = _Scan(target, position, records.records_from(target, position))
        elif self.scanned >= self.scan_limit:
            raise _NoBudget
        record, passed = scan.first_at(position)
        self.scanned += passed
        return None if record is None else (record.offset, copy_offset(record, source))

    def _spend(self) -> None:
        if self.reads >= self.budget:
            raise _NoBudget
        self.reads += 1

    def _stop_scan(self) -> None:
        if self._scan is not None:
            self._scan.records.close()
            self._scan = None


class _NoBudget(Exception):
    """This refresh's reads are spent."""


class _Scan:
    """One read of a target partition, going on while the positions asked grow a little."""

    def __init__(
        self, tp: TopicPartition, position: int, records: Generator[Record, None, None]
    ) -> None:
        self.tp = tp
        self.position = position  # the last position asked
        self.records = records
        self.head: Record | None = next(records, None)  # the first record at or after it

    def serves(self, tp: TopicPartition, position: int, ahead: int) -> bool:
        return tp == self.tp and self.position <= position <= self.position + ahead

    def first_at(self, position: int) -> tuple[Record | None, int]:
        """The first record at or after ``position``, and how many records were passed."""
        self.position = position
        passed = 0
        while self.head is not None and self.head.offset < position:
            self.head = next(self.records, None)
            passed += 1
        return self.head, passed


def _by_dst(claim: Piece) -> tuple[int, int, int]:
    return claim[2], claim[0], claim[1]
