"""Stage 6, write: the Parquet tables, the totals, the verdict and ``summary.json``.

The tables are written first and the summary is built from them (read back, small), so the
summary never disagrees with the tables it points to.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from drkit.accounting.sparkjob.accounting import PARTITION_KEYS
from drkit.accounting.sparkjob.schema import (
    SCHEMA,
    GroupRow,
    LostPartition,
    MissingRange,
    PartitionRow,
    Spec,
    Summary,
    Totals,
    Unmapped,
)

# Rows of the long tables copied into the summary (the Parquet tables hold all of them).
SUMMARY_ROWS = 100

_PARTITION_TOTALS = (
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


def write_table(frame: Any, out: str, name: str) -> None:
    frame.write.mode("overwrite").parquet(f"{out}/{name}")


def read_rows(
    spark: Any, out: str, name: str, order: list[str], limit: int | None = None
) -> list[dict[str, Any]]:
    """A written table's rows as dicts, in ``order`` (the first ``limit`` of them)."""
    table = spark.read.parquet(f"{out}/{name}").orderBy(*order)
    if limit is not None:
        table = table.limit(limit)
    return [row.asDict() for row in table.collect()]


def totals_of(
    partitions: list[PartitionRow], groups: list[GroupRow], lost: list[LostPartition]
) -> Totals:
    """The summary's totals: sums over partitions, groups and losses."""
    rows = cast(list[dict[str, Any]], partitions)
    summed = {name: sum(int(row[name] or 0) for row in rows) for name in _PARTITION_TOTALS}
    return cast(
        Totals,
        {
            **summed,
            "skipped_by_groups": sum(int(g["skipped"]) for g in groups),
            "read_again_by_groups": sum(int(g["read_again"]) for g in groups),
            "lost_before_replication": sum(int(p["records"]) for p in lost),
        },
    )


def verdict(totals: Totals) -> bool:
    """ok: nothing missing, nothing lost before replication, no group would skip a record, and
    every replica is visible to offset translation."""
    return (
        totals["missing"] == 0
        and totals["lost_before_replication"] == 0
        and totals["skipped_by_groups"] == 0
        and totals["unmapped_replicas"] == 0
    )


def collect(
    spark: Any, spec: Spec, out: str, started: float, with_groups: bool, method: str
) -> Summary:
    """Build the summary from the written tables (see the schema in drkit/accounting/job.py);
    ``method``: how the tables were accounted (``copy-runs`` or ``per-record``)."""
    partitions = cast(list[PartitionRow], read_rows(spark, out, "partitions", PARTITION_KEYS))
    groups = (
        cast(list[GroupRow], read_rows(spark, out, "groups", ["group", *PARTITION_KEYS]))
        if with_groups
        else []
    )
    missing = read_rows(
        spark, out, "missing_ranges", [*PARTITION_KEYS, "from_offset"], SUMMARY_ROWS
    )
    unmapped = read_rows(
        spark, out, "unmapped", [*PARTITION_KEYS, "dst_topic", "dst_partition"], SUMMARY_ROWS
    )
    lost = list(spec["lost_before_replication"])
    totals = totals_of(partitions, groups, lost)
    return {
        "schema": SCHEMA,
        "flow": spec["flow"],
        # ISO-8601 UTC, as every drkit document (the job ships without drkit.timestamps).
        "checked_at": datetime.fromtimestamp(started, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "elapsed_s": round(time.time() - started, 3),
        "ok": verdict(totals),
        "totals": totals,
        "partitions": partitions,
        "groups": groups,
        "missing_ranges": cast(list[MissingRange], missing),
        "lost_before_replication": lost,
        "unmapped": cast(list[Unmapped], unmapped),
        "notes": list(spec["notes"]),
        "output": out,
        "method": method,
    }


def write_summary(summary: Summary, out: str) -> None:
    """``summary.json`` next to the tables (local paths only: on a cluster's shared storage
    the Parquet tables are the record and the driver prints the totals)."""
    if "://" not in out:
        Path(out, "summary.json").write_text(json.dumps(summary, indent=2, default=str))
