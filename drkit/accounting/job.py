"""The accounting Spark job: entry point and stage order (pyspark + standard library only).

Run locally through ``drkit verify`` or on a cluster with what ``drkit verify --write-spec``
prints::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
        --py-files drkit-accounting-job.zip \\
        drkit/accounting/job.py --spec spec.json --out hdfs:///drkit/verify/run-1

The stages live in drkit/accounting/sparkjob/ (self-contained too; ``--py-files`` ships them).

Inputs (the spec, JSON, sparkjob/schema.py ``Spec``): Kafka client options for both clusters,
per source partition the checked range ``[source_start, source_end)`` (log start to last stable
offset) and its replica topic, per group and partition the committed source offset S and the
target position T, the flow's filter rules, the records lost before replication.

Method (all distributed; only per-partition and per-group aggregates reach the driver; every
Kafka read is read_committed):

1. read (sparkjob/read.py): the source range without true loops - drkit copies from the target
   sitting where drkit wrote them (``drkit-origin``, the rule of drkit/replication/provenance.py,
   restated in sparkjob/rules.py): the replicator leaves them out on purpose (active-active loop
   prevention); records with forwarded headers are data.  The replicas, with each record's
   ``drkit-src`` provenance parsed;
2. join (sparkjob/accounting.py): source records left-joined with their copies;
3. per-partition accounting: copies == 1 replicated once, > 1 duplicated, == 0 filtered (the
   flow's ``filter`` transforms drop it on purpose), missing (below the highest replicated
   source offset) or unreplicated tail (above it); order: among first copies, per key, a source
   offset lower than the previous one in target order is a violation;
4. groups (sparkjob/groups.py): T is the group's own commit on the target if it has one, else
   the latest checkpoint (what an unplanned failover uses), else drkit's live translation;
   skipped = source records >= S whose every copy lies before T; read again = records < S with
   a copy at or after T; exact = both zero;
5. mapping check (sparkjob/mapping.py): every replica against drkit's offset-sync runs -
   ``unmapped_replicas`` (no run covers its source offset for its target partition: failover
   translation cannot see it) and ``mismatched_replicas`` (a run covers it but names another
   target offset: a duplicate copy);
6. write (sparkjob/summary.py): tables, totals, verdict, summary.

Stages 2-5 first try the shortcut of sparkjob/copy_runs.py: a healthy flow's replicas form a
few dense *copy runs* (found by a map-side aggregation, no record shuffled) from which the
same tables follow exactly; when the runs cannot explain every record (damage, duplicates,
filters, transactional or compacted sources, loops), the job accounts record by record as
above.  ``--per-record`` skips the shortcut.

Records lost before replication (deleted from the source before they were copied) are not in
the source range any more: drkit verify counts them before the job runs (recorded loss events,
and stored progress below the source log start; drkit/accounting/losses.py) and the spec
carries them into the summary and the verdict.

Outputs under ``--out``: Parquet tables ``partitions``, ``groups``, ``missing_ranges``,
``duplicates``, ``unmapped`` and ``summary.json``, schema ``drkit.verify/v2`` (fields are only
ever added; sparkjob/schema.py ``Summary``)::

    {"schema": "drkit.verify/v2", "flow": "dc1->dc2", "checked_at": ISO-8601 UTC, "elapsed_s": s,
     "ok": bool,                       # nothing missing or lost before replication, no group
                                       # would skip a record, no replica unmapped
     "totals": {"records", "replicated_once", "duplicated_records", "extra_copies", "missing",
                "filtered", "unreplicated_tail", "order_violations", "unmapped_replicas",
                "mismatched_replicas", "skipped_by_groups", "read_again_by_groups",
                "lost_before_replication"},
     "partitions": [{"src_topic", "src_partition", <the per-partition counts above>,
                     "first_offset", "last_offset", "last_replicated"}],
     "groups": [{"group", "src_topic", "src_partition", "s", "t",
                 "t_kind": "target-commit" | "checkpoint" | <translation method>,
                 "skipped", "read_again", "exact"}],
     "missing_ranges": [{"src_topic", "src_partition", "from_offset", "to_offset", "records"}],
     "lost_before_replication": [{"src_topic", "src_partition", "records",
                                  "recorded",     # covered by the flow's loss events
                                  "unrecorded",   # progress below the log start, no event
                                  "reasons": ["truncated" | "recreated" | "unrecorded"],
                                  "ranges": [{"from_offset", "to_offset", "records"}]}],
     "unmapped": [{"src_topic", "src_partition", "dst_topic", "dst_partition", "replicas",
                   "first_src_offset", "last_src_offset"}],
     "notes": [str],                   # caveats of this run, e.g. plugin transforms
     "output": DIR,
     "method": "copy-runs" | "per-record"}  # how the tables were accounted

``missing_ranges`` and ``unmapped`` hold at most 100 rows (the Parquet tables hold all).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from drkit.accounting.sparkjob import accounting, copy_runs, groups, mapping, read
from drkit.accounting.sparkjob.schema import SCHEMA, Spec, Summary
from drkit.accounting.sparkjob.secrets import MissingSecret, fill_secrets
from drkit.accounting.sparkjob.summary import collect, write_summary, write_table

__all__ = ["SCHEMA", "main", "run"]


def run(spark: Any, spec: Spec, out: str, per_record: bool = False) -> Summary:
    """Run every stage for ``spec``; write the tables under ``out``; return the summary.

    A healthy flow is accounted from its copy runs (sparkjob/copy_runs.py: exact, and no
    record is shuffled); any flow the runs cannot explain, or every flow with ``per_record``,
    record by record.  Both write the same tables; the summary's ``method`` says which ran."""
    started = time.time()
    records = sum(max(0, p["source_end"] - p["source_start"]) for p in spec["partitions"])
    configured = int(spark.conf.get("spark.sql.shuffle.partitions"))
    spark.conf.set(
        "spark.sql.shuffle.partitions", str(accounting.shuffle_partitions(records, configured))
    )
    replicas = read.read_replicas(spark, spec)
    tables = None
    if not per_record and replicas is not None:
        tables = copy_runs.account(spark, spec, replicas)
    if tables is not None:
        write_table(tables.partitions, out, "partitions")
        for name, empty in tables.empty.items():
            write_table(empty, out, name)
        if tables.groups is not None:
            write_table(tables.groups, out, "groups")
    else:
        _account_per_record(spark, spec, replicas, out)
    method = "per-record" if tables is None else "copy-runs"
    summary = collect(spark, spec, out, started, bool(spec["groups"]), method)
    write_summary(summary, out)
    return summary


