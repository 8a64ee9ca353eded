"""The data path of one flow in one process: consume from the source, produce to the target.

Per source partition the worker keeps the partition number (or places by the Java client's
murmur2 key hash when the target cannot have it), the key, value, headers and CreateTime, and
adds the provenance headers.  It counts a source offset as done only after the target
acknowledged it, and stores that progress on the target (``progress``) together with the dense
offset-sync runs (``offset_sync``).  In exactly-once mode records, runs and progress are written
in one transaction per commit interval.

Threads: the worker thread runs the consume/produce loop, the rebalance callbacks and the
delivery callbacks (all served from ``consume``/``poll``/``flush`` on that thread), so per-partition
state needs no locks.  A topic-sync thread and a heartbeat thread run beside it; the topic-sync
thread only hands over a new subscription set (under ``_lock``).

Failure rules: a record the target refuses for good (too large, not authorised, ...) stops the
flow with a :class:`ReplicationError` naming topic, partition and offset; progress never passes
it.  A lost assignment or a failed transaction restarts the session from stored progress.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaException,
    Producer,
    murmur2,
)
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition as RdTP

from drkit.config.model import ClusterConfig, FlowConfig
from drkit.errors import KafkaError, ReplicationError, RetriableKafkaError
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.errors import error_code_name, is_retriable, translate
from drkit.kafka.records import TopicPartition
from drkit.replication import internal_topics
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.offset_sync import RunTracker
from drkit.replication.policy import build_policy
from drkit.replication.progress import Progress, ProgressStore, progress_key
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, source_prefix
from drkit.replication.topic_filter import TopicFilter
from drkit.replication.topic_sync import TopicSynchronizer
from drkit.replication.transforms import OutRecord, TransformChain, build_chain

log = logging.getLogger(__name__)

_SAMPLE_EVERY = 64  # latency/age histograms see one record in 64 (hot-path cost)
_SIZE_ERRORS = frozenset({"MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})


@dataclass(frozen=True)
class WorkerSettings:
    worker_id: str = "w0"
    commit_interval_s: float = 1.0
    batch_size: int = 5000
    session_timeout_ms: int = 10000
    start_from: str = "earliest"
    delivery_timeout_ms: int = 120000
    transaction_timeout_ms: int = 10000
    linger_ms: int = 5
    # This process's share of the client buffers: ``--workers N`` gives each worker 1/N, since
    # each one serves about 1/N of the partitions (the fetch size per partition is unchanged).
    buffer_share: float = 1.0

    def producer_queue_messages(self) -> int:
        return max(20_000, int(200_000 * self.buffer_share))

    def consumer_queue_kbytes(self) -> int:
        return max(4096, int(32768 * self.buffer_share))


class _Inflight:
    """Source offsets in flight to one target partition, in produce (= acknowledgement) order.

    Usually one source partition feeds a target partition and entries are plain offsets; when a
    route transform merges several into one, entries carry their state: ``(state, offset)``.
    Timestamps are kept only for the records sampled for the latency histogram.
    """

    __slots__ = ("entries", "owner", "sampled")

    def __init__(self, owner: _PartitionState) -> None:
        self.owner: _PartitionState | None = owner
        self.entries: deque[Any] = deque()
        self.sampled: dict[int, int] = {}


class _Restart(Exception):
    """Internal: tear the session down and resume from stored progress."""


class _PartitionState:
    """Replication state of one assigned source partition (worker thread only)."""

    __slots__ = (
        "acked",
        "bytes",
        "dirty",
        "hashed",
        "next_offset",
        "pending",
        "prefix",
        "queue",
        "records",
        "reported",
        "source",
        "target_partition",
        "target_partitions",
        "target_topic",
        "tracker",
    )

    def __init__(
        self,
        source: TopicPartition,
        target_topic: str,
        target_partitions: int,
        source_alias: str,
        next_offset: int | None,
    ) -> None:
        self.source = source
        self.target_topic = target_topic
        self.target_partitions = target_partitions
        # Keep the partition number whenever the target has it; otherwise hash keys.
        self.hashed = source.partition >= target_partitions
        self.target_partition = -1 if self.hashed else source.partition
        self.prefix = source_prefix(source_alias, source.topic, source.partition)
        self.pending: deque[int] = deque()
        self.acked: set[int] = set()
        self.next_offset = next_offset
        self.dirty = False
        self.queue: _Inflight | None = None
        self.records = 0
        self.bytes = 0
        self.reported = (0, 0)  # (records, bytes) already added to the metrics
        self.tracker = (
            None
            if self.hashed
            else RunTracker(source, TopicPartition(target_topic, source.partition))
        )

    def placed(self, key: bytes | None, source_offset: int) -> int:
        if not self.hashed:
            return self.target_partition
        if key is None:
            return source_offset % self.target_partitions
        return int(murmur2(key, self.target_partitions))

    def done(self, offset: int) -> None:
        """``offset`` is durable on the target (or deliberately not replicated)."""
        pending = self.pending
        if pending and pending[0] == offset:
            pending.popleft()
            self.next_offset = offset + 1
            acked = self.acked
            while pending and pending[0] in acked:
                head = pending.popleft()
                acked.discard(head)
                self.next_offset = head + 1
            self.dirty = True
        else:
            self.acked.add(offset)

    def skip(self, offset: int) -> None:
        """A record that is consumed but intentionally not produced."""
        if not self.pending:
            self.next_offset = offset + 1
            self.dirty = True
        else:
            self.pending.append(offset)
            self.acked.add(offset)


class FlowWorker:
    """Replicates one flow until ``stop`` is set; see the module docstring."""

    def __init__(
        self,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        settings: WorkerSettings,
        metrics: ReplicationMetrics,
        stop: threading.Event,
    ) -> None:
        self.flow = flow
        self.name = flow.name
        self.source = ClusterEndpoint(flow.source, source)
        self.target = ClusterEndpoint(flow.target, target)
        self.settings = settings
        self.metrics = metrics
        self.stop = stop
        self.policy = build_policy(flow.replication_policy)
        self.chain: TransformChain = build_chain(flow.transforms)
        self.filter = TopicFilter.of(flow, self.policy)
        self.group_id = f"drkit-replicate.{flow.source}.{flow.target}"
        self.progress_topic = internal_topics.progress_topic(flow.source)
        self.syncs_topic = internal_topics.offset_syncs_topic(flow.source)
        self.source_admin = KafkaAdmin(self.source)
        self.target_admin = KafkaAdmin(self.target)
        self.topic_sync = TopicSynchronizer(
            self.source_admin,
            self.target_admin,
            self.filter.selects,
            self.target_name,
            flow.target_replication_factor,
            flow.sync_topic_configs,
        )
        self._lock = threading.Lock()
        self._quit = threading.Event()  # ends the background threads when run() returns
        self.source_id = flow.source.encode()  # Kafka cluster ids, read in _prepare()
        self.target_id = flow.target.encode()
        self._topics: frozenset[str] = frozenset()
        self._subscribed: frozenset[str] = frozenset()
        self._parts: dict[tuple[str, int], _PartitionState] = {}
        self._inflight: dict[tuple[str, int], _Inflight] = {}
        self._failure: tuple[_PartitionState, int, Any] | None = None
        self._internal_failure: Any = None
        self._restart = False
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._progress: ProgressStore | None = None
        self._in_txn = False
        self._flowing = False
        self._dr_last: tuple[str, int] | None = None
        self._dr_queue: _Inflight | None = None
        # After the target refused a batch as too large: per source partition, the highest
        # offset that was in flight.  Until progress passes these, the session sends one record
        # per batch so that the refusal names the one record that is too large.
        self._careful: dict[tuple[str, int], int] | None = None

    # -- naming ---------------------------------------------------------------------------

    def target_name(self, source_topic: str) -> str:
        return self.chain.rename(self.policy.target_topic(self.flow.source, source_topic))

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> None:
        """Replicate until stopped.  Raises ReplicationError / KafkaError when it cannot go on."""
        # The data path allocates a few small objects per record and keeps none of them: with
        # the default gen-0 threshold (700) the collector runs thousands of times a second.
        gc.set_threshold(50_000, 20, 20)
        self._prepare()
        threads = [
            threading.Thread(target=self._topic_sync_loop, name=f"topics {self.name}", daemon=True),
            threading.Thread(
                target=self._heartbeat_loop, name=f"heartbeat {self.name}", daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            while not self.stop.is_set():
                try:
                    self._session()
                except _Restart:
                    self.metrics.errors.labels(self.name, "restart").inc()
                    log.warning(
                        "restarting replication session from stored progress",
                        extra={"flow": self.name},
                    )
                    time.sleep(0.5)
        finally:
            self._quit.set()
            for thread in threads:
                thread.join(timeout=10)

    def _prepare(self) -> None:
        rf = self.flow.target_replication_factor
        self.target_admin.create_topics(
            [
                TopicSpec(
                    self.progress_topic,
                    1,
                    rf,
                    {
                        "cleanup.policy": "compact",
                        "segment.ms": "600000",
                        "min.cleanable.dirty.ratio": "0.1",
                    },
                ),
                # Retained for good (compacted by run key): translation must work for any
                # offset a group may still have committed.
                TopicSpec(self.syncs_topic, 1, rf, {"cleanup.policy": "compact"}),
            ]
        )
        self.source_admin.create_topics(
            [TopicSpec(internal_topics.HEARTBEATS, 1, -1, {"cleanup.policy": "compact"})]
        )
        # Loop prevention keys on the clusters' own ids, not on aliases: two drkit deployments
        # that name the same clusters differently still recognise records they wrote.
        self.source_id = (self.source_admin.describe_cluster()[0] or self.flow.source).encode()
        self.target_id = (self.target_admin.describe_cluster()[0] or self.flow.target).encode()
        plan = self.topic_sync.sync()
        self.metrics.drift.labels(self.name).set(len(plan.drift))
        self._topics = frozenset(self.topic_sync.source_partitions)
        self._progress = ProgressStore(self.target, self.progress_topic)

    def _session(self) -> None:
        self._restart = False
        self._failure = None
        self._producer = self._make_producer()
        self._consumer = self._make_consumer()
        try:
            self._subscribe(force=True)
            last_commit = time.monotonic()
            while not self.stop.is_set():
                if self._restart:
                    raise _Restart()
                self._subscribe()
                self._pump()
                if time.monotonic() - last_commit >= self.settings.commit_interval_s:
                    self._commit()
                    last_commit = time.monotonic()
            self._finish()
        except _Restart:
            self._abandon()
            raise
        except BaseException:
            self._abandon()
            raise

    def _make_producer(self) -> Producer:
        extra: dict[str, Any] = {
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": self.settings.linger_ms,
            "message.timeout.ms": self.settings.delivery_timeout_ms,
            # Let the target's topic limit decide what is too large, not the client's default.
            "message.max.bytes": 100_000_000,
            "queue.buffering.max.messages": self.settings.producer_queue_messages(),
            "on_delivery": self._on_delivery,
            "client.id": f"drkit-{self.name}-{self.settings.worker_id}",
        }
        if self._careful is not None:
            extra.update({"batch.num.messages": 1, "linger.ms": 0})
        if self.flow.exactly_once:
            # librdkafka requires message.timeout.ms <= transaction.timeout.ms.
            extra["message.timeout.ms"] = min(
                self.settings.delivery_timeout_ms, self.settings.transaction_timeout_ms
            )
            extra["transactional.id"] = (
                f"drkit-{self.flow.source}-{self.flow.target}-{self.settings.worker_id}"
            )
            extra["transaction.timeout.ms"] = self.settings.transaction_timeout_ms
        producer = make_producer(self.target, extra)
        if self.flow.exactly_once:
            try:
                producer.init_transactions(30)
            except KafkaException as err:
                raise translate(err, f"flow {self.name}: init transactions") from None
            self._in_txn = False
        return producer

    def _make_consumer(self) -> Consumer:
        return make_consumer(
            self.source,
            self.group_id,
            {
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": self.settings.session_timeout_ms,
                "heartbeat.interval.ms": max(500, self.settings.session_timeout_ms // 10),
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "client.id": f"drkit-{self.name}-{self.settings.worker_id}",
                # Fetch in big per-partition chunks and never pause the fetcher: with
                # librdkafka's defaults (1 MiB per partition, 1 s queue backoff) one Python
                # consumer tops out near 150-200k small records/s.  The prefetch queue stays
                # bounded for memory.
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
                "fetch.queue.backoff.ms": 0,
                "queued.max.messages.kbytes": self.settings.consumer_queue_kbytes(),
                "fetch.wait.max.ms": 50,
                # Partitions added to a subscribed topic are seen on metadata refresh (default
                # 5 min): refresh as often as the flow looks for new topics.
                "topic.metadata.refresh.interval.ms": int(
                    self.flow.topic_refresh_interval_s * 1000
                ),
            },
        )

    def _subscribe(self, force: bool = False) -> None:
        with self._lock:
            topics = self._topics
        if not force and topics == self._subscribed:
            return
        assert self._consumer is not None
        self._consumer.subscribe(
            sorted(topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._subscribed = topics

    # -- hot path -------------------------------------------------------------------------

    def _pump(self) -> None:
        consumer, producer = self._consumer, self._producer
        assert consumer is not None and producer is not None
        # consume() waits its whole timeout to fill a batch: short while records flow (latency),
        # longer when idle (no busy loop).
        messages = consumer.consume(self.settings.batch_size, 0.002 if self._flowing else 0.1)
        self._flowing = bool(messages)
        if messages:
            if self.flow.exactly_once and not self._in_txn:
                producer.begin_transaction()
                self._in_txn = True
            self._replicate(messages, producer)
        producer.poll(0)
        self._raise_failures()

    def _replicate(self, messages: list[Any], producer: Producer) -> None:
        """Produce one consumed batch.  The hot path: keep per-record work minimal."""
        parts = self._parts
        chain = self.chain if self.chain.steps else None
        origin_value = self.source_id
        target_id = self.target_id
        produce = producer.produce
        now_s = time.time()
        last: tuple[str, int] | None = None
        state: _PartitionState | None = None
        for message in messages:
            error = message.error()
            if error is not None:
                self._consume_error(error)
                continue
            where = (message.topic(), message.partition())
            if where != last:  # records arrive in runs per partition: look up once per run
                last, state = where, parts.get(where)
            if state is None:
                continue  # revoked between fetch and here
            offset = message.offset()
            if state.next_offset is None:
                state.next_offset = offset
            headers = message.headers()
            has_origin = loops = False
            if headers:
                kept = []
                for name, value in headers:
                    if name == ORIGIN_HEADER:
                        if value == target_id:
                            loops = True
                            break
                        has_origin = True
                    elif name == SOURCE_HEADER:
                        continue  # replaced below: it names the immediate source
                    kept.append((name, value))
                if loops:
                    state.skip(offset)
                    self.metrics.loop_skipped.labels(self.name, where[0]).inc()
                    continue
                headers = kept
            else:
                headers = []
            key = message.key()
            value = message.value()
            if chain is not None:
                try:
                    out = chain.apply(OutRecord(key, value, tuple(headers)))
                except Exception as err:  # a plugin failed on this record: stop here, loudly
                    self._fail(state, offset, f"transform failed: {type(err).__name__}: {err}")
                if out is None:
                    state.skip(offset)
                    self.metrics.filtered.labels(self.name, where[0]).inc()
                    continue
                key, value, headers = out.key, out.value, list(out.headers)
            headers.append((SOURCE_HEADER, state.prefix + str(offset).encode()))
            if not has_origin:
                headers.append((ORIGIN_HEADER, origin_value))
            ts_type, timestamp = message.timestamp()
            if not ts_type:
                timestamp = 0
            partition = state.target_partition if not state.hashed else state.placed(key, offset)
            try:
                produce(
                    state.target_topic, value, key, partition, timestamp=timestamp, headers=headers
                )
            except BufferError:
                self._produce_when_room(
                    producer, state, offset, value, key, partition, timestamp, headers
                )
            except KafkaException as err:
                self._fail(state, offset, err.args[0])
            state.pending.append(offset)
            queue = state.queue if not state.hashed else None
            if queue is None or queue.owner is not state:
                queue = self._queue(state, partition)
            queue.entries.append(offset if queue.owner is state else (state, offset))
            state.records += 1
            state.bytes += len(value or b"") + len(key or b"")
            if timestamp and offset % _SAMPLE_EVERY == 0:
                queue.sampled[offset] = timestamp
                self.metrics.record_age.labels(self.name).observe(
                    max(0.0, now_s - timestamp / 1000)
                )

    def _queue(self, state: _PartitionState, partition: int) -> _Inflight:
        """The in-flight queue of a target partition (delivery reports arrive in its order)."""
        key = (state.target_topic, partition)
        queue = self._inflight.get(key)
        if queue is None:
            queue = self._inflight[key] = _Inflight(state)
        elif queue.owner is not state and queue.owner is not None:
            # A second source partition feeds this target partition: tag every entry from now.
            owner = queue.owner
            queue.entries = deque(
                entry if isinstance(entry, tuple) else (owner, entry) for entry in queue.entries
            )
            queue.owner = None
        if not state.hashed:
            state.queue = queue
        return queue

    def _produce_when_room(
        self,
        producer: Producer,
        state: _PartitionState,
        offset: int,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        timestamp: int,
        headers: list[Any],
    ) -> None:
        """The producer queue is full: serve delivery reports until the record fits."""
        while True:
            producer.poll(0.05)
            self._raise_failures()
            try:
                producer.produce(
                    state.target_topic, value, key, partition, timestamp=timestamp, headers=headers
                )
                return
            except BufferError:
                continue
            except KafkaException as err:
                self._fail(state, offset, err.args[0])

    def _consume_error(self, error: Any) -> None:
        if error.code() == RdKafkaError._PARTITION_EOF:
            return
        if is_retriable(error):
            log.warning(
                "consumer error (retrying)", extra={"flow": self.name, "error": error.str()}
            )
            return
        raise translate(error, f"flow {self.name}: consume")

    def _on_delivery(self, error: Any, message: Any) -> None:
        where = (message.topic(), message.partition())
        if where == self._dr_last:
            queue = self._dr_queue
        else:
            queue = self._inflight.get(where)
            if queue is not None:  # data records always have a queue before they are sent
                self._dr_last, self._dr_queue = where, queue
        if queue is None or not queue.entries:
            return
        entry = queue.entries.popleft()
        if queue.owner is not None and not isinstance(entry, tuple):
            state, source_offset = queue.owner, entry
        else:
            state, source_offset = entry
        if error is not None:
            if self._failure is None:
                self._failure = (state, source_offset, error)
            return
        if state.tracker is not None:
            state.tracker.observe(source_offset, message.offset())
        pending = state.pending
        if pending and pending[0] == source_offset and not state.acked:
            pending.popleft()  # the common case of state.done(), inlined
            state.next_offset = source_offset + 1
            state.dirty = True
        else:
            state.done(source_offset)
        if queue.sampled:
            timestamp = queue.sampled.pop(source_offset, 0)
            if timestamp:
                self.metrics.latency.labels(self.name).observe(
                    max(0.0, time.time() - timestamp / 1000)
                )

    def _on_internal_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._internal_failure is None:
            self._internal_failure = error

    def _raise_failures(self) -> None:
        if self._failure is not None:
            state, offset, error = self._failure
            if self._careful is None and error_code_name(error) in _SIZE_ERRORS:
                # The broker refuses whole batches: find the offending record one by one.
                self._careful = {
                    key: max(part.pending) for key, part in self._parts.items() if part.pending
                }
                self._failure = None
                log.warning(
                    "target refused a batch as too large; retrying record by record",
                    extra={
                        "flow": self.name,
                        "topic": state.source.topic,
                        "partition": state.source.partition,
                    },
                )
                raise _Restart()
            self._fail(state, offset, error)
        if self._internal_failure is not None:
            error, self._internal_failure = self._internal_failure, None
            self.metrics.errors.labels(self.name, "progress").inc()
            raise translate(error, f"flow {self.name}: writing progress/offset syncs")

    def _fail(self, state: _PartitionState, offset: int, error: Any) -> NoReturn:
        self.metrics.errors.labels(self.name, "fatal").inc()
        reason = f"{error_code_name(error)}: {error.str()}" if hasattr(error, "str") else str(error)
        raise ReplicationError(
            f"flow {self.name}: cannot replicate {state.source.topic} partition "
            f"{state.source.partition} offset {offset} to {self.flow.target} "
            f"{state.target_topic}: {reason}. Replication of this partition stopped at offset "
            f"{state.next_offset}; nothing after it was skipped."
        )

    # -- progress -------------------------------------------------------------------------

    def _commit(self, states: list[_PartitionState] | None = None, wait: bool = False) -> None:
        """Store progress and offset syncs of ``states`` (default: all) on the target."""
        producer = self._producer
        assert producer is not None
        chosen = list(self._parts.values()) if states is None else states
        if self.flow.exactly_once:
            if not self._in_txn:
                self._flush_counts()
                return
            self._flush(producer)
            self._write_progress(producer, chosen)
            try:
                producer.commit_transaction(30)
            except KafkaException as err:
                self.metrics.errors.labels(self.name, "transaction").inc()
                log.error("transaction commit failed", extra={"flow": self.name, "error": str(err)})
                raise _Restart() from None
            self._in_txn = False
        else:
            self._write_progress(producer, chosen)
            if wait:
                self._flush(producer)
        self.metrics.commits.labels(self.name).inc()
        self._flush_counts()
        self._update_lag()
        if self._careful is not None and all(
            part.next_offset is not None and part.next_offset > self._careful[key]
            for key, part in self._parts.items()
            if key in self._careful
        ):
            self._careful = None
            raise _Restart()  # past the refused range: back to normal batching

    def _write_progress(self, producer: Producer, states: list[_PartitionState]) -> None:
        offsets: list[RdTP] = []
        now_ms = int(time.time() * 1000)
        for state in states:
            if state.tracker is not None:
                for sync in state.tracker.drain():
                    self._produce_internal(producer, self.syncs_topic, sync.key(), sync.value())
            if not state.dirty or state.next_offset is None:
                continue
            state.dirty = False
            record = Progress(
                state.source, state.next_offset, self.settings.worker_id, now_ms, state.hashed
            )
            self._produce_internal(
                producer,
                self.progress_topic,
                progress_key(self.flow.target, state.source),
                record.value(),
            )
            offsets.append(RdTP(state.source.topic, state.source.partition, state.next_offset))
        if offsets and self._consumer is not None:
            # Informational only (progress on the target is authoritative): lets standard
            # tooling show this flow's lag on the source cluster.
            with contextlib.suppress(KafkaException):
                self._consumer.commit(offsets=offsets, asynchronous=True)

    def _produce_internal(self, producer: Producer, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, value, key, 0, on_delivery=self._on_internal_delivery)
                return
            except BufferError:
                producer.poll(0.05)

    def _flush(self, producer: Producer) -> None:
        remaining = producer.flush(self.settings.delivery_timeout_ms / 1000 + 5)
        self._raise_failures()
        if remaining:
            raise KafkaError(
                f"flow {self.name}: {remaining} records not acknowledged by {self.flow.target}"
            )

    def _flush_counts(self) -> None:
        for state in self._parts.values():
            records, size = state.records - state.reported[0], state.bytes - state.reported[1]
            if records:
                self.metrics.records.labels(self.name, state.source.topic).inc(records)
                self.metrics.bytes.labels(self.name, state.source.topic).inc(size)
                state.reported = (state.records, state.bytes)

    def _update_lag(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        per_topic: dict[str, int] = {}
        for state in self._parts.values():
            try:
                _low, high = consumer.get_watermark_offsets(
                    RdTP(state.source.topic, state.source.partition), cached=True
                )
            except KafkaException:
                continue
            if high >= 0 and state.next_offset is not None:
                per_topic[state.source.topic] = per_topic.get(state.source.topic, 0) + max(
                    0, high - state.next_offset
                )
        for topic, lag in per_topic.items():
            self.metrics.lag.labels(self.name, topic).set(lag)

    def lag(self) -> dict[TopicPartition, int]:
        """Per assigned partition: source high watermark minus next offset (for tests)."""
        out: dict[TopicPartition, int] = {}
        if self._consumer is None:
            return out
        for state in list(self._parts.values()):
            _low, high = self._consumer.get_watermark_offsets(
                RdTP(state.source.topic, state.source.partition), cached=True
            )
            out[state.source] = max(0, high - (state.next_offset or 0))
        return out

    # -- rebalancing ----------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[RdTP]) -> None:
        topics = {tp.topic for tp in partitions}
        with self._lock:
            self.topic_sync.sync(only=topics)
        listed = self._visible_targets(partitions)
        assert self._progress is not None
        stored = self._progress.refresh()
        assignment: list[RdTP] = []
        for tp in partitions:
            source = TopicPartition(tp.topic, tp.partition)
            target_topic = self.target_name(tp.topic)
            info = listed.get(target_topic)
            target_count = info.partition_count if info is not None else 0
            progress = stored.get(source)
            state = _PartitionState(
                source,
                target_topic,
                target_count,
                self.flow.source,
                progress.next_offset if progress else None,
            )
            if state.hashed:
                log.warning(
                    "target has fewer partitions than the source; placing by key hash, "
                    "offsets of this partition cannot be mapped exactly",
                    extra={"flow": self.name, "topic": tp.topic, "partition": tp.partition},
                )
            self._parts[(tp.topic, tp.partition)] = state
            if progress is not None:
                start = progress.next_offset
            else:
                start = OFFSET_BEGINNING if self.settings.start_from == "earliest" else OFFSET_END
                # Record where replication starts even before a record arrives, so an empty
                # partition still has progress (and translates) on the target.
                low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                if low >= 0:
                    state.next_offset = low if start == OFFSET_BEGINNING else high
                    state.dirty = True
            assignment.append(RdTP(tp.topic, tp.partition, start))
        consumer.incremental_assign(assignment)
        self.metrics.assigned.labels(self.name).set(len(self._parts))
        log.info(
            "partitions assigned",
            extra={"flow": self.name, "count": len(partitions), "total": len(self._parts)},
        )

    def _visible_targets(self, partitions: list[RdTP], timeout_s: float = 30.0) -> dict[str, Any]:
        """Target topics as metadata shows them, once every replica of ``partitions`` is there.

        A topic the broker just created can be missing from metadata for a moment; placing
        records before it shows up would mistake it for a topic without partitions.
        """
        needed: dict[str, int] = {}
        for tp in partitions:
            name = self.target_name(tp.topic)
            needed[name] = max(needed.get(name, 0), 1)
        deadline = time.monotonic() + timeout_s
        while True:
            listed = self.target_admin.list_topics()
            missing = [
                n
                for n, count in needed.items()
                if n not in listed or listed[n].partition_count < count
            ]
            if not missing:
                return listed
            if time.monotonic() > deadline:
                raise RetriableKafkaError(
                    f"flow {self.name}: target topics not visible on {self.flow.target} after "
                    f"{timeout_s:.0f}s: {', '.join(sorted(missing))}"
                )
            time.sleep(0.2)

    def _on_revoke(self, consumer: Consumer, partitions: list[RdTP]) -> None:
        revoked = [
            self._parts[(tp.topic, tp.partition)]
            for tp in partitions
            if (tp.topic, tp.partition) in self._parts
        ]
        if revoked and self._producer is not None and self._failure is None:
            # Hand over cleanly: everything in flight acknowledged and its progress durable
            # before the next owner reads it.
            if self.flow.exactly_once:
                self._commit()
            else:
                self._flush(self._producer)
                self._commit(revoked, wait=True)
        self._flush_counts()
        for state in revoked:
            self._parts.pop((state.source.topic, state.source.partition), None)
        self.metrics.assigned.labels(self.name).set(len(self._parts))

    def _on_lost(self, consumer: Consumer, partitions: list[RdTP]) -> None:
        log.warning(
            "partitions lost (session expired)", extra={"flow": self.name, "count": len(partitions)}
        )
        for tp in partitions:
            self._parts.pop((tp.topic, tp.partition), None)
        self._restart = True

    # -- shutdown -------------------------------------------------------------------------

    def _finish(self) -> None:
        """Graceful stop: deliver everything in flight, store progress, leave the group."""
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        if self.flow.exactly_once:
            self._commit()
        else:
            self._flush(producer)
            self._commit(wait=True)
        consumer.close()
        self._consumer = None
        self._parts.clear()
        self._inflight.clear()
        self._dr_last = self._dr_queue = None

    def _abandon(self) -> None:
        """Tear down after an error: keep what is safely acknowledged, drop the rest."""
        producer, consumer = self._producer, self._consumer
        try:
            if producer is not None:
                if self.flow.exactly_once:
                    if self._in_txn:
                        with contextlib.suppress(KafkaException):
                            producer.abort_transaction(10)
                        self._in_txn = False
                else:
                    producer.flush(10)
                    failure, self._failure = self._failure, None
                    self._write_progress(producer, list(self._parts.values()))
                    producer.flush(10)
                    self._failure = failure
        except Exception:
            log.exception("could not store final progress", extra={"flow": self.name})
        finally:
            if consumer is not None:
                with contextlib.suppress(Exception):
                    consumer.close()
            self._consumer = None
            self._parts.clear()
            self._inflight.clear()
            self._dr_last = self._dr_queue = None

    # -- background threads ---------------------------------------------------------------

    def _topic_sync_loop(self) -> None:
        interval = self.flow.topic_refresh_interval_s
        while not self._quit.wait(interval):
            try:
                with self._lock:
                    plan = self.topic_sync.sync()
                    self._topics = frozenset(self.topic_sync.source_partitions)
                self.metrics.drift.labels(self.name).set(len(plan.drift))
            except KafkaError as err:
                self.metrics.errors.labels(self.name, "topic_sync").inc()
                log.warning(
                    "topic sync failed; will retry", extra={"flow": self.name, "error": str(err)}
                )

    def _heartbeat_loop(self) -> None:
        producer = make_producer(
            self.source, {"linger.ms": 0, "client.id": f"drkit-heartbeat-{self.name}"}
        )
        interval = self.flow.heartbeat_interval_s
        heartbeat_key = Heartbeat(self.flow.source, self.flow.target, 0).key()
        try:
            while not self._quit.is_set():
                beat = Heartbeat(self.flow.source, self.flow.target, int(time.time() * 1000))
                try:
                    producer.produce(internal_topics.HEARTBEATS, beat.value(), heartbeat_key, 0)
                except (BufferError, KafkaException) as err:
                    self.metrics.errors.labels(self.name, "heartbeat").inc()
                    log.debug("heartbeat not sent", extra={"flow": self.name, "error": str(err)})
                producer.poll(0)
                self._quit.wait(interval)
        finally:
            producer.flush(5)


def worker_factory(
    flow: FlowConfig,
    clusters: dict[str, ClusterConfig],
    settings: WorkerSettings,
    metrics: ReplicationMetrics,
) -> Callable[[threading.Event], FlowWorker]:
    return lambda stop: FlowWorker(
        flow, clusters[flow.source], clusters[flow.target], settings, metrics, stop
    )
