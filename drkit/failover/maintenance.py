"""The engine's periodic duties, run by ``drkit monitor``: finish what a failover left open.

* **Protections** (drkit.failover.reconcile): the clusters are brought to the protections the
  pointer and the flows ask for - a cluster that was away when its fence was due is fenced as
  soon as it answers, a standby's replicas are guarded, a stale or half-applied change (a
  frozen engine's late ACL write, an operator's slip) is undone.  Under the failover lease:
  never beside a run (whose engine reconciles at each step boundary itself).
* **Divergence**: once the old primary of an unplanned failover answers again (and is fenced),
  what it accepted after the failover point that the target never got is counted per partition
  in visible records - read committed, so aborted records and transaction markers are not
  counted, and only once no transaction is open there - and stored with the run
  (``result.divergence``, shown by ``drkit status``, ``drkit failover show`` and the webhook);
  drkit never fails back on its own - ``drkit failback`` exports those records.
* **The pointer for clients**: the store's pointer is written to the pointer topic of every
  cluster not yet known to hold its epoch (drkit.failover.pointer.PointerPublisher) - a
  cluster that was down when the pointer moved gets it once it answers.
* **Stale runs**: a run whose engine process died stays RUNNING with an expiring lease; once the
  lease has expired the run is resumed from its first step that is not done (same code path as
  ``drkit failover --resume``).

The failover lease makes one monitor at a time run them (two must not report one divergence
twice or fence at once); it is renewed while the duties run and confirmed right before each
cluster changes.  :meth:`FailoverMaintenance.tick` never raises: every problem is logged and
retried next tick.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.config.model import DrkitConfig
from drkit.config.model import NotificationEvent as Event
from drkit.errors import DrkitError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.lease import (
    MAINTENANCE_OWNER,
    MAINTENANCE_TTL_S,
    LeaseHeld,
    LeaseKeeper,
    LeaseRepository,
    unique_owner,
)
from drkit.failover.model import Procedure, RunState
from drkit.failover.pointer_topic import PointerPublisher, PointerTopics, Published
from drkit.failover.reconcile import Reconciler, ReconcileReport, RegistryFactory
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory
from drkit.notifications import Notifier
from drkit.store.db import StateStore

if TYPE_CHECKING:
    from drkit.failover.engine import Engine

log = logging.getLogger(__name__)


class FailoverMaintenance:
    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        state_dir: Path,
        *,
        connect: AdminFactory,
        owner: str | None = None,
        registries: RegistryFactory | None = None,
        leases: LeaseRepository | None = None,
        engine: Callable[[], Engine] | None = None,
        pointer_topics: PointerTopics | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.state_dir = state_dir
        self.connect = connect  # how a cluster's admin API is reached (tests: fakes)
        self.registries = registries
        self.fences = FenceRepository(store)
        self.leases = leases if leases is not None else LeaseRepository(store)
        self.owner = owner or unique_owner(MAINTENANCE_OWNER)
        self.notify = Notifier(config.notifications.webhooks)
        self._engine = engine  # the engine that resumes stale runs (None: one over Kafka)
        self.pointer_topics = pointer_topics
        self._publisher = (
            PointerPublisher(config, store, pointer_topics, connect=connect)
            if pointer_topics is not None
            else None
        )

    def reconcile_protections(self, keeper: LeaseKeeper | None = None) -> ReconcileReport:
        """One pass of the reconciler over every cluster, under ``keeper``'s lease (taken here
        when none is given); returns what it did."""
        if keeper is None:
            with self._holding() as held:
                return self.reconcile_protections(held)
        reconciler = Reconciler(
            self.config, self.store, self.connect, keeper.confirm, keeper, self.registries
        )
        return reconciler.reconcile(timeout_s=10)

    @contextlib.contextmanager
    def _holding(self) -> Iterator[LeaseKeeper]:
        """The failover lease, renewed in the background until the block ends."""
        lease = self.leases.acquire(self.owner, MAINTENANCE_TTL_S)
        keeper = LeaseKeeper(self.leases, lease, MAINTENANCE_TTL_S).start()
        try:
            yield keeper
        finally:
            keeper.stop()
            with contextlib.suppress(Exception):
                self.leases.release(keeper.lease)

    def report_divergence(self, keeper: LeaseKeeper | None = None) -> list[int]:
        """Store, once per succeeded failover run, the old primary's divergent records per
        partition as soon as it answers and is fenced; returns the runs reported."""
        from drkit.failover.run_result import RunResult
        from drkit.failover.runs import RunRepository
        from drkit.failover.steps.divergence import divergence_report, point_of, raised_past_copies
        from drkit.topology.flow import FlowTopology

        runs = RunRepository(self.store, keeper)
        reported: list[int] = []
        for run in runs.latest(20):
            if (
                run.procedure is not Procedure.FAILOVER
                or run.state is not RunState.SUCCEEDED
                or run.result.divergence is not None
                or run.source not in self.config.clusters
                or self.fences.topics(run.source, FenceState.PENDING)  # not fenced yet
            ):
                continue
            admin = self.connect(ClusterEndpoint(run.source, self.config.clusters[run.source]))
            try:
                admin.wait_ready(timeout_s=3)
            except DrkitError:
                continue  # still away
            point = point_of(run)
            flow = next((f for f in self.config.flows
                         if (f.source, f.target) == (run.source, run.target)), None)  # fmt: skip
            if flow is not None and run.target in self.config.clusters:
                # The failback's own figure: copies the target holds past the recorded
                # progress (a worker killed between the copy and its progress) are no loss.
                target = ClusterEndpoint(run.target, self.config.clusters[run.target])
                try:
                    point = raised_past_copies(target, self.connect(target),
                                               FlowTopology.of(flow), point)  # fmt: skip
                except DrkitError:
                    continue  # the target's copies cannot be read now: report it next tick
            report = divergence_report(admin, point)
            if report is None:
                continue  # a transaction is still open in the tail: count it once it ended
            runs.merge_result(run.id, RunResult(divergence=report))
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

        if engine is None and self._engine is not None:
            engine = self._engine()
        if engine is None:
            engine = FailoverEngine(
                self.config, self.store, self.state_dir, role="maintenance", connect=self.connect,
                pointer_topics=self.pointer_topics,
            )  # fmt: skip
        resumed: list[int] = []
        for run in engine.stale_runs():
            log.warning("resuming an interrupted failover run", extra={"run": run.id})
            try:
                engine.resume(run.id)
            except DrkitError as err:
                log.error("resumed run failed", extra={"run": run.id, "error": str(err)})
            resumed.append(run.id)
        return resumed

    def publish_pointer(self) -> dict[str, Published]:
        """Write the store's pointer to each cluster's pointer topic not yet known to hold it
        (drkit.failover.pointer.PointerPublisher) - a cluster that was down when the pointer
        moved gets it once it answers.  No lease: a record never replaces a newer epoch."""
        if self._publisher is None:
            return {}
        outcome = self._publisher.converge()
        missing = sorted(c for c, p in outcome.items() if not p.done)
        if missing:
            log.info("pointer not yet on %s", ", ".join(missing))
        return outcome

    def tick(self) -> None:
        """Run every duty once: resume what a dead engine left (the engine takes the lease),
        publish the pointer where clients read it, then - under the failover lease, unless a
        run holds it - reconcile the protections and report divergence."""
        try:
            self.resume_stale_runs()
        except Exception:  # a scheduled duty must never kill the scheduler
            log.exception("failover maintenance failed", extra={"duty": "resume_stale_runs"})
        try:
            self.publish_pointer()
        except DrkitError as err:  # the store away: the next tick tries again
            log.warning("failover maintenance: the pointer not published: %s", err)
        except Exception:  # a scheduled duty must never kill the scheduler
            log.exception("failover maintenance failed", extra={"duty": "publish_pointer"})
        try:
            with self._holding() as keeper:
                duties: list[Callable[[], object]] = [
                    lambda: self.reconcile_protections(keeper),
                    lambda: self.report_divergence(keeper),
                ]
                for duty in duties:
                    keeper.check()
                    try:
                        duty()
                    except DrkitError as err:
                        log.warning("failover maintenance: %s", err)
                    except Exception:  # a scheduled duty must never kill the scheduler
                        log.exception("failover maintenance failed")
        except LeaseHeld:
            return  # a run (its engine reconciles) or another monitor is at it
        except DrkitError as err:  # the store away: the next tick tries again
            log.warning("failover maintenance skipped: %s", err)
        except Exception:  # a scheduled duty must never kill the scheduler
            log.exception("failover maintenance could not take the failover lease")
