"""``python -m bench`` (or ``make bench``): drkit's benchmarks, one command, ratios in one run.

    python -m bench replication [--records-100 N] [--records-1k N] [--workers N] [--quick]
    python -m bench translation
    python -m bench accounting [--records-100 N] [--spark local|standalone]
    python -m bench failover [--failover-groups N[,N...]] [--partitions N] [--repeat R]
                             [--failover-offsets shared|distinct]
    python -m bench runstore [--failover-groups N[,N...]]   # a run's plan stored and read back
    python -m bench checkpoint [--checkpoint-groups N[,N...]]  # rounds and freshness
    python -m bench switchover [--rate N] [--repeat 3]     # write pause of planned moves
    python -m bench scale        # curves for docs/scale.md (plots written to docs/scale/)
    python -m bench simulation [--schedules N] [--seed-base S] [--mutations K] [--topology T]
                                 # the control plane's deterministic simulation, long campaigns
    python -m bench errors [--repeat 3] [--faults refused,hung,...] [--only "clusters check"]
                                 # how fast each cluster-contacting command fails (issue 45)
    python -m bench rto [--faults kill,pause,blackhole,partial-cut] [--runs N]
                                 # the worst-case RTO campaign (bench/rto.py, docs/rto.md)
    python -m bench all          # replication, translation, accounting, failover

Every ratio compares numbers measured in the same run on the same clusters.  Results are printed
and written to bench/out/latest-<name>.md; bench/RESULTS.md keeps the committed record.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from bench.common import OUT, markdown_table

if TYPE_CHECKING:
    from bench.replication import Result


def replication(args: argparse.Namespace) -> str:
    from bench import replication as rep
    from bench.common import start_clusters

    clusters = start_clusters()
    sections = []
    plan = [(100, args.records_100), (1024, args.records_1k)]
    try:
        for size, records in plan:
            results = rep.run(
                clusters, size, records, args.workers, args.latency_seconds, args.repeat
            )
            sections.append(_replication_table(size, records, results, args.workers))
            print(sections[-1], flush=True)
    finally:
        if not args.keep:
            clusters.manager.down(purge=True)  # the next section starts on fresh clusters
    return "\n\n".join(sections)


def _replication_table(size: int, records: int, results: list[Result], workers: int) -> str:
    """The results as a markdown table, then drkit's ratios: against MirrorMaker 2 tuned with the
    same task/worker count (the strongest opponent), and against its defaults for reference;
    then per core against the tuned one.  A pipe limit that some replicator beat is marked
    INVALID LIMIT and no "% of pipe limit" figure is given."""
    limit = results[0]
    by_name = {r.name.split(" [runs")[0]: r for r in results}

    def fmt(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    def per_core(result: Result) -> str:
        if result.per_core is None:
            return "-"
        return f"{result.per_core:,.0f} ({fmt(result.cores, 2)} cores)"

    rows = []
    for result in results:
        rows.append(
            [
                result.name,
                fmt(result.records_per_s, 0),
                fmt(result.mb_per_s),
                per_core(result),
                fmt(result.p50_ms),
                fmt(result.p99_ms),
                fmt(result.rss_mb, 0),
            ]
        )
    if limit.beaten_by:
        rows[0][0] = f"INVALID LIMIT (beaten by {'; '.join(limit.beaten_by)}): {limit.name}"
    ratios, per_core_lines = [], []
    for count in [1] if workers <= 1 else [1, workers]:
        drkit_name = f"drkit ({count} worker{'s' if count > 1 else ''})"
        for variant in ("tuned", "defaults"):
            mm2_name = f"MirrorMaker 2 {variant} (tasks.max={count})"
            ratios.append(_ratios(drkit_name, mm2_name, by_name, limit, variant == "defaults"))
        tuned = f"MirrorMaker 2 tuned (tasks.max={count})"
        per_core_lines.append(
            [
                f"{drkit_name} / {tuned} per core",
                _per_core_ratio(by_name[drkit_name], by_name[tuned]),
            ]
        )
    ratios += per_core_lines
    header = [
        "",
        "records/s",
        "MB/s",
        "records per CPU-s (cores)",
        "p50 ms",
        "p99 ms",
        "peak RSS MB",
    ]
    return (
        f"### {size} B records, {records:,} records, 8 partitions, acks=all\n\n"
        + markdown_table(header, rows)
        + "\n\n"
        + "\n".join(f"- {line[0]}: " + ", ".join(p for p in line[1:] if p) for line in ratios)
    )


def _per_core_ratio(drkit: Result, mm2: Result) -> str:
    """drkit's records per CPU-second over MirrorMaker 2's, with both figures."""
    if drkit.per_core is None or mm2.per_core is None:
        return "no figure (a CPU window too short to measure)"
    return (
        f"{drkit.per_core / mm2.per_core:.2f}x "
        f"({drkit.per_core:,.0f} vs {mm2.per_core:,.0f} records per CPU-second)"
    )


def _ratios(
    drkit_name: str, mm2_name: str, by_name: dict[str, Result], limit: Result, reference: bool
) -> list[str]:
    """One comparison line: drkit against one MirrorMaker 2 row, and both against the pipe limit
    (unless a replicator beat the limit: then it says so instead of a share above 100%)."""
    drkit, mm2 = by_name[drkit_name], by_name[mm2_name]
    limit_rate = limit.records_per_s
    share = (
        "INVALID LIMIT (a replicator beat it: no share of it is given)"
        if limit.beaten_by
        else f"{drkit.records_per_s / limit_rate:.0%} of pipe limit"
        f" (MirrorMaker 2: {mm2.records_per_s / limit_rate:.0%})"
    )
    line = [
        f"{drkit_name} / {mm2_name}" + (" (for reference)" if reference else ""),
        f"{drkit.records_per_s / mm2.records_per_s:.2f}x throughput",
        share,
        f"{drkit.rss_mb / mm2.rss_mb:.2f}x memory" if drkit.rss_mb and mm2.rss_mb else "",
    ]
    if drkit.p99_ms and mm2.p99_ms:
        line.append(f"{drkit.p99_ms / mm2.p99_ms:.2f}x p99 latency")
    return line


def translation(args: argparse.Namespace) -> str:
    from bench import translation as tr

    return tr.main(groups=args.groups, partitions=args.partitions)


def failover(args: argparse.Namespace) -> str:
    from bench import failover as fo

    counts = [int(n) for n in str(args.failover_groups).split(",")]
    distinct = args.failover_offsets == "distinct"
    return fo.main(groups=counts, partitions=args.partitions, runs=args.repeat, distinct=distinct)


def accounting(args: argparse.Namespace) -> str:
    from bench import accounting as acc

    return acc.main(records=args.records_100, spark_mode=args.spark)


def runstore(args: argparse.Namespace) -> str:
    from bench import runstore as rs

    counts = [int(n) for n in str(args.failover_groups).split(",")]
    return rs.main(groups=counts, partitions=args.partitions, runs=args.repeat)


def checkpoint(args: argparse.Namespace) -> str:
    from bench import checkpoint as cp

    counts = [int(n) for n in str(args.checkpoint_groups).split(",")]
    return cp.main(groups=counts, partitions=args.partitions)


def switchover(args: argparse.Namespace) -> str:
    from bench import switchover as sw

    return sw.main(rate=args.rate, runs=args.repeat)


def scale(args: argparse.Namespace) -> str:
    from bench import scale as sc

    return sc.main(quick=args.quick)


def simulation(args: argparse.Namespace) -> str:
    from bench import simulation as sim

    return sim.main(args.schedules, args.seed_base, args.processes, args.mutations, args.topology)


def errors(args: argparse.Namespace) -> str:
    from bench import errors as er

    faults = [f for f in str(args.faults).split(",") if f] or list(er.FAULTS)
    return er.main(repeat=args.repeat, faults=faults, only=args.only)


def main() -> None:
    if sys.argv[1:2] == ["rto"]:  # its own flags (--faults means fault types there)
        from bench import rto

        sys.exit(rto.main(sys.argv[2:]))
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "which",
        nargs="?",
        default="all",
        choices=[
            "replication",
            "translation",
            "accounting",
            "failover",
            "runstore",
            "checkpoint",
            "switchover",
            "scale",
            "simulation",
            "errors",
            "rto",
            "all",
        ],
    )
    parser.add_argument("--records-100", type=int, default=1_000_000)
    parser.add_argument("--records-1k", type=int, default=300_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency-seconds", type=int, default=20)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="throughput runs per replicator; the table shows the median",
    )
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument(
        "--failover-groups", default="100", help="groups per failover; a list (100,1000) is a curve"
    )
    parser.add_argument(
        "--failover-offsets",
        choices=["shared", "distinct"],
        default="shared",
        help="groups share 41 offsets per partition, or each commits its own (worst case)",
    )
    parser.add_argument(
        "--checkpoint-groups", default="1000", help="groups followed by the checkpoint worker"
    )
    parser.add_argument(
        "--spark",
        choices=["local", "standalone"],
        default="local",
        help="accounting: local[*], or a Spark standalone master + worker started for the run",
    )
    parser.add_argument(
        "--rate", type=int, default=2000, help="switchover: the source's producer, records/s"
    )
    parser.add_argument("--schedules", type=int, default=20_000, help="simulation: schedules")
    parser.add_argument("--seed-base", type=int, default=10_000, help="simulation: first seed")
    parser.add_argument("--processes", type=int, default=None, help="simulation: processes")
    parser.add_argument(
        "--mutations", type=int, default=0,
        help="simulation: also find each reverted fix within this many seeds",
    )  # fmt: skip
    parser.add_argument(
        "--topology", default="two-dc", choices=("two-dc", "three-dc"),
        help="simulation: the world's clusters (three-dc: dc1 -> dc2 and dc1 -> dc3)",
    )  # fmt: skip
    parser.add_argument(
        "--faults", default="", help="errors: fault kinds, comma-separated (default: all)"
    )
    parser.add_argument(
        "--only", action="append", default=None, help="errors: only this command (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--keep", action="store_true", help="keep the bench clusters running")
    args = parser.parse_args()
    if args.quick:
        args.records_100, args.records_1k, args.latency_seconds = 100_000, 30_000, 8
        args.groups, args.partitions, args.repeat = 100, 50, 1
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.time()
    every = ["replication", "translation", "accounting", "failover"]
    chosen = every if args.which == "all" else [args.which]
    try:
        for name in chosen:
            text = globals()[name](args)
            (OUT / f"latest-{name}.md").write_text(text + "\n")
            print(text, flush=True)
    finally:
        if not args.keep and args.which != "errors":  # errors starts no cluster: stop none
            from bench.common import stop_clusters

            stop_clusters()
    command = " ".join(["python -m bench", *sys.argv[1:]])
    print(f"\n(command: {command}; {time.time() - started:.0f}s)")


if __name__ == "__main__":
    main()
