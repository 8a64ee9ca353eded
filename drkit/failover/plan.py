"""The failover plan: a pure function of a snapshot and a runbook.

For every group and partition it states S, T, the method, the expected re-reads and the records
the target never got; per partition the RPO (records, and seconds where known); which target
groups are active and would block; topics missing on the target; open transactions; the
ordered steps and which of them can roll back; and the blockers that keep the run from starting.
The engine executes exactly this plan; ``--plan`` prints it and changes nothing.

Decision rules:
* the target must answer (else nothing can be promoted) - blocker;
* planned moves (switchover, cutover, failback) need the source: blocker when it is gone
  ("use drkit failover"); an unplanned failover with a healthy source is allowed, with a warning;
* the pointer already on the target - blocker (nothing to move);
* a planned move whose source topics have no replica on the target - blocker (the data is not
  there); for an unplanned failover - warning;
* a group active on the target is not written (warning); ``--overwrite-active-groups``
  writes it (warning);
* RPO beyond ``failover.max_rpo_records`` / ``max_rpo_s`` - warning for a manual failover (the
  operator decides; automation uses it as a gate);
* partitions that cannot be translated, groups with offsets but no checkpoint, open
  transactions on the target - warnings.
"""

from __future__ import annotations

from typing import Any

from drkit import translation
from drkit.failover.facts import GroupFacts, PartitionFacts, Snapshot
from drkit.failover.model import (
    Finding,
    GroupMove,
    PartitionMove,
    PartitionRpo,
    Plan,
    PlannedStep,
    Procedure,
    Severity,
    StepName,
)
from drkit.failover.runbook import Runbook
from drkit.translation import CannotTranslate, Method

_PLANNED = (Procedure.SWITCHOVER, Procedure.CUTOVER, Procedure.FAILBACK)


def make_plan(snapshot: Snapshot, runbook: Runbook, memo: TranslationMemo | None = None) -> Plan:
    """The plan for ``snapshot`` following ``runbook``; see the module docstring.  ``memo``
    keeps the groups' translations for the run's own translation step (same answers)."""
    findings: list[Finding] = []
    timeouts: dict[StepName, float] = {}
    if snapshot.procedure in _PLANNED and snapshot.policy.switchover_timeout_s:
        timeouts[StepName.DRAIN] = snapshot.policy.switchover_timeout_s
    steps = runbook.planned_steps(timeouts)
    findings += _reachability(snapshot)
    groups = tuple(_group(snapshot, facts, memo) for facts in snapshot.groups)
    for group in groups:
        if group.blocked:
            findings.append(
                Finding(
                    Severity.WARNING,
                    "group_active_on_target",
                    f"group {group.group} is {group.target_state} on {snapshot.target}: its "
                    "offsets will not be written (stop its consumers there, or use "
                    "--overwrite-active-groups)",
                )
            )
        elif snapshot.force and group.target_state not in ("empty", "dead", "absent"):
            findings.append(
                Finding(
                    Severity.WARNING,
                    "group_forced",
                    f"--overwrite-active-groups: group {group.group} is {group.target_state} on "
                    f"{snapshot.target}; its offsets will be overwritten under running consumers",
                )
            )
        unmapped = [p for p in group.partitions if p.target_offset is None]
        if unmapped:
            findings.append(
                Finding(
                    Severity.WARNING,
                    "cannot_translate",
                    f"group {group.group}: {len(unmapped)} partition(s) cannot be translated "
                    f"(e.g. {unmapped[0].source_topic}[{unmapped[0].source_partition}]: "
                    f"{unmapped[0].reason})",
                )
            )
    rpo = tuple(partition_rpo(facts) for facts in sorted(snapshot.partitions.values(), key=_key))
    findings += _rpo_findings(snapshot, rpo)
    findings += _topic_findings(snapshot)
    findings += _unknown_groups(snapshot)
    findings += _schema_findings(snapshot)
    if snapshot.untranslatable_groups:
        findings.append(
            Finding(
                Severity.WARNING,
                "untranslatable_groups",
                f"not consumer groups, not moved: {', '.join(snapshot.untranslatable_groups)} "
                "(share groups of KIP-932, or streams groups, keep no committed offsets to "
                f"translate: their consumers on {snapshot.target} start where "
                "share.auto.offset.reset puts them - latest by default)",
            )
        )
    without = groups_without_checkpoint(snapshot)
    if without:
        findings.append(
            Finding(
                Severity.WARNING,
                "groups_without_checkpoint",
                f"groups with no checkpoint on {snapshot.target}: "
                + ", ".join(without)
                + " - nothing is written for them; their consumers start where their "
                "auto.offset.reset puts them (earliest: the replica's start, re-reading; "
                "latest: its end, skipping what they had not read)",
            )
        )
    if snapshot.open_transactions:
        findings.append(
            Finding(
                Severity.WARNING,
                "open_transactions",
                f"{len(snapshot.open_transactions)} target partition(s) have an open "
                "transaction (read_committed consumers wait behind it); drkit's own are aborted, "
                "others are reported",
            )
        )
    notes = _notes(snapshot, steps)
    return Plan(
        procedure=snapshot.procedure,
        source=snapshot.source,
        target=snapshot.target,
        flow=snapshot.flow,
        reverse_flow=snapshot.reverse_flow,
        source_reachable=snapshot.source_reachable,
        translation_mode="live" if snapshot.source_reachable else "checkpoints",
        steps=steps,
        groups=groups,
        groups_without_checkpoint=without,
        rpo=rpo,
        findings=tuple(findings),
        pointer_from=snapshot.pointer,
        pointer_to=snapshot.target,
        open_transactions=snapshot.open_transactions,
        created_at_ms=snapshot.now_ms,
        notes=notes,
        target_reachable=snapshot.target_reachable,
    )


