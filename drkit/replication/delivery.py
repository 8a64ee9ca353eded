"""Delivery tracking: which source offset each target acknowledgement completes.

librdkafka reports deliveries per target partition in produce order (the producer is
idempotent), so one FIFO of source offsets per target partition tells which source record a
report belongs to.  A report completes that offset in its :class:`PartitionState` and feeds the
offset-sync run tracker with the (source, target) offset pair.

Worker thread only: reports are served from ``poll``/``flush`` on the thread that produces.
The first failed report is kept in ``failure`` for the worker to act on; later ones of the same
session are consequences of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from drkit.kafka.flow_clients import DeliveryFailure, classify_delivery_error
from drkit.replication.partition_state import InflightQueue, PartitionState


class DeliveryTracker:
    """In-flight queues per target partition and the delivery callback; see module docstring."""

    def __init__(self, observe_latency: Callable[[float], None]) -> None:
        self.queues: dict[tuple[str, int], InflightQueue] = {}
        self.failure: tuple[PartitionState, int, DeliveryFailure] | None = None
        self._observe_latency = observe_latency
        self._last: tuple[str, int] | None = None  # reports arrive in runs: cache the lookup
        self._last_queue: InflightQueue | None = None

    def queue_for(self, state: PartitionState, partition: int) -> InflightQueue:
        """The in-flight queue of target partition ``partition`` of ``state``'s topic."""
        key = (state.target_topic, partition)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = InflightQueue(state)
        else:
            queue.share_with(state)
        if not state.hashed:
            state.queue = queue
        return queue

    def on_delivery(self, error: Any, message: Any) -> None:
        """librdkafka's delivery callback for data records (the hot path's other half)."""
        where = (message.topic(), message.partition())
        if where == self._last:
            queue = self._last_queue
        else:
            queue = self.queues.get(where)
            if queue is not None:  # data records always have a queue before they are sent
                self._last, self._last_queue = where, queue
        if queue is None:
            return
        entry = queue.pop()
        if entry is None:
            return
        state, source_offset = entry
        if error is not None:
            if self.failure is None:
                self.failure = (state, source_offset, classify_delivery_error(error))
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
                self._observe_latency(max(0.0, time.time() - timestamp / 1000))

    def take_failure(self) -> tuple[PartitionState, int, DeliveryFailure] | None:
        failure, self.failure = self.failure, None
        return failure

    def clear(self) -> None:
        """Forget everything in flight (the session is being torn down)."""
        self.queues.clear()
        self._last = self._last_queue = None
