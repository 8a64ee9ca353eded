"""Spark accounting on real clusters: a clean flow proves clean; damage is found exactly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from drkit.accounting.session import connector_jars, job_file
from drkit.accounting.verify import verify
from drkit.kafka import KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_all, produce_batch
from drkit.records import TopicPartition
from drkit.replication.progress import Progress, progress_key
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.topology.internal_topics import progress_topic
from tests.conftest import Names
from tests.failover_support import checkpointed
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

TABLES = ("partitions", "groups", "missing_ranges", "duplicates", "unmapped")

pytestmark = pytest.mark.spark


def replicated(setup: FlowSetup, replica: str, expected: int) -> bool:
    admin = KafkaAdmin(setup.target_endpoint)
    if replica not in admin.list_topics():
        return False
    return sum(e - s for s, e in admin.topic_offsets(replica).values()) >= expected


RECORDS = 200_000


def test_a_clean_flow_proves_clean_from_its_copy_runs(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """200,000 records, 4 partitions: exact, mapped, every group exact, and no record shuffled.
    (A million and more: ``python -m bench accounting``.)"""
    topic = names.topic("clean")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 4)])
    produce_batch(
        setup.source_endpoint,
        topic,
        ((f"k{i % 5000}".encode(), b"x" * 20) for i in range(RECORDS)),
    )
    replica = f"{setup.source}.{topic}"
    group = names.group("app")
    committed = {TopicPartition(topic, p): 10_000 + p for p in range(4)}
    commit_group_offsets(setup.source_endpoint, group, committed)
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, replica, RECORDS), 180, 1.0)
        # The replica can be complete before the worker's next checkpoint round: stopping it
        # then left the group without a checkpoint (T translated instead; seen on a cold run).
        wait_until(lambda: checkpointed(setup, {group: committed}), 60, 0.5, "the checkpoint")
    summary = verify(
        setup.config, setup.config.flows[0], [group], None, tmp_path / "out", connect=KafkaAdmin
    )
    totals = summary["totals"]
    assert totals["records"] == RECORDS
    assert totals["replicated_once"] == RECORDS
    assert (totals["missing"], totals["duplicated_records"], totals["unreplicated_tail"]) == (
        0,
        0,
        0,
    )
    assert totals["order_violations"] == 0
    # Every replica is described exactly by drkit's offset-sync runs (read by the Spark job).
    assert (totals["unmapped_replicas"], totals["mismatched_replicas"]) == (0, 0)
    assert summary["ok"] is True
    assert summary["method"] == "copy-runs"  # a healthy flow: no record was shuffled
    assert len(summary["groups"]) == 4 and all(g["exact"] for g in summary["groups"])
    # No commit on the target: T is the latest checkpoint, as an unplanned failover would use.
    assert {g["t_kind"] for g in summary["groups"]} == {"checkpoint"}
    assert (
        json.loads((tmp_path / "out" / "summary.json").read_text())["schema"] == "drkit.verify/v2"
    )
    assert (tmp_path / "out" / "partitions").is_dir()
    print(f"verified {RECORDS} records in {summary['elapsed_s']:.1f}s")


def test_damage_is_reported_exactly_where_it_is(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("damaged")
    drop_test_keys = {"type": "filter", "options": {"key_regex": "^test-"}}
    setup = flow_setup(tmp_path, dc1, dc2, [topic], transforms=[drop_test_keys])
    dc1.admin().create_topics([TopicSpec(topic, 3)])
    for partition in range(3):
        produce_batch(
            setup.source_endpoint,
            topic,
            ((f"k{i}".encode(), f"v{i}".encode()) for i in range(1000)),
            partition=partition,
        )
    # Not damage: 10 records the flow's filter drops on purpose, then 5 replicated ones.
    produce_batch(setup.source_endpoint, topic, [(b"test-1", b"t")] * 10, partition=2)
    produce_batch(setup.source_endpoint, topic, [(b"k", b"after")] * 5, partition=2)
    replica = f"{setup.source}.{topic}"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, replica, 3005), 60, 0.5)
    target = KafkaAdmin(setup.target_endpoint)

    # Damage 1: partition 1's replica is re-created from source offset 1 (record 0 lost).
    target.delete_topics([replica])
    wait_until(lambda: replica not in target.list_topics(), 30, 0.2)
    target.create_topics([TopicSpec(replica, 3)])
    restart = {0: 0, 1: 1, 2: 0}
    produce_batch(
        setup.target_endpoint,
        progress_topic(setup.source),
        [
            (
                progress_key(setup.target, TopicPartition(topic, p)),
                Progress(TopicPartition(topic, p), next_offset).value(),
            )
            for p, next_offset in restart.items()
        ],
    )
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, replica, 3004), 60, 0.5)

    # Damage 2: five records of partition 0 produced twice into the replica.
    copies = [
        r
        for r in consume_all(setup.target_endpoint, replica, partitions=[0])
        if Provenance.decode(r.header(SOURCE_HEADER) or b"").offset in range(500, 505)
    ]
    for record in copies:  # keep their provenance: they are duplicates, not foreign records
        produce_batch(
            setup.target_endpoint,
            replica,
            [(record.key, record.value)],
            partition=0,
            headers=record.headers,
        )

    # Damage 3: a group that "failed over" one past the right position on partition 2.
    group = names.group("billing")
    commit_group_offsets(setup.source_endpoint, group, {TopicPartition(topic, 2): 700})
    right = next(
        r.offset
        for r in consume_all(setup.target_endpoint, replica, partitions=[2])
        if Provenance.decode(r.header(SOURCE_HEADER) or b"").offset == 700
    )
    commit_group_offsets(setup.target_endpoint, group, {TopicPartition(replica, 2): right + 1})

    summary = verify(
        setup.config, setup.config.flows[0], [group], None, tmp_path / "out", connect=KafkaAdmin
    )
    parts = {p["src_partition"]: p for p in summary["partitions"]}
    assert (parts[0]["duplicated_records"], parts[0]["extra_copies"], parts[0]["missing"]) == (
        5,
        5,
        0,
    )
    assert (parts[1]["missing"], parts[1]["duplicated_records"]) == (1, 0)
    assert (parts[2]["missing"], parts[2]["duplicated_records"]) == (0, 0)
    assert [parts[p]["filtered"] for p in range(3)] == [0, 0, 10]
    assert parts[2]["unreplicated_tail"] == 0
    # The hand-made duplicates are the only replicas the offset-sync runs do not describe.
    # Their source offsets are covered by runs that name other target offsets.
    assert [parts[p]["mismatched_replicas"] for p in range(3)] == [5, 0, 0]
    assert [parts[p]["unmapped_replicas"] for p in range(3)] == [0, 0, 0]
    assert summary["missing_ranges"] == [
        {"src_topic": topic, "src_partition": 1, "from_offset": 0, "to_offset": 0, "records": 1}
    ]
    (checked,) = summary["groups"]
    assert (checked["src_partition"], checked["s"], checked["t"]) == (2, 700, right + 1)
    assert (checked["skipped"], checked["read_again"], checked["exact"]) == (1, 0, False)
    assert checked["t_kind"] == "target-commit"
    assert summary["ok"] is False
    assert summary["method"] == "per-record"  # the copy runs cannot explain the damage


def target_offset(setup: FlowSetup, replica: str, partition: int, source_offset: int) -> int:
    """Where the copy of ``source_offset`` sits in the replica (read from its provenance)."""
    return next(
        r.offset
        for r in consume_all(setup.target_endpoint, replica, partitions=[partition])
        if Provenance.decode(r.header(SOURCE_HEADER) or b"").offset == source_offset
    )


def table_rows(out: Path, table: str) -> list[dict[str, object]]:
    import pyarrow.parquet as pq

    return sorted(pq.read_table(out / table).to_pylist(), key=repr)


def test_copy_runs_and_record_by_record_write_the_same_tables_for_a_healthy_flow(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    # Exactly-once: commit markers on the target split the copies into many runs.
    topic = names.topic("runs")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], exactly_once=True)
    dc1.admin().create_topics([TopicSpec(topic, 3)])
    produce_batch(
        setup.source_endpoint, topic, ((f"k{i % 50}".encode(), b"v") for i in range(6000))
    )
    replica = f"{setup.source}.{topic}"
    ends = {p: end for p, (_, end) in dc1.admin().topic_offsets(topic).items()}
    exact, off = names.group("exact"), names.group("off")
    commit_group_offsets(
        setup.source_endpoint, exact, {TopicPartition(topic, p): (0, 700, ends[2])[p] for p in ends}
    )
    commit_group_offsets(
        setup.source_endpoint, off, {TopicPartition(topic, p): 600 for p in (0, 1)}
    )
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, replica, 6000), 120, 0.5)
    produce_batch(setup.source_endpoint, topic, [(b"late", b"v")] * 25, partition=0)  # the tail
    # "off" failed over 4 records too far on partition 0 and 3 too short on partition 1.
    ahead, behind = target_offset(setup, replica, 0, 600), target_offset(setup, replica, 1, 600)
    commit_group_offsets(
        setup.target_endpoint,
        off,
        {TopicPartition(replica, 0): ahead + 4, TopicPartition(replica, 1): behind - 3},
    )
    copies = {
        p: [
            (r.offset, Provenance.decode(r.header(SOURCE_HEADER) or b"").offset)
            for r in consume_all(setup.target_endpoint, replica, partitions=[p])
        ]
        for p in (0, 1)
    }
    skipped = sum(1 for dst, src in copies[0] if src >= 600 and dst < ahead + 4)
    read_again = sum(1 for dst, src in copies[1] if src < 600 and dst >= behind - 3)

    flow = setup.config.flows[0]
    by_runs = verify(setup.config, flow, [exact, off], None, tmp_path / "runs", connect=KafkaAdmin)
    by_records = verify(
        setup.config,
        flow,
        [exact, off],
        None,
        tmp_path / "records",
        per_record=True,
        connect=KafkaAdmin,
    )
    assert (by_runs["method"], by_records["method"]) == ("copy-runs", "per-record")
    for table in TABLES:
        assert table_rows(tmp_path / "runs", table) == table_rows(tmp_path / "records", table)
    assert by_runs["totals"] == by_records["totals"]
    totals = by_runs["totals"]
    assert (totals["records"], totals["replicated_once"], totals["unreplicated_tail"]) == (
        6025,
        6000,
        25,
    )
    assert (totals["skipped_by_groups"], totals["read_again_by_groups"]) == (skipped, read_again)
    assert skipped > 0 and read_again > 0


def test_spark_submit_runs_the_job_from_a_written_spec(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """The cluster path: ``verify --write-spec`` then spark-submit of the job file itself."""
    topic = names.topic("submitted")
    keep_prod = {"type": "filter", "options": {"header": "env", "header_regex": "^test$"}}
    setup = flow_setup(tmp_path, dc1, dc2, [topic], transforms=[keep_prod])
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    produce_batch(setup.source_endpoint, topic, ((f"k{i}".encode(), b"v") for i in range(3000)))
    test_records = ((f"t{i}".encode(), b"v") for i in range(200))
    produce_batch(setup.source_endpoint, topic, test_records, headers=(("env", b"test"),))
    produce_batch(setup.source_endpoint, topic, ((f"k{i}".encode(), b"v") for i in range(100)))
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, f"{setup.source}.{topic}", 3100), 60, 0.5)
    spec_path = tmp_path / "spec" / "spec.json"
    spec_path.parent.mkdir()  # --write-spec refuses a missing directory (issue 45)
    written = subprocess.run(
        [sys.executable, "-m", "drkit", "verify", "--config", str(setup.path), "--flow",
         setup.config.flows[0].name, "--write-spec", str(spec_path), "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    answer = json.loads(written.stdout)
    assert answer["partitions"] == 2 and answer["command"][0] == "spark-submit"
    assert answer["py_files"] in answer["command"]  # the printed command ships the stages
    assert stat.S_IMODE(spec_path.stat().st_mode) == 0o600
    assert not (tmp_path / "out").exists()  # nothing ran yet

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    submitted = subprocess.run(
        [str(spark_submit), "--master", "local[2]", "--conf", "spark.driver.memory=768m",
         "--conf", "spark.sql.shuffle.partitions=4",  # 200 by default: minutes on 2 cores
         "--jars", ",".join(connector_jars()), "--py-files", answer["py_files"], str(job_file()),
         "--spec", str(spec_path), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=240, check=False, env=env,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] is True
    totals = summary["totals"]
    # The filter runs in the submitted job's Python workers (imported from the --py-files zip).
    assert (totals["records"], totals["replicated_once"], totals["filtered"]) == (3300, 3100, 200)
    assert (totals["missing"], totals["unreplicated_tail"]) == (0, 0)

    imported = subprocess.run(
        [sys.executable, "-m", "drkit", "verify", "--config", str(setup.path), "--flow",
         setup.config.flows[0].name, "--import-summary", str(tmp_path / "out" / "summary.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "3300 source records checked" in imported.stdout


def test_nothing_to_check_is_said_before_spark_starts(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("empty")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    result = subprocess.run(
        [sys.executable, "-m", "drkit", "verify", "--config", str(setup.path), "--flow",
         setup.config.flows[0].name, "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"nothing to check - no selected topic has records on {setup.source}" in result.stderr
    assert f"(topics selected: {topic})" in result.stderr
    assert "Traceback" not in result.stderr and "Spark" not in result.stderr
