"""The non-disruptive drill: is a move from SOURCE to TARGET ready *now*?  Nothing is moved.

It works on the operator's real flows (not a drill's own topics):
* the plan a switchover would run (``Engine.plan``, which changes nothing): no blockers;
* topic and config parity: every replica present, as wide, with the same configs;
* checkpoints: every group has one on the target (else an unplanned failover guesses);
* link health: how far replication is behind (the plan's RPO per partition, from progress);
* shadow translation: every group's offsets are translated, verified record by record
  through provenance, and committed into a *shadow* group (``drkit-shadow.<group>``) on the
  target, read back, and deleted again - the real groups are never touched.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from drkit.config.loader import flow_between
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.drills.measure import readiness_verdict
from drkit.drills.parity import parity_check
from drkit.drills.report import DrillCheck, DrillReport, Series, Targets, UnreplicatedPartition
from drkit.drills.timeline import Timeline
from drkit.errors import DrkitError
from drkit.failover.engine import Engine
from drkit.failover.model import Plan, Procedure, Severity
from drkit.failover.run_result import RunOptions
from drkit.kafka import ClusterEndpoint
from drkit.kafka.io import commit_group_offsets
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.offsets.lookup import translate_groups
from drkit.records import TopicPartition
from drkit.store import StateStore
from drkit.store.flow_keys import keys_of
from drkit.timestamps import iso_utc

SHADOW_PREFIX = "drkit-shadow."
LAG_LIMIT_RECORDS = 10_000  # link health: at most this many records not yet replicated


def readiness(
    config: DrkitConfig,
    source: str,
    target: str,
    store: StateStore,
    state_dir: Path,
    ident: str,
    connect: AdminFactory,
) -> DrillReport:
    started = datetime.now(UTC)
    timeline = Timeline()
    flow = flow_between(config, source, target)
    down = _not_answering(config, source, target)
    if down:
        # Not ready, and nothing to look at: said after the first answer's wait, not after a
        # plan that waits for the source and reads the target (7-16 s, issue 45).
        why = "not checked: " + "; ".join(f"{c} does not answer ({w})" for c, w in down.items())
        timeline.add("clusters_checked", why)
        checks = [DrillCheck(name, False, why) for name in CHECKS]
        gone = " and ".join(down)
        note = (f"RPO not measured: {gone} {'do' if len(down) > 1 else 'does'} not answer, so "
                "replication progress cannot be compared with what the source holds.")  # fmt: skip
        return _report(ident, source, target, started, timeline, checks, (), False, note)
    engine = Engine(config, store, state_dir, role="drill-readiness", connect=connect)
    plan = engine.plan(Procedure.SWITCHOVER, source, target, RunOptions())
    timeline.add("plan_made", f"{len(plan.groups)} groups, {len(plan.findings)} findings")
    checks = [
        _plan_unblocked(plan),
        _parity(config, flow, plan, connect),
        _checkpoints(plan),
        _link(plan),
    ]
    groups = [g.group for g in plan.groups]
    checks.append(_shadow_translation(config, store, plan, groups, connect))
    measured = plan.source_reachable and plan.target_reachable and plan.rpo_records is not None
    timeline.add("shadow_translation", checks[-1].detail)
    rpo = tuple(
        UnreplicatedPartition(p.topic, p.partition, p.records or 0, 0, 0.0) for p in plan.rpo
    )
    note = (
        "RPO here is an estimate from replication progress: records the target would lack "
        "if the source were lost now (bytes and seconds are not measured in this mode)."
        if measured
        else "RPO not measured: "
        + (f"{_gone(plan)} not answer, so " if _gone(plan) else "")
        + "replication progress cannot be compared with what the source holds."
    )
    return _report(ident, source, target, started, timeline, checks, rpo, measured, note)


# The checks of a readiness drill, in the order the report lists them.
CHECKS = ("plan_unblocked", "topic_parity", "checkpoints", "link_health", "shadow_translation")


def _not_answering(config: DrkitConfig, source: str, target: str) -> dict[str, str]:
    """Each of the two clusters that is down, hung or not Kafka, with why - both asked at once,
    each within the first answer's bound (drkit.kafka.clients.FIRST_ANSWER_S)."""
    from drkit.kafka.clients import all_not_answering

    return all_not_answering([ClusterEndpoint(a, config.clusters[a]) for a in (source, target)])


def _report(
    ident: str,
    source: str,
    target: str,
    started: datetime,
    timeline: Timeline,
    checks: list[DrillCheck],
    rpo: tuple[UnreplicatedPartition, ...],
    measured: bool,
    note: str,
) -> DrillReport:
    verdict, reasons = readiness_verdict(checks)
    return DrillReport(
        id=ident,
        scenario="readiness",
        title=f"Readiness of {source} -> {target} (nothing moved)",
        mode="readiness",
        procedure="none",
        source=source,
        target=target,
        started_at=iso_utc(started),
        finished_at=iso_utc(datetime.now(UTC)),
        fault={"kind": "none", "at_s": 0.0, "how": "none: a readiness check moves nothing"},
        targets=Targets(rto_s=0.0, rpo_records=LAG_LIMIT_RECORDS),
        rto=None,
        rpo=rpo,
        groups=(),
        checks=tuple(checks),
        verdict=verdict,
        reasons=reasons,
        timeline=timeline.events(),
        series=Series(),
        notes=(note,),
        rpo_measured=measured,
    )


