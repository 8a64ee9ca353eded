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

Every check is a pure judgement over figures: what the drill observed on the clusters comes in
as :class:`~drkit.drills.facts.DrillFacts` (gathered by drills.observe), the recount's figures
as report values.  topic_parity is judged where the differences are computed (drills.parity).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drkit.drills.facts import DrillFacts, LinkAtMove
from drkit.drills.report import DrillCheck, GroupOutcome, UnreplicatedPartition

LAG_TOLERANCE_S = 5.0  # "close behind": at most this many seconds of writes not yet copied


def run_all(
    facts: DrillFacts,
    rpo: Sequence[UnreplicatedPartition],
    groups: Sequence[GroupOutcome],
    accounting: dict[str, Any] | None,
) -> list[DrillCheck]:
    """Every check of a full drill, in report order (accounting_agrees only with verify)."""
    out = [
        link_health(facts.link, facts.asked_per_s),
        facts.parity,
        failed_back(facts, rpo) if facts.failed_back else fencing_held(facts),
        no_write_after_fence(facts),
        open_transactions(facts),
        nothing_skipped(groups),
    ]
    if accounting is not None:
        out.append(accounting_agrees(rpo, groups, accounting))
    return out


def link_health(link: LinkAtMove | None, asked_per_s: float) -> DrillCheck:
    """Copying, and at most LAG_TOLERANCE_S of the asked writes behind, when the move began."""
    if link is None:
        return DrillCheck("link_health", False, "no sample counted the copies before the move")
    if link.copied == 0:
        return DrillCheck("link_health", False, "nothing had been copied before the move")
    behind = max(0, link.written - link.copied)
    ok = behind <= asked_per_s * LAG_TOLERANCE_S
    return DrillCheck(
        "link_health",
        ok,
        f"{link.copied} copied, {behind} behind ({behind / asked_per_s:.1f}s of writes) "
        f"at {link.at_s:.1f}s",
    )


def fencing_held(facts: DrillFacts) -> DrillCheck:
    """The old primary refuses a workload write for authorization: the fence still stands."""
    if not facts.moved:
        return DrillCheck("fencing_held", False, "no failover run")
    write = facts.write_after
    if write.accepted:
        return DrillCheck("fencing_held", False, f"{facts.source} accepted a write")
    return DrillCheck(
        "fencing_held", write.refused_by_acl, f"{facts.source} refused: {write.refusal}"
    )


def failed_back(facts: DrillFacts, rpo: Sequence[UnreplicatedPartition]) -> DrillCheck:
    """After a failback: the tail exported is exactly what was lost, and the original
    primary takes writes again."""
    exported = facts.exported if facts.exported is not None else -1
    lost = sum(p.records for p in rpo)
    write = facts.write_after
    accepted = (
        "accepts writes again" if write.accepted else f"still refuses writes: {write.refusal}"
    )
    return DrillCheck(
        "failed_back",
        exported == lost and write.accepted,
        f"divergent tail exported: {exported} records (recount lost {lost}); "
        f"{facts.source} {accepted}",
    )


def no_write_after_fence(facts: DrillFacts) -> DrillCheck:
    """No write *sent* once the fence was in force (its step finished, or the source was cut
    off) was acknowledged.  Sent, not acknowledged: a transaction whose records the source
    accepted before the fence may still commit after it - EndTxn is not a topic write, and
    the fence point waits for the source's ends to settle, so those records are replicated."""
    fence = facts.fence
    if fence is None:
        return DrillCheck("no_write_after_fence", False, "the source was never fenced")
    late = sum(1 for at in facts.acked_at if at > fence.since)
    how = "cut off by the fault, fence applied on return" if fence.pending else "fenced by ACLs"
    return DrillCheck(
        "no_write_after_fence", late == 0, f"{late} writes acknowledged after ({how})"
    )


def open_transactions(facts: DrillFacts) -> DrillCheck:
    """No transaction is left open on the replica (last stable offset = high watermark)."""
    found = facts.replica_transactions
    if found.error is not None:
        return DrillCheck("open_transactions", False, f"could not read the replica: {found.error}")
    detail = ", ".join(found.open_partitions) or "none open on the replica"
    return DrillCheck("open_transactions", not found.open_partitions, detail)


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
    rpo: Sequence[UnreplicatedPartition], groups: Sequence[GroupOutcome], accounting: dict[str, Any]
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
