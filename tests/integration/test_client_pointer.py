"""Applications that follow the pointer (issue 48 item 3), on real brokers: a failover writes
the signed pointer record to the clusters' pointer topics, and drkit.client's consumer and
producer switch to the new primary without a restart - the consumer exactly at the offsets
the failover translated - while forged and older records are ignored."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from drkit.client.follow import FollowingConsumer, FollowingProducer, PointerWatcher, Switch
from drkit.client.pointer_record import PointerRecord, PointerSigner
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.pointer import pointer_key
from drkit.failover.pointer_topic import kafka_pointer_topic
from drkit.kafka import KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.records import TopicPartition
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import POINTER_TOPIC
from tests.conftest import Names
from tests.failover_support import PARTITIONS, PER_PARTITION, drkit, fill, wait_replicated
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

TOTAL = PARTITIONS * PER_PARTITION
ON_SOURCE = 500  # records the group processes (and commits) on the source before the loss


def _consume(
    consumer: FollowingConsumer, count: int, seen: list[tuple[str, int, int, bytes]]
) -> None:
    """Consume until ``count`` more records were processed: (cluster, partition, offset,
    value) each."""
    goal = len(seen) + count

    def more() -> bool:
        for message in consumer.consume(200, 0.5):
            if message.error() is None:
                assert consumer.cluster is not None
                seen.append((consumer.cluster, message.partition() or 0, message.offset() or 0,
                             message.value() or b""))  # fmt: skip
        return len(seen) >= goal

    wait_until(more, 60, what=lambda: f"{len(seen)} of {goal} records consumed")


def _read_to_end(watcher: PointerWatcher, setup: FlowSetup, cluster: str) -> None:
    """Until ``watcher`` read ``cluster``'s pointer topic to its end as it is now."""
    tp = TopicPartition(POINTER_TOPIC, 0)
    end = KafkaAdmin(setup.endpoint(cluster)).list_offsets([tp], "latest")[tp]
    wait_until(
        lambda: watcher.position(cluster) >= end, 30,
        what=lambda: f"{cluster}'s pointer topic read to {end}: {watcher.position(cluster)}",
    )  # fmt: skip


def _signed(key: bytes, record: PointerRecord) -> tuple[bytes, bytes, Any]:
    return (record.key(), record.value(), PointerSigner(key).headers(record))


