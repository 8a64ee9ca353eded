"""Translation benchmark: 1,000 groups x 50 partitions.

* from checkpoints (the unplanned-failover path, source gone): write one checkpoint per group
  and partition to a checkpoints topic, then time loading them and building the per-group answer
  (``translate_groups`` in checkpoint mode) - anchored against a plain read of the same records;
* live core: time :func:`drkit.translation.translate` for every (group, partition) over dense
  run maps with restarts - anchored against building the inputs (a dict lookup per partition).
"""

from __future__ import annotations

import random
import time
import uuid

from bench.common import markdown_table, start_clusters
from drkit.config import load_config_text
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import make_producer
from drkit.kafka.io import consume_all
from drkit.kafka.records import TopicPartition
from drkit.offsets.checkpoint import Checkpoint, tick
from drkit.offsets.lookup import translate_groups
from drkit.replication.internal_topics import checkpoints_topic
from drkit.replication.offset_sync import OffsetRun
from drkit.translation import PartitionMapping, TargetBounds, translate


def _pure(groups: int, partitions: int) -> tuple[float, float]:
    rng = random.Random(1)
    mappings = []
    for p in range(partitions):
        runs, src, dst = [], 0, 0
        for _ in range(20):  # 20 restarts / gaps per partition
            length = rng.randrange(1000, 100_000)
            runs.append(OffsetRun(src, dst, length))
            src += length + rng.randrange(0, 3)
            dst += length + rng.randrange(0, 2)
        mappings.append(
            PartitionMapping(
                TopicPartition("t", p), TopicPartition("a.t", p), runs, replicated_end=src
            )
        )
    bounds = [TargetBounds(0, m.dst_end) for m in mappings]
    commits = [[rng.randrange(0, m.runs[-1].src_end) for m in mappings] for _ in range(groups)]
    started = time.perf_counter()
    for row in commits:
        for p, offset in enumerate(row):
            translate(offset, mappings[p], bounds[p], mappings[p].runs[-1].src_end)
    core = time.perf_counter() - started
    started = time.perf_counter()
    for row in commits:
        for p, offset in enumerate(row):
            _ = (offset, mappings[p], bounds[p])
    anchor = time.perf_counter() - started
    return core, anchor


def main(groups: int = 1000, partitions: int = 50) -> str:
    clusters = start_clusters(fresh=False)
    tag = uuid.uuid4().hex[:6]
    source, target = f"x{tag}", f"y{tag}"
    config = load_config_text(
        f"clusters:\n  {source}: {{bootstrap_servers: '{clusters.dc1.bootstrap_servers}'}}\n"
        f"  {target}: {{bootstrap_servers: '{clusters.dc2.bootstrap_servers}'}}\n"
        f"flows:\n  - {{source: {source}, target: {target}}}\n"
    )
    topic = checkpoints_topic(source)
    clusters.admin("dc2").create_topics(
        [TopicSpec(topic, 1, configs={"cleanup.policy": "compact"})]
    )
    producer = make_producer(clusters.dc2, {"linger.ms": 20})
    names = [f"group-{i:04d}" for i in range(groups)]
    for group in names:
        for p in range(partitions):
            checkpoint = Checkpoint(
                group,
                TopicPartition(f"{source}.orders", p),
                1000 + p,
                900 + p,
                "",
                {
                    "source_topic": "orders",
                    "method": "exact",
                    "rereads": 0,
                    "unreplicated": 0,
                    "flags": [],
                },
            )
            while True:
                try:
                    producer.produce(
                        topic, checkpoint.value(), checkpoint.key(), 0, headers=checkpoint.headers()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
    producer.produce(topic, tick(int(time.time() * 1000), groups).value(), tick(0, 0).key(), 0)
    producer.flush(60)
    total = groups * partitions + 1

    started = time.perf_counter()
    read = consume_all(clusters.dc2, topic, expected=total, timeout_s=300)
    anchor = time.perf_counter() - started
    assert len(read) == total
    started = time.perf_counter()
    report = translate_groups(config, config.flows[0], names, use_checkpoints=True)
    elapsed = time.perf_counter() - started
    assert sum(len(rows) for rows in report.groups.values()) == groups * partitions
    core, core_anchor = _pure(groups, partitions)
    rows = [
        [
            "from checkpoints: load + answer",
            f"{elapsed:.2f} s",
            f"plain read of the same {total:,} records: {anchor:.2f} s",
            f"{elapsed / anchor:.2f}x",
        ],
        [
            "live core: translate() per partition",
            f"{core * 1000:.0f} ms",
            f"input lookups only: {core_anchor * 1000:.0f} ms",
            f"{core / core_anchor:.1f}x",
        ],
    ]
    return (
        f"### Translation: {groups:,} groups x {partitions} partitions "
        f"({groups * partitions:,} translations)\n\n"
        + markdown_table(["path", "time", "anchor (same run)", "ratio"], rows)
    )
