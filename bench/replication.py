"""Replication benchmark: drkit (1 and N workers) vs MirrorMaker 2 vs the pipe limit.

Same two local clusters, same 8-partition topic, acks=all everywhere.

* throughput: a topic pre-filled with ``records`` records is replicated from scratch; the rate is
  measured from the first record on the target to the last (start-up excluded for everyone);
* MirrorMaker 2 runs twice per task count (tasks.max=1 and tasks.max=N for ``--workers N``):
  "defaults" sets only acks=all and lz4 on its producer; "tuned" also gets the producer and
  consumer settings of drkit's replication worker, taken from
  drkit.replication.client_settings and translated to the Java clients' names
  (:func:`mm2_tuned_clients`).  The ratios are against the tuned run (the strongest opponent);
* latency at 50% load: a producer writes at half the slowest single-task replicator's measured
  rate while a consumer on the target reads; latency = arrival time - CreateTime, p50/p99 after
  warm-up;
* memory: peak RSS of the replicator's process tree during the throughput run;
* CPU: the CPU seconds of the replicator's whole process tree (every descendant; utime + stime,
  and cutime + cstime for the children it reaped; :func:`bench.common.tree_cpu_seconds`) read at
  the first and the last record of the throughput window, and records per CPU-second = records
  that arrived in that window / CPU seconds the tree used in it.  It says what a replicator would
  copy per core on a host with cores to spare, which records/s on this 2-core machine cannot;
* every producer (drkit, MirrorMaker 2, the pipe) compresses with lz4 and waits for acks=all.

Pipe limit (:func:`pipe_limit`): an upper bound on what a replicator can reach between the
two clusters on this machine, from candidates with no replicator's work in them, each timed
alone (the machine to itself, after :func:`bench.common.settle`; on two cores, candidates run at
once would mostly measure each other):

1. consume: ConsumerPerformance reads the ``records`` source records from dc1, once per entry of
   :data:`CONSUME_SETTINGS` (the tool's 1 MiB fetch; drkit's 8 MiB fetch with 5,000 records per
   poll); its own rate, which leaves out the group join;
2. produce: ``records`` records of the same size, acks=all and lz4, go to a fresh topic on dc2,
   (a) from ProducerPerformance, once per entry of :data:`PRODUCE_SETTINGS` (batch.size /
   linger.ms combinations, 1 or 2 processes at once, each sending its share), and (b) from
   :class:`PipeCandidate` "produce": confluent-kafka producers with drkit's worker's own
   librdkafka settings writing pre-built records.  Both draw their records from a pool of
   random A-Z payloads of the right size (:func:`bench.common.payload_pool`; the source records
   are random A-Z too, and lz4 leaves both the same size) so that generating them is not what
   limits the tool.  Rates are measured like the replicators' (first record on the topic to the
   last, so processes add up by wall clock and start-up is left out).  A producer queues part
   of its share before its first record shows on dc2, so its window starts late and its rate
   errs high: that loosens the bound, it never lowers it;
3. pipeline: :class:`PipeCandidate` "pipeline": consume from dc1 and produce to dc2 with drkit's
   client settings and nothing else per record - the floor of any replicator's cost, timed
   exactly like the replicators; its records per CPU-second, in the row, is the most a Python
   replicator on confluent-kafka could copy per core;
4. limit = max(min(best consume, best produce), best pipeline) (:func:`pipe_bound`): each stage
   bounds the pipe, and a pipeline that ran faster than the stages' bound proves that bound
   too low.  The row names the winner of each stage and the pipeline.  A run in which any
   replicator beat the limit reports it as an INVALID LIMIT (:func:`beaten`) instead of a ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    COMPRESSION,
    OUT,
    Clusters,
    CpuWindow,
    PeakRss,
    consumer_perf,
    median,
    payload_pool,
    percentile,
    producer_perf,
    settle,
    wait_for_count,
)
from drkit.config.model import FlowConfig
from drkit.kafka import ClusterEndpoint
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import make_consumer
from drkit.kafka.flow_clients import SourceConsumer, TargetProducer
from drkit.local.jars import java_executable, resolve_bundle
from drkit.records import TopicPartition
from drkit.replication.client_settings import (
    WorkerSettings,
    consumer_settings,
    producer_settings,
)
from drkit.topology.flow import FlowTopology

PARTITIONS = 8


@dataclass
class Result:
    name: str
    records_per_s: float
    mb_per_s: float
    rss_mb: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    per_core: float | None = None  # records per CPU-second of the process tree, in the window
    cores: float | None = None  # CPU seconds / wall seconds of the window
    window_s: float | None = None  # first record on the target to the last; 0: seen at once
    # The pipe limit's row only: the replicators that beat it (then it is no limit).
    beaten_by: list[str] = field(default_factory=list)


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
    """Apache MirrorMaker 2 in dedicated mode, from Kafka's jars; ``tuned``: with drkit's client
    settings (:func:`mm2_tuned_clients`) on top of acks=all and lz4."""

    def __init__(self, clusters: Clusters, tasks: int, record_size: int, tuned: bool) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.src, self.dst = f"m{self.tag}", f"n{self.tag}"
        variant = "tuned" if tuned else "defaults"
        super().__init__(
            f"MirrorMaker 2 {variant} (tasks.max={tasks})", lambda t: f"{self.src}.{t}"
        )
        self.clusters = clusters
        self.tasks = tasks
        self.record_size = record_size
        self.tuned = tuned

    def properties(self, topic: str) -> list[str]:
        """The lines of MirrorMaker 2's properties file for replicating ``topic``."""
        lines = [
            f"clusters={self.src},{self.dst}",
            f"{self.src}.bootstrap.servers={self.clusters.dc1.bootstrap_servers}",
            f"{self.dst}.bootstrap.servers={self.clusters.dc2.bootstrap_servers}",
            f"{self.src}->{self.dst}.enabled=true",
            f"{self.src}->{self.dst}.topics={topic}",
            f"{self.dst}->{self.src}.enabled=false",
            f"tasks.max={self.tasks}",
            "replication.factor=1",
            "checkpoints.topic.replication.factor=1",
            "heartbeats.topic.replication.factor=1",
            "offset-syncs.topic.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "config.storage.replication.factor=1",
            "sync.topic.acls.enabled=false",
        ]
        # <target>.producer.* reaches the Connect worker's producer (the one that writes the
        # replicated records); <source>.consumer.* reaches the source tasks' consumer (as
        # source.consumer.*).  See MirrorMakerConfig.workerConfig / connectorBaseConfig.
        producer = {"acks": "all", "compression.type": COMPRESSION}
        consumer: dict[str, str] = {}
        if self.tuned:
            tuned_producer, consumer = mm2_tuned_clients(self.tasks, self.record_size)
            producer.update(tuned_producer)
        lines += [f"{self.dst}.producer.{k}={v}" for k, v in sorted(producer.items())]
        lines += [f"{self.src}.consumer.{k}={v}" for k, v in sorted(consumer.items())]
        return lines

    def start(self, topic: str) -> None:
        jars = resolve_bundle("mirror-maker")
        path = OUT / f"mm2-{self.tag}.properties"
        path.write_text("\n".join(self.properties(topic)) + "\n")
        log4j = _mm2_log4j()
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


