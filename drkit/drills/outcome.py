"""The end of a full drill: the records recounted, the groups judged, Spark's proof, the checks
and the verdict, as one :class:`~drkit.drills.report.DrillReport`.

Runs once the drill stopped what it started and undid its fault, before its access is released
(drills.observe writes to the old primary to see the fence hold).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drkit.config.model import Role
from drkit.drills.checks import run_all
from drkit.drills.measure import Unmeasured, judge, reached_rate, rto_of
from drkit.drills.observe import observe
from drkit.drills.recount import group_outcome, placed_or_reset, rpo_of
from drkit.drills.report import (
    DrillReport,
    GroupOutcome,
    RtoBreakdown,
    StandbyChosen,
    Standbys,
    Targets,
    WriteCondition,
)
from drkit.drills.run_summary import run_summary
from drkit.drills.running import RunningDrill
from drkit.drills.standbys import standby_checks
from drkit.drills.timeline import POINTER_MOVED
from drkit.errors import DrillFailed, DrkitError, KafkaError
from drkit.failover.results import Translation
from drkit.failover.runs import RunRecord
from drkit.kafka.io import consume_all
from drkit.records import Record, TopicPartition
from drkit.timestamps import iso_utc

# How long a drill waits for transactions its writers left open on the source to end before it
# recounts: their transaction timeout (30 s) plus the broker's abort check interval (10 s),
# with room to spare.
SETTLE_S = 60.0


def build_report(runner: RunningDrill, started: datetime) -> DrillReport:
    s = runner.scenario
    runner.say("recounting the records", None)
    source_records, replica_records = runner.failover_records or read_back(runner)
    replica_of = {runner.env.topic(t.name): runner.replica(t.name) for t in s.workload.topics}
    rpo = rpo_of(source_records, replica_records, replica_of)
    accounting = _accounting(runner) if (s.verify and runner.options.verify) else None
    groups = _groups(runner, source_records, replica_records, accounting)
    checks = run_all(observe(runner), rpo, groups, accounting)
    standbys = _standbys(runner)
    if standbys is not None:
        checks += standby_checks(standbys.choice, s.target, standbys.others)
    try:
        rto: RtoBreakdown | None = rto_of(runner.timeline.events(), s.planned)
    except Unmeasured as err:
        rto = None
        runner.notes.append(f"RTO not measured: {err}")
    assert runner.sampler is not None
    series = runner.sampler.series()
    if series.unmeasured:
        runner.notes.append(
            f"lag not measured in {series.unmeasured} of {len(series.t)} samples (the target "
            "did not answer in time): drawn as gaps"
        )
    targets = Targets(s.policy.rto_s, s.policy.rpo_records, s.policy.rpo_s, s.policy.reread_records)
    verdict, reasons = judge(targets, rto, rpo, checks, sum(g.reread for g in groups))
    return DrillReport(
        id=runner.env.id,
        scenario=s.name,
        title=s.title,
        mode="full",
        procedure=s.move.procedure.value,
        source=s.source,
        target=s.target,
        started_at=iso_utc(started),
        finished_at=iso_utc(datetime.now(UTC)),
        fault={"kind": s.fault.kind.value, "at_s": s.fault.at_s, "how": runner.fault_how},
        targets=targets,
        rto=rto,
        rpo=rpo,
        groups=groups,
        checks=tuple(checks),
        verdict=verdict,
        reasons=reasons,
        timeline=runner.timeline.events(),
        series=series,
        failover_run=run_summary(runner.run_record, runner.failback_record),
        accounting=accounting,
        notes=tuple(runner.notes),
        conditions=tuple(
            WriteCondition(
                w.load.name,  # the writer's load already carries the drill's topic name
                w.load.partitions,
                w.load.records_per_s,
                reached_rate([at for at, _ in w.acked()]),
                w.acked_count,
                w.stats.refused,
            )
            for w in runner.writers
        ),
        standbys=standbys,
    )


def _standbys(runner: RunningDrill) -> Standbys | None:
    """The standby section of a drill with other standbys (None: a two-cluster drill)."""
    s = runner.scenario
    if not s.standbys:
        return None
    choice = runner.standby_choice or StandbyChosen(
        s.move.decision.value, None, s.target, "no choice was recorded: the move did not start"
    )
    return Standbys(choice, runner.repointed)


def read_back(runner: RunningDrill) -> tuple[list[Record], list[Record]]:
    """Both clusters' workload records, read committed, every partition to its end - or
    DrillFailed: part of a topic recounted reports what it did not read as not lost (CI: a
    network-cut drill reported 0 lost where 16 were).  Read once no transaction is open on
    the source: an open one hides every record after its first until the broker ends it,
    at the writer's transaction timeout."""
    s = runner.scenario
    runner.until(
        lambda: _source_settled(runner),
        SETTLE_S,
        f"open transactions on {s.source} ending (the broker aborts them at the writer's "
        "transaction timeout)",
    )
    source: list[Record] = []
    replica: list[Record] = []
    try:
        for load in s.workload.topics:
            source += consume_all(
                runner.endpoint(s.source), runner.env.topic(load.name), timeout_s=60, complete=True
            )
            replica += consume_all(
                runner.endpoint(s.target), runner.replica(load.name), timeout_s=60, complete=True
            )
    except KafkaError as err:  # part of a topic recounted would be loss reported as none
        raise DrillFailed(f"the records cannot be recounted: {err}") from None
    return source, replica


