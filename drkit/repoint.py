"""Where a remaining standby follows the promoted one from, per origin partition (pure).

Three clusters: ``dc1`` the lost primary, flows dc1->dc2 and dc1->dc3, ``dc2`` promoted.  Each
standby holds its own copy of dc1's partition (the *origin*) in its replica (``dc1.orders`` on
both, prefix policy), and they hold different amounts.  dc3 must now follow dc2: the part of
dc1's data that dc2 holds and dc3 lacks is copied from dc2's replica into dc3's, each record
once (docs/three-dc.md).  :func:`repoint` says, for one origin partition, where that copy starts
and why, and how positions on dc2's replica correspond to positions on dc3's for what both hold
(what a group translation relative to dc2 needs).

Inputs per replica (:class:`Replica`): its flow's merged offset map (``PartitionMapping``: for
each origin offset the copy last in the replica's log), the replica partition's log bounds, and
what was read of its records by provenance (:class:`Scanned`: the ``drkit-src`` origin offset
of each copy) where no run of the map accounts for a position: past the map's last copy (what a
worker wrote and was killed before syncing), in the gaps between its copies (transaction
markers; a killed worker's unsynced copies whose re-copy did not get that far before dc1 was
lost), or the whole log when there is no map.  Every such position must have been read, else
the answer is :class:`CannotTell`: an unread copy may be of any origin offset.

Definitions.  A replica *holds* origin offset ``o`` when its map or its scan places a copy of
``o`` (positions below the log start included: such a record was held and retention removed
it - it is never copied again).  ``last(o)`` is the position of its last copy.  The standby's
*frontier* ``F`` is one past the highest origin offset it holds.

The answer (:class:`FollowFrom`):

* ``start`` (``X``): the lowest ``last(o)`` on the promoted replica over the origin offsets
  ``o >= F`` it holds, clamped into its log (its end when there is none).
* The follow-on copier reads the promoted replica from ``X`` on and copies a record exactly when
  its ``drkit-src`` origin offset is ``>= F`` and not among the origin offsets it already wrote.
  Then (tests/unit/test_repoint.py checks it with hypothesis over random copy histories of both
  flows from one origin log - gaps, filters, restarts that copy records twice, workers killed
  between copy and sync, trimmed maps, retention on both replicas):

  1. Never copy one the standby has: every origin offset the standby holds is ``< F``.
  2. Each once: the copier writes an origin offset at most once, whatever duplicates the
     promoted replica holds past ``X`` (restarts of dc1->dc2's workers).
  3. None skipped: every origin offset ``>= F`` the promoted replica still holds has its last
     copy at ``>= X``, so the copier reads it.  ``to_copy`` is how many there are;
     ``unreachable`` counts those whose every copy retention removed from the promoted
     replica before the move (lost for the standby, and reported).
  4. ``holes``: origin offsets below ``F`` the promoted replica holds in its log and the
     standby never held (a filter or transform only dc1->dc3 applied, a record dc1->dc3
     skipped) - not copied, since the standby's frontier is past them; reported.

* The standby ahead (:class:`StandbyAhead`): the standby holds origin offsets past everything
  the promoted one holds (possible: the choice ranks by the age of the evidence, and a
  partition's counts may differ).  Nothing is copied for the partition; ``records`` origin
  offsets in ``[first, end)`` are on the standby only - the promoted cluster never had them.

* ``composed``: a ``PartitionMapping`` from promoted-replica positions (its "source") to
  standby-replica positions (its "target"): for every origin offset both hold, ``last(o)`` on
  the promoted replica to ``last(o)`` on the standby.  ``drkit.translation.translate`` over it
  (with the standby's bounds) moves a group from the promoted replica to the standby for the
  part copied before the move; the follow-on's own offset syncs carry on from ``X``.  Its
  ``replicated_end`` is ``X``: every promoted position below it is either mapped or never goes
  to the standby (a hole, another partition's record, a marker).

Refused (:class:`CannotTell`, with why): either map spreads the partition over several replica
partitions (key hashing), either carries offset syncs that failed verification (copies the map
cannot place), a position no run accounts for was not read, or a replica without a map
lost records to retention while nothing places a surviving copy (how far it got is unknown).

A replica without a map is judged by its scan alone (``evidence`` ``provenance``): the highest
surviving origin offset is its frontier, which holds as long as no copy of a higher origin
offset was among the records retention removed - true while the copies lie in source order,
as a worker writes them (a crash's re-copy goes back to the last commit and on from there).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.replication.run_map import RunMap, RunTable
from drkit.translation import PartitionMapping, TargetBounds


@dataclass(frozen=True)
class Scanned:
    """Positions ``[start, end)`` of a replica read by provenance, and the copies of the origin
    partition among them: ``(position, origin offset)`` pairs in position order.  Positions not
    listed hold no copy of it (a transaction marker, a compacted-away record, another
    partition's copy)."""

    start: int
    end: int
    copies: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("a scan ends at or after its start")
        positions = [position for position, _origin in self.copies]
        if any(b <= a for a, b in pairwise(positions)):
            raise ValueError("scanned copies are listed in increasing position order")
        if positions and not self.start <= positions[0] <= positions[-1] < self.end:
            raise ValueError("scanned copies lie within the scan")


@dataclass(frozen=True)
class Replica:
    """One standby's replica of the origin partition: where it is, its log, its flow's merged
    offset map (None: no map) and what was read of it by provenance (contiguous reads)."""

    partition: TopicPartition
    bounds: TargetBounds
    mapping: PartitionMapping | None
    scanned: tuple[Scanned, ...] = ()

    def unmapped(self) -> list[tuple[int, int]]:
        """The position ranges ``[a, b)`` of the log no map run accounts for, in order: past
        the map's last copy (the whole log without a map), and the gaps between its copies -
        a transaction marker, or a copy a killed worker wrote and never synced whose re-copy
        did not get that far before the move."""
        start, end = self.bounds.start, self.bounds.end
        table = self.mapping.table if self.mapping is not None else None
        covered = sorted(zip(table.dst, table.length, strict=True)) if table else []
        out: list[tuple[int, int]] = []
        at = start
        for dst, length in covered:
            if dst > at:
                out.append((at, min(dst, end)))
            at = max(at, dst + length)
            if at >= end:
                break
        if at < end:
            out.append((at, end))
        return [(a, b) for a, b in out if a < b]

    def unread(self) -> tuple[int, int] | None:
        """The first unmapped position range no scan covers (None: every one is read)."""
        reads = sorted((scan.start, scan.end) for scan in self.scanned)
        for a, b in self.unmapped():
            at = a
            for lo, hi in reads:
                if lo <= at < hi:
                    at = hi
            if at < b:
                return at, b
        return None


class Evidence(StrEnum):
    MAP = "map"  # the promoted replica's offset map (and its read tail) placed the start
    PROVENANCE = "provenance"  # a replica without a map: judged by its records' drkit-src


@dataclass(frozen=True)
class FollowFrom:
    """The follow-on copy of one origin partition: read the promoted replica from ``start`` and
    copy the records whose origin offset is ``>= frontier`` (each once).  See the module
    docstring for ``to_copy``, ``unreachable``, ``holes`` and ``composed``."""

    origin: TopicPartition
    start: int
    frontier: int
    to_copy: int
    unreachable: int
    holes: int
    composed: PartitionMapping
    evidence: Evidence


@dataclass(frozen=True)
class StandbyAhead:
    """The standby holds ``records`` origin offsets in ``[first, end)`` the promoted replica
    never held, past everything it holds: nothing is copied (``start`` is the promoted
    replica's end); ``composed`` maps what both hold."""

    origin: TopicPartition
    start: int
    first: int
    end: int
    records: int
    composed: PartitionMapping


@dataclass(frozen=True)
class CannotTell:
    origin: TopicPartition
    reason: str


Repointed = FollowFrom | StandbyAhead | CannotTell


def repoint(origin: TopicPartition, promoted: Replica, standby: Replica) -> Repointed:
    """Where ``standby``'s replica of ``origin`` follows ``promoted``'s from (pure; the rules
    and what they guarantee are in the module docstring)."""
    held: list[RunTable] = []
    for role, replica in (("promoted", promoted), ("standby", standby)):
        found = holdings(replica)
        if isinstance(found, str):
            return CannotTell(origin, f"the {role} replica {_named(replica)}: {found}")
        held.append(found)
    ours, theirs = held
    composed = PartitionMapping(promoted.partition, standby.partition, _composed(ours, theirs))
    frontier = theirs.src_end
    top = ours.src_end
    if top < frontier:  # the standby holds origin offsets past everything the promoted holds
        first = next(origin for origin, _d, _n in _pieces(theirs, top, frontier))
        ahead = _count(theirs, first, frontier)
        composed = _with_end(composed, promoted.bounds.end)
        return StandbyAhead(origin, promoted.bounds.end, first, frontier, ahead, composed)
    log_start, log_end = promoted.bounds.start, promoted.bounds.end
    start = min((dst for _o, dst, _n in _pieces(ours, frontier, top)), default=log_end)
    unreachable = sum(
        max(0, min(dst + n, log_start) - dst) for _o, dst, n in _pieces(ours, frontier, top)
    )
    to_copy = _count(ours, frontier, top) - unreachable
    start = min(max(start, log_start), log_end)
    holes = _holes(ours, theirs, frontier, log_start)
    mapped = promoted.mapping is not None and standby.mapping is not None
    evidence = Evidence.MAP if mapped else Evidence.PROVENANCE
    composed = _with_end(composed, start)
    return FollowFrom(origin, start, frontier, to_copy, unreachable, holes, composed, evidence)


def holdings(replica: Replica) -> RunTable | str:
    """The origin offsets ``replica`` holds, each at its last copy's position (merged runs:
    origin offset -> position), or why they cannot be known (pure)."""
    mapping = replica.mapping
    if mapping is not None:
        if mapping.hashed or mapping.split:
            return "its offset map spreads the partition over several replica partitions"
        if mapping.doubt or mapping.claimed is not None or mapping.unchecked is not None:
            return "offset syncs that failed verification may place copies the map lacks"
    unread = replica.unread()
    if unread is not None:
        return f"positions [{unread[0]}, {unread[1]}) are in no offset-map run and were not read"
    target = replica.partition
    gaps = replica.unmapped()
    copies = sorted(
        copy for scan in replica.scanned for copy in scan.copies if _within(copy[0], gaps)
    )
    # In target order, so that the last copy of each origin offset wins (merge_runs' rule).
    placed = list(mapping.table) if mapping is not None else []
    placed.extend(_coalesced(copies))
    runs = RunMap(target)
    for run in sorted(placed, key=_by_position):
        runs.add(target, run)
    table = runs.table()
    if not table and replica.bounds.start > 0:
        return "no copy it places survives in its log to tell how far it got"
    return table


def _within(position: int, ranges: Sequence[tuple[int, int]]) -> bool:
    index = bisect_right(ranges, (position, UNBOUNDED)) - 1
    return index >= 0 and position < ranges[index][1]


UNBOUNDED = 2**63


def _coalesced(copies: Iterable[tuple[int, int]]) -> Iterator[OffsetRun]:
    """Scanned copies, in position order, as runs: consecutive positions holding consecutive
    origin offsets make one run."""
    run: list[int] | None = None  # [src_start, dst_start, length]
    for position, offset in copies:
        if run is not None and offset == run[0] + run[2] and position == run[1] + run[2]:
            run[2] += 1
            continue
        if run is not None:
            yield OffsetRun(*run)
        run = [offset, position, 1]
    if run is not None:
        yield OffsetRun(*run)


def _by_position(run: OffsetRun) -> int:
    return run.dst_start


def _pieces(table: RunTable, lo: int, hi: int) -> Iterator[tuple[int, int, int]]:
    """The parts of ``table``'s runs over origin offsets ``[lo, hi)``: (origin, position,
    length)."""
    for src, dst, length in zip(table.src, table.dst, table.length, strict=True):
        a, b = max(src, lo), min(src + length, hi)
        if a < b:
            yield a, dst + (a - src), b - a


def _count(table: RunTable, lo: int, hi: int) -> int:
    """How many origin offsets in ``[lo, hi)`` ``table`` holds."""
    return sum(n for _o, _d, n in _pieces(table, lo, hi))


def _holes(ours: RunTable, theirs: RunTable, frontier: int, log_start: int) -> int:
    """Origin offsets below ``frontier`` whose last copy on the promoted replica is still in
    its log (at or past ``log_start``) and that the standby never held."""
    held = [(o, o + n) for o, _d, n in _pieces(theirs, 0, frontier)]
    count = 0
    for origin, dst, n in _pieces(ours, 0, frontier):
        skip = max(0, log_start - dst)  # copies retention removed: not the standby's loss
        if skip < n:
            count += _uncovered(origin + skip, origin + n, held)
    return count


def _uncovered(a: int, b: int, ranges: Sequence[tuple[int, int]]) -> int:
    """How many offsets of ``[a, b)`` none of the sorted, disjoint ``ranges`` covers."""
    covered = sum(max(0, min(b, hi) - max(a, lo)) for lo, hi in ranges)
    return (b - a) - covered


def _composed(ours: RunTable, theirs: RunTable) -> list[OffsetRun]:
    """For every origin offset both hold, promoted position -> standby position, as runs
    sorted by promoted position (each position holds one record: they never overlap).  Both
    tables are sorted by origin offset and disjoint: one pass over the two."""
    out: list[OffsetRun] = []
    mine, yours = list(_pieces(ours, 0, ours.src_end)), list(_pieces(theirs, 0, theirs.src_end))
    i = j = 0
    while i < len(mine) and j < len(yours):
        (o2, d2, n2), (o3, d3, n3) = mine[i], yours[j]
        a, b = max(o2, o3), min(o2 + n2, o3 + n3)
        if a < b:
            out.append(OffsetRun(d2 + (a - o2), d3 + (a - o3), b - a))
        if o2 + n2 <= o3 + n3:
            i += 1
        else:
            j += 1
    out.sort()
    return out


def _with_end(composed: PartitionMapping, end: int) -> PartitionMapping:
    return PartitionMapping(composed.source, composed.target, composed.runs, replicated_end=end)


def _named(replica: Replica) -> str:
    return f"{replica.partition.topic}[{replica.partition.partition}]"


def onward(
    promoted: Replica, standby: Replica, copies: Iterable[tuple[int, int]] = ()
) -> list[OffsetRun] | str:
    """The onward map of one origin partition (pure): promoted-replica position -> standby
    position, as runs sorted by promoted position, for every origin offset both replicas hold
    once the follow-on wrote ``copies`` (``(origin offset, standby position)``) - the
    ``composed`` mapping taken *after* the copy.  Persisted as offset syncs of the flow
    promoted->standby for the promoted replica's partition (drkit/offsets/follow_on.py), it
    moves a group that consumed the promoted replica after the promotion onto the standby's
    replica by ordinary translation (a later failover promoted->standby, its checkpoints).

    Each origin offset is mapped from the position of its *last* copy on the promoted replica
    to that of its last copy on the standby (translation's rule).  What that gives a group
    committed at promoted position ``S`` (``translate``: the least standby position mapped
    from a promoted position ``>= S``):

    * never a skip: an origin offset the group did not read has every copy at ``>= S`` on
      the promoted replica, its last one too, so the group resumes at or before its copy;
    * exact in order: with copies in origin order the record at ``S`` maps to its own copy;
    * past a duplicate (a dc1->dc2 restart re-copied a range): the re-copies are the last
      copies, so a group past them resumes right after them and reads none again; a group
      between a first copy and its re-copy re-reads on the standby what it would re-read on
      the promoted replica, never more;
    * holes (only the promoted replica holds them) and records only the standby holds are not
      mapped: a group resumes at the next mapped record (the standby's own records read).

    A function of what both replicas hold, not of the run: a second run, whatever F and X it
    finds, computes the same runs (the promoted replica gets no new writes while its flow from
    the lost cluster is stopped); a run killed after copies and before their syncs leaves
    copies the next run's reads place (``Scanned``), and its map is the same again.  Returns
    why when either replica's holdings cannot be known (as :func:`repoint`)."""
    ours = holdings(promoted)
    if isinstance(ours, str):
        return f"the promoted replica {_named(promoted)}: {ours}"
    theirs = holdings(standby)
    if isinstance(theirs, str):
        return f"the standby replica {_named(standby)}: {theirs}"
    added = sorted((position, offset) for offset, position in copies)
    if added:
        runs = RunMap(standby.partition)
        # Copied runs lie past every earlier copy: added last, they are the last copies.
        for run in sorted([*theirs, *_coalesced(added)], key=_by_position):
            runs.add(standby.partition, run)
        theirs = runs.table()
    return _composed(ours, theirs)


def unplaced(wanted: Sequence[OffsetRun], placed: Sequence[OffsetRun]) -> list[OffsetRun]:
    """The parts of ``wanted`` runs that ``placed`` runs (what the offset syncs already hold,
    merged) do not map identically - what a run still has to write (pure).  A second run over
    a complete map writes nothing; a position ``placed`` maps elsewhere is written again
    (the merge keeps the last target copy, so the onward map's answer stands)."""
    same: dict[int, list[tuple[int, int]]] = {}
    for run in placed:  # identical mappings share src - dst: index them by that delta
        same.setdefault(run.dst_start - run.src_start, []).append(
            (run.src_start, run.src_start + run.length)
        )
    out: list[OffsetRun] = []
    for run in wanted:
        delta = run.dst_start - run.src_start
        at, end = run.src_start, run.src_start + run.length
        for lo, hi in sorted(same.get(delta, ())):
            if hi <= at or lo >= end:
                continue
            if lo > at:
                out.append(OffsetRun(at, at + delta, lo - at))
            at = max(at, hi)
            if at >= end:
                break
        if at < end:
            out.append(OffsetRun(at, at + delta, end - at))
    return out
