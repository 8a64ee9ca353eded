"""Clients that behave like the applications a drill moves: a producer (plain or
transactional) and a consumer-group member that commits what it processed.

Drills use them to put a realistic workload on the clusters; they are not on drkit's
replication path.  Every call is bounded; errors come out as drkit's KafkaError.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as RdTP

from drkit.errors import KafkaError
from drkit.kafka.clients import ClusterEndpoint, make_consumer, make_producer
from drkit.kafka.errors import translate
from drkit.kafka.io import to_record
from drkit.records import Record, TopicPartition


@dataclass(frozen=True)
class Acked:
    """One record the cluster acknowledged (for a transaction: committed)."""

    partition: int
    offset: int
    size: int
    timestamp_ms: int


# The transactional ids of AppProducers (a drill's applications: their ACLs are granted on it).
APP_TRANSACTIONAL_PREFIX = "drkit-drill-"


class _ApplicationsBusiness(logging.Filter):
    """librdkafka's own lines about the applications' clients (a producer fenced by the
    failover it is being moved through, a consumer whose cluster was killed) are what the
    drill is there to cause: each refusal comes out as a KafkaError the drill records and
    reports.  So they are logged at DEBUG (``drkit -v``), not printed raw on stderr as
    librdkafka's ``%0|...|FATAL|`` lines would be."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        # The emitting logger judged the record at its first level: judge it again.
        return logging.getLogger().isEnabledFor(logging.DEBUG)


# Given to the applications' clients (librdkafka hands them its log lines on poll/flush).
APP_CLIENT_LOG = logging.getLogger("drkit.kafka.apps.librdkafka")
APP_CLIENT_LOG.addFilter(_ApplicationsBusiness())


class AppProducer:
    """Writes batches with acks=all and idempotence; ``transactional`` commits each batch
    as one transaction (and ``abort`` discards one), so the topic holds commit markers and
    aborted records - its offsets are not the replica's.

    ``send`` returns only records the cluster acknowledged; a refusal (a fence, a dead
    cluster) raises KafkaError after at most ``timeout_s``.
    """

    def __init__(
        self, endpoint: ClusterEndpoint, topic: str, transactional: bool, timeout_s: float = 10.0
    ) -> None:
        self.endpoint, self.topic, self.timeout_s = endpoint, topic, timeout_s
        self.transactional = transactional
        extra: dict[str, object] = {
            "logger": APP_CLIENT_LOG,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(timeout_s * 1000),
        }
        if transactional:
            extra["transactional.id"] = f"{APP_TRANSACTIONAL_PREFIX}{uuid.uuid4().hex[:10]}"
            extra["transaction.timeout.ms"] = 30_000
        self._producer = make_producer(endpoint, extra)
        self._ready = False
        self._in_transaction = False

    def _init(self) -> None:
        if self.transactional and not self._ready:
            try:
                self._producer.init_transactions(self.timeout_s)
            except KafkaException as err:
                raise translate(err, f"{self.endpoint.alias}: init transactions") from None
            self._ready = True

    def send(
        self,
        payloads: Sequence[tuple[bytes | None, bytes]],
        abort: bool = False,
        partition: int | None = None,
    ) -> list[Acked]:
        """Produce ``payloads`` (key, value) - to ``partition``, or as the key decides;
        returns what was acknowledged (nothing when ``abort``: the transaction is aborted
        after the records were written)."""
        delivered = self._produce(payloads, partition)
        if self.transactional:
            self.end_transaction(commit=not abort)
        return [] if abort else delivered

    def open_transaction(
        self, payloads: Sequence[tuple[bytes | None, bytes]], partition: int | None = None
    ) -> list[Acked]:
        """Write ``payloads`` in a transaction left open - acknowledged, on the log, invisible
        to read_committed readers - until :meth:`end_transaction` (or the coordinator's
        timeout) ends it; a second call adds to the same transaction.  Transactional
        producers only."""
        if not self.transactional:
            raise ValueError("open_transaction needs a transactional AppProducer")
        return self._produce(payloads, partition)

    def end_transaction(self, commit: bool) -> None:
        """Commit (or abort) the open transaction; its markers are written by the coordinator,
        so they need no WRITE on the topics - they land even on a fenced cluster."""
        what = "commit" if commit else "abort"
        try:
            if commit:
                self._producer.commit_transaction(self.timeout_s)
            else:
                self._producer.abort_transaction(self.timeout_s)
            self._in_transaction = False
        except KafkaException as err:
            raise translate(err, f"{self.endpoint.alias}: {what} a transaction") from None

    def _produce(
        self, payloads: Sequence[tuple[bytes | None, bytes]], partition: int | None
    ) -> list[Acked]:
        """Every payload acknowledged (in a transaction begun here when transactional)."""
        self._init()
        delivered: list[Acked] = []
        failures: list[KafkaError] = []

        def on_delivery(error: object, message: object) -> None:
            if error is not None:
                failures.append(translate(error, f"produce to {self.topic}"))
                return
            record = to_record(message)
            delivered.append(
                Acked(record.partition, record.offset, record.size, record.timestamp_ms or 0)
            )

        try:
            if self.transactional and not self._in_transaction:
                self._producer.begin_transaction()
                self._in_transaction = True
            for key, value in payloads:
                self._producer.produce(
                    self.topic,
                    key=key,
                    value=value,
                    partition=-1 if partition is None else partition,
                    on_delivery=on_delivery,
                )
            remaining = self._producer.flush(self.timeout_s)
        except KafkaException as err:
            raise translate(err, f"{self.endpoint.alias}: produce to {self.topic}") from None
        except BufferError:
            raise KafkaError(f"{self.endpoint.alias}: producer queue full") from None
        if failures:
            raise failures[0]
        if remaining:
            raise KafkaError(f"{self.endpoint.alias}: {remaining} records not acknowledged")
        return delivered

    def close(self) -> None:
        """Bounded: a dead cluster never holds the caller.

        A transaction a failure left open is aborted first, as librdkafka asks of an
        application: left open, it would hold every read_committed reader of its partitions
        (a failover's drain too) until the coordinator's transaction timeout.
        """
        closer = threading.Thread(target=self._close, daemon=True)
        closer.start()
        closer.join(2.0)

    def _close(self) -> None:
        if self._in_transaction:
            try:
                self._producer.abort_transaction(1.5)
                self._in_transaction = False
            except KafkaException:
                pass  # the coordinator's timeout ends it
        # A fenced or failed transactional producer raises here: it has nothing left to deliver.
        with contextlib.suppress(KafkaException):
            self._producer.flush(0.5)


