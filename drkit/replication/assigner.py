"""Taking over source partitions: replica topics ready, resume points decided, losses recorded.

Called from the worker's on-assign callback (worker thread).  For the newly assigned partitions
it makes sure their replica topics exist and are visible on the target, reads the stored
progress, asks the source for log starts, ends and topic ids, lets the pure
:func:`drkit.replication.assignment.plan_resume` decide, records every loss event durably
*before* any partition moves past it, applies ``on_source_truncation`` and returns the new
:class:`PartitionState` values.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from drkit.config.model import TruncationPolicy
from drkit.errors import ReplicationError, RetriableKafkaError
from drkit.kafka.admin import TopicInfo
from drkit.kafka.ports import ClusterAdmin
from drkit.records import TopicPartition
from drkit.replication.assignment import Resume, SourceLog, StartFrom, plan_resume
from drkit.replication.loss import LossEvent
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import PartitionState
from drkit.replication.progress import ProgressStore
from drkit.replication.provenance import origin_header
from drkit.replication.topic_sync import TopicSynchronizer
from drkit.topology.flow import FlowTopology

log = logging.getLogger(__name__)


class LossSink(Protocol):
    """Where loss events go (the state store); ``record`` raises when it cannot store."""

    def record(self, event: LossEvent) -> bool: ...


def await_settled(
    admin: ClusterAdmin,
    topics: Iterable[str],
    timeout_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once every transaction open on ``topics`` now has ended (committed or aborted).

    Called with the progress topic and the replicas of the partitions being taken over, before
    progress is read.  A worker that lost these partitions while paused (a zombie) can hold an
    open transaction with copies of them - and, once it reaches its commit, their progress.
    read_committed readers stop before it, so progress read now would resume below records that
    may still commit: copied twice.  Waiting until each partition's last stable offset reaches
    today's high watermark (what Kafka's consumer groups do for transactional offsets, "require
    stable", KIP-447) lets that transaction end first: committed, its progress (same
    transaction) is read; aborted or timed out, none of it shows.  Live members commit within
    their commit interval; a dead one's transaction is aborted by the coordinator at its
    transaction timeout.  Without transactions every topic is settled at once (two offset
    queries per topic).  Raises RetriableKafkaError after ``timeout_s``.
    """
    names = sorted(set(topics))
    ends = {
        (topic, p): end for topic in names for p, (_, end) in admin.topic_offsets(topic).items()
    }
    deadline = clock() + timeout_s
    while ends:
        for topic in sorted({t for t, _ in ends}):
            for p, (_, stable) in admin.topic_offsets(topic, isolation="read_committed").items():
                if (topic, p) in ends and stable >= ends[(topic, p)]:
                    del ends[(topic, p)]
        if not ends:
            return
        if clock() > deadline:
            where = ", ".join(f"{t}:{p}" for t, p in sorted(ends))
            raise RetriableKafkaError(
                f"a transaction stayed open for {timeout_s:.0f}s on {where}; not resuming below it"
            )
        sleep(0.1)


