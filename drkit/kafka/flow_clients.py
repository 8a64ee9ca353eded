"""The two clients of a replication flow: a source consumer and a target producer.

The worker calls these once per batch, not once per record - except ``TargetProducer.produce``,
which *is* librdkafka's bound method, because any wrapper there would cost on every record.
Consumed messages keep librdkafka's accessor methods (:class:`RawMessage`); everything else that
crosses this boundary is a drkit value or a drkit exception, so the replication package never
imports confluent_kafka.

Error contract:
* consume errors are classified into :class:`ConsumeEvent` values (end of partition, transient,
  offset out of range, fatal);
* delivery errors into :class:`DeliveryFailure` values (too large, transient, fatal);
* client calls raise :class:`GroupFencedError` when this member no longer owns its partitions,
  :class:`ProducerFencedError` when another producer took over the transactional id, and the
  usual Retriable/Fatal KafkaError otherwise.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, murmur2
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition as RdTP

from drkit import failpoints
from drkit.errors import FatalKafkaError, KafkaError, RetriableKafkaError
from drkit.kafka.clients import ClientSettings, ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.errors import error_code_name, is_fatal_for_flow, translate
from drkit.records import TopicPartition


class RawMessage(Protocol):
    """A consumed message as librdkafka hands it over (accessors, no copies)."""

    def error(self) -> Any: ...
    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes]] | None: ...
    def timestamp(self) -> tuple[int, int]: ...


class GroupFencedError(RetriableKafkaError):
    """This consumer is no longer a current member of its group: its partitions moved on."""


class ProducerFencedError(RetriableKafkaError):
    """Another producer took over this transactional id (a newer worker, or the coordinator
    aborted a transaction that ran past its timeout)."""


class ConsumeEventKind(StrEnum):
    END_OF_PARTITION = "end_of_partition"
    TRANSIENT = "transient"
    OFFSET_OUT_OF_RANGE = "offset_out_of_range"  # the next offset is no longer on the source
    FATAL = "fatal"


@dataclass(frozen=True)
class ConsumeEvent:
    kind: ConsumeEventKind
    partition: TopicPartition | None
    detail: str


class DeliveryFailureKind(StrEnum):
    TOO_LARGE = "too_large"  # the target refuses the record (or its batch) for its size
    TRANSIENT = "transient"  # timed out, leader moved, broker down: send again later
    FATAL = "fatal"  # authorization, invalid record, ...: retrying cannot help


@dataclass(frozen=True)
class DeliveryFailure:
    kind: DeliveryFailureKind
    code: str
    text: str

    def __str__(self) -> str:
        return f"{self.code}: {self.text}"


CLOSE_CHECK_S = 0.05  # how often a waiting close asks its give_up
_SIZE_ERRORS = frozenset({"MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})
_GROUP_FENCED = frozenset(
    {
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
        "FENCED_INSTANCE_ID",
        "REBALANCE_IN_PROGRESS",
        "_ASSIGNMENT_LOST",
        "STALE_MEMBER_EPOCH",
    }
)
_PRODUCER_FENCED = frozenset(
    {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE"}
)


def classify_delivery_error(error: Any) -> DeliveryFailure:
    """What a failed delivery report means for the flow."""
    code = error_code_name(error)
    text = str(error.str()) if hasattr(error, "str") else str(error)
    if code in _SIZE_ERRORS:
        return DeliveryFailure(DeliveryFailureKind.TOO_LARGE, code, text)
    if is_fatal_for_flow(error):
        return DeliveryFailure(DeliveryFailureKind.FATAL, code, text)
    return DeliveryFailure(DeliveryFailureKind.TRANSIENT, code, text)


def classify_consume_error(error: Any, message: RawMessage | None = None) -> ConsumeEvent:
    """What an error event from ``consume`` means for the flow."""
    code = error.code()
    where: TopicPartition | None = None
    if message is not None and message.topic() is not None:
        where = TopicPartition(message.topic(), message.partition())
    if code == RdKafkaError._PARTITION_EOF:
        return ConsumeEvent(ConsumeEventKind.END_OF_PARTITION, where, "")
    if code in (RdKafkaError._AUTO_OFFSET_RESET, RdKafkaError.OFFSET_OUT_OF_RANGE):
        return ConsumeEvent(ConsumeEventKind.OFFSET_OUT_OF_RANGE, where, str(error.str()))
    if code == RdKafkaError.FENCED_INSTANCE_ID:
        return ConsumeEvent(
            ConsumeEventKind.FATAL,
            where,
            "another worker joined the replication group with this worker's id "
            "(group.instance.id); this one stops",
        )
    if is_fatal_for_flow(error) or error.fatal():
        return ConsumeEvent(ConsumeEventKind.FATAL, where, f"{error.name()}: {error.str()}")
    return ConsumeEvent(ConsumeEventKind.TRANSIENT, where, f"{error.name()}: {error.str()}")


def key_partition(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key`` (murmur2)."""
    return int(murmur2(key, partitions))


