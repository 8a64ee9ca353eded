"""Steps that promote: move the active pointer, and prove a migration with the accounting job."""

from __future__ import annotations

from pathlib import Path

from drkit import failpoints
from drkit.errors import DrkitError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import StepName
from drkit.failover.pointer import Pointer, pointer_key, pointer_record
from drkit.failover.pointer_topic import CLUSTER_BUDGET_S, publish
from drkit.failover.results import Translation


def move_pointer(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Clients belong on the target now.  The pointer is written to every cluster's pointer
    topic that answers (:func:`publish_pointer`: clients following it with drkit.client switch
    at once); hooks ``after move_pointer`` publish it elsewhere (see
    runbooks/hooks/rewrite-client-properties.py).

    This step's start is the run's intent "the target is the primary" (drkit.failover
    .protections): the target is reconciled to it *before* the pointer moves - its fence and its
    read-only standby guard lifted (applications told to write there must be able to), the
    flow into it fenced for its replicator - and the source after, when it answers (else the
    monitor does it once it does).  A crash between the two leaves the pointer where it was; a
    rollback voids the intent and the next reconcile guards the target again."""
    # The target opens in a pass that takes the source too: one back since the plan said it
    # was gone is fenced first (a relaxing pass probes clusters it remembers away).
    both = [ctx.source, ctx.target]
    opened = ctx.reconcile(both, strict=[ctx.target], timeout_s=timeout_s)
    pointer = ctx.pointers.move(ctx.target, ctx.run.id)
    failpoints.reach("move_pointer.after_move")
    published = publish_pointer(ctx, pointer)
    closed: dict[str, object] = {}
    # A source that was down when the run was planned is not waited for here (the monitor
    # protects it when it is back): a move's wall time is the RTO.  One that is down now is
    # skipped by the reconcile's own probe.
    if ctx.run.plan_head.source_reachable:
        try:
            closed = ctx.reconcile([ctx.source], timeout_s=timeout_s).clusters[ctx.source].to_json()
        except DrkitError as err:  # the monitor protects it later; the move stands
            closed = {"cluster": ctx.source, "notes": [f"not yet: {err}"]}
    return StepOutcome.done(
        cluster=pointer.cluster,
        epoch=pointer.epoch,
        bootstrap_servers=ctx.config.clusters[ctx.target].bootstrap_servers,
        protections=[opened.clusters[ctx.target].to_json(), closed]
        if closed
        else [opened.clusters[ctx.target].to_json()],
        pointer_topic=published,
    )


# How long move_pointer waits for the target's pointer topic, and for the other clusters'
# beyond it: a dead source costs the move at most the latter (the monitor writes it later).
PUBLISH_WAIT_S = 5.0
PUBLISH_OTHERS_S = 0.5


def publish_pointer(ctx: StepContext, pointer: Pointer) -> list[dict[str, object]]:
    """Write the moved pointer to every cluster's pointer topic, best effort and bounded
    (drkit.failover.pointer.publish): the target first - its clients are the ones moving -,
    the others as far as they answer at once.  A cluster not reached is not a failure: the
    monitor's maintenance converges it (``PointerPublisher``), and readers take the highest
    epoch across clusters."""
    if ctx.pointer_topics is None:
        return []
    wait_s = ctx.confirm(PUBLISH_WAIT_S) or PUBLISH_WAIT_S
    key = pointer_key(ctx.config, ctx.store, pointer.name)
    # A source the plan found down is asked but not waited for: it would spend the others'
    # grace on every unplanned move (0.5 s of RTO), and the monitor writes it once it is back.
    down = [] if ctx.run.plan_head.source_reachable else [ctx.source]
    outcome = publish(
        ctx.config, pointer_record(pointer, ctx.config), key, ctx.pointer_topics,
        [ctx.target, *(c for c in ctx.config.clusters if c != ctx.target)], wait_s,
        min(CLUSTER_BUDGET_S, wait_s), first=ctx.target, others_s=PUBLISH_OTHERS_S,
        unwaited=down,
    )  # fmt: skip
    return [published.to_json() for published in outcome.values()]


def verify(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Cutover: the Spark accounting job over the whole flow; any missing record fails it."""
    if ctx.options.skip_verify:
        return StepOutcome.skipped("--skip-verify")
    from drkit.accounting.verify import verify as run_verify

    ctx.detail(StepName.TRANSLATE_OFFSETS)  # refresh the run
    translation = Translation.of(ctx.run)
    groups = sorted(translation.group_names)
    out = ctx.state_dir / "verify" / f"cutover-{ctx.run.id}"
    # The positions this run committed: once the pointer moved, applications may already be
    # consuming on the target, and their newer commits are not the run's to judge.
    positions = translation.positions()
    summary = run_verify(
        ctx.config, ctx.flow, groups, None, Path(out), store=ctx.store, positions=positions,
        connect=ctx.connect,
    )  # fmt: skip
    if not summary.get("ok", False):
        raise StepFailed(
            f"the accounting of {ctx.flow.name} failed (see {out}/summary.json): "
            f"{summary.get('totals', summary)}"
        )
    return StepOutcome.done(summary=str(out / "summary.json"), totals=summary.get("totals", {}))