def _mm2_log4j() -> Path:
    """MirrorMaker 2's log4j2 file: warnings, plus every configuration as Kafka logs it
    ("ProducerConfig values: ...", "ConsumerConfig values: ..."), to check what the clients
    really use."""
    log4j = OUT / "mm2-log4j2.properties"
    log4j.write_text(
        "rootLogger.level = WARN\nrootLogger.appenderRef.c.ref = c\n"
        "appender.c.type = Console\nappender.c.name = c\n"
        "appender.c.layout.type = PatternLayout\nappender.c.layout.pattern = %d %p %m%n\n"
        # Every Kafka config class logs its values through AbstractConfig's logger.
        "logger.config.name = org.apache.kafka.common.config.AbstractConfig\n"
        "logger.config.level = INFO\n"
    )
    return log4j


# -- MirrorMaker 2 with drkit's client settings ----------------------------------------------
#
# drkit's replication worker builds its librdkafka settings in drkit.replication.client_settings
# (producer_settings, consumer_settings); mm2_tuned_clients takes them from there and maps each
# name to the Java client's.  None: not carried over, for the reason given.  A setting drkit adds
# later and that is missing here stops the benchmark, so that someone decides its translation.

_PRODUCER_TO_JAVA: dict[str, str | None] = {
    "acks": "acks",  # all
    "enable.idempotence": "enable.idempotence",  # true (Connect's worker sets false)
    "linger.ms": "linger.ms",  # WorkerSettings.linger_ms
    "message.timeout.ms": "delivery.timeout.ms",  # flow.retry.delivery_timeout_s
    "message.max.bytes": "max.request.size",  # librdkafka's per-request limit
    # Counts records; the Java producer bounds its buffer in bytes: see _buffer_memory.
    "queue.buffering.max.messages": None,
    "client.id": None,  # a name
    # Raised so that batch.size bounds a batch, as in Java (1 in careful mode): no Java name.
    "batch.num.messages": None,
    "transactional.id": None,  # exactly-once flows only; the benchmark's flow is not
    "transaction.timeout.ms": None,  # exactly-once flows only
}