def _translate_client_error(err: KafkaException, context: str) -> KafkaError:
    error = err.args[0] if err.args else None
    name = error_code_name(error) if error is not None else ""
    if name in _GROUP_FENCED:
        return GroupFencedError(f"{context}: {name}: {error.str()}")  # type: ignore[union-attr]
    if name in _PRODUCER_FENCED or (error is not None and error.fatal() and "fenced" in str(error)):
        return ProducerFencedError(f"{context}: {name}: {error.str()}")  # type: ignore[union-attr]
    return translate(err, context)


Assignment = Callable[[list[TopicPartition]], None]


class SourceConsumer:
    """The flow's consumer on the source cluster, member of the flow's replication group.

    Not thread-safe: one worker thread uses it, and the rebalance callbacks run on that thread
    from inside :meth:`consume`.
    """

    def __init__(self, endpoint: ClusterEndpoint, group_id: str, settings: ClientSettings) -> None:
        self.endpoint = endpoint
        self._consumer: Consumer = make_consumer(
            endpoint, group_id, settings.required, settings.tuning
        )
        self._abandoned = False
        self._static = "group.instance.id" in settings.required  # KIP-345: close does not leave

    def subscribe(
        self,
        topics: list[str],
        on_assign: Assignment,
        on_revoke: Assignment,
        on_lost: Assignment,
    ) -> None:
        def wrap(callback: Assignment) -> Callable[[Consumer, list[RdTP]], None]:
            def deliver(_consumer: Consumer, parts: list[RdTP]) -> None:
                if not self._abandoned:  # an abandoned consumer's late callbacks go nowhere
                    callback([TopicPartition(p.topic, p.partition) for p in parts])

            return deliver

        if not topics:
            raise ValueError("an empty subscription: librdkafka refuses it for good")
        try:
            self._consumer.subscribe(
                topics,
                on_assign=wrap(on_assign),
                on_revoke=wrap(on_revoke),
                on_lost=wrap(on_lost),
            )
        except KafkaException as err:
            raise _translate_client_error(err, f"{self.endpoint.alias}: subscribe") from None

    def assign(self, positions: Mapping[TopicPartition, int | None]) -> None:
        """Add partitions to the assignment at these offsets (None: the partition's log start)."""
        self._consumer.incremental_assign(
            [
                RdTP(tp.topic, tp.partition, OFFSET_BEGINNING if offset is None else offset)
                for tp, offset in positions.items()
            ]
        )

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions``; they stay assigned and the member stays in the group
        as long as :meth:`consume` is called.  librdkafka drops what it had prefetched for them
        and, on :meth:`resume`, fetches again from the offset after the last one consumed."""
        self._pause_resume("pause", partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch paused ``partitions`` again, from where they were paused."""
        self._pause_resume("resume", partitions)

    def _pause_resume(self, what: str, partitions: Iterable[TopicPartition]) -> None:
        request = [RdTP(tp.topic, tp.partition) for tp in partitions]
        if not request:
            return
        call = self._consumer.pause if what == "pause" else self._consumer.resume
        try:
            call(request)
        except KafkaException as err:
            raise _translate_client_error(err, f"{self.endpoint.alias}: {what}") from None

    def consume(self, max_records: int, timeout_s: float, fill_s: float = 0.0) -> list[RawMessage]:
        """Up to ``max_records`` (may include error events; see :func:`classify_consume_error`):
        waits at most ``timeout_s`` for the first, then at most ``fill_s`` more to fill the
        batch.  (librdkafka's own batch call waits its whole timeout to fill the batch: with an
        idle-sized timeout that wait lands on every record's latency at low rates; with a tiny
        one, fuller batches are lost while records flow.)"""
        try:
            first = self._consumer.poll(timeout_s)
            if first is None:
                return []
            if max_records <= 1:
                return [first]  # type: ignore[list-item]
            rest = self._consumer.consume(max_records - 1, fill_s)
            return [first, *rest]  # type: ignore[list-item]
        except KafkaException as err:
            raise _translate_client_error(err, f"{self.endpoint.alias}: consume") from None

    def watermarks(
        self, tp: TopicPartition, cached: bool = True, timeout_s: float = 10.0
    ) -> tuple[int, int] | None:
        """(log start, high watermark) - from the last fetch when ``cached`` - or None."""
        try:
            low, high = self._consumer.get_watermark_offsets(
                RdTP(tp.topic, tp.partition), timeout=timeout_s, cached=cached
            )
        except KafkaException:
            return None
        return (int(low), int(high)) if high >= 0 else None

    def positions(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The next offset the consumer will return per partition, where it knows one."""
        if not tps:
            return {}
        try:
            found = self._consumer.position([RdTP(tp.topic, tp.partition) for tp in tps])
        except KafkaException:
            return {}
        return {TopicPartition(p.topic, p.partition): p.offset for p in found if p.offset >= 0}

    def commit(self, offsets: Mapping[TopicPartition, int], wait: bool) -> None:
        """Commit ``offsets`` for the group; with ``wait``, also proves this member is current
        (raises GroupFencedError when the group moved on without it)."""
        if not offsets:
            return
        request = [RdTP(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        try:
            if wait:
                self._consumer.commit(offsets=request, asynchronous=False)
            else:
                self._consumer.commit(offsets=request, asynchronous=True)
        except KafkaException as err:
            raise _translate_client_error(err, f"{self.endpoint.alias}: commit") from None

    def close(
        self,
        timeout_s: float = 5.0,
        leave_group: bool = False,
        give_up: Callable[[], bool] | None = None,
    ) -> bool:
        """Free the consumer; True when that finished within ``timeout_s``.

        ``give_up``: asked every ~50 ms while the close waits; when it returns True the consumer
        is abandoned at once, as after ``timeout_s`` (the caller has nothing left to wait for).

        ``leave_group``: leave the group, as a dynamic member's close always does.  A static member
        (``group.instance.id``) does not leave on close (KIP-345), so one that comes back under
        the same id takes its place without a rebalance - and partitions a cooperative
        rebalance it interrupted had taken from it stay unowned.  A session that ends inside
        the process must leave; a process that exits keeps its place for its restart.

        librdkafka's close waits for the group coordinator, which a dead source never
        provides: the process hung on SIGTERM for good.  So the close runs in a helper thread;
        after ``timeout_s`` the consumer is abandoned - its rebalance callbacks are cut off, so
        a late revoke never reaches the worker's next session - and the thread ends with the
        process.  Progress is already stored on the target by then; nothing is lost.
        """
        done = threading.Event()

        def close() -> None:
            # Closing after a fatal error can fail: there is nothing left to hand over then.
            with contextlib.suppress(KafkaException, RuntimeError):
                failpoints.reach("source_consumer.close")
                if leave_group and self._static:  # a dynamic member's close leaves anyway
                    self._leave(timeout_s)
                self._consumer.close()
            done.set()

        threading.Thread(target=close, name=f"close {self.endpoint.alias}", daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not done.wait(max(0.0, min(CLOSE_CHECK_S, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or (give_up is not None and give_up()):
                self._abandoned = True
                return False
        return True

    def _leave(self, timeout_s: float) -> None:
        """Unsubscribe and serve the revoke until nothing is assigned: librdkafka then sends
        LeaveGroup, which its close skips for a static member."""
        self._consumer.unsubscribe()
        deadline = time.monotonic() + timeout_s
        while self._consumer.assignment() and time.monotonic() < deadline:
            self._consumer.poll(0.1)
        self._consumer.poll(0.1)  # the LeaveGroup goes out once the unassign is done


class TargetProducer:
    """A flow's idempotent (optionally transactional) producer: the data producer on the
    target, or the heartbeat producer on the source.

    ``produce`` is librdkafka's bound method: ``produce(topic, value, key, partition, callback,
    on_delivery, timestamp, headers)`` - the hot path passes them positionally, in that order
    (pinned by a unit test); it raises BufferError when the local queue is full and anything
    else for a record it rejects locally (see :meth:`rejected`).
    """

    def __init__(
        self, endpoint: ClusterEndpoint, settings: ClientSettings, transactional: bool
    ) -> None:
        self.endpoint = endpoint
        self.transactional = transactional
        self._producer: Producer = make_producer(endpoint, settings.required, settings.tuning)
        self.produce = self._producer.produce
        self.poll = self._producer.poll

    def try_produce(self, topic: str, value: bytes, key: bytes, partition: int) -> str | None:
        """Queue one record outside the hot path; the reason when it could not be queued."""
        try:
            self._producer.produce(topic, value, key, partition)
        except BufferError:
            return "local queue full"
        except KafkaException as err:
            return str(self.rejected(err, topic))
        return None

    def rejected(self, err: BaseException, context: str) -> DeliveryFailure:
        """A local rejection raised by ``produce`` as a delivery failure."""
        if isinstance(err, KafkaException) and err.args:
            return classify_delivery_error(err.args[0])
        return DeliveryFailure(DeliveryFailureKind.FATAL, type(err).__name__, f"{context}: {err}")

    def refresh_metadata(self, topic: str, timeout_s: float = 5.0) -> None:
        """Ask the cluster for ``topic``'s metadata now (e.g. partitions added a moment ago)."""
        with contextlib.suppress(KafkaException):
            self._producer.list_topics(topic, timeout=timeout_s)

    def flush(self, timeout_s: float) -> int:
        """Wait for every queued record's delivery report; returns how many are still queued."""
        return int(self._producer.flush(timeout_s))

    def pending(self) -> int:
        """Records (and requests) queued or in flight, their delivery reports not yet served."""
        return len(self._producer)

    def _txn(self, what: str, call: Callable[[], object]) -> None:
        try:
            call()
        except KafkaException as err:
            raise _translate_client_error(err, f"{self.endpoint.alias}: {what}") from None

    def init_transactions(self, timeout_s: float) -> None:
        """Register the transactional id, fencing older producers that used it."""
        self._txn("init transactions", lambda: self._producer.init_transactions(timeout_s))

    def begin_transaction(self) -> None:
        self._txn("begin transaction", self._producer.begin_transaction)

    def commit_transaction(self, timeout_s: float) -> None:
        self._txn("commit transaction", lambda: self._producer.commit_transaction(timeout_s))

    def abort_transaction(self, timeout_s: float) -> None:
        """Abort the open transaction; errors are swallowed (the session is being torn down and
        the coordinator aborts on its own at the transaction timeout)."""
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(timeout_s)


def fence_transactional_id(
    endpoint: ClusterEndpoint, transactional_id: str, timeout_s: float = 30.0
) -> None:
    """Fence every producer using ``transactional_id`` and abort its open transaction.

    Initialising a producer with the id bumps its epoch at the coordinator: a zombie that wakes
    up with the old epoch can no longer commit.
    """
    producer = TargetProducer(
        endpoint, ClientSettings({"transactional.id": transactional_id}), True
    )
    producer.init_transactions(timeout_s)
    producer.flush(1)


__all__ = [
    "ConsumeEvent",
    "ConsumeEventKind",
    "DeliveryFailure",
    "DeliveryFailureKind",
    "FatalKafkaError",
    "GroupFencedError",
    "ProducerFencedError",
    "RawMessage",
    "SourceConsumer",
    "TargetProducer",
    "classify_consume_error",
    "classify_delivery_error",
    "fence_transactional_id",
    "key_partition",
]
