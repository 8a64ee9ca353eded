"""Real brokers: produce and consume on dc1 and dc2; the local lifecycle under faults."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from drkit.cli import cli
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.local import class_archive
from drkit.local.jars import java_executable, resolve_bundle
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest, state_dir_for_tests


def test_produce_and_consume_on_both_clusters(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names
) -> None:
    topic = names.topic()
    for cluster in (dc1, dc2):
        cluster.admin().create_topics([TopicSpec(topic, 3)])
        payloads = [(f"k{i}".encode(), f"{cluster.name}:{i}".encode()) for i in range(300)]
        assert produce_batch(cluster.endpoint, topic, payloads) == 300
        records = consume_all(cluster.endpoint, topic, expected=300)
        assert sorted(r.value or b"" for r in records) == sorted(v for _, v in payloads)
        # Same key, same partition: per-key order is what Kafka guarantees.
        by_key = {r.key: r.partition for r in records}
        assert len(by_key) == 300
        offsets = cluster.admin().topic_offsets(topic)
        assert sum(end - start for start, end in offsets.values()) == 300


def test_clusters_are_independent(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names
) -> None:
    topic = names.topic()
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    assert topic in dc1.admin().list_topics()
    assert topic not in dc2.admin().list_topics()
    assert dc1.admin().describe_cluster()[0] != dc2.admin().describe_cluster()[0]


def test_kill_and_start_a_broker_shows_in_status(scratch: ClusterUnderTest, names: Names) -> None:
    runner = CliRunner()
    state = ["--state-dir", str(state_dir_for_tests())]

    def alive() -> bool:
        out = runner.invoke(cli, [*state, "local", "status", "--output", "json"])
        assert out.exit_code == 0, out.output
        payload = json.loads(out.output)
        return bool(payload["clusters"][scratch.name]["brokers"][0]["alive"])

    topic = names.topic()
    scratch.admin().create_topics([TopicSpec(topic, 1)])
    produce_batch(scratch.endpoint, topic, [(b"k", b"before")])
    assert alive()
    killed = runner.invoke(cli, [*state, "local", "kill", scratch.name])
    assert killed.exit_code == 0, killed.output
    assert not alive()
    started = runner.invoke(cli, [*state, "local", "start", scratch.name])
    assert started.exit_code == 0, started.output
    assert alive()
    # Data written before the crash survived it (acks=all on a fsync'd single node log).
    produce_batch(scratch.endpoint, topic, [(b"k", b"after")])
    values = [r.value for r in consume_all(scratch.endpoint, topic, expected=2)]
    assert values == [b"before", b"after"]


def test_status_json_has_documented_shape(dc1: ClusterUnderTest) -> None:
    if dc1.local is None:
        return
    out = CliRunner().invoke(
        cli, ["--state-dir", str(state_dir_for_tests()), "local", "status", "--output", "json"]
    )
    payload = json.loads(out.output)
    entry = payload["clusters"]["dc1"]
    assert entry["bootstrap_servers"] == dc1.bootstrap_servers
    assert {"id", "pid", "alive"} <= set(entry["brokers"][0])


def test_brokers_map_the_class_archive_a_graceful_stop_leaves(
    scratch: ClusterUnderTest, names: Names
) -> None:
    """drkit/local/class_archive.py on a real broker: once any broker stopped gracefully the
    archive exists (recorded by it, or by one before), and a broker started then maps it -
    and serves as before."""
    assert scratch.local is not None
    jars, java = resolve_bundle("kafka"), java_executable()
    stopped, _ = scratch.local.stop_broker(scratch.name)
    assert stopped == [1]
    archive = class_archive.archive_of(jars, java)
    assert archive.exists(), f"no class archive at {archive} after a graceful stop"
    scratch.local.start_broker(scratch.name)
    pid = scratch.local.cluster_status(scratch.name).brokers[0].pid
    assert pid is not None
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert f"-XX:SharedArchiveFile={archive}".encode() in command
    topic = names.topic()
    scratch.admin().create_topics([TopicSpec(topic, 1)])
    produce_batch(scratch.endpoint, topic, [(b"k", b"mapped")])
    assert [r.value for r in consume_all(scratch.endpoint, topic, expected=1)] == [b"mapped"]
