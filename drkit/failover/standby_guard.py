"""Read-only standby, applied: bring each cluster's standby guard (drkit.access.standby) to the
state the active pointer asks for.

Called by ``move_pointer`` (the new primary's guard is lifted before the pointer moves there;
the old primary's replicas of the reverse flow are guarded after) and by the monitor's
periodic duties (drkit.failover.maintenance), which also guard a fresh set-up and re-guard a
cluster that was away.  A cluster that does not answer, or runs no authorizer, is skipped and
tried again next time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from drkit.access.rules import AclEntry
from drkit.access.standby import GuardPlan, plan_guards
from drkit.config.model import DrkitConfig
from drkit.errors import DrkitError
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin

log = logging.getLogger(__name__)


def reconcile_standby_guards(
    config: DrkitConfig,
    connect: AdminFactory,
    primary: str | None,
    clusters: Iterable[str] | None = None,
    timeout_s: float | None = None,
    before_change: Callable[[], None] = lambda: None,
) -> list[GuardPlan]:
    """Create and delete guard ACLs on ``clusters`` (default: every flow's target) so that
    exactly the flows into a non-primary cluster are guarded; returns the plans of the
    clusters reached.  ``before_change`` runs right before a cluster's ACLs change (the
    engine's lease check).  A cluster that cannot be read is skipped; a change that fails
    raises (the caller decides whether that fails a step)."""
    if not config.failover.read_only_standby:
        return []
    wanted = sorted(set(clusters) if clusters is not None else {f.target for f in config.flows})
    admins: dict[str, ClusterAdmin] = {}
    present: dict[str, set[AclEntry]] = {}
    for alias in wanted:
        admin = connect(ClusterEndpoint(alias, config.clusters[alias]))
        try:
            if not admin.answers(3.0):
                continue  # away: guarded when it answers (the monitor's next round)
            present[alias] = admin.acl_entries(timeout_s)
        except DrkitError as err:  # away, refused, or no authorizer: next time
            log.info("standby guard skipped", extra={"cluster": alias, "error": str(err)})
            continue
        admins[alias] = admin
    plans = plan_guards(config, primary, present)
    for plan in plans:
        if plan.create or plan.delete:
            before_change()
            admins[plan.cluster].create_entries(plan.create, timeout_s)
            admins[plan.cluster].delete_entries(plan.delete, timeout_s)
            log.info(
                "standby guard changed",
                extra={
                    "cluster": plan.cluster,
                    "acls_created": len(plan.create),
                    "acls_deleted": len(plan.delete),
                },
            )
    return plans
