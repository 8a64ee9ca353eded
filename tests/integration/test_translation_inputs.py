"""Translation inputs that never lie, on real brokers.

* a missing bookkeeping topic raises (naming topic and cluster) instead of reading as "nothing
  stored" - unless the caller opted in to tolerate absence;
* ``offsets translate --verify`` compares the record at T with the first record a consumer at S
  reads on the source, so a T that skips records is a mismatch;
* the provenance fallback only accepts copies of the source partition being translated.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from drkit.cli import cli
from drkit.errors import RetriableKafkaError
from drkit.kafka import ClusterEndpoint, KafkaAdmin, make_producer
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_all, produce_batch
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.offsets.checkpointer import Checkpointer
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.metrics import CheckpointMetrics
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.offset_sync_store import OffsetSyncStore
from drkit.replication.progress import Progress, ProgressStore, progress_key
from drkit.replication.provenance import SOURCE_HEADER
from drkit.signing import Kind, Signer
from drkit.store import StateStore
from drkit.store.flow_keys import key_for
from drkit.topology.internal_topics import (
    checkpoints_topic,
    offset_syncs_topic,
    progress_topic,
)
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, flow_setup, translate, wait_until

# -- 5. a missing bookkeeping topic is an error, not "no progress" ----------------------------


def test_a_missing_progress_topic_raises_naming_topic_and_cluster(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("any")])
    topic = progress_topic(setup.source)
    assert topic not in dc2.admin().list_topics()
    store = ProgressStore(setup.target_endpoint, topic)
    try:
        with pytest.raises(RetriableKafkaError) as raised:
            store.refresh(timeout_s=10)
    finally:
        store.close()
    assert topic in str(raised.value) and setup.target in str(raised.value)
    # Readers outside the worker (translation, verify, probes, failover plans) opt in: a flow
    # that never ran has no mapping yet - empty, not an error.
    loader = MappingLoader(setup.config.flows[0], setup.target_endpoint, signer=None)
    try:
        assert loader.refresh(timeout_s=10) == {}
    finally:
        loader.close()


def test_checkpoints_not_written_yet_are_tolerated_by_explicit_opt_in(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("any")])
    store = CheckpointStore(setup.target_endpoint, checkpoints_topic(setup.source))
    try:
        snapshot = store.refresh(timeout_s=10)
    finally:
        store.close()
    assert snapshot.latest == {} and snapshot.last_tick_ms is None


def test_a_group_the_source_does_not_know_is_named_not_answered_with_an_empty_table(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """The third new-user trial: ``offsets translate --group nosuchgroup`` exited 0 with an
    empty table - Kafka answers an unknown group with no offsets, not an error."""
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("any")])
    done = CliRunner().invoke(cli, [
        "offsets", "translate", "--config", str(setup.path), "--group", names.group("nosuch"),
        "--from", setup.source, "--to", setup.target,
    ])  # fmt: skip
    assert done.exit_code == 3, done.output
    assert "no committed offsets on the source (a typo?)" in done.output, done.output


def test_an_offset_of_a_topic_or_partition_the_source_lacks_is_named(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """The fourth new-user trial: ``--offset nosuch:0:5`` exited 1 with librdkafka's "_NOENT:
    Failed to query partition leaders: No leaders found", naming neither topic nor cluster."""
    topic = names.topic("orders")
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    setup = flow_setup(tmp_path, dc1, dc2, [f"{names.prefix}.*"])
    done = CliRunner().invoke(cli, [
        "offsets", "translate", "--config", str(setup.path), "--from", setup.source, "--to",
        setup.target, "--offset", f"{names.topic('nosuch')}:0:5", "--offset", f"{topic}:7:5",
        "-o", "json",
    ])  # fmt: skip
    assert "_NOENT" not in done.output and "Traceback" not in done.output, done.output
    reasons = {e["source_topic"]: e["reason"] for e in json.loads(done.stdout)["errors"]}
    assert reasons == {
        names.topic("nosuch"): f"{setup.source} has no topic {names.topic('nosuch')!r}",
        topic: f"{setup.source}'s {topic} has 2 partition(s)",
    }, reasons


def test_an_existing_progress_topic_is_read(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("any")])
    topic = progress_topic(setup.source)
    dc2.admin().create_topics([TopicSpec(topic, 1, configs={"cleanup.policy": "compact"})])
    source = TopicPartition(names.topic("orders"), 2)
    key = f"{setup.target}/{source.topic}/{source.partition}".encode()
    produce_batch(setup.target_endpoint, topic, [(key, b'{"next": 42, "worker": "w"}')])
    store = ProgressStore(setup.target_endpoint, topic)
    try:
        progress = store.refresh(timeout_s=20)
    finally:
        store.close()
    assert {tp: p.next_offset for tp, p in progress.items()} == {source: 42}


# -- 3. --verify checks T exactly ---------------------------------------------------------------


