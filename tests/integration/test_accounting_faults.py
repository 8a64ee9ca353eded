"""Accounting under faults, on real brokers: transactions, kill -9, records lost before
replication, loops and replicas no offset sync describes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from drkit.accounting.verify import verify
from drkit.kafka import ClusterEndpoint, KafkaAdmin, make_producer
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason
from drkit.replication.loss_repo import LossRepository
from drkit.store.db import StateStore, database_url
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

pytestmark = pytest.mark.spark


def visible(endpoint: ClusterEndpoint, topic: str, isolation: str = "read_committed") -> int:
    """Records a consumer with ``isolation`` reads from ``topic`` (0 before it exists)."""
    if topic not in KafkaAdmin(endpoint).list_topics():
        return 0
    return len(consume_all(endpoint, topic, timeout_s=30, isolation=isolation))


def test_aborted_source_transactions_are_neither_records_nor_missing(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("txn")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    producer = make_producer(setup.source_endpoint, {"transactional.id": names.prefix})
    producer.init_transactions(30)
    for batch in range(20):  # 50 records each; every fourth transaction is aborted
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, b"v", f"k{batch}-{i}".encode(), partition=i % 2)
        producer.flush(30)  # on the broker first: abort would purge unsent records locally
        if batch % 4 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    replica = f"{setup.source}.{topic}"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: visible(setup.target_endpoint, replica) >= 750, 60, 0.5)

    summary = verify(
        setup.config, setup.config.flows[0], [], None, tmp_path / "out", connect=KafkaAdmin
    )
    totals = summary["totals"]
    # 15 committed transactions of 50; the 250 aborted records were never data.
    assert (totals["records"], totals["replicated_once"]) == (750, 750)
    assert (totals["missing"], totals["duplicated_records"], totals["unreplicated_tail"]) == (
        0,
        0,
        0,
    )
    assert summary["missing_ranges"] == []
    assert summary["ok"] is True


def test_an_open_source_transaction_is_not_yet_data(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A transaction still open on the source while verify runs: its records are neither
    checked nor waited for (the range ends at the last stable offset)."""
    topic = names.topic("open")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    producer = make_producer(
        setup.source_endpoint,
        {"transactional.id": names.prefix, "transaction.timeout.ms": 300_000},
    )
    producer.init_transactions(30)
    for batch in range(10):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, b"v", f"k{batch}-{i}".encode(), partition=0)
        producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(50):
        producer.produce(topic, b"v", f"open-{i}".encode(), partition=0)
    producer.flush(30)
    try:
        replica = f"{setup.source}.{topic}"
        with Replicator(setup, log_dir=tmp_path):
            wait_until(lambda: visible(setup.target_endpoint, replica) >= 500, 60, 0.5)
        assert visible(setup.source_endpoint, topic, "read_uncommitted") == 550
        summary = verify(
            setup.config, setup.config.flows[0], [], None, tmp_path / "out", connect=KafkaAdmin
        )
    finally:
        producer.abort_transaction(30)
    totals = summary["totals"]
    assert (totals["records"], totals["replicated_once"], totals["unreplicated_tail"]) == (
        500,
        500,
        0,
    )
    assert summary["partitions"][0]["last_offset"] < 520  # 10 commit markers among 500 records
    assert summary["ok"] is True


