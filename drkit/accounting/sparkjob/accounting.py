"""Stages 2 and 3, join and per-partition accounting: every source record with its copies.

``copies == 1`` replicated once, ``> 1`` duplicated, ``== 0``: filtered (the flow's filters drop
it on purpose), missing (below the highest replicated source offset of its partition) or the
unreplicated tail (above it).  Order: among first copies, per key, a source offset lower than
the previous one in target order is a violation.  All distributed; only per-partition
aggregates and the (few) missing ranges reach the driver.
"""

from __future__ import annotations

from typing import Any

from drkit.accounting.sparkjob.rules import dropped_by_filters

RECORD_KEYS = ["src_topic", "src_partition", "src_offset"]
PARTITION_KEYS = ["src_topic", "src_partition"]


# Records per shuffle partition the join is sized for: the copies side of a partition is held
# in one hash table (a few hundred bytes per record), which must fit an executor's share.
RECORDS_PER_SHUFFLE_PARTITION = 1_000_000


def shuffle_partitions(records: int, configured: int) -> int:
    """Shuffle partitions for ``records`` source records: at least ``configured`` (the session's
    setting is never lowered), more when the hash join's partitions would outgrow
    :data:`RECORDS_PER_SHUFFLE_PARTITION`."""
    return max(configured, -(-records // RECORDS_PER_SHUFFLE_PARTITION))


def join_copies(source: Any, replicas: Any | None, filters: list[dict[str, Any]]) -> Any:
    """Source records with ``copies``, ``first_dst``, ``last_dst`` (target offsets of the
    first and last copy) and ``filtered``; headers dropped.  Cache the result: every later
    stage reads it."""
    from pyspark.sql import functions as F

    if replicas is None:
        copies = (
            source.select(*RECORD_KEYS)
            .limit(0)
            .withColumn("copies", F.lit(0))
            .withColumn("first_dst", F.lit(None).cast("long"))
            .withColumn("last_dst", F.lit(None).cast("long"))
        )
    else:
        copies = replicas.groupBy(*RECORD_KEYS).agg(
            F.count(F.lit(1)).alias("copies"),
            F.min("dst_offset").alias("first_dst"),
            F.max("dst_offset").alias("last_dst"),
        )
    # A hash join on the copies (already hash-partitioned by the record by their aggregation):
    # only the source is shuffled, and neither side is sorted as a sort-merge join would.  It
    # does not spill: job.run sizes the shuffle partitions (shuffle_partitions) to keep each
    # partition's table small.
    joined = source.join(copies.hint("shuffle_hash"), RECORD_KEYS, "left").fillna({"copies": 0})
    return _mark_filtered(joined, filters).drop("headers")


def _mark_filtered(joined: Any, filters: list[dict[str, Any]]) -> Any:
    """Add ``filtered``: no copy exists because the flow's filters drop the record on purpose."""
    from pyspark.sql import functions as F

    if not filters:
        return joined.withColumn("filtered", F.lit(False))

    def dropped(key: bytes | None, headers: list[Any] | None) -> bool:
        pairs = [
            (h["key"], None if h["value"] is None else bytes(h["value"])) for h in headers or []
        ]
        return dropped_by_filters(filters, None if key is None else bytes(key), pairs)

    is_dropped = F.udf(dropped, "boolean", useArrow=False)  # no pandas needed on executors
    # Python UDFs are evaluated for every row of their input, even inside CASE WHEN: split
    # so the function only sees unreplicated records (few, in a healthy flow).
    unreplicated = joined.where(F.col("copies") == 0)
    return (
        joined.where(F.col("copies") > 0)
        .withColumn("filtered", F.lit(False))
        .unionByName(
            unreplicated.withColumn(
                "filtered", F.coalesce(is_dropped("key", "headers"), F.lit(False))
            )
        )
    )


def with_last_replicated(joined: Any) -> Any:
    """Add ``last_replicated``: the highest source offset of the partition with a copy."""
    from pyspark.sql import functions as F

    high = (
        joined.where("copies > 0")
        .groupBy(*PARTITION_KEYS)
        .agg(F.max("src_offset").alias("last_replicated"))
    )
    return joined.join(F.broadcast(high), PARTITION_KEYS, "left")


def _missing() -> Any:
    from pyspark.sql import functions as F

    return (
        (F.col("copies") == 0)
        & ~F.col("filtered")
        & F.col("last_replicated").isNotNull()
        & (F.col("src_offset") < F.col("last_replicated"))
    )


def _tail() -> Any:
    from pyspark.sql import functions as F

    return (
        (F.col("copies") == 0)
        & ~F.col("filtered")
        & (F.col("last_replicated").isNull() | (F.col("src_offset") > F.col("last_replicated")))
    )


def _order_violations(accounted: Any) -> Any:
    """Per partition: first copies whose target order contradicts their key's source order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_key = Window.partitionBy("src_topic", "src_partition", "key").orderBy("first_dst")
    return (
        accounted.where("copies > 0 AND key IS NOT NULL")
        .withColumn("previous", F.lag("src_offset").over(per_key))
        .groupBy(*PARTITION_KEYS)
        .agg(
            F.sum(F.when(F.col("previous") > F.col("src_offset"), 1).otherwise(0)).alias(
                "order_violations"
            )
        )
    )


def per_partition(accounted: Any, mapping_counts: Any) -> Any:
    """The ``partitions`` table: counts per source partition (summary schema PartitionRow).

    ``accounted`` is :func:`join_copies` then :func:`with_last_replicated`; ``mapping_counts``
    the offset-sync check's per-partition counts.
    """
    from pyspark.sql import functions as F

    def count_if(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    copies = F.col("copies")
    return (
        accounted.groupBy(*PARTITION_KEYS)
        .agg(
            F.count(F.lit(1)).alias("records"),
            count_if(copies == 1).alias("replicated_once"),
            count_if(copies > 1).alias("duplicated_records"),
            F.sum(F.when(copies > 1, copies - 1).otherwise(0)).alias("extra_copies"),
            count_if(_missing()).alias("missing"),
            count_if(F.col("filtered")).alias("filtered"),
            count_if(_tail()).alias("unreplicated_tail"),
            F.min("src_offset").alias("first_offset"),
            F.max("src_offset").alias("last_offset"),
            F.max("last_replicated").alias("last_replicated"),
        )
        .join(_order_violations(accounted), PARTITION_KEYS, "left")
        .join(mapping_counts, PARTITION_KEYS, "left")
        .fillna({"order_violations": 0, "unmapped_replicas": 0, "mismatched_replicas": 0})
    )


def missing_ranges(accounted: Any) -> Any:
    """The ``missing_ranges`` table: missing records as runs of consecutive source records
    (gaps and islands: offset gaps that hold no record do not split a run)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    in_offset_order = Window.partitionBy(*PARTITION_KEYS).orderBy("src_offset")
    numbered = accounted.withColumn("n", F.row_number().over(in_offset_order))
    missing = numbered.where(_missing()).withColumn(
        "island", F.col("n") - F.row_number().over(in_offset_order)
    )
    return (
        missing.groupBy(*PARTITION_KEYS, "island")
        .agg(
            F.min("src_offset").alias("from_offset"),
            F.max("src_offset").alias("to_offset"),
            F.count(F.lit(1)).alias("records"),
        )
        .drop("island")
    )


def duplicates(accounted: Any) -> Any:
    """The ``duplicates`` table: every source record with more than one copy."""
    return accounted.where("copies > 1").select(*RECORD_KEYS, "copies", "first_dst", "last_dst")
