"""Steps that promote: move the active pointer, and prove a migration with the accounting job."""

from __future__ import annotations

from pathlib import Path

from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import StepName
from drkit.failover.results import Translation


def move_pointer(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Clients belong on the target now.  Hooks ``after move_pointer`` publish it (see
    runbooks/hooks/rewrite-client-properties.py)."""
    pointer = ctx.pointers.move(ctx.target, ctx.run.id)
    return StepOutcome.done(
        cluster=pointer.cluster,
        epoch=pointer.epoch,
        bootstrap_servers=ctx.config.clusters[ctx.target].bootstrap_servers,
    )


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
