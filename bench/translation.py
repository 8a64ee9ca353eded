"""Translation benchmark: 1,000 groups x 50 partitions, and a flow with 1,000,000 runs.

* from checkpoints (the unplanned-failover path, source gone): write one checkpoint per group
  and partition to a checkpoints topic, then time loading them and building the per-group answer
  (``translate_groups`` in checkpoint mode) - anchored against a plain read of the same records;
* live core: time :func:`drkit.translation.translate` for every (group, partition) over dense
  run maps with restarts - anchored against building the inputs (a dict lookup per partition);
* forged claims (:func:`forged_claims`, security review 6 M6): the doubt 100 rejected offset
  syncs claiming a 200,000-run partition make, and translations over it - anchored against the
  same translations without doubt;
* 1M runs (:func:`million_runs`): an exactly-once target starts a run per commit, so a busy flow
  holds a million runs within retention (50 partitions x 20,000).  Times loading them from the
  offset-sync topic (anchor: a plain read of the same records), the in-memory merge with its
  peak memory (anchor: decoding alone; the records' own bytes), the refresh after one commit,
  a checkpoint round's translations and the trim check.
"""

from __future__ import annotations

import gc
import random
import struct
import time
import tracemalloc
import uuid
from collections.abc import Iterator

from bench.common import Clusters, markdown_table, start_clusters
from drkit.config import load_config_text
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.clients import ClusterEndpoint, make_producer
from drkit.kafka.io import consume_all
from drkit.offsets.checkpoint import Checkpoint, tick
from drkit.offsets.lookup import translate_groups
from drkit.offsets.mapping_loader import MappingLoader, doubt
from drkit.records import TopicPartition
from drkit.replication.heartbeat import encode_string
from drkit.replication.offset_sync import OffsetRun, decode_key, decode_value
from drkit.replication.offset_sync_store import RunMaps
from drkit.replication.progress import Progress, progress_key
from drkit.replication.run_map import RunMap, RunTable
from drkit.topology.internal_topics import (
    checkpoints_topic,
    offset_syncs_topic,
    progress_topic,
)
from drkit.translation import PartitionMapping, TargetBounds, Translated, translate


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


FORGED_RUNS = 200_000
FORGED_CLAIMS = 100


def forged_claims(groups: int = 1000) -> tuple[float, float, float]:
    """Security review 6, M6: one partition of :data:`FORGED_RUNS` runs with a 1-offset gap
    after each (a transaction marker's) and :data:`FORGED_CLAIMS` rejected offset syncs each
    claiming all of it - the loader's doubt (one range per gap), then ``groups`` translations
    at markers over it; anchored against the same translations without doubt.  Seconds:
    (doubt, translations, translations without doubt)."""
    table = RunTable.of([OffsetRun(i * 10, i * 10, 9) for i in range(FORGED_RUNS)])
    end = FORGED_RUNS * 10
    started = time.perf_counter()
    doubted = doubt([(0, end)] * FORGED_CLAIMS, table)
    doubting = time.perf_counter() - started
    source, target = TopicPartition("t", 0), TopicPartition("a.t", 0)
    plain = PartitionMapping(source, target, table, end)
    forged = PartitionMapping(source, target, table, end, doubt=doubted)
    rng = random.Random(2)
    positions = [rng.randrange(FORGED_RUNS) * 10 + 9 for _ in range(groups)]
    bounds = TargetBounds(0, end)
    timed = []
    for mapping in (forged, plain):
        started = time.perf_counter()
        for position in positions:
            translate(position, mapping, bounds, end)
        timed.append(time.perf_counter() - started)
    return doubting, timed[0], timed[1]


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
    # the bench writes its checkpoints itself: no signed offset syncs are read
    report = translate_groups(
        config, config.flows[0], names, use_checkpoints=True, keys=None, connect=KafkaAdmin
    )
    elapsed = time.perf_counter() - started
    assert sum(len(rows) for rows in report.groups.values()) == groups * partitions
    core, core_anchor = _pure(groups, partitions)
    doubting, forged, unforged = forged_claims(groups=groups)
    million = million_runs(clusters, config_for=config_text(clusters), groups=groups)
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
        [
            f"{FORGED_CLAIMS} forged full-range claims over {FORGED_RUNS:,} runs: doubt, then "
            f"{groups:,} translations at markers",
            f"{doubting * 1000:.0f} ms + {forged * 1000:.0f} ms",
            f"the translations without doubt: {unforged * 1000:.0f} ms",
            f"{forged / unforged:.1f}x",
        ],
    ]
    return (
        f"### Translation: {groups:,} groups x {partitions} partitions "
        f"({groups * partitions:,} translations)\n\n"
        + markdown_table(["path", "time", "anchor (same run)", "ratio"], rows)
        + "\n\n"
        + million
    )