# librdkafka behaviour drkit's producer relies on without setting it, in Java terms.
_PRODUCER_IMPLICIT: dict[str, str] = {
    # drkit.kafka.clients.make_producer's default (the defaults variant has it as well).
    "compression.type": COMPRESSION,
    # librdkafka's batch.size default (Java: 16384); drkit lifts librdkafka's record cap
    # (batch.num.messages) so that, as in Java, only these bytes bound a batch.
    "batch.size": "1000000",
    # librdkafka caps in-flight requests at 5 with idempotence; Connect's worker sets 1.
    "max.in.flight.requests.per.connection": "5",
}

_CONSUMER_TO_JAVA: dict[str, str | None] = {
    "isolation.level": "isolation.level",  # read_committed (MM2's default: read_uncommitted)
    "max.partition.fetch.bytes": "max.partition.fetch.bytes",  # 8 MiB
    "fetch.wait.max.ms": "fetch.max.wait.ms",  # 50
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
    # No Java equivalent: the Java consumer has no prefetch queue to bound or to back off from
    # (it keeps at most one fetch response per broker, bounded by fetch.max.bytes).
    "queued.max.messages.kbytes": None,
    "fetch.queue.backoff.ms": None,
    # MM2's tasks assign() their partitions: no consumer group, so no group settings.
    "partition.assignment.strategy": None,
    "session.timeout.ms": None,
    "heartbeat.interval.ms": None,
    "group.instance.id": None,
    # drkit: "error" (never skip silently).  MM2 needs "earliest" to start partitions that have
    # no stored offset; a safety choice, not a speed one.
    "auto.offset.reset": None,
    "client.id": None,  # a name
}


def mm2_tuned_clients(tasks: int, record_size: int) -> tuple[dict[str, str], dict[str, str]]:
    """(producer, consumer) Java settings equal to those of a drkit worker that is one of
    ``tasks`` workers (each MM2 task has its own producer and consumer, as each worker has)."""
    topology = FlowTopology.of(FlowConfig(source="dc1", target="dc2"))
    worker = WorkerSettings(buffer_share=1.0 / tasks)
    drkit_producer = producer_settings(topology, worker, careful=False)
    producer = _translate(
        {**drkit_producer.tuning, **drkit_producer.required}, _PRODUCER_TO_JAVA, "producer"
    )
    producer.update(_PRODUCER_IMPLICIT)
    producer["buffer.memory"] = str(_buffer_memory(worker, record_size))
    drkit_consumer = consumer_settings(topology, worker)
    consumer = _translate(
        {**drkit_consumer.tuning, **drkit_consumer.required}, _CONSUMER_TO_JAVA, "consumer"
    )
    # drkit's worker asks consume() for up to batch_size records at a time; librdkafka's fetch
    # limit (fetch.max.bytes, 50 MiB) is also the Java default, set to say so.
    consumer["max.poll.records"] = str(worker.batch_size)
    consumer["fetch.max.bytes"] = str(52_428_800)
    return producer, consumer


def _translate(
    settings: Mapping[str, Any], names: Mapping[str, str | None], what: str
) -> dict[str, str]:
    """``settings`` (librdkafka) under their Java names, values as properties text."""
    out: dict[str, str] = {}
    for key, value in settings.items():
        if key not in names:
            raise KeyError(f"drkit's {what} sets {key}: add its Java name to bench/replication.py")
        java = names[key]
        if java is not None:
            out[java] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _buffer_memory(worker: WorkerSettings, record_size: int) -> int:
    """Java buffer.memory for drkit's producer queue of ``producer_queue_messages`` records of
    ``record_size`` bytes (never below the Java default of 32 MiB)."""
    return max(32 * 1024 * 1024, worker.producer_queue_messages() * record_size)


