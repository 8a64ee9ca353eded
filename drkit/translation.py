"""Exact consumer-group offset translation (pure).

Given a group's committed offset ``S`` on a source partition, the merged offset-sync runs of that
partition (:func:`drkit.replication.offset_sync.merge_runs`), the flow's progress (first source
offset not yet done) and the target partition's log bounds, :func:`translate` returns where the
group must resume on the target: a :class:`Translated` value, or :class:`CannotTranslate` when
the inputs do not allow an answer.  It never returns a sentinel number.

Definitions.  A source record with offset ``o`` is *replicated* when a run covers ``o``; its
target offset ``last(o)`` is the run's ``dst_start + (o - src_start)`` (the last copy in the
target log, see ``merge_runs``).  ``replicated_end`` is the source offset after the last
replicated-or-filtered record (``progress.next``), ``source_end`` the source high watermark when
known.  The answer is ``T = min(last(o) for replicated o >= S)``: the largest position from which
no replicated record at or after ``S`` is missed.  In every history without a crash in the middle
of re-replication that minimum is ``last(S)`` itself; after such a crash a later record's only
copy may precede ``last(S)``, and T moves back to it (flagged ``reordered``).

Invariants (tests/unit/test_translation.py checks them with hypothesis over random streams with
gaps, restarts, truncation and trimming):

1. Never skip: every replicated source record with offset ``>= S`` lies at a target offset
   ``>= T`` (for the merged mapping).
2. Exact: if the record at ``S`` was replicated and nothing forces T back, ``T`` is its target
   offset (``method == EXACT``).  ``expected_rereads`` is the exact number of distinct records
   with source offset ``< S`` at ``>= T``: zero unless a crash in the middle of re-replication
   put a copy of an earlier record after S's copy (the target log then holds it there and any
   position that skips nothing reads it again).
3. In a gap (compaction, transaction markers, filtered records) or before the mapping, ``T`` is
   the target offset of the first replicated record with source offset ``>= S`` (``MAPPED``,
   flagged).
4. Past everything replicated, ``T`` is the target position right after the last replicated
   record; the source records from ``max(S, replicated_end)`` - and from the source's log start
   when it is read and lies above (below it records are gone: a loss event) - to ``source_end``
   are reported as ``unreplicated`` - that is RPO, not a translation error (drkit.lag's span the
   target lacks, from the group's position).
5. ``T`` is always within the target log ``[start, end]``; clamping is reported (``CLAMPED``)
   with the number of records the clamp made unreachable.
6. Trimmed maps: runs with no record left on the source *and* the target are dropped
   (drkit/replication/run_map.py).  Over such a map ``T`` equals the full map's ``T`` whenever
   that one lay inside the target log (same method and re-reads), and otherwise still skips no
   record whose last copy the target holds - a group committed below the source's log start
   resumes no later than the full map would have clamped it.

7. Adopted flows (``drkit adopt``): below the point where drkit took a flow over from MirrorMaker
   2, only MM2's sparse offset syncs exist (:class:`Mm2Syncs`).  There ``T`` is rounded down to
   the last sync at or below ``S`` (``method == MM2``): the sync's own target offset when
   ``S`` is the synced record, the position after it otherwise - never skipping, and
   ``expected_rereads`` counts the records between (exact while the source range holds no
   gaps, an upper bound otherwise).

8. The way back (:func:`translate_back`): a group that read a replica up to ``T`` on the target
   resumes on the replica's *source* at the source offset of the first replicated record whose
   copy lies at ``>= T`` (past every copy: the first source offset not replicated).  It read
   every record below that and none from it: nothing skipped, nothing read again - as long as
   the copies are in source order (a crash re-replication that reordered them, a hashed or
   split partition, MirrorMaker 2's syncs below an adoption point: no answer).  A round trip
   (a switchover, and back) so moves a group that read the first cluster's topic through its
   replica on the second.  Past every copy the map places (an unplanned move's way back: the
   flow stopped with the origin ahead), the origin offset is also past every copy the group
   read there that the map does not place (``held``: copied, by provenance, never recorded -
   a worker killed between the two; copies past the map follow source order from the
   progress, so the group read every record below the newest of them), and at least the
   group's own offset on the origin, committed before the move: past every copy lies the
   origin's divergent tail, which only the origin held, so what the group committed into it
   it read there.  Both raise the answer only past records the group read: none skipped.

9. Unverified syncs (drkit/signing.py): offset-sync and adopted-range records whose MAC fails
   are not runs (nor MirrorMaker 2's range).  Each one claims from its key's source offset (an
   adopted range's from 0) to the next verified run's start - to the partition's end when none
   follows - or to its claimed end when that lies further; a tombstone's claim is the same.
   The parts of those claims no verified run covers are ``PartitionMapping.doubt``
   (drkit/offsets/mapping_loader.py ``doubt``): records there may have been replicated
   without the map knowing where.  Progress does not bound them (it is unsigned).  When ``T``
   would be a first-position-not-skipping answer (``MAPPED``: a gap, before the map, past it)
   and a doubted range lies between ``S`` and the record ``T`` points at, ``T`` falls back to
   the end of the last verified copy below ``S`` (the target log start when there is none),
   flagged ``UNVERIFIED``.  An exact answer (the record at ``S`` verified) is kept.  With doubt
   and no verified run at all (a store without the key the workers signed with) every ``S``
   resumes at the target log start - an answer, never none.  The way back (invariant 8)
   refuses a doubted mapping.

   What holds: no replicated record at or after ``S`` lies before ``T`` when every real run the
   map lacks left a rejected record under its own key - an unsigned run (written before
   signing), or one compacted away under a foreign value of any length (one that does not decode
   included) or a foreign tombstone - and reached no further than the next verified run's start,
   or the verified runs cover the rest of it (runs in source order always do) - as long as the
   copies are in source order (a crash re-replication can reorder them; then the answer is
   flagged ``REORDERED`` as well when the verified runs show it).  What does not: a real run
   that left no rejected record reads as a plain gap, and translation answers past it - deleted
   with DeleteRecords, compacted away under a *signed* record of its key (a replayed older,
   shorter version of the run), or under a foreign tombstone that compaction dropped in its turn
   (``delete.retention.ms`` after it, one day by default; a reader that read it before keeps the
   claim).  Only ACLs on the offset-sync topic close that (docs/security.md).

10. Copies only rejected records place (drkit/signing.py): a record that fails verification
   may be real - written under a key this store no longer has (a store restored without its
   flow keys while workers kept signing with the old one).  Verified runs alone assume the
   copies lie in source order, and a re-replication under the new key after the old copies
   breaks that: a group would resume past records whose only copies the rejected runs hold.
   So ``T`` is also at most the lowest target position a rejected run gives a source record
   at or after ``S`` (:class:`ClaimedCopies`; flagged ``UNVERIFIED``, the method ``MAPPED``)
   - counting only what a rejected run may truly hold: source ranges no verified run covers
   (the doubt), at target positions no verified copy occupies, not wholly below the log
   start, and only where the target's records corroborate it (the mapping loader,
   drkit/offsets/corroboration.py): the first record at the claim's position, and at each
   piece's, names the flow's source partition and the claimed source offset - and a piece
   reaches only as far as the records from there run on as its copies (its last position is
   read too, and searched back from when it does not hold the last copy; issue 46, R11
   follow-up: a claim stretched past a real copy's run kept the piece alive by its claimed
   length once retention removed the copies, and exact answers below it moved to the log
   start).  A forger of the offset-sync topic picks the doubted range and the position, not
   what the replica holds there: a transaction marker, a compacted-away record, a position
   past the log end, a native record, another partition's copy corroborate nothing (a writer
   of the replica itself, which a guarded replica refuses, can: a record naming a doubted
   *future* source offset caps the groups below it - a rewind, never a skip; security review
   9, R9-L1).
   A forged claim so moves an exact answer only where the replica really holds, below the
   group's copy, a copy of a doubted record at or after it that no verified run places (past the
   limit below, of any collapsed one) - a real copy, which a forger's claims point at but cannot
   make (security review 8, R8-M1; the forged record's doubt still rounds down answers that were
   not exact, invariant 9) - a lost-key history's, or an at-least-once flow's unsynced one that
   lies below synced copies (security review 12, R12-L1, below).  What the claims do is let a
   real copy of a doubted record cap the groups below it (re-reads, never a skip) - a real copy
   the verified runs cannot place.  One
   record corroborates one piece: the claims found at the same record are one piece, as long as
   the longest of them (security review 11, R11-M1: claims of every length anchored at one real
   unsynced copy made that many pieces).  A claim the loader could not resolve - not read yet
   (its reads per partition and refresh are bounded), its read failed, or no record lies at or
   after its position *yet* (past the end read: pending, read again once the end moves) - is
   neither believed nor refuted: its pieces (``PartitionMapping.unchecked``) lower an answer
   too, flagged ``UNCHECKED`` as well as ``UNVERIFIED`` (re-reads, never a skip; security review
   9, R9-M1), and the loader counts them (a planned move blocks on them).  A forger gets such a
   rewind only by writing more claims on the partition than a refresh reads, below the position
   (checked lowest first); one record, or any number within the budget, is read and refuted (a
   claim on a partition the target does not have too: security review 11, R11-L3; one on a
   topic the flow does not replicate is refuted unread: security review 12, N1).  Past
   :data:`CLAIMED_LIMIT` - 1 pieces on a partition (believed, or unresolved) the ones at the
   highest positions collapse into one bound (:class:`Collapsed`): every offset below their
   reach resumes no later than their lowest position - re-reads, never a skip, and the target
   log start only while one of their corroborated copies is still in the log (past the limit
   the bound does not know which, nor whether it lies below the group's own copy; security
   review 11, R11-M1/L2: the overflow answered the log start, and dropped the claims past the
   limit).  Believed pieces past the limit need as many distinct real copies of doubted
   records: a real history's, or an at-least-once flow's copies not synced yet.  Those lie above
   every synced copy - the exact answers below stay exact - in all but one history (security
   review 12, R12-L1): a worker died before its commit round and its re-copy skipped records
   its first attempt had copied (the source compacted them away between the attempts, or a
   filter or transform dropped them the second time).  The first attempt's copies of those
   are never synced and lie *below* the synced re-copies of the records before them, so one
   forged claim at such a copy lowers the exact answers of the re-copied groups (the resume
   point up to the skipped records) to it - re-reads within one crash's in-flight window plus
   its re-copy, flagged ``UNVERIFIED`` only, never a skip.

The runs are kept as a :class:`~drkit.replication.run_map.RunTable` (compact columns, indexes
computed once per snapshot): one translation is a binary search plus, for re-reads, a walk over
the runs a crash re-replication left behind - independent of how many runs the map holds.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from heapq import heappop, heappush
from itertools import pairwise
from operator import itemgetter
from typing import Any, NamedTuple

from drkit.lag import lacking_records, lacking_span, lacking_total
from drkit.records import TopicPartition, built
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.run_map import RunTable


class Method(StrEnum):
    EXACT = "exact"  # the record at S was replicated; T is its target offset
    MAPPED = "mapped"  # S is in a gap / before the map / past it: first position not skipping
    PROVENANCE = "provenance"  # found by searching the target's provenance headers
    CLAMPED = "clamped"  # the mapped position lay outside the target log and was clamped
    MM2 = "mm2"  # below an adoption point: rounded down to MirrorMaker 2's last offset sync
    RETURNED = "returned"  # a position on a replica carried back to its origin (translate_back)


class Flag(StrEnum):
    GAP = "gap"  # S is not a replicated record's offset, inside the mapped range
    BEFORE_MAPPING = "before_mapping"  # S precedes the first mapped source offset
    PAST_REPLICATED = "past_replicated"  # S is at or after everything replicated
    TARGET_TRUNCATED = "target_truncated"  # the target log starts after the mapped position
    BEYOND_TARGET_END = "beyond_target_end"
    SPLIT_PARTITION = "split_partition"  # source partition spread over target partitions
    REORDERED = "reordered"  # a later record's only copy precedes S's copy: T moved back
    UNVERIFIED = "unverified"  # unverified syncs may hide copies after S: T moved back (9)
    # A claimed copy not yet checked against the target's records lies below: T moved back (10)
    UNCHECKED = "unchecked"


@dataclass(frozen=True)
class TargetBounds:
    """The target partition's log: offsets ``[start, end)`` exist (``end`` = high watermark)."""

    start: int
    end: int