def _copies(
    endpoint: ClusterEndpoint,
    topic: str,
    copies: list[tuple[str, int]],
    partition: int = 0,
) -> None:
    """Write records whose drkit-src names (``cluster/topic/partition``, offset), in order."""
    producer = make_producer(endpoint)
    for where, offset in copies:
        producer.produce(
            topic,
            b"v",
            b"k",
            partition,
            headers=[(SOURCE_HEADER, f"{where}/{offset}".encode())] if where else [],
        )
    assert producer.flush(30) == 0


def _write_map(
    setup: FlowSetup,
    source: TopicPartition,
    target: TopicPartition,
    runs: list[OffsetRun],
    end: int,
) -> None:
    """Offset-sync runs and progress as the worker stores them (here: made up on purpose),
    signed with the flow's key from the setup's store as the worker signs them."""
    admin = KafkaAdmin(setup.target_endpoint)
    signer = flow_signer(setup)
    syncs, progress = offset_syncs_topic(setup.source), progress_topic(setup.source)
    admin.create_topics(
        [TopicSpec(t, 1, configs={"cleanup.policy": "compact"}) for t in (syncs, progress)]
    )
    produce_batch(
        setup.target_endpoint,
        syncs,
        [
            (sync.key(), sync.value(), (signer.header(sync.key(), sync.value()),))
            for sync in (OffsetSync(source, target, run) for run in runs)
        ],
    )
    produce_batch(
        setup.target_endpoint,
        progress,
        [(progress_key(setup.target, source), Progress(source, end).value())],
    )


def flow_signer(setup: FlowSetup) -> Signer:
    """The offset-sync signer of ``setup``'s flow, its key from the setup's state store."""
    assert setup.config.state_store.url is not None
    store = StateStore(setup.config.state_store.url.get_secret_value())
    store.ensure_current()
    name = setup.config.flows[0].name
    return Signer(key_for(store, name), Kind.OFFSET_SYNC, name)


