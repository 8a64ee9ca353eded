"""Replication acceptance on real clusters: completeness, order, crashes, topics, loops, limits."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.kafka.records import Record
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.internal_topics import progress_topic
from drkit.replication.progress import Progress, ProgressStore
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, Provenance
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until


def count(endpoint: ClusterEndpoint, topic: str) -> int:
    admin = KafkaAdmin(endpoint)
    if topic not in admin.list_topics():
        return 0
    return sum(end - start for start, end in admin.topic_offsets(topic).values())


def source_offsets(records: list[Record]) -> list[tuple[int, int]]:
    out = []
    for record in records:
        raw = record.header(SOURCE_HEADER)
        assert raw is not None, f"record without provenance: {record}"
        provenance = Provenance.decode(raw)
        out.append((provenance.partition, provenance.offset))
    return out


def by_partition(records: list[Record]) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        out[record.partition].append(record)
    return out


def produce_spread(endpoint: ClusterEndpoint, topic: str, n: int, start: int = 0) -> None:
    produce_batch(
        endpoint,
        topic,
        ((f"key-{i}".encode(), f"value-{i}".encode()) for i in range(start, start + n)),
        headers=(("app", b"orders-service"),),
    )


def test_200k_records_replicated_once_in_order_with_headers_and_timestamps(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 8)])
    produce_spread(setup.source_endpoint, topic, 200_000)
    replica = f"{setup.source}.{topic}"
    with Replicator(setup, log_dir=tmp_path) as worker:
        wait_until(
            lambda: count(setup.target_endpoint, replica) >= 200_000,
            120,
            what="200k records on the target",
        )
        assert worker.running, worker.log()
    source = consume_all(setup.source_endpoint, topic, expected=200_000, timeout_s=120)
    target = consume_all(setup.target_endpoint, replica, expected=200_000, timeout_s=120)
    assert len(target) == 200_000
    assert Counter(source_offsets(target)).most_common(1)[0][1] == 1, "duplicates on the target"
    source_parts, target_parts = by_partition(source), by_partition(target)
    assert sorted(target_parts) == list(range(8))
    for partition, records in source_parts.items():
        replicas = target_parts[partition]
        assert [r.value for r in replicas] == [r.value for r in records], "order changed"
        assert [r.key for r in replicas] == [r.key for r in records]
        assert [r.timestamp_ms for r in replicas] == [r.timestamp_ms for r in records]
        first = replicas[0]
        assert first.header("app") == b"orders-service"
        assert first.header(ORIGIN_HEADER) == (dc1.admin().describe_cluster()[0] or "").encode()


def test_kill_9_and_restart_loses_nothing_and_duplicates_only_the_uncommitted_tail(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("payments")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 4)])
    produce_spread(setup.source_endpoint, topic, 150_000)
    replica = f"{setup.source}.{topic}"
    worker = Replicator(setup, log_dir=tmp_path).start()
    wait_until(
        lambda: count(setup.target_endpoint, replica) > 30_000,
        60,
        0.05,
        what="replication under way",
    )
    worker.kill()
    before = consume_all(setup.target_endpoint, replica, timeout_s=60)
    progress = ProgressStore(setup.target_endpoint, progress_topic(setup.source)).refresh()
    uncommitted = Counter(
        (p, o)
        for p, o in source_offsets(before)
        if o >= progress.get(_tp(topic, p), _no_progress()).next_offset
    )
    produce_spread(setup.source_endpoint, topic, 10_000, start=150_000)  # more while it is down
    with Replicator(setup, log_dir=tmp_path):
        wait_until(
            lambda: count(setup.target_endpoint, replica) >= 160_000 + len(uncommitted),
            120,
            what="catch-up after restart",
        )
    after = Counter(source_offsets(consume_all(setup.target_endpoint, replica, timeout_s=60)))
    source = consume_all(setup.source_endpoint, topic, expected=160_000, timeout_s=60)
    assert set(after) == {(r.partition, r.offset) for r in source}, "records missing"
    duplicated = {key for key, n in after.items() if n > 1}
    assert duplicated == set(uncommitted), "duplicates beyond the records in flight at the kill"
    assert max(after.values()) <= 2


def _tp(topic: str, partition: int):  # type: ignore[no-untyped-def]
    from drkit.kafka.records import TopicPartition

    return TopicPartition(topic, partition)


def _no_progress() -> Progress:
    return Progress(_tp("", 0), 0)


def test_exactly_once_mode_survives_kill_9_without_duplicates(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("ledger")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], exactly_once=True)
    dc1.admin().create_topics([TopicSpec(topic, 4)])
    produce_spread(setup.source_endpoint, topic, 60_000)
    replica = f"{setup.source}.{topic}"
    worker = Replicator(setup, log_dir=tmp_path).start()
    wait_until(
        lambda: count(setup.target_endpoint, replica) > 15_000,
        60,
        0.05,
        what="replication under way",
    )
    worker.kill()
    produce_spread(setup.source_endpoint, topic, 5_000, start=60_000)
    with Replicator(setup, log_dir=tmp_path) as restarted:

        def committed() -> int:
            return len(consume_all(setup.target_endpoint, replica, timeout_s=30))

        wait_until(lambda: committed() >= 65_000, 120, 1.0, what="all records committed")
        assert restarted.running, restarted.log()
    seen = Counter(
        source_offsets(
            consume_all(setup.target_endpoint, replica, isolation="read_committed", timeout_s=60)
        )
    )
    assert len(seen) == 65_000
    assert max(seen.values()) == 1, "read_committed consumer saw a duplicate"


def test_new_topic_and_added_partitions_are_replicated(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [f"{names.prefix}\\..*"])
    existing = names.topic("existing")
    dc1.admin().create_topics([TopicSpec(existing, 1)])
    with Replicator(setup, log_dir=tmp_path) as worker:
        wait_until(lambda: f"{setup.source}.{existing}" in dc2.admin().list_topics(), 30)
        topic = names.topic("new")
        configs = {
            "retention.ms": "12345678",
            "cleanup.policy": "compact",
            "max.message.bytes": "2000000",
        }
        created = time.monotonic()
        dc1.admin().create_topics([TopicSpec(topic, 3, configs=configs)])
        replica = f"{setup.source}.{topic}"
        wait_until(
            lambda: replica in dc2.admin().list_topics(),
            10.0,
            0.2,
            what="new topic on the target within 10 s",
        )
        elapsed = time.monotonic() - created
        assert dc2.admin().list_topics()[replica].partition_count == 3
        replicated = dc2.admin().topic_configs([replica])[replica]
        assert {k: replicated[k].value for k in configs} == configs
        # Grow the source: the new partition's records arrive in the same partition number.
        dc1.admin().create_partitions(topic, 5)
        produce_batch(setup.source_endpoint, topic, [(b"k", b"in-p4")], partition=4)
        records = wait_until(
            lambda: [
                r
                for r in consume_all(setup.target_endpoint, replica, timeout_s=5)
                if r.value == b"in-p4"
            ],
            30,
            0.5,
            what="record from the added partition",
        )
        assert records[0].partition == 4
        assert worker.running, worker.log()
    print(f"new topic replicated after {elapsed:.1f}s")


def test_active_active_with_identity_names_does_not_loop(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("shared")
    setup = flow_setup(
        tmp_path, dc1, dc2, [topic], reverse=True, replication_policy={"kind": "identity"}
    )
    for cluster in (dc1, dc2):
        cluster.admin().create_topics([TopicSpec(topic, 2)])
    produce_batch(setup.source_endpoint, topic, [(b"a", b"from-dc1")] * 1000)
    produce_batch(setup.target_endpoint, topic, [(b"b", b"from-dc2")] * 500)
    with Replicator(setup, log_dir=tmp_path) as worker:
        wait_until(
            lambda: (
                count(setup.source_endpoint, topic) >= 1500
                and count(setup.target_endpoint, topic) >= 1500
            ),
            60,
            what="both sides hold both clusters' records",
        )
        time.sleep(5)  # several commit and poll cycles: a loop would keep growing the counts
        assert count(setup.source_endpoint, topic) == 1500
        assert count(setup.target_endpoint, topic) == 1500
        assert worker.running, worker.log()
    values = Counter(r.value for r in consume_all(setup.source_endpoint, topic, expected=1500))
    assert values == {b"from-dc1": 1000, b"from-dc2": 500}


def test_record_too_large_for_the_target_stops_the_flow_at_that_offset(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("big")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    replica = f"{setup.source}.{topic}"
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    # The target's own limit (not copied: the source uses the broker default).
    dc2.admin().create_topics([TopicSpec(replica, 1, configs={"max.message.bytes": "100000"})])
    payloads = [(b"k", f"small-{i}".encode()) for i in range(10)]
    payloads.append((b"k", os.urandom(500_000)))  # incompressible: lz4 must not shrink it
    payloads.extend((b"k", f"after-{i}".encode()) for i in range(10))
    produce_batch(setup.source_endpoint, topic, payloads)
    worker = Replicator(setup, log_dir=tmp_path).start()
    code = worker.wait(90)
    log = worker.log()
    assert code == 3, log
    assert f"cannot replicate {topic} partition 0 offset 10" in log
    assert "MSG_SIZE_TOO_LARGE" in log
    assert "Traceback" not in log
    progress = ProgressStore(setup.target_endpoint, progress_topic(setup.source)).refresh()
    assert progress[_tp(topic, 0)].next_offset == 10, "progress passed the refused record"
    values = [r.value for r in consume_all(setup.target_endpoint, replica, timeout_s=10)]
    assert values[:10] == [v for _, v in payloads[:10]]


_PLUGIN = """
from dataclasses import replace