@dataclass(frozen=True)
class Translated:
    source: TopicPartition
    target: TopicPartition
    source_offset: int
    target_offset: int
    method: Method
    expected_rereads: int = 0
    unreplicated: int | None = None
    unreachable: int = 0  # records a clamp to the target log start made unreadable
    flags: frozenset[Flag] = field(default_factory=frozenset)


@dataclass(frozen=True)
class CannotTranslate:
    source: TopicPartition
    source_offset: int
    reason: str


TranslationResult = Translated | CannotTranslate


@dataclass(frozen=True)
class Mm2Syncs:
    """MirrorMaker 2's offset syncs of one partition below the point drkit adopted it at.

    ``upstream[i]`` -> ``downstream[i]`` is a record MM2 copied (its source and target offset),
    both strictly increasing; ``end`` is the first source offset drkit's own runs map (exactly)
    and ``end_target`` that record's target offset.  Written by ``drkit adopt``
    (drkit/adoption/adopted.py) and never changed after.
    """

    upstream: tuple[int, ...]
    downstream: tuple[int, ...]
    end: int
    end_target: int

    def __post_init__(self) -> None:
        pairs = list(zip(self.upstream, self.downstream, strict=True))
        for (u0, d0), (u1, d1) in pairwise(pairs):
            if u1 <= u0 or d1 <= d0:
                raise ValueError("MirrorMaker 2 syncs must increase on both sides")
        if pairs and (pairs[-1][0] > self.end or pairs[-1][1] > self.end_target):
            raise ValueError("MirrorMaker 2 syncs must lie below the adoption point")

    def round_down(self, source_offset: int, log_start: int) -> tuple[int, int, bool]:
        """(target offset, records read again, before the first sync) for ``source_offset <
        end``: the rule of invariant 7 in the module docstring."""
        index = bisect_right(self.upstream, source_offset) - 1
        if index < 0:  # before every sync: from the start of the replica
            first = self.downstream[0] if self.downstream else self.end_target
            # Read again: copies below ``first`` of records below S - at most S of them.
            return log_start, max(0, min(first - log_start, source_offset)), True
        upstream, downstream = self.upstream[index], self.downstream[index]
        if upstream == source_offset:
            return downstream, 0, False
        following = (
            self.downstream[index + 1] if index + 1 < len(self.downstream) else self.end_target
        )
        between = min(source_offset - upstream - 1, following - downstream - 1)
        return downstream + 1, max(0, between), False


