"""The checks a drill reports, each passed or failed with what was seen.

* link_health: replication was copying, and close behind, when the fault struck;
* topic_parity: every workload topic has its replica on the target, as wide, same configs;
* fencing_held: the old primary refuses a write to a workload topic after the drill
  (after a failback instead: failed_back - the divergent tail exported is exactly what was
  lost, and the original primary takes writes again);
* no_write_after_fence: no write was acknowledged by the old primary once it was fenced;
* open_transactions: no transaction is left open on the replica (last stable = high watermark);
* nothing_skipped: no group skipped a record on the target (the drill's own recount);
* accounting_agrees: ``drkit verify`` counts what the recount counted: lost, skipped, re-read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from drkit.drills.environment import DrillEnvironment
from drkit.drills.parity import parity_check
from drkit.drills.report import DrillCheck, GroupOutcome, PartitionLoss
from drkit.drills.timeline import FAULT, RUN_STARTED
from drkit.errors import DrkitError, KafkaError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.model import StepName
from drkit.failover.results import DivergentTail, SourceFence
from drkit.kafka import KafkaAdmin
from drkit.kafka.io import produce_batch

if TYPE_CHECKING:
    from drkit.drills.runner import DrillRunner

LAG_TOLERANCE_S = 5.0  # "close behind": at most this many seconds of writes not yet copied


def await_fence(env: DrillEnvironment, cluster: str, timeout_s: float) -> bool:
    """Wait until no fence of ``cluster`` is pending (the monitor applies them on return)."""
    fences = FenceRepository(env.store)
    deadline = time.monotonic() + timeout_s
    while fences.topics(cluster, FenceState.PENDING):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def run_all(
    runner: DrillRunner,
    rpo: Sequence[PartitionLoss],
    groups: Sequence[GroupOutcome],
    accounting: dict[str, Any] | None,
) -> list[DrillCheck]:
    out = [
        link_health(runner),
        topic_parity(runner),
        failed_back(runner, rpo) if runner.failback_record is not None else fencing_held(runner),
        no_write_after_fence(runner),
        open_transactions(runner),
        nothing_skipped(groups),
    ]
    if accounting is not None:
        out.append(accounting_agrees(rpo, groups, accounting))
    return out


def link_health(runner: DrillRunner) -> DrillCheck:
    sampler = runner.sampler
    moment = runner.timeline.first(FAULT) or runner.timeline.first(RUN_STARTED)
    if sampler is None or moment is None:
        return DrillCheck("link_health", False, "no samples before the move")
    measured = [(t, w, c) for t, w, c in sampler.rows if t <= moment.at_s and c is not None]
    if not measured or measured[-1][2] == 0:
        return DrillCheck("link_health", False, "nothing had been copied before the move")
    _, written, copied = measured[-1]
    rate = sum(t.records_per_s for t in runner.scenario.workload.topics)
    behind = max(0, written - copied)
    ok = behind <= rate * LAG_TOLERANCE_S
    return DrillCheck(
        "link_health",
        ok,
        f"{copied} copied, {behind} behind ({behind / rate:.1f}s of writes) at {moment.at_s:.1f}s",
    )


def topic_parity(runner: DrillRunner) -> DrillCheck:
    topics = {runner.env.topic(t.name) for t in runner.scenario.workload.topics}
    return parity_check(runner.env.config, runner.env.flow, topics)


def _write_to_source(runner: DrillRunner, value: bytes) -> KafkaError | None:
    """One write to the first workload topic on the source: None when accepted."""
    topic = runner.env.topic(runner.scenario.workload.topics[0].name)
    try:
        produce_batch(runner.endpoint(runner.scenario.source), topic, [(None, value)], timeout_s=10)
    except KafkaError as err:
        return err
    return None


def fencing_held(runner: DrillRunner) -> DrillCheck:
    if runner.run_record is None:
        return DrillCheck("fencing_held", False, "no failover run")
    refusal = _write_to_source(runner, b"after-fence")
    if refusal is None:
        return DrillCheck("fencing_held", False, f"{runner.scenario.source} accepted a write")
    refused = "AUTHORIZATION" in str(refusal)
    return DrillCheck("fencing_held", refused, f"{runner.scenario.source} refused: {refusal}")


def failed_back(runner: DrillRunner, rpo: Sequence[PartitionLoss]) -> DrillCheck:
    """After a failback: the tail exported is exactly what was lost, and the original
    primary takes writes again."""
    run = runner.failback_record
    assert run is not None
    tail = DivergentTail.of(run)
    exported = tail.records if tail is not None else -1
    lost = sum(p.records for p in rpo)
    refusal = _write_to_source(runner, b"after-failback")
    accepted = "accepts writes again" if refusal is None else f"still refuses writes: {refusal}"
    ok = exported == lost and refusal is None
    return DrillCheck(
        "failed_back",
        ok,
        f"divergent tail exported: {exported} records (recount lost {lost}); "
        f"{runner.scenario.source} {accepted}",
    )


def no_write_after_fence(runner: DrillRunner) -> DrillCheck:
    """No write *sent* once the fence was in force (its step finished, or the source was cut
    off) was acknowledged.  Sent, not acknowledged: a transaction whose records the source
    accepted before the fence may still commit after it - EndTxn is not a topic write, and
    the fence point waits for the source's ends to settle, so those records are replicated."""
    run = runner.run_record
    step = run.step(StepName.FENCE_SOURCE) if run is not None else None
    fence = SourceFence.of(run) if run is not None else None
    if step is None or step.finished_at is None or fence is None:
        return DrillCheck("no_write_after_fence", False, "the source was never fenced")
    pending = fence.pending
    fault = runner.timeline.first(FAULT)
    fenced_at = (
        runner.timeline.started + fault.at_s
        if pending and fault is not None
        else step.finished_at.timestamp()
    )
    late = sum(1 for w in runner.writers for at, _ in w.acked() if at > fenced_at)
    how = "cut off by the fault, fence applied on return" if pending else "fenced by ACLs"
    return DrillCheck(
        "no_write_after_fence", late == 0, f"{late} writes acknowledged after ({how})"
    )


