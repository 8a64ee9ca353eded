"""The pointer where clients read it: the pointer topic of every cluster (Kafka I/O).

The ``move_pointer`` step writes the moved pointer to each cluster that answers
(:func:`publish`, bounded: a dead cluster costs the move its wait once); the monitor's
maintenance converges the clusters that were away (:class:`PointerPublisher`).  A record never
replaces a newer epoch: each cluster's topic is read first.  The format, signature and epoch
rule: drkit.client.pointer_record; the protocol: docs/client-pointer.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from drkit.client.pointer_record import PointerRecord, PointerSigner
from drkit.config.model import DrkitConfig
from drkit.errors import DrkitError
from drkit.failover.pointer import PointerRepository, pointer_key, pointer_record
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.keyed_topic import COMPACTED, Accept, KeyedTopic, KeyedTopicPort, Sign
from drkit.kafka.ports import AdminFactory
from drkit.records import Headers
from drkit.store.db import StateStore

log = logging.getLogger(__name__)

# The pointer topic (``failover.pointer_topic``) of one cluster, writing with ``sign``'s headers
# and reading only what ``accept`` takes; the edges pass :func:`kafka_pointer_topic`, tests
# in-memory ones.  None (the engine's and the maintenance's default): the store only.
PointerTopics = Callable[[ClusterEndpoint, str, Sign, Accept], KeyedTopicPort]

# How long one cluster is given to read its pointer topic and to acknowledge the record.
CLUSTER_BUDGET_S = 5.0


def kafka_pointer_topic(
    endpoint: ClusterEndpoint, topic: str, sign: Sign, accept: Accept
) -> KeyedTopicPort:
    """``topic`` on ``endpoint``'s cluster (created compacted on the first write)."""
    return KeyedTopic(endpoint, topic, sign=sign, accept=accept)


@dataclass(frozen=True)
class Published:
    """What one cluster's pointer topic holds after :func:`publish` asked it: ``epoch`` the
    highest epoch there (ours, or a newer one left in place); ``error`` when it did not answer
    in time (None for both: it was still being asked when the wait ended)."""

    cluster: str
    epoch: int | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.epoch is not None

    def to_json(self) -> dict[str, object]:
        return {"cluster": self.cluster, "epoch": self.epoch, "error": self.error}


def publish_one(topic: KeyedTopicPort, record: PointerRecord, timeout_s: float) -> int:
    """Write ``record`` to one cluster's pointer topic unless it holds a newer epoch; returns
    the epoch the topic holds after.  Compaction keeps one record per key, so a stale engine
    (frozen, woken after a newer move) must not write last: the topic is read first (``topic``
    reads only records whose signature verifies: a forged high epoch holds nothing back)."""
    latest = topic.latest(timeout_s).get(record.name)
    if latest is not None:
        held = latest.value.get("epoch")
        if type(held) is int and held >= record.epoch:
            return held
    topic.put(record.name, record.document(), timeout_s)
    return record.epoch


def publish(
    config: DrkitConfig,
    record: PointerRecord,
    key: bytes,
    topics: PointerTopics,
    clusters: Iterable[str],
    wait_s: float,
    budget_s: float = CLUSTER_BUDGET_S,
    *,
    first: str | None = None,
    others_s: float | None = None,
    unwaited: Iterable[str] = (),
) -> dict[str, Published]:
    """Write ``record`` to every one of ``clusters`` at once, best effort: each cluster in its
    own daemon thread with ``budget_s`` per request, the caller waiting at most ``wait_s`` in
    all - a cluster that is down costs the wait once, never the sum.  With ``first`` (the
    new primary: the cluster clients surely reach) the wait is for it, and the others are
    given at most ``others_s`` beyond it.  ``unwaited``: clusters asked but never waited for
    (known down: they would only spend the others' grace).  A cluster still being asked when
    the wait ends is left to finish on its own (its result is then not reported; the
    monitor's maintenance checks it again)."""
    signer = PointerSigner(key, record.name)

    def sign(k: bytes, v: bytes) -> list[tuple[str, str | bytes | None]]:
        return [signer.header(k, v)]

    def accept(k: bytes, v: bytes | None, headers: Headers) -> bool:
        return signer.read(k, v, headers) is not None

    def one(cluster: str) -> Published:
        endpoint = ClusterEndpoint(cluster, config.clusters[cluster])
        topic = topics(endpoint, config.failover.pointer_topic, sign, accept)
        try:
            return Published(cluster, epoch=publish_one(topic, record, budget_s))
        finally:
            try:
                topic.close()
            except Exception:  # closing a client of a dead cluster: nothing to save
                log.debug("pointer topic of %s not closed cleanly", cluster, exc_info=True)

    asked = [c for c in clusters if c in config.clusters]
    return at_once(asked, one, wait_s, first=first, others_s=others_s, unwaited=unwaited)