def _unknown_groups(snapshot: Snapshot) -> list[Finding]:
    """Groups named with --group that the flow has no trace of.  With the source answering
    there is no such group (a typo: blocker, rather than a run that moves "groups: 0"); with it
    gone, the group may simply have no checkpoint yet (warning)."""
    if snapshot.requested_groups is None or not snapshot.target_reachable:
        return []
    known = {g.group for g in snapshot.groups} | set(snapshot.groups_without_checkpoint)
    unknown = [g for g in snapshot.requested_groups if g not in known]
    if not unknown:
        return []
    if snapshot.source_reachable:
        return [
            Finding(
                Severity.BLOCKER,
                "unknown_groups",
                f"--group {', '.join(unknown)}: no offsets committed on {snapshot.source} for "
                f"the topics of {snapshot.flow} (a typo?)",
            )
        ]
    return [
        Finding(
            Severity.WARNING,
            "unknown_groups",
            f"--group {', '.join(unknown)}: no checkpoint on {snapshot.target} - nothing is "
            "written for them (their consumers start where auto.offset.reset puts them)",
        )
    ]


def groups_without_checkpoint(snapshot: Snapshot) -> tuple[str, ...]:
    """Groups that will not be placed: with the source up, those with committed offsets but no
    checkpoint; with it gone, also every group the monitor saw that no checkpoint names (they
    would otherwise vanish from the plan without a word)."""
    names = set(snapshot.groups_without_checkpoint)
    if not snapshot.source_reachable:
        placed = {g.group for g in snapshot.groups}
        names |= {g for g in snapshot.groups_seen if g not in placed}
    return tuple(sorted(names))


def _key(facts: PartitionFacts) -> tuple[str, int]:
    return facts.source.topic, facts.source.partition


# A move's method as stored, per translation method: looked up, not formatted - a plan at
# 10,000 groups x 50 partitions names one for each of 500,000 moves.
_LIVE = {method: method.value for method in Method}
_FROM_CHECKPOINT = {method: f"checkpoint+{method.value}" for method in Method}