def config_text(clusters: Clusters) -> str:
    return (
        "clusters:\n"
        "  {source}: {{bootstrap_servers: '" + clusters.dc1.bootstrap_servers + "'}}\n"
        "  {target}: {{bootstrap_servers: '" + clusters.dc2.bootstrap_servers + "'}}\n"
        "flows:\n  - {{source: {source}, target: {target}}}\n"
    )


RUN_LENGTH = 100  # records per commit; the exactly-once marker after each starts a new run


def _run_records(
    source_topic: str, target_topic: str, partitions: int, commits: range
) -> Iterator[tuple[bytes, bytes]]:
    """Offset-sync records as the worker writes them, commit by commit across partitions."""
    keys = [encode_string(source_topic) + struct.pack(">i", p) for p in range(partitions)]
    values = [
        struct.pack(">h", 0) + encode_string(target_topic) + struct.pack(">i", p)
        for p in range(partitions)
    ]
    for commit in commits:
        src, dst = commit * RUN_LENGTH, commit * (RUN_LENGTH + 1)
        for p in range(partitions):
            yield (
                keys[p] + struct.pack(">qiq", src, p, dst),
                values[p] + struct.pack(">qq", dst, RUN_LENGTH),
            )


def _produce(endpoint: ClusterEndpoint, topic: str, records: Iterator[tuple[bytes, bytes]]) -> int:
    producer = make_producer(endpoint, {"linger.ms": 50, "batch.size": 1_000_000})
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, 0)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    assert producer.flush(120) == 0
    return count


def _merge_in_memory(records: list[tuple[bytes, bytes]]) -> dict[TopicPartition, RunMap]:
    """What OffsetSyncStore does per record, without the consumer."""
    maps = RunMaps()
    for key, value in records:
        maps.apply(key, value)
    for found in maps.maps.values():
        found.table()
    return maps.maps