def _plan_unblocked(plan: Plan) -> DrillCheck:
    blockers = [f"{b.code}: {b.message}" for b in plan.blockers]
    return DrillCheck("plan_unblocked", not blockers, "; ".join(blockers) or "no blockers")


def _parity(config: DrkitConfig, flow: FlowConfig, plan: Plan, connect: AdminFactory) -> DrillCheck:
    if (why := _unanswered(plan)) is not None:
        return DrillCheck("topic_parity", False, why)
    return parity_check(config, flow, connect)


def _gone(plan: Plan) -> str:
    """The clusters that do not answer, with their verb: "dc2 does", "dc1 and dc2 do"."""
    gone = [c for c, up in ((plan.source, plan.source_reachable),
                            (plan.target, plan.target_reachable)) if not up]  # fmt: skip
    return f"{' and '.join(gone)} {'do' if len(gone) > 1 else 'does'}" if gone else ""


def _unanswered(plan: Plan) -> str | None:
    """Why a check could not look (None: both clusters answered) - naming the cluster that is
    down, never the other one (issue 45, M3)."""
    gone = _gone(plan)
    return f"not checked: {gone} not answer" if gone else None


def _checkpoints(plan: Plan) -> DrillCheck:
    if (why := _unanswered(plan)) is not None:
        return DrillCheck("checkpoints", False, why)
    missing = list(plan.groups_without_checkpoint)
    return DrillCheck(
        "checkpoints",
        not missing,
        ("no checkpoint on the target for " + ", ".join(missing))
        if missing
        else f"{len(plan.groups)} groups checkpointed",
    )


def _link(plan: Plan) -> DrillCheck:
    if (why := _unanswered(plan)) is not None:
        return DrillCheck("link_health", False, why)
    behind = plan.rpo_records
    warnings = [f.message for f in plan.findings if f.severity is Severity.WARNING]
    if behind is None:
        return DrillCheck("link_health", False, "replication progress unknown")
    return DrillCheck(
        "link_health",
        behind <= LAG_LIMIT_RECORDS,
        f"{behind} records not yet replicated" + (f"; {warnings[0]}" if warnings else ""),
    )


def _shadow_translation(
    config: DrkitConfig, store: StateStore, plan: Plan, groups: list[str], connect: AdminFactory
) -> DrillCheck:
    source, target = plan.source, plan.target
    if (why := _unanswered(plan)) is not None:
        return DrillCheck("shadow_translation", False, why)
    if not groups:
        return DrillCheck("shadow_translation", True, "no consumer groups to translate")
    flow = flow_between(config, source, target)
    try:
        report = translate_groups(
            config, flow, groups, verify=True, keys=keys_of(config, store), connect=connect
        )
    except DrkitError as err:
        return DrillCheck("shadow_translation", False, f"translation failed: {err}")
    problems = [f"{e.get('group')}: {e.get('reason')}" for e in report.errors]
    endpoint = ClusterEndpoint(target, config.clusters[target])
    admin = connect(endpoint)
    shadows: list[str] = []
    try:
        for group, rows in report.groups.items():
            bad = [r for r in rows if r.verified is False]
            if bad:
                problems.append(f"{group}: {len(bad)} partitions failed provenance checks")
            offsets = {TopicPartition(r.target_topic, r.target_partition): r.target_offset
                       for r in rows}  # fmt: skip
            shadow = SHADOW_PREFIX + group
            commit_group_offsets(endpoint, shadow, offsets)
            shadows.append(shadow)
            stored = _read_back(admin, shadow, set(offsets))
            if stored != offsets:
                problems.append(f"{shadow}: stored offsets differ from the translation")
    except DrkitError as err:
        problems.append(f"shadow commit failed: {err}")
    finally:
        if shadows:
            try:
                admin.delete_groups(shadows)
            except DrkitError as err:
                problems.append(f"shadow groups left behind ({', '.join(shadows)}): {err}")
    rows_total = sum(len(r) for r in report.groups.values())
    detail = "; ".join(problems) or (
        f"{len(report.groups)} groups, {rows_total} partitions translated, verified and "
        "committed into shadow groups"
    )
    return DrillCheck("shadow_translation", not problems, detail)


def _read_back(
    admin: ClusterAdmin, group: str, partitions: set[TopicPartition]
) -> dict[TopicPartition, int]:
    deadline = time.monotonic() + 10
    while True:
        stored = {tp: o for tp, o in admin.group_offsets(group).offsets.items() if tp in partitions}
        if len(stored) == len(partitions) or time.monotonic() > deadline:
            return stored
        time.sleep(0.2)
