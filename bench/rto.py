"""Worst-case RTO campaign (issue 50, target 4): the automatic-failover drill run N times per
fault type, its RTO split and RPO per run, p50 and worst per fault type.

    python -m bench rto --faults kill,pause,blackhole,partial-cut --runs 20
    python -m bench rto --from-json docs/rto/runs.json     # table and plot rebuilt, nothing run

Each run is a real drill (drkit.drills.service.run_drill) of ``runbooks/drills/
automatic-failover.yaml`` - dc1's workload replicated to dc2, drkit's monitor detecting the
loss and deciding the failover by itself - with its fault swapped for the series' one and the
test suite's short warm-up (2 s, the fault 2 s later).  The drill waits for its steady state
(replication copying, a checkpoint of every group) whatever the warm-up, so a short one
measures the same recovery.  The benchmark clusters dc1 and dc2 are started once; every drill
undoes its fault and deletes its topics and groups, and each run starts only once both
clusters answer and no firewall rule of the previous run is left.

RTO is the drill's own split (drkit.drills.measure.rto_of): detection (fault -> the monitor's
UNAVAILABLE), decision (-> the monitor's run started; its ``after_s`` is 3 s in a drill),
execution (-> the pointer moved), client resume (-> every group processed on dc2).  The
target: worst <= 2x the median for every fault type, and every run PolicyMet.

Written: the table (printed, bench/out/latest-rto.md), every run (bench/out/rto-runs.json and
docs/rto/runs.json), the plot (docs/rto/rto.svg).  A benchmark, not CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import OUT, markdown_table
from drkit.drills.scenario import FaultKind, Scenario

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rto"
RUNS_JSON = OUT / "rto-runs.json"
SCENARIO = "automatic-failover"
# The campaign's names for the drill's fault kinds (the spelling).
FAULTS: dict[str, FaultKind] = {
    "kill": FaultKind.KILL_BROKERS,
    "pause": FaultKind.PAUSE,
    "blackhole": FaultKind.BLACKHOLE,
    "partial-cut": FaultKind.PARTIAL_CUT,
}
WARMUP_S = 2.0  # as tests/integration/test_drills.py's quick()
FAULT_AT_S = 2.0
WORST_OVER_MEDIAN = 2.0  # the target
PARTS = ("detection_s", "decision_s", "execution_s", "client_resume_s")
POLICY_MET = "PolicyMet"


def parse_faults(text: str) -> list[str]:
    """``kill,pause`` -> the names, in order, each once; ValueError naming the valid ones."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in FAULTS]
    if unknown or not names:
        given = ", ".join(unknown) if unknown else "none"
        raise ValueError(f"unknown fault {given} (valid: {', '.join(FAULTS)})")
    return names


@dataclass(frozen=True)
class RunRecord:
    """One drill of the campaign as the page needs it.  ``rto``: the split and ``total_s``
    (None: the drill did not get that far); ``verdict``: the report's, or ``failed`` when the
    drill ended without a report (``error`` says why); ``failed_checks``: ``name: detail`` of
    each check that did not pass."""

    fault: str
    run: int
    verdict: str
    rto: dict[str, float] | None
    rpo_records: int | None
    rpo_s: float | None
    failed_checks: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    how: str = ""
    drill: str = ""
    wall_s: float = 0.0
    error: str = ""

    @property
    def total_s(self) -> float | None:
        return None if self.rto is None else self.rto["total_s"]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunRecord:
        return cls(**{
            **raw,
            "failed_checks": tuple(raw.get("failed_checks", ())),
            "reasons": tuple(raw.get("reasons", ())),
        })  # fmt: skip


@dataclass(frozen=True)
class FaultSummary:
    """One fault type over its runs.  ``p50_s``/``worst_s`` over the runs with an RTO (None:
    none had one); ``worst``: the run of ``worst_s``; ``parts_p50``: the median of each part
    of the split; ``not_met``: every run whose verdict was not PolicyMet."""

    fault: str
    runs: int
    measured: int
    p50_s: float | None
    worst_s: float | None
    worst: RunRecord | None
    parts_p50: dict[str, float]
    worst_rpo_records: int | None
    worst_rpo_s: float | None
    not_met: tuple[RunRecord, ...]

    @property
    def ratio(self) -> float | None:
        """worst / p50 (None: nothing measured, or a zero median)."""
        if self.worst_s is None or not self.p50_s:
            return None
        return self.worst_s / self.p50_s

    @property
    def spread_met(self) -> bool:
        """Worst <= 2x the median - and every run measured (an unmeasured run is a worst case
        nobody knows)."""
        ratio = self.ratio
        return ratio is not None and self.measured == self.runs and ratio <= WORST_OVER_MEDIAN

    @property
    def all_met(self) -> bool:
        return self.runs > 0 and not self.not_met


