"""The data path of one flow in one process: consume from the source, produce to the target.

Per source partition the worker keeps the partition number (or places by the Java client's
murmur2 key hash when the target cannot have it), the key, value, headers and CreateTime, and
adds the provenance headers (drkit.replication.provenance).  A source offset counts as done
only after the target acknowledged it (drkit.replication.delivery); progress is stored on the
target behind the offset-sync runs that cover it (drkit.replication.commit).  In exactly-once
mode records, runs and progress are written in one transaction per commit interval, and each
commit first proves this worker still owns its partitions (a synchronous commit to the
replication group), so a zombie that wakes up after its partitions moved aborts instead.

Where partitions resume after an assignment, and what was lost before replication, is decided
by drkit.replication.assignment; the two side threads live in drkit.replication.background.
With a state store, the flow obeys its control directive (drkit.control.gate): running, paused
(settled, partitions paused, still in the group) or stopped (settled, then ``run`` returns);
drkit.replication.gating carries out the transitions.

Threads: the worker thread runs the consume/produce loop, the rebalance callbacks and the
delivery callbacks (all served from ``consume``/``poll``/``flush`` on that thread), so
per-partition state needs no locks.  The topic-watch thread only hands over the topic set and
topic ids (under ``_names_lock``).

Failure rules: a record the target refuses for good (too large, not authorised, invalid) stops
the flow with a :class:`ReplicationError` naming topic, partition and offset; progress never
passes it.  Everything transient (delivery timeouts, leader moves, lost assignments, fenced
transactions, an offset no longer on the source) restarts the session from stored progress
with backoff; the flow gives up only after ``retry.give_up_after_s`` without success.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from drkit.config.model import ClusterConfig, FlowConfig
from drkit.control.gate import FlowGate
from drkit.control.model import DesiredState
from drkit.errors import DrkitError, KafkaError, ReplicationError, RetriableKafkaError, Stopped
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.flow_clients import (
    ConsumeEventKind,
    DeliveryFailure,
    DeliveryFailureKind,
    GroupFencedError,
    ProducerFencedError,
    RawMessage,
    SourceConsumer,
    TargetProducer,
    classify_consume_error,
)
from drkit.kafka.ports import AdminFactory
from drkit.records import TopicPartition
from drkit.replication.assigner import LossSink, PartitionAssigner
from drkit.replication.background import (
    TopicWatcher,
    heartbeat_loop,
    side_sync_loop,
    side_syncs,
)
from drkit.replication.bookkeeping import ensure_bookkeeping_topics
from drkit.replication.client_settings import (
    WorkerSettings,
    consumer_settings,
    producer_settings,
)
from drkit.replication.commit import ProgressWriter, commit_unless_fenced
from drkit.replication.copier import RecordCopier, replication_failure
from drkit.replication.delivery import UNCONFIRMED, DeliveryTracker
from drkit.replication.gating import GateKeeper
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import PartitionState
from drkit.replication.progress import ProgressStore
from drkit.replication.source_watch import count_replicated, observe_source, report_lag
from drkit.replication.supervision import WorkerLiveness, backoff_s, out_of_patience
from drkit.replication.topic_sync import TopicSynchronizer
from drkit.schemas.sync import flow_schema_sync
from drkit.signing import Signer
from drkit.topology.flow import FlowTopology

log = logging.getLogger(__name__)


class _Restart(Exception):
    """Internal: tear the session down and resume from stored progress."""


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
        losses: LossSink,
        liveness: WorkerLiveness | None = None,
        gate: FlowGate | None = None,
        signer: Signer | None = None,
        *,
        connect: AdminFactory,
    ) -> None:
        """``connect``: how it reaches the clusters' admin API (drkit.kafka.ports)."""
        self.flow = flow
        self.connect = connect
        self.signer = signer  # the flow's offset-sync key (drkit/signing.py); None: no store
        self.topology = FlowTopology.of(flow)
        self.name = flow.name
        self.source = ClusterEndpoint(flow.source, source)
        self.target = ClusterEndpoint(flow.target, target)
        self.settings = settings
        self.metrics = metrics
        self.stop = stop
        self.losses = losses
        self.liveness = liveness or WorkerLiveness()
        self.keeper = GateKeeper(gate, flow.name, metrics)
        self._ended = False  # the flow is STOPPED: run() returns
        self.chain = self.topology.chain
        # A request under way when the stop comes is given up (a cluster that never answers
        # must not hold a SIGTERM for a whole request timeout): run() ends with Stopped.
        self.source_admin = connect(self.source, stop=stop)
        self.target_admin = connect(self.target, stop=stop)
        schemas = flow_schema_sync(flow, source, target)
        self.schemas = schemas.sync if schemas is not None else None
        self.topic_sync = TopicSynchronizer(
            self.source_admin,
            self.target_admin,
            self.topology.selects,
            self.topology.target_topic,
            flow.target_replication_factor,
            flow.sync_topic_configs,
        )
        # Serialises topic sync (its admin calls may wait out a dead cluster's timeout) between
        # the topic-watch thread and assignment; the topic set is handed over under its own,
        # never-blocking lock so the consume loop (and obeying a STOP) never waits for it.
        self._lock = threading.Lock()
        self._names_lock = threading.Lock()
        self._quit = threading.Event()  # ends the background threads when run() returns
        self.source_id = flow.source.encode()  # Kafka cluster ids, read in _prepare()
        self.target_id = flow.target.encode()
        self._topics: frozenset[str] = frozenset()
        self._topic_ids: dict[str, str] = {}
        self._subscribed: frozenset[str] = frozenset()
        self._parts: dict[tuple[str, int], PartitionState] = {}
        self._deliveries = DeliveryTracker(self.metrics.latency.labels(self.name).observe)
        self._copier = RecordCopier(
            self.topology,
            metrics,
            self._deliveries,
            self._parts,
            self._consume_error,
            self._raise_failures,
        )
        self._restart: str | None = None
        # An error a background thread cannot ride out (the topic watcher's): the session
        # raises it, and the flow ends on it for good.
        self._fatal: DrkitError | None = None
        self._consumer: SourceConsumer | None = None
        self._producer: TargetProducer | None = None
        self._writer: ProgressWriter | None = None
        self._progress: ProgressStore | None = None
        self._assigner: PartitionAssigner | None = None
        self._in_txn = False
        self._closing = False  # closing the consumer: its revoke callback must not settle
        # After the target refused a batch as too large: per source partition, the highest
        # offset that was in flight.  Until progress passes these, the session sends one record
        # per batch so that the refusal names the one record that is too large.
        self._careful: dict[tuple[str, int], int] | None = None

    def target_name(self, source_topic: str) -> str:
        return self.topology.target_topic(source_topic)

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> None:
        """Replicate until ``stop`` is set or the flow's directive is STOPPED.  Raises
        ReplicationError / KafkaError when it cannot go on."""
        # The data path allocates a few small objects per record and keeps none of them: with
        # the default gen-0 threshold (700) the collector runs thousands of times a second.
        gc.set_threshold(50_000, 20, 20)
        if not self.keeper.admit(self.stop):
            return  # STOPPED (acked) before it began: nothing consumed, nothing written
        self._prepare()
        watcher = TopicWatcher(
            self.topology,
            self.topic_sync,
            self.source_admin,
            self.metrics,
            self._lock,
            self._set_topics,
            self._end_on,
        )
        threads = [
            threading.Thread(
                target=watcher.loop, args=(self._quit,), name=f"topics {self.name}", daemon=True
            ),
            threading.Thread(
                target=heartbeat_loop,
                args=(self.topology, self.source, self.metrics, self._quit, self._running),
                name=f"heartbeat {self.name}",
                daemon=True,
            ),
        ]
        threads += [
            threading.Thread(
                target=side_sync_loop,
                args=(side, self.name, self.metrics, self._quit, self._running),
                name=f"{side.kind} {self.name}",
                daemon=True,
            )
            for side in side_syncs(
                self.topology,
                self.source_admin,
                self.target.config,
                self.schemas,
                self.connect,
                self.stop,
            )
        ]
        for thread in threads:
            thread.start()
        try:
            while not self.stop.is_set() and not self._ended:
                try:
                    self._session()
                except _Restart as restart:
                    if not self._ended:  # STOPPED while its session was torn down: no retry
                        self._after_restart(str(restart))
        finally:
            self._quit.set()
            for thread in threads:
                thread.join(timeout=10)

    def _running(self) -> bool:
        """Whether the flow is running (read by the heartbeat and side-sync threads: paused,
        they write nothing)."""
        return self.keeper.state is DesiredState.RUNNING

    def _after_restart(self, reason: str) -> None:
        self.metrics.errors.labels(self.name, "restart").inc()
        failures = self.liveness.failed()
        if out_of_patience(self.liveness, self.flow.retry):
            raise KafkaError(
                f"flow {self.name}: no progress for {self.liveness.idle_s():.0f}s "
                f"(retry.give_up_after_s={self.flow.retry.give_up_after_s}); last error: {reason}"
            )
        wait = max(0.5, backoff_s(failures, self.flow.retry))
        log.warning(
            "restarting replication session from stored progress",
            extra={"flow": self.name, "reason": reason, "retry_in_s": wait},
        )
        self.stop.wait(wait)

    def _prepare(self) -> None:
        ensure_bookkeeping_topics(self.topology, self.source_admin, self.target_admin)
        # Loop prevention keys on the clusters' own ids, not on aliases: two drkit deployments
        # that name the same clusters differently still recognise records they wrote.
        self.source_id = (self.source_admin.describe_cluster()[0] or self.flow.source).encode()
        self.target_id = (self.target_admin.describe_cluster()[0] or self.flow.target).encode()
        self._copier.source_id, self._copier.target_id = self.source_id, self.target_id
        plan = self.topic_sync.sync()
        self.metrics.drift.labels(self.name).set(len(plan.drift))
        self._topics = frozenset(self.topic_sync.source_partitions)
        self._progress = ProgressStore(self.target, self.topology.progress_topic)
        self._assigner = PartitionAssigner(
            self.topology,
            self.source_admin,
            self.target_admin,
            self.topic_sync,
            self._lock,
            self._progress,
            self.losses,
            self.metrics,
            self.settings.start_from,
            self.settings.worker_id,
        )

    def _end_on(self, error: DrkitError) -> None:
        """Called by the topic watcher thread with an error no retry cures."""
        self._fatal = error

    def _set_topics(self, topics: frozenset[str], ids: dict[str, str]) -> None:
        """Called by the topic watcher thread."""
        with self._names_lock:
            self._topics = topics
            self._topic_ids = ids

    def _session(self) -> None:
        self._restart = None
        # Batched delivery reports need one source partition per target partition (no topic
        # renames, which may merge topics) and every record in its own batch when hunting a
        # record the target refuses as too large.
        self._deliveries.begin_session(
            batched_allowed=self._careful is None and not self.topology.chain.renames
        )
        self._producer = self._make_producer()
        self._writer = ProgressWriter(
            self._producer,
            self.topology,
            self.settings.worker_id,
            self.flow.exactly_once,
            self._progress_durable,
            self.signer,
        )
        self._consumer = self._make_consumer()
        self.keeper.new_session()
        try:
            self._subscribe(force=True)
            last_commit = time.monotonic()
            while not self.stop.is_set():
                if self._fatal is not None:
                    raise self._fatal
                if self._restart is not None:
                    raise _Restart(self._restart)
                self._subscribe()
                if self.keeper.follow(self) is DesiredState.STOPPED:
                    self._ended = True
                    break
                self._pump()
                if time.monotonic() - last_commit >= self.settings.commit_interval_s:
                    self._commit()
                    last_commit = time.monotonic()
            self._finish()
        except Stopped:  # the stop came while a request waited: end as any stop ends
            self._finish()
        except _Restart:
            self._abandon(may_end=True)
            raise
        except BaseException:
            self._abandon()
            raise

    def _make_producer(self) -> TargetProducer:
        settings = producer_settings(self.topology, self.settings, self._careful is not None)
        producer = TargetProducer(self.target, settings, self.flow.exactly_once)
        if self.flow.exactly_once:
            producer.init_transactions(30)
            self._in_txn = False
        return producer

    def _make_consumer(self) -> SourceConsumer:
        return SourceConsumer(
            self.source,
            self.topology.replicate_group,
            consumer_settings(self.topology, self.settings),
        )

    def _subscribe(self, force: bool = False) -> None:
        with self._names_lock:
            topics, ids = self._topics, self._topic_ids
        recreated = sorted(
            {
                state.source.topic
                for state in self._parts.values()
                if state.topic_id is not None
                and ids.get(state.source.topic) not in (None, state.topic_id)
            }
        )
        if recreated:
            raise _Restart(f"source topics deleted and recreated: {', '.join(recreated)}")
        if not force and topics == self._subscribed:
            return
        if not topics:
            # librdkafka refuses an empty subscription (_INVALID_ARG, for good): a source with
            # no selected topic yet - even ``heartbeats``, created by _prepare, may not be in
            # the source's metadata at the first listing - idles until the topic watcher
            # finds one, following its directive meanwhile.  A subscription whose every topic
            # went away starts a new session, which idles the same way.
            if self._subscribed:
                raise _Restart(f"no topic on {self.flow.source} is selected any more")
            if force:
                log.info(
                    "no topic on the source is selected yet; waiting for one",
                    extra={"flow": self.name, "source": self.flow.source},
                )
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
        consumer, producer, writer = self._consumer, self._producer, self._writer
        assert consumer is not None and producer is not None and writer is not None
        if not self._subscribed:
            self.stop.wait(0.1)  # nothing to consume yet (see _subscribe)
            return
        # Up to 100 ms for the first record (idle: no busy loop), then 2 ms to fill the batch
        # (full batches mean long partition runs: fewer delivery callbacks).
        messages = consumer.consume(self.settings.batch_size, 0.1, fill_s=0.002)
        if messages:
            if self.flow.exactly_once and not self._in_txn:
                producer.begin_transaction()
                self._in_txn = True
            self._copier.copy(messages, producer)
        producer.poll(0)
        writer.release()
        self._raise_failures()

    def _consume_error(self, error: Any, message: RawMessage) -> None:
        event = classify_consume_error(error, message)
        if event.kind is ConsumeEventKind.END_OF_PARTITION:
            return
        if event.kind is ConsumeEventKind.OFFSET_OUT_OF_RANGE:
            # Records we still had to copy are gone from the source: restart, so that the
            # resume decision records the loss before moving past it.
            raise _Restart(f"offset out of range on {event.partition}: {event.detail}")
        if event.kind is ConsumeEventKind.TRANSIENT:
            log.warning(
                "consumer error (retrying)", extra={"flow": self.name, "error": event.detail}
            )
            return
        self.metrics.errors.labels(self.name, "fatal").inc()
        raise ReplicationError(
            f"flow {self.name}: consuming from {self.flow.source}: {event.detail}"
        )

    def _raise_failures(self) -> None:
        failed = self._deliveries.take_failure()
        if failed is not None:
            state, offset, failure = failed
            if failure.kind is DeliveryFailureKind.TOO_LARGE and self._careful is None:
                # The broker refuses whole batches: find the offending record one by one.
                self._careful = {
                    key: max(part.pending) for key, part in self._parts.items() if part.pending
                }
                log.warning(
                    "target refused a batch as too large; retrying record by record",
                    extra={"flow": self.name, "topic": state.source.topic},
                )
                raise _Restart("batch too large for the target")
            if failure.kind is DeliveryFailureKind.TRANSIENT:
                # "unconfirmed": a batched report's offsets did not add up (a record lost
                # without a report, or a foreign writer in the replica) - worth its own alert.
                kind = "unconfirmed" if failure.code == UNCONFIRMED else "delivery"
                self.metrics.errors.labels(self.name, kind).inc()
                raise _Restart(f"delivery to {self.flow.target} failed: {failure}")
            self._fail(state, offset, failure)
        writer = self._writer
        if writer is not None and writer.failure is not None:
            self.metrics.errors.labels(self.name, "progress").inc()
            raise _Restart(f"writing offset syncs/progress failed: {writer.failure}")

    def _fail(self, state: PartitionState, offset: int, reason: DeliveryFailure | str) -> NoReturn:
        self.metrics.errors.labels(self.name, "fatal").inc()
        raise replication_failure(self.topology, state, offset, reason)

    # -- progress -------------------------------------------------------------------------

    def _commit(self) -> None:
        """Store progress and offset syncs of every assigned partition on the target."""
        producer, writer = self._producer, self._writer
        assert producer is not None and writer is not None
        self._observe_source()
        if self.flow.exactly_once:
            self._commit_transaction(producer, writer)
        else:
            writer.stage(self._parts.values())
            if writer.settled and not any(p.pending for p in self._parts.values()):
                self.liveness.succeeded()  # nothing to store, nothing in flight: all good
        self.metrics.commits.labels(self.name).inc()
        self._flush_counts()
        if self._careful is not None and all(
            part.next_offset is not None and part.next_offset > self._careful[key]
            for key, part in self._parts.items()
            if key in self._careful
        ):
            self._careful = None
            raise _Restart("past the refused range: back to normal batching")

    def _commit_transaction(self, producer: TargetProducer, writer: ProgressWriter) -> None:
        if not self._in_txn:
            if not any(p.dirty for p in self._parts.values()):
                self.liveness.succeeded()
                return
            producer.begin_transaction()
            self._in_txn = True
        self._flush(producer)
        writer.stage(self._parts.values())
        assert self._consumer is not None
        try:
            commit_unless_fenced(self._consumer, producer, self._next_offsets())
        except (GroupFencedError, ProducerFencedError) as err:
            # A rebalance that moved on while this commit was in flight (group generation) is
            # ordinary when workers join; another producer taking the transactional id is not.
            kind = "rebalanced" if isinstance(err, GroupFencedError) else "fenced"
            self.metrics.errors.labels(self.name, kind).inc()
            self._in_txn = False
            raise _Restart(f"{kind}: {err}") from None
        except RetriableKafkaError as err:
            self.metrics.errors.labels(self.name, "transaction").inc()
            raise _Restart(f"transaction commit failed: {err}") from None
        self._in_txn = False
        self._deliveries.rebase()  # each partition of the transaction got a commit marker

    def _next_offsets(self) -> dict[TopicPartition, int]:
        return {
            state.source: state.next_offset
            for state in self._parts.values()
            if state.next_offset is not None
        }

    def _progress_durable(self, offsets: dict[TopicPartition, int]) -> None:
        """Progress of these partitions is on the target (a delivery callback)."""
        self.liveness.succeeded()
        if not self.flow.exactly_once and self._consumer is not None:
            # Informational only (progress on the target is authoritative): lets standard
            # tooling show this flow's lag on the source cluster.
            with contextlib.suppress(DrkitError):
                self._consumer.commit(offsets, wait=False)

    def _observe_source(self) -> None:
        if self._consumer is not None:
            observe_source(self._consumer, self._parts.values(), self.metrics, self.name)

    def _flush(self, producer: TargetProducer) -> None:
        remaining = producer.flush(self.flow.retry.delivery_timeout_s + 5)
        self._raise_failures()
        if remaining:
            raise _Restart(f"{remaining} records not acknowledged by {self.flow.target}")

    def _settle(self, states: list[PartitionState]) -> None:
        """Deliver everything in flight, then store the progress of ``states`` durably."""
        producer, writer = self._producer, self._writer
        assert producer is not None and writer is not None
        self._flush(producer)
        writer.stage(states)
        self._flush(producer)  # the runs
        writer.release()
        self._flush(producer)  # the progress behind them

    def settle_all(self) -> None:
        """Everything in flight delivered and the progress of every partition durable
        (exactly-once: the open transaction committed)."""
        if self.flow.exactly_once:
            self._commit()
        else:
            self._settle(list(self._parts.values()))
            self._flush_counts()

    def pause_partitions(self) -> None:
        assert self._consumer is not None
        self._consumer.pause([state.source for state in self._parts.values()])

    def resume_partitions(self) -> None:
        assert self._consumer is not None
        self._consumer.resume([state.source for state in self._parts.values()])

    def _flush_counts(self) -> None:
        count_replicated(self._parts.values(), self.metrics, self.name)

    # -- rebalancing ----------------------------------------------------------------------

    def _on_assign(self, partitions: list[TopicPartition]) -> None:
        assert self._consumer is not None and self._assigner is not None
        if self._in_txn:
            # Cooperative rebalancing adds partitions while ours keep flowing: end our own open
            # transaction first, since the assigner waits for every open one to end.
            self._commit()
        states = self._assigner.assign(partitions, self.source_id, self.target_id)
        if self._deliveries.batched and any(state.hashed for state in states):
            # Key-hashed placement feeds one target partition from several source partitions:
            # only per-record reports can tell their records apart.
            assert self._producer is not None
            self._flush(self._producer)
            self._deliveries.report_per_record("a target topic has fewer partitions")
        for state in states:
            self._parts[(state.source.topic, state.source.partition)] = state
        self._consumer.assign({state.source: state.next_offset for state in states})
        if self.keeper.holding:
            self._consumer.pause([state.source for state in states])
        # Until the next commit the lag gauge would still show the lag from before the
        # rebalance (0 on a caught-up worker that just took a dead worker's backlog over).
        report_lag(self._parts.values(), self.metrics, self.name)
        self.metrics.assigned.labels(self.name).set(len(self._parts))
        log.info(
            "partitions assigned",
            extra={"flow": self.name, "count": len(partitions), "total": len(self._parts)},
        )

    def _on_revoke(self, partitions: list[TopicPartition]) -> None:
        revoked = [
            self._parts[(tp.topic, tp.partition)]
            for tp in partitions
            if (tp.topic, tp.partition) in self._parts
        ]
        if (
            revoked
            and not self._closing
            and self._producer is not None
            and self._deliveries.failure is None
        ):
            # Hand over cleanly: everything in flight acknowledged and its progress durable
            # before the next owner reads it.
            if self.flow.exactly_once:
                self._commit()
            else:
                self._settle(revoked)
        self._flush_counts()
        for state in revoked:
            self._parts.pop((state.source.topic, state.source.partition), None)
        self.metrics.assigned.labels(self.name).set(len(self._parts))

    def _on_lost(self, partitions: list[TopicPartition]) -> None:
        log.warning(
            "partitions lost (session expired)", extra={"flow": self.name, "count": len(partitions)}
        )
        if self._in_txn and self._producer is not None:
            # Whatever this worker copied since its last commit may be copied again by the new
            # owner: it must never become visible.
            self._producer.abort_transaction(10)
            self._in_txn = False
        for tp in partitions:
            self._parts.pop((tp.topic, tp.partition), None)
        self._restart = "partitions lost (session expired)"

    # -- shutdown -------------------------------------------------------------------------

    def _finish(self) -> None:
        """Graceful stop: deliver everything in flight, store progress, leave the group."""
        consumer = self._consumer
        assert consumer is not None
        self.settle_all()
        self._close(consumer)
        self._reset_session()

    def _abandon(self, may_end: bool = False) -> None:
        """Tear down after an error: keep what is safely acknowledged, drop the rest.

        ``may_end`` (a session to be restarted): once nothing is left in flight, a STOPPED
        directive read while the consumer closes is acked at once and the worker ends - the
        close of a consumer whose source hangs would otherwise hold the ack for its whole
        budget, and the restart after it longer still (issue 50: a failover's stop step)."""
        producer, writer = self._producer, self._writer
        settled = False
        try:
            if producer is not None and writer is not None:
                if self.flow.exactly_once:
                    if self._in_txn:
                        producer.abort_transaction(10)
                        self._in_txn = False
                elif self._deliveries.failure is None and writer.failure is None:
                    # Store what the target acknowledged, runs first (nothing unacked counts).
                    producer.flush(10)
                    writer.stage(list(self._parts.values()))
                    producer.flush(10)
                    writer.release()
                    producer.flush(10)
            settled = self._nothing_in_flight()
        except Exception:
            log.exception("could not store final progress", extra={"flow": self.name})
        finally:
            end_early = self._end_if_stopped if may_end and settled else None
            if self._consumer is not None:
                self._close(self._consumer, end_early)
            elif end_early is not None:
                end_early()
            self._reset_session()

    def _nothing_in_flight(self) -> bool:
        """Whether the session left nothing that could still reach the target: no open
        transaction, no record or progress write unacknowledged, no failed delivery."""
        producer, writer = self._producer, self._writer
        if producer is None or writer is None:
            return producer is None
        return (
            not self._in_txn
            and producer.pending() == 0
            and self._deliveries.failure is None
            and writer.failure is None
        )

    def _end_if_stopped(self) -> bool:
        """Between sessions, nothing in flight: when the flow is STOPPED, ack it and end."""
        if self.keeper.stop_if_wanted():
            self._ended = True
        return self._ended

    def _close(self, consumer: SourceConsumer, end_early: Callable[[], bool] | None = None) -> None:
        """Close the session's consumer.  Whatever could be settled was settled by the caller:
        the revoke callback that close triggers only forgets partitions (it runs on the
        closing thread, which may be abandoned when the source does not answer).

        Unless the process is stopping, the consumer leaves the group first: the next session's
        consumer joins as a new member and the group rebalances.  A static member that came
        back without leaving would take its own place unnoticed, and partitions a cooperative
        rebalance in progress had taken from it would stay unowned (CI: a joining worker of an
        exactly-once flow got none for a minute after this one restarted mid-rebalance).

        ``end_early`` (see `_abandon`): asked while the close waits; True abandons the consumer
        at once, its close going on in the background."""
        self._closing = True
        try:
            closed = consumer.close(leave_group=not self.stop.is_set(), give_up=end_early)
        finally:
            self._closing = False
        if not closed and self._ended:
            log.info(
                "flow STOPPED while its source consumer closed: acked; the close goes on",
                extra={"flow": self.name},
            )
        elif not closed:
            log.warning(
                "source consumer did not close in time (source unreachable?); abandoned",
                extra={"flow": self.name},
            )

    def _reset_session(self) -> None:
        self._consumer = None
        self._subscribed = frozenset()
        self._parts.clear()
        self._deliveries.clear()
        if self._writer is not None:
            self._writer.forget()
