"""Stage 1, read: the source range, the replicas and drkit's bookkeeping topics, from Kafka.

Every read of either cluster sees committed data only (``kafka.isolation.level =
read_committed``; the Java client's default is read_uncommitted): records of aborted
transactions were never data on the source, and aborted copies on the target (an exactly-once
worker killed mid-transaction leaves them) are not copies.  The spec's ranges end at the last
stable offset, so no read waits for an open transaction.
"""

from __future__ import annotations

import json
from typing import Any

from drkit.accounting.sparkjob.rules import loop_column
from drkit.accounting.sparkjob.schema import Spec

SOURCE_HEADER = "drkit-src"
ORIGIN_HEADER = "drkit-origin"
ISOLATION_OPTION = "kafka.isolation.level"
READ_COMMITTED = "read_committed"

# {topic: {partition (as a string, Spark's JSON form): (start, end exclusive)}}
Ranges = dict[str, dict[str, tuple[int, int]]]

SOURCE_COLUMNS = (
    "src_topic string, src_partition int, src_offset long, key binary, "
    "headers array<struct<key:string,value:binary>>"
)


def source_ranges(spec: Spec) -> Ranges:
    """The non-empty source ranges to check."""
    ranges: Ranges = {}
    for p in spec["partitions"]:
        if p["source_end"] > p["source_start"]:
            ranges.setdefault(p["source_topic"], {})[str(p["partition"])] = (
                p["source_start"],
                p["source_end"],
            )
    return ranges


def target_ranges(spec: Spec) -> Ranges:
    """Every non-empty partition of every replica topic."""
    ranges: Ranges = {}
    for p in spec["partitions"]:
        for where, (start, end) in p["target_ranges"].items():
            topic, partition = where.rsplit(":", 1)
            if end > start:
                ranges.setdefault(topic, {})[partition] = (start, end)
    return ranges


def _kafka(spark: Any, options: dict[str, str], ranges: Ranges) -> Any:
    """Records of ``ranges``, headers included."""
    starting = {t: {p: r[0] for p, r in parts.items()} for t, parts in ranges.items()}
    ending = {t: {p: r[1] for p, r in parts.items()} for t, parts in ranges.items()}
    assign = {t: [int(p) for p in parts] for t, parts in ranges.items()}
    return (
        spark.read.format("kafka")
        .options(**options)
        .option(ISOLATION_OPTION, READ_COMMITTED)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        # Compacted topics and transaction markers leave offset gaps: not data loss.
        .option("failOnDataLoss", "false")
        .load()
    )


def header_value(column: Any, name: str) -> Any:
    """The last value of header ``name`` (binary), null when the record has none.

    drkit appends ``drkit-src`` and ``drkit-origin`` as a copy's last two headers, so the last
    two entries are looked at first (compiled column expressions); only other records pay for
    the search of the whole array (a lambda Spark evaluates row by row, uncompiled).
    """
    from pyspark.sql import functions as F

    count = F.size(column)
    last, before = F.get(column, count - 1), F.get(column, count - 2)  # null past either end
    found = F.filter(column, lambda h: h["key"] == F.lit(name))
    return (
        F.when(count < 1, F.lit(None).cast("binary"))
        .when(last["key"] == F.lit(name), last["value"])
        .when(before["key"] == F.lit(name), before["value"])
        .otherwise(F.when(F.size(found) > 0, F.element_at(found, -1)["value"]))
    )


def read_source(spark: Any, spec: Spec) -> Any:
    """Source records to account for: ``src_topic, src_partition, src_offset, key, headers``.

    True loops are left out (the replicator leaves them out on purpose; rules.is_loop).
    Headers are kept only when the flow has filters (needed to apply them to unreplicated
    records).  Empty (not an error) when no partition has records: losses may still count.
    """
    from pyspark.sql import functions as F

    ranges = source_ranges(spec)
    if not ranges:
        return spark.createDataFrame([], SOURCE_COLUMNS)
    headers = F.col("headers")
    return (
        _kafka(spark, spec["source_options"], ranges)
        .where(
            ~loop_column(
                header_value(headers, ORIGIN_HEADER),
                F.col("topic"),
                spec["source_cluster_id"],
                spec["target_cluster_id"],
                header_value(headers, SOURCE_HEADER),
            )
        )
        .select(
            F.col("topic").alias("src_topic"),
            F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"),
            F.col("key"),
            (headers if spec["filters"] else F.lit(None)).alias("headers"),
        )
    )


