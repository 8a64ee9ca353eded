"""Stage 5, mapping check: every replica must be described by an offset-sync run of its copy.

Failover translates offsets with drkit's runs (drkit/replication/offset_sync.py); a replica no
run covers (for its own target partition) is invisible to translation - ``unmapped``, which
fails the verdict - and a replica a run covers but with another target offset is
``mismatched`` (a duplicate copy: the run names the copy that counts).

Method: one map-side pass over the (cached) replicas, an anti join against the broadcast runs
that keeps the replicas no run names exactly - none in a healthy flow; only those are looked at
again to tell mismatched from unmapped.  Each replica counts once, however many runs cover it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from drkit.accounting.sparkjob.accounting import PARTITION_KEYS
from drkit.accounting.sparkjob.read import offset_syncs
from drkit.accounting.sparkjob.schema import Spec

_COUNTS = "src_topic string, src_partition int, unmapped_replicas long, mismatched_replicas long"
UNMAPPED_COLUMNS = (
    "src_topic string, src_partition int, dst_topic string, dst_partition int, "
    "replicas long, first_src_offset long, last_src_offset long"
)


class MappingCheck(NamedTuple):
    counts: Any  # per source partition: unmapped_replicas, mismatched_replicas
    unmapped: Any  # unmapped replicas per source and target partition (the ``unmapped`` table)
    cached: Any | None  # what the check cached: the caller unpersists it when done


def mapping_check(spark: Any, spec: Spec, replicas: Any | None) -> MappingCheck:
    """Check every replica against the runs (see the module docstring)."""
    from pyspark.sql import functions as F

    if replicas is None:
        empty = spark.createDataFrame([], _COUNTS), spark.createDataFrame([], UNMAPPED_COLUMNS)
        return MappingCheck(*empty, None)
    replica = replicas.alias("r")
    run = F.broadcast(longest_runs(offset_syncs(spark, spec)).alias("m"))
    covers = (
        (F.col("r.src_topic") == F.col("m.src_topic"))
        & (F.col("r.src_partition") == F.col("m.src_partition"))
        & (F.col("r.dst_topic") == F.col("m.dst_topic"))
        & (F.col("r.dst_partition") == F.col("m.dst_partition"))
        & (F.col("r.src_offset") >= F.col("m.run_src"))
        & (F.col("r.src_offset") < F.col("m.run_src") + F.col("m.run_length"))
    )
    # The copy a run names sits at run_dst + (src_offset - run_src): written with each side's
    # columns apart, Spark hashes on it (an equi-join key) instead of testing every run.
    exact = (F.col("r.dst_offset") - F.col("r.src_offset")) == (
        F.col("m.run_dst") - F.col("m.run_src")
    )

    # Covered by some run but named by none: mismatched (a duplicate copy); covered by none:
    # unmapped.  Semi and anti joins keep each replica at most once.
    inexact = replica.join(run, covers & exact, "left_anti").cache()
    mismatched = inexact.join(run, covers, "left_semi")
    unmapped_rows = inexact.join(run, covers, "left_anti")

    def counted(frame: Any, name: str) -> Any:
        return frame.groupBy(*PARTITION_KEYS).agg(F.count(F.lit(1)).alias(name))

    counts = (
        counted(unmapped_rows, "unmapped_replicas")
        .join(counted(mismatched, "mismatched_replicas"), PARTITION_KEYS, "full")
        .fillna({"unmapped_replicas": 0, "mismatched_replicas": 0})
    )
    unmapped = unmapped_rows.groupBy(
        "src_topic", "src_partition", "dst_topic", "dst_partition"
    ).agg(
        F.count(F.lit(1)).alias("replicas"),
        F.min("src_offset").alias("first_src_offset"),
        F.max("src_offset").alias("last_src_offset"),
    )
    return MappingCheck(counts, unmapped, inexact)


def longest_runs(runs: Any) -> Any:
    """One row per run: its longest version.  A run's record is rewritten as it grows (one
    version per commit) and compaction keeps only the newest, but an uncompacted topic holds
    them all; every shorter version lies inside the longest, so dropping them changes no
    answer - and each replica is then tested against one row per run, not one per commit."""
    from pyspark.sql import functions as F

    keys = ["src_topic", "src_partition", "run_src", "dst_topic", "dst_partition", "run_dst"]
    return runs.groupBy(*keys).agg(F.max("run_length").alias("run_length"))
