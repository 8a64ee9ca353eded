"""State-store access for loss events (records lost before replication)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason
from drkit.store.db import StateStore
from drkit.store.models import LossEventRow


class LossRepository:
    """Records and lists :class:`LossEvent` values; recording the same range twice is a no-op."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def record(self, event: LossEvent) -> bool:
        """Store ``event``; True when it is new, False when this range was recorded before."""
        row = LossEventRow(
            flow=event.flow,
            topic=event.source.topic,
            partition=event.source.partition,
            first_offset=event.first_offset,
            last_offset=event.last_offset,
            count=event.count,
            reason=event.reason.value,
            topic_id=event.topic_id,
            detected_by=event.detected_by,
            detected_at=datetime.fromtimestamp(event.detected_at_ms / 1000, UTC),
        )
        try:
            with self.store.session() as session:
                session.add(row)
        except IntegrityError:
            return False
        return True

    def list(self, flow: str | None = None) -> list[LossEvent]:
        """Every recorded event (of ``flow`` when given), oldest first."""
        query = select(LossEventRow).order_by(LossEventRow.detected_at, LossEventRow.id)
        if flow is not None:
            query = query.where(LossEventRow.flow == flow)
        with self.store.session() as session:
            rows = session.scalars(query).all()
        return [_event(row) for row in rows]

    def totals(self, flow: str) -> dict[TopicPartition, int]:
        """Records lost per source partition of ``flow``."""
        out: dict[TopicPartition, int] = {}
        for event in self.list(flow):
            out[event.source] = out.get(event.source, 0) + event.count
        return out


def _event(row: LossEventRow) -> LossEvent:
    return LossEvent(
        flow=row.flow,
        source=TopicPartition(row.topic, row.partition),
        first_offset=row.first_offset,
        last_offset=row.last_offset,
        reason=LossReason(row.reason),
        detected_at_ms=int(row.detected_at.timestamp() * 1000),
        detected_by=row.detected_by,
        topic_id=row.topic_id,
    )