def summarise(records: Sequence[RunRecord]) -> list[FaultSummary]:
    """Per fault type, in the order first seen.  Pure."""
    out: list[FaultSummary] = []
    for fault in dict.fromkeys(record.fault for record in records):
        mine = [record for record in records if record.fault == fault]
        timed = [record for record in mine if record.rto is not None]
        totals = [record.rto["total_s"] for record in timed if record.rto is not None]
        worst = max(timed, key=lambda r: r.total_s or 0.0, default=None)
        rpos = [r for r in mine if r.rpo_records is not None]
        out.append(
            FaultSummary(
                fault=fault,
                runs=len(mine),
                measured=len(timed),
                p50_s=statistics.median(totals) if totals else None,
                worst_s=max(totals) if totals else None,
                worst=worst,
                parts_p50={
                    part: statistics.median(r.rto[part] for r in timed if r.rto is not None)
                    for part in PARTS
                }
                if timed
                else {},
                worst_rpo_records=max((r.rpo_records or 0 for r in rpos), default=None),
                worst_rpo_s=max((r.rpo_s or 0.0 for r in rpos), default=None),
                not_met=tuple(r for r in mine if r.verdict != POLICY_MET),
            )
        )
    return out


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _split(parts: dict[str, float] | None) -> str:
    if not parts:
        return "-"
    return " / ".join(f"{parts[part]:.1f}" for part in PARTS)


def render(records: Sequence[RunRecord], heading: str = "") -> str:
    """The campaign's markdown: the table per fault type, whether each target is met, and
    every run that was not PolicyMet with its failed checks.  Pure."""
    summaries = summarise(records)
    rows = []
    for s in summaries:
        ratio = s.ratio
        rows.append([
            s.fault,
            s.runs if s.measured == s.runs else f"{s.runs} ({s.measured} measured)",
            _s(s.p50_s),
            _s(s.worst_s),
            "-" if ratio is None else f"{ratio:.2f}x",
            _split(s.worst.rto if s.worst is not None else None),
            _split(s.parts_p50),
            "-" if s.worst_rpo_records is None else f"{s.worst_rpo_records:,}",
            _s(s.worst_rpo_s),
            "met" if s.spread_met else "NOT met",
            "met" if s.all_met else f"NOT met ({len(s.not_met)})",
        ])  # fmt: skip
    header = [
        "fault", "runs", "p50 RTO", "worst RTO", "worst/p50",
        "worst run: detect / decide / execute / resume (s)",
        "p50 of each part (s)", "worst RPO records", "worst RPO s",
        f"worst <= {WORST_OVER_MEDIAN:g}x p50", "every run PolicyMet",
    ]  # fmt: skip
    lines = [heading] if heading else []
    lines.append(markdown_table(header, rows))
    failing = [record for s in summaries for record in s.not_met]
    if failing:
        lines.append("Runs not PolicyMet:\n\n" + "\n".join(
            f"- {r.fault} run {r.run} ({r.verdict}): "
            + ("; ".join(r.failed_checks or r.reasons) or r.error or "-")
            for r in failing
        ))  # fmt: skip
    else:
        lines.append("Every run PolicyMet.")
    return "\n\n".join(lines)


def record_of(fault: str, run: int, report: Any, wall_s: float) -> RunRecord:
    """A run's record from its ``DrillReport``."""
    return RunRecord(
        fault=fault,
        run=run,
        verdict=report.verdict.value,
        rto=report.rto.to_json() if report.rto is not None else None,
        rpo_records=report.rpo_records if report.rpo_measured else None,
        rpo_s=round(report.rpo_seconds, 3) if report.rpo_measured else None,
        failed_checks=tuple(f"{c.name}: {c.detail}" for c in report.checks if not c.passed),
        reasons=tuple(report.reasons),
        how=str(report.fault.get("how", "")),
        drill=report.id,
        wall_s=round(wall_s, 1),
    )