def translate_group(snapshot: Snapshot, facts: GroupFacts) -> tuple[PartitionMove, ...]:
    """Where ``facts.group`` resumes on every partition (the translation step uses this too):
    drkit.translation's one rule over the snapshot's facts."""
    moves: list[PartitionMove] = []
    if facts.from_checkpoints:
        moves += _uncovered(snapshot, facts)
    methods = _FROM_CHECKPOINT if facts.from_checkpoints else _LIVE
    known = snapshot.partitions
    # translation.translate_group's rule, partition by partition over the snapshot's facts
    # (no per-group dicts: a plan at 10,000 groups x 50 partitions runs this 500,000 times).
    for tp, offset in sorted(facts.committed.items(), key=translation.by_partition):
        part = known.get(tp)
        if part is None:  # a partition the snapshot does not know: not replicated by this flow
            continue
        result = translation.translate_partition(
            tp, offset, part.mapping, part.target_bounds, part.source_end
        )
        if isinstance(result, CannotTranslate):
            moves.append(_unmapped(part, result.source_offset, result.reason))
            continue
        moves.append(
            PartitionMove(
                tp.topic,
                tp.partition,
                result.target.topic,
                result.target.partition,
                result.source_offset,
                result.target_offset,
                methods[result.method],
                result.expected_rereads,
                result.unreplicated,
            )
        )
    return tuple(moves)


def _uncovered(snapshot: Snapshot, facts: GroupFacts) -> list[PartitionMove]:
    """Partitions of the topics a group's checkpoints name that no checkpoint covers: nothing
    is written there, and the plan says where its consumers will start instead."""
    out: list[PartitionMove] = []
    for topic in sorted({tp.topic for tp in facts.committed}):
        for part in snapshot.partitions_by_topic.get(topic, ()):
            if part.source in facts.committed:
                continue
            bounds = part.target_bounds
            where = (
                f"earliest: T={bounds.start}, latest: T={bounds.end}" if bounds is not None else "?"
            )
            reason = f"no checkpoint here: its consumers start at auto.offset.reset ({where})"
            out.append(_unmapped(part, None, reason))
    return out


def _unmapped(part: PartitionFacts, offset: int | None, reason: str) -> PartitionMove:
    return PartitionMove(
        part.source.topic,
        part.source.partition,
        part.target.topic,
        part.target.partition,
        offset,
        None,
        "none",
        None,
        None,
        reason,
    )


class TranslationMemo:
    """Each group's translation with the inputs it came from, kept from the plan for the run's
    translation step: a group whose inputs are unchanged gets the moves it had, without being
    translated again (measured at 10,000 groups x 50 partitions: the translation step went from
    31.7 s to 8.8 s; bench/RESULTS.md, Failover).

    Invariant: ``moves(snapshot, facts)`` always equals ``translate_group(snapshot, facts)``.
    The inputs are the group's offsets and, per partition the translation reads, the mapping,
    the target's bounds and the source's end; a mapping is usually compared by identity - a
    snapshot's reader hands out the same object for a partition whose runs did not change - and
    by value otherwise.  Not thread-safe.
    """

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple[Any, ...], tuple[PartitionMove, ...]]] = {}
        self.reused = 0

    def moves(self, snapshot: Snapshot, facts: GroupFacts) -> tuple[PartitionMove, ...]:
        inputs = _inputs(snapshot, facts)
        kept = self._kept.get(facts.group)
        if kept is not None and kept[0] == inputs:
            self.reused += 1
            return kept[1]
        moves = translate_group(snapshot, facts)
        self._kept[facts.group] = (inputs, moves)
        return moves


def _inputs(snapshot: Snapshot, facts: GroupFacts) -> tuple[Any, ...]:
    """Everything ``translate_group`` reads for ``facts``."""
    parts = snapshot.partitions
    read: list[Any] = [facts.from_checkpoints]
    for tp, offset in facts.committed.items():
        part = parts.get(tp)
        read.append((tp, offset, None if part is None else _partition_inputs(part)))
    if facts.from_checkpoints:  # _uncovered reads every partition of the group's topics
        for topic in sorted({tp.topic for tp in facts.committed}):
            for part in snapshot.partitions_by_topic.get(topic, ()):
                read.append((part.source, part.target, part.target_bounds))
    return tuple(read)


