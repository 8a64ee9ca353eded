"""Benchmark: checkpoint rounds and freshness at many groups (``python -m bench checkpoint``).

A flow replicates one 50-partition topic while N consumer groups have committed offsets on every
partition; ``drkit replicate --no-checkpoints`` keeps copying, and one checkpoint worker
(:class:`drkit.offsets.checkpointer.Checkpointer`, in this process) is timed for each way of
reading the source's commits (``checkpoint_commits_from``: ``auto`` - the default, which here,
on open clusters, follows the log -, the admin API every round, or one admin pass and then
``__consumer_offsets``), one after the other over the same groups:

* the first round (every committed offset translated) and a round after the replicator copied
  more records to every partition and 1 % of the groups committed again (incremental: the
  others keep their answers, drkit.translation.carry_over; following the log, the others are
  not even looked at);
* the anchor, measured in the same run: reading every group's committed offsets once with the
  admin API - what any checkpointer that follows groups through the admin API must do each round;
* freshness: the worker runs with ``checkpoint_interval_s: 1``; a probe group commits a new
  offset and the time until its checkpoint is on the target is measured (5 probes; median, max).

Target (issue 26): freshness <= 1 s at 10,000 groups x 50 partitions.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from bench.common import OUT, Clusters, markdown_table, start_clusters, write_flow_config
from bench.failover import RECORDS_PER_PARTITION, _set_offsets
from drkit.config import load_config
from drkit.config.model import CommitSource, DrkitConfig, FlowConfig
from drkit.kafka import KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.offsets.checkpointer import Checkpointer
from drkit.offsets.metrics import CheckpointMetrics
from drkit.records import TopicPartition

PROBES = 5


@dataclass(frozen=True)
class Measurement:
    groups: int
    source: CommitSource
    used: str  # where the rounds read the commits (``auto`` picks one of the other two)
    full_round_s: float
    full_translated: int
    incremental_round_s: float
    incremental_translated: int
    incremental_kept: int
    read_offsets_s: float  # the anchor
    freshness_s: tuple[float, ...]


def _replicated(source: KafkaAdmin, target: KafkaAdmin, topic: str, replica: str) -> bool:
    ends = source.topic_offsets(topic)
    if replica not in target.list_topics():
        return False
    copied = target.topic_offsets(replica)
    return sum(end for _, end in copied.values()) >= sum(end for _, end in ends.values())


def _wait(check: object, what: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(0.5)


def measure(clusters: Clusters, groups: int, partitions: int) -> list[Measurement]:
    """Both commit sources over the same groups, one after the other, each with its anchor."""
    tag = uuid.uuid4().hex[:6]
    source, target = f"c{tag}", f"d{tag}"
    topic = f"bench-cp-{tag}"
    path = write_flow_config(
        clusters, source, target, topic, OUT / f"checkpoint-{tag}.yaml", groups=f"{topic}-g.*"
    )
    config = load_config(path)
    source_admin, target_admin = clusters.admin("dc1"), clusters.admin("dc2")
    source_admin.create_topics([TopicSpec(topic, partitions)])
    for p in range(partitions):
        produce_batch(clusters.dc1, topic, [(None, b"x")] * RECORDS_PER_PARTITION, partition=p)
    names = [f"{topic}-g{i:05d}" for i in range(groups)]
    _set_offsets(source_admin, topic, names, partitions, RECORDS_PER_PARTITION)
    replica = f"{source}.{topic}"
    log = (OUT / f"checkpoint-{tag}-replicate.log").open("w")
    replicate = subprocess.Popen(
        [sys.executable, "-m", "drkit", "replicate", "--config", str(path), "--no-checkpoints"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    out = []
    try:
        _wait(lambda: _replicated(source_admin, target_admin, topic, replica), "replicated")
        for rounds, commits in enumerate(CommitSource):
            flow = config.flows[0].model_copy(
                update={"checkpoint_interval_s": 1.0, "checkpoint_commits_from": commits}
            )
            print(f"  commits from {commits.value}:", flush=True)
            out.append(
                _measure_worker(
                    clusters, config, flow, names, topic, replica, partitions, moved_at=rounds
                )
            )
    finally:
        replicate.terminate()
        replicate.wait(60)
    return out


def _measure_worker(
    clusters: Clusters,
    config: DrkitConfig,
    flow: FlowConfig,
    names: list[str],
    topic: str,
    replica: str,
    partitions: int,
    moved_at: int,
) -> Measurement:
    source_admin, target_admin = clusters.admin("dc1"), clusters.admin("dc2")
    metrics = CheckpointMetrics.create(CollectorRegistry())
    worker = Checkpointer(
        flow,
        config.clusters[flow.source],
        config.clusters[flow.target],
        metrics,
        connect=KafkaAdmin,
    )
    try:
        worker.prepare()

        def counted() -> tuple[float, float]:
            fresh = metrics.translations.labels(flow.name)._value.get()
            kept = metrics.translations_kept.labels(flow.name)._value.get()
            return fresh, kept

        started = time.perf_counter()
        worker.round()
        full_s = time.perf_counter() - started
        full_translated = int(counted()[0])
        print(f"    first round: {full_s:.2f} s", flush=True)

        started = time.perf_counter()
        worker.source.groups_offsets(names)
        anchor_s = time.perf_counter() - started
        print(f"    every group's offsets read: {anchor_s:.2f} s", flush=True)

        # The replicator copies on (every partition's runs grow) and 1 % of the groups move.
        for p in range(partitions):
            produce_batch(clusters.dc1, topic, [(None, b"y")] * 10, partition=p)
        _wait(lambda: _replicated(source_admin, target_admin, topic, replica), "copied on")
        groups = len(names)
        moved = names[groups // 100 * moved_at : groups // 100 * (moved_at + 1) or 1]
        position = {
            TopicPartition(topic, p): RECORDS_PER_PARTITION + 5 + moved_at
            for p in range(partitions)
        }
        source_admin.alter_groups_offsets(dict.fromkeys(moved, position))
        before = counted()
        started = time.perf_counter()
        with _profiled():
            worker.round()
        incremental_s = time.perf_counter() - started
        after = counted()
        print(f"    round after 1 % moved: {incremental_s:.2f} s", flush=True)
        freshness = _freshness(clusters, worker, flow.name, topic, partitions)
        used = worker.commits.using
    finally:
        worker.close()
    return Measurement(
        groups, flow.checkpoint_commits_from, used, full_s, full_translated, incremental_s,
        int(after[0] - before[0]), int(after[1] - before[1]), anchor_s, freshness,
    )  # fmt: skip


@contextlib.contextmanager
def _profiled() -> Iterator[None]:
    """With DRKIT_BENCH_PROFILE=FILE: cProfile statistics of the block written to FILE."""
    target = os.environ.get("DRKIT_BENCH_PROFILE")
    if not target:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(target)


def _freshness(
    clusters: Clusters, worker: Checkpointer, flow: str, topic: str, partitions: int
) -> tuple[float, ...]:
    """Commit -> checkpoint on the target, with the worker running every second."""
    source = KafkaAdmin(clusters.dc1)
    stop = threading.Event()
    running = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    running.start()
    store = CheckpointStore(worker.target_endpoint, worker.topic)
    store.refresh(600)  # the first read takes every checkpoint (500,000 at 10,000 groups)
    probe, replica_tp = f"{topic}-gprobe", TopicPartition(worker.topology.target_topic(topic), 0)
    out: list[float] = []
    first = _probe_at(store, probe, replica_tp)  # the other source's worker moved it
    try:
        for i in range(PROBES):
            offset = first + 1 + i
            source.alter_group_offsets(probe, {TopicPartition(topic, 0): offset})
            committed = time.monotonic()
            while True:
                seen = store.refresh(30).latest.get((probe, replica_tp))
                if seen is not None and seen.upstream_offset == offset:
                    out.append(time.monotonic() - committed)
                    break
                if time.monotonic() - committed > 120:
                    raise RuntimeError(f"{flow}: no checkpoint of the probe within 120 s")
                time.sleep(0.05)
            time.sleep(0.37 * (i + 1) % 1.0)  # commit at different points of the round
    finally:
        stop.set()
        running.join(60)
        store.close()
    return tuple(out)


def _probe_at(store: CheckpointStore, probe: str, replica: TopicPartition) -> int:
    """Where the probe's checkpoint stands (0 before the first worker's probes)."""
    seen = store.refresh(30).latest.get((probe, replica))
    return seen.upstream_offset if seen is not None else 0


def _row(m: Measurement, partitions: int) -> list[str]:
    fresh = statistics.median(m.freshness_s)
    return [
        f"{m.groups:,} x {partitions}",
        m.source.value if m.source.value == m.used else f"{m.source.value} ({m.used})",
        f"{m.full_round_s:.2f} s ({m.full_translated:,})",
        f"{m.incremental_round_s:.2f} s ({m.incremental_translated:,} translated, "
        f"{m.incremental_kept:,} kept)", f"{m.read_offsets_s:.2f} s",
        f"{m.incremental_round_s / m.read_offsets_s:.2f}x",
        f"{fresh:.2f} s (max {max(m.freshness_s):.2f} s)",
        "met" if fresh <= 1 else "MISSED",
    ]  # fmt: skip


def main(groups: list[int] | None = None, partitions: int = 50) -> str:
    clusters = start_clusters(fresh=False)
    rows = []
    for count in groups or [1000]:
        for m in measure(clusters, count, partitions):
            rows.append(_row(m, partitions))
            print(rows[-1], flush=True)
    header = ["groups x partitions", "commits from", "first round (translated)",
              "round after 1 % moved", "anchor: read every group's offsets", "ratio",
              "freshness, median of 5", "target <= 1 s"]  # fmt: skip
    return "### Checkpoint rounds and freshness (one worker)\n\n" + markdown_table(header, rows)
