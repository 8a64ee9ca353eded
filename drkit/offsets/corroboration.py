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
anywhere - one that can write the replica can feed consumers any data anyway.  Such a writer
*can* make a claim believed: a record naming a source offset the flow doubts for ever (a source
commit marker, never replicated) caps every group below that offset at its position - a rewind,
never a skip (security review 9, R9-L1; docs/security.md).

What is read.  A claim ``(src, end, dst)`` is checked where it starts: the first record at or
after ``dst`` (a compacted target may have removed the copy at ``dst`` itself) must lie inside
the claimed target range and name ``src`` plus its distance from ``dst``; the copies below it are
gone and need no position.  Then each piece the claim leaves after splitting it by the doubt is
checked where *it* starts, in the same way.  The anchor alone is not enough: a forger can anchor
a claim at a real copy no verified run places (a copy a crash re-replication superseded, at a
position no verified copy occupies) and stretch it over a source range it doubts itself - a gap
in the source - so that a piece starts at a position holding a copy of some *other* record, and
every group below it would resume there.  With both checks, every position a believed piece
gives a group below it holds a real copy of a doubted source record at or after the group's
offset: the data, not the forger, says a copy lies there that no verified run places.  (A group
inside a piece resumes at or above that first copy; its answer is not exact anyway - the offset
is doubted.)  Nor is a piece's start enough for how far it reaches: a piece counts as in the log
until the log starts past its last position, and a claim stretched past a real run of copies -
over positions holding none, an aborted transaction - kept it there once retention removed
every real copy, so a long-lived loader that had believed it sent exact answers below it to the
log start (issue 46, R11 follow-up).  So the piece's last position is read too and must hold the
copy of its last source offset; where it does not, a search between (one read per halving)
finds the last record that runs on as the claimed copies (at or after a position, at the claimed
distance from the first: the copies compaction left count), and the piece ends there.  A last
position at or past the end read is left as claimed: the piece lies above every verified copy
(its range meets none) and lowers no exact answer.  A read that stops below the end, at the last
stable offset (a transaction open on the replica), is not taken as past it: verified copies can
lie above that offset, so the piece is not read there - the rest is unresolved (security review
13, R13-L1).  One record corroborates one piece: the
pieces found at the same record are kept as one, as long as the longest (the most re-reads).
Claims of every length anchored at one real copy - of a record an at-least-once flow copied but
had not synced yet - made that many pieces, past :data:`~drkit.translation.CLAIMED_LIMIT`, whose
overflow answered the log start for every group (security review 11, R11-M1); past the limit,
pieces now collapse above the lowest kept ones instead (translation, invariant 10).