def test_exactly_once_flow_killed_mid_transaction_verifies_exact(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("ledger")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], exactly_once=True)
    dc1.admin().create_topics([TopicSpec(topic, 4)])
    payloads = ((f"key-{i}".encode(), f"value-{i}".encode()) for i in range(40_000))
    produce_batch(setup.source_endpoint, topic, payloads)
    replica = f"{setup.source}.{topic}"
    target = KafkaAdmin(setup.target_endpoint)

    def written() -> int:  # high watermarks: committed, open and aborted copies alike
        if replica not in target.list_topics():
            return 0
        return sum(end - start for start, end in target.topic_offsets(replica).values())

    # Long transactions (5 s) so the kill lands inside one with copies already written.
    worker = Replicator(setup, "--commit-interval", "5", log_dir=tmp_path).start()
    wait_until(lambda: written() > 10_000, 60, 0.05, what="replication under way")
    worker.kill()
    produce_batch(setup.source_endpoint, topic, ((b"late", b"v") for _ in range(2_000)))
    with Replicator(setup, log_dir=tmp_path) as restarted:
        wait_until(
            lambda: visible(setup.target_endpoint, replica) >= 42_000,
            120,
            1.0,
            what="all records committed after the restart",
        )
        assert restarted.running, restarted.log()
    # The kill left copies in a transaction the restart aborted: they are on the target.
    everything = visible(setup.target_endpoint, replica, "read_uncommitted")
    assert everything > 42_000, "the kill did not leave an aborted transaction behind"

    summary = verify(
        setup.config, setup.config.flows[0], [], None, tmp_path / "out", connect=KafkaAdmin
    )
    totals = summary["totals"]
    assert (totals["records"], totals["replicated_once"]) == (42_000, 42_000)
    assert (totals["missing"], totals["duplicated_records"], totals["extra_copies"]) == (0, 0, 0)
    assert (totals["unmapped_replicas"], totals["mismatched_replicas"]) == (0, 0)
    assert summary["ok"] is True


