"""The accounting Spark job (self-contained: pyspark + standard library only).

Run locally through ``drkit verify`` or on a cluster with::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
        drkit/accounting/job.py --spec spec.json --out hdfs:///drkit/verify/run-1

Inputs (the spec, JSON): Kafka client options for both clusters, per source partition the
checked range ``[source_start, source_end)`` and its replica topic, per group and partition the
committed source offset S and the target position T.

Method (all distributed; only per-partition and per-group aggregates reach the driver):

1. read the source range, drop records whose ``drkit-origin`` is the target cluster (they are
   not replicated there on purpose: active-active loop prevention);
2. read the replica topics and parse each record's ``drkit-src`` provenance header;
3. left-join source records with their copies: copies == 1 replicated once, > 1 duplicated,
   == 0 missing (below the highest replicated source offset) or unreplicated tail (above it);
4. order: among first copies, per key, a source offset lower than the previous one in target
   order is a violation;
5. offset syncs: read drkit's offset-sync topic, and check every replica against the runs -
   ``unmapped_replicas`` (no run covers its source offset for its target partition) and
   ``mismatched_replicas`` (a run covers it but names another target offset);
6. per group: T is the group's own commit on the target if it has one, else the latest
   checkpoint (what an unplanned failover uses, read from the checkpoints topic), else drkit's
   live translation; skipped = source records >= S whose every copy lies before T; read again
   = records < S with a copy at or after T; exact = both zero.

Records the flow's ``filter`` transforms drop on purpose are counted as ``filtered``, not
missing (the spec carries the filter rules; the job applies them to unreplicated records only).

Outputs under ``--out``: Parquet tables ``partitions``, ``groups``, ``missing_ranges``,
``duplicates`` and ``summary.json``, schema ``drkit.verify/v1`` (fields are only ever added)::

    {"schema": "drkit.verify/v1", "flow": "dc1->dc2", "checked_at": epoch s, "elapsed_s": s,
     "ok": bool,                       # no record missing and no group would skip one
     "totals": {"records", "replicated_once", "duplicated_records", "extra_copies", "missing",
                "filtered", "unreplicated_tail", "order_violations", "unmapped_replicas",
                "mismatched_replicas", "skipped_by_groups", "read_again_by_groups"},
     "partitions": [{"src_topic", "src_partition", <the per-partition counts above>,
                     "first_offset", "last_offset", "last_replicated"}],
     "groups": [{"group", "src_topic", "src_partition", "s", "t",
                 "t_kind": "target-commit" | "checkpoint" | <translation method>,
                 "skipped", "read_again", "exact"}],
     "missing_ranges": [{"src_topic", "src_partition", "from_offset", "to_offset", "records"}],
     "notes": [str],                   # caveats of this run, e.g. plugin transforms
     "output": DIR}
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

SCHEMA = "drkit.verify/v1"
SOURCE_HEADER = "drkit-src"
ORIGIN_HEADER = "drkit-origin"


def _kafka(
    spark: Any, options: dict[str, str], ranges: dict[str, dict[str, tuple[int, int]]]
) -> Any:
    """Records of ``{topic: {partition: (start, end)}}`` (end exclusive), headers included."""
    starting = {t: {p: r[0] for p, r in parts.items()} for t, parts in ranges.items()}
    ending = {t: {p: r[1] for p, r in parts.items()} for t, parts in ranges.items()}
    assign = {t: [int(p) for p in parts] for t, parts in ranges.items()}
    return (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        # Compacted topics and transaction markers leave offset gaps: not data loss.
        .option("failOnDataLoss", "false")
        .load()
    )


def dropped_by_filters(
    filters: list[dict[str, Any]], key: bytes | None, headers: list[tuple[str, bytes | None]]
) -> bool:
    """Whether the flow's filter transforms drop this record.

    The same rule as the ``filter`` transform (drkit/replication/transforms.py; a unit test
    holds the two together): a rule matches when its ``key_regex`` finds a match in the key
    and, if it names a ``header``, some value of that header matches ``header_regex``; an
    ``action: drop`` rule drops matching records, ``action: keep`` drops the others.  Kept here
    because this file must run under spark-submit without drkit installed.
    """
    for rule in filters:
        matches = True
        if rule.get("key_regex") is not None:
            matches = re.search(str(rule["key_regex"]).encode(), key or b"") is not None
        if matches and rule.get("header") is not None:
            pattern = re.compile(str(rule.get("header_regex") or ".*").encode())
            matches = any(
                pattern.search(value or b"") for name, value in headers if name == rule["header"]
            )
        if matches == (rule.get("action", "drop") == "drop"):
            return True
    return False


def _header(column: Any, name: str) -> Any:
    from pyspark.sql import functions as F

    found = F.filter(column, lambda h: h["key"] == F.lit(name))
    return F.when(F.size(found) > 0, F.element_at(found, -1)["value"].cast("string"))


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
    """Every retained record of one of drkit's internal topics (compaction gaps tolerated)."""
    return (
        spark.read.format("kafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("failOnDataLoss", "false")
        .load()
    )


def _offset_syncs(spark: Any, options: dict[str, str], topic: str) -> Any:
    """drkit's offset-sync records as columns (format: drkit/replication/offset_sync.py)."""
    from pyspark.sql import functions as F

    raw = _whole_topic(spark, options, topic)
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


def _checkpoints(spark: Any, options: dict[str, str], topic: str) -> Any:
    """Latest MirrorMaker 2-format checkpoint per (group, target partition)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    raw = _whole_topic(spark, options, topic)
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


def run(spark: Any, spec: dict[str, Any], out: str) -> dict[str, Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    started = time.time()
    partitions = spec["partitions"]
    filters: list[dict[str, Any]] = spec.get("filters") or []
    source_ranges: dict[str, dict[str, tuple[int, int]]] = {}
    target_ranges: dict[str, dict[str, tuple[int, int]]] = {}
    for p in partitions:
        if p["source_end"] > p["source_start"]:
            source_ranges.setdefault(p["source_topic"], {})[str(p["partition"])] = (
                p["source_start"],
                p["source_end"],
            )
        for tp, (start, end) in p["target_ranges"].items():
            topic, part = tp.rsplit(":", 1)
            if end > start:
                target_ranges.setdefault(topic, {})[part] = (start, end)

    source = (
        (
            _kafka(spark, spec["source_options"], source_ranges)
            .select(
                F.col("topic").alias("src_topic"),
                F.col("partition").alias("src_partition"),
                F.col("offset").alias("src_offset"),
                F.col("key"),
                # Headers are only needed to apply the flow's filters to unreplicated records.
                (F.col("headers") if filters else F.lit(None)).alias("headers"),
                _header(F.col("headers"), ORIGIN_HEADER).alias("origin"),
            )
            .where(F.col("origin").isNull() | (F.col("origin") != F.lit(spec["target_cluster_id"])))
            .drop("origin")
        )
        if source_ranges
        else None
    )

    provenance = F.split(_header(F.col("headers"), SOURCE_HEADER), "/")
    target = (
        (
            _kafka(spark, spec["target_options"], target_ranges)
            .select(
                F.col("topic").alias("dst_topic"),
                F.col("partition").alias("dst_partition"),
                F.col("offset").alias("dst_offset"),
                provenance.alias("prov"),
            )
            .where(F.col("prov").isNotNull() & (F.col("prov")[0] == F.lit(spec["source_alias"])))
            .select(
                "dst_topic",
                "dst_partition",
                "dst_offset",
                F.col("prov")[1].alias("src_topic"),
                F.col("prov")[2].cast("int").alias("src_partition"),
                F.col("prov")[3].cast("long").alias("src_offset"),
            )
        )
        if target_ranges
        else None
    )

    if source is None:
        raise SystemExit("nothing to check: every source partition is empty")
    if target is not None:
        target = target.cache()  # read once: used for the copies and the offset-sync check
    keys = ["src_topic", "src_partition", "src_offset"]
    if target is None:
        copies = (
            source.select(*keys)
            .limit(0)
            .withColumn("copies", F.lit(0))
            .withColumn("first_dst", F.lit(None).cast("long"))
            .withColumn("last_dst", F.lit(None).cast("long"))
        )
    else:
        copies = target.groupBy(*keys).agg(
            F.count(F.lit(1)).alias("copies"),
            F.min("dst_offset").alias("first_dst"),
            F.max("dst_offset").alias("last_dst"),
        )
    joined = _mark_filtered(source.join(copies, keys, "left").fillna({"copies": 0}), filters)
    joined = joined.drop("headers").cache()
    part_keys = ["src_topic", "src_partition"]
    high = (
        joined.where("copies > 0")
        .groupBy(*part_keys)
        .agg(F.max("src_offset").alias("last_replicated"))
    )
    joined = joined.join(F.broadcast(high), part_keys, "left")

    # Order: among first copies, per key, target order must follow source order.
    per_key = Window.partitionBy("src_topic", "src_partition", "key").orderBy("first_dst")
    order = (
        joined.where("copies > 0 AND key IS NOT NULL")
        .withColumn("previous", F.lag("src_offset").over(per_key))
        .groupBy(*part_keys)
        .agg(
            F.sum(F.when(F.col("previous") > F.col("src_offset"), 1).otherwise(0)).alias(
                "order_violations"
            )
        )
    )
    # Every replica must be described by an offset-sync run of its own copy.
    mapping = _mapping_check(spark, spec, target)
    missing_flag = (
        (F.col("copies") == 0)
        & ~F.col("filtered")
        & F.col("last_replicated").isNotNull()
        & (F.col("src_offset") < F.col("last_replicated"))
    )
    tail_flag = (
        (F.col("copies") == 0)
        & ~F.col("filtered")
        & (F.col("last_replicated").isNull() | (F.col("src_offset") > F.col("last_replicated")))
    )
    per_partition = (
        joined.groupBy(*part_keys)
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.when(F.col("copies") == 1, 1).otherwise(0)).alias("replicated_once"),
            F.sum(F.when(F.col("copies") > 1, 1).otherwise(0)).alias("duplicated_records"),
            F.sum(F.when(F.col("copies") > 1, F.col("copies") - 1).otherwise(0)).alias(
                "extra_copies"
            ),
            F.sum(F.when(missing_flag, 1).otherwise(0)).alias("missing"),
            F.sum(F.when(F.col("filtered"), 1).otherwise(0)).alias("filtered"),
            F.sum(F.when(tail_flag, 1).otherwise(0)).alias("unreplicated_tail"),
            F.min("src_offset").alias("first_offset"),
            F.max("src_offset").alias("last_offset"),
            F.max("last_replicated").alias("last_replicated"),
        )
        .join(order, part_keys, "left")
        .join(mapping, part_keys, "left")
        .fillna({"order_violations": 0, "unmapped_replicas": 0, "mismatched_replicas": 0})
    )
    per_partition.write.mode("overwrite").parquet(f"{out}/partitions")

    # Missing records as ranges of consecutive source records (gaps and islands).
    numbered = joined.withColumn(
        "n", F.row_number().over(Window.partitionBy(*part_keys).orderBy("src_offset"))
    )
    missing = numbered.where(missing_flag).withColumn(
        "island",
        F.col("n") - F.row_number().over(Window.partitionBy(*part_keys).orderBy("src_offset")),
    )
    (
        missing.groupBy(*part_keys, "island")
        .agg(
            F.min("src_offset").alias("from_offset"),
            F.max("src_offset").alias("to_offset"),
            F.count(F.lit(1)).alias("records"),
        )
        .drop("island")
        .write.mode("overwrite")
        .parquet(f"{out}/missing_ranges")
    )
    (
        joined.where("copies > 1")
        .select(*keys, "copies", "first_dst", "last_dst")
        .write.mode("overwrite")
        .parquet(f"{out}/duplicates")
    )

    groups_summary: list[dict[str, Any]] = []
    if spec["groups"]:
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
            "group string, src_topic string, src_partition int, dst_topic string, s long, "
            "t_given long, kind_given string",
        )
        checkpoints = _checkpoints(spark, spec["target_options"], spec["checkpoints_topic"])
        # A group with no commit on the target resumes where the latest checkpoint says (what
        # an unplanned failover uses) - if that checkpoint is for the same S.
        use_checkpoint = (F.col("kind_given") != "target-commit") & (
            F.col("upstream") == F.col("s")
        )
        positions = given.join(
            checkpoints,
            (given["group"] == checkpoints["group"])
            & (given["dst_topic"] == checkpoints["dst_topic"])
            & (given["src_partition"] == checkpoints["dst_partition"]),
            "left",
        ).select(
            given["group"],
            "src_topic",
            "src_partition",
            "s",
            F.when(use_checkpoint, F.col("downstream")).otherwise(F.col("t_given")).alias("t"),
            F.when(use_checkpoint, F.lit("checkpoint"))
            .otherwise(F.col("kind_given"))
            .alias("t_kind"),
        )
        replicas = joined.where("copies > 0").select(*keys, "last_dst")
        per_group = (
            replicas.join(F.broadcast(positions), part_keys)
            .groupBy("group", *part_keys, "s", "t", "t_kind")
            .agg(
                F.sum(
                    F.when(
                        (F.col("src_offset") >= F.col("s")) & (F.col("last_dst") < F.col("t")), 1
                    ).otherwise(0)
                ).alias("skipped"),
                F.sum(
                    F.when(
                        (F.col("src_offset") < F.col("s")) & (F.col("last_dst") >= F.col("t")), 1
                    ).otherwise(0)
                ).alias("read_again"),
            )
            .withColumn("exact", (F.col("skipped") == 0) & (F.col("read_again") == 0))
        )
        per_group.write.mode("overwrite").parquet(f"{out}/groups")
        groups_summary = [
            row.asDict()
            for row in spark.read.parquet(f"{out}/groups").orderBy("group", *part_keys).collect()
        ]
    partitions_summary = [
        row.asDict()
        for row in spark.read.parquet(f"{out}/partitions").orderBy(*part_keys).collect()
    ]
    missing_summary = [
        row.asDict()
        for row in spark.read.parquet(f"{out}/missing_ranges")
        .orderBy(*part_keys, "from_offset")
        .limit(100)
        .collect()
    ]
    joined.unpersist()
    if target is not None:
        target.unpersist()
    totals = {
        name: sum(int(p[name] or 0) for p in partitions_summary)
        for name in (
            "records",
            "replicated_once",
            "duplicated_records",
            "extra_copies",
            "missing",
            "filtered",
            "unreplicated_tail",
            "order_violations",
            "unmapped_replicas",
            "mismatched_replicas",
        )
    }
    totals["skipped_by_groups"] = sum(int(g["skipped"]) for g in groups_summary)
    totals["read_again_by_groups"] = sum(int(g["read_again"]) for g in groups_summary)
    summary = {
        "schema": SCHEMA,
        "flow": spec["flow"],
        "checked_at": started,
        "elapsed_s": round(time.time() - started, 3),
        "ok": totals["missing"] == 0 and totals["skipped_by_groups"] == 0,
        "totals": totals,
        "partitions": partitions_summary,
        "groups": groups_summary,
        "missing_ranges": missing_summary,
        "notes": list(spec.get("notes") or []),
        "output": out,
    }
    if "://" not in out:  # a local path; on a cluster the Parquet tables are the record
        Path(out, "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


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


def _mapping_check(spark: Any, spec: dict[str, Any], target: Any) -> Any:
    """Per source partition: replicas no offset-sync run describes, or describes wrongly."""
    from pyspark.sql import functions as F

    part_keys = ["src_topic", "src_partition"]
    if target is None:
        return spark.createDataFrame(
            [],
            "src_topic string, src_partition int, unmapped_replicas long, mismatched_replicas long",
        )
    runs = _offset_syncs(spark, spec["target_options"], spec["offset_syncs_topic"])
    replica = target.alias("r")
    run = F.broadcast(runs.alias("m"))
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

    # Semi joins against the broadcast runs keep each replica at most once, map-side: no
    # shuffle of the replicas (a group-by per replica would move all of them).
    def per_partition(frame: Any, name: str) -> Any:
        return frame.groupBy(
            F.col("src_topic").alias("src_topic"), F.col("src_partition").alias("src_partition")
        ).agg(F.count(F.lit(1)).alias(name))

    total = per_partition(target, "replicas")
    covered = per_partition(replica.join(run, covers, "left_semi"), "covered")
    matched = per_partition(replica.join(run, covers & exact, "left_semi"), "matched")
    return (
        total.join(covered, part_keys, "left")
        .join(matched, part_keys, "left")
        .fillna({"covered": 0, "matched": 0})
        .select(
            *part_keys,
            (F.col("replicas") - F.col("covered")).alias("unmapped_replicas"),
            (F.col("covered") - F.col("matched")).alias("mismatched_replicas"),
        )
    )


def main(argv: list[str] | None = None) -> int:
    """``spark-submit job.py --spec spec.json --out DIR``: exit 1 when records are missing."""
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description="drkit accounting job")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
    spark = SparkSession.builder.appName(f"drkit verify {spec['flow']}").getOrCreate()
    summary = run(spark, spec, args.out)
    print(json.dumps(summary["totals"]))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