def open_transactions(runner: DrillRunner) -> DrillCheck:
    admin = KafkaAdmin(runner.endpoint(runner.scenario.target))
    open_partitions: list[str] = []
    try:
        for load in runner.scenario.workload.topics:
            replica = runner.replica(load.name)
            stable = admin.topic_offsets(replica, isolation="read_committed")
            high = admin.topic_offsets(replica)
            open_partitions += [f"{replica}-{p}" for p in high if stable[p][1] != high[p][1]]
    except DrkitError as err:
        return DrillCheck("open_transactions", False, f"could not read the replica: {err}")
    detail = ", ".join(open_partitions) or "none open on the replica"
    return DrillCheck("open_transactions", not open_partitions, detail)


def nothing_skipped(groups: Sequence[GroupOutcome]) -> DrillCheck:
    """A skipped record is never acceptable (re-reads are judged against the policy)."""
    bad = [f"{g.group}: {g.skipped} skipped" for g in groups if g.skipped]
    reread = sum(g.reread for g in groups)
    return DrillCheck(
        "nothing_skipped",
        not bad,
        "; ".join(bad) or f"{len(groups)} groups skipped nothing ({reread} re-read in all)",
    )


def accounting_agrees(
    rpo: Sequence[PartitionLoss], groups: Sequence[GroupOutcome], accounting: dict[str, Any]
) -> DrillCheck:
    """``drkit verify`` (Spark, on the records) counts what the drill's recount counted: the
    records lost, and the records groups skip or read again from where the failover put them.

    Lost records are verify's ``missing`` (gaps below the last replicated offset) plus its
    ``unreplicated_tail`` (above it): the RPO of an unplanned move is usually all tail."""
    totals = accounting.get("totals", {})
    seen = (
        verify_lost(totals),
        int(totals.get("skipped_by_groups", -1)),
        int(totals.get("read_again_by_groups", -1)),
    )
    counted = (
        sum(p.records for p in rpo),
        sum(g.skipped for g in groups),
        sum(g.reread for g in groups),
    )
    return DrillCheck(
        "accounting_agrees",
        seen == counted,
        f"drkit verify on {totals.get('records')} records: {seen[0]} lost "
        f"({totals.get('missing')} missing, {totals.get('unreplicated_tail')} never replicated), "
        f"{seen[1]} skipped, "
        f"{seen[2]} read again, {totals.get('duplicated_records', 0)} duplicated (recount: "
        f"{counted[0]} lost, {counted[1]} skipped, {counted[2]} re-read)",
    )


def verify_lost(totals: dict[str, Any]) -> int:
    """Records the target never got, in ``drkit verify``'s totals (-1 when it has no figures)."""
    if "missing" not in totals or "unreplicated_tail" not in totals:
        return -1
    return int(totals["missing"]) + int(totals["unreplicated_tail"])
