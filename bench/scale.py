"""Scale curves: how drkit's costs grow, measured on this machine, plotted for docs/scale.md.

``python -m bench scale`` sweeps four axes and writes ``docs/scale/*.svg`` plus the tables it
prints (bench/out/latest-scale.md):

* replication throughput vs worker processes (1, 2) and source partitions (4, 8, 16), 100 B
  records, drkit's own ``replicate --workers N`` on the benchmark clusters;
* accounting time vs records (``drkit verify`` in local[*] against a plain Spark read + count
  of the same topics, as in bench/accounting.py);
* translation time vs consumer groups (one checkpoint round: every group on 50 partitions with
  20 runs each, the pure core);
* translation vs offset-sync runs held by a flow (decode + merge into per-partition run maps,
  the merged map's memory, and a 1,000-group checkpoint round over them), in memory.

Each point is one measurement (the curves show shape, not medians); RESULTS.md holds the
repeated anchors.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from pathlib import Path

from bench.common import OUT, markdown_table, producer_perf, start_clusters
from drkit.kafka.admin import TopicSpec
from drkit.records import TopicPartition
from drkit.translation import PartitionMapping, TargetBounds, translate

DOCS = Path(__file__).resolve().parent.parent / "docs" / "scale"
SIZE = 100


def replication_curve(records: int, workers: Sequence[int], partitions: Sequence[int]) -> str:
    from bench.replication import DrkitReplicator, throughput

    clusters = start_clusters(fresh=False)
    rows: list[list[object]] = []
    series: dict[int, list[float]] = {}
    for count in partitions:
        topic = f"scale-{count}-{uuid.uuid4().hex[:6]}"
        clusters.admin("dc1").create_topics([TopicSpec(topic, count)])
        producer_perf(clusters.dc1, topic, records, SIZE)
        for n in workers:
            result = throughput(clusters, DrkitReplicator(clusters, n), topic, records, SIZE)
            series.setdefault(n, []).append(result.records_per_s)
            rows.append([count, n, f"{result.records_per_s:,.0f}", f"{result.rss_mb or 0:,.0f}"])
            print(f"  {count} partitions, {n} workers: {result.records_per_s:,.0f}/s", flush=True)
    _plot(
        "replication.svg",
        "Replication throughput (100 B records)",
        "source partitions",
        "records/s",
        {f"{n} worker{'s' if n > 1 else ''}": (list(partitions), ys) for n, ys in series.items()},
    )
    return f"### Replication: throughput vs workers and partitions ({records:,} x 100 B)\n\n" + (
        markdown_table(["partitions", "workers", "records/s", "peak RSS MB"], rows)
    )


def accounting_curve(sizes: Sequence[int]) -> str:
    from bench.accounting import measure

    rows: list[list[str]] = []
    verify_s, per_record_s, plain_s = [], [], []
    for records in sizes:
        timed = measure(records)
        verify_s.append(timed.verify)
        per_record_s.append(timed.per_record)
        plain_s.append(timed.plain)
        rows.append(
            [f"{records:,}", f"{timed.verify:.1f} s", f"{timed.per_record:.1f} s",
             f"{timed.plain:.1f} s", f"{timed.verify / timed.plain:.2f}x",
             f"{timed.per_record / timed.plain:.2f}x"]
        )  # fmt: skip
        print(f"  {records:,} records: {timed}", flush=True)
    _plot(
        "accounting.svg",
        "Accounting time (Spark local[*], 2 cores)",
        "source records (each with its replica)",
        "seconds",
        {
            "drkit verify (copy runs)": (list(sizes), verify_s),
            "drkit verify --per-record": (list(sizes), per_record_s),
            "plain read + count": (list(sizes), plain_s),
        },
    )
    header = ["source records", "verify (copy runs)", "verify --per-record", "plain read"]
    return "### Accounting: time vs records (local[*])\n\n" + markdown_table(
        [*header, "ratio (copy runs)", "ratio (per record)"], rows
    )


def translation_groups_curve(groups: Sequence[int], partitions: int = 50) -> str:
    from bench.translation import _pure

    rows, times = [], []
    for count in groups:
        core, _ = _pure(count, partitions)
        times.append(core * 1000)
        rows.append([f"{count:,}", f"{count * partitions:,}", f"{core * 1000:.0f} ms"])
    _plot(
        "translation-groups.svg",
        f"Checkpoint round: translate every group ({partitions} partitions, 20 runs each)",
        "consumer groups",
        "milliseconds",
        {"translate()": (list(groups), times)},
    )
    return "### Translation: a checkpoint round vs groups\n\n" + markdown_table(
        ["groups", "translations", "time"], rows
    )


def translation_runs_curve(per_partition: Sequence[int], partitions: int = 50) -> str:
    from bench.translation import RUN_LENGTH, _merge_in_memory, _run_records

    rows, merge_ms, memory_mb, round_ms, runs = [], [], [], [], []
    rng = random.Random(5)
    for count in per_partition:
        records = list(_run_records("orders", "a.orders", partitions, range(count)))
        started = time.perf_counter()
        maps = _merge_in_memory(records)
        merge = time.perf_counter() - started
        del maps
        gc.collect()
        tracemalloc.start()  # a second merge under tracemalloc (it slows what it traces)
        maps = _merge_in_memory(records)
        retained, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        end = count * RUN_LENGTH
        mappings = [
            PartitionMapping(
                TopicPartition("orders", p),
                TopicPartition("a.orders", p),
                maps[TopicPartition("orders", p)].table(),
                replicated_end=end,
            )
            for p in range(partitions)
        ]
        bounds = [TargetBounds(0, m.dst_end) for m in mappings]
        commits = [[rng.randrange(0, end) for _ in range(partitions)] for _ in range(1000)]
        started = time.perf_counter()
        for row in commits:
            for p, offset in enumerate(row):
                translate(offset, mappings[p], bounds[p], end)
        round_s = time.perf_counter() - started
        total = count * partitions
        runs.append(total)
        merge_ms.append(merge * 1000)
        memory_mb.append(retained / 2**20)
        round_ms.append(round_s * 1000)
        rows.append(
            [
                f"{total:,}",
                f"{merge:.2f} s",
                f"{retained / 2**20:.0f} MB",
                f"{round_s * 1000:.0f} ms",
            ]
        )
        del records, maps, mappings
    _plot(
        "translation-runs.svg",
        "Offset-sync runs in a flow: merge time, memory, a 1,000-group round",
        "runs",
        "ms / MB",
        {
            "decode + merge (ms)": (runs, merge_ms),
            "merged map (MB)": (runs, memory_mb),
            "1,000 groups x 50 partitions round (ms)": (runs, round_ms),
        },
    )
    return "### Translation: runs held by a flow\n\n" + markdown_table(
        ["runs", "decode + merge", "merged map memory", "checkpoint round, 1,000 groups"], rows
    )


def _plot(
    name: str,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, tuple[list[int], list[float]]],
) -> None:
    """One line chart per axis; SVG without matplotlib's random ids (stable diffs)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "drkit"
    figure = Figure(figsize=(7, 4))
    axes = figure.add_subplot()
    for label, (xs, ys) in series.items():
        axes.plot(xs, ys, marker="o", label=label)
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    DOCS.mkdir(parents=True, exist_ok=True)
    figure.savefig(DOCS / name, format="svg", metadata={"Date": None})


def main(quick: bool = False) -> str:
    OUT.mkdir(parents=True, exist_ok=True)
    sections = [
        translation_groups_curve([100, 250, 500, 1000, 2000] if not quick else [100, 200]),
        translation_runs_curve(
            [2_000, 5_000, 10_000, 20_000, 40_000] if not quick else [1_000, 2_000]
        ),
        replication_curve(
            300_000 if not quick else 50_000, [1, 2], [4, 8, 16] if not quick else [4, 8]
        ),
        accounting_curve([250_000, 500_000, 1_000_000, 2_000_000] if not quick else [50_000]),
    ]
    return "\n\n".join(sections)
