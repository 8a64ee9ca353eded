"""``drkit verify --spark-master spark://…`` on a real Spark standalone cluster.

The master and the worker are the daemons a Spark deployment runs, started from pyspark's own
distribution (drkit/accounting/standalone.py): the driver (drkit verify) and the executors are
separate JVMs, the Kafka connector jars and the job's Python stages travel to the executors,
and the flow's filter transform runs in the executors' Python workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from drkit.accounting.standalone import standalone_cluster
from drkit.errors import AccountingError
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, produce_batch
from drkit.records import TopicPartition
from drkit.topology.internal_topics import checkpoints_topic
from tests.conftest import Names
from tests.integration.test_accounting import replicated
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until

pytestmark = pytest.mark.spark


def test_verify_runs_on_a_spark_standalone_cluster_end_to_end(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("standalone")
    drop_test_keys = {"type": "filter", "options": {"key_regex": "^test-"}}
    setup = flow_setup(tmp_path, dc1, dc2, [topic], transforms=[drop_test_keys])
    dc1.admin().create_topics([TopicSpec(topic, 3)])
    produce_batch(setup.source_endpoint, topic, ((f"k{i}".encode(), b"v") for i in range(20_000)))
    produce_batch(setup.source_endpoint, topic, [(b"test-1", b"dropped")] * 30, partition=1)
    replica = f"{setup.source}.{topic}"
    group = names.group("billing")
    commit_group_offsets(setup.source_endpoint, group, {TopicPartition(topic, 0): 1_000})
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: replicated(setup, replica, 20_000), 120, 0.5)
        # The group's failover position comes from a checkpoint: wait for the first one.
        wait_until(lambda: replicated(setup, checkpoints_topic(setup.source), 1), 60, 0.5)

    with standalone_cluster(tmp_path / "spark", cores=2, memory="2g") as cluster:
        run = subprocess.run(
            [sys.executable, "-m", "drkit", "verify", "--config", str(setup.path), "--flow",
             setup.config.flows[0].name, "--group", group, "--spark-master", cluster.master_url,
             "--out", str(tmp_path / "out"), "--output", "json"],
            capture_output=True, text=True, timeout=420, check=False,
        )  # fmt: skip
        with urllib.request.urlopen(f"{cluster.ui_url}/json/", timeout=5) as answer:
            master = json.load(answer)

    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    summary = json.loads(run.stdout)
    totals = summary["totals"]
    assert (totals["records"], totals["replicated_once"], totals["filtered"]) == (
        20_030,
        20_000,
        30,
    )
    assert (totals["missing"], totals["duplicated_records"], totals["unreplicated_tail"]) == (
        0,
        0,
        0,
    )
    assert (totals["unmapped_replicas"], totals["mismatched_replicas"]) == (0, 0)
    (checked,) = summary["groups"]
    assert (checked["s"], checked["skipped"], checked["exact"]) == (1_000, 0, True)
    assert summary["ok"] is True
    # It ran on the cluster: the master lists the finished application and its executors' cores.
    finished = [app["name"] for app in master["completedapps"]]
    assert finished == [f"drkit verify {setup.config.flows[0].name}"], master
    assert master["completedapps"][0]["cores"] == 2


def _spark_daemons(work: Path) -> set[str]:
    """Spark daemons running in ``work`` (their working directory): this test's own, not
    those of a test another worker runs beside it."""
    found = subprocess.run(
        ["pgrep", "-f", "org.apache.spark.deploy"], capture_output=True, text=True, check=False
    )
    mine = set()
    for pid in found.stdout.split():
        try:
            if Path(f"/proc/{pid}/cwd").resolve().is_relative_to(work):
                mine.add(pid)
        except OSError:  # it exited meanwhile
            continue
    return mine


def test_a_worker_that_cannot_start_is_named_and_nothing_is_left_running(tmp_path: Path) -> None:
    assert _spark_daemons(tmp_path) == set()
    with (
        pytest.raises(AccountingError, match="the Spark worker exited") as raised,
        standalone_cluster(tmp_path / "spark", memory="lots"),
    ):
        pass
    assert "memory" in str(raised.value).lower()
    assert _spark_daemons(tmp_path) == set(), "the master was left running"
