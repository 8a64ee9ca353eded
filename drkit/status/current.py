"""Read the store and build the status picture (the I/O half of drkit.status)."""

from __future__ import annotations

from collections.abc import Callable

from drkit.automation.journal import AutomationJournal
from drkit.config.model import DrkitConfig
from drkit.control.model import LIVE_WITHIN_S, default_state, failed_workers, running_workers
from drkit.control.repo import ControlRepository
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.pointer import PointerRepository
from drkit.failover.runs import RunRepository
from drkit.health.observations import FlowObservation
from drkit.health.quorum import AutomationGate
from drkit.replication.loss import LossEvent
from drkit.replication.loss_repo import LossRepository
from drkit.status.document import (
    AutomationView,
    DrillView,
    FlowControlView,
    StatusSnapshot,
    build_status,
)
from drkit.store.db import StateStore, shown_error
from drkit.store.health_repo import HealthRepository


def current_status(
    config: DrkitConfig, store: StateStore, observed: type[FlowObservation] = FlowObservation
) -> StatusSnapshot:
    """The picture every process sees: rows from the store (flows read as ``observed``),
    through :func:`build_status`."""
    repo = HealthRepository(store)
    by_flow: dict[str, list[LossEvent]] = {}
    for event in LossRepository(store).list():
        by_flow.setdefault(event.flow, []).append(event)
    fences = FenceRepository(store)
    pending = {
        cluster: sorted(fences.topics(cluster, FenceState.PENDING))
        for cluster in fences.clusters_with(FenceState.PENDING)
    }
    return build_status(
        config,
        repo.all_observer_states(),
        repo.flow_statuses(),
        repo.recent_transitions(),
        next(iter(RunRepository(store).latest(1)), None),
        by_flow,
        pointer=PointerRepository(store).get(),
        pending_fences=pending,
        automation=_automation(store),
        now=repo.now(),  # the store's clock: observers wrote their states with it
        control=_control(config, store),
        drills=_drills(store),
        observed=observed,
    )


def _drills(store: StateStore) -> dict[str, DrillView]:
    """The latest ended drill of each kind, as the status shows it."""
    from drkit.drills.figures import latest_drills, passed

    return {
        kind: DrillView(
            row.id, row.name, row.flow, row.state,
            row.verdict.value if row.verdict is not None else None,
            row.finished_at.timestamp(), row.rto_s, row.rpo_records, passed(row),
        )
        for kind, row in latest_drills(store).items()
        if row.finished_at is not None
    }  # fmt: skip


def _control(config: DrkitConfig, store: StateStore) -> dict[str, FlowControlView]:
    """Each flow's directive and workers, for flows with either (a store without flow control
    - replication run without one - shows none)."""
    repo = ControlRepository(store)
    views: dict[str, FlowControlView] = {}
    for flow in config.flows:
        acks = repo.acks(flow.name)
        directive = repo.directive(flow.name, default_state(flow))
        if not acks and directive.epoch == 0:
            continue
        live = [a for a in acks if a.age_s <= LIVE_WITHIN_S]
        views[flow.name] = FlowControlView(
            directive.desired.value,
            directive.epoch,
            tuple(running_workers(live, directive.epoch)),
            failed_workers(acks),
        )
    return views


def _automation(store: StateStore) -> AutomationView:
    journal = AutomationJournal(store)
    decisions = journal.decisions(limit=1)
    return AutomationView(
        AutomationGate(False, ""),  # build_status fills the gate in
        journal.paused(),
        journal.unacknowledged(),
        decisions[0] if decisions else None,
    )


def status_source(
    config: DrkitConfig, store: StateStore, on_error: Callable[[str], None]
) -> Callable[[], StatusSnapshot]:
    """A status reader for the web server that reports store failures to ``on_error`` (the
    monitor's store watch) before re-raising them (the server answers 503)."""

    def read() -> StatusSnapshot:
        try:
            return current_status(config, store)
        except Exception as err:
            on_error(shown_error(err))  # never the statement and its parameters
            raise

    return read
