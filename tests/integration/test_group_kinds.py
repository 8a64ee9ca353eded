"""Applications that are not plain consumer groups, on real brokers: a KIP-932 share group
consuming a flow's topic is named in every failover plan as not moved - never dropped without a
word; a Kafka Streams application fails over with its state and counts every record once."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.local.jars import java_executable, resolve_bundle
from drkit.records import TopicPartition
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.failover_support import checkpointed, drkit, progress_of
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until
from tests.streams_app import StreamsCountApp, changelog_topic, counts_in_changelog


def _kafka_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    jars = resolve_bundle("kafka")
    return subprocess.run(
        [java_executable(), "-cp", f"{jars}/*", main_class, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_share_group_is_named_in_the_plan_as_not_moved(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    # Kafka 4.1 ships share groups behind a feature flag; finalizing it changes nothing else.
    feature = ("upgrade", "--feature", "share.version=1")
    enabled = _kafka_tool(
        "org.apache.kafka.tools.FeatureCommand",
        "--bootstrap-server",
        dc1.bootstrap_servers,
        *feature,
    )
    assert enabled.returncode == 0, enabled.stdout + enabled.stderr
    topic = names.topic("jobs")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], groups={"include": [f"{names.prefix}.*"]})
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    share_group = names.group("workers")
    jars = resolve_bundle("kafka")
    consumer = subprocess.Popen(
        [java_executable(), "-cp", f"{jars}/*",
         "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
         "--bootstrap-server", dc1.bootstrap_servers, "--topic", topic, "--group", share_group],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: share_group in dc1.admin().other_groups(), 60, 0.5,
                   what="the share group exists")  # fmt: skip
        assert share_group not in dc1.admin().list_groups()  # not a consumer group
        done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--plan",
                     "-o", "json")  # fmt: skip
    finally:
        consumer.terminate()
        consumer.wait(timeout=30)
    plan = done.json()
    warning = next(w for w in plan["warnings"] if w["code"] == "untranslatable_groups")
    assert share_group in warning["message"], warning
    assert share_group not in {g["group"] for g in plan["groups"]}


KEYS = [f"key-{i}" for i in range(7)]


def _words(start: int, count: int) -> list[tuple[bytes, bytes]]:
    return [(KEYS[i % len(KEYS)].encode(), f"w{i}".encode()) for i in range(start, start + count)]


def test_a_kafka_streams_application_fails_over_with_its_state_and_counts_every_record_once(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A real Streams application counts per key, exactly once, on dc1; dc1 dies with records
    it never processed. On dc2 the same application id must find its state in the changelog
    replica (same name) and resume its input at the translated offsets: every count then equals
    the records written for its key - fewer if the state or the offsets were missing (records
    lost to it), more if it started over (records counted twice)."""
    app_id, topic = names.group("wordcount"), names.topic("words")
    setup = flow_setup(
        tmp_path, scratch, dc2, [topic], groups={"include": [app_id]}, kafka_streams=[app_id]
    )
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    source, target = setup.source_endpoint, setup.target_endpoint
    scratch.admin().create_topics([TopicSpec(topic, 3)])
    inputs = [TopicPartition(topic, p) for p in range(3)]
    produce_batch(source, topic, _words(0, 300))
    with Replicator(setup, log_dir=tmp_path):
        with StreamsCountApp(scratch.bootstrap_servers, app_id, topic, tmp_path, "dc1") as app:
            app.wait_running()
            wait_until(
                lambda: sum(counts_in_changelog(source, app_id).values()) == 300,
                90, 0.5, what="the application on dc1 counted the first 300 records",
            )  # fmt: skip
        # Stopped (it committed what it processed); then 200 records it never sees on dc1.
        processed = dict(scratch.admin().group_offsets(app_id).offsets)
        assert sum(processed.values()) == 300, processed
        produce_batch(source, topic, _words(300, 200))
        ends = scratch.admin().list_offsets(inputs, "latest")
        state_on_dc1 = counts_in_changelog(source, app_id)
        assert state_on_dc1 == Counter(k.decode() for k, _ in _words(0, 300))
        wait_until(
            lambda: all(progress_of(setup).get(tp) == end for tp, end in ends.items())
            and counts_in_changelog(target, app_id) == state_on_dc1
            and checkpointed(setup, {app_id: processed}),
            90, 0.5, what="input, changelog and the application's checkpoints replicated",
        )  # fmt: skip
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)  # dc1 is gone
        done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                     "-o", "json")  # fmt: skip
    assert done.code == 0, done.err
    moved = {g["group"] for g in done.json()["plan"]["groups"]}
    assert app_id in moved, moved
    # The changelog kept its name; no repartition topic was asked for, none appeared.
    assert changelog_topic(app_id) in dc2.admin().list_topics()
    expected = Counter(k.decode() for k, _ in _words(0, 500))
    replicas = [TopicPartition(replica, p) for p in range(3)]
    with StreamsCountApp(dc2.bootstrap_servers, app_id, replica, tmp_path, "dc2") as app:
        app.wait_running()
        wait_until(
            lambda: dc2.admin().group_offsets(app_id).offsets
            == dc2.admin().list_offsets(replicas, "latest"),
            90, 0.5, what="the application on dc2 processed its input to the end",
        )  # fmt: skip
    assert counts_in_changelog(target, app_id) == expected
