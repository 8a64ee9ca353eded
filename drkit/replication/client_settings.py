"""Client settings of a replication worker: who it is, and how its two clients are tuned.

:class:`WorkerSettings` are the per-process knobs (``drkit replicate`` options);
:func:`producer_settings` and :func:`consumer_settings` turn them and the flow into librdkafka
settings.  Pure: no clients are built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drkit.kafka.clients import FETCH_QUEUE_BACKOFF_MS, ClientSettings
from drkit.replication.assignment import StartFrom
from drkit.topology.flow import FlowTopology


@dataclass(frozen=True)
class WorkerSettings:
    worker_id: str = "w0"
    commit_interval_s: float = 1.0
    batch_size: int = 5000
    session_timeout_ms: int = 10000
    start_from: StartFrom = StartFrom.EARLIEST
    transaction_timeout_ms: int = 10000
    linger_ms: int = 5
    # Join the replication group as a static member (group.instance.id = worker id): a worker
    # restarted under the same id gets its partitions back at once instead of after the dead
    # member's session timeout.  Only for ids that are stable across restarts.
    static_membership: bool = False
    # This process's share of the client buffers: ``--workers N`` gives each worker 1/N, since
    # each one serves about 1/N of the partitions (the fetch size per partition is unchanged).
    buffer_share: float = 1.0

    def producer_queue_messages(self) -> int:
        return max(20_000, int(200_000 * self.buffer_share))

    def consumer_queue_kbytes(self) -> int:
        return max(4096, int(32768 * self.buffer_share))


def producer_settings(
    topology: FlowTopology,
    settings: WorkerSettings,
    careful: bool,
) -> ClientSettings:
    """The target producer's settings; ``careful``: one record per batch (to find a record the
    target refuses as too large).  No producer-wide delivery callback: records carry their own
    (drkit.replication.delivery), so most records cost no report at all.  Batching and the
    client id are tuning: a cluster's ``client_overrides`` change them."""
    flow = topology.flow
    timeout_ms = int(flow.retry.delivery_timeout_s * 1000)
    required: dict[str, Any] = {
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": timeout_ms,
        # Let the target's topic limit decide what is too large, not the client's default.
        "message.max.bytes": 100_000_000,
    }
    tuning: dict[str, Any] = {
        "linger.ms": settings.linger_ms,
        "queue.buffering.max.messages": settings.producer_queue_messages(),
        # Let batch.size (1 MB) bound a batch, not librdkafka's 10,000-record cap: small records
        # then travel in fewer, fuller requests (less producer-thread CPU per record).
        "batch.num.messages": 100_000,
        "client.id": f"drkit-{topology.name}-{settings.worker_id}",
    }
    if careful:
        required.update({"batch.num.messages": 1, "linger.ms": 0})
    if flow.exactly_once:
        # librdkafka requires message.timeout.ms <= transaction.timeout.ms.
        required["message.timeout.ms"] = min(timeout_ms, settings.transaction_timeout_ms)
        required["transactional.id"] = topology.transactional_id(settings.worker_id)
        required["transaction.timeout.ms"] = settings.transaction_timeout_ms
    return ClientSettings(required, tuning)


def consumer_settings(topology: FlowTopology, settings: WorkerSettings) -> ClientSettings:
    """The source consumer's settings (member of the flow's replication group); how it
    fetches, and the client id, are tuning."""
    required: dict[str, Any] = {
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": max(500, settings.session_timeout_ms // 10),
        "isolation.level": "read_committed",
        # Never jump silently: an offset that is no longer on the source is a loss to record
        # (drkit.replication.loss), not something to reset past.
        "auto.offset.reset": "error",
        # Partitions added to a subscribed topic are seen on metadata refresh (default 5 min):
        # refresh as often as the flow looks for new topics.
        "topic.metadata.refresh.interval.ms": int(topology.flow.topic_refresh_interval_s * 1000),
    }
    tuning: dict[str, Any] = {
        "client.id": f"drkit-{topology.name}-{settings.worker_id}",
        # Fetch in big per-partition chunks and come back soon once the prefetch queue (bounded
        # for memory) has room: with librdkafka's defaults (1 MiB per partition, 1 s queue
        # backoff) one Python consumer tops out near 150-200k small records/s.  Not 0: with no
        # backoff the fetcher thread retries a full queue in a busy loop (librdkafka 2.16) -
        # measured at 0.74 of a core, taken from the Python thread and the brokers on a 2-core
        # machine (100 B records: 303-335k/s at 0, 394-442k/s at 10 ms; 2 and 50 ms alike).
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        "queued.max.messages.kbytes": settings.consumer_queue_kbytes(),
        "fetch.wait.max.ms": 50,
    }
    if settings.static_membership:
        required["group.instance.id"] = f"{topology.replicate_group}.{settings.worker_id}"
    return ClientSettings(required, tuning)