@dataclass(frozen=True)
class PartitionMapping:
    """Everything known about one source partition's replication, as plain values.

    ``runs`` is stored as a :class:`~drkit.replication.run_map.RunTable` (any sequence of runs
    sorted by ``src_start`` is converted): compact columns with their search indexes computed
    once, so a map of a million runs translates in microseconds.
    """

    source: TopicPartition
    target: TopicPartition
    runs: Sequence[OffsetRun]  # merged: sorted by src_start, non-overlapping
    replicated_end: int | None = None  # progress: first source offset not yet done
    hashed: bool = False
    split: bool = False  # runs point at more than one target partition
    adopted: Mm2Syncs | None = None  # MirrorMaker 2's syncs below drkit's adoption point
    # Source ranges (start, end) unverified offset syncs claim and no verified run covers
    # (invariant 9): sorted, disjoint.
    doubt: tuple[tuple[int, int], ...] = ()
    # Where rejected records say they copied source ranges: ``ClaimedCopies`` (invariant 10).
    claimed: ClaimedCopies | None = None
    # ... and where they say so and the loader could not check yet: lowers answers, flagged.
    unchecked: ClaimedCopies | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", RunTable.of(self.runs))  # ValueError unless sorted

    @property
    def table(self) -> RunTable:
        assert isinstance(self.runs, RunTable)
        return self.runs

    @property
    def starts(self) -> Sequence[int]:
        return self.table.src

    @property
    def suffix_min_dst(self) -> Sequence[int]:
        """``suffix_min_dst[i]`` = the smallest ``dst_start`` among ``runs[i:]``."""
        return self.table.suffix_min_dst

    @property
    def dst_end(self) -> int:
        """The target position after the last replicated record."""
        return self.table.dst_end


