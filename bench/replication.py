"""Replication benchmark: drkit (1 and N workers) vs MirrorMaker 2 vs the pipe limit.

Same two local clusters, same 8-partition topic, acks=all everywhere.

* throughput: a topic pre-filled with ``records`` records is replicated from scratch; the rate is
  measured from the first record on the target to the last (start-up excluded for everyone);
* latency at 50% load: a producer writes at half the slower replicator's measured rate while a
  consumer on the target reads; latency = arrival time - CreateTime, p50/p99 after warm-up;
* memory: peak RSS of the replicator's process tree during the throughput run;
* pipe limit: kafka-tools ConsumerPerformance on dc1 and ProducerPerformance on dc2 run at the
  same time; the limit is the slower of the two rates;
* every producer (drkit, MirrorMaker 2, the pipe) compresses with lz4 and waits for acks=all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from bench.common import (
    COMPRESSION,
    OUT,
    Clusters,
    PeakRss,
    consumer_perf,
    percentile,
    producer_perf,
    wait_for_count,
)
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import make_consumer
from drkit.local.jars import java_executable, resolve_bundle

PARTITIONS = 8


@dataclass
class Result:
    name: str
    records_per_s: float
    mb_per_s: float
    rss_mb: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None


class Replicator:
    """A running replicator under test."""

    def __init__(self, name: str, target_topic: Callable[[str], str]) -> None:
        self.name = name
        self.target_topic = target_topic
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, topic: str) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


class DrkitReplicator(Replicator):
    def __init__(self, clusters: Clusters, workers: int) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.src, self.dst = f"a{self.tag}", f"b{self.tag}"
        super().__init__(
            f"drkit ({workers} worker{'s' if workers > 1 else ''})", lambda t: f"{self.src}.{t}"
        )
        self.clusters = clusters
        self.workers = workers

    def start(self, topic: str) -> None:
        config = {
            "clusters": {
                self.src: {"bootstrap_servers": self.clusters.dc1.bootstrap_servers},
                self.dst: {"bootstrap_servers": self.clusters.dc2.bootstrap_servers},
            },
            "flows": [{"source": self.src, "target": self.dst, "topics": {"include": [topic]}}],
        }
        path = OUT / f"drkit-{self.tag}.yaml"
        path.write_text(yaml.safe_dump(config))
        log = (OUT / f"drkit-{self.tag}.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "drkit",
                "replicate",
                "--config",
                str(path),
                "--workers",
                str(self.workers),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class MirrorMaker2(Replicator):
    def __init__(self, clusters: Clusters, tasks: int) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.src, self.dst = f"m{self.tag}", f"n{self.tag}"
        super().__init__(f"MirrorMaker 2 (tasks.max={tasks})", lambda t: f"{self.src}.{t}")
        self.clusters = clusters
        self.tasks = tasks

    def start(self, topic: str) -> None:
        jars = resolve_bundle("mirror-maker")
        rf = "replication.factor=1"
        properties = "\n".join(
            [
                f"clusters={self.src},{self.dst}",
                f"{self.src}.bootstrap.servers={self.clusters.dc1.bootstrap_servers}",
                f"{self.dst}.bootstrap.servers={self.clusters.dc2.bootstrap_servers}",
                f"{self.src}->{self.dst}.enabled=true",
                f"{self.src}->{self.dst}.topics={topic}",
                f"{self.dst}->{self.src}.enabled=false",
                f"tasks.max={self.tasks}",
                rf,
                "checkpoints.topic.replication.factor=1",
                "heartbeats.topic.replication.factor=1",
                "offset-syncs.topic.replication.factor=1",
                "offset.storage.replication.factor=1",
                "status.storage.replication.factor=1",
                "config.storage.replication.factor=1",
                "sync.topic.acls.enabled=false",
                f"{self.dst}.producer.acks=all",
                f"{self.dst}.producer.compression.type={COMPRESSION}",
            ]
        )
        path = OUT / f"mm2-{self.tag}.properties"
        path.write_text(properties + "\n")
        log4j = OUT / "mm2-log4j2.properties"
        log4j.write_text(
            "rootLogger.level = WARN\nrootLogger.appenderRef.c.ref = c\n"
            "appender.c.type = Console\nappender.c.name = c\n"
            "appender.c.layout.type = PatternLayout\nappender.c.layout.pattern = %d %p %m%n\n"
        )
        log = (OUT / f"mm2-{self.tag}.log").open("ab")
        # Heap as connect-mirror-maker.sh sets it when KAFKA_HEAP_OPTS is unset.
        self.process = subprocess.Popen(
            [
                java_executable(),
                "-Xms256M",
                "-Xmx2G",
                f"-Dlog4j2.configurationFile={log4j}",
                "-cp",
                f"{jars}/*",
                "org.apache.kafka.connect.mirror.MirrorMaker",
                str(path),
                "--clusters",
                self.dst,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def throughput(
    clusters: Clusters, replicator: Replicator, topic: str, records: int, size: int
) -> Result:
    target = replicator.target_topic(topic)
    admin = clusters.admin("dc2")
    replicator.start(topic)
    assert replicator.process is not None
    try:
        with PeakRss(lambda: replicator.process.pid) as rss:  # type: ignore[union-attr]
            first, done = wait_for_count(admin, target, records, timeout_s=900)
    finally:
        replicator.stop()
    elapsed = max(done - first, 1e-3)
    rate = records / elapsed
    return Result(replicator.name, rate, rate * size / 1e6, rss.peak)


def latency_at(
    clusters: Clusters, replicator: Replicator, size: int, rate: int, seconds: int
) -> tuple[float, float]:
    """(p50, p99) end-to-end latency in ms while producing ``rate`` records/s."""
    topic = f"lat-{size}-{uuid.uuid4().hex[:6]}"
    clusters.admin("dc1").create_topics([TopicSpec(topic, PARTITIONS)])
    target = replicator.target_topic(topic)
    replicator.start(topic)
    latencies: list[float] = []
    stop = threading.Event()
    try:
        wait_until_topic(clusters, target, 120)
        consumer = make_consumer(
            clusters.dc2,
            f"bench-lat-{uuid.uuid4().hex[:6]}",
            {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 10},
        )
        consumer.subscribe([target])

        def read() -> None:
            while not stop.is_set():
                for message in consumer.consume(5000, 0.1):
                    if message.error() is None:
                        _, ts = message.timestamp()
                        latencies.append(time.time() * 1000 - ts)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(3)  # let the reader join its group before load starts
        producer_perf(clusters.dc1, topic, rate * seconds, size, throughput=rate)
        time.sleep(3)
        stop.set()
        reader.join()
        consumer.close()
    finally:
        replicator.stop()
    steady = latencies[len(latencies) // 5 :]  # drop the first 20% (warm-up)
    return percentile(steady, 0.5), percentile(steady, 0.99)


def wait_until_topic(clusters: Clusters, topic: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if topic in clusters.admin("dc2").list_topics():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic} never appeared on dc2")


def pipe_limit(clusters: Clusters, topic: str, records: int, size: int) -> Result:
    sink = f"pipe-{size}-{uuid.uuid4().hex[:6]}"
    clusters.admin("dc2").create_topics([TopicSpec(sink, PARTITIONS)])
    rates: dict[str, float] = {}
    reader = threading.Thread(
        target=lambda: rates.__setitem__("consume", consumer_perf(clusters.dc1, topic, records))
    )
    reader.start()
    rates["produce"] = producer_perf(clusters.dc2, sink, records, size, compression=COMPRESSION)
    reader.join()
    rate = min(rates.values())
    return Result(
        f"pipe limit (consume {rates['consume']:,.0f}/s, produce {rates['produce']:,.0f}/s)",
        rate,
        rate * size / 1e6,
    )


def run(
    clusters: Clusters,
    size: int,
    records: int,
    workers: int,
    latency_seconds: int,
    repeat: int = 1,
) -> list[Result]:
    """Throughput rows are the median of ``repeat`` runs (each from scratch, fresh aliases)."""
    topic = f"bench-{size}-{uuid.uuid4().hex[:6]}"
    clusters.admin("dc1").create_topics([TopicSpec(topic, PARTITIONS)])
    print(f"filling {topic}: {records:,} x {size} B", flush=True)
    producer_perf(clusters.dc1, topic, records, size)
    factories: list[Callable[[], Replicator]] = [
        lambda: MirrorMaker2(clusters, 1),
        lambda: DrkitReplicator(clusters, 1),
    ]
    if workers > 1:
        factories += [
            lambda: MirrorMaker2(clusters, workers),
            lambda: DrkitReplicator(clusters, workers),
        ]
    runs: dict[int, list[Result]] = {}
    for round_ in range(repeat):
        runs.setdefault(-1, []).append(pipe_limit(clusters, topic, records, size))
        for index, factory in enumerate(factories):
            replicator = factory()
            print(f"  [{round_ + 1}/{repeat}] {replicator.name} ...", flush=True)
            runs.setdefault(index, []).append(
                throughput(clusters, replicator, topic, records, size)
            )
    results = [_median(runs[key]) for key in sorted(runs)]
    if latency_seconds:
        slowest = min(r.records_per_s for r in results[1:3])
        rate = max(100, int(slowest / 2))
        print(f"  latency at {rate:,} records/s ...", flush=True)
        for index in (1, 2):
            results[index].p50_ms, results[index].p99_ms = latency_at(
                clusters, factories[index - 1](), size, rate, latency_seconds
            )
    return results


def _median(results: list[Result]) -> Result:
    ordered = sorted(results, key=lambda r: r.records_per_s)
    middle = ordered[len(ordered) // 2]
    rates = ", ".join(f"{r.records_per_s:,.0f}" for r in results)
    name = middle.name if len(results) == 1 else f"{middle.name} [runs: {rates}]"
    peak = max((r.rss_mb for r in results if r.rss_mb is not None), default=None)
    return Result(name, middle.records_per_s, middle.mb_per_s, peak)
