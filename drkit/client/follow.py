"""Applications that follow the active pointer: a watcher of the pointer topic on every cluster,
and a producer and a consumer that switch clusters when the pointer moves - no restart.

The protocol (docs/client-pointer.md): the failover engine writes the signed pointer record
(drkit.client.pointer_record) to ``drkit-pointer.internal`` on every cluster that answers;
:class:`PointerWatcher` reads that topic on every cluster it knows, keeps the valid record with
the highest epoch and never goes back to a lower one.  :class:`FollowingConsumer` and
:class:`FollowingProducer` check the watcher at every call and, when the epoch rose, leave the
old cluster and start on the one the pointer names:

* the consumer joins the *same group* there and so resumes at the group's committed offsets on
  that cluster - the offsets drkit's failover translated and committed before it moved the
  pointer (``commit_group_offsets`` runs before ``move_pointer``);
* the producer flushes what it still holds for the old cluster (bounded, in the background:
  what a dead cluster never acknowledges fails through the application's delivery callbacks)
  and writes to the new one.

Closing the old client never holds the switch: it runs in a daemon thread, bounded by
``close_s`` (librdkafka waits for ever on a dead cluster's group coordinator).  Every call is
bounded.  Applications using this module import confluent-kafka, ``drkit.signing`` and the
pointer topic's name - nothing else of drkit's.

Threading: a watcher runs one daemon thread per cluster and may be shared; a following client
is used from one application thread, like the confluent-kafka client it wraps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The client library applications import: confluent-kafka directly, not drkit's adapter
# (drkit/kafka/ builds clients from drkit's config model, which applications do not have).
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as RdTP

from drkit.client.pointer_record import DEFAULT_NAME, PointerRecord, PointerSigner, newer
from drkit.topology.internal_topics import POINTER_TOPIC

log = logging.getLogger(__name__)

# librdkafka settings per cluster alias: at least ``bootstrap.servers`` (with security).
ClusterSettings = Mapping[str, Mapping[str, Any]]

# A poll on the current cluster is cut into slices this long, the pointer checked between:
# a consumer blocked on a dead cluster notices a move within one slice.
SLICE_S = 0.1
_WATCH_POLL_S = 0.1
# How often the watcher's consumers refresh metadata: the pointer topic does not exist before
# the first move, and is found within this once created.
_METADATA_REFRESH_MS = 1000


@dataclass(frozen=True)
class Switch:
    """One move a following client made: from ``old`` (None: it was on no cluster) to
    ``record.cluster``."""

    old: str | None
    record: PointerRecord

    @property
    def new(self) -> str:
        return self.record.cluster


class PointerWatcher:
    """The pointer as every known cluster's pointer topic holds it: the valid record with the
    highest epoch read anywhere (drkit.client.pointer_record.newest), never a lower one.

    ``clusters``: librdkafka settings per cluster alias; ``key``: the pointer key (docs/
    client-pointer.md says where an operator gets it) - records whose signature fails are
    ignored and counted (:attr:`rejected`).  A cluster that is down is retried by librdkafka
    on its own; the others keep being read."""

    def __init__(
        self,
        clusters: ClusterSettings,
        key: bytes,
        *,
        name: str = DEFAULT_NAME,
        topic: str = POINTER_TOPIC,
    ) -> None:
        if not clusters:
            raise ValueError("a pointer watcher needs at least one cluster")
        self.clusters = {alias: dict(settings) for alias, settings in clusters.items()}
        self.topic = topic
        self._signer = PointerSigner(key, name)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._current: PointerRecord | None = None
        self._rejected = 0
        self._caught_up: set[str] = set()
        self._positions: dict[str, int] = {}  # cluster -> the offset after the last record read
        self._listeners: list[Callable[[PointerRecord], object]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._watch, args=(alias,), daemon=True, name=f"drkit-pointer-watch-{alias}"
            )
            for alias in self.clusters
        ]

    # -- what it knows --------------------------------------------------------------------

    @property
    def current(self) -> PointerRecord | None:
        """The pointer: the highest epoch read so far (None: no cluster holds one yet)."""
        with self._lock:
            return self._current

    @property
    def rejected(self) -> int:
        """Records of the pointer topic ignored so far: signature missing or wrong, or not a
        pointer record."""
        with self._lock:
            return self._rejected

    def position(self, cluster: str) -> int:
        """The offset after the last record read on ``cluster``'s pointer topic (0: none)."""
        with self._lock:
            return self._positions.get(cluster, 0)

    def listen(self, callback: Callable[[PointerRecord], object]) -> None:
        """Call ``callback(record)`` (on a watcher thread) each time the epoch rises."""
        with self._lock:
            self._listeners.append(callback)

    def wait_above(self, epoch: int, timeout_s: float) -> PointerRecord | None:
        """The pointer once its epoch is above ``epoch``, or None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._current is None or self._current.epoch <= epoch:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._current

    # -- its life -------------------------------------------------------------------------

    def start(self, wait_s: float = 5.0) -> PointerWatcher:
        """Start reading every cluster; wait up to ``wait_s`` until each has been read to its
        end once (a cluster that does not answer is not waited for beyond it)."""
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + wait_s
        with self._changed:
            while len(self._caught_up) < len(self.clusters):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop every reader; bounded by ``timeout_s`` in all."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> PointerWatcher:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the readers ----------------------------------------------------------------------

    def offer(self, cluster: str, record: PointerRecord) -> bool:
        """Take a valid record read on ``cluster``; whether the pointer moved (the epoch rule:
        only a higher epoch moves it)."""
        with self._changed:
            if not newer(self._current, record):
                return False
            self._current = record
            listeners = list(self._listeners)
            self._changed.notify_all()
        log.info(
            "pointer moved", extra={"cluster": record.cluster, "epoch": record.epoch, "on": cluster}
        )
        for listener in listeners:
            try:
                listener(record)
            except Exception:  # an application's callback never stops the watcher
                log.exception("pointer listener failed")
        return True

    def _read(self, cluster: str, message: Message) -> None:
        with self._lock:
            self._positions[cluster] = (message.offset() or 0) + 1
        headers = message.headers()
        pairs = list(headers.items()) if isinstance(headers, dict) else headers or []
        record = self._signer.read(
            message.key(), message.value(),
            [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs],
        )  # fmt: skip
        if record is None:
            with self._lock:
                self._rejected += 1
            log.warning("pointer record ignored: not signed with the pointer key",
                        extra={"on": cluster, "offset": message.offset()})  # fmt: skip
            return
        self.offer(cluster, record)

    def _caught(self, cluster: str) -> None:
        with self._changed:
            if cluster not in self._caught_up:
                self._caught_up.add(cluster)
                self._changed.notify_all()

    def _watch(self, cluster: str) -> None:
        settings = {
            **self.clusters[cluster],
            # No group membership and no commits: the partition is assigned and read from its
            # start every time (one small compacted partition).
            "group.id": "drkit-pointer-watch",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "topic.metadata.refresh.interval.ms": _METADATA_REFRESH_MS,
        }
        try:
            consumer = Consumer(settings)
            consumer.assign([RdTP(self.topic, 0, OFFSET_BEGINNING)])
        except Exception:  # settings librdkafka refuses: this cluster is never read
            log.exception("pointer watcher cannot read %s", cluster)
            self._caught(cluster)
            return
        try:
            while not self._stop.is_set():
                message = consumer.poll(_WATCH_POLL_S)
                if message is None:
                    continue
                error = message.error()
                if error is None:
                    self._read(cluster, message)
                elif error.code() in (KafkaError._PARTITION_EOF,
                                      KafkaError.UNKNOWN_TOPIC_OR_PART,
                                      KafkaError._UNKNOWN_TOPIC):  # fmt: skip
                    self._caught(cluster)  # read to its end (or nothing there yet)
        finally:
            _close_bounded(consumer.close, 2.0)


def _close_bounded(close: Callable[[], object], timeout_s: float) -> threading.Thread:
    """Run ``close`` in a daemon thread and wait up to ``timeout_s``: a client of a dead
    cluster is abandoned, never waited for."""
    closer = threading.Thread(target=close, daemon=True, name="drkit-client-close")
    closer.start()
    closer.join(timeout_s)
    return closer


class _Following:
    """What both following clients share: the watcher, the cluster and epoch they are on,
    the settings of each cluster, the switch callback, bounded background closes."""

    def __init__(
        self,
        watcher: PointerWatcher,
        *,
        initial: str | None,
        clusters: ClusterSettings | None,
        on_switch: Callable[[Switch], None] | None,
        close_s: float,
    ) -> None:
        self.watcher = watcher
        self.clusters = {a: dict(s) for a, s in (clusters or watcher.clusters).items()}
        self.on_switch = on_switch
        self.close_s = close_s
        self.cluster: str | None = None
        self.epoch = 0
        self.switches: list[Switch] = []
        self._closing: list[threading.Thread] = []
        self._initial = initial

    def settings_of(self, record: PointerRecord | None, cluster: str) -> dict[str, Any]:
        """``cluster``'s librdkafka settings: as given, else the record's bootstrap servers
        with the settings given for the others (security is the same estate-wide)."""
        if cluster in self.clusters:
            return dict(self.clusters[cluster])
        bootstrap = record.bootstrap(cluster) if record is not None else None
        if bootstrap is None:
            raise ValueError(f"no bootstrap servers known for cluster {cluster!r}")
        common = next(iter(self.clusters.values()), {})
        return {**common, "bootstrap.servers": bootstrap}

    def due(self) -> PointerRecord | None:
        """The pointer when it moved past the epoch this client is on to another cluster (the
        switch to make); a newer epoch naming the cluster the client is on only raises its
        epoch (a move it needs no switch for)."""
        record = self.watcher.current
        if record is None or record.epoch <= self.epoch:
            return None
        if record.cluster == self.cluster:
            self.epoch = record.epoch
            return None
        return record

    def start_cluster(self) -> str | None:
        """The cluster to start on: the pointer's when there is one, else ``initial``."""
        record = self.watcher.current
        if record is not None:
            self.epoch = record.epoch
            return record.cluster
        return self._initial

    def retire(self, close: Callable[[], object]) -> None:
        """Close an old client in the background (bounded by ``close_s``)."""
        closer = threading.Thread(
            target=_close_bounded, args=(close, self.close_s), daemon=True,
            name="drkit-client-retire",
        )  # fmt: skip
        closer.start()
        self._closing.append(closer)

    def switched(self, old: str | None, record: PointerRecord) -> None:
        self.cluster, self.epoch = record.cluster, record.epoch
        switch = Switch(old, record)
        self.switches.append(switch)
        log.info("client switched", extra={"from": old, "to": record.cluster,
                                           "epoch": record.epoch})  # fmt: skip
        if self.on_switch is not None:
            self.on_switch(switch)

    def await_retired(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for closer in self._closing:
            closer.join(max(0.0, deadline - time.monotonic()))


class FollowingConsumer(_Following):
    """A consumer-group member on the cluster the pointer names.

    ``topics(cluster)``: what to subscribe to on each cluster (a replica may be named apart
    from its source topic: ``dc1.orders`` on dc2 under the prefix policy).  ``config``: the
    consumer's own settings (``group.id`` is ``group``; ``auto.offset.reset`` defaults to
    ``earliest``: a partition without a committed offset is read from its start - re-reads,
    never a skip).  ``initial``: the cluster to use before any pointer record is read (None:
    wait for one).  On a move it closes the old consumer in the background and joins the same
    group on the new cluster, resuming at the offsets committed there; ``on_switch`` is called
    (on the caller's thread) once the new consumer is subscribed."""

    def __init__(
        self,
        watcher: PointerWatcher,
        group: str,
        topics: Callable[[str], Sequence[str]],
        *,
        config: Mapping[str, Any] | None = None,
        initial: str | None = None,
        clusters: ClusterSettings | None = None,
        on_switch: Callable[[Switch], None] | None = None,
        close_s: float = 5.0,
    ) -> None:
        super().__init__(
            watcher, initial=initial, clusters=clusters, on_switch=on_switch, close_s=close_s
        )
        self.group, self.topics = group, topics
        self.config = {"auto.offset.reset": "earliest", **(config or {})}
        self._consumer: Consumer | None = None
        start = self.start_cluster()
        if start is not None:
            self._consumer = self._join(self.watcher.current, start)
            self.cluster = start

    @property
    def consumer(self) -> Consumer | None:
        """The confluent-kafka consumer in use (None: no pointer yet and no initial cluster)."""
        return self._consumer

    def _join(self, record: PointerRecord | None, cluster: str) -> Consumer:
        consumer = Consumer(
            {**self.settings_of(record, cluster), **self.config, "group.id": self.group}
        )
        consumer.subscribe(list(self.topics(cluster)))
        return consumer

    def follow(self) -> bool:
        """Switch now if the pointer moved; whether it did."""
        record = self.due()
        if record is None:
            return False
        old, old_cluster = self._consumer, self.cluster
        self._consumer = None
        if old is not None:
            self.retire(old.close)
        self._consumer = self._join(record, record.cluster)
        self.switched(old_cluster, record)
        return True

    def consume(self, num_messages: int, timeout_s: float) -> list[Message]:
        """Up to ``num_messages`` from the current cluster within ``timeout_s`` (the pointer
        checked every :data:`SLICE_S`; records of a cluster left are never returned after
        the switch)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.follow()
            left = deadline - time.monotonic()
            consumer = self._consumer
            if consumer is None:
                self.watcher.wait_above(self.epoch, max(0.0, min(left, SLICE_S)))
                if time.monotonic() >= deadline and self.due() is None:
                    return []
                continue
            messages = consumer.consume(num_messages, max(0.0, min(left, SLICE_S)))
            if messages or time.monotonic() >= deadline:
                return messages

    def poll(self, timeout_s: float) -> Message | None:
        """One message (or None within ``timeout_s``), as :meth:`consume`."""
        found = self.consume(1, timeout_s)
        return found[0] if found else None

    def commit_messages(self, messages: Sequence[Message]) -> None:
        """Commit, synchronously, the position after the last of ``messages`` in each of their
        partitions - what the application processed of one :meth:`consume`; raises
        confluent-kafka's KafkaException when the group coordinator refused it."""
        positions: dict[tuple[str, int], int] = {}
        for message in messages:
            where = (message.topic() or "", message.partition() or 0)
            positions[where] = max(positions.get(where, 0), (message.offset() or 0) + 1)
        if not positions:
            return
        if self._consumer is None:
            raise RuntimeError("not on any cluster yet: nothing to commit")
        request = [RdTP(t, p, o) for (t, p), o in sorted(positions.items())]
        for answer in self._consumer.commit(offsets=request, asynchronous=False) or []:
            if answer.error is not None:
                raise KafkaException(answer.error)

    def commit(self, **kwargs: Any) -> Any:
        """The current consumer's ``commit`` (confluent-kafka's arguments); raises
        RuntimeError before the consumer is on any cluster."""
        if self._consumer is None:
            raise RuntimeError("not on any cluster yet: nothing to commit")
        return self._consumer.commit(**kwargs)

    def close(self) -> None:
        """Leave the group; bounded by ``close_s`` (old consumers' closes included)."""
        if self._consumer is not None:
            _close_bounded(self._consumer.close, self.close_s)
            self._consumer = None
        self.await_retired(self.close_s)


class FollowingProducer(_Following):
    """A producer on the cluster the pointer names (not transactional: a transaction cannot
    move between clusters).

    ``config``: the producer's own settings.  On a move the old producer's queue is flushed in
    the background for at most ``close_s`` - what the old cluster does not acknowledge fails
    through the delivery callbacks - and new records go to the new cluster."""

    def __init__(
        self,
        watcher: PointerWatcher,
        *,
        config: Mapping[str, Any] | None = None,
        initial: str | None = None,
        clusters: ClusterSettings | None = None,
        on_switch: Callable[[Switch], None] | None = None,
        close_s: float = 5.0,
    ) -> None:
        super().__init__(
            watcher, initial=initial, clusters=clusters, on_switch=on_switch, close_s=close_s
        )
        if config and config.get("transactional.id"):
            raise ValueError("a following producer is not transactional")
        self.config = dict(config or {})
        self._producer: Producer | None = None
        start = self.start_cluster()
        if start is not None:
            self._producer = Producer({**self.settings_of(self.watcher.current, start),
                                       **self.config})  # fmt: skip
            self.cluster = start

    @property
    def producer(self) -> Producer | None:
        return self._producer

    def follow(self) -> bool:
        """Switch now if the pointer moved; whether it did."""
        record = self.due()
        if record is None:
            return False
        old, old_cluster = self._producer, self.cluster
        if old is not None:
            # The old producer's undelivered records are flushed (or fail) in the background.
            self.retire(lambda: old.flush(self.close_s))
        self._producer = Producer({**self.settings_of(record, record.cluster), **self.config})
        self.switched(old_cluster, record)
        return True

    def _current(self, timeout_s: float) -> Producer:
        deadline = time.monotonic() + timeout_s
        while True:
            self.follow()
            if self._producer is not None:
                return self._producer
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no pointer record read yet and no initial cluster")
            self.watcher.wait_above(self.epoch, min(left, SLICE_S))

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                wait_s: float = 5.0, **kwargs: Any) -> None:  # fmt: skip
        """confluent-kafka's ``produce`` on the current cluster (``wait_s``: how long to wait
        for a first pointer record when there is no initial cluster)."""
        self._current(wait_s).produce(topic, value=value, key=key, **kwargs)

    def poll(self, timeout_s: float = 0.0) -> int:
        """Serve delivery callbacks of the current producer."""
        self.follow()
        return self._producer.poll(timeout_s) if self._producer is not None else 0

    def flush(self, timeout_s: float) -> int:
        """Flush the current producer; how many records are still queued."""
        self.follow()
        return self._producer.flush(timeout_s) if self._producer is not None else 0

    def close(self) -> None:
        """Flush what is queued, bounded by ``close_s`` (old producers' flushes included)."""
        if self._producer is not None:
            producer = self._producer
            _close_bounded(lambda: producer.flush(self.close_s), self.close_s)
            self._producer = None
        self.await_retired(self.close_s)
