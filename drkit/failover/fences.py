"""Write fencing of old primaries as the store records it: which topics are fenced where.

Which clusters *should* be fenced is desired state (drkit.failover.protections); the reconciler
(drkit.failover.reconcile) applies it as DENY WRITE ACLs and records here what it did: a row per
topic ever fenced - APPLYING before its ACLs are created (so a half-applied fence is known),
APPLIED once a broker shows them, PENDING while the cluster does not answer (applied when it
does), LIFTED once removed - with whether drkit added companion ALLOW READs beside it.  Rows are
kept when lifted: they are also the list of what drkit may take away again.  An operator's
opening (``drkit fences lift --even-if-standby``) is recorded as a :class:`Opening`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import select

from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard, write_session
from drkit.store.models import Fence, FenceOpening


class FenceState(StrEnum):
    APPLYING = "applying"  # intent: the ACLs are being created (may be half on the cluster)
    APPLIED = "applied"
    PENDING = "pending"  # the cluster was unreachable: apply when it returns
    LIFTING = "lifting"  # intent: the ACLs are being deleted (may be half gone) - never APPLIED
    LIFTED = "lifted"


# Every state in which a topic may carry drkit's fence ACLs (or is about to).
FENCED_STATES = (FenceState.APPLYING, FenceState.APPLIED, FenceState.PENDING, FenceState.LIFTING)


@dataclass(frozen=True)
class FenceRow:
    """One topic's fence as the store holds it."""

    cluster: str
    topic: str
    state: FenceState
    run_id: int | None
    reads_allowed: bool  # drkit added ALLOW READ/DESCRIBE beside the DENY WRITE
    updated_at: datetime


@dataclass(frozen=True)
class Opening:
    """A cluster an operator opened by hand, valid while the pointer stays at the epoch."""

    cluster: str
    pointer_epoch: int
    topics: frozenset[str] | None  # None: every topic
    by: str
    reason: str
    at: datetime


class FenceRepository:
    """Fence rows; written only while ``guard``'s lease is held, when given."""

    def __init__(self, store: StateStore, guard: WriteGuard | None = None) -> None:
        self.store = store
        self.guard = guard

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
        with write_session(self.store, self.guard) as session:
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
                    row.state, row.updated_at = state.value, now
                    if run_id is not None:  # a duty applying a run's pending fence keeps its run
                        row.run_id = run_id
                    if state is FenceState.LIFTED:
                        row.reads_allowed = False
                    elif topic in allowed:
                        row.reads_allowed = True

    def topics(self, cluster: str, *states: FenceState) -> set[str]:
        """Topics of ``cluster`` in any of ``states``."""
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Fence.topic).where(
                        Fence.cluster == cluster, Fence.state.in_([s.value for s in states])
                    )
                )
            )

    def fenced(self, cluster: str) -> set[str]:
        """Topics of ``cluster`` that carry (or may carry) drkit's fence."""
        return self.topics(cluster, *FENCED_STATES)

    def fenced_by_runs(self, cluster: str) -> set[int]:
        """The runs whose fences on ``cluster`` are still in place (or pending)."""
        with self.store.session() as session:
            return {
                run_id
                for run_id in session.scalars(
                    select(Fence.run_id).where(
                        Fence.cluster == cluster,
                        Fence.state.in_([s.value for s in FENCED_STATES]),
                    )
                )
                if run_id is not None
            }

    def reads_allowed(self, cluster: str) -> set[str]:
        """Topics of ``cluster`` whose fence came with drkit's ALLOW READ/DESCRIBE ACLs."""
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Fence.topic).where(Fence.cluster == cluster, Fence.reads_allowed)
                )
            )

    def rows(self) -> list[FenceRow]:
        """Every fence row, by cluster and topic (lifted ones too: the history of a topic)."""
        with self.store.session() as session:
            return [
                FenceRow(
                    row.cluster,
                    row.topic,
                    FenceState(row.state),
                    row.run_id,
                    bool(row.reads_allowed),
                    row.updated_at,
                )
                for row in session.scalars(select(Fence).order_by(Fence.cluster, Fence.topic))
            ]

    def clusters_with(self, state: FenceState) -> set[str]:
        with self.store.session() as session:
            return set(session.scalars(select(Fence.cluster).where(Fence.state == state.value)))

    def open(
        self,
        cluster: str,
        pointer_epoch: int,
        by: str,
        reason: str,
        topics: Iterable[str] | None = None,
    ) -> None:
        """Record that ``cluster`` (only ``topics`` of it, when given) stays open until the
        pointer leaves ``pointer_epoch``; within one epoch openings add up."""
        names = sorted(set(topics)) if topics is not None else None
        with write_session(self.store, self.guard) as session:
            row = session.get(FenceOpening, cluster)
            now = datetime.now(UTC)
            if row is None:
                row = FenceOpening(cluster=cluster, pointer_epoch=pointer_epoch, topics=names)
                session.add(row)
            elif row.pointer_epoch != pointer_epoch:
                row.pointer_epoch, row.topics = pointer_epoch, names
            elif names is None or row.topics is None:
                row.topics = None  # every topic
            else:
                row.topics = sorted(set(row.topics) | set(names))
            row.opened_by, row.reason, row.at = by, reason, now

    def openings(self, pointer_epoch: int | None = None) -> list[Opening]:
        """The operators' openings (those made at ``pointer_epoch`` only, when given)."""
        with self.store.session() as session:
            query = select(FenceOpening).order_by(FenceOpening.cluster)
            if pointer_epoch is not None:
                query = query.where(FenceOpening.pointer_epoch == pointer_epoch)
            return [
                Opening(
                    row.cluster,
                    row.pointer_epoch,
                    frozenset(row.topics) if row.topics is not None else None,
                    row.opened_by,
                    row.reason,
                    row.at,
                )
                for row in session.scalars(query)
            ]
