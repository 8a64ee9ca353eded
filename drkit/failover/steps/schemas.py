"""The schema registries in a move: the standby has every schema, then takes writes.

Runs before ``move_pointer`` - applications told to use the target must find there every
schema id the records they read carry.  Only for flows with ``schema_sync`` on.
"""

from __future__ import annotations

from drkit.errors import SchemaRegistryError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import Procedure
from drkit.schemas.sync import RegistryPort, SchemaSynchronizer


def sync_schemas(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """One last copy of the source's registry, then the target read-write and the source
    read-only (where the registries have modes: Apicurio 2.x has none, which is reported) -
    desired state like every protection: this step's start is the run's intent "the target's
    registry takes the writes", the reconciler sets the modes, a rollback sets them back.

    A planned move fails here, rolling back, when the copy cannot be made: the source is up,
    so the applications would otherwise meet ids the target cannot resolve.  An unplanned
    failover goes on with what the target holds (copied every ``schema_sync.interval_s``) and
    reports why the last copy did not happen - the source's registry is often down with it.
    Idempotent: a second copy finds nothing missing; setting a mode twice changes nothing.
    """
    if not ctx.flow.schema_sync.enabled:
        return StepOutcome.skipped(f"schema_sync is off for {ctx.flow.name}")
    # An unplanned failover's wall time is its RTO: a registry gone with its data center
    # gets one short try, not the configured retries.
    if ctx.registries is not None:
        synchronizer = SchemaSynchronizer(ctx.registries(ctx.source), ctx.registries(ctx.target))
    else:
        synchronizer = SchemaSynchronizer.of(
            ctx.config, ctx.flow, quick=ctx.procedure is Procedure.FAILOVER
        )
    target = synchronizer.target
    detail: dict[str, object] = {}
    ctx.confirm()
    try:
        detail.update(synchronizer.sync().to_json())
    except SchemaRegistryError as err:
        if ctx.procedure is not Procedure.FAILOVER:
            raise StepFailed(f"the schemas could not be copied to {ctx.target}: {err}") from None
        detail["copy"] = f"not made: {err}"
        detail["target_versions"] = _count(target)
    report = ctx.reconcile([ctx.source, ctx.target], timeout_s=timeout_s).clusters
    detail["target_mode"] = report[ctx.target].registry or "not set"
    detail["source_mode"] = report[ctx.source].registry or "not set"
    return StepOutcome.done(**detail)


def _count(registry: RegistryPort) -> int | str:
    """How many subject versions the registry holds ("unknown" when it cannot say)."""
    try:
        return len(registry.catalogue())
    except SchemaRegistryError as err:
        return f"unknown: {err}"