def translate(
    source_offset: int,
    mapping: PartitionMapping,
    bounds: TargetBounds,
    source_end: int | None = None,
    source_start: int | None = None,
) -> TranslationResult:
    """Where a group committed at ``source_offset`` must resume on the target (pure).
    ``source_start``: the source's log start when read (its ``unreplicated`` records count
    from it when it lies above progress - drkit.lag's span)."""
    if source_offset < 0:
        return CannotTranslate(mapping.source, source_offset, "negative source offset")
    if mapping.hashed or mapping.split:
        return CannotTranslate(
            mapping.source,
            source_offset,
            "source partition is spread over several target partitions (key-hash placement)",
        )
    adopted = mapping.adopted
    if adopted is not None and source_offset < adopted.end:
        target_offset, known, before = adopted.round_down(source_offset, bounds.start)
        marks = {Flag.BEFORE_MAPPING} if before else set()
        return _finish(
            source_offset, mapping, target_offset, Method.MM2, marks, bounds,
            (source_end, source_start), known,
        )  # fmt: skip
    table = mapping.table
    starts, dsts = table.src, table.dst
    if not starts:
        if mapping.replicated_end is not None and bounds.end == bounds.start:
            # Nothing ever written to the target (all filtered, or an empty partition): the
            # group resumes at the target's end and loses only what was never replicated.
            return _finish(
                source_offset,
                mapping,
                bounds.end,
                Method.MAPPED,
                {Flag.PAST_REPLICATED},
                bounds,
                (source_end, source_start),
            )
        if mapping.doubt:
            # Every sync that claims this partition failed verification (a store without the
            # key the workers signed with): the copies may lie anywhere - from the start.
            return _finish(
                source_offset,
                mapping,
                bounds.start,
                Method.MAPPED,
                {Flag.UNVERIFIED, Flag.BEFORE_MAPPING},
                bounds,
                (source_end, source_start),
            )
        return CannotTranslate(
            mapping.source, source_offset, "no offset mapping for this partition yet"
        )
    # The columns directly: this runs once per group and partition every checkpoint round.
    index = bisect_right(starts, source_offset) - 1
    flags: set[Flag] = set()
    head: int | None = None  # last copy of the record at S, if it was replicated
    if index >= 0 and source_offset < starts[index] + table.length[index]:
        head = dsts[index] + (source_offset - starts[index])
    later = table.suffix_min_dst[index + 1] if index + 1 < len(starts) else None
    if head is not None and (later is None or head <= later):
        target_offset, method = head, Method.EXACT
    elif later is not None:
        target_offset, method = later, Method.MAPPED
        if head is not None:
            flags.add(Flag.REORDERED)
        elif index < 0:
            flags.add(Flag.BEFORE_MAPPING)
        else:
            flags.add(Flag.GAP)
    else:
        target_offset, method = table.dst_end, Method.MAPPED
        flags.add(Flag.PAST_REPLICATED)
    if mapping.doubt and head is None:
        upto = starts[index + 1] if index + 1 < len(starts) else None
        if _doubted(mapping.doubt, source_offset, upto):
            below = dsts[index] + table.length[index] if index >= 0 else bounds.start
            target_offset = min(target_offset, below)
            flags.add(Flag.UNVERIFIED)
    if mapping.claimed is not None:
        claimed = max(bounds.start, mapping.claimed.first_at_or_after(source_offset, bounds))
        if claimed < target_offset:  # invariant 10: a copy only a rejected record places
            target_offset, method = claimed, Method.MAPPED
            flags.add(Flag.UNVERIFIED)
    if mapping.unchecked is not None:
        claimed = max(bounds.start, mapping.unchecked.first_at_or_after(source_offset, bounds))
        if claimed < target_offset:  # invariant 10: a claim not checked yet may be real
            target_offset, method = claimed, Method.MAPPED
            flags.update((Flag.UNVERIFIED, Flag.UNCHECKED))
    return _finish(
        source_offset, mapping, target_offset, method, flags, bounds, (source_end, source_start)
    )


# Pieces kept one by one per partition; past this many, the pieces at the highest positions
# collapse into one bound (:class:`Collapsed`): every offset below their reach resumes no later
# than their lowest position - re-reads, never a skip, bounded cost, and the log start only while
# one of their corroborated copies is in the log (security review 11, R11-M1: the overflow
# answered the log start, and a forger's flood anchored at one real unsynced copy reached it).
CLAIMED_LIMIT = 4096

Piece = tuple[int, int, int]  # (src_start, src_end, dst_start)


