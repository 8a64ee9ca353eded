"""Steps that move consumer groups: translate exactly, then commit on the target.

``translate_offsets`` reads a fresh snapshot - replication is stopped by then, so the offset
map is final - and records every group's S and T in the run; ``commit_group_offsets`` writes
exactly those values, so a resumed run commits the same offsets it would have.  Only groups that
are empty on the target are written (re-checked right before writing);
``--overwrite-active-groups`` writes active ones too.  The broker itself refuses a commit into
a group with members: a group that gained members between the check and its write is skipped
as active (its consumers own their offsets now), not a failed run.
"""

from __future__ import annotations

from dataclasses import replace

from drkit import failpoints
from drkit.errors import KafkaError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.plan import groups_without_checkpoint, partition_rpo
from drkit.failover.results import GroupsCommitted, GroupTranslation, Translation
from drkit.failover.run_result import RunResult
from drkit.failover.snapshot import gather
from drkit.records import TopicPartition
from drkit.store.flow_keys import keys_of
from drkit.store.health_repo import HealthRepository


def translate_offsets(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    pointer = ctx.pointers.get()
    snapshot = gather(
        ctx.config,
        ctx.flow,
        ctx.procedure,
        pointer.cluster if pointer else None,
        ctx.options.force,
        list(ctx.options.groups) if ctx.options.groups is not None else None,
        readers=ctx.session.readers,
        keys=keys_of(ctx.config, ctx.store),
        connect=ctx.connect,
        # commit_group_offsets reads the states again right before it writes
        target_states=ctx.session.planned_states(ctx.run),
    )
    if not snapshot.target_reachable:
        raise StepFailed(f"{ctx.target} does not answer: nothing can be translated")
    if ctx.options.groups is None:
        seen = HealthRepository(ctx.store).groups_seen(ctx.flow.name)
        snapshot = replace(snapshot, groups_seen=tuple(sorted(seen)))
    memo = ctx.session.memo
    reused_before = memo.reused
    translation = Translation(
        "live" if snapshot.source_reachable else "checkpoints",
        tuple(
            GroupTranslation(
                facts.group,
                facts.target_state,
                facts.from_checkpoints,
                memo.moves(snapshot, facts),
            )
            for facts in snapshot.groups
        ),
        groups_without_checkpoint(snapshot),
        tuple(partition_rpo(part) for _tp, part in sorted(snapshot.partitions.items())),
    )
    ctx.runs.merge_result(ctx.run.id, RunResult(rpo=translation.rpo))
    ctx.session.translated(translation)
    # How many groups kept the plan's moves (their inputs unchanged since): read by no step.
    return StepOutcome.done(**translation.to_detail(), reused_from_plan=memo.reused - reused_before)


def commit_group_offsets(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    # A resumed run: what its translate step recorded (the engine translated again if a group
    # read on meanwhile: moved_on_source).
    translation = ctx.session.translation(ctx.refreshed)
    groups = translation.positions()
    target = ctx.admin(ctx.target)
    states = target.describe_groups(sorted(groups), timeout_s) if groups else {}
    skipped: dict[str, str] = {}
    writes: dict[str, dict[TopicPartition, int]] = {}
    for group, offsets in sorted(groups.items()):
        state = states.get(group)
        if not offsets:
            skipped[group] = "nothing could be translated"
        elif state is not None and not state.is_empty and not ctx.options.force:
            skipped[group] = f"active on {ctx.target} ({state.state}, {state.members} members)"
        else:
            writes[group] = offsets
    # Every group in one round (concurrent requests): 100 groups take one round trip.
    failpoints.reach("commit_group_offsets.before_write")
    budget = ctx.confirm(timeout_s) if writes else timeout_s  # the round ends with the lease
    failpoints.reach("commit_group_offsets.after_confirm")
    refusals = target.alter_groups_offsets(writes, budget) if writes else {}
    committed: dict[str, int] = {}
    failed: dict[str, str] = {}
    for group, offsets in sorted(writes.items()):
        refused = refusals.get(group)
        if refused is None:
            committed[group] = len(offsets)
            continue
        state = states.get(group)
        if ctx.options.force and state is not None and not state.is_empty:
            skipped[group] = f"--overwrite-active-groups, but {ctx.target} refused it: {refused}"
            continue
        joined = _members_now(ctx, group, timeout_s)
        if joined is not None:  # a consumer joined between the check and the write
            skipped[group] = f"became active on {ctx.target} ({joined} members)"
        else:
            failed[group] = refused
    if failed:
        raise StepFailed(
            f"offsets of {len(failed)} group(s) could not be written on {ctx.target}: "
            + "; ".join(f"{g}: {why}" for g, why in sorted(failed.items()))
        )
    return StepOutcome.done(**GroupsCommitted(committed, skipped, ctx.options.force).to_detail())


def moved_on_source(
    ctx: StepContext, translation: Translation, timeout_s: float | None
) -> list[str]:
    """Groups of a live translation whose committed offsets on the source are no longer the
    S it recorded: their consumers read on after it, and committing the old T would set them
    back on the target (the engine translates again before a resumed commit).  A source that
    does not answer now cannot say: nothing is reported moved."""
    if translation.mode != "live" or not translation.groups:
        return []
    try:
        now = ctx.admin(ctx.source).groups_offsets([g.group for g in translation.groups],
                                                   timeout_s)  # fmt: skip
    except KafkaError:
        return []
    moved = []
    for group in translation.groups:
        committed = now.get(group.group)
        offsets = committed.offsets if committed is not None else {}
        if any(
            m.source_offset is not None
            and offsets.get(TopicPartition(m.source_topic, m.source_partition)) not in
            (None, m.source_offset)
            for m in group.partitions
        ):  # fmt: skip
            moved.append(group.group)
    return moved


def _members_now(ctx: StepContext, group: str, timeout_s: float | None) -> int | None:
    """How many members ``group`` has on the target now, if any (None: none, or no answer)."""
    try:
        state = ctx.admin(ctx.target).describe_groups([group], timeout_s).get(group)
    except KafkaError:
        return None
    return state.members if state is not None and not state.is_empty else None