def _partition_inputs(part: PartitionFacts) -> tuple[Any, ...]:
    return part.target, part.mapping, part.target_bounds, part.source_end


def _group(snapshot: Snapshot, facts: GroupFacts, memo: TranslationMemo | None) -> GroupMove:
    active = facts.target_members > 0 or facts.target_state not in ("empty", "dead", "absent")
    return GroupMove(
        facts.group,
        facts.target_state,
        active and not snapshot.force,
        memo.moves(snapshot, facts) if memo is not None else translate_group(snapshot, facts),
    )


def partition_rpo(facts: PartitionFacts) -> PartitionRpo:
    """What the target lacks of one partition - the one RPO rule (the plan and the
    translate step's record of the failover point both use it)."""
    records = None
    if facts.unreplicated_visible is not None:
        records = facts.unreplicated_visible  # counted on the live source
    elif facts.source_end is not None and facts.replicated_end is not None:
        records = max(0, facts.source_end - facts.replicated_end)  # offsets: an upper bound
    exact = facts.unreplicated_visible is not None or records == 0
    seconds = None
    if records == 0 and facts.source_end_live:
        seconds = 0.0  # measured now: the target holds everything the source holds
    elif not facts.source_end_live:
        # The source is gone: what it took after the last evidence is unknown, so the loss may
        # reach back as far as that evidence is old - never 0 by default.  Caught up
        # (records 0): the flow's newest progress; else this partition's own.
        seconds = facts.evidence_age_s if records == 0 else facts.progress_age_s
    return PartitionRpo(
        facts.source.topic,
        facts.source.partition,
        facts.source_end,
        facts.replicated_end,
        records,
        None,
        seconds,
        exact,
        facts.source_end_live,
    )


def _reachability(snapshot: Snapshot) -> list[Finding]:
    out: list[Finding] = []
    if not snapshot.target_reachable:
        out.append(
            Finding(
                Severity.BLOCKER,
                "target_unreachable",
                f"{snapshot.target} does not answer: nothing can be promoted",
            )
        )
    if snapshot.procedure in _PLANNED and not snapshot.source_reachable:
        out.append(
            Finding(
                Severity.BLOCKER,
                "source_unreachable",
                f"{snapshot.source} does not answer ({snapshot.source_error}); a planned "
                f"{snapshot.procedure.value} needs it - use 'drkit failover' for an unplanned "
                "move",
            )
        )
    if snapshot.procedure is Procedure.FAILOVER and snapshot.source_reachable:
        out.append(
            Finding(
                Severity.WARNING,
                "source_reachable",
                f"{snapshot.source} answers: a planned 'drkit switchover' would lose nothing",
            )
        )
    if snapshot.pointer == snapshot.target and snapshot.procedure is not Procedure.FAILBACK:
        out.append(
            Finding(
                Severity.BLOCKER,
                "already_active",
                f"the active pointer is already on {snapshot.target}",
            )
        )
    if snapshot.procedure is Procedure.FAILBACK and snapshot.pointer != snapshot.source:
        out.append(
            Finding(
                Severity.BLOCKER,
                "pointer_elsewhere",
                f"failback moves the applications from {snapshot.source}, but the active "
                f"pointer is on {snapshot.pointer or 'nothing'}",
            )
        )
    return out