def throughput(
    clusters: Clusters, replicator: Replicator, topic: str, records: int, size: int
) -> Result:
    target = replicator.target_topic(topic)
    admin = clusters.admin("dc2")
    settle()  # every contender starts on a quiet machine
    replicator.start(topic)
    assert replicator.process is not None
    pid = replicator.process.pid
    cpu = CpuWindow(lambda: pid)
    try:
        with PeakRss(lambda: pid) as rss:
            first, done = wait_for_count(admin, target, records, timeout_s=900, window=cpu)
    finally:
        replicator.stop()
        admin.delete_topics([target])  # the next contender starts on the same disk
    elapsed = max(done - first, 1e-3)
    rate = records / elapsed
    cores = None if cpu.cpu_s is None else cpu.cpu_s / elapsed
    return Result(
        replicator.name,
        rate,
        rate * size / 1e6,
        rss.peak,
        per_core=cpu.per_cpu_second(),
        cores=cores,
        window_s=done - first,
    )


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
                # poll() returns at the first record; consume(n, 0) then takes what is already
                # fetched (consume(n, t) would wait out t to fill, adding it to every latency).
                first = consumer.poll(0.1)
                if first is None:
                    continue
                for message in [first, *consumer.consume(5000, 0)]:
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


@dataclass(frozen=True)
class ProduceSetting:
    """One way of running the pipe's producer side: ``processes`` ProducerPerformance processes
    at once, each sending an equal share of the records."""

    batch_size: int
    linger_ms: int
    processes: int = 1

    def label(self) -> str:
        producers = f"{self.processes} producer{'s' if self.processes > 1 else ''}"
        return f"batch {_bytes(self.batch_size)}, linger {self.linger_ms} ms, {producers}"


@dataclass(frozen=True)
class ConsumeSetting:
    """One way of running the pipe's consumer side (ConsumerPerformance)."""

    fetch_size: int  # max.partition.fetch.bytes
    max_poll_records: int | None = None  # None: the Java default (500)

    def label(self) -> str:
        per_poll = f", {self.max_poll_records:,}/poll" if self.max_poll_records else ""
        return f"fetch {_bytes(self.fetch_size)}{per_poll}"

    def props(self) -> dict[str, str]:
        """Consumer settings beyond the fetch size (ConsumerPerformance's --consumer.config)."""
        if self.max_poll_records is None:
            return {}
        return {"max.poll.records": str(self.max_poll_records)}


# At most five producer runs and two consumer runs per size and round (see pipe_limit).
PRODUCE_SETTINGS = (
    ProduceSetting(262_144, 5),  # the benchmark's earlier (only) setting
    ProduceSetting(1_000_000, 5),  # drkit's: librdkafka's batch.size, linger.ms 5
    ProduceSetting(1_000_000, 20),
    ProduceSetting(262_144, 5, processes=2),
    ProduceSetting(1_000_000, 20, processes=2),
)
CONSUME_SETTINGS = (
    ConsumeSetting(1_048_576),  # the tool's default
    ConsumeSetting(8 * 1_048_576, WorkerSettings().batch_size),  # drkit's fetch size and batch
)
# The pipe producers' payload pool: about this many bytes of distinct records, so that a record
# rarely repeats within lz4's 64 KiB window (the pool compresses like fresh random records).
PAYLOAD_POOL_BYTES = 16 * 1_048_576


def _bytes(n: int) -> str:
    """``n`` bytes for a label: "256 KiB", "8 MiB", "1 MB"."""
    if n % 1_048_576 == 0:
        return f"{n // 1_048_576} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n / 1e6:g} MB"


