"""Copy a flow's source schema registry to its target's, ids kept (``flows[].schema_sync``).

Run by the flow's replication worker every ``schema_sync.interval_s`` (beside the topic sync),
by ``drkit schemas sync``, and once more by a failover's ``sync_schemas`` step.  Copying only
adds: nothing the target holds is changed or deleted.

A copy is refused, naming each one, when the registries conflict (drkit.schemas.catalogue):
an id that means different schemas on the two sides can only come from both taking writes, and
overwriting either would make records unreadable.  After a copy every source version is looked
up on the target again; one still missing is an error - the import API keeps quiet about what
it skipped.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from drkit.config.model import ClusterConfig, DrkitConfig, FlowConfig
from drkit.errors import SchemaRegistryError
from drkit.schemas.catalogue import SchemaSyncPlan, SchemaVersion, drift_lines, plan_sync
from drkit.schemas.registry import SchemaRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaSyncResult:
    """What one sync found and did."""

    copied: int  # subject versions added to the target
    present: int  # subject versions the target already had
    ids: tuple[int, ...]  # the ids copied

    def to_json(self) -> dict[str, object]:
        return {"copied": self.copied, "present": self.present, "ids": list(self.ids)}


class RegistryPort(Protocol):
    """What drkit does with a schema registry (drkit.schemas.registry.SchemaRegistry; the
    simulation and the tests hold theirs in memory)."""

    alias: str

    def catalogue(self) -> tuple[SchemaVersion, ...]: ...

    def export_archive(self) -> bytes: ...

    def import_archive(self, archive: bytes) -> None: ...

    def mode(self) -> str | None: ...

    def set_mode(self, mode: str) -> str: ...


class SchemaSynchronizer:
    """The source's registry to the target's, for one flow."""

    def __init__(self, source: RegistryPort, target: RegistryPort) -> None:
        self.source = source
        self.target = target

    @classmethod
    def of(cls, config: DrkitConfig, flow: FlowConfig, quick: bool = False) -> SchemaSynchronizer:
        """The flow's two registries (``quick``: see :func:`registry_of`); a
        SchemaRegistryError when one is not configured."""
        return cls(registry_of(config, flow.source, quick), registry_of(config, flow.target, quick))

    def plan(self) -> tuple[tuple[SchemaVersion, ...], SchemaSyncPlan]:
        """The source's catalogue and what copying it would add (nothing is written)."""
        source = self.source.catalogue()
        return source, plan_sync(source, self.target.catalogue())

    def sync(self) -> SchemaSyncResult:
        """Copy what is missing; raises SchemaRegistryError on a conflict, an unreachable
        registry, or a version still missing after the copy."""
        source, plan = self.plan()
        self._refuse_conflicts(plan)
        if not plan.missing:
            return SchemaSyncResult(0, plan.present, ())
        self.target.import_archive(self.source.export_archive())
        after = plan_sync(source, self.target.catalogue())
        self._refuse_conflicts(after)
        if after.missing:
            raise SchemaRegistryError(
                f"{len(after.missing)} schema version(s) are still missing on "
                f"{self.target.alias}'s registry after the copy (ids "
                f"{', '.join(map(str, after.missing_ids()))}); was it written to meanwhile?"
            )
        log.info(
            "schemas copied",
            extra={
                "source": self.source.alias,
                "target": self.target.alias,
                "copied": len(plan.missing),
                "ids": len(plan.missing_ids()),
            },
        )
        return SchemaSyncResult(len(plan.missing), plan.present, plan.missing_ids())

    def _refuse_conflicts(self, plan: SchemaSyncPlan) -> None:
        if plan.conflicts:
            shown = "; ".join(plan.conflicts[:5])
            more = f" (and {len(plan.conflicts) - 5} more)" if len(plan.conflicts) > 5 else ""
            raise SchemaRegistryError(
                f"the registries of {self.source.alias} and {self.target.alias} conflict - "
                f"nothing was copied: {shown}{more}.  Both took writes; settle which schema "
                "each id means before syncing again"
            )


# A failover's wall time is its RTO: a registry that does not answer gets one short try there.
QUICK_TIMEOUT_S = 3.0


def registry_of(config: DrkitConfig, alias: str, quick: bool = False) -> SchemaRegistry:
    """Cluster ``alias``'s registry (``quick``: one try of at most QUICK_TIMEOUT_S per
    request); a SchemaRegistryError when it has none configured."""
    settings = config.clusters[alias].schema_registry
    if settings is None:
        raise SchemaRegistryError(f"cluster {alias!r} has no schema_registry configured")
    if not quick:
        return SchemaRegistry(alias, settings)
    short = min(settings.timeout_s, QUICK_TIMEOUT_S)
    return SchemaRegistry(alias, settings.model_copy(update={"timeout_s": short}), attempts=1)


def flow_schema_sync(
    flow: FlowConfig, source: ClusterConfig, target: ClusterConfig
) -> SchemaSynchronizer | None:
    """The flow's registry copy when ``schema_sync`` is on (the config guarantees both
    registries then), else None."""
    if not flow.schema_sync.enabled:
        return None
    if source.schema_registry is None or target.schema_registry is None:
        return None
    return SchemaSynchronizer(
        SchemaRegistry(flow.source, source.schema_registry),
        SchemaRegistry(flow.target, target.schema_registry),
    )


class SchemaDriftWatch:
    """The latest comparison of a flow's registries, refreshed in a daemon thread: the
    monitor's flow probe has a time budget, and a registry's HTTP timeouts must not spend it.

    :meth:`lines` returns at once - the last result (``unknown`` until one comparison ended,
    and when a registry did not answer; never "no drift" for lack of an answer) - and starts
    a new comparison unless one is still running."""

    def __init__(self, schemas: SchemaSynchronizer) -> None:
        self.schemas = schemas
        self.target = schemas.target.alias
        self._lines = [f"schemas on {self.target}: unknown (not compared yet)"]
        self._thread: threading.Thread | None = None

    def lines(self) -> list[str]:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._compare, name=f"schema drift {self.target}", daemon=True
            )
            self._thread.start()
        return list(self._lines)

    def _compare(self) -> None:
        try:
            _source, plan = self.schemas.plan()
        except SchemaRegistryError as err:
            self._lines = [f"schemas on {self.target}: unknown ({err})"]
            return
        self._lines = drift_lines(plan, self.target)
