"""The drill's applications: writers at a steady rate, consumer groups at their own speed.

Writers number their records (``seq`` in the value), so every record can be recognised on
either cluster without trusting drkit's own headers.  A group member processes a batch, then
commits it synchronously, and keeps a ledger of what it processed: the recount of skipped and
re-read records (``recount.py``) is made from that ledger and the records themselves.

Each runs in a thread until stopped; errors (a dead cluster, a fence) are counted, never
raised: an application keeps trying, and the drill watches what it achieves.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from drkit.client.follow import FollowingConsumer, Switch
from drkit.drills.numbered import Processed, decode_seq, encode_value
from drkit.drills.scenario import GroupLoad, TopicLoad
from drkit.drills.timeline import Timeline
from drkit.errors import KafkaError
from drkit.kafka import ClusterEndpoint
from drkit.kafka.apps import Acked, AppConsumer, AppProducer
from drkit.kafka.io import to_record
from drkit.records import Record

log = logging.getLogger(__name__)

TICK_S = 0.1
# A healthy client stops within a few seconds (a consumer's close is bounded at 5 s).
STOP_WAIT_S = 10.0


@dataclass
class WriterStats:
    # (wall time the write was sent, record): a transaction produced before a fence may commit
    # after it (EndTxn is not a topic write) - its records were accepted before the fence.
    acked: list[tuple[float, Acked]] = field(default_factory=list)
    aborted: int = 0
    refused: int = 0
    first_refusal: str | None = None


class App(threading.Thread):
    """One application client in its own (daemon) thread, until asked to stop.

    A client still stuck on a dead cluster when the wait is over is :attr:`abandoned`: a
    consumer's ledger takes no commit that completes after that (once the cluster is back) -
    what the drill counted when it stopped the applications is final.  A writer's acks are
    facts about the source log and are always kept.
    """

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self.abandoned = False

    def ask_stop(self) -> None:
        self._stop_event.set()

    def abandon(self) -> None:
        with self._lock:
            self.abandoned = True

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stop and wait up to ``wait_s``; a client still stuck then is abandoned (its thread
        is a daemon)."""
        stop_all([self], wait_s)


def stop_all(apps: Iterable[App], wait_s: float = STOP_WAIT_S) -> None:
    """Ask every one of ``apps`` to stop, then wait for them all within one ``wait_s`` and
    abandon those still running: clients stuck on a dead cluster cost the wait once."""
    apps = list(apps)
    for app in apps:
        app.ask_stop()
    deadline = time.monotonic() + wait_s
    for app in apps:
        app.join(max(0.0, deadline - time.monotonic()))
        if app.is_alive():
            app.abandon()


class Writer(App):
    """Writes ``load.records_per_s`` numbered records to one topic until stopped."""

    def __init__(self, endpoint: ClusterEndpoint, load: TopicLoad, timeline: Timeline) -> None:
        super().__init__(f"drill-writer-{load.name}")
        self.endpoint, self.load, self.timeline = endpoint, load, timeline
        self.stats = WriterStats()
        self.seq = 0

    @property
    def acked_count(self) -> int:
        with self._lock:
            return len(self.stats.acked)

    def acked(self) -> list[tuple[float, Acked]]:
        with self._lock:
            return list(self.stats.acked)

    def run(self) -> None:
        producer: AppProducer | None = None
        owed = 0.0
        transactions = 0
        try:
            while not self._stop_event.is_set():
                owed += self.load.records_per_s * TICK_S
                count, owed = int(owed), owed - int(owed)
                if count:
                    try:
                        producer = producer or AppProducer(
                            self.endpoint, self.load.name, self.load.transactional
                        )
                        transactions += 1
                        abort = bool(self.load.abort_every) and (
                            transactions % self.load.abort_every == 0
                        )
                        self._send(producer, count, abort)
                    except KafkaError as err:
                        self._refused(count, str(err))
                        if producer is not None:
                            producer.close()
                        producer = None  # a fresh producer after a failure (fenced txn ids)
                        self._stop_event.wait(1.0)
                self._stop_event.wait(TICK_S)
        finally:
            if producer is not None:
                producer.close()

    def _send(self, producer: AppProducer, count: int, abort: bool) -> None:
        keys = self.load.keys
        payloads = [
            (
                f"k{(self.seq + i) % keys}".encode() if keys else None,
                encode_value(self.seq + i, self.load.value_bytes),
            )
            for i in range(count)
        ]
        self.seq += count
        sent_at = time.time()
        acked = producer.send(payloads, abort=abort)
        with self._lock:
            self.stats.acked.extend((sent_at, a) for a in acked)
            if abort:
                self.stats.aborted += count

    def _refused(self, count: int, error: str) -> None:
        with self._lock:
            self.stats.refused += count
            first = self.stats.first_refusal is None
            if first:
                self.stats.first_refusal = error
        if first:
            self.timeline.add("writes_refused", f"{self.endpoint.alias}/{self.load.name}: {error}")