class Claimable:
    """Where a rejected record's claimed copy may be true, given the verified runs and the
    doubt (invariant 10): over doubted source ranges, at target positions no verified copy
    occupies.  Built once per mapping; every question about one claim costs binary searches
    (review 8, R8-L1: no copy of the doubt per claim)."""

    def __init__(self, table: RunTable, doubt: Sequence[tuple[int, int]]) -> None:
        self.doubt = doubt  # searched in place (sorted, disjoint: the ends are sorted too)
        if table.in_target_order:  # the runs' target ranges, sorted and disjoint: no copy
            self.occupied_starts: Sequence[int] = table.dst
            self.occupied_lengths: Sequence[int] = table.length
        else:  # a crash re-replication: sort them once
            occupied = _merged((d, d + n) for d, n in zip(table.dst, table.length, strict=True))
            self.occupied_starts = [a for a, _b in occupied]
            self.occupied_lengths = [b - a for a, b in occupied]

    def admits(self, claim: Piece) -> bool:
        """Whether ``claim`` yields a piece: its source range meets the doubt and its target
        range meets no verified copy (one target offset holds one record)."""
        src, end, dst = claim
        if end <= src or not _doubted(self.doubt, src, end):
            return False
        starts, lengths = self.occupied_starts, self.occupied_lengths
        index = bisect_right(starts, dst) - 1  # the last verified copy starting at or below dst
        if index >= 0 and starts[index] + lengths[index] > dst:
            return False
        return not (index + 1 < len(starts) and starts[index + 1] < dst + (end - src))

    def pieces(self, claim: Piece) -> Iterator[Piece]:
        """The parts of an admitted ``claim`` over doubted ranges, in source order."""
        src, end, dst = claim
        doubt = self.doubt
        index = bisect_right(doubt, src, key=_RANGE_END)  # the first range ending after src
        while index < len(doubt) and doubt[index][0] < end:
            lo, hi = max(doubt[index][0], src), min(doubt[index][1], end)
            yield lo, hi, dst + (lo - src)
            index += 1

    def reach(self, claim: Piece) -> int:
        """The largest source end of an admitted ``claim``'s pieces."""
        src, end, _dst = claim
        last = bisect_left(self.doubt, end, key=_RANGE_START) - 1  # the last starting < end
        return min(self.doubt[last][1], end) if last >= 0 and self.doubt[last][1] > src else 0


class Collapsed(NamedTuple):
    """Pieces past :data:`CLAIMED_LIMIT` as one bound: every source offset below ``reach`` has
    no copy among them below ``dst`` (their lowest position); their copies end by ``top``
    (gone once the target log starts at or after it)."""

    dst: int
    reach: int
    top: int

    def merged(self, other: Collapsed | None) -> Collapsed:
        if other is None:
            return self
        return Collapsed(
            min(self.dst, other.dst), max(self.reach, other.reach), max(self.top, other.top)
        )


@dataclass(frozen=True)
class ClaimedCopies:
    """Where rejected offset-sync records say they copied source ranges, as far as they are
    believed (invariant 10): ``(src_start, src_end, dst_start)`` pieces over source ranges no
    verified run covers (``PartitionMapping.doubt``), at target positions no verified copy
    occupies (:class:`Claimable`), each one corroborated by the target's records where it
    starts and as far as it reaches (the mapping loader, drkit/offsets/corroboration.py): a
    piece counts as gone once the target log starts past its last copy.

    At most :data:`CLAIMED_LIMIT` - 1 pieces are kept one by one (the lowest positions); the
    rest are ``collapsed``.  A query costs two binary searches over an index built once per
    target log start."""

    pieces: tuple[Piece, ...]
    collapsed: Collapsed | None = None
    furthest: int = 0  # the largest src_end of all pieces
    _indexes: dict[int, _PieceIndex] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def believing(
        pieces: Iterable[Piece], collapsed: Collapsed | None = None
    ) -> ClaimedCopies | None:
        """The copies ``pieces`` (and ``collapsed``) place; None for none.  Past
        :data:`CLAIMED_LIMIT` pieces, those at the highest positions collapse."""
        ordered = sorted(pieces, key=_by_position)
        if len(ordered) >= CLAIMED_LIMIT:
            rest = ordered[CLAIMED_LIMIT - 1 :]
            del ordered[CLAIMED_LIMIT - 1 :]
            collapsed = Collapsed(
                min(dst for _lo, _hi, dst in rest),
                max(hi for _lo, hi, _dst in rest),
                max(dst + hi - lo for lo, hi, dst in rest),
            ).merged(collapsed)
        if not ordered and collapsed is None:
            return None
        reach = max((hi for _lo, hi, _dst in ordered), default=0)
        if collapsed is not None:
            reach = max(reach, collapsed.reach)
        return ClaimedCopies(tuple(sorted(ordered)), collapsed, reach)

    def first_at_or_after(self, source_offset: int, bounds: TargetBounds) -> int:
        """The lowest target position a piece gives a source record at or after
        ``source_offset`` (its position of ``source_offset`` when it covers it), ignoring
        pieces whose copies lie wholly below the target log start (gone) - the collapsed ones
        as their lowest position; ``bounds.end`` when none reaches that far."""
        if self.furthest <= source_offset:
            return bounds.end
        best = bounds.end
        collapsed = self.collapsed
        if (
            collapsed is not None
            and source_offset < collapsed.reach
            and collapsed.top > bounds.start
        ):
            best = collapsed.dst
        index = self._indexes.get(bounds.start)
        if index is None:
            index = _PieceIndex.of(self.pieces, bounds.start)
            self._indexes.clear()  # one log start at a time: it only moves on
            self._indexes[bounds.start] = index
        at = bisect_right(index.cover_starts, source_offset) - 1
        if at >= 0 and source_offset < index.cover_ends[at]:
            best = min(best, source_offset + index.cover_shift[at])
        after = bisect_right(index.starts, source_offset)
        if after < len(index.starts):
            best = min(best, index.suffix_min_dst[after])
        return best