class PartitionAssigner:
    """See the module docstring.  Not thread-safe (worker thread); topic sync under ``lock``."""

    def __init__(
        self,
        topology: FlowTopology,
        source_admin: ClusterAdmin,
        target_admin: ClusterAdmin,
        topic_sync: TopicSynchronizer,
        lock: threading.Lock,
        progress: ProgressStore,
        losses: LossSink,
        metrics: ReplicationMetrics,
        start_from: StartFrom,
        worker_id: str,
    ) -> None:
        self.topology = topology
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.topic_sync = topic_sync
        self.lock = lock
        self.progress = progress
        self.losses = losses
        self.metrics = metrics
        self.start_from = start_from
        self.worker_id = worker_id

    def assign(
        self, partitions: list[TopicPartition], source_id: bytes, target_id: bytes
    ) -> list[PartitionState]:
        """States for ``partitions``, each at its resume point (``next_offset``)."""
        topics = {tp.topic for tp in partitions}
        with self.lock:
            self.topic_sync.sync(only=topics)
        listed = self.visible_targets(partitions)
        await_settled(
            self.target_admin,
            [self.progress.topic, *(self.topology.target_topic(tp.topic) for tp in partitions)],
        )
        stored = self.progress.refresh()
        starts = self.source_admin.list_offsets(partitions, "earliest")
        ends = self.source_admin.list_offsets(partitions, "latest")
        ids = self.source_admin.topic_ids(topics)
        logs = {tp: SourceLog(starts[tp], ends[tp], ids.get(tp.topic)) for tp in partitions}
        plans = plan_resume(
            self.topology.name,
            partitions,
            stored,
            logs,
            self.start_from,
            int(time.time() * 1000),
            self.worker_id,
        )
        for plan in plans:
            if plan.loss is not None:
                self.record_loss(plan.loss)
        return [
            self._state(plan, listed, logs[plan.source], source_id, target_id) for plan in plans
        ]

    def _state(
        self,
        plan: Resume,
        listed: dict[str, TopicInfo],
        source_log: SourceLog,
        source_id: bytes,
        target_id: bytes,
    ) -> PartitionState:
        tp = plan.source
        target_topic = self.topology.target_topic(tp.topic)
        info = listed.get(target_topic)
        state = PartitionState(
            tp,
            target_topic,
            info.partition_count if info is not None else 0,
            self.topology.source,
            plan.offset,
            origin_header(source_id, target_id, target_topic),
            source_log.topic_id,
        )
        state.source_end = source_log.end
        state.dirty = True  # store the resume point and the topic id it belongs to
        where = {"flow": self.topology.name, "topic": tp.topic, "partition": tp.partition}
        if state.hashed:
            log.warning(
                "target has fewer partitions than the source; placing by key hash, "
                "offsets of this partition cannot be mapped exactly",
                extra=where,
            )
        if plan.rewound:
            log.warning(
                "stored progress is past the source's log end (records the source had "
                "acknowledged are gone, e.g. an unclean leader election); resuming at the end",
                extra=where,
            )
        return state

    def record_loss(self, event: LossEvent) -> None:
        """Make the loss durable before moving past it; then apply the flow's policy.

        A state store that cannot be written raises StateStoreError: the flow retries and the
        partition stays where it was, so the loss is detected again rather than forgotten.
        """
        new = self.losses.record(event)
        if new:
            self.metrics.lost.labels(self.topology.name, event.source.topic).inc(event.count)
        log.error(
            "%s",
            event.describe(),
            extra={
                "flow": self.topology.name,
                "topic": event.source.topic,
                "partition": event.source.partition,
                "first_offset": event.first_offset,
                "last_offset": event.last_offset,
                "count": event.count,
                "reason": event.reason.value,
            },
        )
        if self.topology.flow.on_source_truncation is TruncationPolicy.STOP:
            raise ReplicationError(
                f"{event.describe()}; the loss is recorded and the flow stops "
                "(on_source_truncation: stop)"
            )

    def visible_targets(
        self, partitions: list[TopicPartition], timeout_s: float = 30.0
    ) -> dict[str, TopicInfo]:
        """Target topics as metadata shows them, once every replica of ``partitions`` is there.

        A topic the broker just created can be missing from metadata for a moment; placing
        records before it shows up would mistake it for a topic without partitions.
        """
        needed: dict[str, int] = {}
        for tp in partitions:
            name = self.topology.target_topic(tp.topic)
            needed[name] = max(needed.get(name, 1), tp.partition + 1)
        deadline = time.monotonic() + timeout_s
        grown_by = time.monotonic() + min(10.0, timeout_s)
        while True:
            listed = self.target_admin.list_topics()
            missing = [n for n in needed if n not in listed or listed[n].partition_count < 1]
            short = [
                n
                for n, count in needed.items()
                if n in listed and listed[n].partition_count < count
            ]
            # Topic sync grows the replica with the source; give it a moment to show.  A target
            # that stays smaller (its own choice) is replicated by key hash.
            if not missing and (not short or time.monotonic() > grown_by):
                return listed
            if time.monotonic() > deadline:
                raise RetriableKafkaError(
                    f"flow {self.topology.name}: target topics not visible on "
                    f"{self.topology.target} after {timeout_s:.0f}s: {', '.join(sorted(missing))}"
                )
            time.sleep(0.2)
