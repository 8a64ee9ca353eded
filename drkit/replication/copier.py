"""The hot path: copy one consumed batch to the target, record by record.

Per record: skip true loops (drkit.replication.provenance), apply the flow's transforms, keep
key, value, headers, CreateTime and the partition (or hash the key when the target has fewer
partitions), add ``drkit-src``/``drkit-origin`` and queue the source offset for its delivery
report (drkit.replication.delivery).  Everything here runs once per record: keep it lean - no
allocation that can be hoisted, no lookups that can be cached per partition run.

Worker thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from itertools import groupby
from typing import Any, NoReturn

from drkit.errors import ReplicationError
from drkit.kafka.flow_clients import (
    DeliveryFailure,
    DeliveryFailureKind,
    RawMessage,
    TargetProducer,
)
from drkit.replication.delivery import Callback, DeliveryTracker
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import InflightQueue, PartitionState
from drkit.replication.provenance import (
    ORIGIN_HEADER,
    SOURCE_HEADER,
    origin_header,
    origin_of_record,
)
from drkit.topology.flow import FlowTopology
from drkit.topology.transforms import OutRecord

_SAMPLE_EVERY = 64  # latency/age histograms see one record in 64 (hot-path cost)


def _where(message: RawMessage) -> tuple[str, int]:
    return message.topic(), message.partition()


def replication_failure(
    topology: FlowTopology, state: PartitionState, offset: int, reason: DeliveryFailure | str
) -> ReplicationError:
    """The error that stops a flow at a record it cannot replicate (progress stays before it)."""
    return ReplicationError(
        f"flow {topology.name}: cannot replicate {state.source.topic} partition "
        f"{state.source.partition} offset {offset} to {topology.target} "
        f"{state.target_topic}: {reason}. Replication of this partition stopped at offset "
        f"{state.next_offset}; nothing after it was skipped."
    )


class RecordCopier:
    """Copies consumed batches for the partitions in ``parts`` (shared with the worker)."""

    def __init__(
        self,
        topology: FlowTopology,
        metrics: ReplicationMetrics,
        deliveries: DeliveryTracker,
        parts: dict[tuple[str, int], PartitionState],
        on_consume_error: Callable[[Any, RawMessage], None],
        check_deliveries: Callable[[], None],
    ) -> None:
        self.topology = topology
        self.metrics = metrics
        self.deliveries = deliveries
        self.parts = parts
        self.on_consume_error = on_consume_error
        self.check_deliveries = check_deliveries
        # Kafka cluster ids (loop prevention), set once the worker has read them.
        self.source_id = topology.source.encode()
        self.target_id = topology.target.encode()

    def _fail(self, state: PartitionState, offset: int, reason: DeliveryFailure | str) -> NoReturn:
        self.metrics.errors.labels(self.topology.name, "fatal").inc()
        raise replication_failure(self.topology, state, offset, reason)

    def copy(self, messages: list[RawMessage], producer: TargetProducer) -> None:
        """Produce one consumed batch, one run of a partition's records at a time."""
        parts = self.parts
        for where, run in groupby(messages, _where):
            state = parts.get(where)
            if state is None:  # revoked between fetch and here, or an error without partition
                for message in run:
                    error = message.error()
                    if error is not None:
                        self.on_consume_error(error, message)
                continue
            self._copy_run(state, run, producer)

    def _copy_run(
        self, state: PartitionState, run: Iterable[RawMessage], producer: TargetProducer
    ) -> None:
        """Produce one run of ``state``'s records.  The hot path: keep per-record work minimal.

        Each record is sent one step late, so the run's last sent record is known when it is
        sent: it is the sentinel whose report confirms the run (drkit.replication.delivery).
        Everything that is constant for the run is computed once, here, before the loop.
        """
        chain = self.topology.chain if self.topology.chain.steps else None
        deliveries = self.deliveries
        source_id = self.source_id.decode()
        target_id = self.target_id.decode()
        target_id_bytes = self.target_id
        topic = state.source.topic
        target_topic = state.target_topic
        # librdkafka's produce, positional (keyword parsing costs more than the rest of the
        # call): (topic, value, key, partition, callback, on_delivery, timestamp, headers).
        produce = producer.produce
        now_s = time.time()
        hashed = state.hashed
        partition = state.target_partition
        queue: InflightQueue | None = None
        add: Callable[[int], None] | None = None
        if not hashed:
            queue = state.queue
            if queue is None or queue.owner is not state:
                queue = deliveries.queue_for(state, state.source.partition)
            add = queue.entries.append if queue.owner is state else partial(queue.add, state)
        batched = queue is not None and deliveries.batches(state, queue)
        each: Callback | None = None if batched else deliveries.on_delivery
        base = batched and queue is not None and queue.needs_base()
        pending_append = state.pending.append
        src_template = state.prefix.replace(b"%", b"%%") + b"%d"  # drkit-src, by % formatting
        native_origin = (ORIGIN_HEADER, state.native_origin)
        unset = state.next_offset is None
        records = size = 0
        held: tuple[Any, ...] | None = None  # produce() arguments of the record sent next
        held_offset = 0
        try:
            for message in run:
                error = message.error()
                if error is not None:
                    self.on_consume_error(error, message)
                    continue
                offset = message.offset()
                if unset:
                    state.next_offset, unset = offset, False
                headers: Any = message.headers()
                origin = native_origin
                if headers:
                    kept = []
                    found_origin = found_src = None
                    for name, raw in headers:
                        if name == ORIGIN_HEADER:
                            found_origin = raw  # replaced below
                        elif name == SOURCE_HEADER:
                            found_src = raw  # replaced below: it names the immediate source
                        else:
                            kept.append((name, raw))
                    if found_origin is not None:
                        # Only a drkit copy sitting where drkit wrote it keeps its origin; headers
                        # an application copied into new records are not loops.
                        home = origin_of_record(found_origin, source_id, topic, found_src)
                        if home == target_id:
                            state.skip(offset)
                            self.metrics.loop_skipped.labels(self.topology.name, topic).inc()
                            continue
                        if home != source_id:  # a copy passing through: keep where it began
                            origin = (
                                ORIGIN_HEADER,
                                origin_header(home.encode(), target_id_bytes, target_topic),
                            )
                    headers = kept
                else:
                    headers = []
                key: bytes | None = message.key()
                value: bytes | None = message.value()
                if chain is not None:
                    try:
                        out = chain.apply(OutRecord(key, value, tuple(headers)))
                    except Exception as err:  # a plugin failed on this record: stop here, loudly
                        self._fail(state, offset, f"transform failed: {type(err).__name__}: {err}")
                    if out is None:
                        state.skip(offset)
                        self.metrics.filtered.labels(self.topology.name, topic).inc()
                        continue
                    key, value, headers = out.key, out.value, list(out.headers)
                headers.append((SOURCE_HEADER, src_template % offset))
                headers.append(origin)
                ts_type, timestamp = message.timestamp()
                if not ts_type:
                    timestamp = 0
                if hashed:
                    partition = state.placed(key, offset)
                    queue = deliveries.queue_for(state, partition)
                    queue.add(state, offset)
                else:
                    add(offset)  # type: ignore[misc]
                pending_append(offset)
                records += 1
                size += len(value or b"") + len(key or b"")
                if timestamp and offset % _SAMPLE_EVERY == 0:
                    self._sample(queue, offset, timestamp, now_s)  # type: ignore[arg-type]
                if held is not None:
                    args, held = held, None  # (an exception below must not send it twice)
                    try:
                        produce(*args)
                    except BufferError:
                        self._produce_when_room(producer, state, held_offset, args)
                    except Exception as err:  # rejected locally: see TargetProducer.rejected
                        self._produce_after_rejection(producer, err, state, held_offset, args)
                if base:  # the first record to this target partition: its offset is the base
                    base = False
                    args = (target_topic, value, key, partition, None, None, timestamp, headers)
                    self._send(producer, state, offset, args, deliveries.sentinel(queue, offset))  # type: ignore[arg-type]
                    continue
                held = (target_topic, value, key, partition, each, None, timestamp, headers)
                held_offset = offset
        finally:
            state.records += records
            state.bytes += size
            # The run's last sent record goes out now - also when the run stopped early (a
            # record that cannot be replicated, a consume error): what was sent before that
            # point is still confirmed, so progress reaches it.
            if held is not None:
                assert queue is not None
                callback = deliveries.sentinel(queue, held_offset) if batched else each
                self._send(producer, state, held_offset, held, callback)  # type: ignore[arg-type]

    def _send(
        self,
        producer: TargetProducer,
        state: PartitionState,
        offset: int,
        args: tuple[Any, ...],
        callback: Callback,
    ) -> None:
        """Produce one record outside the per-record loop (a sentinel) with ``callback``;
        ``args`` are produce()'s positional arguments (see :meth:`_copy_run`)."""
        args = (*args[:4], callback, *args[5:])
        try:
            producer.produce(*args)
        except BufferError:
            self._produce_when_room(producer, state, offset, args)
        except Exception as err:  # rejected locally: see TargetProducer.rejected
            self._produce_after_rejection(producer, err, state, offset, args)

    def _sample(self, queue: InflightQueue, offset: int, timestamp: int, now_s: float) -> None:
        queue.sampled[offset] = timestamp
        self.metrics.record_age.labels(self.topology.name).observe(
            max(0.0, now_s - timestamp / 1000)
        )

    def _produce_when_room(
        self, producer: TargetProducer, state: PartitionState, offset: int, args: tuple[Any, ...]
    ) -> None:
        """The producer queue is full: serve delivery reports until the record fits."""
        while True:
            producer.poll(0.05)
            self.check_deliveries()
            try:
                producer.produce(*args)
                return
            except BufferError:
                continue
            except Exception as err:
                self._produce_after_rejection(producer, err, state, offset, args)
                return

    def _produce_after_rejection(
        self,
        producer: TargetProducer,
        err: Exception,
        state: PartitionState,
        offset: int,
        args: tuple[Any, ...],
    ) -> None:
        """The producer refused a record locally.  A transient refusal - typically a partition
        the target topic just gained, unknown to the producer's cached metadata - is retried
        after refreshing the topic's metadata, until the delivery timeout; anything else stops
        the flow at this record."""
        failure = producer.rejected(err, state.target_topic)
        deadline = time.monotonic() + self.topology.flow.retry.delivery_timeout_s
        while failure.kind is DeliveryFailureKind.TRANSIENT and time.monotonic() < deadline:
            producer.refresh_metadata(state.target_topic)
            producer.poll(0.1)
            try:
                producer.produce(*args)
                return
            except BufferError:
                self._produce_when_room(producer, state, offset, args)
                return
            except Exception as again:
                failure = producer.rejected(again, state.target_topic)
        self._fail(state, offset, failure)
