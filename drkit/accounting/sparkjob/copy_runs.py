"""Stages 2-5 for a healthy flow: account from copy runs instead of record by record.

A *copy run* is every replica of one source partition in one target partition on one diagonal:
``dst_offset - src_offset`` (the *shift*) is the same for all of them.  Spark finds the runs with
a map-side aggregation (a few rows per Kafka partition leave each task; no record is shuffled),
and a replicator that copies in order writes very few of them: one per stretch between restarts,
source gaps and (exactly-once) commit markers.

The per-record answer follows from the runs alone - exactly, no sampling - when all of this
holds (the flow as drkit leaves it when nothing went wrong):

- the flow has no filters (a filtered record leaves a hole the runs cannot explain);
- every source partition's checked range ``[start, end)`` holds one record per offset (no
  transaction markers, aborted records, compaction gaps or loop records in it: its record
  count is ``end - start``);
- every copy run is *dense*: one replica for each source offset from its first to its last
  (its replicas are distinct - a target offset holds one record - so ``copies == last - first +
  1`` says so);
- inside a partition's range, its runs lie in one target partition, end to end from ``start``
  with no overlap and no hole, in the same order on the target as on the source;
- every copy run lies inside the union of drkit's offset-sync runs with the same partitions and
  shift (each replica is the copy a run names: none unmapped, none mismatched).

Then each source record up to the last replicated one has exactly one copy, the rest are the
unreplicated tail, nothing is missing, duplicated or out of order, and a group's skipped and
read-again counts are sums over the runs.  Anything else - one dense-check failing anywhere -
and :func:`account` returns None: the job accounts record by record (accounting.py), which
knows where the damage is.  The decisions here are pure functions over the collected runs.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from drkit.accounting.sparkjob.accounting import PARTITION_KEYS
from drkit.accounting.sparkjob.groups import positions
from drkit.accounting.sparkjob.mapping import UNMAPPED_COLUMNS, longest_runs
from drkit.accounting.sparkjob.read import offset_syncs, read_source
from drkit.accounting.sparkjob.schema import Spec

# Rows any one collect to the driver may bring back; more runs than this is no healthy flow
# (or a flow too fragmented for the shortcut to pay): the job accounts record by record.
MAX_ROWS = 1_000_000

PartitionKey = tuple[str, int]  # (source topic, source partition)
Route = tuple[str, int, str, int]  # (src topic, src partition, dst topic, dst partition)


@dataclass(frozen=True)
class CopyRun:
    """Replicas of one source partition in one target partition with one shift.

    Invariant: replicas are distinct (one record per target offset), so ``copies`` counts
    distinct source offsets in ``[first, last]``."""

    route: Route
    shift: int  # dst_offset - src_offset of every replica in the run
    first: int  # lowest source offset
    last: int  # highest source offset
    copies: int

    @property
    def dense(self) -> bool:
        return self.copies == self.last - self.first + 1

    def clipped(self, start: int, end: int) -> CopyRun | None:
        """The part of a dense run inside the source range ``[start, end)``, or None."""
        first, last = max(self.first, start), min(self.last, end - 1)
        if first > last:
            return None
        return CopyRun(self.route, self.shift, first, last, last - first + 1)


@dataclass(frozen=True)
class CheckedRange:
    """One source partition's checked range and the records (loops left out) read in it."""

    topic: str
    partition: int
    start: int
    end: int
    records: int

    @property
    def dense(self) -> bool:
        return self.records == self.end - self.start


@dataclass(frozen=True)
class SyncRun:
    """One offset-sync run (its longest version): source offsets ``[src, src + length)``
    copied to ``[dst, dst + length)``."""

    route: Route
    src: int
    dst: int
    length: int

    @property
    def shift(self) -> int:
        return self.dst - self.src


@dataclass(frozen=True)
class GroupPosition:
    group: str
    topic: str
    partition: int
    s: int
    t: int | None
    t_kind: str


# -- pure decisions -----------------------------------------------------------------------


def partition_runs(
    ranges: Sequence[CheckedRange], runs: Iterable[CopyRun]
) -> dict[PartitionKey, list[CopyRun]] | None:
    """Each checked partition's copy runs clipped to its range, in source order - or None when
    any partition fails the shortcut's conditions (module docstring)."""
    by_partition: dict[PartitionKey, list[CopyRun]] = defaultdict(list)
    for run in runs:
        if not run.dense:
            return None
        by_partition[(run.route[0], run.route[1])].append(run)
    placed: dict[PartitionKey, list[CopyRun]] = {}
    for checked in ranges:
        if not checked.dense:
            return None
        key = (checked.topic, checked.partition)
        clipped = [
            c for r in by_partition.get(key, []) if (c := r.clipped(checked.start, checked.end))
        ]
        clipped.sort(key=lambda r: r.first)
        if not _end_to_end(clipped, checked.start):
            return None
        placed[key] = clipped
    return placed


