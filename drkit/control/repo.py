"""State-store access for flow control: directives and worker acknowledgements."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy import select, update

from drkit.control.model import DesiredState, FlowDirective, WorkerAck
from drkit.store.clock import database_now
from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard, write_session
from drkit.store.models import FlowAck, FlowControl


class ControlRepository:
    """Reads and writes :class:`FlowDirective` rows and worker acks.  Thread-safe (sessions).

    Directives are written only while ``guard``'s lease is held, when given (the failover
    engine's); acks are the workers' own and never guarded.
    """

    def __init__(self, store: StateStore, guard: WriteGuard | None = None) -> None:
        self.store = store
        self.guard = guard

    def directive(self, flow: str, default: DesiredState = DesiredState.RUNNING) -> FlowDirective:
        """The flow's directive; ``default`` at epoch 0 when none was ever written."""
        with self.store.session() as session:
            row = session.get(FlowControl, flow)
            return FlowDirective(flow, default, 0) if row is None else _directive_of(row)

    def directives(self, defaults: Mapping[str, DesiredState]) -> dict[str, FlowDirective]:
        """Every flow's directive in ``defaults`` (flow -> its default), read in one
        transaction: one snapshot, never a mix of two moments."""
        with self.store.session() as session:
            rows = session.scalars(
                select(FlowControl).where(FlowControl.flow.in_(list(defaults)))
            ).all()
            found = {row.flow: _directive_of(row) for row in rows}
        return {
            flow: found.get(flow) or FlowDirective(flow, default, 0)
            for flow, default in defaults.items()
        }

    def set(
        self, flow: str, desired: DesiredState, reason: str, run_id: int | None = None
    ) -> FlowDirective:
        """Write a new directive (epoch + 1), even if ``desired`` is unchanged."""
        with write_session(self.store, self.guard) as session:
            row = session.get(FlowControl, flow, with_for_update=True)
            now = datetime.now(UTC)
            if row is None:
                row = FlowControl(flow=flow, desired=desired.value, epoch=1, reason=reason)
                session.add(row)
            else:
                row.desired, row.epoch, row.reason = desired.value, row.epoch + 1, reason
            row.run_id, row.updated_at = run_id, now
            session.flush()
            return FlowDirective(flow, desired, row.epoch, reason, run_id)

    def ack(
        self,
        flow: str,
        worker: str,
        epoch: int,
        state: DesiredState,
        failure: str | None = None,
    ) -> None:
        """Report that ``worker`` acts on ``epoch`` of ``flow`` and is in ``state`` (upsert);
        ``failure``: its flow ended for good on this error (a later report clears it)."""
        with self.store.session() as session:
            now = database_now(session)  # ages are judged on the store's clock, not the worker's
            values = {"epoch": epoch, "state": state.value, "at": now, "failure": failure}
            # One statement in the common case (a worker reports every poll); its first
            # report inserts.  A worker id is one process's own, so no other writer races it.
            updated = session.execute(
                update(FlowAck)
                .where(FlowAck.flow == flow, FlowAck.worker == worker)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if updated.rowcount == 0:  # type: ignore[attr-defined]
                session.add(FlowAck(flow=flow, worker=worker, **values))

    def acks(self, flow: str) -> list[WorkerAck]:
        """Every worker that ever reported for ``flow``, with the age of its last report (on
        the store's clock, which wrote it)."""
        with self.store.session() as session:
            now = database_now(session)
            rows = session.scalars(select(FlowAck).where(FlowAck.flow == flow)).all()
            return [
                WorkerAck(
                    row.flow,
                    row.worker,
                    row.epoch,
                    DesiredState(row.state),
                    (now - row.at).total_seconds(),
                    row.failure,
                )
                for row in rows
            ]

    def forget_worker(self, flow: str, worker: str) -> None:
        """Drop a worker's ack row (it left for good)."""
        with self.store.session() as session:
            row = session.scalars(
                select(FlowAck).where(FlowAck.flow == flow, FlowAck.worker == worker)
            ).one_or_none()
            if row is not None:
                session.delete(row)


def _directive_of(row: FlowControl) -> FlowDirective:
    return FlowDirective(row.flow, DesiredState(row.desired), row.epoch, row.reason, row.run_id)
