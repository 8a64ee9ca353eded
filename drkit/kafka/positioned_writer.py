"""Write records to one cluster and learn the position each landed at (optionally in
transactions).

The follow-on copy of a re-pointed standby (drkit/offsets/follow_on.py) writes copies and then
the offset syncs that say where those copies are: it needs each copy's position, which only its
acknowledgement carries.  :class:`PositionedWriter` writes a batch, waits for every
acknowledgement and returns the positions in the batch's order - or raises, naming the first
failure, when any record was not acknowledged.  With a transactional id the batches between
:meth:`begin` and :meth:`commit` are one Kafka transaction (a transaction's records are
acknowledged, with their positions, before it commits); ``init`` fences an earlier producer of
the same id and completes its open transaction first, so what it wrote is settled (committed or
aborted) before anything reads the cluster.  Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drkit.errors import KafkaError
from drkit.kafka.clients import ClientSettings, ClusterEndpoint
from drkit.kafka.errors import translate
from drkit.kafka.flow_clients import TargetProducer
from drkit.kafka.io import serve_producer
from drkit.records import Record

TRANSACTION_TIMEOUT_MS = 60_000


class PositionedWriter:
    """One idempotent producer (transactional when given an id) on ``endpoint``."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        transactional_id: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        required: dict[str, Any] = {"acks": "all", "enable.idempotence": True}
        if transactional_id is not None:
            required["transactional.id"] = transactional_id
            required["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
            required["message.timeout.ms"] = int(timeout_s * 1000)
        self.endpoint = endpoint
        self.transactional = transactional_id is not None
        self.timeout_s = timeout_s
        self._producer = TargetProducer(endpoint, ClientSettings(required), self.transactional)

    def init(self) -> None:
        """Transactional: register the id (fencing an older producer of it and settling its
        open transaction).  Nothing otherwise."""
        if self.transactional:
            self._producer.init_transactions(self.timeout_s)

    def begin(self) -> None:
        if self.transactional:
            self._producer.begin_transaction()

    def commit(self) -> None:
        if self.transactional:
            self._producer.commit_transaction(self.timeout_s)

    def abort(self) -> None:
        """Abort the open transaction (errors swallowed: the coordinator aborts it at its
        timeout anyway)."""
        if self.transactional:
            self._producer.abort_transaction(10)

    def write(self, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
        """Write each record's key, value, headers and timestamp (its own topic, partition and
        offset are ignored) to ``topic``'s ``partition``, in order; the positions they landed at,
        in the same order, once every one is acknowledged.  KafkaError when any is not."""
        messages: list[Any] = [None] * len(records)
        failures: list[object] = []

        def delivered_at(index: int) -> Any:
            def delivered(error: object, message: object) -> None:
                # Inside poll/flush: plain bytecode only (drkit.kafka.io.produce_batch).
                if error is None:
                    messages[index] = message
                else:
                    failures.append(error)

            return delivered

        for index, record in enumerate(records):
            self._produce(topic, partition, record, delivered_at(index))
        left = serve_producer(self._producer.flush, self.timeout_s, topic)
        if failures:
            raise translate(failures[0], f"{self.endpoint.alias}: write to {topic}-{partition}")
        if left or any(message is None for message in messages):
            raise KafkaError(
                f"{self.endpoint.alias}: {topic}-{partition}: records not acknowledged within "
                f"{self.timeout_s:.0f}s"
            )
        return [int(message.offset()) for message in messages]

    def _produce(self, topic: str, partition: int, record: Record, callback: Any) -> None:
        while True:
            try:
                self._producer.produce(
                    topic,
                    record.value,
                    record.key,
                    partition,
                    on_delivery=callback,
                    timestamp=record.timestamp_ms or 0,
                    headers=list(record.headers) or None,
                )
                return
            except BufferError:  # the local queue is full: serve reports, then retry
                serve_producer(self._producer.poll, 0.05, topic)

    def close(self) -> None:
        """Wait briefly for what is still queued (nothing, after a write returned)."""
        self._producer.flush(1.0)
