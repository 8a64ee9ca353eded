"""Steps that promote: move the active pointer, and prove a migration with the accounting job."""

from __future__ import annotations

from pathlib import Path

from drkit import failpoints
from drkit.access.standby import GuardPlan
from drkit.errors import DrkitError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import StepName
from drkit.failover.results import Translation
from drkit.failover.standby_guard import reconcile_standby_guards
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import ClusterAdmin


def move_pointer(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Clients belong on the target now.  Hooks ``after move_pointer`` publish it (see
    runbooks/hooks/rewrite-client-properties.py).

    Read-only standby (drkit.access.standby): the target's guard is lifted *before* the
    pointer moves (applications told to write there must be able to), and the old primary's
    replicas of the reverse flow are guarded after, when it answers (else the monitor does it
    once it does).  A crash between the two leaves the pointer where it was and the monitor
    re-guards the target."""

    def connect(endpoint: ClusterEndpoint) -> ClusterAdmin:
        return ctx.admin(endpoint.alias)

    lifted = reconcile_standby_guards(
        ctx.config, connect, ctx.target, [ctx.target], timeout_s, ctx.confirm
    )
    pointer = ctx.pointers.move(ctx.target, ctx.run.id)
    failpoints.reach("move_pointer.after_move")
    guarded: list[GuardPlan] = []
    # A source that was down when the run was planned is not waited for here (the monitor
    # guards it when it is back): a move's wall time is the RTO.  One that is down now is
    # skipped by the reconcile's own probe.
    if ctx.run.plan_head.source_reachable:
        try:
            guarded = reconcile_standby_guards(
                ctx.config, connect, ctx.target, [ctx.source], timeout_s, ctx.confirm
            )
        except DrkitError as err:  # the monitor guards it later; the move stands
            guarded = [GuardPlan(ctx.source, frozenset(), frozenset(), (f"not yet: {err}",))]
    return StepOutcome.done(
        cluster=pointer.cluster,
        epoch=pointer.epoch,
        bootstrap_servers=ctx.config.clusters[ctx.target].bootstrap_servers,
        standby_guard=[_guard_detail(plan) for plan in lifted + guarded],
    )


def _guard_detail(plan: GuardPlan) -> dict[str, object]:
    return {
        "cluster": plan.cluster,
        "created": len(plan.create),
        "deleted": len(plan.delete),
        "notes": list(plan.notes),
    }


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
        ctx.config, ctx.flow, groups, None, Path(out), store=ctx.store, positions=positions
    )
    if not summary.get("ok", False):
        raise StepFailed(
            f"the accounting of {ctx.flow.name} failed (see {out}/summary.json): "
            f"{summary.get('totals', summary)}"
        )
    return StepOutcome.done(summary=str(out / "summary.json"), totals=summary.get("totals", {}))