Cost and order.  Claims that cannot yield a piece (over verified history, at verified positions)
cost nothing.  The others are taken at the lowest target position first (the lowest positions
lower answers the most).  Each partition's end is asked once per refresh; a position at or past
it holds no record *yet* and costs no read - a flood "past the end" costs one request.  A read
goes on from one position to the next while they lie at most :data:`SCAN_AHEAD` offsets apart
(a real history's claims, one per run, lie side by side); each partition's claims get at most
:data:`CORROBORATION_READS` requests and :data:`CORROBORATION_RECORDS` records read on per
refresh (per partition: a flood on one starves no other).  The pieces' last positions are read
after every claim's first ones, lowest piece first, from the same budget; where a piece's is not
read (the budget spent, or the read failed) its first copy is believed and the rest of it is
unresolved (below).

What is kept.  Only verdicts that cannot change are kept for the corroborator's lifetime: a
record found at or after a position (an append-only log's records do not change; compaction
only removes one - the claim was real).  "No record at or after this position" is never kept:
the position lies at or past the end read (or past the last stable offset, where a
read_committed read stops before the end), and the log fills it later (security review 9,
R9-M1(a): a forged claim just past the end, kept as refuted, hid the real copy written there
afterwards).  Such a claim is *pending*: read again on a later refresh, once the end has moved.

Claims not resolved.  A claim the budget did not reach, whose read failed, or that is pending is
not taken as refuted either: its pieces are kept apart (:meth:`Corroborator.unresolved`) and
translation lets them lower an answer *flagged* ``UNCHECKED`` (translation, invariant 10) -
re-reads, never a skip.  Not believing them (before review 9) gave a skip, silent where the plan
was not asked: a flood beyond the budget hid the real claim (R9-M1(b)).  Believing them does not
reopen R8-M1 ("one forged record rewinds every group"): one record, or any number under the
budget, is read and refuted; to leave a forged claim unresolved at position P a forger needs
more than :data:`CORROBORATION_READS` claims at read-costing positions below P on the same
partition (checked lowest first), and what it gets is a flagged rewind to P that the plan
blocks a planned move on (``offset_sync_claims_unchecked``) and a long-lived loader reads
through on its next refreshes.  A pending claim lies at or past the end read: it lowers only
answers above that end (a log that grew since), flagged too, and is not counted as unchecked.
A partition the target does not have holds no copy: its claims are refuted, for this refresh
(security review 11, R11-L3: its read failed every time, so one forged record naming such a
partition stayed unchecked for ever and blocked every planned move).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from itertools import islice
from typing import Literal, Protocol

from drkit.errors import KafkaError
from drkit.kafka.partition_reader import PartitionMissing
from drkit.offsets.provenance_search import RecordSource, SourcePartition, copy_offset
from drkit.records import Record, TopicPartition
from drkit.replication.run_map import RunTable
from drkit.translation import CLAIMED_LIMIT, Claimable, ClaimedCopies, Collapsed, Piece

log = logging.getLogger(__name__)

# Requests to the target per partition and refresh: positioned reads and the partition's end.  A
# positioned read took 14 ms on a local broker: about 15 s at most per flooded partition.
CORROBORATION_READS = 1024
# Records a partition's reads may go on through per refresh (SCAN_AHEAD), all reads together.
CORROBORATION_RECORDS = 200_000

# A read that goes on from where the last one stopped, instead of positioning the reader again,
# when the next claimed position lies at most this many offsets further (claims sorted by
# position: a real history's claims, one per run, lie side by side).
SCAN_AHEAD = 1000


class TargetRecords(RecordSource, Protocol):
    """The target's records by position (drkit.kafka.partition_reader.PartitionReader, or a
    test's) and each partition's end."""

    def end_offset(self, tp: TopicPartition) -> int:
        """The partition's high watermark: no record lies at or after it yet.  Raises
        :class:`~drkit.kafka.partition_reader.PartitionMissing` when the target does not have
        the partition."""
        ...


# A partition's end as read this refresh when the target does not have the partition.
_MISSING_END = -1


# What the first record at or after a position is: its offset and the source offset its
# drkit-src names for the flow's partition (or None).  "No record there yet" is _Pending.
Found = tuple[int, int | None]


class Corroborator:
    """Checks claimed copies against the target's records; not thread-safe.

    ``records``: the target's records by position (a test's, the simulation's), else
    ``opener`` makes them on the first read (drkit.kafka.partition_reader: most flows never
    read); ``source_cluster``: the flow's source alias, as ``drkit-src`` names it.
    :meth:`start_refresh` starts a refresh; each partition's :meth:`claimed` has its own read
    budget."""

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
        self.reads = 0  # requests for the last partition checked: positioned reads, its end
        self.scanned = 0  # records read on from a read, for the last partition checked
        self.scan_ahead, self.scan_limit = scan_ahead, scan_limit
        self._found: dict[tuple[TopicPartition, int], Found] = {}
        self._unchecked: dict[TopicPartition, int] = {}
        self._pending: dict[TopicPartition, int] = {}
        self._unresolved: dict[TopicPartition, ClaimedCopies] = {}
        self._ends: dict[TopicPartition, int] = {}  # this refresh
        self._missing = 0  # claims refuted for naming a partition the target does not have
        self._scan: _Scan | None = None

    @property
    def unchecked(self) -> int:
        """Claims that may matter and were not checked yet, over all partitions (as last
        built): they lower the answers they could lower, flagged, until read."""
        return sum(self._unchecked.values())

    def unchecked_in(self, source: TopicPartition) -> int:
        return self._unchecked.get(source, 0)

    def pending_in(self, source: TopicPartition) -> int:
        """Claims of ``source`` at or past the end read (as last built): read again once the
        partition's end has moved past them."""
        return self._pending.get(source, 0)

    def unresolved(self, source: TopicPartition) -> ClaimedCopies | None:
        """The pieces of ``source``'s claims neither believed nor refuted (as last built):
        unchecked or pending - they lower an answer only flagged (translation, invariant 10)."""
        return self._unresolved.get(source)

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
        records at ``target`` corroborate (translation, invariant 10); None when none.  The
        claims neither corroborated nor refuted are kept apart (:meth:`unresolved`)."""
        self._unchecked.pop(source, None)
        self._pending.pop(source, None)
        self._unresolved.pop(source, None)
        self.reads = self.scanned = self._missing = 0  # the budget is per partition
        if not claims or not doubt:
            return None
        claimable = Claimable(table, doubt)
        admitted = sorted({claim for claim in claims if claimable.admits(claim)}, key=_by_dst)
        named = SourcePartition(self.source_cluster, source)
        # One record corroborates one piece: the pieces found at the same record (they start at
        # the source offset it names) are one, as long as the longest (the most re-reads) -
        # security review 11, R11-M1: claims of every length anchored at one real copy made
        # that many believed pieces, past CLAIMED_LIMIT.
        believed_at: dict[int, Piece] = {}
        unresolved: list[Piece] = []  # claims (from the first piece not resolved), by position
        unchecked = pending = 0
        for claim in admitted:  # every one (R11-L2: those past the limit were dropped whole)
            anchored = self._check(target, claim, named)
            if anchored is None or anchored == "pending":
                unresolved.append(claim)
                if anchored is None:
                    unchecked += 1
                else:
                    pending += 1
                continue
            if not anchored:
                continue
            for piece in claimable.pieces(claim):
                believed = self._check(target, piece, named)
                if believed is None or believed == "pending":
                    unresolved.append((piece[0], claim[1], piece[2]))  # this piece on
                    if believed is None:
                        unchecked += 1
                    else:
                        pending += 1
                    break
                if believed:
                    at = believed[2]
                    kept = believed_at.get(at)
                    if kept is None or kept[1] < believed[1]:
                        believed_at[at] = believed
        # A piece reaches as far as the records from where it starts run on as the claimed
        # copies (issue 46, R11 follow-up: a claim stretched past them kept a piece alive by its
        # claimed length once retention removed its copies, and an exact answer below it moved
        # to the log start).  The longest piece at a record covers every other there.
        corroborated: list[Piece] = []
        for at in sorted(believed_at):
            piece, rest = self._extent(target, believed_at[at], named)
            corroborated.append(piece)
            if rest is not None:  # not read on: its extent is not known yet
                unresolved.append(rest)
                unchecked += 1
        self._stop_scan()
        if self._missing:
            log.warning(
                "offset-sync claims name a partition the target does not have: refuted (no "
                "copy lies there; a foreign writer of the offset-sync topic?)",
                extra={"partition": str(target), "claims": self._missing},
            )
        if pending:
            self._pending[source] = pending
        if unresolved:
            copies = _unresolved_copies(claimable, sorted(unresolved, key=_by_dst))
            if copies is not None:
                self._unresolved[source] = copies
        if unchecked:
            self._unchecked[source] = unchecked
            log.warning(
                "offset-sync claims not yet checked against the target's records: answers they "
                "could lower are lowered, flagged 'unchecked' (the next refresh goes on)",
                extra={"partition": str(source), "claims": unchecked},
            )
        return ClaimedCopies.believing(corroborated)

    def _check(
        self, target: TopicPartition, piece: Piece, source: SourcePartition
    ) -> Piece | Literal[False, "pending"] | None:
        """``piece`` as far as the target's records corroborate it (from its first record
        that still exists), False when they do not, "pending" when no record lies at or after
        its position yet, None when it was not read (no budget, or the read failed)."""
        src, end, dst = piece
        found = self._find(target, dst, source)
        if found == "missing":
            # No such partition holds no copy; not kept either: it may be created later
            # (security review 11, R11-L3: unchecked for ever, a blocker of every move).
            self._missing += 1
            return False
        if found is None or found == "pending":
            return found
        at, copied = found
        shift = at - dst
        if not 0 <= shift < end - src or copied != src + shift:
            return False
        return src + shift, end, at

    def _find(
        self, target: TopicPartition, position: int, source: SourcePartition
    ) -> Found | Literal["pending", "missing"] | None:
        """The first record at or after ``position`` (kept), "pending" when none lies there
        yet, "missing" when the target does not have the partition (neither kept: the log
        fills the position later, R9-M1(a); the partition may be created), None when it was
        not read (no budget, or the read failed)."""
        key = (target, position)
        if key in self._found:
            return self._found[key]
        try:
            found = self._read(target, position, source)
        except _NoBudget:
            return None
        except _Pending:
            return "pending"
        except _Missing:
            return "missing"
        except KafkaError as error:
            self._stop_scan()  # a read that failed reads on no further
            log.warning(
                "cannot read the target to check an offset-sync claim",
                extra={"partition": str(target), "offset": position, "error": str(error)},
            )
            return None
        self._found[key] = found
        return found

    def _extent(
        self, target: TopicPartition, piece: Piece, source: SourcePartition
    ) -> tuple[Piece, Piece | None]:
        """A believed ``piece`` (its first record, at its position, is a copy of its first
        source offset) as far as the target's records corroborate it: whole when its last
        position holds the copy of its last source offset, or lies at or past the end read
        (past what the log holds yet, above every verified copy: admitted pieces meet none);
        else up to the last record a search between finds running on as the claimed copies
        (a record at or after a position, at the claimed distance from the first: the copies
        compaction left count).  The rest is dropped - or, where a read was not made (no
        budget, it failed, or it stopped below the end at the last stable offset: an open
        transaction, with verified copies possibly above it), returned apart to be taken as
        unresolved."""
        lo, hi, at = piece
        last = at + (hi - lo) - 1
        good, bad = at, None  # a copy at ``good``; none from ``bad`` to the first record after
        probe = last
        while probe > good:
            found = self._find(target, probe, source)
            end = self._ends.get(target)
            if found == "pending" and probe == last and end is not None and last >= end:
                return piece, None  # past the end read: above every verified copy
            # Not read: no budget, the read failed, or it stopped below the end - at the last
            # stable offset (an open transaction; verified copies may lie above it, security
            # review 13, R13-L1) - or the LSO moved.
            if found is None or isinstance(found, str):
                cut = lo + (good - at) + 1
                return (lo, cut, at), (cut, hi, good + 1)
            position, copied = found
            if position <= last and copied == lo + (position - at):
                good = position
            else:
                bad = probe
            if bad is None:
                return piece, None  # the last copy is there
            probe = (good + bad) // 2
        return (lo, lo + (good - at) + 1, at), None

    def _read(self, target: TopicPartition, position: int, source: SourcePartition) -> Found:
        """The first record at or after ``position``: _Pending at or past the partition's end
        (asked once per refresh: claims past the end cost no read) or when a read finds none
        (it stopped at the end, or at the last stable offset), else read - going on with the
        last read when ``position`` lies a little further on the same partition."""
        records = self.records
        if records is None:
            assert self._opener is not None
            records = self.records = self._opener()
        end = self._ends.get(target)
        if end is None:
            self._spend()
            try:
                end = records.end_offset(target)
            except PartitionMissing:
                end = _MISSING_END
            self._ends[target] = end
        if end == _MISSING_END:
            raise _Missing
        if position >= end:
            raise _Pending
        scan = self._scan
        if scan is None or not scan.serves(target, position, self.scan_ahead):
            self._spend()
            self._stop_scan()
            scan = self._scan = _Scan(target, position, records.records_from(target, position))
        elif self.scanned >= self.scan_limit:
            raise _NoBudget
        record, passed = scan.first_at(position)
        self.scanned += passed
        if record is None:
            raise _Pending
        return record.offset, copy_offset(record, source)

    def _spend(self) -> None:
        if self.reads >= self.budget:
            raise _NoBudget
        self.reads += 1

    def _stop_scan(self) -> None:
        if self._scan is not None:
            self._scan.records.close()
            self._scan = None


class _NoBudget(Exception):
    """This partition's reads for this refresh are spent."""


class _Missing(Exception):
    """The target does not have the partition (this refresh): no record lies in it."""


class _Pending(Exception):
    """No record at or after the position yet: at or past the end read (or the last stable
    offset) - a verdict for this refresh only."""


def _unresolved_copies(claimable: Claimable, claims: Sequence[Piece]) -> ClaimedCopies | None:
    """The pieces of ``claims`` (sorted by position), as if believed: the first
    :data:`CLAIMED_LIMIT` - 1; the rest (a flood) collapsed - every group below their reach
    resumes no later than their lowest position (re-reads; never the log start, which a
    forger's flood would reach)."""
    limit = CLAIMED_LIMIT - 1
    pieces: list[Piece] = []
    collapsed: Collapsed | None = None
    full = False
    for claim in claims:
        if not full:
            pieces.extend(islice(claimable.pieces(claim), limit + 1 - len(pieces)))
            if len(pieces) <= limit:
                continue
            del pieces[limit:]  # this claim counts with the rest, whole
            full = True
        src, end, dst = claim
        reach = claimable.reach(claim)
        if reach > 0:
            collapsed = Collapsed(dst, reach, dst + (end - src)).merged(collapsed)
    return ClaimedCopies.believing(pieces, collapsed)


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