def _account_per_record(spark: Any, spec: Spec, replicas: Any | None, out: str) -> None:
    """Stages 1-5 record by record: every source record joined with its copies."""
    source = read.read_source(spark, spec)
    cached: list[Any] = []  # unpersisted at the end, also after an error
    if replicas is not None:
        replicas = replicas.cache()  # read once: used for the copies and the mapping check
        cached.append(replicas)
    try:
        joined = accounting.join_copies(source, replicas, spec["filters"]).cache()
        cached.append(joined)
        accounted = accounting.with_last_replicated(joined)
        check = mapping.mapping_check(spark, spec, replicas)
        if check.cached is not None:
            cached.append(check.cached)
        write_table(accounting.per_partition(accounted, check.counts), out, "partitions")
        # Runs of missing records need every record numbered in offset order (a sort of the
        # whole input); with nothing missing the table is known empty.
        written = spark.read.parquet(f"{out}/partitions")
        missing = written.where("missing > 0").limit(1).count() > 0
        ranges = accounting.missing_ranges(accounted if missing else accounted.limit(0))
        write_table(ranges, out, "missing_ranges")
        write_table(accounting.duplicates(accounted), out, "duplicates")
        write_table(check.unmapped, out, "unmapped")
        if spec["groups"]:
            positions = groups.positions(spark, spec)
            write_table(groups.per_group(accounted, positions), out, "groups")
    finally:
        for frame in cached:
            frame.unpersist()


def main(argv: list[str] | None = None) -> int:
    """``spark-submit job.py --spec spec.json --out DIR``: exit 1 when the verdict fails."""
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description="drkit accounting job")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--per-record", action="store_true", help="account record by record, never by runs"
    )
    args = parser.parse_args(argv)
    try:
        spec = fill_secrets(json.loads(Path(args.spec).read_text(encoding="utf-8")), os.environ)
    except MissingSecret as err:
        print(f"drkit verify job: {err}", file=sys.stderr)
        return 2
    spark = SparkSession.builder.appName(f"drkit verify {spec['flow']}").getOrCreate()
    summary = run(spark, spec, args.out, args.per_record)
    print(json.dumps(summary["totals"]))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