def scenario_for(fault: str) -> Scenario:
    """The campaign's drill for ``fault``: the shipped automatic failover, its fault swapped,
    warm-up and wait before the fault short, no Spark verification (the recount stays)."""
    from drkit.drills.scenario import load_scenario

    base = load_scenario(SCENARIO)
    workload = base.workload.model_copy(update={"warmup_s": WARMUP_S})
    kind = base.fault.model_copy(update={"kind": FAULTS[fault], "at_s": FAULT_AT_S})
    return base.model_copy(update={"workload": workload, "fault": kind, "verify": False})


class Campaign:
    """The drill machinery against one pair of running clusters (``source``, ``target``
    under the names the scenario uses), its config and main store in ``directory``."""

    def __init__(self, local: Any, servers: dict[str, str], directory: Path) -> None:
        import yaml

        from drkit.config import load_config
        from drkit.store import StateStore

        self.local, self.servers, self.directory = local, servers, directory
        directory.mkdir(parents=True, exist_ok=True)
        self.config_path = directory / "drkit.yaml"
        self.config_path.write_text(yaml.safe_dump({
            "clusters": {n: {"bootstrap_servers": s} for n, s in servers.items()},
            "flows": [],
            "state_store": {"url": f"sqlite:///{directory / 'main.db'}"},
        }))  # fmt: skip
        self.config = load_config(self.config_path)
        self.store = StateStore(f"sqlite:///{directory / 'main.db'}")
        self.store.ensure_current()

    def run(self, fault: str, run: int, scenario: Scenario | None = None) -> RunRecord:
        """One drill; a drill that raised is a ``failed`` record (the campaign goes on once
        the clusters are ready again)."""
        from drkit.drills.service import run_drill
        from drkit.kafka import KafkaAdmin

        scenario = scenario or scenario_for(fault)
        started = time.monotonic()
        try:
            outcome = run_drill(
                scenario, self.config, self.config_path, self.store, self.directory / "state",
                verify=False, local=self.local, connect=KafkaAdmin,
            )  # fmt: skip
        except Exception as err:  # recorded: a campaign reports every run it made
            return RunRecord(
                fault, run, "failed", None, None, None,
                wall_s=round(time.monotonic() - started, 1),
                error=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            )  # fmt: skip
        return record_of(fault, run, outcome.report, time.monotonic() - started)

    def ready(self) -> str | None:
        """None when both clusters answer and no drill's firewall rule is left; else why not."""
        from drkit.kafka import ClusterEndpoint
        from drkit.kafka.clients import not_answering

        for name, servers in self.servers.items():
            why = not_answering(ClusterEndpoint.plain(name, servers), 10.0)
            if why is not None:
                return f"{name} does not answer: {why}"
        drills = self.directory / "state" / "drills"
        left = leftover_rules(p.name for p in drills.iterdir()) if drills.is_dir() else []
        return f"firewall rules left: {'; '.join(left)}" if left else None


def leftover_rules(drills: Iterable[str]) -> list[str]:
    """iptables rules the named drills added and did not remove (each drill's comment is
    ``drkit-<drill id>``; other drills' rules on the machine are theirs); empty where iptables
    cannot be read."""
    tags = {f"drkit-{drill}" for drill in drills}
    try:
        done = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False)
    except OSError:
        return []
    return [line for line in done.stdout.splitlines() if tags & set(line.replace('"', "").split())]


def campaign(
    faults: Sequence[str], runs: int, progress: Callable[[RunRecord], None]
) -> list[RunRecord]:
    """``runs`` drills per fault, series after series, on the benchmark clusters (started
    once, fresh); stops early when a run leaves the clusters unready."""
    from bench.common import start_clusters

    clusters = start_clusters()
    state = clusters.manager.root.parent
    servers = {"dc1": clusters.dc1.bootstrap_servers, "dc2": clusters.dc2.bootstrap_servers}
    setup = Campaign(clusters.manager, servers, state / "rto")
    records: list[RunRecord] = []
    for fault in faults:
        for run in range(1, runs + 1):
            record = setup.run(fault, run)
            records.append(record)
            progress(record)
            why = _await_ready(setup)
            if why is not None:
                print(f"  clusters not ready after {fault} run {run}: {why}; stopping", flush=True)
                return records
    return records