class _PieceIndex(NamedTuple):
    """The pieces still (partly) in the target log, for sub-linear queries (review 7, N2).

    ``starts``/``suffix_min_dst``: pieces sorted by source start and the lowest ``dst`` among
    ``pieces[i:]`` - what a piece starting after S gives.  ``cover_*``: disjoint source segments
    with the lowest ``dst - src_start`` of the pieces covering them - what a piece covering S
    gives (``S + shift``)."""

    starts: list[int]
    suffix_min_dst: list[int]
    cover_starts: list[int]
    cover_ends: list[int]
    cover_shift: list[int]

    @classmethod
    def of(cls, pieces: Sequence[Piece], log_start: int) -> _PieceIndex:
        alive = [piece for piece in pieces if piece[2] + (piece[1] - piece[0]) > log_start]
        suffix = [0] * len(alive)
        lowest = UNBOUNDED
        for i in range(len(alive) - 1, -1, -1):
            lowest = min(lowest, alive[i][2])
            suffix[i] = lowest
        cover_starts: list[int] = []
        cover_ends: list[int] = []
        cover_shift: list[int] = []
        active: list[tuple[int, int]] = []  # (dst - lo, hi): a heap, stale tops dropped lazily
        edges = sorted({lo for lo, _hi, _dst in alive} | {hi for _lo, hi, _dst in alive})
        following = 0
        for a, b in pairwise(edges):
            while following < len(alive) and alive[following][0] <= a:
                lo, hi, dst = alive[following]
                heappush(active, (dst - lo, hi))
                following += 1
            while active and active[0][1] <= a:
                heappop(active)
            if active:
                shift = active[0][0]
                if cover_ends and cover_ends[-1] == a and cover_shift[-1] == shift:
                    cover_ends[-1] = b
                else:
                    cover_starts.append(a)
                    cover_ends.append(b)
                    cover_shift.append(shift)
        return cls([lo for lo, _hi, _dst in alive], suffix, cover_starts, cover_ends, cover_shift)


def _by_position(piece: Piece) -> tuple[int, int, int]:
    return piece[2], piece[0], piece[1]


def _merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _meets(merged: Sequence[tuple[int, int]], starts: Sequence[int], a: int, b: int) -> bool:
    """Whether ``[a, b)`` overlaps one of the sorted, disjoint ``merged`` ranges."""
    index = bisect_right(starts, a) - 1
    if index >= 0 and merged[index][1] > a:
        return True
    return index + 1 < len(merged) and merged[index + 1][0] < b


UNBOUNDED = 2**63


def _doubted(doubt: Sequence[tuple[int, int]], start: int, end: int | None) -> bool:
    """Whether a doubted range meets the source offsets ``[start, end)`` (None: no end): one
    binary search - the ranges are sorted and disjoint, so their ends are sorted too."""
    first = bisect_right(doubt, start, key=_RANGE_END)  # the first range ending after start
    return first < len(doubt) and (end is None or doubt[first][0] < end)


_RANGE_START = itemgetter(0)
_RANGE_END = itemgetter(1)


NO_REPLICA = "no replica on the target"
NO_MAPPING = "no offset mapping for this partition"


class PartitionInputs(NamedTuple):
    """Everything one source partition translates with besides the committed offset: the one
    value per partition that drkit/offsets/inputs.py reads - for the checkpointer, ``drkit
    offsets translate`` and the failover plan's snapshot (``PartitionFacts.inputs``) alike.  A
    tuple: one look-up per offset, not five.

    ``mapping`` None: no offset map for the partition; ``bounds`` None: its replica is not on
    the target (:func:`translate_group` says so, in that order); ``source_end`` /
    ``source_start``: the source's high watermark and log start where known (``unreplicated``
    counts from them - drkit.lag); ``stable``: the source offsets below which the previous
    round's answers still hold (:func:`stable_below`; 0 without a previous round: none)."""

    mapping: PartitionMapping | None
    bounds: TargetBounds | None
    source_end: int | None
    stable: int = 0
    source_start: int | None = None


class Translations(dict[TopicPartition, TranslationResult]):
    """A group's answers by source partition, in partition order; ``fresh``: how many were
    translated anew (the others were the previous round's, carried over)."""

    fresh: int = 0


def translate_group(
    committed: Mapping[TopicPartition, int],
    inputs: Mapping[TopicPartition, PartitionInputs],
    previous: Mapping[TopicPartition, TranslationResult] | None = None,
) -> Translations:
    """Where a group resumes on each partition it committed: the one group translator - of the
    checkpointer, ``drkit offsets translate`` (the readiness drill's shadow translation and the
    monitor's ``/api/translate`` with it) and the failover plan (pure).

    Keyed by source partition, in partition order (a stable document).  A partition without
    inputs, or whose replica is not on the target, gets a :class:`CannotTranslate` saying so,
    then one with no offset map - never a number.  ``previous``: the group's answers of the
    checkpointer's previous round, kept where :func:`carry_over` allows (equal to a fresh
    translation); ``fresh`` on the result counts the others."""
    out = Translations()
    fresh = 0
    for tp, offset in sorted(committed.items(), key=by_partition):
        given = inputs.get(tp)
        if given is None:
            out[tp] = CannotTranslate(tp, offset, NO_REPLICA)
            fresh += 1
            continue
        mapping, bounds, source_end, stable, source_start = given
        if previous is not None and mapping is not None and bounds is not None:
            kept = carry_over(
                previous.get(tp), offset, mapping, bounds, source_end, stable, source_start
            )
            if kept is not None:
                out[tp] = kept
                continue
        out[tp] = translate_partition(tp, offset, mapping, bounds, source_end, source_start)
        fresh += 1
    out.fresh = fresh
    return out


