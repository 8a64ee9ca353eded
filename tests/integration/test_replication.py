"""Replication acceptance on real clusters: completeness, order, crashes, topics, loops, limits."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.records import Record
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.progress import Progress, ProgressStore
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, Origin, Provenance
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import progress_topic
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import (
    Replicator,
    check_copy,
    flow_setup,
    free_ports,
    progress_behind,
    progress_history,
    scrape,
    wait_until,
)


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
        origin = Origin.decode(first.header(ORIGIN_HEADER) or b"")
        assert origin.cluster_id == dc1.admin().describe_cluster()[0]
        assert origin.written_to == (dc2.admin().describe_cluster()[0], replica)


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
    from drkit.records import TopicPartition

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


# Beyond one topic-refresh interval: a cooperative rebalance of one member, the target
# partitions being created and becoming visible, and the first fetch (measured: 0.3 s past it).
NEW_PARTITION_MARGIN_S = 5.0


def produce_keyed(endpoint: ClusterEndpoint, topic: str, partition: int, n: int) -> None:
    """``n`` records with unique keys (the topic may be compacted) into one partition."""
    produce_batch(
        endpoint,
        topic,
        ((f"key-{partition}-{i}".encode(), f"value-{i}".encode()) for i in range(n)),
        partition=partition,
    )


@pytest.mark.parametrize(
    "in_use",
    [
        pytest.param(False, id="grown-before-use"),
        pytest.param(True, id="grown-in-use"),
    ],
)
def test_new_topic_and_added_partitions_are_replicated(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, in_use: bool
) -> None:
    """A new topic is created on the target with its configs; partitions added to it start
    replicating within one topic-refresh interval plus a margin; every record arrives once, in
    its own partition number, in order.  ``in_use``: the original partitions' records were
    replicated before the topic grew (the target producer already knows the topic)."""
    setup = flow_setup(tmp_path, dc1, dc2, [f"{names.prefix}\\..*"])
    flow = setup.config.flows[0]
    topology = FlowTopology.of(flow)
    refresh_s = flow.topic_refresh_interval_s
    per_partition = 300
    existing = names.topic("existing")
    dc1.admin().create_topics([TopicSpec(existing, 1)])
    with Replicator(setup, log_dir=tmp_path) as worker:

        def replicating(predicate: Callable[[], bool]) -> Callable[[], bool]:
            def check() -> bool:
                assert worker.running, f"the flow stopped:\n{worker.log()[-3000:]}"
                return predicate()

            return check

        wait_until(lambda: topology.target_topic(existing) in dc2.admin().list_topics(), 30)
        topic = names.topic("new")
        replica = topology.target_topic(topic)
        configs = {
            "retention.ms": "12345678",
            "cleanup.policy": "compact",
            "max.message.bytes": "2000000",
        }
        created = time.monotonic()
        dc1.admin().create_topics([TopicSpec(topic, 3, configs=configs)])
        wait_until(
            lambda: replica in dc2.admin().list_topics(),
            refresh_s + NEW_PARTITION_MARGIN_S,
            0.2,
            what=f"new topic on the target within {refresh_s}+{NEW_PARTITION_MARGIN_S}s",
        )
        topic_after = time.monotonic() - created
        assert dc2.admin().list_topics()[replica].partition_count == 3
        replicated = dc2.admin().topic_configs([replica])[replica]
        assert {k: replicated[k].value for k in configs} == configs
        original, added = (0, 1, 2), (3, 4)
        if in_use:
            for partition in original:
                produce_keyed(setup.source_endpoint, topic, partition, per_partition)
            wait_until(
                replicating(lambda: count(setup.target_endpoint, replica) >= 3 * per_partition),
                30,
                what="the original partitions replicated",
            )
        # Grow the source: the new partitions' records arrive in the same partition numbers.
        dc1.admin().create_partitions(topic, 5)
        grown = time.monotonic()
        for partition in added:
            produce_keyed(setup.source_endpoint, topic, partition, per_partition)

        def added_started() -> bool:
            ends = dc2.admin().topic_offsets(replica)
            return all(ends.get(p, (0, 0))[1] > 0 for p in added)

        wait_until(
            replicating(added_started),
            refresh_s + NEW_PARTITION_MARGIN_S,
            0.1,
            what=f"records of the added partitions within {refresh_s}+{NEW_PARTITION_MARGIN_S}s",
        )
        partition_after = time.monotonic() - grown
        if not in_use:
            for partition in original:
                produce_keyed(setup.source_endpoint, topic, partition, per_partition)
        wait_until(
            replicating(lambda: count(setup.target_endpoint, replica) >= 5 * per_partition),
            60,
            what="every record of the topic",
        )
    assert worker.process is not None and worker.process.returncode == 0, worker.log()
    source = consume_all(setup.source_endpoint, topic, expected=5 * per_partition, timeout_s=60)
    check = check_copy(source, consume_all(setup.target_endpoint, replica, timeout_s=60))
    assert check.exact, check.summary()
    assert len(source) == check.target_count == 5 * per_partition
    assert check.sequences == {p: list(range(per_partition)) for p in range(5)}, check.summary()
    print(
        f"new topic on the target after {topic_after:.1f}s; added partitions replicating "
        f"after {partition_after:.1f}s (refresh interval {refresh_s}s)"
    )


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
    assert code == 10, log
    assert f"cannot replicate {topic} partition 0 offset 10" in log
    assert "MSG_SIZE_TOO_LARGE" in log
    assert "Traceback" not in log
    progress = ProgressStore(setup.target_endpoint, progress_topic(setup.source)).refresh()
    assert progress[_tp(topic, 0)].next_offset == 10, "progress passed the refused record"
    values = [r.value for r in consume_all(setup.target_endpoint, replica, timeout_s=10)]
    assert values[:10] == [v for _, v in payloads[:10]]


def _healthz(port: int) -> tuple[int, str] | None:
    """(status, body) of the worker's /healthz; None while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as refused:
        return int(refused.code), refused.read().decode()
    except OSError:
        return None