def pipe_limit(clusters: Clusters, topic: str, records: int, size: int, workers: int) -> Result:
    """The best rates the candidates reach on each side of the pipe and through it; see the
    module docstring."""
    consumed = []
    for consume in CONSUME_SETTINGS:
        settle()
        rate = consumer_perf(
            clusters.dc1, topic, records, fetch_size=consume.fetch_size, props=consume.props()
        )
        print(f"    pipe: consume {rate:,.0f}/s ({consume.label()})", flush=True)
        consumed.append((rate, consume.label()))
    payload = payload_pool(size, max(1, min(records, PAYLOAD_POOL_BYTES // size)))
    produced = []
    for produce in PRODUCE_SETTINGS:
        settle()
        rate, tools = _produce_rate(clusters, records, size, produce, payload)
        print(
            f"    pipe: produce {rate:,.0f}/s on dc2 (the tool says {tools:,.0f}/s) "
            f"({produce.label()})",
            flush=True,
        )
        produced.append((rate, produce.label()))
    pipelined: list[tuple[float, str]] = []
    for mode, count in [(m, c) for m in ("produce", "pipeline") for c in _counts(workers)]:
        candidate = PipeCandidate(clusters, mode, count, records, payload)
        result = throughput(clusters, candidate, topic, records, size)
        label = candidate.name
        if not result.window_s:
            # Every record showed up in one look at the topic (a --quick size): no window to
            # time, so no rate (records / 1 ms would stand in for one).
            print(f"    pipe: {mode}: every record appeared at once, not timed ({label})")
            continue
        if mode == "pipeline" and result.per_core:
            # A Python replicator's ceiling per core.  (Not the producer's: it queues much of
            # its share before the first record shows on dc2, outside the window.)
            label += f", {result.per_core:,.0f} per CPU-s"
        print(f"    pipe: {mode} {result.records_per_s:,.0f}/s ({label})", flush=True)
        (produced if mode == "produce" else pipelined).append((result.records_per_s, label))
    untimed = (0.0, "not timed")
    rate, name = pipe_bound(max(consumed), max(produced), max(pipelined, default=untimed))
    return Result(name, rate, rate * size / 1e6)


def pipe_bound(
    consumed: tuple[float, str], produced: tuple[float, str], pipelined: tuple[float, str]
) -> tuple[float, str]:
    """(limit, row name) from the best (rate, label) of each stage and of the pipeline: the
    slower stage bounds the pipe, unless the pipeline - a replicator with no work of its own -
    went faster, which shows the stages' bound was no bound."""
    stages = min(consumed[0], produced[0])
    rate = max(stages, pipelined[0])
    binding = "pipeline" if pipelined[0] > stages else "stages"
    name = (
        f"pipe limit (consume {consumed[0]:,.0f}/s [{consumed[1]}], "
        f"produce {produced[0]:,.0f}/s [{produced[1]}], "
        f"pipeline {pipelined[0]:,.0f}/s [{pipelined[1]}]; bound by the {binding})"
    )
    return rate, name


def beaten(limit: float, results: list[Result]) -> list[Result]:
    """The ``results`` faster than ``limit``: any one makes the limit invalid for the run."""
    return [r for r in results if r.records_per_s > limit]


class PipeCandidate(Replicator):
    """A pipe-limit candidate in ``processes`` processes (``python -m bench.replication``, see
    :func:`_candidate_main`), timed by :func:`throughput` like a replicator, into a fresh topic
    on dc2.  Process ``i`` of ``n`` takes partitions i, i+n, ... as drkit's ``n`` workers would.

    * "produce": ``records`` pre-built records from ``payload`` (shared out between the
      processes), each process a producer with the settings of one of ``n`` drkit workers
      (:func:`drkit.replication.client_settings.producer_settings`), 5,000 records to a
      partition at a time as a worker's consumed batches go, and nothing per record but the
      produce call;
    * "pipeline": each process consumes its partitions of the source topic (drkit's consumer
      settings, assigned from the start: no group join) and produces each record's key and value
      to the same partition on dc2 (drkit's producer settings): no headers, no provenance, no
      metrics, no error checks - the floor of any replicator's cost.

    How many processes: a bound needs the best candidate, so the benchmark runs each mode at 1
    and at ``--workers`` processes and keeps the faster.  One process is a Python thread feeding
    librdkafka's threads; more processes lift that thread's ceiling where cores are spare and
    cost the brokers CPU where they are not (on 2 cores either can win, so both run).  Threads
    in one process would share the GIL and bound nothing.
    """

    def __init__(
        self, clusters: Clusters, mode: str, processes: int, records: int, payload: Path
    ) -> None:
        self.sink = f"pipe-{mode}-{uuid.uuid4().hex[:6]}"
        plural = "es" if processes > 1 else ""
        super().__init__(f"Python, drkit's settings, {processes} process{plural}", self._sink)
        self.clusters = clusters
        self.mode = mode
        self.processes = processes
        self.records = records
        self.payload = payload

    def _sink(self, _topic: str) -> str:
        return self.sink

    def start(self, topic: str) -> None:
        self.clusters.admin("dc2").create_topics([TopicSpec(self.sink, PARTITIONS)])
        log = (OUT / f"{self.sink}.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.replication",
                self.mode,
                f"--processes={self.processes}",
                f"--source={self.clusters.dc1.bootstrap_servers}:{topic}",
                f"--target={self.clusters.dc2.bootstrap_servers}:{self.sink}",
                f"--records={self.records}",
                f"--payload={self.payload}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path(__file__).resolve().parent.parent,  # where ``bench`` imports from
        )


def _candidate_main(argv: list[str]) -> None:
    """A :class:`PipeCandidate`'s processes: forks ``--processes`` children, each with its
    partitions, and waits for them (the produce mode ends when its records are delivered, the
    pipeline when the benchmark stops it)."""
    parser = argparse.ArgumentParser(prog="python -m bench.replication")
    parser.add_argument("mode", choices=["produce", "pipeline"])
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--source", help="bootstrap:topic of the source topic on dc1")
    parser.add_argument("--target", help="bootstrap:topic of the sink topic on dc2")
    parser.add_argument("--records", type=int)
    parser.add_argument("--payload", type=Path)
    args = parser.parse_args(argv)
    count = args.processes
    shares = [args.records // count] * count
    shares[0] += args.records - sum(shares)
    context = multiprocessing.get_context("fork")  # no client exists yet to fork with
    children = [
        context.Process(
            target=_produce_share if args.mode == "produce" else _pipe_share,
            args=(args, list(range(index, PARTITIONS, count)), shares[index]),
        )
        for index in range(count)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join()


def _endpoint(address: str) -> tuple[ClusterEndpoint, str]:
    """(endpoint, topic) of a ``bootstrap:topic`` argument."""
    bootstrap, topic = address.rsplit(":", 1)
    return ClusterEndpoint.plain("bench", bootstrap), topic


def _worker_producer(endpoint: ClusterEndpoint, processes: int) -> TargetProducer:
    """The producer of one of ``processes`` drkit workers: its class and librdkafka settings."""
    settings = producer_settings(_flow(), WorkerSettings(buffer_share=1 / processes), False)
    return TargetProducer(endpoint, settings, transactional=False)


def _flow() -> FlowTopology:
    return FlowTopology.of(FlowConfig(source="dc1", target="dc2"))


def _produce_share(args: argparse.Namespace, partitions: list[int], share: int) -> None:
    endpoint, topic = _endpoint(args.target)
    pool = args.payload.read_bytes().split(b"\n")[:-1]
    values = [pool[i % len(pool)] for i in range(share)]  # built before the first record
    producer = _worker_producer(endpoint, args.processes)
    produce, poll = producer.produce, producer.poll
    chunk = WorkerSettings().batch_size
    for number, start in enumerate(range(0, share, chunk)):
        partition = partitions[number % len(partitions)]
        for value in values[start : start + chunk]:
            try:
                produce(topic, value, None, partition)
            except BufferError:
                _when_room(producer, topic, value, None, partition)
        poll(0)  # serve delivery reports: they hold their records' queue space until then
    producer.flush(300)


def _pipe_share(args: argparse.Namespace, partitions: list[int], _share: int) -> None:
    source, topic = _endpoint(args.source)
    target, sink = _endpoint(args.target)
    worker = WorkerSettings(buffer_share=1 / args.processes)
    consumer = SourceConsumer(
        source, f"bench-pipe-{uuid.uuid4().hex[:6]}", consumer_settings(_flow(), worker)
    )
    consumer.assign({TopicPartition(topic, p): None for p in partitions})  # from the log start
    producer = _worker_producer(target, args.processes)
    produce, poll = producer.produce, producer.poll
    while True:  # until the benchmark stops the process group
        # The worker's consume call: up to a batch, waiting for the first record only.
        for message in consumer.consume(worker.batch_size, 0.1):
            try:
                produce(sink, message.value(), message.key(), message.partition())
            except BufferError:
                _when_room(producer, sink, message.value(), message.key(), message.partition())
        poll(0)


def _when_room(producer: TargetProducer, *args: Any) -> None:
    """The producer's queue is full: serve delivery reports until the record fits."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(*args)
            return
        except BufferError:
            continue


def _produce_rate(
    clusters: Clusters, records: int, size: int, setting: ProduceSetting, payload: Path
) -> tuple[float, float]:
    """(records/s seen on dc2, sum of the processes' own rates) for ``setting``'s producers
    writing ``records`` records to a fresh topic.

    The first number is measured like the replicators' (first record on the topic to the last),
    so it leaves out the JVMs' start and first metadata fetch and needs no assumption about how
    well the processes overlap; the second is the tools' own figure, for reference.
    """
    sink = f"pipe-{size}-{uuid.uuid4().hex[:6]}"
    admin = clusters.admin("dc2")
    admin.create_topics([TopicSpec(sink, PARTITIONS)])
    shares = [records // setting.processes] * setting.processes
    shares[0] += records - sum(shares)
    write = partial(
        producer_perf,
        clusters.dc2,
        sink,
        size=size,
        compression=COMPRESSION,
        batch_size=setting.batch_size,
        linger_ms=setting.linger_ms,
        payload_file=payload,
    )
    failed = threading.Event()
    try:
        with ThreadPoolExecutor(setting.processes + 1) as pool:
            window = pool.submit(wait_for_count, clusters.admin("dc2"), sink, records, 600, failed)
            try:
                tools = sum(pool.map(lambda share: write(records=share), shares))
            except BaseException:
                failed.set()  # don't wait out the window's timeout
                raise
            first, done = window.result()
    finally:
        admin.delete_topics([sink])  # the next setting starts on an empty topic and disk
    return records / max(done - first, 1e-3), tools


def _counts(workers: int) -> list[int]:
    """The task/worker/process counts every contender runs at: 1, then ``workers`` if more."""
    return [1] if workers <= 1 else [1, workers]


def _contenders(clusters: Clusters, size: int, workers: int) -> list[Callable[[], Replicator]]:
    """Per task/worker count (:func:`_counts`): MM2 defaults, MM2 tuned, drkit."""
    out: list[Callable[[], Replicator]] = []
    for count in _counts(workers):
        out += [
            partial(MirrorMaker2, clusters, count, size, tuned=False),
            partial(MirrorMaker2, clusters, count, size, tuned=True),
            partial(DrkitReplicator, clusters, count),
        ]
    return out


def run(
    clusters: Clusters,
    size: int,
    records: int,
    workers: int,
    latency_seconds: int,
    repeat: int = 1,
) -> list[Result]:
    """Throughput rows are the median of ``repeat`` runs (each from scratch, fresh aliases).

    Rows: the pipe limit, then per count :func:`_contenders`; latency is measured for the
    single-task/worker rows, all at half the slowest of their throughputs.
    """
    topic = f"bench-{size}-{uuid.uuid4().hex[:6]}"
    clusters.admin("dc1").create_topics([TopicSpec(topic, PARTITIONS)])
    print(f"filling {topic}: {records:,} x {size} B", flush=True)
    producer_perf(clusters.dc1, topic, records, size)
    factories = _contenders(clusters, size, workers)
    runs: dict[int, list[Result]] = {}
    for round_ in range(repeat):
        print(f"  [{round_ + 1}/{repeat}] pipe limit ...", flush=True)
        limit = pipe_limit(clusters, topic, records, size, workers)
        runs.setdefault(-1, []).append(limit)
        for index, factory in enumerate(factories):
            replicator = factory()
            print(f"  [{round_ + 1}/{repeat}] {replicator.name} ...", flush=True)
            result = throughput(clusters, replicator, topic, records, size)
            runs.setdefault(index, []).append(result)
            if beaten(limit.records_per_s, [result]):
                limit.beaten_by.append(
                    f"{result.name} {result.records_per_s:,.0f}/s in run {round_ + 1}"
                )
                print(f"  INVALID LIMIT: {limit.beaten_by[-1]}", flush=True)
    # No check of the medians is needed: a replicator below its limit in every run is below it
    # in the medians too (each order statistic of the one is below the other's).
    results = [_median(runs[key]) for key in sorted(runs)]
    if latency_seconds:
        single = range(1, 4)  # rows of the single-task/worker contenders (row 0: pipe limit)
        slowest = min(results[index].records_per_s for index in single)
        rate = max(100, int(slowest / 2))
        print(f"  latency at {rate:,} records/s ...", flush=True)
        for index in single:
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
    per_core = [r.per_core for r in results if r.per_core is not None]
    cores = [r.cores for r in results if r.cores is not None]
    return Result(
        name,
        middle.records_per_s,
        middle.mb_per_s,
        peak,
        per_core=median(per_core) if per_core else None,  # the median of its own runs
        cores=median(cores) if cores else None,
        beaten_by=[line for r in results for line in r.beaten_by],
    )


if __name__ == "__main__":
    _candidate_main(sys.argv[1:])