def by_partition(item: tuple[TopicPartition, Any]) -> tuple[str, int]:
    """A sort key for (partition, value) pairs in TopicPartition order, as a plain tuple:
    compared in C, not by one method call per comparison."""
    return item[0].topic, item[0].partition


def translate_partition(
    tp: TopicPartition,
    offset: int,
    mapping: PartitionMapping | None,
    bounds: TargetBounds | None,
    source_end: int | None,
    source_start: int | None = None,
) -> TranslationResult:
    """One partition of :func:`translate_group` (pure): no replica on the target, then no offset
    map, is a :class:`CannotTranslate` saying so; otherwise :func:`translate`."""
    if bounds is None:
        return CannotTranslate(tp, offset, NO_REPLICA)
    if mapping is None:
        return CannotTranslate(tp, offset, NO_MAPPING)
    return translate(offset, mapping, bounds, source_end, source_start)


def translate_back(
    replica: TopicPartition,
    offset: int,
    mapping: PartitionMapping,
    held: Mapping[int, int] | None = None,
    origin_committed: int | None = None,
) -> TranslationResult:
    """Where a group committed at ``offset`` on ``replica`` (the flow's target partition)
    resumes on the partition the flow copies into it, ``mapping.source`` (pure; invariant 8).
    The result's ``source`` is the replica, its ``target`` the origin.

    Past every copy the map places, two more facts count (an unplanned move's way back):
    ``held`` - the replica's records past the map's last copy, by position, that are copies of
    ``mapping.source`` (their source offsets, by provenance: copied, never recorded in the map)
    - and ``origin_committed``, the group's own offset on the origin, committed there before the
    move: records past every copy are the origin's divergent tail, which only the origin ever
    held, so a group committed into it read them there."""
    why = _no_way_back(mapping)
    if why:
        return CannotTranslate(replica, offset, why)
    table = mapping.table
    index = bisect_right(table.dst, offset) - 1  # the last run starting on the replica <= T
    if index < 0 and mapping.adopted is not None:  # MirrorMaker 2 copied what lies below
        return CannotTranslate(replica, offset, "below drkit's adoption point")
    if index >= 0 and offset < table.dst[index] + table.length[index]:
        origin = table.src[index] + (offset - table.dst[index])
    elif index + 1 < len(table):  # T in a gap between copies, or before the first: the next
        origin = table.src[index + 1]
    else:  # past every copy: what the flow had not replicated yet, from its progress
        origin = max(table.src_end, mapping.replicated_end or 0)
        mapped_end = table.dst[-1] + table.length[-1] if len(table) else offset
        read = [source for at, source in (held or {}).items() if mapped_end <= at < offset]
        origin = max(origin, max(read, default=origin - 1) + 1, origin_committed or 0)
    return Translated(replica, mapping.source, offset, origin, Method.RETURNED)


def _no_way_back(mapping: PartitionMapping) -> str:
    if mapping.hashed or mapping.split:
        return "the replica's partitions are not the source's: no way back"
    if not mapping.table.in_target_order:
        return "the replica's copies are not in source order: no exact way back"
    if mapping.adopted is not None and not len(mapping.table):
        return "below drkit's adoption point"
    if mapping.doubt:
        return "offset syncs that failed verification may hide copies: no exact way back"
    return ""


EVERYWHERE = 2**63  # stable_below of a table that did not change: every offset


def stable_below(older: PartitionMapping, newer: PartitionMapping) -> int:
    """The source offsets below which ``newer`` translates as ``older`` did (pure).

    Every offset when the run table is the same, below ``older``'s last run's end when the
    table only grew at its end (:meth:`RunTable.extends` - the replicator copied on), none
    otherwise (a restart's re-replication, a trim, another target, key hashing, an adoption
    written meanwhile).  An empty table translates from the target's bounds and progress:
    none.  Bounds and the source end are not compared here: :func:`carry_over` does.
    """
    if (
        older.target != newer.target
        or older.adopted is not newer.adopted
        or (older.doubt is not newer.doubt and older.doubt != newer.doubt)
        or (older.claimed is not newer.claimed and older.claimed != newer.claimed)
        or (older.unchecked is not newer.unchecked and older.unchecked != newer.unchecked)
        or newer.hashed
        or newer.split
        or older.hashed
        or older.split
        or not newer.table
    ):
        return 0
    if older.table is newer.table:
        return EVERYWHERE
    return older.table.src_end if newer.table.extends(older.table) else 0


