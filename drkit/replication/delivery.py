"""Delivery tracking: which source offsets each target acknowledgement completes.

librdkafka reports deliveries per target partition in produce order (the producer is
idempotent), so one FIFO of source offsets per target partition (an :class:`InflightQueue`)
tells which source records a report belongs to.  Confirmed records complete their offsets in
their :class:`PartitionState` and feed the offset-sync run tracker with (source, target) pairs.

Two ways to get reports:

* **Batched** (the default): only a *sentinel* - the last record the copier sends of each run
  of one partition in a consumed batch, and the first record sent to a target partition whose
  last confirmed offset is unknown (the *base*) - carries a delivery callback.  Its report
  confirms every uncovered record before it at once, but only after a proof that none of them
  was lost: the sentinel must sit exactly ``n`` offsets after the last confirmed record, where
  ``n`` is the number of records it covers.  A record that failed without a report (a timed-out
  batch, a refused one) leaves a hole and the check fails; so does another producer writing to
  the same target partition.  Either way nothing of the chunk is confirmed: the session restarts
  from stored progress (duplicates at worst, never a gap) and this tracker switches to
  per-record reports for good.  Transaction markers take an offset too, so after each
  exactly-once commit every queue needs a new base (:meth:`rebase`).
* **Per record**: every record carries :meth:`on_delivery` (the original scheme).  Used when a
  target partition can be fed by several source partitions (key-hashed placement, topic
  renames), while hunting a too-large record, and after a failed contiguity check.

Worker thread only: reports are served from ``poll``/``flush`` on the thread that produces.
The first failed report is kept in ``failure`` for the worker to act on; later ones of the same
session are consequences of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from drkit.kafka.flow_clients import (
    DeliveryFailure,
    DeliveryFailureKind,
    classify_delivery_error,
)
from drkit.replication.partition_state import InflightQueue, PartitionState

log = logging.getLogger(__name__)

Callback = Callable[[Any, Any], None]

# DeliveryFailure.code of a batched report that did not add up (no client error behind it).
UNCONFIRMED = "UNCONFIRMED"


class DeliveryTracker:
    """In-flight queues per target partition and the delivery callbacks; see module docstring."""

    def __init__(self, observe_latency: Callable[[float], None]) -> None:
        self.queues: dict[tuple[str, int], InflightQueue] = {}
        self.failure: tuple[PartitionState, int, DeliveryFailure] | None = None
        self._observe_latency = observe_latency
        self._last: tuple[str, int] | None = None  # reports arrive in runs: cache the lookup
        self._last_queue: InflightQueue | None = None
        self.batched = True
        # Why this tracker reports per record for good (None: batched reports allowed).
        self.per_record_reason: str | None = None

    # -- modes --------------------------------------------------------------------------------

    def begin_session(self, batched_allowed: bool) -> None:
        """A new producer: batched reports unless forbidden for this session or for good."""
        self.failure = None
        self.batched = batched_allowed and self.per_record_reason is None

    def report_per_record(self, reason: str) -> None:
        """From now on every record carries its own report.  Call with nothing in flight, or
        with the session failing (its records are sent again from stored progress)."""
        if self.per_record_reason is None:
            log.warning("delivery reports per record from now on", extra={"reason": reason})
            self.per_record_reason = reason
        self.batched = False

    def batches(self, state: PartitionState, queue: InflightQueue) -> bool:
        """Whether records of ``state`` sent to ``queue`` use batched reports."""
        return self.batched and queue.owner is state and not state.hashed

    def rebase(self) -> None:
        """Transaction markers were written: no queue's next offset is known any more."""
        for queue in self.queues.values():
            queue.last_target = None

    # -- queues -------------------------------------------------------------------------------

    def queue_for(self, state: PartitionState, partition: int) -> InflightQueue:
        """The in-flight queue of target partition ``partition`` of ``state``'s topic."""
        key = (state.target_topic, partition)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = InflightQueue(state)
        elif queue.owner is not None and queue.owner is not state:
            if queue.covered or (self.batched and queue.entries):
                # Batched entries have no report of their own: they cannot be shared.
                self._fail_session(
                    state, queue.entries[0] if queue.entries else 0, "shared target partition"
                )
                self.batched = False
            queue.share_with(state)
        if not state.hashed:
            state.queue = queue
        return queue

    def sentinel(self, queue: InflightQueue, source_offset: int) -> Callback:
        """The callback for a record that covers every uncovered entry of ``queue`` (itself
        included, already added)."""
        count = queue.uncovered()
        queue.covered += count
        return partial(self._on_chunk, queue, count, source_offset)

    # -- reports ------------------------------------------------------------------------------

    def on_delivery(self, error: Any, message: Any) -> None:
        """The per-record delivery callback (per-record mode)."""
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

    def _on_chunk(
        self, queue: InflightQueue, count: int, source_offset: int, error: Any, message: Any
    ) -> None:
        """A sentinel's report: confirm the ``count`` oldest entries of ``queue`` if the
        target offsets prove that all of them were written."""
        if self.queues.get((message.topic(), message.partition())) is not queue:
            return  # a report from a session already torn down
        head = queue.head()
        if head is None:
            return
        if error is not None:
            if self.failure is None:
                self.failure = (head[0], head[1], classify_delivery_error(error))
            return
        target = message.offset()
        last = queue.last_target
        expected = (
            target if last is None and count == 1 else (None if last is None else last + count)
        )
        if target != expected:
            self._fail_session(
                head[0],
                head[1],
                f"the report of {head[0].target_topic} partition {message.partition()} offset "
                f"{target} covers {count} records, which should end at "
                f"{'an unknown offset' if expected is None else expected}: a record failed "
                "without a report or another producer writes to this partition",
            )
            self.report_per_record("a batched report did not add up")
            return
        queue.last_target = target
        queue.covered -= count
        self._confirm(queue, count, target - count + 1, source_offset)

    def _confirm(
        self, queue: InflightQueue, count: int, first_target: int, last_source: int
    ) -> None:
        """The ``count`` oldest entries of ``queue`` are at ``first_target`` onwards."""
        entries = queue.entries
        state = queue.owner
        first = entries[0]
        if (
            state is not None
            and last_source - first == count - 1
            and entries[count - 1] == last_source
        ):
            # The common case: consecutive source offsets, one owner (entries are offsets).
            for _ in range(count):
                entries.popleft()
            if state.tracker is not None:
                state.tracker.observe_range(first, first_target, count)
            pending = state.pending
            if (
                not state.acked
                and pending
                and pending[0] == first
                and pending[count - 1] == last_source
            ):
                for _ in range(count):
                    pending.popleft()
                state.next_offset = last_source + 1
                state.dirty = True
            else:
                for offset in range(first, last_source + 1):
                    state.done(offset)
        else:
            for index in range(count):
                entry = queue.pop()
                assert entry is not None
                owner, offset = entry
                if owner.tracker is not None:
                    owner.tracker.observe(offset, first_target + index)
                owner.done(offset)
        if queue.sampled:
            now = time.time()
            for offset in [o for o in queue.sampled if o <= last_source]:
                timestamp = queue.sampled.pop(offset)
                self._observe_latency(max(0.0, now - timestamp / 1000))

    def _fail_session(self, state: PartitionState, offset: int, text: str) -> None:
        if self.failure is None:
            self.failure = (
                state,
                offset,
                DeliveryFailure(DeliveryFailureKind.TRANSIENT, UNCONFIRMED, text),
            )

    def take_failure(self) -> tuple[PartitionState, int, DeliveryFailure] | None:
        failure, self.failure = self.failure, None
        return failure

    def clear(self) -> None:
        """Forget everything in flight (the session is being torn down)."""
        self.queues.clear()
        self._last = self._last_queue = None