# How the applications' consumers read (AppConsumer, and the drill's members that follow the
# pointer - drkit.drills.workload.FollowingMember): committed data only, like careful
# applications; librdkafka's lines to the drill's log.
APP_CONSUMER: dict[str, object] = {
    "logger": APP_CLIENT_LOG,
    "isolation.level": "read_committed",
    "session.timeout.ms": 10_000,
    "fetch.wait.max.ms": 100,
}


class AppConsumer:
    """A consumer-group member: ``poll`` a batch, ``commit`` it synchronously.

    Reads committed data only (like a careful application); starts where the group committed,
    or at the beginning when it never did.
    """

    def __init__(self, endpoint: ClusterEndpoint, group: str, topic: str) -> None:
        self.endpoint, self.group, self.topic = endpoint, group, topic
        self._consumer = make_consumer(endpoint, group, APP_CONSUMER)
        self._consumer.subscribe([topic])

    def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        try:
            messages = self._consumer.consume(max_records, timeout_s)
        except KafkaException as err:
            raise translate(err, f"{self.endpoint.alias}: consume {self.topic}") from None
        out: list[Record] = []
        for message in messages:
            error = message.error()
            if error is not None:
                if error.retriable() or error.code() < 0:
                    continue  # transport trouble: the client retries by itself
                raise translate(error, f"{self.endpoint.alias}: consume {self.topic}")
            out.append(to_record(message))
        return out

    def commit(self, records: Sequence[Record]) -> None:
        """Commit the position after the last of ``records`` in each partition (synchronous);
        raises KafkaError when the group coordinator did not accept it."""
        positions: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            positions[tp] = max(positions.get(tp, 0), record.offset + 1)
        if not positions:
            return
        request = [RdTP(tp.topic, tp.partition, o) for tp, o in sorted(positions.items())]
        try:
            answered = self._consumer.commit(offsets=request, asynchronous=False) or []
        except KafkaException as err:
            raise translate(err, f"{self.endpoint.alias}: commit {self.group}") from None
        for answer in answered:
            if answer.error is not None:
                raise translate(answer.error, f"{self.endpoint.alias}: commit {self.group}")

    def close(self) -> None:
        """Leave the group; bounded (a dead cluster never answers a leave request)."""
        closer = threading.Thread(target=self._consumer.close, daemon=True)
        closer.start()
        closer.join(5.0)
