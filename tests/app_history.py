"""An application's history across a move, recorded as it happens and checked Jepsen-style.

:mod:`tests.history` watches the protections (the pointer, each copy's fence).  This module
watches what the applications saw: an :class:`AppHistory` runs, beside a fault case,

* a **writer that follows the pointer** (it writes the application topic on whatever cluster
  the store's pointer names, as a redeployed application would) and a **stale writer** that
  never learns of the move (it keeps writing the home cluster, as a forgotten instance would) -
  every produce is recorded with its acknowledgement (cluster, partition, offset) or its error;
* a **reader that follows the pointer**: one consumer group member that consumes and commits on
  the pointer's cluster and, when the pointer moves, commits, leaves and joins the same group on
  the new cluster, where it resumes from the offsets drkit translated - every record it read is
  recorded;
* a **position sampler**: the group's committed offsets on every cluster, every ``interval_s``.

Checked **while the case runs** (each sample): no committed offset of the group moves backwards
on any cluster, and no write is acknowledged by the home cluster after one was acknowledged by
another (two writable primaries, seen from the clients - the ACL sampler of
:mod:`tests.history` sees the same from the brokers).  Checked **over the whole history** once
the case is quiet (as Jepsen's checkers do: they need the final reads): every acknowledged write
was read by the group (nothing lost below the fence, nothing skipped by the translation); and,
for exactly-once flows, no replica holds a record twice.  Re-reads are counted, never hidden.

Plain confluent-kafka clients and plain SQL throughout - none of drkit's adapter - so a defect
of drkit's own clients cannot hide itself.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka.admin import AdminClient
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.invariants import Cluster, end_offsets, values


@dataclass(frozen=True)
class Write:
    """One produce: acknowledged (``offset`` set) or refused (``error`` set)."""

    sent: float  # when it was handed to the client, seconds since the history started
    at: float  # when its outcome arrived (never before the broker's answer)
    writer: str  # "follower" or "stale"
    cluster: str
    value: bytes
    stretch: int  # which stretch of the pointer it was sent in (0, 1, ...: +1 per move)
    pointer: str  # where the pointer sent the applications then
    partition: int = -1
    offset: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Read:
    at: float
    cluster: str
    topic: str
    partition: int
    offset: int
    value: bytes


@dataclass
class AppHistory:
    """Records an application's writes, reads and group positions until stopped.

    ``topics`` names, per cluster alias, the topics the application reads there (its own topic
    and the replica of the other cluster's); it writes ``topics[alias][0]``.  ``home`` is where
    it runs before the pointer is ever set.
    """

    store_url: str
    clusters: Mapping[str, Cluster]
    topics: Mapping[str, tuple[str, ...]]
    home: str
    group: str
    interval_s: float = 0.05  # the writers' tick (each writes one record per tick)
    read_per_tick: int = 1  # the reader's records per 0.1 s (the writers: 10-20 per 0.1 s)
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)  # found while the case ran
    errors: list[str] = field(default_factory=list)  # samples missed (said, never fatal)
    positions: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _pause_writes: threading.Event = field(default_factory=threading.Event)
    _catch_up: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _started: float = 0.0
    _sequence: int = 0

    # -- life cycle --------------------------------------------------------------------------

    def __enter__(self) -> AppHistory:
        self._started = time.monotonic()
        self._engine = create_engine(self.store_url)
        for name, target in (("writers", self._write), ("reader", self._read),
                             ("positions", self._sample_positions)):  # fmt: skip
            thread = threading.Thread(target=self._guarded(target), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        self._engine.dispose()

    def stop_writing(self) -> None:
        """No more writes; the reader and the sampler go on (to reach the final reads)."""
        self._pause_writes.set()

    def now(self) -> float:
        return time.monotonic() - self._started

    def _guarded(self, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except Exception as err:  # a thread's end is said, never silent
                self.errors.append(
                    f"{threading.current_thread().name}: {type(err).__name__}: {err}"
                )

        return run

    def pointer(self) -> str:
        """The cluster the applications are sent to (the home cluster until a pointer is set)."""
        with self._engine.connect() as connection:
            try:
                row = connection.execute(
                    text("SELECT cluster FROM active_pointer WHERE name = 'default'")
                ).first()
            except OperationalError as err:
                if "no such table" in str(err):  # the store not made yet: no pointer
                    return self.home
                raise
        return str(row[0]) if row is not None else self.home

    # -- the writers -------------------------------------------------------------------------

    def _write(self) -> None:
        settings = {"acks": "all", "linger.ms": 0, "message.timeout.ms": 10000, "retries": 0}
        producers = {
            alias: Producer({"bootstrap.servers": c.bootstrap, **settings})
            for alias, c in self.clusters.items()
        }
        at, stretch = self.home, 0
        try:
            while not self._stop.is_set() and not self._pause_writes.is_set():
                try:
                    now_at = self.pointer()
                except Exception as err:  # the store briefly busy: the next tick writes
                    self.errors.append(f"pointer: {type(err).__name__}: {err}")
                    self._stop.wait(self.interval_s)
                    continue
                if now_at != at:
                    at, stretch = now_at, stretch + 1
                self._produce(producers[at], "follower", at, stretch, at)
                self._produce(producers[self.home], "stale", self.home, stretch, at)
                for producer in producers.values():
                    producer.poll(0)
                self._check_one_primary()
                self._stop.wait(self.interval_s)
        finally:
            for producer in producers.values():
                producer.flush(15)
            self._check_one_primary()

    def _produce(
        self, producer: Producer, writer: str, alias: str, stretch: int, pointer: str
    ) -> None:
        self._sequence += 1
        value = f"{writer}-{self._sequence}".encode()
        sent = self.now()

        def delivered(err: KafkaError | None, message: Message) -> None:
            if err is not None:
                outcome = Write(sent, self.now(), writer, alias, value, stretch, pointer,
                                error=err.name())  # fmt: skip
            else:
                outcome = Write(sent, self.now(), writer, alias, value, stretch, pointer,
                                message.partition() or 0, message.offset())  # fmt: skip
            with self._lock:
                self.writes.append(outcome)

        try:
            producer.produce(self.topics[alias][0], value=value, on_delivery=delivered)
        except KafkaException as err:  # refused at once (the client remembers a denied topic)
            refused = Write(sent, self.now(), writer, alias, value, stretch, pointer,
                            error=err.args[0].name())  # fmt: skip
            with self._lock:
                self.writes.append(refused)

    def acknowledged(self) -> list[Write]:
        with self._lock:
            return [w for w in self.writes if w.offset is not None]

    def _check_one_primary(self) -> None:
        """Two writable primaries, as the clients see it: within one stretch of the pointer,
        a cluster X acknowledged a write, then another cluster Y acknowledged one sent after
        that, then X again one sent after Y's - both took writes at once.  Exact, not a guess
        from timing: each acknowledgement was received before the next write was sent.

        One cluster giving way to another in a stretch (the old primary fenced, the new one
        opened just before the pointer moves) is no violation, and neither is the old primary
        taking writes again after a move back (a new stretch)."""
        by_stretch: dict[int, list[Write]] = {}
        for w in self.acknowledged():
            by_stretch.setdefault(w.stretch, []).append(w)
        for acks in by_stretch.values():
            opened: dict[str, float] = {}  # each cluster's first acknowledgement
            last: dict[str, float] = {}  # when it was sent the last write it acknowledged
            for w in acks:
                opened[w.cluster] = min(w.at, opened.get(w.cluster, w.at))
                last[w.cluster] = max(w.sent, last.get(w.cluster, w.sent))
            if len(opened) < 2:
                continue
            for y in acks:
                for x in opened:
                    if x != y.cluster and opened[x] < y.sent and y.at < last[x]:
                        message = (
                            f"{y.cluster} acknowledged {y.value!r} ({y.partition}:{y.offset}, "
                            f"sent at {y.sent:.2f}s) between writes {x} acknowledged (from "
                            f"{opened[x]:.2f}s to one sent at {last[x]:.2f}s; pointer: {y.pointer})"
                        )
                        if message not in self.violations:
                            self.violations.append(message)

    # -- the reader --------------------------------------------------------------------------

    def _consumer(self, alias: str) -> Consumer:
        consumer = Consumer({
            "bootstrap.servers": self.clusters[alias].bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        consumer.subscribe(list(self.topics[alias]))
        return consumer

    def _read(self) -> None:
        alias = self.home
        consumer = self._consumer(alias)
        try:
            while not self._stop.is_set():
                # Slower than the writers until the final reads: the group always has a backlog
                # when it is moved, so where it resumes is the translation's doing.
                batch = 500 if self._catch_up.is_set() else self.read_per_tick
                for message in consumer.consume(batch, 0.2):
                    if message.error() is None:
                        with self._lock:
                            self.reads.append(Read(self.now(), alias, message.topic() or "",
                                                   message.partition() or 0, message.offset() or 0,
                                                   message.value() or b""))  # fmt: skip
                if self.reads:
                    try:
                        consumer.commit(asynchronous=False)
                    except Exception as err:  # nothing new to commit, or a rebalance
                        if "NO_OFFSET" not in str(err):
                            self.errors.append(f"commit on {alias}: {err}")
                try:
                    now_at = self.pointer()
                except Exception as err:
                    self.errors.append(f"pointer: {type(err).__name__}: {err}")
                    continue
                if now_at != alias:  # the application is moved: leave, join on the new cluster
                    consumer.close()
                    alias = now_at
                    consumer = self._consumer(alias)
                if not self._catch_up.is_set():
                    self._stop.wait(0.1)
        finally:
            consumer.close()

    # -- the positions -----------------------------------------------------------------------

    def _sample_positions(self) -> None:
        admins = {alias: AdminClient({"bootstrap.servers": c.bootstrap})
                  for alias, c in self.clusters.items()}  # fmt: skip
        while not self._stop.is_set():
            for alias, admin in admins.items():
                try:
                    self._sample(alias, admin)
                except Exception as err:  # a missed sample is said
                    self.errors.append(f"positions on {alias}: {type(err).__name__}: {err}")
            self._stop.wait(self.interval_s * 4)

    def _sample(self, alias: str, admin: AdminClient) -> None:
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group)])
        listed = future[self.group].result(10)
        for tp in listed.topic_partitions or []:
            if tp.offset < 0:
                continue
            key = (alias, tp.topic, tp.partition)
            before = self.positions.get(key)
            if before is not None and tp.offset < before:
                self.violations.append(
                    f"at {self.now():.2f}s {self.group}'s committed offset of "
                    f"{tp.topic}:{tp.partition} on {alias} moved back from {before} to {tp.offset}"
                )
            self.positions[key] = tp.offset

    # -- the whole history -------------------------------------------------------------------

    def unread(self) -> list[Write]:
        """Acknowledged writes the group never read: lost below the fence, or skipped."""
        with self._lock:
            seen = {r.value for r in self.reads}
        return [w for w in self.acknowledged() if w.value not in seen]

    def rereads(self) -> dict[str, int]:
        """Records the group read again, by the cluster it read them again on (at-least-once
        across a move: counted, never hidden)."""
        seen: set[bytes] = set()
        again: Counter[str] = Counter()
        with self._lock:
            for read in self.reads:
                if read.value in seen:
                    again[read.cluster] += 1
                seen.add(read.value)
        return dict(again)

    def rereads_outside(self, moves: list[tuple[float, float]]) -> list[str]:
        """Records read again although their first read lay outside every move (start, end):
        only what the reader took on the old cluster while a move ran - after the translation,
        before it saw the pointer move - may be read again; all else is a translation's
        re-read."""
        first: dict[bytes, Read] = {}
        out = []
        with self._lock:
            reads = list(self.reads)
        for read in reads:
            earlier = first.setdefault(read.value, read)
            if earlier is not read and not any(a <= earlier.at <= b for a, b in moves):
                out.append(f"{read.value!r} read on {earlier.cluster} at {earlier.at:.2f}s "
                           f"and again on {read.cluster} at {read.at:.2f}s")  # fmt: skip
        return out

    def wait_all_read(self, timeout_s: float) -> list[Write]:
        """Wait until the group read every acknowledged write; returns what it never read.
        The reader reads at full speed from here on."""
        self._catch_up.set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.unread():
                return []
            time.sleep(0.5)
        return self.unread()

    def read_slowly(self) -> None:
        """Back to the reader's slow pace (after :meth:`wait_all_read`), so a backlog builds."""
        self._catch_up.clear()

    def summary(self) -> str:
        acks = Counter(w.cluster + "/" + w.writer for w in self.acknowledged())
        refused = Counter(f"{w.cluster}/{w.writer}:{w.error}" for w in self.writes if w.error)
        return (f"acknowledged {dict(acks)}, refused {dict(refused)}, read {len(self.reads)}, "
                f"re-read {self.rereads()}, errors {self.errors[:5]}")  # fmt: skip


def duplicates(cluster: Cluster, topic: str, partitions: int) -> dict[bytes, int]:
    """Values a topic holds more than once (read_committed, from the beginning)."""
    counts = Counter(values(cluster, topic, end_offsets(cluster, topic, partitions)))
    return {value: n for value, n in counts.items() if n > 1}