def at_once(
    clusters: Iterable[str],
    work: Callable[[str], Published],
    wait_s: float,
    *,
    first: str | None = None,
    others_s: float | None = None,
    unwaited: Iterable[str] = (),
) -> dict[str, Published]:
    """``work(cluster)`` for every cluster at once, each in a daemon thread, waited for at most
    ``wait_s`` in all (with ``first``: for it, then the others at most ``others_s`` more;
    ``unwaited`` ones not at all - their work is started and left to finish on its own).  A
    cluster whose work raised is ``Published(cluster, error=...)``; one still at work when the
    wait ends is ``Published(cluster)`` (left to finish on its own)."""
    results: dict[str, Published] = {}
    lock = threading.Lock()

    def one(cluster: str) -> None:
        try:
            outcome = work(cluster)
        except DrkitError as err:
            outcome = Published(cluster, error=str(err))
        except Exception as err:  # a thread's last word: never lost silently
            outcome = Published(cluster, error=f"{type(err).__name__}: {err}")
        with lock:
            results[cluster] = outcome

    threads = {
        cluster: threading.Thread(
            target=one, args=(cluster,), daemon=True, name=f"drkit-pointer-{cluster}"
        )
        for cluster in clusters
    }
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + wait_s
    skipped = set(unwaited) - {first}
    for cluster in sorted(threads, key=lambda c: c != first):
        if cluster in skipped:
            continue
        threads[cluster].join(max(0.0, deadline - time.monotonic()))
        if cluster == first and others_s is not None:
            deadline = min(deadline, time.monotonic() + others_s)
    with lock:
        return {cluster: results.get(cluster, Published(cluster)) for cluster in threads}


class PointerPublisher:
    """Converges every cluster's pointer topic to the store's pointer: the monitor's
    maintenance calls :meth:`converge` every tick, and only clusters not yet known to hold the
    current epoch are asked (a cluster that was down gets the record once it answers).

    With ``connect`` it first creates the topic on every cluster that lacks it, before any
    move: a client watching a topic that does not exist yet finds it only at its next metadata
    refresh (drkit.client.follow: every second), which a first failover would otherwise wait
    for.  Single-threaded."""

    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        topics: PointerTopics,
        wait_s: float = 6.0,
        connect: AdminFactory | None = None,
    ) -> None:
        self.config, self.store, self.topics, self.wait_s = config, store, topics, wait_s
        self.connect = connect
        self._held: dict[str, int] = {}  # cluster -> the epoch it was seen to hold
        self._created: set[str] = set()  # clusters where the topic was created (or was there)
        self._key: bytes | None = None

    def create_topics(self) -> dict[str, Published]:
        """Create the pointer topic where it was not created yet (one compacted partition);
        each cluster asked, ``epoch`` 0 where it is done."""
        connect = self.connect
        due = [c for c in self.config.clusters if c not in self._created]
        if connect is None or not due:
            return {}
        spec = TopicSpec(self.config.failover.pointer_topic, 1, None, COMPACTED)

        def create(cluster: str) -> Published:
            endpoint = ClusterEndpoint(cluster, self.config.clusters[cluster])
            connect(endpoint).create_topics([spec], CLUSTER_BUDGET_S)
            return Published(cluster, epoch=0)

        outcome = at_once(due, create, self.wait_s)
        self._created |= {c for c, created in outcome.items() if created.done}
        return outcome

    def converge(self) -> dict[str, Published]:
        """Publish the store's pointer where it is missing; what each cluster asked answered
        (empty: no pointer yet, or every cluster holds it)."""
        self.create_topics()
        pointer = PointerRepository(self.store).get()
        if pointer is None:
            return {}
        due = [c for c in self.config.clusters if self._held.get(c, 0) < pointer.epoch]
        if not due:
            return {}
        if self._key is None:
            self._key = pointer_key(self.config, self.store, pointer.name)
        record = pointer_record(pointer, self.config)
        outcome = publish(self.config, record, self._key, self.topics, due, self.wait_s)
        for cluster, published in outcome.items():
            if published.epoch is not None:
                self._held[cluster] = published.epoch
        return outcome
