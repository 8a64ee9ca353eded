"""Write fencing of an old primary: which topics are fenced where, applied or pending.

The engine fences with DENY WRITE ACLs (drkit.kafka.admin ``deny_writes``).  When the cluster is
unreachable (an unplanned failover) the fence is recorded as PENDING, shown in the run and in
``drkit status``, and applied as soon as the cluster answers again (``apply_pending``, run by
``drkit failover`` commands and by the monitor).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import select

from drkit.store.db import StateStore
from drkit.store.models import Fence


class FenceState(StrEnum):
    APPLIED = "applied"
    PENDING = "pending"  # the cluster was unreachable: apply when it returns
    LIFTED = "lifted"


class FenceRepository:
    def __init__(self, store: StateStore) -> None:
        self.store = store

    def record(
        self,
        cluster: str,
        topics: Iterable[str],
        state: FenceState,
        run_id: int | None,
        reads_allowed: Iterable[str] = (),
    ) -> None:
        """Record ``topics``' fence state; ``reads_allowed`` marks topics whose companion ALLOW
        ACLs drkit added (kept until the fence is lifted)."""
        allowed = set(reads_allowed)
        with self.store.session() as session:
            existing = {
                row.topic: row
                for row in session.scalars(select(Fence).where(Fence.cluster == cluster))
            }
            now = datetime.now(UTC)
            for topic in sorted(set(topics)):
                row = existing.get(topic)
                if row is None:
                    session.add(
                        Fence(
                            cluster=cluster,
                            topic=topic,
                            state=state.value,
                            reads_allowed=topic in allowed,
                            run_id=run_id,
                            updated_at=now,
                        )
                    )
                else:
                    row.state, row.run_id, row.updated_at = state.value, run_id, now
                    if state is FenceState.LIFTED:
                        row.reads_allowed = False
                    elif topic in allowed:
                        row.reads_allowed = True

    def topics(self, cluster: str, state: FenceState) -> set[str]:
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Fence.topic).where(Fence.cluster == cluster, Fence.state == state.value)
                )
            )

    def reads_allowed(self, cluster: str) -> set[str]:
        """Topics of ``cluster`` whose fence came with drkit's ALLOW READ/DESCRIBE ACLs."""
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Fence.topic).where(Fence.cluster == cluster, Fence.reads_allowed)
                )
            )

    def clusters_with(self, state: FenceState) -> set[str]:
        with self.store.session() as session:
            return set(session.scalars(select(Fence.cluster).where(Fence.state == state.value)))
