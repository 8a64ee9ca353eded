"""Storing a flow's progress on the target: offset-sync runs first, progress after them.

Progress says "every source offset below ``next`` is on the target"; translation needs the
offset-sync runs of those offsets.  So progress must never become durable before the runs that
cover it: a progress record that outlived a lost run would claim a record the map cannot place.

:class:`ProgressWriter` stages a *round*: it drains the closed and open runs of every partition
and produces them, and snapshots the progress records of the partitions that moved.  The
progress of a round is produced only once every run of that round (and of earlier rounds) is
acknowledged; rounds are released in order.  If a run fails to be written, its round and every
later one are never released and the failure is raised: the session restarts from the last
durable progress (duplicates on the target at worst, never a gap).  In exactly-once mode runs,
progress and data share a transaction, which gives the same guarantee by atomicity, so rounds
are released at once.

Worker thread only (delivery callbacks are served on it).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from drkit.kafka.flow_clients import (
    GroupFencedError,
    ProducerFencedError,
    TargetProducer,
    classify_delivery_error,
)
from drkit.records import TopicPartition
from drkit.replication.partition_state import PartitionState
from drkit.replication.progress import Progress, progress_key
from drkit.signing import Signer
from drkit.topology.flow import FlowTopology


class CommittingConsumer(Protocol):
    """The source consumer, as far as fencing needs it."""

    def commit(self, offsets: Mapping[TopicPartition, int], wait: bool) -> None: ...


class Transaction(Protocol):
    """The target producer's open transaction."""

    def commit_transaction(self, timeout_s: float) -> None: ...

    def abort_transaction(self, timeout_s: float) -> None: ...


def commit_unless_fenced(
    member: CommittingConsumer, transaction: Transaction, offsets: Mapping[TopicPartition, int]
) -> None:
    """Commit the open transaction only while this worker still owns its partitions.

    A synchronous commit of ``offsets`` to the replication group first proves that this
    member's generation is current.  A zombie - a worker paused (GC, SIGSTOP, a frozen VM)
    while the group gave its partitions to another - fails that check with GroupFencedError:
    the transaction is aborted and the error re-raised, so nothing it copied becomes visible
    twice.  A transaction the coordinator already fenced (ProducerFencedError) is aborted too.
    The coordinator's own transaction timeout covers a pause that begins after the check.
    No ``offsets`` means no partition left to prove ownership with (a worker whose assignment
    was lost while it was paused): the transaction is aborted and GroupFencedError raised.
    """
    if not offsets:
        transaction.abort_transaction(10)
        raise GroupFencedError("no partitions owned: the assignment was lost")
    try:
        member.commit(offsets, wait=True)
        transaction.commit_transaction(30)
    except (GroupFencedError, ProducerFencedError):
        transaction.abort_transaction(10)
        raise


@dataclass
class _Round:
    """One staged round: runs in flight and the progress records waiting for them."""

    number: int
    runs_in_flight: int = 0
    progress: list[tuple[bytes, bytes]] = field(default_factory=list)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


class ProgressWriter:
    """Writes runs and progress for one flow on one producer; see the module docstring."""

    def __init__(
        self,
        producer: TargetProducer,
        topology: FlowTopology,
        worker_id: str,
        immediate: bool,
        on_durable: Callable[[dict[TopicPartition, int]], None],
        signer: Signer | None = None,
    ) -> None:
        """``signer``: the flow's offset-sync key - each run's MAC goes in its ``drkit-mac``
        header (drkit/signing.py); None (no state store) writes runs readers will not trust."""
        self._producer = producer
        self._signer = signer
        self._topology = topology
        self._worker_id = worker_id
        self._immediate = immediate  # exactly-once: runs and progress commit atomically
        self._on_durable = on_durable  # progress of these partitions is now on the target
        self._rounds: deque[_Round] = deque()
        self._next_round = 0
        self._progress_in_flight = 0
        self._durable: dict[TopicPartition, int] = {}
        self.failure: str | None = None

    # -- staging ----------------------------------------------------------------------------

    def stage(self, states: Iterable[PartitionState]) -> None:
        """Produce the runs of ``states`` and queue their progress behind those runs."""
        current = _Round(self._next_round)
        self._next_round += 1
        now_ms = int(time.time() * 1000)
        for state in states:
            if state.tracker is not None:
                for sync in state.tracker.drain():
                    current.runs_in_flight += 1
                    key, value = sync.key(), sync.value()
                    self._produce(
                        self._topology.offset_syncs_topic,
                        key,
                        value,
                        self._run_delivered(current),
                        [self._signer.header(key, value)] if self._signer is not None else None,
                    )
            if not state.dirty or state.next_offset is None:
                continue
            state.dirty = False
            record = Progress(
                state.source,
                state.next_offset,
                self._worker_id,
                now_ms,
                state.hashed,
                state.topic_id,
                state.source_end,
            )
            current.progress.append(
                (progress_key(self._topology.target, state.source), record.value())
            )
            current.offsets[state.source] = state.next_offset
        self._rounds.append(current)
        self.release()

    def release(self) -> None:
        """Produce the progress of every leading round whose runs are all acknowledged."""
        while self._rounds and self.failure is None:
            head = self._rounds[0]
            if head.runs_in_flight and not self._immediate:
                return
            self._rounds.popleft()
            for key, value in head.progress:
                self._progress_in_flight += 1
                self._produce(
                    self._topology.progress_topic, key, value, self._progress_delivered(head)
                )

    @property
    def settled(self) -> bool:
        """Nothing staged, nothing of ours in flight."""
        return not self._rounds and not self._progress_in_flight

    def forget(self) -> None:
        """Drop staged rounds (the session is being abandoned; their progress stays unwritten)."""
        self._rounds.clear()

    # -- plumbing ---------------------------------------------------------------------------

    def _produce(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        callback: Callable[[Any, Any], None],
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        while True:
            try:
                if headers:
                    self._producer.produce(
                        topic, value, key, 0, on_delivery=callback, headers=headers
                    )
                else:
                    self._producer.produce(topic, value, key, 0, on_delivery=callback)
                return
            except BufferError:
                self._producer.poll(0.05)

    def _run_delivered(self, round_: _Round) -> Callable[[Any, Any], None]:
        def delivered(error: Any, _message: Any) -> None:
            round_.runs_in_flight -= 1
            if error is not None and self.failure is None:
                self.failure = f"offset sync: {classify_delivery_error(error)}"

        return delivered

    def _progress_delivered(self, round_: _Round) -> Callable[[Any, Any], None]:
        def delivered(error: Any, _message: Any) -> None:
            self._progress_in_flight -= 1
            if error is not None:
                if self.failure is None:
                    self.failure = f"progress: {classify_delivery_error(error)}"
                return
            self._durable.update(round_.offsets)
            if not self._progress_in_flight and self._durable:
                durable, self._durable = self._durable, {}
                self._on_durable(durable)

        return delivered