def carry_over(
    previous: TranslationResult | None,
    source_offset: int,
    mapping: PartitionMapping,
    bounds: TargetBounds,
    source_end: int | None,
    stable: int,
    source_start: int | None = None,
) -> Translated | None:
    """The previous round's answer for a group that did not move, when it is still the answer;
    None when the offset must be translated again (pure).

    Equal to ``translate(source_offset, mapping, bounds, source_end, source_start)`` whenever
    it returns a
    value (tests/unit/test_translation_reuse.py checks it with hypothesis): the previous answer
    was for the same offset, computed from the runs alone (exact or mapped - not clamped, not
    MirrorMaker 2's rounding, which read the target's log start), the offset lies where the new
    runs translate alike (``stable``, from :func:`stable_below`) and the answer still lies in
    the target log (else it would be clamped now).  Only the records not yet replicated are
    counted again: they move with the source's end.
    """
    if (
        not isinstance(previous, Translated)
        or previous.source_offset != source_offset
        or previous.method not in (Method.EXACT, Method.MAPPED)
        or source_offset >= stable
        or not bounds.start <= previous.target_offset <= bounds.end
    ):
        return None
    unreplicated = _unreplicated(source_offset, mapping, source_end, source_start)
    if unreplicated == previous.unreplicated:
        return previous
    return _with_unreplicated(previous, unreplicated)


def settled(result: TranslationResult, mapping: PartitionMapping | None) -> bool:
    """True when ``result`` (computed with ``mapping``) is kept by :func:`carry_over` in every
    later round whose inputs only widen (:func:`only_widened`) while its group does not move
    (pure): computed from the runs alone, for an offset below the runs' end."""
    return (
        mapping is not None
        and isinstance(result, Translated)
        and result.method in (Method.EXACT, Method.MAPPED)
        and bool(mapping.table)
        and result.source_offset < mapping.table.src_end
    )


def only_widened(older: PartitionInputs, newer: PartitionInputs) -> bool:
    """True when a partition's inputs changed only in ways that keep every :func:`settled`
    answer of ``older`` (pure): the runs are the same or grew at their end (``newer.stable``
    covers everything ``older``'s runs held) and the target log lost nothing at either end.
    Only the answers' unreplicated counts move (they follow the source's end).  Inputs without
    a map or a replica never only widened."""
    return (
        older.mapping is not None
        and older.bounds is not None
        and newer.bounds is not None
        and bool(older.mapping.table)
        and newer.stable >= older.mapping.table.src_end
        and newer.bounds.start <= older.bounds.start
        and newer.bounds.end >= older.bounds.end
    )


def unreplicated_total(offsets: Iterable[int], inputs: PartitionInputs) -> int:
    """The sum of ``Translated.unreplicated`` over groups committed at ``offsets`` on a
    partition with ``inputs`` (pure): what :func:`translate` would count for each, without
    translating (0 without an offset map: nothing is translated there)."""
    if inputs.mapping is None:
        return 0
    span = lacking_span(
        _replicated_end(inputs.mapping), inputs.source_end, log_start=inputs.source_start
    )
    return lacking_total(span, offsets)


def _with_unreplicated(result: Translated, unreplicated: int | None) -> Translated:
    """``dataclasses.replace(result, unreplicated=...)`` at a fraction of its cost (a round does
    it for every partition of every group that did not move while the source grew): the frozen
    value's fields copied as they are, one changed."""
    copy = object.__new__(Translated)
    copy.__dict__.update(result.__dict__, unreplicated=unreplicated)
    return copy


def _finish(
    source_offset: int,
    mapping: PartitionMapping,
    target_offset: int,
    method: Method,
    flags: set[Flag],
    bounds: TargetBounds,
    source: tuple[int | None, int | None],
    known_rereads: int = 0,
) -> Translated:
    """The result, clamped into the target log; ``known_rereads`` adds re-reads the runs do
    not show (MirrorMaker 2's range of an adopted flow); ``source``: the source's end and log
    start, as known."""
    unreachable = 0
    if target_offset < bounds.start:
        unreachable = bounds.start - target_offset
        target_offset, method = bounds.start, Method.CLAMPED
        flags.add(Flag.TARGET_TRUNCATED)
    elif target_offset > bounds.end:
        target_offset, method = bounds.end, Method.CLAMPED
        flags.add(Flag.BEYOND_TARGET_END)
    return built(
        Translated,
        {
            "source": mapping.source,
            "target": mapping.target,
            "source_offset": source_offset,
            "target_offset": target_offset,
            "method": method,
            "expected_rereads": known_rereads + rereads(mapping.runs, source_offset, target_offset),
            "unreplicated": _unreplicated(source_offset, mapping, *source),
            "unreachable": unreachable,
            "flags": frozenset(flags),
        },
    )


def rereads(runs: Sequence[OffsetRun], source_offset: int, target_offset: int) -> int:
    """Mapped records at target offsets ``>= target_offset`` whose source offset is ``< S``.

    ``runs`` may overlap (unmerged); a merged :class:`RunTable` is counted without a full scan.
    """
    if isinstance(runs, RunTable):
        return runs.rereads(source_offset, target_offset)
    count = 0
    for run in runs:
        if run.dst_end <= target_offset or run.src_start >= source_offset:
            continue
        first = max(run.dst_start, target_offset) - run.dst_start
        last = min(run.length, source_offset - run.src_start)
        count += max(0, last - first)
    return count


def _unreplicated(
    source_offset: int,
    mapping: PartitionMapping,
    source_end: int | None,
    source_start: int | None = None,
) -> int | None:
    """Source records the group has not consumed that are not on the target (its RPO):
    drkit.lag's span from the group's position (and from the source's log start when known:
    below it records are gone, a loss event)."""
    return lacking_records(
        _replicated_end(mapping), source_end, log_start=source_start, position=source_offset
    )


def _replicated_end(mapping: PartitionMapping) -> int:
    """The first source offset not replicated: the worker's progress, else the runs' end."""
    if mapping.replicated_end is not None:
        return mapping.replicated_end
    return mapping.runs[-1].src_end if mapping.runs else 0
