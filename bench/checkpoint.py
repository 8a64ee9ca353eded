"""Benchmark: checkpoint rounds and freshness at many groups (``python -m bench checkpoint``).

A flow replicates one 50-partition topic while N consumer groups have committed offsets on every
partition; ``drkit replicate --no-checkpoints`` keeps copying, and one checkpoint worker
(:class:`drkit.offsets.checkpointer.Checkpointer`, in this process) is timed:

* the first round (every committed offset translated) and a round after the replicator copied
  more records to every partition and 1 % of the groups committed again (incremental: the
  others keep their answers, drkit.translation.carry_over);
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


def measure(clusters: Clusters, groups: int, partitions: int) -> Measurement:
    tag = uuid.uuid4().hex[:6]
    source, target = f"c{tag}", f"d{tag}"
    topic = f"bench-cp-{tag}"
    path = write_flow_config(
        clusters, source, target, topic, OUT / f"checkpoint-{tag}.yaml", groups=f"{topic}-g.*"
    )
    config = load_config(path)
    flow = config.flows[0].model_copy(update={"checkpoint_interval_s": 1.0})
    source_admin, target_admin = clusters.admin("dc1"), clusters.admin("dc2")
    source_admin.create_topics([TopicSpec(topic, partitions)])
    for p in range(partitions):
        produce_batch(clusters.dc1, topic, [(None, b"x")] * RECORDS_PER_PARTITION, partition=p)
    names = [f"{topic}-g{i:05d}" for i in range(groups)]
    _set_offsets(source_admin, topic, names, partitions)
    replica = f"{source}.{topic}"
    log = (OUT / f"checkpoint-{tag}-replicate.log").open("w")
    replicate = subprocess.Popen(
        [sys.executable, "-m", "drkit", "replicate", "--config", str(path), "--no-checkpoints"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    metrics = CheckpointMetrics.create(CollectorRegistry())
    worker = Checkpointer(flow, config.clusters[source], config.clusters[target], metrics)
    try:
        _wait(lambda: _replicated(source_admin, target_admin, topic, replica), "replicated")
        worker.prepare()

        def counted() -> tuple[float, float]:
            fresh = metrics.translations.labels(flow.name)._value.get()
            kept = metrics.translations_kept.labels(flow.name)._value.get()
            return fresh, kept

        started = time.perf_counter()
        worker.round()
        full_s = time.perf_counter() - started
        full_translated = int(counted()[0])
        print(f"  first round: {full_s:.2f} s", flush=True)

        started = time.perf_counter()
        worker.source.groups_offsets(names)
        anchor_s = time.perf_counter() - started
        print(f"  every group's offsets read: {anchor_s:.2f} s", flush=True)

        # The replicator copies on (every partition's runs grow) and 1 % of the groups move.
        for p in range(partitions):
            produce_batch(clusters.dc1, topic, [(None, b"y")] * 10, partition=p)
        _wait(lambda: _replicated(source_admin, target_admin, topic, replica), "copied on")
        moved = names[: max(1, groups // 100)]
        position = {TopicPartition(topic, p): RECORDS_PER_PARTITION + 5 for p in range(partitions)}
        source_admin.alter_groups_offsets(dict.fromkeys(moved, position))
        before = counted()
        started = time.perf_counter()
        with _profiled():
            worker.round()
        incremental_s = time.perf_counter() - started
        after = counted()
        print(f"  round after 1 % moved: {incremental_s:.2f} s", flush=True)
        freshness = _freshness(clusters, worker, flow.name, topic, partitions)
    finally:
        replicate.terminate()
        replicate.wait(60)
        worker.close()
    return Measurement(
        groups, full_s, full_translated, incremental_s, int(after[0] - before[0]),
        int(after[1] - before[1]), anchor_s, freshness,
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
    try:
        for i in range(PROBES):
            offset = 1 + i
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


def main(groups: list[int] | None = None, partitions: int = 50) -> str:
    clusters = start_clusters(fresh=False)
    rows = []
    for count in groups or [1000]:
        m = measure(clusters, count, partitions)
        fresh = statistics.median(m.freshness_s)
        rows.append(
            [f"{count:,} x {partitions}", f"{m.full_round_s:.2f} s ({m.full_translated:,})",
             f"{m.incremental_round_s:.2f} s ({m.incremental_translated:,} translated, "
             f"{m.incremental_kept:,} kept)", f"{m.read_offsets_s:.2f} s",
             f"{m.incremental_round_s / m.read_offsets_s:.2f}x",
             f"{fresh:.2f} s (max {max(m.freshness_s):.2f} s)",
             "met" if fresh <= 1 else "MISSED"]
        )  # fmt: skip
        print(rows[-1], flush=True)
    header = ["groups x partitions", "first round (translated)", "round after 1 % moved",
              "anchor: read every group's offsets", "ratio", "freshness, median of 5",
              "target <= 1 s"]  # fmt: skip
    return "### Checkpoint rounds and freshness (one worker)\n\n" + markdown_table(header, rows)