def run_verify(setup: FlowSetup, out: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``drkit verify`` as an operator runs it; returns the process and its summary.json."""
    done = subprocess.run(
        [sys.executable, "-m", "drkit", "verify", "--config", str(setup.path), "--flow",
         setup.config.flows[0].name, "--out", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert (out / "summary.json").exists(), done.stdout + done.stderr
    return done, json.loads((out / "summary.json").read_text())


def test_records_deleted_before_replication_are_lost_and_verify_fails(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("truncated")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    replica = f"{setup.source}.{topic}"
    produce_batch(setup.source_endpoint, topic, ((f"a{i}".encode(), b"v") for i in range(400)))
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: visible(setup.target_endpoint, replica) >= 400, 60, 0.5)
    # Replication stopped; 2,000 more arrive and retention takes everything below 2,000:
    # 1,600 records that were never replicated are gone.
    produce_batch(setup.source_endpoint, topic, ((f"b{i}".encode(), b"v") for i in range(2000)))
    source = TopicPartition(topic, 0)
    assert dc1.admin().delete_records({source: 2000}) == {source: 2000}

    # (a) The worker has not run since: verify finds the gap on its own.
    done, summary = run_verify(setup, tmp_path / "out-a")
    assert done.returncode == 9, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if f"{topic}-0" in x and "LOST" in x]
    assert "1600" in line and "400..1999" in line
    (lost,) = summary["lost_before_replication"]
    assert (lost["src_topic"], lost["src_partition"], lost["records"]) == (topic, 0, 1600)
    assert (lost["recorded"], lost["unrecorded"]) == (0, 1600)
    assert lost["ranges"] == [{"from_offset": 400, "to_offset": 1999, "records": 1600}]
    assert summary["totals"]["lost_before_replication"] == 1600
    assert summary["totals"]["unreplicated_tail"] == 400  # 2000..2399, still to be copied
    assert summary["ok"] is False

    # (b) The loss was recorded (standing in for the worker) and replication caught up.
    store = StateStore(database_url(setup.config, tmp_path))
    store.ensure_current()
    LossRepository(store).record(
        LossEvent(
            setup.config.flows[0].name,
            source,
            400,
            1999,
            LossReason.TRUNCATED,
            int(time.time() * 1000),
            "test",
        )
    )
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: visible(setup.target_endpoint, replica) >= 800, 60, 0.5)
    # (b) and (c) in this process (Spark's JVM started once): (a) ran the command itself.
    summary = verify(setup.config, setup.config.flows[0], [], None, tmp_path / "out-b",
                     store=store, connect=KafkaAdmin)  # fmt: skip
    (lost,) = summary["lost_before_replication"]
    assert (lost["records"], lost["recorded"], lost["unrecorded"]) == (1600, 1600, 0)
    totals = summary["totals"]
    assert totals["lost_before_replication"] == 1600
    assert (totals["records"], totals["replicated_once"], totals["missing"]) == (400, 400, 0)
    assert totals["unreplicated_tail"] == 0
    assert summary["ok"] is False

    # (c) Retention then takes every record left: nothing to compare, but the loss remains.
    assert dc1.admin().delete_records({source: 2400}) == {source: 2400}
    summary = verify(setup.config, setup.config.flows[0], [], None, tmp_path / "out-c",
                     store=store, connect=KafkaAdmin)  # fmt: skip
    assert (summary["totals"]["records"], summary["totals"]["lost_before_replication"]) == (0, 1600)
    assert summary["ok"] is False


def test_only_true_loops_are_left_out_and_forwarded_headers_are_data(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("mixed")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    source_id, target_id = dc1.admin().describe_cluster()[0], dc2.admin().describe_cluster()[0]
    assert source_id and target_id
    origins: dict[str, bytes | None] = {
        "native": None,
        # A drkit copy from the target, sitting where drkit wrote it: a true loop.
        "loop": f"{target_id}/{source_id}/{topic}".encode(),
        # A legacy drkit copy (bare cluster id): a loop, as it always was.
        "legacy": target_id.encode(),
        # An application read a drkit copy elsewhere and forwarded its headers: new data.
        "forwarded": f"{target_id}/{source_id}/{topic}-replica-elsewhere".encode(),
        "malformed": f"{target_id}/{source_id}".encode(),
    }
    kinds = ["native"] * 4 + ["loop", "legacy", "forwarded", "malformed"]
    producer = make_producer(setup.source_endpoint)
    for i in range(240):  # 30 of each kind but native (120), interleaved
        kind = kinds[i % len(kinds)]
        origin = origins[kind]
        headers: list[tuple[str, str | bytes | None]] | None = (
            [("drkit-origin", origin)] if origin is not None else None
        )
        producer.produce(topic, b"v", kind.encode(), partition=0, headers=headers)
    assert producer.flush(30) == 0
    replica = f"{setup.source}.{topic}"
    with Replicator(setup, log_dir=tmp_path):
        # Today's replicator copies the new-format loops too; the rewritten one skips them.
        wait_until(lambda: visible(setup.target_endpoint, replica) >= 180, 60, 0.5)

    summary = verify(
        setup.config, setup.config.flows[0], [], None, tmp_path / "out", connect=KafkaAdmin
    )
    totals = summary["totals"]
    # native 120 + forwarded 30 + malformed 30; the 60 loops are not this flow's data.
    assert (totals["records"], totals["replicated_once"], totals["missing"]) == (180, 180, 0)
    assert totals["unreplicated_tail"] == 0
    assert summary["ok"] is True


def test_replicas_no_offset_sync_describes_fail_the_verdict_and_are_named(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("unmapped")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    for partition in (0, 1):
        payloads = ((f"k{i}".encode(), b"v") for i in range(300))
        produce_batch(setup.source_endpoint, topic, payloads, partition=partition)
    replica = f"{setup.source}.{topic}"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: visible(setup.target_endpoint, replica) >= 600, 60, 0.5)
    # Copies of source partition 0 written into replica partition 1 (another tool, a bad
    # restore...): no offset-sync run maps partition 0 there, so failover cannot use them.
    strays = consume_all(setup.target_endpoint, replica, partitions=[0])[100:105]
    for record in strays:
        produce_batch(
            setup.target_endpoint, replica, [(record.key, record.value)], 1, record.headers
        )

    summary = verify(
        setup.config, setup.config.flows[0], [], None, tmp_path / "out", connect=KafkaAdmin
    )
    totals = summary["totals"]
    assert (totals["unmapped_replicas"], totals["missing"]) == (5, 0)
    assert summary["ok"] is False
    assert summary["method"] == "per-record"  # the stray copies overlap partition 0's run
    assert summary["unmapped"] == [
        {
            "src_topic": topic,
            "src_partition": 0,
            "dst_topic": replica,
            "dst_partition": 1,
            "replicas": 5,
            "first_src_offset": 100,
            "last_src_offset": 104,
        }
    ]