def million_runs(
    clusters: Clusters,
    config_for: str,
    groups: int = 1000,
    partitions: int = 50,
    per_partition: int = 20_000,
) -> str:
    """The 1M-runs case (see the module docstring); returns its markdown section."""
    tag = uuid.uuid4().hex[:6]
    source, target = f"m{tag}", f"n{tag}"
    config = load_config_text(config_for.format(source=source, target=target))
    flow = config.flows[0]
    source_topic, target_topic = "orders", f"{source}.orders"
    syncs, progress = offset_syncs_topic(source), progress_topic(source)
    clusters.admin("dc2").create_topics(
        [TopicSpec(t, 1, configs={"cleanup.policy": "compact"}) for t in (syncs, progress)]
    )
    total = partitions * per_partition
    records = list(_run_records(source_topic, target_topic, partitions, range(per_partition)))
    raw_bytes = sum(len(k) + len(v) for k, v in records)
    _produce(clusters.dc2, syncs, iter(records))
    end = per_partition * RUN_LENGTH
    _produce(
        clusters.dc2,
        progress,
        (
            (
                progress_key(target, TopicPartition(source_topic, p)),
                Progress(TopicPartition(source_topic, p), end).value(),
            )
            for p in range(partitions)
        ),
    )

    # Load from the topic: a plain read of the same records first (anchor).
    started = time.perf_counter()
    read = consume_all(clusters.dc2, syncs, expected=total, timeout_s=600)
    read_s = time.perf_counter() - started
    assert len(read) == total
    del read
    gc.collect()
    loader = MappingLoader(flow, clusters.dc2, signer=None)  # unsigned syncs written above
    started = time.perf_counter()
    mappings = loader.refresh(timeout_s=600)
    load_s = time.perf_counter() - started
    assert loader.stored_runs() == total and len(mappings) == partitions

    # One more commit: a new run per partition, and progress.
    next_commit = range(per_partition, per_partition + 1)
    _produce(clusters.dc2, syncs, _run_records(source_topic, target_topic, partitions, next_commit))
    started = time.perf_counter()
    mappings = loader.refresh()
    incremental_s = time.perf_counter() - started
    started = time.perf_counter()
    mappings = loader.refresh()
    idle_s = time.perf_counter() - started

    # A checkpoint round's translations: every group on every partition.
    rng = random.Random(3)
    commits = [[rng.randrange(0, end) for _ in range(partitions)] for _ in range(groups)]
    ordered = [mappings[TopicPartition(source_topic, p)] for p in range(partitions)]
    bounds = [TargetBounds(0, m.dst_end) for m in ordered]
    started = time.perf_counter()
    results = [
        [translate(o, ordered[p], bounds[p], end) for p, o in enumerate(row)] for row in commits
    ]
    round_s = time.perf_counter() - started
    started = time.perf_counter()
    for row in commits:
        for p, o in enumerate(row):
            _ = (o, ordered[p], bounds[p], end)
    lookups_s = time.perf_counter() - started
    for row, answers in zip(commits, results, strict=True):  # exact, as the layout says
        for o, answer in zip(row, answers, strict=True):
            assert isinstance(answer, Translated)
            assert answer.target_offset == o + o // RUN_LENGTH and answer.expected_rereads == 0
    loader.close()

    # In memory: decode + merge, its time and peak memory; decoding alone as the anchor.
    started = time.perf_counter()
    for key, value in records:
        decode_key(key)
        decode_value(value)
    decode_s = time.perf_counter() - started
    started = time.perf_counter()
    maps = _merge_in_memory(records)
    merge_s = time.perf_counter() - started
    del maps
    gc.collect()
    tracemalloc.start()
    maps = _merge_in_memory(records)
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # The trim check (every minute in the checkpointer): first with nothing to expire (the
    # source keeps everything), then with half the runs gone from both clusters.
    half_src, half_dst = end // 2, (end // 2) // RUN_LENGTH * (RUN_LENGTH + 1)
    started = time.perf_counter()
    nothing = [m.expired(0, dict.fromkeys(m.targets(), half_dst)) for m in maps.values()]
    idle_check_s = time.perf_counter() - started
    assert not any(nothing)
    started = time.perf_counter()
    expired = [
        (m, t, run)
        for m in maps.values()
        for t, run in m.expired(half_src, dict.fromkeys(m.targets(), half_dst))
    ]
    check_s = time.perf_counter() - started
    started = time.perf_counter()
    for m, t, run in expired:
        m.remove(t, run.src_start, run.dst_start)
    for m in maps.values():
        m.table()
    drop_s = time.perf_counter() - started
    kept = sum(len(m) for m in maps.values())

    mb = 1024 * 1024
    rows = [
        [
            f"load {total:,} runs from the offset-sync topic (MappingLoader.refresh)",
            f"{load_s:.2f} s",
            f"plain read of the same records: {read_s:.2f} s",
            f"{load_s / read_s:.2f}x",
        ],
        [
            "decode + merge in memory (RunMap per partition)",
            f"{merge_s:.2f} s",
            f"decoding alone: {decode_s:.2f} s",
            f"{merge_s / decode_s:.2f}x",
        ],
        [
            "memory of the merged map: retained / peak while merging",
            f"{retained / mb:.0f} MB / {peak / mb:.0f} MB",
            f"the records' key+value bytes: {raw_bytes / mb:.0f} MB",
            f"{retained / raw_bytes:.2f}x / {peak / raw_bytes:.2f}x",
        ],
        [
            f"refresh after one commit ({partitions} new runs)",
            f"{incremental_s * 1000:.0f} ms",
            f"refresh with nothing new: {idle_s * 1000:.0f} ms",
            f"{incremental_s / idle_s:.1f}x",
        ],
        [
            f"checkpoint round: translate {groups:,} groups x {partitions} partitions",
            f"{round_s * 1000:.0f} ms",
            f"input lookups only: {lookups_s * 1000:.0f} ms",
            f"{round_s / lookups_s:.1f}x",
        ],
        [
            f"trim check over {total:,} runs, nothing expired (every minute)",
            f"{idle_check_s * 1000:.0f} ms",
            f"the full merge: {merge_s * 1000:.0f} ms",
            f"{idle_check_s / merge_s:.3f}x",
        ],
        [
            f"expire {len(expired):,} runs: check / apply the tombstones and re-merge",
            f"{check_s * 1000:.0f} ms / {drop_s * 1000:.0f} ms",
            f"the full merge: {merge_s * 1000:.0f} ms",
            f"{check_s / merge_s:.2f}x / {drop_s / merge_s:.2f}x",
        ],
    ]
    assert kept == total - len(expired)
    return (
        f"### {total:,} runs in a flow ({partitions} partitions x {per_partition:,} runs, "
        f"an exactly-once target: a run per commit of {RUN_LENGTH} records)\n\n"
        + markdown_table(["step", "time / memory", "anchor (same run)", "ratio"], rows)
    )