def _end_to_end(runs: Sequence[CopyRun], start: int) -> bool:
    """Runs in one target partition, from ``start`` with no hole or overlap, in the same
    order on the target as on the source."""
    if not runs:
        return True
    if runs[0].first != start or len({r.route for r in runs}) != 1:
        return False
    return all(
        after.first == before.last + 1 and after.first + after.shift > before.last + before.shift
        for before, after in pairwise(runs)
    )


def all_described(copy_runs: Iterable[CopyRun], sync_runs: Iterable[SyncRun]) -> bool:
    """Every replica of every copy run is the copy some offset-sync run names (same route,
    same shift, its source offset inside the run)."""
    covered: dict[tuple[Route, int], list[tuple[int, int]]] = defaultdict(list)
    for sync in sync_runs:
        if sync.length > 0:
            covered[(sync.route, sync.shift)].append((sync.src, sync.src + sync.length - 1))
    merged = {key: _merge(spans) for key, spans in covered.items()}
    starts = {key: [first for first, _ in spans] for key, spans in merged.items()}
    for run in copy_runs:
        key = (run.route, run.shift)
        at = bisect.bisect_right(starts.get(key, []), run.first) - 1
        if at < 0 or merged[key][at][1] < run.last:
            return False
    return True


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive spans merged where they overlap or touch, sorted."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def partition_row(checked: CheckedRange, runs: Sequence[CopyRun]) -> dict[str, Any]:
    """The ``partitions`` row of a partition that passed :func:`partition_runs`."""
    last_replicated = runs[-1].last if runs else None
    once = 0 if last_replicated is None else last_replicated - checked.start + 1
    return {
        "src_topic": checked.topic,
        "src_partition": checked.partition,
        "records": checked.records,
        "replicated_once": once,
        "duplicated_records": 0,
        "extra_copies": 0,
        "missing": 0,
        "filtered": 0,
        "unreplicated_tail": checked.records - once,
        "first_offset": checked.start,
        "last_offset": checked.end - 1,
        "last_replicated": last_replicated,
        "order_violations": 0,
        "unmapped_replicas": 0,
        "mismatched_replicas": 0,
    }


def group_rows(
    positions: Iterable[GroupPosition], runs: dict[PartitionKey, list[CopyRun]]
) -> list[dict[str, Any]]:
    """The ``groups`` rows: per position on a partition with copies, the records >= S whose
    copy lies before T (skipped) and those < S whose copy is at or after T (read again).  A
    record's only copy sits at ``src + shift`` of its run."""
    counted: dict[tuple[str, str, int, int, int | None, str], list[int]] = {}
    for p in positions:
        placed = runs.get((p.topic, p.partition))
        if not placed:
            continue  # no replicated record: no row (as record by record)
        sums = counted.setdefault((p.group, p.topic, p.partition, p.s, p.t, p.t_kind), [0, 0])
        if p.t is None:
            continue
        for r in placed:
            sums[0] += _span(max(r.first, p.s), min(r.last, p.t - r.shift - 1))
            sums[1] += _span(max(r.first, p.t - r.shift), min(r.last, p.s - 1))
    return [
        {
            "group": group,
            "src_topic": topic,
            "src_partition": partition,
            "s": s,
            "t": t,
            "t_kind": kind,
            "skipped": skipped,
            "read_again": again,
            "exact": skipped == 0 and again == 0,
        }
        for (group, topic, partition, s, t, kind), (skipped, again) in counted.items()
    ]


def _span(first: int, last: int) -> int:
    return max(0, last - first + 1)


# -- Spark edges --------------------------------------------------------------------------

_PARTITIONS = (
    "src_topic string, src_partition int, records long, replicated_once long, "
    "duplicated_records long, extra_copies long, missing long, filtered long, "
    "unreplicated_tail long, first_offset long, last_offset long, last_replicated long, "
    "order_violations long, unmapped_replicas long, mismatched_replicas long"
)
_GROUPS = (
    "`group` string, src_topic string, src_partition int, s long, t long, t_kind string, "
    "skipped long, read_again long, exact boolean"
)
EMPTY_TABLES = {
    "missing_ranges": "src_topic string, src_partition int, from_offset long, to_offset long, "
    "records long",
    "duplicates": "src_topic string, src_partition int, src_offset long, copies long, "
    "first_dst long, last_dst long",
    "unmapped": UNMAPPED_COLUMNS,
}


