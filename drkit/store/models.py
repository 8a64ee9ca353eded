"""Tables of the state store.

Every state change drkit makes (a health transition, a failover step, a drill verdict) is a row
here, so that an operator or a resumed process can reconstruct what happened and why.  Columns
holding structured evidence are JSON.  Times are timezone-aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on every backend (SQLite stores none, so we normalise both ways)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the state store; use UTC-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        datetime: UtcDateTime(),
    }


class ClusterSeen(Base):
    """A Kafka cluster drkit has talked to, by config alias, with its Kafka cluster id."""

    __tablename__ = "clusters_seen"
    id: Mapped[int] = mapped_column(primary_key=True)
    alias: Mapped[str] = mapped_column(String(128), unique=True)
    kafka_cluster_id: Mapped[str | None] = mapped_column(String(64))
    bootstrap_servers: Mapped[str] = mapped_column(Text)
    first_seen: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(default=utcnow)


class Flow(Base):
    """A replication flow as last configured (``source->target``)."""

    __tablename__ = "flows"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(300), unique=True)
    source: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(128))
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class HealthObservation(Base):
    """One probe result from one observer (raw evidence for health evaluation)."""

    __tablename__ = "health_observations"
    __table_args__ = (Index("ix_observation_cluster_time", "cluster", "observed_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    observer: Mapped[str] = mapped_column(String(128))
    cluster: Mapped[str] = mapped_column(String(128))
    probe: Mapped[str] = mapped_column(String(64))
    ok: Mapped[bool] = mapped_column(Boolean)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)
    observed_at: Mapped[datetime] = mapped_column(default=utcnow)


class HealthTransition(Base):
    """A change of a cluster's (or a group's) evaluated state, with the evidence for it."""

    __tablename__ = "health_transitions"
    id: Mapped[int] = mapped_column(primary_key=True)
    subject_kind: Mapped[str] = mapped_column(String(32))  # "cluster" | "group" | "flow"
    subject: Mapped[str] = mapped_column(String(400))
    observer: Mapped[str] = mapped_column(String(128))
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    evidence: Mapped[dict[str, Any]] = mapped_column(default=dict)
    at: Mapped[datetime] = mapped_column(default=utcnow)


class FailoverRun(Base):
    """A durable failover intent: planned switchover, unplanned failover, cutover or failback.

    ``lease_owner``/``lease_expires_at`` make sure two runs never act at once; a crashed run is
    resumed or rolled back from its recorded steps.
    """

    __tablename__ = "failover_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(32), default="planned")
    requested_by: Mapped[str] = mapped_column(String(128), default="cli")
    reason: Mapped[str] = mapped_column(Text, default="")
    plan: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any]] = mapped_column(default=dict)
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()
    steps: Mapped[list[FailoverStep]] = relationship(
        back_populates="run", order_by="FailoverStep.seq", cascade="all, delete-orphan"
    )


class FailoverRunGroup(Base):
    """One consumer group's rows of a run - a plan's group move, or what a step recorded for
    the group (the translation's positions) - kept out of the run's JSON: at 10,000 groups x
    50 partitions those rows are 500,000, and every step reads the run back."""

    __tablename__ = "failover_run_groups"
    run_id: Mapped[int] = mapped_column(
        ForeignKey("failover_runs.id", ondelete="CASCADE"), primary_key=True
    )
    part: Mapped[str] = mapped_column(String(64), primary_key=True)  # "plan" or a step's name
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    body: Mapped[Any] = mapped_column(JSON)


class FailoverStep(Base):
    """One idempotent step of a failover run."""

    __tablename__ = "failover_steps"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("failover_runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(32), default="pending")
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()
    run: Mapped[FailoverRun] = relationship(back_populates="steps")


class Drill(Base):
    """A DR drill and its report (RTO split, RPO per partition, checks, verdict)."""

    __tablename__ = "drills"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    flow: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(32), default="running")
    verdict: Mapped[str | None] = mapped_column(String(32))
    rto_s: Mapped[float | None] = mapped_column(Float)
    rpo_records: Mapped[int | None] = mapped_column(Integer)
    report: Mapped[dict[str, Any]] = mapped_column(default=dict)
    failover_run_id: Mapped[int | None] = mapped_column(ForeignKey("failover_runs.id"))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()


class Verification(Base):
    """A summary row of one accounting (Spark verify) run."""

    __tablename__ = "verifications"
    id: Mapped[int] = mapped_column(primary_key=True)
    flow: Mapped[str] = mapped_column(String(300))
    ok: Mapped[bool] = mapped_column(Boolean)
    records_checked: Mapped[int] = mapped_column(Integer, default=0)
    missing: Mapped[int] = mapped_column(Integer, default=0)
    duplicated: Mapped[int] = mapped_column(Integer, default=0)
    skipped_by_groups: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[dict[str, Any]] = mapped_column(default=dict)
    output_dir: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()


class ObserverState(Base):
    """The latest evaluated state of a cluster as one observer sees it (one row per pair).

    Monitors sharing a store read each other's rows to form a quorum.
    """

    __tablename__ = "observer_states"
    __table_args__ = (UniqueConstraint("observer", "cluster"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    observer: Mapped[str] = mapped_column(String(128))
    cluster: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(32))
    since: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    evidence: Mapped[dict[str, Any]] = mapped_column(default=dict)


class FlowStatus(Base):
    """The latest observation of a replication flow by one observer (one row per pair)."""

    __tablename__ = "flow_status"
    __table_args__ = (UniqueConstraint("observer", "flow"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    observer: Mapped[str] = mapped_column(String(128))
    flow: Mapped[str] = mapped_column(String(300))
    observed_at: Mapped[datetime] = mapped_column(default=utcnow)
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)


class LossEventRow(Base):
    """Source records lost before replication (see drkit.replication.loss).

    One row per lost range; ``(flow, topic, partition, first_offset)`` is unique so a worker
    that crashed after recording but before moving on records the same range only once.
    """

    __tablename__ = "loss_events"
    __table_args__ = (UniqueConstraint("flow", "topic", "partition", "first_offset"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    flow: Mapped[str] = mapped_column(String(300))
    topic: Mapped[str] = mapped_column(String(300))
    partition: Mapped[int] = mapped_column(Integer)
    first_offset: Mapped[int] = mapped_column(BigInteger)
    last_offset: Mapped[int] = mapped_column(BigInteger)
    count: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(String(32))
    topic_id: Mapped[str | None] = mapped_column(String(64))
    detected_by: Mapped[str] = mapped_column(String(128), default="")
    detected_at: Mapped[datetime] = mapped_column(default=utcnow)


class LeaseRow(Base):
    """A named lease with a fencing token (one failover at a time).

    ``token`` grows by one at every acquisition: a holder that lost the lease (it expired and
    someone else took it) finds a different token and must stop.
    """

    __tablename__ = "leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    token: Mapped[int] = mapped_column(BigInteger)
    acquired_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()


class FlowControl(Base):
    """The desired state of a replication flow, with an epoch that grows at every change."""

    __tablename__ = "flow_control"
    flow: Mapped[str] = mapped_column(String(300), primary_key=True)
    desired: Mapped[str] = mapped_column(String(32))
    epoch: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text, default="")
    run_id: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class FlowAck(Base):
    """A worker's acknowledgement of a flow's desired state (one row per flow and worker)."""

    __tablename__ = "flow_acks"
    __table_args__ = (UniqueConstraint("flow", "worker"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    flow: Mapped[str] = mapped_column(String(300))
    worker: Mapped[str] = mapped_column(String(200))
    epoch: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(32))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    # The flow ended for good on this error in this worker (its last report); None otherwise.
    failure: Mapped[str | None] = mapped_column(Text)


class ActivePointer(Base):
    """Which cluster clients should use (one row per pointer name; ``default`` today)."""

    __tablename__ = "active_pointer"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    epoch: Mapped[int] = mapped_column(BigInteger)
    run_id: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Fence(Base):
    """Write fencing of one topic on one cluster: applied, pending (cluster unreachable) or
    lifted."""

    __tablename__ = "fences"
    __table_args__ = (UniqueConstraint("cluster", "topic"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    topic: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(32))
    # drkit added ALLOW READ/DESCRIBE ACLs with the fence (the topic had no ACL before).
    reads_allowed: Mapped[bool] = mapped_column(Boolean, default=False)
    run_id: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class FenceOpening(Base):
    """An operator opened a cluster's fence by hand (``drkit fences lift --even-if-standby``):
    it stays open while the pointer is at ``pointer_epoch`` (drkit.failover.protections)."""

    __tablename__ = "fence_openings"
    cluster: Mapped[str] = mapped_column(String(128), primary_key=True)
    pointer_epoch: Mapped[int] = mapped_column(BigInteger)
    topics: Mapped[list[str] | None] = mapped_column(JSON)  # None: every topic
    opened_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(default=utcnow)


class AutomationEvent(Base):
    """An operator's word to automatic failover: pause, resume, or ack of a run - who and why."""

    __tablename__ = "automation_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # pause, resume, ack
    run_id: Mapped[int | None] = mapped_column(Integer)  # ack: the run acknowledged
    by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(default=utcnow)


class AutomationDecision(Base):
    """One evaluation of automatic failover with its evidence (stored when it acts or its
    reasons change; every evaluation is logged)."""

    __tablename__ = "automation_decisions"
    id: Mapped[int] = mapped_column(primary_key=True)
    observer: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(128))
    act: Mapped[bool] = mapped_column(Boolean)
    summary: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]] = mapped_column(default=dict)  # Decision.to_json()
    run_id: Mapped[int | None] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class FlowKey(Base):
    """A flow's signing key (drkit/signing.py): 32 random bytes, created by whoever needs it
    first (drkit/store/flow_keys.py).  A secret: never printed, never on a cluster."""

    __tablename__ = "flow_keys"
    flow: Mapped[str] = mapped_column(String(300), primary_key=True)
    secret: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