def test_verify_rejects_a_translation_that_skips_records(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A corrupted offset-sync map claims source 50..59 were never replicated (they were).

    Translation then puts a group at S=50 on the copy of 60: ten records skipped.  The record
    there comes from a source offset >= S, which the old check accepted; the exact check sees
    that a consumer at S reads 50 first and reports the skip.
    """
    topic = names.topic("orders")
    setup = flow_setup(
        tmp_path,
        dc1,
        dc2,
        [topic],
        transforms=[{"type": "filter", "options": {"key_regex": "^drop"}}],
    )
    replica = f"{setup.source}.{topic}"
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    dc2.admin().create_topics([TopicSpec(replica, 1)])
    # Source: 100 records; the flow's filter drops the one at 80.
    produce_batch(
        setup.source_endpoint,
        topic,
        ((b"drop" if i == 80 else f"k{i}".encode(), b"v") for i in range(100)),
    )
    # Target: 5 unrelated records, then the copies (80 was filtered): copy(i) at 5 + i (i < 80).
    where = f"{setup.source}/{topic}/0"
    _copies(
        setup.target_endpoint, replica, [("", 0)] * 5 + [(where, i) for i in range(100) if i != 80]
    )
    source, target = TopicPartition(topic, 0), TopicPartition(replica, 0)
    _write_map(
        setup,
        source,
        target,
        [OffsetRun(0, 5, 50), OffsetRun(60, 65, 20), OffsetRun(81, 85, 19)],  # 50..59 "missing"
        100,
    )
    groups = {names.group("in-gap"): 50, names.group("exact"): 70, names.group("filtered"): 80}
    for group, offset in groups.items():
        commit_group_offsets(setup.source_endpoint, group, {source: offset})
    report = translate(setup, list(groups), verify=True)
    assert not report.errors, report.errors
    rows = {group: report.groups[group][0] for group in groups}
    skipped = rows[names.group("in-gap")]
    assert (skipped.method, skipped.target_offset) == ("mapped", 65)
    assert skipped.verified is False, "a T that skips 50..59 passed verification"
    assert skipped.verification == "skips"
    exact = rows[names.group("exact")]
    assert (exact.method, exact.target_offset, exact.verified) == ("exact", 75, True)
    assert exact.verification == "match"
    # S=80 was filtered: a consumer at S reads 81 first, and T holds 81's copy.
    filtered = rows[names.group("filtered")]
    assert (filtered.target_offset, filtered.verified, filtered.verification) == (85, True, "match")
    # The CLI reports the same per row (a mismatch is a row fact, not an error exit).
    result = CliRunner().invoke(
        cli,
        [
            "offsets",
            "translate",
            "--config",
            str(setup.path),
            "--group",
            names.group("in-gap"),
            "--from",
            setup.source,
            "--to",
            setup.target,
            "--verify",
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["groups"][0]["partitions"]
    assert (row["target_offset"], row["verified"], row["verification"]) == (65, False, "skips")


# -- 4. the provenance fallback only accepts copies of the partition it translates --------------


def test_provenance_fallback_ignores_copies_of_other_partitions_and_clusters(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Target partition 0 holds copies of source partitions 0 and 1 (a route merge), with
    partition 1 thirty records ahead, plus copies from another cluster and plain records.

    Searching by offset alone lands on partition 1's copy of 30 when partition 0 asks for 10.
    """
    topic = names.topic("merged")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    replica = f"{setup.source}.{topic}"
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    dc2.admin().create_topics([TopicSpec(replica, 1)])
    produce_batch(setup.source_endpoint, topic, ((b"k", b"v") for _ in range(60)), partition=0)
    produce_batch(setup.source_endpoint, topic, ((b"k", b"v") for _ in range(90)), partition=1)
    p0, p1 = f"{setup.source}/{topic}/0", f"{setup.source}/{topic}/1"
    other = f"elsewhere/{topic}/0"
    layout: list[tuple[str, int]] = []
    for i in range(60):
        layout += [(p0, i), (p1, i + 30)]
        if i % 7 == 3:
            layout += [(other, i + 100), ("", 0)]
    _copies(setup.target_endpoint, replica, layout)
    position = {entry: offset for offset, entry in enumerate(layout)}
    group = names.group("merged")
    for offset in (10, 0, 59):
        commit_group_offsets(setup.source_endpoint, group, {TopicPartition(topic, 0): offset})
        report = translate(setup, [group], verify=True)
        assert not report.errors, report.errors
        (row,) = report.groups[group]
        assert row.method == "provenance"
        assert row.target_offset == position[(p0, offset)], offset
        assert (row.verified, row.verification) == (True, "match")


# -- 9. the offset-sync map stays bounded ------------------------------------------------------


def test_checkpointer_tombstones_runs_neither_cluster_holds_and_translation_stays_exact(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Three runs (an exactly-once target: a marker-sized hole after each); retention removed
    the first run's records on both clusters.  The checkpointer tombstones that run - and only
    it - and translation over the trimmed map stays exact."""
    topic = names.topic("retained")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], checkpoint_interval_s=0.5)
    replica = f"{setup.source}.{topic}"
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    dc2.admin().create_topics([TopicSpec(replica, 1)])
    produce_batch(setup.source_endpoint, topic, ((f"k{i}".encode(), b"v") for i in range(300)))
    where = f"{setup.source}/{topic}/0"
    layout: list[tuple[str, int]] = []
    for first in (0, 100, 200):
        layout += [(where, i) for i in range(first, first + 100)] + [("", 0)]
    _copies(setup.target_endpoint, replica, layout[:-1])
    source, target = TopicPartition(topic, 0), TopicPartition(replica, 0)
    runs = [OffsetRun(0, 0, 100), OffsetRun(100, 101, 100), OffsetRun(200, 202, 100)]
    _write_map(setup, source, target, runs, 300)
    dc1.admin().delete_records({source: 200})  # the source holds 200.. (run 2 and 3)
    dc2.admin().delete_records({target: 150})  # the target holds copies of 149.. (run 2, 3)
    groups = {names.group("kept"): 160, names.group("newest"): 210, names.group("gone"): 50}
    for group, offset in groups.items():
        commit_group_offsets(setup.source_endpoint, group, {source: offset})

    def stored_runs() -> int:
        """Runs a fresh reader of the offset-sync topic gets (tombstones applied)."""
        latest = {
            record.key: record.value
            for record in consume_all(setup.target_endpoint, offset_syncs_topic(setup.source))
        }
        return sum(value is not None for value in latest.values())

    assert stored_runs() == 3
    checkpointer = Checkpointer(
        setup.config.flows[0],
        setup.config.clusters[setup.source],
        setup.config.clusters[setup.target],
        CheckpointMetrics.create(CollectorRegistry()),
        connect=KafkaAdmin,
    )
    stop = threading.Event()
    thread = threading.Thread(target=checkpointer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: stored_runs() == 2, 30, 0.5, what="the expired run tombstoned")
        # A fresh store and the checkpointer's own map (reading its tombstone back) agree.
        store = OffsetSyncStore(
            setup.target_endpoint, offset_syncs_topic(setup.source), signer=None
        )
        try:
            store.refresh(timeout_s=20)
            assert store.stored_runs() == 2
        finally:
            store.close()
        wait_until(lambda: checkpointer.loader.stored_runs() == 2, 10, 0.2)
    finally:
        stop.set()
        thread.join(30)
        checkpointer.close()
    report = translate(setup, list(groups), verify=True)
    assert not report.errors, report.errors
    rows = {group: report.groups[group][0] for group in groups}
    kept, newest = rows[names.group("kept")], rows[names.group("newest")]
    # 160 is gone from the source but its copy is on the target: its run was kept (trimming on
    # the source's log start alone would have dropped it and resumed past the copy).
    assert (kept.method, kept.target_offset, kept.verification) == ("exact", 161, "unverifiable")
    assert (newest.method, newest.target_offset, newest.verified) == ("exact", 212, True)
    # Below both log starts: the target's first record (what the full map clamps to as well);
    # S is gone from the source, so there is nothing to verify against.
    gone = rows[names.group("gone")]
    assert (gone.target_offset, gone.verified, gone.verification) == (150, None, "unverifiable")
