"""The offset-sync runs of one source partition: compact, merged incrementally, trimmable.

Two views of the same runs:

* *originals* - the runs as stored on the offset-sync topic, one per record key (target
  partition + ``dst_start``), the longest version of each.  They are what a fresh reader of the
  topic sees, so they decide what to trim and which keys to tombstone;
* the *merged* map (:func:`merge_runs` semantics): for every source
  offset the copy that comes last in the target log, as non-overlapping runs sorted by
  ``src_start``.  Always equal to the merge of the originals.

Both live in ``array('q')`` columns (8 bytes per number instead of three Python objects per
run), so a million runs cost tens of megabytes.  The merged map is kept up to date
incrementally while records arrive in target order - the order the worker writes them - at
O(log n) per record plus the runs a restart overrides; anything else (an older run arriving
late, a tombstone) marks it stale and the next :meth:`RunMap.table` rebuilds it from the
originals (a plain copy when they never overlap, which is the case without restarts).

:class:`RunTable` is the immutable snapshot translation reads; derived indexes are computed
once per snapshot.

Trimming (:meth:`RunMap.expired`).  A run can be dropped when it lies entirely below the source
partition's log start *and* entirely below its target partition's log start: then none of its
records exists on either cluster.  Translation over the trimmed map gives the same T as over
the full map whenever the full map's T was inside the target log, and otherwise a position that
still skips no record existing on the target (tests/unit/test_translation.py checks both).
Trimming on the source's log start alone would not be safe: a group committed below it would
resume past copies the target still holds.  The newest run of each target partition is never
dropped: it may still be growing (the worker re-writes the open run at every commit), and a
tombstone racing with its next version could delete that version.

Bound.  Only runs with a record on one of the two clusters survive, so a partition keeps at most
(discontinuities among its retained records) + 1 runs per target partition - e.g. an
exactly-once target (one marker per commit) keeps retention / commit interval runs, a
transactional source one per source transaction within retention - instead of one per commit
forever.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from itertools import accumulate, compress, islice, repeat
from typing import overload

from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync


class RunTable(Sequence[OffsetRun]):
    """Merged runs of one source partition (sorted by ``src_start``, non-overlapping); frozen.

    Indexing gives :class:`OffsetRun` values; the columns ``src``, ``dst`` and ``length`` are
    the same data for fast scans and must not be modified.
    """

    __slots__ = ("__dict__", "dst", "length", "src")

    def __init__(
        self,
        src: array[int],
        dst: array[int],
        length: array[int],
        in_target_order: bool | None = None,
    ) -> None:
        """Wrap columns that already satisfy the invariants (see :meth:`of` to check them).

        ``in_target_order`` may be passed when known (see the property of that name).
        """
        self.src = src
        self.dst = dst
        self.length = length
        if in_target_order is not None:
            self.__dict__["in_target_order"] = in_target_order

    @classmethod
    def of(cls, runs: Iterable[OffsetRun]) -> RunTable:
        """A table from runs; raises ValueError unless they are sorted by ``src_start``."""
        if isinstance(runs, RunTable):
            return runs
        listed = list(runs)
        table = cls(
            array("q", (r.src_start for r in listed)),
            array("q", (r.dst_start for r in listed)),
            array("q", (r.length for r in listed)),
        )
        if not all(map(operator.le, table.src, islice(table.src, 1, None))):
            raise ValueError("runs must be sorted by src_start")
        return table

    def __len__(self) -> int:
        return len(self.src)

    @overload
    def __getitem__(self, index: int) -> OffsetRun: ...

    @overload
    def __getitem__(self, index: slice) -> list[OffsetRun]: ...

    def __getitem__(self, index: int | slice) -> OffsetRun | list[OffsetRun]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return OffsetRun(self.src[index], self.dst[index], self.length[index])

    def __iter__(self) -> Iterator[OffsetRun]:
        return map(OffsetRun, self.src, self.dst, self.length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunTable):
            return (self.src, self.dst, self.length) == (other.src, other.dst, other.length)
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunTable({list(self)!r})"

    @cached_property
    def in_target_order(self) -> bool:
        """Whether each run ends on the target before the next one starts (``dst_end[i] <=
        dst_start[i + 1]``): the source order is the target order, as without restarts.  Then
        the indexes below are the columns themselves and need no computing."""
        ends = map(operator.add, self.dst, self.length)
        return all(map(operator.le, ends, islice(self.dst, 1, None)))

    @cached_property
    def suffix_min_dst(self) -> Sequence[int]:
        """``suffix_min_dst[i]`` = the smallest ``dst_start`` among runs ``i..``."""
        if self.in_target_order:
            return self.dst
        out = array("q", accumulate(reversed(self.dst), min))
        out.reverse()
        return out

    @cached_property
    def prefix_max_dst_end(self) -> Sequence[int]:
        """``prefix_max_dst_end[i]`` = the largest ``dst_end`` among runs ``..i``."""
        ends = map(operator.add, self.dst, self.length)
        return array("q", ends if self.in_target_order else accumulate(ends, max))

    @cached_property
    def dst_end(self) -> int:
        """The target position after the last replicated record."""
        if self.in_target_order:
            return self.dst[-1] + self.length[-1]
        return int(max(map(operator.add, self.dst, self.length)))

    @property
    def src_end(self) -> int:
        """The source offset after the last run (0 for an empty table)."""
        return self.src[-1] + self.length[-1] if self.src else 0

    def extends(self, older: RunTable) -> bool:
        """Whether this table is ``older`` grown at its end only: the same runs, the last one
        possibly longer, then runs whose copies all lie after every copy ``older`` mapped.

        Then every source offset below ``older.src_end`` has the same copies, the same later
        runs' smallest ``dst_start`` and the same re-reads in both: it translates alike
        (:func:`drkit.translation.stable_below`).  This is how a table grows while the
        replicator copies on without a restart.
        """
        n = len(older)
        if n == 0 or len(self) < n:
            return False
        last = n - 1
        if (
            self.src[:n] != older.src[:n]
            or self.dst[:n] != older.dst[:n]
            or self.length[:last] != older.length[:last]
            or self.length[last] < older.length[last]
        ):
            return False
        return n == len(self) or min(self.dst[n:]) >= older.dst_end

    def rereads(self, source_offset: int, target_offset: int) -> int:
        """Records with source offset ``< S`` mapped at target offsets ``>= T``.

        Walks back from the last run starting before S while some earlier run still ends after
        T: in a history without crashes mid re-replication that is at most one run.
        """
        src, dst, length = self.src, self.dst, self.length
        count = 0
        index = bisect_left(src, source_offset) - 1
        if self.in_target_order:  # run ends grow with the index: stop at the first before T
            while index >= 0 and dst[index] + length[index] > target_offset:
                first = max(dst[index], target_offset) - dst[index]
                last = min(length[index], source_offset - src[index])
                count += max(0, last - first)
                index -= 1
            return count
        reach = self.prefix_max_dst_end
        while index >= 0 and reach[index] > target_offset:
            first = max(dst[index], target_offset) - dst[index]
            last = min(length[index], source_offset - src[index])
            count += max(0, last - first)
            index -= 1
        return count


class _Originals:
    """The stored runs to one target partition, sorted by ``dst_start`` (one per record key).

    Removal only marks a run (``deleted``, by ``dst_start``); :meth:`compact` drops the marked
    runs in one pass, so a batch of tombstones costs O(n) instead of O(n) each.
    """

    __slots__ = ("deleted", "dst", "length", "src")

    def __init__(self) -> None:
        self.src: array[int] = array("q")
        self.dst: array[int] = array("q")
        self.length: array[int] = array("q")
        self.deleted: set[int] = set()

    def __len__(self) -> int:
        return len(self.dst) - len(self.deleted)

    def upsert(self, src_start: int, dst_start: int, length: int) -> tuple[bool, bool]:
        """Store a run unless a version at least as long is stored: (changed, appended)."""
        dst = self.dst
        if not dst or dst_start > dst[-1]:
            self.src.append(src_start)
            dst.append(dst_start)
            self.length.append(length)
            return True, True
        at = bisect_left(dst, dst_start)
        if at < len(dst) and dst[at] == dst_start:
            if dst_start in self.deleted:  # written again after its tombstone
                self.deleted.discard(dst_start)
                self.src[at], self.length[at] = src_start, length
                return True, False
            same_start = self.src[at] == src_start
            if same_start and self.length[at] >= length:
                return False, False
            self.src[at], self.length[at] = src_start, length
            # A longer version of the newest run extends it in place; anything else (an older
            # run, or another source offset at the same target offset) needs a rebuild.
            return True, same_start and at == len(dst) - 1
        self.src.insert(at, src_start)
        dst.insert(at, dst_start)
        self.length.insert(at, length)
        return True, False

    def remove(self, src_start: int, dst_start: int) -> bool:
        at = bisect_left(self.dst, dst_start)
        if (
            at == len(self.dst)
            or self.dst[at] != dst_start
            or self.src[at] != src_start
            or dst_start in self.deleted
        ):
            return False
        self.deleted.add(dst_start)
        return True

    def compact(self) -> None:
        """Drop the runs marked deleted (C-level passes over the columns)."""
        if not self.deleted:
            return
        keep = list(map(operator.not_, map(self.deleted.__contains__, self.dst)))
        self.src = array("q", compress(self.src, keep))
        self.dst = array("q", compress(self.dst, keep))
        self.length = array("q", compress(self.length, keep))
        self.deleted = set()

    def runs(self) -> Iterator[OffsetRun]:
        """Every stored run in target order (call :meth:`compact` first)."""
        return map(OffsetRun, self.src, self.dst, self.length)


class RunMap:
    """Originals and merged runs of one source partition; mutable, not thread-safe.

    ``version`` changes whenever the merged runs may have changed; :meth:`table` returns the
    same snapshot object while it does not.
    """

    def __init__(self, source: TopicPartition) -> None:
        self.source = source
        self.version = 0
        self._targets: list[TopicPartition] = []
        self._target_ids: dict[TopicPartition, int] = {}
        self._originals: dict[int, _Originals] = {}
        # merged columns, sorted by src
        self._src: array[int] = array("q")
        self._dst: array[int] = array("q")
        self._len: array[int] = array("q")
        self._tid: array[int] = array("i")
        self._last: tuple[int, int] | None = None  # target order of the last applied original
        self._ordered: bool | None = True  # RunTable.in_target_order, when known for sure
        self._recent: TopicPartition | None = None  # the last target seen, and its id
        self._recent_id = 0
        self._stale = False
        self._snapshot: tuple[int, RunTable] | None = None

    # -- input ----------------------------------------------------------------------------

    def add(self, target: TopicPartition, run: OffsetRun) -> bool:
        """One offset-sync record; returns whether anything changed."""
        return self.add_run(target, run.src_start, run.dst_start, run.length)

    def add_run(self, target: TopicPartition, src_start: int, dst_start: int, length: int) -> bool:
        """:meth:`add` without building an OffsetRun (the store's per-record path)."""
        if target is self._recent:  # records of one source partition go to one target
            tid = self._recent_id
        else:
            found = self._target_ids.get(target)
            if found is None:
                found = self._target_ids[target] = len(self._targets)
                self._targets.append(target)
                self._originals[found] = _Originals()
            tid = self._recent_id = found
            self._recent = target
        changed, appended = self._originals[tid].upsert(src_start, dst_start, length)
        if not changed:
            return False
        self.version += 1
        order = (target.partition, dst_start)
        if self._stale or not appended or (self._last is not None and order < self._last):
            # Out of target order (or runs to several target partitions, a split partition that
            # translation refuses anyway): merged again from the originals when next asked.
            self._stale = True
            return True
        self._apply_latest(tid, src_start, dst_start, length)
        self._last = order
        return True

    def remove(self, target: TopicPartition, src_start: int, dst_start: int) -> bool:
        """A tombstone for the record key (target, src_start, dst_start)."""
        tid = self._target_ids.get(target)
        if tid is None or not self._originals[tid].remove(src_start, dst_start):
            return False
        self.version += 1
        self._stale = True
        return True

    # -- output ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Stored runs (originals): what this partition costs on the topic and in memory."""
        return sum(len(o) for o in self._originals.values())

    def table(self) -> RunTable:
        """The merged runs as an immutable snapshot."""
        if self._stale:
            self._rebuild()
        if self._snapshot is None or self._snapshot[0] != self.version:
            table = RunTable(
                array("q", self._src),
                array("q", self._dst),
                array("q", self._len),
                self._ordered,
            )
            self._snapshot = (self.version, table)
        return self._snapshot[1]

    def targets(self) -> frozenset[TopicPartition]:
        """Target partitions with stored runs (more than one: a split partition)."""
        return frozenset(self._targets[tid] for tid, o in self._originals.items() if len(o))

    def merged(self) -> list[tuple[TopicPartition, OffsetRun]]:
        """The merged runs with their target partitions, sorted by ``src_start``."""
        table = self.table()
        return [(self._targets[t], run) for t, run in zip(self._tid, table, strict=True)]

    def expired(
        self, source_start: int, target_starts: Mapping[TopicPartition, int]
    ) -> list[tuple[TopicPartition, OffsetRun]]:
        """Stored runs with no record left on either cluster (see the module docstring).

        ``target_starts`` gives each target partition's log start; runs to a target partition
        without a known start are kept.
        """
        out: list[tuple[TopicPartition, OffsetRun]] = []
        for tid, originals in self._originals.items():
            target = self._targets[tid]
            target_start = target_starts.get(target)
            originals.compact()
            src, dst, length = originals.src, originals.dst, originals.length
            if target_start is None or len(dst) < 2:
                continue
            # dst ranges of one target partition never overlap: those starting at or before the
            # target's log start are a prefix; never the newest (last) run.  The per-run test
            # runs at C level: this is checked every trim interval over the whole map.
            below = min(bisect_right(dst, target_start), len(dst) - 1)
            gone_there = map(
                operator.le,
                map(operator.add, islice(dst, below), islice(length, below)),
                repeat(target_start),
            )
            gone_here = map(
                operator.le,
                map(operator.add, islice(src, below), islice(length, below)),
                repeat(source_start),
            )
            for i in compress(range(below), map(operator.and_, gone_there, gone_here)):
                out.append((target, OffsetRun(src[i], dst[i], length[i])))
        return out

    # -- merging --------------------------------------------------------------------------

    def _apply_latest(self, tid: int, start: int, dst_start: int, run_length: int) -> None:
        """Apply a run that comes after every applied one in target order: it wins its range."""
        src, dst, length, tids = self._src, self._dst, self._len, self._tid
        end = start + run_length
        if src and start == src[-1] and dst_start == dst[-1] and tids[-1] == tid:
            length[-1] = max(length[-1], run_length)  # the open run, re-written longer
            return
        if not src or start >= src[-1] + length[-1]:  # steady state: a new run at the head
            if src and dst_start < dst[-1] + length[-1]:
                self._ordered = None  # not after the previous run on the target: check later
            src.append(start)
            dst.append(dst_start)
            length.append(run_length)
            tids.append(tid)
            return
        low = max(bisect_right(src, start) - 1, 0)
        high = bisect_left(src, end)
        pieces: list[tuple[int, int, int, int]] = []
        after: list[tuple[int, int, int, int]] = []
        for i in range(low, high):
            s, d, n, t = src[i], dst[i], length[i], tids[i]
            if s + n <= start:  # ends before the run: untouched
                pieces.append((s, d, n, t))
                continue
            if s < start:
                pieces.append((s, d, start - s, t))
            if s + n > end:
                cut = end - s
                after.append((end, d + cut, n - cut, t))
        pieces.append((start, dst_start, run_length, tid))
        pieces.extend(after)
        self._ordered = None  # a restart overrode runs: RunTable checks the order itself
        src[low:high] = array("q", (p[0] for p in pieces))
        dst[low:high] = array("q", (p[1] for p in pieces))
        length[low:high] = array("q", (p[2] for p in pieces))
        tids[low:high] = array("i", (p[3] for p in pieces))

    def _rebuild(self) -> None:
        """Merge the originals again (after out-of-order records or tombstones)."""
        self._stale = False
        self._last = None
        self._ordered = True
        for originals in self._originals.values():
            originals.compact()
        live = [(tid, o) for tid, o in self._originals.items() if o.dst]
        if len(live) == 1:
            ((tid, originals),) = live
            ends = map(operator.add, originals.src, originals.length)
            if all(map(operator.le, ends, islice(originals.src, 1, None))):
                # Never overlapping and in source order (no restarts): merged == originals.
                self._src = array("q", originals.src)
                self._dst = array("q", originals.dst)
                self._len = array("q", originals.length)
                self._tid = array("i", [tid]) * len(originals.src)
                ends = map(operator.add, originals.dst, originals.length)
                if not all(map(operator.le, ends, islice(originals.dst, 1, None))):
                    self._ordered = None  # overlapping copies on the target: never by drkit
                if originals.dst:
                    self._last = (self._targets[tid].partition, originals.dst[-1])
                return
        self._src, self._dst, self._len, self._tid = (
            array("q"),
            array("q"),
            array("q"),
            array("i"),
        )
        streams = [
            ((self._targets[tid].partition, run.dst_start, tid, run) for run in o.runs())
            for tid, o in live
        ]
        for partition, dst_start, tid, run in heapq.merge(*streams):
            self._apply_latest(tid, run.src_start, dst_start, run.length)
            self._last = (partition, dst_start)


def merge_runs(syncs: Iterable[OffsetSync]) -> dict[TopicPartition, list[OffsetSync]]:
    """Fold offset-sync records into non-overlapping runs per source partition.

    Re-replication after a crash writes a second target copy of some source records.  For each
    source offset the map keeps the copy that comes *last in the target log*: a consumer that
    resumes there reads every later source record exactly once more and nothing it already
    processed, while resuming at an earlier copy would re-read the duplicated range.  So runs are
    applied in target order and a later run overrides the source range it covers.

    Returns runs sorted by ``src_start``; within a source partition they never overlap.  The
    work is done by :class:`RunMap`, which the offset-sync store keeps per partition and
    updates incrementally.
    """
    maps: dict[TopicPartition, RunMap] = {}
    for sync in syncs:
        found = maps.get(sync.source)
        if found is None:
            found = maps[sync.source] = RunMap(sync.source)
        found.add(sync.target, sync.run)
    return {
        source: [OffsetSync(source, target, run) for target, run in found.merged()]
        for source, found in maps.items()
    }