def make(options):
    def shout(record):
        if record.value == b"poison":
            raise ValueError("cannot parse")
        return replace(record, value=(record.value or b"").upper())

    return shout
"""


def install_plugin(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``drkit.transforms`` entry point, visible to this process and to child drkits."""
    (root / "drkit_test_shout.py").write_text(_PLUGIN)
    info = root / "drkit_test_shout-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: drkit-test-shout\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[drkit.transforms]\nshout = drkit_test_shout:make\n")
    monkeypatch.syspath_prepend(str(root))
    inherited = [path for path in [os.environ.get("PYTHONPATH")] if path]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), *inherited]))


def test_a_plugin_transform_runs_and_a_record_it_fails_on_stops_the_flow_there(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_plugin(tmp_path, monkeypatch)
    topic = names.topic("poison")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], transforms=[{"type": "shout"}])
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    values = [b"a", b"b", b"c", b"d", b"e", b"poison", b"f", b"g"]
    produce_batch(setup.source_endpoint, topic, [(b"k", v) for v in values])
    worker = Replicator(setup, log_dir=tmp_path).start()
    code = worker.wait(90)
    log = worker.log()
    assert code == 3, log
    assert f"cannot replicate {topic} partition 0 offset 5" in log
    assert "transform failed: ValueError: cannot parse" in log
    assert "Traceback" not in log
    progress = ProgressStore(setup.target_endpoint, progress_topic(setup.source)).refresh()
    assert progress[_tp(topic, 0)].next_offset == 5, "progress passed the poison record"
    replica = f"{setup.source}.{topic}"
    copied = [r.value for r in consume_all(setup.target_endpoint, replica, timeout_s=10)]
    assert copied == [b"A", b"B", b"C", b"D", b"E"]


