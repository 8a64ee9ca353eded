"""Stage 5, mapping check: every replica must be described by an offset-sync run of its copy.

Failover translates offsets with drkit's runs (drkit/replication/offset_sync.py); a replica no
run covers (for its own target partition) is invisible to translation - ``unmapped``, which
fails the verdict - and a replica a run covers but with another target offset is
``mismatched`` (a duplicate copy: the run names the copy that counts).
"""

from __future__ import annotations

from typing import Any

from drkit.accounting.sparkjob.accounting import PARTITION_KEYS
from drkit.accounting.sparkjob.read import offset_syncs
from drkit.accounting.sparkjob.schema import Spec

_COUNTS = "src_topic string, src_partition int, unmapped_replicas long, mismatched_replicas long"
_UNMAPPED = (
    "src_topic string, src_partition int, dst_topic string, dst_partition int, "
    "replicas long, first_src_offset long, last_src_offset long"
)


def mapping_check(spark: Any, spec: Spec, replicas: Any | None) -> tuple[Any, Any]:
    """(per source partition ``unmapped_replicas`` and ``mismatched_replicas``; the unmapped
    replicas per source and target partition - the ``unmapped`` table, summary Unmapped)."""
    from pyspark.sql import functions as F

    if replicas is None:
        return spark.createDataFrame([], _COUNTS), spark.createDataFrame([], _UNMAPPED)
    replica = replicas.alias("r")
    run = F.broadcast(_longest_runs(offset_syncs(spark, spec)).alias("m"))
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

    # Semi and anti joins against the broadcast runs keep each replica at most once,
    # map-side: no shuffle of the replicas (a group-by per replica would move all of them).
    def counted(frame: Any, name: str) -> Any:
        return frame.groupBy(*PARTITION_KEYS).agg(F.count(F.lit(1)).alias(name))

    total = counted(replicas, "replicas")
    covered = counted(replica.join(run, covers, "left_semi"), "covered")
    matched = counted(replica.join(run, covers & exact, "left_semi"), "matched")
    counts = (
        total.join(covered, PARTITION_KEYS, "left")
        .join(matched, PARTITION_KEYS, "left")
        .fillna({"covered": 0, "matched": 0})
        .select(
            *PARTITION_KEYS,
            (F.col("replicas") - F.col("covered")).alias("unmapped_replicas"),
            (F.col("covered") - F.col("matched")).alias("mismatched_replicas"),
        )
    )
    unmapped = (
        replica.join(run, covers, "left_anti")
        .groupBy("src_topic", "src_partition", "dst_topic", "dst_partition")
        .agg(
            F.count(F.lit(1)).alias("replicas"),
            F.min("src_offset").alias("first_src_offset"),
            F.max("src_offset").alias("last_src_offset"),
        )
    )
    return counts, unmapped


def _longest_runs(runs: Any) -> Any:
    """One row per run: its longest version.  A run's record is rewritten as it grows (one
    version per commit) and compaction keeps only the newest, but an uncompacted topic holds
    them all; every shorter version lies inside the longest, so dropping them changes no
    answer - and each replica is then tested against one row per run, not one per commit."""
    from pyspark.sql import functions as F

    keys = ["src_topic", "src_partition", "run_src", "dst_topic", "dst_partition", "run_dst"]
    return runs.groupBy(*keys).agg(F.max("run_length").alias("run_length"))