def read_replicas(spark: Any, spec: Spec) -> Any | None:
    """Copies of this flow's source records on the target (None when the target has none):
    ``dst_topic, dst_partition, dst_offset, src_topic, src_partition, src_offset``.

    A copy is a record whose ``drkit-src`` names this flow's source; malformed values are not
    copies (parsed leniently: one bad header must not stop the job under ANSI mode).
    """
    from pyspark.sql import functions as F

    ranges = target_ranges(spec)
    if not ranges:
        return None
    prov = F.split(header_value(F.col("headers"), SOURCE_HEADER).cast("string"), "/", -1)
    return (
        _kafka(spark, spec["target_options"], ranges)
        .select(
            F.col("topic").alias("dst_topic"),
            F.col("partition").alias("dst_partition"),
            F.col("offset").alias("dst_offset"),
            prov.alias("prov"),
        )
        .where((F.size("prov") == 4) & (F.get("prov", 0) == F.lit(spec["source_alias"])))
        .select(
            "dst_topic",
            "dst_partition",
            "dst_offset",
            F.get("prov", 1).alias("src_topic"),
            F.get("prov", 2).try_cast("int").alias("src_partition"),
            F.get("prov", 3).try_cast("long").alias("src_offset"),
        )
        .where(F.col("src_partition").isNotNull() & F.col("src_offset").isNotNull())
    )


# -- drkit's bookkeeping topics (binary formats) ------------------------------------------


def _int(column: Any, position: Any, size: int) -> Any:
    """Big-endian signed integer of ``size`` bytes at 1-based ``position`` (a Column)."""
    from pyspark.sql import functions as F

    raw = F.conv(F.hex(column.substr(position, F.lit(size))), 16, 10).cast("decimal(20,0)")
    # As strings: 2**63 and 2**64 do not fit the JVM long a numeric literal becomes.
    half = F.lit(str(2 ** (8 * size - 1))).cast("decimal(20,0)")
    bound = F.lit(str(2 ** (8 * size))).cast("decimal(20,0)")
    return F.when(raw >= half, raw - bound).otherwise(raw).cast("long")


def _string(column: Any, position: Any) -> tuple[Any, Any]:
    """(value, position after it) of a Kafka protocol STRING: INT16 length + UTF-8 bytes."""
    from pyspark.sql import functions as F

    length = _int(column, position, 2)
    return F.decode(column.substr(position + 2, length), "UTF-8"), position + 2 + length


def _whole_topic(spark: Any, options: dict[str, str], topic: str) -> Any:
    """Every retained committed record of one of drkit's internal topics (compaction gaps
    tolerated; runs and progress of an aborted exactly-once transaction are not read)."""
    return (
        spark.read.format("kafka")
        .options(**options)
        .option(ISOLATION_OPTION, READ_COMMITTED)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("failOnDataLoss", "false")
        .load()
    )


def offset_syncs(spark: Any, spec: Spec) -> Any:
    """drkit's offset-sync runs as columns (format: drkit/replication/offset_sync.py)."""
    from pyspark.sql import functions as F

    raw = _whole_topic(spark, spec["target_options"], spec["offset_syncs_topic"])
    key, value = F.col("key"), F.col("value")
    src_topic, after = _string(key, F.lit(1))
    dst_topic, after_value = _string(value, F.lit(3))
    return raw.select(
        src_topic.alias("src_topic"),
        _int(key, after, 4).cast("int").alias("src_partition"),
        _int(key, after + 4, 8).alias("run_src"),
        dst_topic.alias("dst_topic"),
        _int(value, after_value, 4).cast("int").alias("dst_partition"),
        _int(value, after_value + 4, 8).alias("run_dst"),
        _int(value, after_value + 12, 8).alias("run_length"),
    )


def checkpoints(spark: Any, spec: Spec) -> Any:
    """Latest MirrorMaker 2-format checkpoint per (group, target partition)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    raw = _whole_topic(spark, spec["target_options"], spec["checkpoints_topic"])
    key, value = F.col("key"), F.col("value")
    group, after = _string(key, F.lit(1))
    target_topic, after = _string(key, after)
    decoded = raw.select(
        "offset",
        group.alias("group"),
        target_topic.alias("dst_topic"),
        _int(key, after, 4).cast("int").alias("dst_partition"),
        _int(value, F.lit(3), 8).alias("upstream"),
        _int(value, F.lit(11), 8).alias("downstream"),
    )
    newest = Window.partitionBy("group", "dst_topic", "dst_partition").orderBy(F.desc("offset"))
    return decoded.withColumn("n", F.row_number().over(newest)).where("n = 1").drop("n", "offset")
