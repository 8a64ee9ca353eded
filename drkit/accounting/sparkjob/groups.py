"""Stage 4, groups: what each consumer group would skip or read again after a failover.

Per group and partition, S is its committed source offset and T its position on the target:
the group's own commit there if it has one, else the latest checkpoint for the same S (what an
unplanned failover uses, read from the checkpoints topic), else drkit's live translation (the
spec's).  skipped = source records >= S whose every copy lies before T; read again = records
< S with a copy at or after T; exact = both zero.
"""

from __future__ import annotations

from typing import Any

from drkit.accounting.sparkjob.accounting import PARTITION_KEYS, RECORD_KEYS
from drkit.accounting.sparkjob.read import checkpoints
from drkit.accounting.sparkjob.schema import Spec

_GIVEN = (
    "group string, src_topic string, src_partition int, dst_topic string, s long, "
    "t_given long, kind_given string"
)


def positions(spark: Any, spec: Spec) -> Any:
    """``group, src_topic, src_partition, s, t, t_kind`` for every group position in the spec."""
    from pyspark.sql import functions as F

    given = spark.createDataFrame(
        [
            (
                g["group"],
                g["source_topic"],
                int(g["partition"]),
                g["target_topic"],
                int(g["source_offset"]),
                int(g["target_offset"]),
                g["target_kind"],
            )
            for g in spec["groups"]
        ],
        _GIVEN,
    )
    latest = checkpoints(spark, spec)
    use_checkpoint = (F.col("kind_given") != "target-commit") & (F.col("upstream") == F.col("s"))
    return given.join(
        latest,
        (given["group"] == latest["group"])
        & (given["dst_topic"] == latest["dst_topic"])
        & (given["src_partition"] == latest["dst_partition"]),
        "left",
    ).select(
        given["group"],
        "src_topic",
        "src_partition",
        "s",
        F.when(use_checkpoint, F.col("downstream")).otherwise(F.col("t_given")).alias("t"),
        F.when(use_checkpoint, F.lit("checkpoint")).otherwise(F.col("kind_given")).alias("t_kind"),
    )


def per_group(accounted: Any, group_positions: Any) -> Any:
    """The ``groups`` table (summary schema GroupRow) from the accounted source records."""
    from pyspark.sql import functions as F

    def count_if(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    s, t = F.col("s"), F.col("t")
    replicated = accounted.where("copies > 0").select(*RECORD_KEYS, "last_dst")
    return (
        replicated.join(F.broadcast(group_positions), PARTITION_KEYS)
        .groupBy("group", *PARTITION_KEYS, "s", "t", "t_kind")
        .agg(
            count_if((F.col("src_offset") >= s) & (F.col("last_dst") < t)).alias("skipped"),
            count_if((F.col("src_offset") < s) & (F.col("last_dst") >= t)).alias("read_again"),
        )
        .withColumn("exact", (F.col("skipped") == 0) & (F.col("read_again") == 0))
    )