def _rpo_findings(snapshot: Snapshot, rpo: tuple[PartitionRpo, ...]) -> list[Finding]:
    if snapshot.procedure is not Procedure.FAILOVER:
        return []
    unknown = [p for p in rpo if p.records is None]
    total = sum(p.records or 0 for p in rpo)
    worst = max((p.seconds or 0.0 for p in rpo), default=0.0)
    out: list[Finding] = []
    if unknown:
        out.append(
            Finding(
                Severity.WARNING,
                "rpo_unknown",
                f"{len(unknown)} partition(s) with no known source end: their loss is unknown",
            )
        )
    if total > snapshot.policy.max_rpo_records:
        out.append(
            Finding(
                Severity.WARNING,
                "rpo_records",
                f"{total} records were never replicated (failover.max_rpo_records="
                f"{snapshot.policy.max_rpo_records})",
            )
        )
    if worst > snapshot.policy.max_rpo_s:
        out.append(
            Finding(
                Severity.WARNING,
                "rpo_seconds",
                f"up to {worst:.0f}s of writes may be lost (failover.max_rpo_s="
                f"{snapshot.policy.max_rpo_s:g})",
            )
        )
    return out


def _topic_findings(snapshot: Snapshot) -> list[Finding]:
    severity = Severity.BLOCKER if snapshot.procedure in _PLANNED else Severity.WARNING
    out: list[Finding] = []
    if snapshot.missing_replicas:
        out.append(
            Finding(
                severity,
                "replicas_missing",
                "source topics without a replica on the target: "
                + ", ".join(snapshot.missing_replicas),
            )
        )
    if snapshot.short_replicas:
        out.append(
            Finding(
                Severity.WARNING,
                "replicas_short",
                "replicas with fewer partitions than their source topic: "
                + ", ".join(snapshot.short_replicas),
            )
        )
    return out


def _notes(snapshot: Snapshot, steps: tuple[PlannedStep, ...]) -> tuple[str, ...]:
    notes: list[str] = []
    if snapshot.procedure in _PLANNED:
        notes.append(
            "translations shown are as of now; the run translates again after the drain, "
            "exactly, from the fenced source"
        )
    names = [s.name for s in steps]
    if StepName.START_REVERSE_FLOW in names and snapshot.reverse_flow is None:
        notes.append(
            f"no flow {snapshot.target}->{snapshot.source} is configured: replication will not "
            "run in reverse"
        )
    if not snapshot.source_reachable and snapshot.procedure is Procedure.FAILOVER:
        notes.append(
            f"{snapshot.source} is unreachable: its fence is recorded as pending and applied "
            "when it answers again"
        )
    return tuple(notes)


def _schema_findings(snapshot: Snapshot) -> list[Finding]:
    """What the target's schema registry will hold when the applications arrive.

    A planned move blocks on what would fail its ``sync_schemas`` step after the fence: a
    registry that does not answer, or ids that mean two schemas.  An unplanned failover only
    warns - it goes on with what the target holds."""
    facts = snapshot.schemas
    if facts is None:
        return []
    planned = snapshot.procedure is not Procedure.FAILOVER
    severity = Severity.BLOCKER if planned else Severity.WARNING
    if facts.error is not None:
        why = (
            "a planned move makes a last copy of the schemas before the pointer moves"
            if planned
            else f"{snapshot.target}'s registry has what the last schema sync copied"
        )
        return [Finding(severity, "schemas_unknown", f"{facts.error}: {why}")]
    findings: list[Finding] = []
    if facts.conflicts:
        shown = "; ".join(facts.conflicts[:3])
        more = f" (and {len(facts.conflicts) - 3} more)" if len(facts.conflicts) > 3 else ""
        findings.append(
            Finding(
                severity,
                "schema_conflicts",
                f"the schema registries of {snapshot.source} and {snapshot.target} conflict - "
                f"records may decode into other schemas on {snapshot.target}: {shown}{more}",
            )
        )
    if facts.missing_versions:
        ids = ", ".join(str(i) for i in facts.missing_ids[:10])
        more = " ..." if len(facts.missing_ids) > 10 else ""
        findings.append(
            Finding(
                Severity.WARNING,
                "schemas_missing",
                f"{facts.missing_versions} schema version(s) of {snapshot.source}'s registry "
                f"are not on {snapshot.target}'s yet (ids {ids}{more}): sync_schemas copies "
                "them before the pointer moves",
            )
        )
    return findings
