"""State-store access for health monitoring: observations, transitions, observer states.

Observer states are judged across machines, so their freshness is kept on the store's clock
(drkit.store.clock): ``updated_at`` is the database's time of the write, and the observer's own
time of the report is kept in the evidence (``observer_clock_at``) so that the observer's other
times (when a state began, the last answer) can be moved onto the store's clock:
:func:`on_store_clock`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from drkit.store.clock import database_now
from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard, write_session
from drkit.store.models import (
    FlowStatus,
    HealthObservation,
    HealthTransition,
    ObserverState,
)

OBSERVER_CLOCK_AT = "observer_clock_at"


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def on_store_clock(row: ObserverState, observer_time: float) -> float:
    """``observer_time`` (a time on the row's observer's clock) moved onto the store's clock:
    shifted by how far the observer's clock was from the store's when it wrote the row."""
    written_by_observer = (row.evidence or {}).get(OBSERVER_CLOCK_AT)
    if written_by_observer is None:  # written before drkit kept it: no shift known
        return observer_time
    return observer_time + row.updated_at.timestamp() - float(written_by_observer)


class HealthRepository:
    """Observations, observers' states and transitions.  ``guard``: the writer's observer-id
    claim (drkit.health.identity) - its votes are written only while it holds the claim, so a
    monitor that froze and lost its id to another never overwrites that one's votes."""

    def __init__(self, store: StateStore, guard: WriteGuard | None = None) -> None:
        self.store = store
        self.guard = guard

    def record_probe(
        self,
        observer: str,
        cluster: str,
        at: float,
        ok: bool,
        latency_ms: float | None,
        detail: dict[str, Any],
        state: str,
        since: float,
        evidence: dict[str, Any],
        transition_from: str | None,
    ) -> None:
        """One probe: the raw observation, this observer's state and, if it changed, a
        transition with its evidence - in one transaction."""
        with write_session(self.store, self.guard) as session:
            session.add(
                HealthObservation(
                    observer=observer,
                    cluster=cluster,
                    probe="cluster",
                    ok=ok,
                    latency_ms=latency_ms,
                    detail=detail,
                    observed_at=_at(at),
                )
            )
            row = session.scalars(
                select(ObserverState).where(
                    ObserverState.observer == observer, ObserverState.cluster == cluster
                )
            ).one_or_none()
            if row is None:
                row = ObserverState(observer=observer, cluster=cluster)
                session.add(row)
            row.state, row.since, row.updated_at, row.evidence = (
                state,
                _at(since),
                database_now(session),
                {**evidence, OBSERVER_CLOCK_AT: at},
            )
            if transition_from is not None and transition_from != state:
                session.add(
                    _transition("cluster", cluster, observer, transition_from, state, evidence, at)
                )

    def record_transition(
        self,
        kind: str,
        subject: str,
        observer: str,
        old: str | None,
        new: str,
        evidence: dict[str, Any],
        at: float,
    ) -> None:
        with write_session(self.store, self.guard) as session:
            session.add(_transition(kind, subject, observer, old, new, evidence, at))

    def now(self) -> float:
        """The store's clock (drkit.store.clock), as a POSIX timestamp."""
        with self.store.session() as session:
            return database_now(session).timestamp()

    def observer_states(self, within_s: float) -> tuple[float, list[ObserverState]]:
        """(the store's now, every observer state written within ``within_s`` of it)."""
        with self.store.session() as session:
            now = database_now(session)
            rows = session.scalars(
                select(ObserverState).where(
                    ObserverState.updated_at >= now - timedelta(seconds=within_s)
                )
            )
            return now.timestamp(), list(rows)

    def all_observer_states(self) -> list[ObserverState]:
        with self.store.session() as session:
            return list(session.scalars(select(ObserverState)))

    def save_flow_status(self, observer: str, flow: str, at: float, data: dict[str, Any]) -> None:
        with write_session(self.store, self.guard) as session:
            row = session.scalars(
                select(FlowStatus).where(FlowStatus.observer == observer, FlowStatus.flow == flow)
            ).one_or_none()
            if row is None:
                row = FlowStatus(observer=observer, flow=flow)
                session.add(row)
            row.observed_at, row.data = _at(at), data

    def groups_seen(self, flow: str) -> set[str]:
        """Groups any observer saw consuming ``flow``'s source (their lag was sampled)."""
        with self.store.session() as session:
            rows = session.scalars(select(FlowStatus).where(FlowStatus.flow == flow)).all()
            return {group for row in rows for group in (row.data or {}).get("group_lag", {})}

    def flow_statuses(self) -> list[FlowStatus]:
        with self.store.session() as session:
            return list(session.scalars(select(FlowStatus).order_by(FlowStatus.observed_at)))

    def recent_transitions(self, limit: int = 20) -> list[HealthTransition]:
        with self.store.session() as session:
            return list(
                session.scalars(
                    select(HealthTransition).order_by(HealthTransition.at.desc()).limit(limit)
                )
            )

    def prune_observations(self, older_than_s: float) -> int:
        cutoff = datetime.now(UTC) - timedelta(seconds=older_than_s)
        with self.store.session() as session:
            result = session.execute(
                delete(HealthObservation).where(HealthObservation.observed_at < cutoff)
            )
            return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _transition(
    kind: str,
    subject: str,
    observer: str,
    old: str | None,
    new: str,
    evidence: dict[str, Any],
    at: float,
) -> HealthTransition:
    return HealthTransition(
        subject_kind=kind,
        subject=subject,
        observer=observer,
        from_state=old,
        to_state=new,
        evidence=evidence,
        at=_at(at),
    )