def _source_settled(runner: RunningDrill) -> bool:
    """No transaction is open on the source's workload partitions (last stable offset =
    high watermark); False while one is, or while the source does not answer."""
    s = runner.scenario
    partitions = [
        TopicPartition(runner.env.topic(load.name), p)
        for load in s.workload.topics
        for p in range(load.partitions)
    ]
    admin = runner.admin(s.source)
    try:
        ends = admin.list_offsets(partitions, "latest", timeout_s=5)
        stable = admin.stable_offsets(partitions, timeout_s=5)
    except DrkitError:
        return False
    return all(stable.get(tp, -1) >= ends.get(tp, 0) for tp in partitions)


def _groups(
    runner: RunningDrill,
    source: list[Record],
    replica: list[Record],
    accounting: dict[str, Any] | None,
) -> tuple[GroupOutcome, ...]:
    s = runner.scenario
    admin = runner.admin(s.source)
    finished_at = runner.timeline.first(POINTER_MOVED)
    out: list[GroupOutcome] = []
    for group, member in zip(s.workload.groups, runner.target_members, strict=True):
        name, topic = runner.env.group(group.name), runner.env.topic(group.topic)
        replica_topic = runner.replica(group.topic)
        committed = {
            tp.partition: offset
            for tp, offset in admin.group_offsets(name).offsets.items()
            if tp.topic == topic
        }
        resumed = runner.resumed.get(name)
        after = (
            round(runner.timeline.since_start(resumed) - finished_at.at_s, 3)
            if resumed is not None and finished_at is not None
            else None
        )
        exact = None
        if accounting is not None:
            exact = all(g["exact"] for g in accounting.get("groups", []) if g["group"] == name)
        out.append(
            group_outcome(
                name,
                topic,
                source,
                [r for r in replica if r.topic == replica_topic],
                committed,
                member.ledger(),
                after,
                exact,
            )
        )
    return tuple(out)


def _accounting(runner: RunningDrill) -> dict[str, Any] | None:
    from drkit.accounting.verify import verify

    runner.say("proving it on the records with Spark (drkit verify)", None)
    s = runner.scenario
    # Judge the positions the failover gave each group, not where the groups went since.
    run = runner.run_record
    positions = _failover_positions(runner, run) if run else None
    summary = verify(
        runner.env.config.as_role(Role.VERIFIER),
        runner.env.flow,
        [runner.env.group(g.name) for g in s.workload.groups],
        [runner.env.topic(t.name) for t in s.workload.topics],
        runner.env.directory / "verify",
        runner.options.spark_master,
        runner.env.store,
        positions=positions,
        connect=runner.options.connect,
    )
    return dict(summary)


def _failover_positions(
    runner: RunningDrill, run: RunRecord
) -> dict[str, dict[TopicPartition, int]]:
    """Where the failover put each workload group on the target, per replica partition.

    A partition the run could not translate (no checkpoint yet when the source died) gets
    no commit, so the drill's consumers start where ``auto.offset.reset=earliest`` puts
    them: the replica's log start.  Judged at the group's live commit instead, records the
    group has read on the target since would count as skipped."""
    loads = {t.name: t for t in runner.scenario.workload.topics}
    wanted = {
        runner.env.group(g.name): [
            TopicPartition(runner.replica(g.topic), p) for p in range(loads[g.topic].partitions)
        ]
        for g in runner.scenario.workload.groups
    }
    replicas = {tp for tps in wanted.values() for tp in tps}
    starts = runner.admin(runner.scenario.target).list_offsets(replicas, "earliest")
    return placed_or_reset(Translation.of(run).positions(), wanted, starts)
