"""Read a (small, bookkeeping) topic up to its end, then keep catching up incrementally.

Used for drkit's own state topics: progress, offset syncs, checkpoints, heartbeats.  ``catch_up``
returns every record appended since the previous call and stops at the end of each partition
(the last stable offset under read_committed), so a caller sees a consistent prefix.

A topic that is missing, or whose metadata carries an error, is an error
(:func:`readable_partitions`): reading it as "nothing stored" would make a worker restart every
partition from the source's beginning, or a translation forget its map.  Callers for which
absence is a normal state (checkpoints not written yet) opt in with ``missing_ok=True``; even
they get an error when a topic they already read disappears.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition as RdTP

from drkit.errors import FatalKafkaError, RetriableKafkaError, Stopped
from drkit.kafka.clients import ClusterEndpoint, make_consumer
from drkit.kafka.errors import error_code_name, is_retriable, translate
from drkit.kafka.io import to_record
from drkit.records import Headers, Record

_MISSING = "UNKNOWN_TOPIC_OR_PART"

T = TypeVar("T")
# How often a catch-up under a stop event looks at it while the cluster keeps it waiting.
STOP_CHECK_S = 0.5
# A record as (key, value, headers) - not drkit.kafka.io.Payload, which is (key, value).
RawRecord = tuple[bytes | None, bytes | None, Headers]


def _raw(message: Any) -> RawRecord:
    return message.key(), message.value(), tuple(message.headers() or ())


@dataclass(frozen=True)
class TopicMetadata:
    """What one metadata answer said about one topic (plain values, for the pure decision)."""

    partitions: tuple[int, ...]
    error: str | None = None  # librdkafka's error name, e.g. "LEADER_NOT_AVAILABLE"
    retriable: bool = True

    @classmethod
    def of(cls, answer: Any, topic: str) -> TopicMetadata | None:
        """From a ``confluent_kafka`` ClusterMetadata; None when the topic is not in it."""
        found = answer.topics.get(topic)
        if found is None:
            return None
        error = found.error
        return cls(
            tuple(sorted(found.partitions)),
            error_code_name(error) if error is not None else None,
            is_retriable(error) if error is not None else True,
        )


def readable_partitions(
    answer: TopicMetadata | None, topic: str, cluster: str, *, missing_ok: bool
) -> tuple[int, ...]:
    """The partitions to read, or an error naming ``topic`` and ``cluster`` (pure).

    * absent (no entry, or ``UNKNOWN_TOPIC_OR_PART``): ``()`` when ``missing_ok``, else a
      RetriableKafkaError (it may be being created);
    * any other metadata error: RetriableKafkaError or FatalKafkaError by the error's kind,
      whatever ``missing_ok`` says - the topic exists and cannot be read;
    * no partitions without an error: RetriableKafkaError (metadata not settled).
    """
    if answer is None or answer.error == _MISSING:
        if missing_ok:
            return ()
        raise RetriableKafkaError(f"{cluster}: topic {topic} does not exist")
    if answer.error is not None:
        kind = RetriableKafkaError if answer.retriable else FatalKafkaError
        raise kind(f"{cluster}: metadata of topic {topic} has error {answer.error}")
    if not answer.partitions:
        raise RetriableKafkaError(f"{cluster}: topic {topic} has no partitions in its metadata")
    return answer.partitions


class TopicTailer:
    """Incremental reader of every partition of one topic.

    Not thread-safe.  Partitions added to the topic later are picked up on the next call.
    """

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        topic: str,
        isolation: str = "read_committed",
        *,
        missing_ok: bool = False,
        start: Mapping[int, int] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """``start``: where to begin per partition (partitions not in it: their beginning);
        ``stop``: the owner's stop event - a catch-up under way when it is set raises
        :class:`~drkit.errors.Stopped` within a fraction of a second, however long the cluster
        takes to answer (a source that died mid-round must not hold a shutdown); one begun
        after it was set runs as any other (a checkpoint worker's final round)."""
        self.endpoint = endpoint
        self.stop = stop
        # The stop event the catch-up under way watches: None once the stop was set before it
        # began - like the admin's requests, a catch-up after the stop (a worker's final round)
        # runs as any other.
        self._watching: threading.Event | None = None
        self.topic = topic
        self.missing_ok = missing_ok
        self._consumer: Consumer = make_consumer(
            endpoint,
            f"drkit-tailer-{uuid.uuid4().hex[:12]}",
            {
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "enable.auto.offset.store": False,
            },
        )
        # Next offset to read per partition.  Every call re-assigns at these positions because
        # librdkafka emits PARTITION_EOF only once per end position: a fresh assignment resets
        # that, so an unchanged partition reports its end again instead of hanging.
        self._next: dict[int, int] = dict(start or {})

    def _assign(self, timeout_s: float) -> None:
        try:
            metadata = self._metadata(timeout_s)
        except KafkaException as err:
            raise translate(err, f"{self.endpoint.alias}: metadata of topic {self.topic}") from None
        partitions = readable_partitions(
            TopicMetadata.of(metadata, self.topic),
            self.topic,
            self.endpoint.alias,
            # A topic that was read before and is gone now was deleted: never "absent".
            missing_ok=self.missing_ok and not self._next,
        )
        if not partitions:
            return
        for partition in partitions:
            self._next.setdefault(partition, OFFSET_BEGINNING)
        self._consumer.assign([RdTP(self.topic, p, offset) for p, offset in self._next.items()])

    def _metadata(self, timeout_s: float) -> Any:
        """The topic's metadata; under a stop event asked in slices of at most
        :data:`STOP_CHECK_S` - librdkafka's call cannot be interrupted, and a cluster that went
        away makes it wait its whole timeout - so a stop is seen between two."""
        if self._watching is None:
            return self._consumer.list_topics(self.topic, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_stop()
            left = deadline - time.monotonic()
            try:
                return self._consumer.list_topics(self.topic, timeout=min(left, STOP_CHECK_S))
            except KafkaException:
                if time.monotonic() + 0.01 >= deadline:
                    raise  # the whole timeout is spent: the cluster's answer (or its silence)

    def _check_stop(self) -> None:
        if self._watching is not None and self._watching.is_set():
            raise Stopped(f"{self.endpoint.alias}: reading {self.topic} given up: stopping")

    def catch_up(self, timeout_s: float = 30.0) -> Iterator[Record]:
        """Yield records appended since the last call, up to the end of every partition.

        Raises KafkaError when the topic is missing (unless ``missing_ok``) or unreadable.
        """
        return self._catch_up(timeout_s, to_record)

    def catch_up_payloads(self, timeout_s: float = 30.0) -> Iterator[RawRecord]:
        """:meth:`catch_up` as ``(key, value, headers)`` only, for readers that decode every
        record of a large topic (500,000 checkpoints for one failover plan at 10,000 groups):
        no :class:`Record` is built for them."""
        return self._catch_up(timeout_s, _raw)

    def _catch_up(self, timeout_s: float, convert: Callable[[Any], T]) -> Iterator[T]:
        stop = self.stop
        self._watching = stop if stop is not None and not stop.is_set() else None
        self._assign(min(timeout_s, 10.0))
        if not self._next:
            return
        try:
            yield from self._read_to_end(timeout_s, convert)
        finally:
            # An assigned consumer fetches in the background for ever, even at the end of an
            # idle topic (every fetch.wait.max.ms, 10 ms here): one idle replicator's tailers
            # cost its target broker ~11 CPU-s a minute.  The next call assigns again anyway.
            with contextlib.suppress(KafkaException, RuntimeError):
                self._consumer.unassign()

    def _read_to_end(self, timeout_s: float, convert: Callable[[Any], T]) -> Iterator[T]:
        pending = set(self._next)
        deadline = time.monotonic() + timeout_s
        while pending:
            self._check_stop()
            if time.monotonic() > deadline:
                raise RetriableKafkaError(
                    f"{self.endpoint.alias}: reading {self.topic} did not reach its end "
                    f"within {timeout_s:.0f}s"
                )
            # poll() returns as soon as one event is there; consume() would wait out its
            # timeout to fill a batch, which made every catch-up of an idle topic take 0.2 s.
            first = self._consumer.poll(0.2)
            if first is None:
                continue
            for message in [first, *self._consumer.consume(10000, 0)]:
                error = message.error()
                partition, offset = message.partition() or 0, message.offset() or 0
                if error is not None:
                    if error.code() == RdKafkaError._PARTITION_EOF:
                        pending.discard(partition)
                        self._next[partition] = offset
                        continue
                    raise translate(error, f"{self.endpoint.alias}: read {self.topic}")
                self._next[partition] = offset + 1
                yield convert(message)

    def close(self) -> None:
        self._consumer.close()
