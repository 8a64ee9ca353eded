"""The engine's periodic duties, run by ``drkit monitor``: finish what a failover left open.

* **Pending fences**: a failover that could not reach the old primary recorded its fence as
  pending; as soon as that cluster answers again it is fenced (DENY WRITE ACLs) before any
  application can write to it by mistake.
* **Divergence**: once the old primary of an unplanned failover answers again (and is fenced),
  what it accepted after the failover point that the target never got is counted per partition
  in visible records - read committed, so aborted records and transaction markers are not
  counted, and only once no transaction is open there - and stored with the run
  (``result.divergence``, shown by ``drkit status``, ``drkit failover show`` and the webhook);
  drkit never fails back on its own - ``drkit failback`` exports those records.
* **Standby guards**: the replicas on every standby refuse application writes
  (drkit.access.standby), as the active pointer says who is primary - a fresh set-up is
  guarded, a cluster that was away is guarded when it answers.  Skipped while a run is in
  progress: its ``move_pointer`` changes the guards itself.
* **Stale runs**: a run whose engine process died stays RUNNING with an expiring lease; once the
  lease has expired the run is resumed from its first step that is not done (same code path as
  ``drkit failover --resume``).

:meth:`FailoverMaintenance.tick` never raises: every problem is logged and retried next tick.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config.model import DrkitConfig
from drkit.config.model import NotificationEvent as Event
from drkit.errors import DrkitError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.lease import LeaseHeld, LeaseRepository, unique_owner
from drkit.failover.model import Procedure, RunState
from drkit.failover.steps.fencing import fence_companions
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory
from drkit.notifications import Notifier
from drkit.store.db import StateStore

if TYPE_CHECKING:
    from drkit.failover.engine import Engine

log = logging.getLogger(__name__)

MAINTENANCE_LEASE = "maintenance"  # one monitor at a time runs the duties below
MAINTENANCE_TTL_S = 60.0


class FailoverMaintenance:
    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        state_dir: Path,
        connect: AdminFactory = KafkaAdmin,
        owner: str | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.state_dir = state_dir
        self.connect = connect  # how a cluster's admin API is reached (tests: fakes)
        self.fences = FenceRepository(store)
        self.leases = LeaseRepository(store)
        self.owner = owner or unique_owner("maintenance")
        self.notify = Notifier(config.notifications.webhooks)

    def apply_pending_fences(self) -> list[str]:
        """Fence every pending cluster that answers now; returns the clusters fenced."""
        fenced: list[str] = []
        policy = self.config.failover
        for cluster in sorted(self.fences.clusters_with(FenceState.PENDING)):
            if cluster not in self.config.clusters:
                continue
            topics = self.fences.topics(cluster, FenceState.PENDING)
            admin = self.connect(ClusterEndpoint(cluster, self.config.clusters[cluster]))
            try:
                admin.wait_ready(timeout_s=3)
            except DrkitError:
                continue  # still away
            # Companions are recorded (still pending) before any ACL exists: an attempt that
            # half-applies leaves them known to the next one (the topics no longer look bare).
            companions = fence_companions(
                admin,
                self.config.clusters[cluster],
                set(topics),
                self.fences.reads_allowed(cluster) & topics,
            )
            self.fences.record(cluster, topics, FenceState.PENDING, None, companions)
            admin.deny_writes(topics, policy.fence_principal, companions=companions)
            self.fences.record(cluster, topics, FenceState.APPLIED, None, companions)
            log.warning(
                "fenced a returning cluster (its failover could not reach it)",
                extra={"cluster": cluster, "topics": ",".join(sorted(topics))},
            )
            fenced.append(cluster)
        return fenced

    def guard_standbys(self) -> list[str]:
        """Bring every standby guard to what the pointer asks for (none while a run is in
        progress); returns the clusters whose ACLs changed."""
        from drkit.failover.pointer import PointerRepository
        from drkit.failover.runs import RunRepository
        from drkit.failover.standby_guard import reconcile_standby_guards

        if RunRepository(self.store).in_progress():
            return []
        pointer = PointerRepository(self.store).get()
        plans = reconcile_standby_guards(
            self.config, self.connect, pointer.cluster if pointer else None, timeout_s=10
        )
        return [plan.cluster for plan in plans if plan.create or plan.delete]

    def report_divergence(self) -> list[int]:
        """Store, once per succeeded failover run, the old primary's divergent records per
        partition as soon as it answers and is fenced; returns the runs reported."""
        from drkit.failover.runs import RunRepository
        from drkit.failover.steps.divergence import divergence_report, point_of

        runs = RunRepository(self.store)
        reported: list[int] = []
        for run in runs.latest(20):
            if (
                run.procedure is not Procedure.FAILOVER
                or run.state is not RunState.SUCCEEDED
                or "divergence" in run.result
                or run.source not in self.config.clusters
                or self.fences.topics(run.source, FenceState.PENDING)  # not fenced yet
            ):
                continue
            admin = self.connect(ClusterEndpoint(run.source, self.config.clusters[run.source]))
            try:
                admin.wait_ready(timeout_s=3)
            except DrkitError:
                continue  # still away
            report = divergence_report(admin, point_of(run))
            if report is None:
                continue  # a transaction is still open in the tail: count it once it ended
            runs.merge_result(run.id, {"divergence": report.to_json()})
            log.warning(
                "the old primary is back with records the target never got",
                extra={"run": run.id, "cluster": run.source, "records": report.records},
            )
            self.notify(
                Event.DIVERGENCE, run.source, run.target, report.to_json(), run.id,
                f"{run.source} is back with {report.records} records {run.target} never got",
            )  # fmt: skip
            reported.append(run.id)
        return reported

    def resume_stale_runs(self, engine: Engine | None = None) -> list[int]:
        """Resume every run in progress whose engine died (its lease lapsed) - in its own
        direction, once its premise is re-checked (drkit.failover.engine); returns their ids."""
        from drkit.failover.engine import Engine as FailoverEngine

        if engine is None:
            engine = FailoverEngine(
                self.config, self.store, self.state_dir, role="maintenance", connect=self.connect
            )
        resumed: list[int] = []
        for run in engine.stale_runs():
            log.warning("resuming an interrupted failover run", extra={"run": run.id})
            try:
                engine.resume(run.id)
            except DrkitError as err:
                log.error("resumed run failed", extra={"run": run.id, "error": str(err)})
            resumed.append(run.id)
        return resumed

    def tick(self) -> None:
        """Run every duty once - unless another monitor is running them now (a lease in the
        store: two monitors must not report one divergence twice or fence at once)."""
        try:
            lease = self.leases.acquire(self.owner, MAINTENANCE_TTL_S, name=MAINTENANCE_LEASE)
        except LeaseHeld:
            return
        except Exception:  # the store away: the next tick tries again
            log.exception("failover maintenance could not take its lease")
            return
        try:
            duties = (
                self.apply_pending_fences,
                self.guard_standbys,
                self.report_divergence,
                self.resume_stale_runs,
            )
            for duty in duties:
                try:
                    duty()
                except Exception:  # a scheduled duty must never kill the scheduler
                    log.exception("failover maintenance failed", extra={"duty": duty.__name__})
        finally:
            with contextlib.suppress(Exception):
                self.leases.release(lease)
