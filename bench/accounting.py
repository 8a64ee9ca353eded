"""Accounting benchmark: ``drkit verify`` vs a plain Spark read + count of the same topics.

All run in the same Spark session (Spark's Kafka connector) over the same source topic and its
replica: ``drkit verify`` as a user runs it (the flow is healthy, so the job accounts from its
copy runs) and ``drkit verify --per-record`` (what a flow the copy runs cannot explain costs:
the provenance join, the duplicate, order and mapping checks record by record); the ratios are
against the plain read.  ``spark="local"`` runs both in local[*]; ``spark="standalone"`` starts a
Spark standalone master and worker from pyspark's distribution (drkit/accounting/standalone.py)
and runs both there: driver and executors in separate JVMs, as on a real cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from bench.common import OUT, markdown_table, producer_perf, start_clusters, total_records
from drkit.accounting import job
from drkit.accounting.session import build_session
from drkit.accounting.sparkjob.schema import Spec, Summary
from drkit.accounting.spec import build_spec
from drkit.accounting.standalone import standalone_cluster
from drkit.config import load_config
from drkit.kafka.admin import KafkaAdmin, TopicSpec


class Timings(NamedTuple):
    verify: float  # drkit verify (a healthy flow: from its copy runs)
    per_record: float  # drkit verify --per-record
    plain: float  # the anchor: a plain read + count of the same topics


def main(records: int = 1_000_000, spark_mode: str = "local") -> str:
    timed = measure(records, spark_mode)
    data = f"{records:,} source records + {records:,} replicas"
    rows = [
        [data, "drkit verify (copy runs)", f"{timed.verify:.1f} s", f"{timed.plain:.1f} s",
         f"{timed.verify / timed.plain:.2f}x"],
        [data, "drkit verify --per-record", f"{timed.per_record:.1f} s", f"{timed.plain:.1f} s",
         f"{timed.per_record / timed.plain:.2f}x"],
    ]  # fmt: skip
    where = "local[*]" if spark_mode == "local" else "standalone: 1 master, 1 worker, 2 cores"
    return (
        f"### Accounting (Spark {where}, {records:,} x 100 B, 8 partitions; all timed warm)\n\n"
        + markdown_table(["data", "job", "time", "plain read + count (anchor)", "ratio"], rows)
    )


def measure(records: int, spark_mode: str = "local") -> Timings:
    """Seconds for both ways of accounting and for the anchor over ``records`` source records
    and their replicas, replicated by drkit first; asserts both verdicts are clean and which
    way each run took."""
    clusters = start_clusters(fresh=False)
    tag = uuid.uuid4().hex[:6]
    source, target, topic = f"v{tag}", f"w{tag}", f"acct-{tag}"
    clusters.admin("dc1").create_topics([TopicSpec(topic, 8)])
    producer_perf(clusters.dc1, topic, records, 100)
    path = OUT / f"accounting-{tag}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    source: {"bootstrap_servers": clusters.dc1.bootstrap_servers},
                    target: {"bootstrap_servers": clusters.dc2.bootstrap_servers},
                },
                "flows": [{"source": source, "target": target, "topics": {"include": [topic]}}],
            }
        )
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "drkit", "replicate", "--config", str(path), "--no-checkpoints"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    replica = f"{source}.{topic}"
    deadline = time.monotonic() + 600
    while total_records(clusters.admin("dc2"), replica) < records:
        if time.monotonic() > deadline:
            raise TimeoutError("replication did not finish")
        time.sleep(0.5)
    worker.terminate()
    worker.wait(60)
    config = load_config(path)
    spec = build_spec(config, config.flows[0], [], connect=KafkaAdmin)
    with ExitStack() as stack:
        master = None
        if spark_mode == "standalone":
            cluster = stack.enter_context(standalone_cluster(OUT / f"spark-{tag}"))
            master = cluster.master_url
        spark = build_session(master, "drkit bench accounting")
        out = OUT / f"accounting-{tag}"
        timed, counted, summaries = _timed(spark, spec, topic, replica, out)
    assert counted == 2 * records, counted
    for summary, method in zip(summaries, ("copy-runs", "per-record"), strict=True):
        assert summary["method"] == method, summary.get("method")
        assert summary["ok"] and summary["totals"]["replicated_once"] == records, summary
    assert summaries[0]["totals"] == summaries[1]["totals"]
    (OUT / "latest-accounting.json").write_text(json.dumps(summaries[0]["totals"]))
    return timed


def _timed(
    spark: Any, spec: Spec, topic: str, replica: str, out: Path
) -> tuple[Timings, int, tuple[Summary, Summary]]:
    """(the timings, records counted by the anchor, both jobs' summaries).

    All are timed warm: an untimed plain read goes first.  The first Kafka read of a session
    pays for starting the executors' Kafka clients and JIT-compiling the read path (10-12 s of
    a 35 s cold read at 10M records here); timing the anchor cold and verify after it flattered
    verify by that much."""

    def seconds(work: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        result = work()
        return time.perf_counter() - started, result

    try:
        _plain_read(spark, spec, topic, replica)  # warm-up, untimed
        plain, counted = seconds(lambda: _plain_read(spark, spec, topic, replica))
        verify, by_runs = seconds(lambda: job.run(spark, spec, f"{out}-runs"))
        per_record, by_records = seconds(lambda: job.run(spark, spec, f"{out}-records", True))
    finally:
        spark.stop()
    return Timings(verify, per_record, plain), counted, (by_runs, by_records)


def _plain_read(spark: Any, spec: Spec, topic: str, replica: str) -> int:
    """The anchor: read every record of the source topic and of its replica, and count them."""
    counted = 0
    for options, name in ((spec["source_options"], topic), (spec["target_options"], replica)):
        counted += (
            spark.read.format("kafka")
            .options(**options)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
            .load()
            .count()
        )
    return counted


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000, *sys.argv[2:3]))
