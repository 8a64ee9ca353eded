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
* RPO beyond ``failover.max_rpo_records`` / ``max_rpo_s`` (drkit.lag's rules, judged as
  readiness judges them; seconds unknown while the records are known is beyond too) - warning
  for a manual failover (the operator decides; automation uses it as a gate);
* partitions that cannot be translated, groups with offsets but no checkpoint, open
  transactions on the target - warnings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from drkit import lag, translation
from drkit.failover.facts import GroupFacts, PartitionFacts, Snapshot
from drkit.failover.model import (
    Finding,
    GroupMove,
    PartitionMove,
    Plan,
    PlannedStep,
    Procedure,
    Severity,
    StepName,
)
from drkit.failover.runbook import Runbook
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition, built
from drkit.translation import CannotTranslate, Flag, Method, TranslationResult

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
    findings += _signing_findings(snapshot)
    findings += _unchecked_claims(snapshot)
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


def unverified_syncs_finding(count: int, target: str) -> Finding:
    """Offset syncs whose drkit-mac failed (drkit/signing.py): forged, or written before
    signing - ignored, and translation rounds down where they may hide copies."""
    return Finding(
        Severity.WARNING,
        "unverified_offset_syncs",
        f"{count} offset syncs on {target} failed verification and were ignored (not signed "
        "with the flow's key: forged, or written before drkit signed them); positions they "
        "could hide are rounded down (flag 'unverified': more re-reads, never a skip)",
    )


def _signing_findings(snapshot: Snapshot) -> list[Finding]:
    """Ignored offset syncs (a warning); none verifying at all - the key here is not the one
    the workers signed with - blocks a planned move (its source is alive: fix the key first)
    and warns loudly before an unplanned one, which re-reads the replicas from their start."""
    rejected = snapshot.unverified_syncs
    if not rejected:
        return []
    if snapshot.verified_syncs:
        return [unverified_syncs_finding(rejected, snapshot.target)]
    what = (
        f"none of the {rejected} offset syncs on {snapshot.target} verifies with this "
        f"deployment's key for {snapshot.flow}: the workers signed them with another key (the "
        "state store was replaced or restored without its flow_keys table, signing.secret "
        "changed, or they were written before drkit signed them)"
    )
    return _blocks_a_planned_move(
        snapshot,
        "offset_syncs_unverifiable",
        f"{what}. Restore the store's keys or the same signing.secret, or restart 'drkit "
        "replicate' with this store so fresh signed syncs cover the groups' positions",
        f"{what}: every group re-reads its replicas from their start (flag 'unverified': "
        "nothing skipped, many duplicates)",
    )


def _blocks_a_planned_move(
    snapshot: Snapshot, code: str, planned: str, unplanned: str
) -> list[Finding]:
    """``code`` as a blocker of a planned move (its source is alive: deal with it first),
    saying ``planned``; a warning before an unplanned failover, which goes on: ``unplanned``."""
    if snapshot.procedure in _PLANNED:
        return [Finding(Severity.BLOCKER, code, planned)]
    return [Finding(Severity.WARNING, code, unplanned)]