def test_two_workers_share_partitions_and_take_over_a_dead_one(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("scaled")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 8)])
    replica = f"{setup.source}.{topic}"
    a = Replicator(setup, "--worker-id", "a", "--metrics-port", "19471", log_dir=tmp_path).start()
    b = Replicator(setup, "--worker-id", "b", "--metrics-port", "19472", log_dir=tmp_path).start()
    try:

        def assigned(port: int) -> float:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
            except OSError:
                return -1
            for line in body.decode().splitlines():
                if line.startswith("drkit_replication_assigned_partitions{"):
                    return float(line.split()[-1])
            return 0

        # 8 data partitions + heartbeats shared by the two members of the group.
        wait_until(
            lambda: (
                assigned(19471) > 0
                and assigned(19472) > 0
                and assigned(19471) + assigned(19472) == 9
            ),
            60,
            0.5,
            what="shared assignment",
        )
        produce_spread(setup.source_endpoint, topic, 20_000)
        wait_until(lambda: count(setup.target_endpoint, replica) >= 20_000, 60)
        b.kill()
        killed = time.monotonic()
        produce_spread(setup.source_endpoint, topic, 20_000, start=20_000)
        wait_until(lambda: assigned(19471) == 9, 30, 0.25, what="takeover of b's partitions")
        takeover = time.monotonic() - killed
        assert takeover < 10 + 5, f"takeover took {takeover:.1f}s (session timeout 10 s)"
        wait_until(
            lambda: (
                len(set(source_offsets(consume_all(setup.target_endpoint, replica, timeout_s=20))))
                >= 40_000
            ),
            60,
        )
        print(f"takeover after kill -9: {takeover:.1f}s")
    finally:
        for worker in (a, b):
            if worker.running:
                worker.stop()