class GroupMember(App):
    """One consumer of ``load.name`` on one cluster: poll, process at the group's speed,
    commit synchronously, then ledger what was committed."""

    def __init__(self, endpoint: ClusterEndpoint, load: GroupLoad, topic: str) -> None:
        super().__init__(f"drill-group-{load.name}-{endpoint.alias}")
        self.endpoint, self.load, self.topic = endpoint, load, topic
        self._ledger: list[Processed] = []
        self.errors = 0
        self.last_error: str | None = None
        self.first_poll_at: float | None = None  # first poll that returned (records or none)

    def ledger(self) -> list[Processed]:
        with self._lock:
            return list(self._ledger)

    @property
    def batch(self) -> int:
        return max(1, int(self.load.records_per_s * 0.2))

    def run(self) -> None:
        consumer: AppConsumer | None = None
        try:
            while not self._stop_event.is_set():
                try:
                    consumer = consumer or AppConsumer(self.endpoint, self.load.name, self.topic)
                    started = time.monotonic()
                    records = consumer.poll(self.batch, 0.5)
                    if records and not self._processed(
                        records, started, consumer.commit, self.endpoint.alias
                    ):
                        break
                except KafkaError as err:
                    self._failed(str(err))
        finally:
            if consumer is not None:
                consumer.close()

    def _processed(
        self,
        records: Sequence[Record],
        started: float,
        commit: Callable[[Sequence[Record]], object],
        cluster: str,
    ) -> bool:
        """Process ``records`` at the group's speed, commit them (``commit``, synchronous), then
        ledger them as processed on ``cluster``; False once the member was abandoned (what it
        commits after that is not counted)."""
        pace = len(records) / self.load.records_per_s  # processing takes time: the group's speed
        self._stop_event.wait(max(0.0, pace - (time.monotonic() - started)))
        commit(records)
        now = time.time()
        with self._lock:
            if self.abandoned:
                return False
            if self.first_poll_at is None:
                self.first_poll_at = now
            self._ledger.extend(
                Processed(now, cluster, r.topic, r.partition, r.offset, decode_seq(r.value))
                for r in records
            )
        return True

    def _failed(self, error: str) -> None:
        self.errors += 1
        self.last_error = error
        self._stop_event.wait(0.5)


class FollowingMember(GroupMember):
    """A member of the group that follows the pointer (drkit.client.follow): on no cluster
    until a pointer record names one, then a member there - and on the next cluster when the
    pointer moves again, without a restart.  The drill starts one per group on standby before
    the fault, as an application waiting in the surviving data center; its ledger names the
    cluster each record was processed on.

    ``consumer(group)``: the following consumer to use (built by the runner over its watcher);
    ``endpoint``/``topic``: the cluster and topic the drill reads the group's lag on."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        load: GroupLoad,
        topic: str,
        consumer: Callable[[str], FollowingConsumer],
    ) -> None:
        super().__init__(endpoint, load, topic)
        self._consumer_of = consumer
        self.switched_at: float | None = None  # wall time it joined a cluster the pointer named

    def _switch(self, _switch: Switch) -> None:
        self.switched_at = time.time()

    def run(self) -> None:
        consumer: FollowingConsumer | None = None
        try:
            while not self._stop_event.is_set():
                try:
                    if consumer is None:
                        consumer = self._consumer_of(self.load.name)
                        consumer.on_switch = self._switch
                    started = time.monotonic()
                    messages = [m for m in consumer.consume(self.batch, 0.5) if m.error() is None]
                    cluster = consumer.cluster
                    if messages and cluster is not None:
                        records = [to_record(m) for m in messages]
                        done = self._processed(
                            records, started,
                            functools.partial(_commit_messages, consumer, messages), cluster,
                        )  # fmt: skip
                        if not done:
                            break
                except Exception as err:  # librdkafka's own errors too: an application retries
                    self._failed(str(err))
        finally:
            if consumer is not None:
                consumer.close()


def _commit_messages(
    consumer: FollowingConsumer, messages: Sequence[Any], _records: object
) -> None:
    """What one consume returned, committed (the records processed are those messages)."""
    consumer.commit_messages(messages)