def test_healthz_names_a_flow_that_ended_while_the_process_runs_its_others(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A process with two flows: one ends for good on a record the target refuses, the other
    goes on - the process stays up, and /healthz (a liveness probe) says which flow it lost."""
    topic = names.topic("big-health")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], reverse=True)
    replica = f"{setup.source}.{topic}"
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    dc2.admin().create_topics([TopicSpec(replica, 1, configs={"max.message.bytes": "100000"})])
    port = free_ports()
    with Replicator(setup, "--metrics-port", str(port), log_dir=tmp_path) as worker:
        assert wait_until(lambda: _healthz(port), 60, 0.2, what="/healthz") == (200, "ok\n")
        produce_batch(setup.source_endpoint, topic, [(b"k", os.urandom(500_000))])
        flow = f"{setup.source}->{setup.target}"
        _status, body = wait_until(
            lambda: (answer := _healthz(port)) and answer[0] == 503 and answer,
            90, 0.5, what="/healthz 503",
        )  # fmt: skip
        assert body.startswith(f"flow {flow} ended: cannot replicate {topic} partition 0 offset 0")
        assert body.count("\n") == 1, body  # the reverse flow is not named: it runs
        assert worker.running, worker.log()
        metrics = scrape(port)
        assert metrics is not None
        assert metrics.value("drkit_replication_flow_state", flow=flow, state="failed") == 1.0


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
    assert code == 10, log
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
    """Two ``drkit replicate`` processes share a flow; ``b`` is killed -9 mid-stream and ``a``
    takes its partitions over from b's last stored progress.  Nothing is missing, and the only
    duplicates are exactly the records b had written above its last stored progress."""
    topic = names.topic("scaled")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    topology = FlowTopology.of(setup.config.flows[0])
    dc1.admin().create_topics([TopicSpec(topic, 8)])
    replica = topology.target_topic(topic)
    port_a = free_ports(2)
    port_b = port_a + 1
    a = Replicator(setup, "--worker-id", "a", "--metrics-port", str(port_a), log_dir=tmp_path)
    b = Replicator(setup, "--worker-id", "b", "--metrics-port", str(port_b), log_dir=tmp_path)
    a.start()
    b.start()
    try:

        def metric(port: int, name: str, **labels: str) -> float | None:
            snapshot = scrape(port)
            return None if snapshot is None else snapshot.value(name, flow=topology.name, **labels)

        def assigned(port: int) -> float | None:
            return metric(port, "drkit_replication_assigned_partitions")

        # 8 data partitions + heartbeats shared by the two members of the group.
        wait_until(
            lambda: (
                (assigned(port_a) or 0) > 0
                and (assigned(port_b) or 0) > 0
                and (assigned(port_a) or 0) + (assigned(port_b) or 0) == 9
            ),
            60,
            0.5,
            what="shared assignment",
        )
        produce_spread(setup.source_endpoint, topic, 20_000)
        wait_until(lambda: count(setup.target_endpoint, replica) >= 20_000, 60)
        # Kill b while records flow, so that it dies with records written above its progress.
        more = threading.Thread(
            target=produce_spread, args=(setup.source_endpoint, topic, 60_000, 20_000)
        )
        more.start()
        try:
            wait_until(
                lambda: count(setup.target_endpoint, replica) > 40_000,
                60,
                0.02,
                what="replication of the second batch under way",
            )
            b.kill()
        finally:
            more.join(120)
        produce_spread(setup.source_endpoint, topic, 20_000, start=80_000)
        # b's partitions come back after its session times out (10 s): the wait is a liveness
        # bound three times that wide, not a speed claim.
        wait_until(lambda: assigned(port_a) == 9, 30, 0.25, what="takeover of b's partitions")
        # Caught up by the stored progress (what a next owner resumes from), not by the
        # record count (duplicates reach 100,000 early) nor by the worker's gauge alone (it
        # once read 0 with a taken-over partition 3,938 records behind).
        wait_until(
            lambda: not progress_behind(setup, topic), 90, 0.5, what="a's progress at the end"
        )
        assert metric(port_a, "drkit_replication_lag_records", topic=topic) == 0.0
        assert a.running, a.log()
    finally:
        for worker in (a, b):
            if worker.running:
                worker.stop()
    source = consume_all(setup.source_endpoint, topic, expected=100_000, timeout_s=60)
    check = check_copy(source, consume_all(setup.target_endpoint, replica, timeout_s=60))
    assert len(source) == 100_000
    assert not (check.missing or check.altered or check.misplaced), check.summary()
    # Where b stood: the last progress it stored per partition before it died.
    b_progress: dict[int, int] = {}
    for progress in progress_history(setup.target_endpoint, topology.progress_topic):
        if progress.source.topic == topic and progress.worker.split("-")[0] == "b":
            b_progress[progress.source.partition] = progress.next_offset
    ends = {p: end for p, (_, end) in dc1.admin().topic_offsets(topic).items()}
    expected_duplicates = 0
    for partition, sequence in sorted(check.sequences.items()):
        descents = [i for i in range(1, len(sequence)) if sequence[i] <= sequence[i - 1]]
        if not descents:  # never re-replicated: every record once, in order
            assert sequence == list(range(ends[partition])), f"partition {partition}"
            continue
        # Re-replicated once, by a, from where b's stored progress said: b's unrecorded tail
        # [resume, written) is on the target twice, nothing else.
        (cut,) = descents
        resume, written = sequence[cut], sequence[cut - 1] + 1
        assert resume == b_progress.get(partition), (
            f"partition {partition}: a resumed at {resume}, b's last stored progress is "
            f"{b_progress.get(partition)}"
        )
        assert sequence == [*range(written), *range(resume, ends[partition])], partition
        expected_duplicates += written - resume
    assert check.duplicate_count == expected_duplicates, check.summary()
    print(
        f"after kill -9: duplicates {check.duplicate_count} "
        f"(b's tail above its stored progress) in {len(check.duplicates)} partitions"
    )


def test_forked_workers_split_the_flow(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """``--workers 2``: two processes share the partitions; a graceful run copies every record
    exactly once, in order, and each worker's metrics count exactly what it replicated."""
    topic = names.topic("forked")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    topology = FlowTopology.of(setup.config.flows[0])
    replica = topology.target_topic(topic)
    dc1.admin().create_topics([TopicSpec(topic, 6)])
    port = free_ports(2)  # worker i serves its metrics on port + i
    ports = (port, port + 1)
    with Replicator(setup, "--workers", "2", "--metrics-port", str(port), log_dir=tmp_path) as w:

        def metric(name: str, worker_port: int, **labels: str) -> float | None:
            snapshot = scrape(worker_port)
            return None if snapshot is None else snapshot.value(name, flow=topology.name, **labels)

        def split() -> list[float] | None:
            held = [metric("drkit_replication_assigned_partitions", p) for p in ports]
            shares = [h for h in held if h]
            return shares if len(shares) == 2 and sum(shares) == 7 else None

        # 6 data partitions + the source's heartbeats, split between the two processes.
        wait_until(split, 60, 0.5, what="both workers holding partitions")
        produce_spread(setup.source_endpoint, topic, 30_000)

        def replicated() -> list[float] | None:
            counts = [
                metric("drkit_replication_records_total", p, topic=topic) or 0.0 for p in ports
            ]
            lags = [metric("drkit_replication_lag_records", p, topic=topic) for p in ports]
            return counts if sum(counts) >= 30_000 and lags == [0.0, 0.0] else None

        counts = wait_until(replicated, 90, 0.5, what="30k records counted, lag 0 in both")
        # Counted once each: a record counted twice by the metrics (or replicated twice) shows.
        assert sum(counts) == 30_000, counts
        assert min(counts) > 0, f"one worker replicated nothing: {counts}"
        assert w.running, w.log()
    log = w.log()
    assert log.count("worker started") == 2, log
    assert w.process is not None and w.process.returncode == 0, log
    source = consume_all(setup.source_endpoint, topic, expected=30_000, timeout_s=60)
    check = check_copy(source, consume_all(setup.target_endpoint, replica, timeout_s=60))
    # A graceful run (rebalances hand partitions over after storing progress) duplicates nothing.
    assert check.exact, check.summary()
    assert check.target_count == 30_000 and len(source) == 30_000
    print(f"per-worker records {counts}")


def test_heartbeats_are_replicated_in_mm2_format(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, dc1, dc2, [names.topic("hb")])
    replica = f"{setup.source}.heartbeats"
    started_ms = int(time.time() * 1000)
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
    # Emitted by this worker and copied while it ran (not a stale beat of an earlier run): its
    # time is between the start and now - a baseline of this run, not a speed threshold.
    assert started_ms <= beat.timestamp_ms <= time.time() * 1000, (started_ms, beat)


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
