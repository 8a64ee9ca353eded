"""A compacted topic of small JSON documents by key, on one cluster.

Writes are synchronous (acks=all, flushed, raising on failure) through one producer kept for
the object's life; reads tail the topic to its end and keep the latest document per key, with
its offset (an offset that grows tells a reader that the writer is alive, without comparing
anyone's clock).  Used for state that must be readable where the state store is not: the
flow-control channel (drkit.control.channel).  Not thread-safe.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer

from drkit.errors import KafkaError
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, make_producer
from drkit.kafka.errors import translate
from drkit.kafka.tailer import TopicTailer
from drkit.records import Headers

# ``sign(key, value)``: the headers to write with a record; ``accept(key, value, headers)``:
# whether a record read is one to keep (drkit.control.channel: its MAC verifies).
Sign = Callable[[bytes, bytes], list[tuple[str, str | bytes | None]]]
Accept = Callable[[bytes, bytes | None, Headers], bool]

COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


@dataclass(frozen=True)
class KeyedValue:
    value: dict[str, Any]
    offset: int


# One record per put, flushed before put returns: never two in flight, so a retry can neither
# reorder puts nor leave a stale value last - and a retried duplicate of the newest document is
# the same document.  Not idempotent for that reason: a fresh idempotent producer waits 0.5 s
# for its producer id before its first record (librdkafka 2.16), and a failover's
# stop_replication publishes its directive through a fresh one (measured: 0.50 s -> 0.002 s).
_PRODUCER = {
    "linger.ms": 0,
    "enable.idempotence": False,
    "max.in.flight.requests.per.connection": 1,
}


def encode_document(value: dict[str, Any]) -> bytes:
    """A document as written (compact JSON)."""
    return json.dumps(value, separators=(",", ":")).encode()


def keep_latest(
    records: Iterable[tuple[bytes | None, bytes | None, Headers, int]],
    accept: Accept | None,
    latest: dict[str, KeyedValue],
) -> None:
    """Fold records (key, value, headers, offset) read in order into ``latest``: the newest
    JSON document per key that ``accept`` takes (pure; shared with tests' in-memory topics)."""
    for key, raw, headers, offset in records:
        if key is None:
            continue
        if accept is not None and not accept(key, raw, headers):
            continue
        try:
            value = json.loads(raw or b"{}")
        except ValueError:
            continue  # not ours: never trusted, never fatal
        if isinstance(value, dict):
            latest[key.decode(errors="replace")] = KeyedValue(value, offset)


class KeyedTopicPort(Protocol):
    """What the control channel needs of a keyed topic (tests pass in-memory ones)."""

    def put(self, key: str, value: dict[str, Any], timeout_s: float = 10.0) -> None: ...

    def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]: ...

    def close(self) -> None: ...


class KeyedTopic:
    def __init__(
        self,
        endpoint: ClusterEndpoint,
        topic: str,
        replication_factor: int | None = None,
        *,
        sign: Sign | None = None,
        accept: Accept | None = None,
    ) -> None:
        """``sign``/``accept``: records are written with ``sign``'s headers, and a record
        ``accept`` refuses is never a key's latest document (the one before it stays)."""
        self.endpoint, self.topic = endpoint, topic
        self._sign, self._accept = sign, accept
        self.replication_factor = replication_factor
        self._producer: Producer | None = None
        self._tailer: TopicTailer | None = None
        self._latest: dict[str, KeyedValue] = {}
        self._created = False

    def ensure(self, timeout_s: float = 10.0) -> None:
        """Create the topic (one compacted partition) unless it exists."""
        if not self._created:
            KafkaAdmin(self.endpoint).create_topics(
                [TopicSpec(self.topic, 1, self.replication_factor, COMPACTED)], timeout_s
            )
            self._created = True

    def put(self, key: str, value: dict[str, Any], timeout_s: float = 10.0) -> None:
        """Write ``value`` under ``key`` and wait for the acknowledgement; KafkaError if not."""
        self.ensure(timeout_s)
        if self._producer is None:
            self._producer = make_producer(self.endpoint, _PRODUCER)
        failures: list[KafkaError] = []

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                failures.append(translate(error, f"produce to {self.topic}"))

        key_bytes, value_bytes = key.encode(), encode_document(value)
        headers = self._sign(key_bytes, value_bytes) if self._sign is not None else None
        try:
            self._producer.produce(
                self.topic,
                key=key_bytes,
                value=value_bytes,
                on_delivery=delivered,
                headers=headers,
            )
        except (BufferError, KafkaException) as err:
            raise KafkaError(f"{self.endpoint.alias}: produce to {self.topic}: {err}") from None
        remaining = self._producer.flush(timeout_s)
        if failures:
            raise failures[0]
        if remaining:
            raise KafkaError(
                f"{self.endpoint.alias}: {self.topic} did not acknowledge within {timeout_s:g}s"
            )

    def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]:
        """The newest document per key, read up to the topic's end (empty while it does not
        exist); KafkaError when the cluster does not answer."""
        if self._tailer is None:
            self._tailer = TopicTailer(self.endpoint, self.topic, missing_ok=True)
        keep_latest(
            ((r.key, r.value, r.headers, r.offset) for r in self._tailer.catch_up(timeout_s)),
            self._accept,
            self._latest,
        )
        return dict(self._latest)

    def close(self) -> None:
        if self._tailer is not None:
            self._tailer.close()
            self._tailer = None
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None
