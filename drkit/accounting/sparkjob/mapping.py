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
    run = F.broadcast(offset_syncs(spark, spec).alias("m"))
    covers = (
        (F.col("r.src_topic") == F.col("m.src_topic"))
        & (F.col("r.src_partition") == F.col("m.src_partition"))
        & (F.col("r.dst_topic") == F.col("m.dst_topic"))
        & (F.col("r.dst_partition") == F.col("m.dst_partition"))
        & (F.col("r.src_offset") >= F.col("m.run_src"))
        & (F.col("r.src_offset") < F.col("m.run_src") + F.col("m.run_length"))
    )
    exact = F.col("m.run_dst") + (F.col("r.src_offset") - F.col("m.run_src")) == F.col(
        "r.dst_offset"
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