def test_forked_workers_split_the_flow(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("forked")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 6)])
    produce_spread(setup.source_endpoint, topic, 30_000)
    with Replicator(setup, "--workers", "2", log_dir=tmp_path) as worker:
        wait_until(lambda: count(setup.target_endpoint, f"{setup.source}.{topic}") >= 30_000, 90)
        assert worker.running, worker.log()
    log = worker.log()
    assert log.count("worker started") == 2, log
    assert worker.process is not None and worker.process.returncode == 0, log


def test_heartbeats_are_replicated_in_mm2_format(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("hb")])
    replica = f"{setup.source}.heartbeats"
    with Replicator(setup, log_dir=tmp_path):

        def latest() -> Heartbeat | None:
            if replica not in dc2.admin().list_topics():
                return None
            beats = [
                Heartbeat.decode(r.key or b"", r.value or b"")
                for r in consume_all(setup.target_endpoint, replica, timeout_s=5)
            ]
            mine = [b for b in beats if (b.source, b.target) == (setup.source, setup.target)]
            return max(mine, key=lambda b: b.timestamp_ms) if len(mine) >= 3 else None

        beat = wait_until(latest, 30, 0.5, what="three replicated heartbeats")
    latency_s = time.time() - beat.timestamp_ms / 1000
    assert latency_s < 10


def test_transforms_filter_mask_and_route(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("pii")
    transforms = [
        {"type": "filter", "options": {"key_regex": "^test-"}},
        {"type": "mask_json_fields", "options": {"fields": ["card.number"]}},
        {"type": "route", "options": {"pattern": "\\.pii$", "replacement": ".clean"}},
    ]
    setup = flow_setup(tmp_path, dc1, dc2, [topic], transforms=transforms)
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    rows = [
        (b"test-1", json.dumps({"card": {"number": "4111"}, "n": 1}).encode()),
        (b"real-1", json.dumps({"card": {"number": "4242"}, "n": 2}).encode()),
        (b"real-2", b"not json"),
    ]
    produce_batch(setup.source_endpoint, topic, rows)
    routed = f"{setup.source}.{names.prefix}.clean"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: count(setup.target_endpoint, routed) >= 2, 30)
        progress_store = ProgressStore(setup.target_endpoint, progress_topic(setup.source))
        wait_until(lambda: progress_store.refresh().get(_tp(topic, 0)), 10)
    records = consume_all(setup.target_endpoint, routed, expected=2)
    assert [r.key for r in records] == [b"real-1", b"real-2"]
    assert json.loads(records[0].value or b"") == {"card": {"number": "****"}, "n": 2}
    assert records[1].value == b"not json"
    # Progress passes the filtered record: a restart does not re-read it.
    assert progress_store.refresh()[_tp(topic, 0)].next_offset == 3