def _await_ready(setup: Campaign, timeout_s: float = 120.0) -> str | None:
    deadline = time.monotonic() + timeout_s
    while (why := setup.ready()) is not None and time.monotonic() < deadline:
        time.sleep(2)
    return why


def plot(records: Sequence[RunRecord], path: Path, title: str) -> None:
    """Left: every run's RTO per fault type (points over a box); right: the worst run's split
    stacked per fault type.  SVG without matplotlib's random ids (stable diffs)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "drkit"
    summaries = summarise(records)
    names = [s.fault for s in summaries]
    figure = Figure(figsize=(10, 4))
    runs_axes, split_axes = figure.subplots(1, 2, sharey=True)  # one scale: comparable
    for index, s in enumerate(summaries):
        totals = [r.total_s for r in records if r.fault == s.fault and r.total_s is not None]
        if len(totals) > 1:
            runs_axes.boxplot([totals], positions=[index], widths=0.5, showfliers=False)
        offsets = [(i - (len(totals) - 1) / 2) * 0.04 for i in range(len(totals))]
        runs_axes.scatter([index + o for o in offsets], totals, s=18, zorder=3)
    runs_axes.set_xticks(range(len(names)), names)
    runs_axes.set_ylabel("RTO (s)")
    runs_axes.set_ylim(bottom=0)
    runs_axes.set_title("RTO of every run", fontsize=10)
    runs_axes.grid(alpha=0.3, axis="y")
    bottoms = [0.0] * len(summaries)
    for part in PARTS:
        heights = [s.worst.rto[part] if s.worst and s.worst.rto else 0.0 for s in summaries]
        split_axes.bar(range(len(names)), heights, bottom=bottoms, label=part[:-2])
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    split_axes.set_xticks(range(len(names)), names)
    split_axes.set_title("The worst run's split", fontsize=10)
    split_axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4)
    split_axes.grid(alpha=0.3, axis="y")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", metadata={"Date": None})


def write(records: Sequence[RunRecord], heading: str) -> str:
    """The table to bench/out/latest-rto.md and the plot to docs/rto/rto.svg; returns the
    table."""
    text = render(records, heading)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latest-rto.md").write_text(text + "\n")
    plot(records, DOCS / "rto.svg", heading.lstrip("# "))
    return text


def _faults_arg(text: str) -> list[str]:
    try:
        return parse_faults(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench rto", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--faults", type=_faults_arg, default=list(FAULTS),
        help=f"fault types, comma-separated: {', '.join(FAULTS)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=20, help="drills per fault type")
    parser.add_argument("--note", default="", help="the machine's state, in the table's heading")
    parser.add_argument(
        "--from-json", type=Path, default=None,
        help="rebuild the table and plot from a campaign's runs (nothing is run)",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the bench clusters running")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    started = time.time()
    if args.from_json is not None:
        document = json.loads(args.from_json.read_text())
        records = [RunRecord.from_json(raw) for raw in document["runs"]]
        heading = document.get("heading", "")
    else:
        heading = _heading(args.runs, args.note)
        try:
            records = campaign(args.faults, args.runs, _progress)
        finally:
            if not args.keep:
                from bench.common import stop_clusters

                stop_clusters()
        document = json.dumps({"heading": heading, "runs": [asdict(r) for r in records]}, indent=1)
        for path in (RUNS_JSON, DOCS / "runs.json"):  # the page's plot rebuilt from the latter
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(document + "\n")
    print(write(records, heading), flush=True)
    shown = list(sys.argv[1:] if argv is None else argv)
    print(f"\n(command: python -m bench rto {' '.join(shown)}; "
          f"{time.time() - started:.0f}s)")  # fmt: skip
    return 0


def _heading(runs: int, note: str) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime())
    cores = os.cpu_count() or 0
    extra = f", {note}" if note else ""
    return (
        f"### RTO campaign: {SCENARIO}, {runs} runs per fault type ({when}, {cores} cores{extra})"
    )


def _progress(record: RunRecord) -> None:
    total = "-" if record.total_s is None else f"{record.total_s:.1f} s"
    print(f"  {record.fault} run {record.run}: RTO {total} [{_split(record.rto)}], "
          f"RPO {record.rpo_records} records, {record.verdict} ({record.wall_s:.0f} s wall)"
          + (f": {record.error}" if record.error else ""), flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