@dataclass(frozen=True)
class RunTables:
    """The job's tables, as Spark frames, when the shortcut applies."""

    partitions: Any
    groups: Any | None
    empty: dict[str, Any]  # missing_ranges, duplicates, unmapped: nothing to report


def account(spark: Any, spec: Spec, replicas: Any) -> RunTables | None:
    """The tables of a healthy flow from its copy runs, or None (account record by record).

    Reads the replicas once (aggregated map-side), the source once (counted per partition),
    the offset-sync runs and the group positions; collects only run-sized results."""
    if spec["filters"]:
        return None
    copy_runs = _copy_runs(replicas)
    if copy_runs is None:
        return None
    ranges = _checked_ranges(spark, spec)
    placed = partition_runs(ranges, copy_runs)
    if placed is None:
        return None
    syncs = _sync_runs(spark, spec, copy_runs)
    if syncs is None or not all_described(copy_runs, syncs):
        return None
    rows = [partition_row(c, placed[(c.topic, c.partition)]) for c in ranges]
    groups = None
    if spec["groups"]:
        groups = spark.createDataFrame(group_rows(_positions(spark, spec), placed), _GROUPS)
    return RunTables(
        spark.createDataFrame(rows, _PARTITIONS),
        groups,
        {name: spark.createDataFrame([], schema) for name, schema in EMPTY_TABLES.items()},
    )


def _route(row: Any) -> Route:
    return (row.src_topic, row.src_partition, row.dst_topic, row.dst_partition)


def _collect_bounded(frame: Any) -> list[Any] | None:
    rows = frame.limit(MAX_ROWS + 1).collect()
    return None if len(rows) > MAX_ROWS else rows


def _copy_runs(replicas: Any) -> list[CopyRun] | None:
    from pyspark.sql import functions as F

    route = ["src_topic", "src_partition", "dst_topic", "dst_partition"]
    rows = _collect_bounded(
        replicas.groupBy(*route, (F.col("dst_offset") - F.col("src_offset")).alias("shift")).agg(
            F.min("src_offset").alias("first"),
            F.max("src_offset").alias("last"),
            F.count(F.lit(1)).alias("copies"),
        )
    )
    if rows is None:
        return None
    return [CopyRun(_route(r), r.shift, r.first, r.last, r.copies) for r in rows]


def _checked_ranges(spark: Any, spec: Spec) -> list[CheckedRange]:
    from pyspark.sql import functions as F

    counted = {
        (r.src_topic, r.src_partition): r.records
        for r in read_source(spark, spec)
        .groupBy(*PARTITION_KEYS)
        .agg(F.count(F.lit(1)).alias("records"))
        .collect()
    }
    return [
        CheckedRange(
            p["source_topic"],
            int(p["partition"]),
            p["source_start"],
            p["source_end"],
            counted.get((p["source_topic"], int(p["partition"])), 0),
        )
        for p in spec["partitions"]
        if p["source_end"] > p["source_start"]
    ]


def _sync_runs(spark: Any, spec: Spec, copy_runs: Sequence[CopyRun]) -> list[SyncRun] | None:
    """The offset-sync runs on the copy runs' routes and shifts (the others cannot describe
    them), or None when there are more than :data:`MAX_ROWS`."""
    from pyspark.sql import functions as F

    keys = "src_topic string, src_partition int, dst_topic string, dst_partition int, shift long"
    wanted = spark.createDataFrame(sorted({(*r.route, r.shift) for r in copy_runs}), keys)
    runs = longest_runs(offset_syncs(spark, spec)).withColumn(
        "shift", F.col("run_dst") - F.col("run_src")
    )
    on = ["src_topic", "src_partition", "dst_topic", "dst_partition", "shift"]
    rows = _collect_bounded(runs.join(F.broadcast(wanted), on, "left_semi"))
    if rows is None:
        return None
    return [SyncRun(_route(r), r.run_src, r.run_dst, r.run_length) for r in rows]


def _positions(spark: Any, spec: Spec) -> list[GroupPosition]:
    return [
        GroupPosition(r["group"], r.src_topic, r.src_partition, r.s, r.t, r.t_kind)
        for r in positions(spark, spec).collect()
    ]