def test_a_failover_moves_the_pointer_and_following_clients_switch_to_the_new_primary(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup: FlowSetup = flow_setup(
        tmp_path, scratch, dc2, [topic], groups={"include": [f"{names.prefix}.*"]}
    )
    source, target = setup.source, setup.target
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    KafkaAdmin(setup.source_endpoint).create_topics([TopicSpec(topic, PARTITIONS)])
    # What the producer writes: a topic of its own on both clusters (not replicated).
    audit = names.topic("audit")
    for endpoint in (setup.source_endpoint, setup.target_endpoint):
        KafkaAdmin(endpoint).create_topics([TopicSpec(audit, 1)])
    fill(setup.source_endpoint, topic, PER_PARTITION)
    url = setup.config.state_store.url
    assert url is not None
    store = StateStore(url.get_secret_value())
    store.ensure_current()
    key = pointer_key(setup.config, store)  # what the operator hands the applications
    clusters = {
        alias: {"bootstrap.servers": setup.config.clusters[alias].bootstrap_servers}
        for alias in (source, target)
    }
    watcher = PointerWatcher(clusters, key).start(wait_s=10)
    found = watcher.current
    assert found is None  # no failover yet: the applications use their own cluster
    group = names.group("billing")
    switches: list[Switch] = []
    consumer = FollowingConsumer(
        watcher, group, lambda cluster: [topic] if cluster == source else [replica],
        initial=source, on_switch=switches.append,
    )  # fmt: skip
    producer = FollowingProducer(watcher, initial=source, config={"acks": "all"})
    seen: list[tuple[str, int, int, bytes]] = []
    try:
        _consume(consumer, ON_SOURCE, seen)
        consumer.commit(asynchronous=False)
        committed = KafkaAdmin(setup.source_endpoint).group_offsets(group).offsets
        assert sum(committed.values()) == len(seen)  # what it processed is what it committed
        producer.produce(audit, b"before the move")
        assert producer.flush(10) == 0
        with Replicator(setup, log_dir=tmp_path):
            wait_replicated(setup, topic, {group: dict(committed)})
            assert scratch.local is not None
            scratch.local.kill_broker(scratch.name)  # the primary is gone
            done = drkit(setup, "failover", "--from", source, "--to", target, "--yes",
                         "-o", "json")  # fmt: skip
        assert done.code == 0, done.err
        run = done.json()
        moved = next(s for s in run["steps"] if s["name"] == "move_pointer")["detail"]
        published = {p["cluster"]: p for p in moved["pointer_topic"]}
        assert published[target]["epoch"] == moved["epoch"]  # the new primary holds it
        assert published[source]["epoch"] is None  # the dead one does not (the monitor's job)
        # The group's offsets the failover committed on the target, before anyone reads there.
        translated = KafkaAdmin(setup.target_endpoint).group_offsets(group).offsets
        pointer = wait_until(
            lambda: watcher.current, 30, what="the watcher reading the pointer record"
        )
        assert (pointer.cluster, pointer.epoch, pointer.run_id) == (target, moved["epoch"],
                                                                    run["id"])  # fmt: skip
        # The consumer switches on its next call and reads the rest from the target.
        _consume(consumer, TOTAL - len(seen), seen)
        assert [(s.old, s.new) for s in switches] == [(source, target)]
        on_target = [row for row in seen if row[0] == target]
        first = {
            TopicPartition(replica, p): min(o for c, pp, o, _ in on_target if pp == p)
            for p in {pp for _, pp, _, _ in on_target}
        }
        # Where the group had committed, exactly the translated offset; a partition it never
        # committed has no offset on either cluster and is read from its start (re-reads,
        # never a skip: auto.offset.reset=earliest).
        assert {tp.partition for tp in translated} == {tp.partition for tp in committed}
        assert first == {tp: translated.get(tp, 0) for tp in first}
        values = Counter(value for *_, value in seen)
        assert set(values) == {f"{p}-{i}".encode() for p in range(PARTITIONS)
                               for i in range(PER_PARTITION)}  # fmt: skip
        duplicates = sum(c - 1 for c in values.values())
        assert duplicates == 0  # exact translation: nothing processed twice either
        # The producer writes to the new primary without a restart.
        producer.produce(audit, b"after the move")
        assert producer.flush(10) == 0
        assert producer.cluster == target
        written = [r.value for r in consume_all(setup.target_endpoint, audit, timeout_s=30)]
        assert written == [b"after the move"]

        # A forged pointer (not signed with the pointer key) is never followed ...
        forger = os.urandom(32)
        forged = PointerRecord("default", source, 99, None, "2026-01-01T00:00:00.000Z", {})
        # (dc2 is shared: its pointer topic holds other tests' records, under other keys.)
        _read_to_end(watcher, setup, target)
        rejected = watcher.rejected
        produce_batch(setup.target_endpoint, POINTER_TOPIC, [_signed(forger, forged)])
        _read_to_end(watcher, setup, target)
        assert watcher.rejected == rejected + 1
        assert watcher.current == pointer and not consumer.follow()
        # ... nor an older epoch, signed as it is: a newer move to the same cluster raises the
        # epoch (no switch), then a record of an older move back to the source is ignored.
        newer = PointerRecord("default", target, pointer.epoch + 2, None, pointer.updated_at, {})
        older = PointerRecord("default", source, pointer.epoch + 1, None, pointer.updated_at, {})
        produce_batch(setup.target_endpoint, POINTER_TOPIC, [_signed(key, newer),
                      _signed(key, older)])  # fmt: skip
        _read_to_end(watcher, setup, target)
        assert watcher.rejected == rejected + 1  # signed: read, and judged by their epochs
        assert watcher.current == newer
        assert not consumer.follow() and consumer.cluster == target
        assert consumer.epoch == newer.epoch and len(switches) == 1

        # The source returns: the monitor's maintenance writes the store's pointer there, and
        # leaves the target's newer record in place.
        scratch.local.start_broker(scratch.name)
        maintenance = FailoverMaintenance(
            setup.config, store, tmp_path / "state", connect=KafkaAdmin,
            pointer_topics=kafka_pointer_topic,
        )  # fmt: skip

        def converged() -> bool:
            maintenance.publish_pointer()
            return maintenance.publish_pointer() == {}  # nothing left to ask

        wait_until(converged, 60, what="the returned source given the pointer")
        before = [r.value for r in consume_all(setup.source_endpoint, audit, timeout_s=30)]
        assert before == [b"before the move"]
        with PointerWatcher({source: clusters[source]}, key) as on_source:
            wait_until(lambda: on_source.current, 30, what="the pointer read on the source")
            assert on_source.current == pointer
        with PointerWatcher({target: clusters[target]}, key) as on_target_only:
            wait_until(lambda: on_target_only.current, 30, what="the pointer read on the target")
            assert on_target_only.current == newer  # never overwritten by an older epoch
    finally:
        consumer.close()
        producer.close()
        watcher.close()