def _unchecked_claims(snapshot: Snapshot) -> list[Finding]:
    """Copies offset syncs that failed verification claim and that the plan's reads of the
    replica did not reach (drkit/offsets/corroboration.py): the answers they could lower are
    lowered, flagged 'unchecked' (translation, invariant 10: re-reads, never a skip).  That
    many claims are a flood, most likely forged: a planned move (its source is alive) blocks
    until they are dealt with; an unplanned failover goes on with the re-reads (security
    review 9, R9-M1)."""
    count = snapshot.unchecked_claims
    if not count:
        return []
    what = (
        f"{count} copies claimed by offset syncs on {snapshot.target} that failed "
        "verification were not checked against the replica's records (too many to read in "
        "one plan: forged, most likely)"
    )
    return _blocks_a_planned_move(
        snapshot,
        "offset_sync_claims_unchecked",
        f"{what}: groups they could move back would re-read from there (flag 'unchecked'). "
        "Find the writer of the offset-sync topic and put ACLs on it (docs/security.md), then "
        "plan again",
        f"{what}: groups they could move back resume there - re-reads, never a skip "
        "(flag 'unchecked')",
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


def group_moves(snapshot: Snapshot, facts: GroupFacts) -> tuple[PartitionMove, ...]:
    """Where ``facts.group`` resumes on every partition (the translation step uses this too):
    drkit.translation's one group translator over the snapshot's inputs, as moves."""
    moves: list[PartitionMove] = []
    if facts.from_checkpoints:
        moves += _uncovered(snapshot, facts)
    methods = _FROM_CHECKPOINT if facts.from_checkpoints else _LIVE
    known = snapshot.partitions
    # Partitions this flow does not replicate are not moved.
    mine = {tp: offset for tp, offset in facts.committed.items() if tp in known}
    for tp, result in translation.translate_group(mine, snapshot.inputs).items():
        moves.append(_move(known[tp], result, methods))
    return (*moves, *returning_moves(snapshot, facts))


def returning_moves(snapshot: Snapshot, facts: GroupFacts) -> tuple[PartitionMove, ...]:
    """Where ``facts.group`` resumes on the target's own topics it read on the source through
    the reverse flow's replicas (the way back of a round trip; drkit.translation, invariant 8)."""
    moves = []
    for replica, offset in sorted(facts.returning.items(), key=translation.by_partition):
        mapping = snapshot.returning.get(replica)
        if mapping is None:
            continue
        result = translation.translate_back(
            replica, offset, mapping, snapshot.returning_held.get(replica),
            facts.returning_origin.get(mapping.source),
        )  # fmt: skip
        if isinstance(result, CannotTranslate):
            moves.append(PartitionMove(replica.topic, replica.partition, mapping.source.topic,
                                       mapping.source.partition, offset, None, "none", None,
                                       None, result.reason))  # fmt: skip
            continue
        moves.append(PartitionMove(replica.topic, replica.partition, result.target.topic,
                                   result.target.partition, offset, result.target_offset,
                                   result.method.value, 0, None))  # fmt: skip
    return tuple(moves)


def _move(
    part: PartitionFacts, result: TranslationResult, methods: Mapping[Method, str]
) -> PartitionMove:
    """A group's translation on ``part`` as its move: one partition of :func:`group_moves`."""
    if isinstance(result, CannotTranslate):
        return _unmapped(part, result.source_offset, result.reason)
    target = result.target
    return built(
        PartitionMove,
        {
            "source_topic": part.source.topic,
            "source_partition": part.source.partition,
            "target_topic": target.topic,
            "target_partition": target.partition,
            "source_offset": result.source_offset,
            "target_offset": result.target_offset,
            "method": methods[result.method],
            # Rounded down past unverified syncs: what they hid is re-read too, uncounted.
            "expected_rereads": (
                None if Flag.UNVERIFIED in result.flags else result.expected_rereads
            ),
            "unreplicated": result.unreplicated,
            "reason": "",
        },
    )


def _uncovered(
    snapshot: Snapshot,
    facts: GroupFacts,
    move_of: Callable[[PartitionFacts], PartitionMove] | None = None,
) -> list[PartitionMove]:
    """Partitions of the topics a group's checkpoints name that no checkpoint covers: nothing
    is written there, and the plan says where its consumers will start instead (``move_of``:
    that move, made anew by default)."""
    make = move_of or _uncovered_move
    out: list[PartitionMove] = []
    for topic in sorted({tp.topic for tp in facts.committed}):
        for part in snapshot.partitions_by_topic.get(topic, ()):
            if part.source in facts.committed:
                continue
            out.append(make(part))
    return out


def _uncovered_move(part: PartitionFacts) -> PartitionMove:
    bounds = part.target_bounds
    where = f"earliest: T={bounds.start}, latest: T={bounds.end}" if bounds is not None else "?"
    reason = f"no checkpoint here: its consumers start at auto.offset.reset ({where})"
    return _unmapped(part, None, reason)


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
    """Moves by partition and committed offset, kept across the groups of a plan and from the
    plan to the run's translation step.

    A move depends only on the partition's facts (its replica, offset map, the target's bounds,
    the source's end and log start) and the committed offset, never on the group: groups that
    committed the same offset on a partition share one frozen :class:`PartitionMove`,
    translated once, and a snapshot whose partition facts did not change answers from the moves
    the last one made (the translation step after the plan, with replication stopped).

    Invariant: ``moves(snapshot, facts)`` always equals ``group_moves(snapshot, facts)``.
    A partition's facts are compared by value (a mapping usually by identity: a snapshot's
    reader hands out the same object for a partition whose runs did not change); any change
    drops that partition's moves.  A group whose committed offsets are the very mapping it had
    last time, while no partition changed, gets its last moves back whole (the translation
    step after an unplanned failover's plan: 0.36 s -> 0.01 s at 10,000 groups).  ``reused``
    counts the groups answered without translating anything.  Not thread-safe.
    """

    def __init__(self) -> None:
        # per source partition: (its facts as translated, moves by offset: live, checkpointed)
        self._parts: dict[TopicPartition, _PartitionMoves] = {}
        self._prepared: tuple[Mapping[TopicPartition, PartitionFacts], dict[Any, Any]] | None
        self._prepared = None
        # Bumped whenever a snapshot's partitions differ from the last one's (any facts, or the
        # set of them): a group's moves are kept with the generation they were made in.
        self._generation = 0
        # per group: (generation, its committed offsets - the very mapping -, from checkpoints,
        # its moves).  A snapshot read from an unchanged checkpoint topic hands out the same
        # mappings (drkit.offsets.checkpoint_store), never changed in place.
        self._groups: dict[str, tuple[int, Mapping[TopicPartition, int], bool, Any]] = {}
        self.reused = 0

    def moves(self, snapshot: Snapshot, facts: GroupFacts) -> tuple[PartitionMove, ...]:
        tables = self._tables(snapshot)
        kept = self._groups.get(facts.group)
        if (
            kept is not None
            and kept[0] == self._generation
            and kept[1] is facts.committed
            and kept[2] == facts.from_checkpoints
        ):
            self.reused += 1
            return kept[3]  # type: ignore[no-any-return]
        found = self._moves(snapshot, facts, tables)
        self._groups[facts.group] = (
            self._generation,
            facts.committed,
            facts.from_checkpoints,
            found,
        )
        return found

    def _moves(
        self,
        snapshot: Snapshot,
        facts: GroupFacts,
        tables: Mapping[TopicPartition, _PartitionMoves],
    ) -> tuple[PartitionMove, ...]:
        moves: list[PartitionMove] = []
        if facts.from_checkpoints:
            moves += self._uncovered(snapshot, facts, tables)
        kind = 1 if facts.from_checkpoints else 0
        # Offsets no group was moved from yet, in partition order, with where their moves go.
        wanted: dict[TopicPartition, int] = {}
        fresh: list[tuple[int, _PartitionMoves]] = []
        for tp, offset in sorted(facts.committed.items(), key=translation.by_partition):
            table = tables.get(tp)
            if table is None:  # a partition this flow does not replicate: not moved
                continue
            move = table.by_offset[kind].get(offset)
            if move is None:
                wanted[tp] = offset
                fresh.append((len(moves), table))
            moves.append(move)  # type: ignore[arg-type]  # a fresh one is filled in below
        if not fresh:
            self.reused += 1
            return (*moves, *returning_moves(snapshot, facts))
        # The fresh ones through the one group translator (its answers in partition order, as
        # they were gathered), each kept for every group at its offset.
        methods = _FROM_CHECKPOINT if facts.from_checkpoints else _LIVE
        answers = translation.translate_group(wanted, snapshot.inputs).values()
        for (at, table), result in zip(fresh, answers, strict=True):
            move = _move(table.part, result, methods)
            moves[at] = table.by_offset[kind][result.source_offset] = move
        return (*moves, *returning_moves(snapshot, facts))

    def _uncovered(
        self, snapshot: Snapshot, facts: GroupFacts, tables: Mapping[TopicPartition, Any]
    ) -> list[PartitionMove]:
        """:func:`_uncovered`, skipping the scan when the group covers every partition of its
        topics (the usual case) and sharing each partition's one move."""
        topics: dict[str, int] = {}
        for tp in facts.committed:
            if tp in tables:
                topics[tp.topic] = topics.get(tp.topic, 0) + 1
        by_topic = snapshot.partitions_by_topic
        if all(count == len(by_topic.get(topic, ())) for topic, count in topics.items()):
            others = {tp.topic for tp in facts.committed if tp.topic not in topics}
            if not any(by_topic.get(topic) for topic in others):
                return []
        return _uncovered(snapshot, facts, lambda part: tables[part.source].uncovered)

    def _tables(self, snapshot: Snapshot) -> Mapping[TopicPartition, _PartitionMoves]:
        """The moves of every partition of ``snapshot``: kept where its facts did not change."""
        prepared = self._prepared
        if prepared is not None and prepared[0] is snapshot.partitions:
            return prepared[1]
        kept = self._parts
        changed = prepared is None or prepared[1].keys() != snapshot.partitions.keys()
        for tp, part in snapshot.partitions.items():
            inputs = _partition_inputs(part)
            old = kept.get(tp)
            if old is None or old.inputs != inputs:
                kept[tp] = _PartitionMoves(part, inputs)
                changed = True
        tables = {tp: kept[tp] for tp in snapshot.partitions}
        if changed:
            self._generation += 1
        self._prepared = (snapshot.partitions, tables)
        return tables


class _PartitionMoves:
    """One partition's facts as translated, and its moves by committed offset."""

    def __init__(self, part: PartitionFacts, inputs: tuple[Any, ...]) -> None:
        self.part, self.inputs = part, inputs
        self.by_offset: tuple[dict[int, PartitionMove], dict[int, PartitionMove]] = ({}, {})
        self.uncovered = _uncovered_move(part)


def _partition_inputs(part: PartitionFacts) -> tuple[Any, ...]:
    """Everything a move on ``part`` is made of, besides the committed offset."""
    return part.source, part.target, part.inputs


def _group(snapshot: Snapshot, facts: GroupFacts, memo: TranslationMemo | None) -> GroupMove:
    active = facts.target_members > 0 or facts.target_state not in ("empty", "dead", "absent")
    return GroupMove(
        facts.group,
        facts.target_state,
        active and not snapshot.force,
        memo.moves(snapshot, facts) if memo is not None else group_moves(snapshot, facts),
    )


def partition_rpo(facts: PartitionFacts) -> PartitionRpo:
    """What the target lacks of one partition: drkit.lag's rules over the snapshot's facts (the
    plan and the translate step's record of the failover point both use it)."""
    return lag.partition_rpo(
        facts.source,
        facts.source_end,
        facts.replicated_end,
        live=facts.source_end_live,
        visible=facts.unreplicated_visible,
        log_start=facts.source_start,
        progress_age_s=facts.progress_age_s,
        evidence_age_s=facts.evidence_age_s,
        lacking_age_s=facts.unreplicated_age_s,
    )


def _reachability(snapshot: Snapshot) -> list[Finding]:
    out: list[Finding] = []
    if not snapshot.target_reachable:
        out.append(
            Finding(
                Severity.BLOCKER,
                "target_unreachable",
                f"{snapshot.target} does not answer"
                f"{f' ({snapshot.target_error})' if snapshot.target_error else ''}: nothing can "
                "be promoted",
            )
        )
    if snapshot.procedure in _PLANNED and not snapshot.source_reachable:
        out.append(
            Finding(
                Severity.BLOCKER,
                "source_unreachable",
                f"{snapshot.source} does not answer"
                f"{f' ({snapshot.source_error})' if snapshot.source_error else ''}; a planned "
                f"{snapshot.procedure.value} needs it - use 'drkit failover' for an unplanned "
                "move",
            )
        )
    if (
        snapshot.procedure is Procedure.FAILOVER
        and snapshot.source_reachable
        and snapshot.target_reachable  # else a switchover is blocked too: no advice
    ):
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
    if snapshot.fan_in:  # one pointer per config: it would take other sources' apps along
        others = ", ".join(snapshot.fan_in)
        out.append(Finding(Severity.BLOCKER, "fan_in", (
            f"fan-in: {others} replicate into {snapshot.target} too, and {snapshot.source}'s "
            f"data never reaches them; the config's one active pointer on {snapshot.target} "
            f"would fence them as well - give each source of a fan-in its own config and store"
        )))  # fmt: skip
    if snapshot.procedure is Procedure.FAILBACK and snapshot.pointer != snapshot.source:
        if snapshot.pointer is None:  # was "the active pointer is on nothing" (issue 45)
            why = (
                f"nothing to fail back: no failover or switchover was recorded (the active "
                f"pointer is unset), so the applications were never moved to {snapshot.source}"
            )
        elif snapshot.pointer == snapshot.target:
            why = f"nothing to fail back: the active pointer is already on {snapshot.target}"
        else:
            why = (
                f"failback moves the applications from {snapshot.source}, but the active "
                f"pointer is on {snapshot.pointer}"
            )
        out.append(Finding(Severity.BLOCKER, "pointer_elsewhere", why))
    elif snapshot.pointer not in (None, snapshot.source, snapshot.target):
        # A third cluster is the primary: opening the target would make two, and none of its
        # writes would be carried over (issue 48: the three-cluster simulation, seed 35).
        out.append(Finding(Severity.BLOCKER, "pointer_elsewhere", (
            f"the active pointer is on {snapshot.pointer}, not {snapshot.source}: a "
            f"{snapshot.procedure.value} from {snapshot.source} would make {snapshot.target} "
            f"a second primary"
        )))  # fmt: skip
    return out


def _rpo_findings(snapshot: Snapshot, rpo: tuple[PartitionRpo, ...]) -> list[Finding]:
    """``failover.max_rpo_records`` and ``max_rpo_s`` judged as readiness judges them
    (drkit.health.readiness): the records the target lacks, and drkit.lag's seconds of the
    worst partition whose seconds are known (lag.known_seconds) - partitions whose records or
    seconds are unknown are named besides, never in the known ones' place."""
    if snapshot.procedure is not Procedure.FAILOVER:
        return []
    unknown = [p for p in rpo if p.records is None]
    total = sum(p.records or 0 for p in rpo)
    worst, _ = lag.known_seconds(rpo)
    out: list[Finding] = []
    if unknown:
        out.append(
            Finding(
                Severity.WARNING,
                "rpo_unknown",
                f"{len(unknown)} partition(s) with no known source end or progress: their loss "
                "is unknown",
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
    # The known seconds are judged whatever the others are (one unknown partition hid a
    # partition an hour behind); partitions whose seconds alone are unknown are named too.
    timeless = sum(1 for p in rpo if p.seconds is None and p.records is not None)
    reasons = []
    if worst is not None and worst > snapshot.policy.max_rpo_s:
        reasons.append(f"up to {worst:.0f}s of writes may be lost")
    if timeless:
        reasons.append(
            f"{timeless} partition(s) with no progress time: the seconds of writes lost are unknown"
        )
    if reasons:
        out.append(
            Finding(
                Severity.WARNING,
                "rpo_seconds",
                f"{'; '.join(reasons)} (failover.max_rpo_s={snapshot.policy.max_rpo_s:g})",
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
    if snapshot.unlisted_topics:
        out.append(_unlisted(snapshot))
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


def _unlisted(snapshot: Snapshot) -> Finding:
    """Topics the flow replicated that the answering source no longer lists.  None listed at
    all is a blocker: a move would fence nothing and move no group, and report success - the
    topics are hidden from drkit's principal (an ACL) far more often than all deleted."""
    names = snapshot.unlisted_topics
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    if not snapshot.partitions:
        return Finding(
            Severity.BLOCKER,
            "source_topics_unlisted",
            f"{snapshot.source} lists none of the {len(names)} topic(s) this flow replicated "
            f"({shown}): they are hidden from drkit's principal there (ACLs? `drkit doctor`) "
            "or deleted - nothing would be fenced and no group moved",
        )
    return Finding(
        Severity.WARNING,
        "source_topics_unlisted",
        f"{snapshot.source} no longer lists topics this flow replicated: {shown} (deleted, or "
        "hidden from drkit's principal by ACLs): they are not fenced and their groups not moved",
    )


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
    in_run = StepName.FOLLOW_STANDBYS in names
    notes += [_other_standby_note(snapshot, s, in_run) for s in snapshot.other_standbys]
    return tuple(notes)


def _other_standby_note(snapshot: Snapshot, standby: str, in_run: bool = False) -> str:
    """How ``standby`` - another standby of the source - follows the new primary after the move
    (docs/three-dc.md): after a loss, re-pointed onto the target's copy of the source - by the
    run's own hold_standby_flows and follow_standbys steps when its runbook has them
    (``in_run``), else by the command; after a planned move, its own flow drains the fenced
    source."""
    source, target = snapshot.source, snapshot.target
    onward = f"{target}->{standby}"
    writes = (
        f"flow {onward} carries {target}'s own writes"
        if onward in snapshot.onward_flows
        else f"no flow {onward} is configured: {target}'s own writes will not reach {standby} "
        "until one is added"
    )
    command = f"drkit flows repoint --from {source} --to {target} --standby {standby}"
    if snapshot.procedure is Procedure.FAILOVER and in_run:
        onward_map = (
            f", and the onward map ({target} positions -> {standby} positions, syncs of "
            f"{onward}) so a later failover {target}->{standby} moves the groups"
            if onward in snapshot.onward_flows
            else ""
        )
        return (
            f"{standby} (another standby of {source}) follows {target} in this run, after the "
            f"pointer moved: hold_standby_flows stops {source}->{standby} (its workers must "
            f"acknowledge), then follow_standbys copies what {target} holds of {source}'s data "
            f"and {standby} lacks, each record once, with {source}->{standby}'s offset syncs"
            f"{onward_map}; if {standby} cannot follow then (it does not answer, a partition "
            f"cannot tell), the run still succeeds and names `{command}` to run later; {writes}"
        )
    if snapshot.procedure is Procedure.FAILOVER:
        return (
            f"{standby} (another standby of {source}) still follows {source}: once the pointer "
            f"is on {target}, re-point it with `{command}` (--plan first shows what it "
            f"copies); {writes}"
        )
    return (
        f"{standby} (another standby of {source}) keeps copying {source}, which takes no new "
        f"writes once fenced; {writes}"
    )


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
