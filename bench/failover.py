"""Benchmark: unplanned failover of many groups, from the command to the pointer moved.

A flow replicates one 50-partition topic; 100 consumer groups have committed offsets on every
partition and their checkpoints are on the target; then the source broker is killed and
``drkit failover --from ... --to ... --yes`` runs.  Measured: the command's wall time, and the
engine's own time from the run's start to ``move_pointer`` done.  Anchor (same run): the least
work any tool must do - read the checkpoint topic and write every group's offsets on the
target with the admin API.  Target: <= 5 s from command to pointer moved (the process
start, reading the plan's snapshot, and every step up to ``move_pointer``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

from bench.common import OUT, Clusters, markdown_table, start_clusters
from drkit.config import load_config
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.records import TopicPartition
from drkit.replication.progress import ProgressStore
from drkit.replication.topology import FlowTopology

RECORDS_PER_PARTITION = 40


def _write_config(clusters: Clusters, source: str, target: str, path: Path) -> Path:
    path.write_text(
        f"clusters:\n"
        f"  {source}: {{bootstrap_servers: '{clusters.dc1.bootstrap_servers}'}}\n"
        f"  {target}: {{bootstrap_servers: '{clusters.dc2.bootstrap_servers}'}}\n"
        f"flows:\n"
        f"  - {{source: {source}, target: {target}, topics: {{include: ['bench-fo-.*']}},\n"
        f"      groups: {{include: ['bench-fo-.*']}}}}\n"
        f"failover: {{fence_with_acls: true}}\n"
        f"state_store: {{url: 'sqlite:///{path.with_suffix('.db')}'}}\n"
    )
    return path


def _ready(config_path: Path, topic: str, groups: list[str], partitions: int) -> bool:
    config = load_config(config_path)
    flow = config.flows[0]
    topology = FlowTopology.of(flow)
    target = ClusterEndpoint(flow.target, config.clusters[flow.target])
    progress = ProgressStore(target, topology.progress_topic, missing_ok=True)
    checkpoints = CheckpointStore(target, topology.checkpoints_topic)
    try:
        done = progress.refresh()
        snapshot = checkpoints.refresh()
    finally:
        progress.close()
        checkpoints.close()
    caught_up = all(
        (p := done.get(TopicPartition(topic, i))) is not None
        and p.next_offset == RECORDS_PER_PARTITION
        for i in range(partitions)
    )
    return caught_up and all(len(snapshot.for_group(g)) == partitions for g in groups)


def main(groups: int = 100, partitions: int = 50) -> str:
    clusters = start_clusters(fresh=False)
    tag = uuid.uuid4().hex[:6]
    source, target = f"f{tag}", f"g{tag}"
    topic = f"bench-fo-{tag}"
    config_path = _write_config(clusters, source, target, OUT / f"failover-{tag}.yaml")
    source_admin = clusters.admin("dc1")
    source_admin.create_topics([TopicSpec(topic, partitions)])
    for p in range(partitions):
        produce_batch(clusters.dc1, topic, [(None, b"x")] * RECORDS_PER_PARTITION, partition=p)
    names = [f"bench-fo-{tag}-g{i:03d}" for i in range(groups)]
    for index, group in enumerate(names):
        at = index % (RECORDS_PER_PARTITION + 1)  # start, middle, end, everything between
        source_admin.alter_group_offsets(
            group, {TopicPartition(topic, p): at for p in range(partitions)}
        )
    replicate_log = (OUT / f"failover-{tag}-replicate.log").open("w")
    replicate = subprocess.Popen(
        [sys.executable, "-m", "drkit", "replicate", "--config", str(config_path)],
        stdout=replicate_log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300
        while not _ready(config_path, topic, names, partitions):
            if time.monotonic() > deadline or replicate.poll() is not None:
                raise RuntimeError("replication or checkpoints did not catch up")
            time.sleep(1)
        clusters.manager.kill_broker("dc1")  # the primary is lost
        started = time.perf_counter()
        started_at = time.time()
        done = subprocess.run(
            [sys.executable, "-m", "drkit", "failover", "--config", str(config_path),
             "--from", source, "--to", target, "--yes", "-o", "json"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - started
    finally:
        replicate.terminate()
        replicate.wait(60)
        clusters.manager.start_broker("dc1")
    if done.returncode != 0:
        raise RuntimeError(f"failover failed: {done.stderr[-2000:]}")
    run = json.loads(done.stdout)
    moved = next(s for s in run["steps"] if s["name"] == "move_pointer")
    pointer_moved = datetime.fromisoformat(moved["finished_at"]).timestamp()
    to_pointer = pointer_moved - started_at  # same host, same clock
    engine = pointer_moved - datetime.fromisoformat(run["started_at"]).timestamp()
    committed = next(s for s in run["steps"] if s["name"] == "commit_group_offsets")
    assert len(committed["detail"]["committed"]) == groups, committed["detail"]
    anchor = _anchor(clusters, target, FlowTopology.of(load_config(config_path).flows[0]), names,
                     topic, partitions)  # fmt: skip
    rows = [
        [
            "drkit failover: command to pointer moved",
            f"{to_pointer:.2f} s",
            f"checkpoints read + {groups} groups' offsets written: {anchor:.2f} s",
            f"{to_pointer / anchor:.2f}x",
            "met" if to_pointer <= 5 else "MISSED",
        ],
        [
            "drkit failover: command to exit (incl. printing the run)",
            f"{wall:.2f} s",
            "",
            f"{wall / anchor:.2f}x",
            "",
        ],
        [
            "engine: run start to pointer moved",
            f"{engine:.2f} s",
            "",
            f"{engine / anchor:.2f}x",
            "met" if engine <= 5 else "MISSED",
        ],
    ]
    run_start = datetime.fromisoformat(run["started_at"]).timestamp()
    steps = [
        [
            "before the run (process start, plan)",
            f"{run_start - started_at:.2f} s",
        ],
        *(
            [
                f"step {s['name']}",
                f"{_ts(s['finished_at']) - _ts(s['started_at']):.2f} s"
                if s["started_at"] and s["finished_at"]
                else "-",
            ]
            for s in run["steps"]
        ),
    ]
    return (
        f"### Unplanned failover: {groups} groups x {partitions} partitions "
        f"({groups * partitions:,} offsets), source killed\n\n"
        + markdown_table(["what", "time", "anchor (same run)", "ratio", "target <= 5 s"], rows)
        + "\n\nWhere the time goes:\n\n"
        + markdown_table(["part", "time"], steps)
    )


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _anchor(
    clusters: Clusters,
    target_alias: str,
    topology: FlowTopology,
    names: list[str],
    topic: str,
    partitions: int,
) -> float:
    """Read the checkpoints and write every group's offsets directly (the floor)."""
    admin = KafkaAdmin(clusters.dc2)
    started = time.perf_counter()
    consume_all(clusters.dc2, topology.checkpoints_topic, timeout_s=120)
    replica = topology.target_topic(topic)
    for group in names:
        admin.alter_group_offsets(group, {TopicPartition(replica, p): 0 for p in range(partitions)})
    return time.perf_counter() - started
