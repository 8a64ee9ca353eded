"""Benchmark: the applications' write pause in a planned move under a steady producer.

A flow replicates a 6-partition topic while a producer writes ``--rate`` records/s (2,000 by
default) to the source: plain, or transactional (one transaction per 50 ms batch).  Once
replication is caught up, ``drkit switchover`` (or ``cutover --skip-verify``) runs.  Measured:
the write pause as the command reports it (``write_pause_s``: the source's fence applied ->
the pointer moved, when applications may write on the target), its drain step, and the
command's wall time.  Anchor (same run, just before the move): replication's own latency
under that load - a record acknowledged on the source until it is readable on the target,
median of 5 probes - the least a drain waits for the last record.  Target (issue 26): a pause
<= 3 s.  ``--repeat 3`` gives the median of three moves per row.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as RdTopicPartition

from bench.common import (
    OUT,
    Clusters,
    markdown_table,
    start_clusters,
    step_span,
    write_flow_config,
)
from drkit.config import load_config
from drkit.kafka import ClusterEndpoint
from drkit.kafka.admin import TopicSpec
from drkit.records import TopicPartition
from drkit.replication.progress import ProgressStore
from drkit.topology.flow import FlowTopology

PARTITIONS = 6
BATCH_S = 0.05


class SteadyProducer:
    """Writes ``rate`` records/s to ``topic`` in batches every 50 ms until the source refuses
    (the fence) or ``stop``; transactional: each batch is one transaction."""

    def __init__(self, bootstrap: str, topic: str, rate: int, transactional: bool) -> None:
        settings: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
        if transactional:
            settings["transactional.id"] = f"bench-writer-{uuid.uuid4().hex[:6]}"
        self.producer = Producer(settings)
        self.topic, self.transactional = topic, transactional
        self.per_batch = max(1, int(rate * BATCH_S))
        self.sent = 0
        self.refused_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SteadyProducer:
        if self.transactional:
            self.producer.init_transactions(30)
        self._thread.start()
        return self

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set() and self.refused_at is None:
            try:
                self._batch()
            except KafkaException:
                self.refused_at = time.time()
                if self.transactional:  # leave nothing open to hold the drain
                    with contextlib.suppress(KafkaException):
                        self.producer.abort_transaction(10)
                return
            due += BATCH_S
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _batch(self) -> None:
        failures: list[object] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        if self.transactional:
            self.producer.begin_transaction()
        for _ in range(self.per_batch):
            self.producer.produce(self.topic, b"x" * 100, on_delivery=delivered)
        if self.transactional:
            self.producer.commit_transaction(10)
        else:
            self.producer.flush(10)
        if failures:
            raise KafkaException(failures[0])
        self.sent += self.per_batch

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def replication_latency(clusters: Clusters, topic: str, replica: str, probes: int = 5) -> float:
    """Median seconds from a probe acknowledged on the source to it readable on the target."""
    consumer = Consumer({"bootstrap.servers": clusters.dc2.bootstrap_servers,
                         "group.id": f"bench-probe-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 10})  # fmt: skip
    consumer.assign([RdTopicPartition(replica, 0, OFFSET_END)])
    producer = Producer({"bootstrap.servers": clusters.dc1.bootstrap_servers})
    spans: list[float] = []
    try:
        consumer.consume(100, 1.0)  # the assignment settles at the end
        for n in range(probes):
            marker = f"probe-{uuid.uuid4().hex}".encode()
            producer.produce(topic, marker, partition=0)
            producer.flush(10)
            acked = time.perf_counter()
            deadline = acked + 60
            found = False
            while not found and time.perf_counter() < deadline:
                found = any(m.error() is None and m.value() == marker
                            for m in consumer.consume(500, 0.05))  # fmt: skip
            if not found:
                raise RuntimeError(f"probe {n} not replicated within 60 s")
            spans.append(time.perf_counter() - acked)
            time.sleep(0.3)
    finally:
        consumer.close()
    return statistics.median(spans)


@dataclass(frozen=True)
class Move:
    write_pause_s: float
    drain_s: float | None
    wall_s: float
    latency_s: float  # the anchor
    producer_refused_after_s: float | None  # the command started -> the producer refused
    in_pause: tuple[tuple[str, float], ...]  # the steps after the fence, up to the pointer


class _Progress:
    """The flow's stored progress on the target, its reader kept open between looks."""

    def __init__(self, config_path: Path) -> None:
        config = load_config(config_path)
        flow = config.flows[0]
        target = ClusterEndpoint(flow.target, config.clusters[flow.target])
        self.store = ProgressStore(target, FlowTopology.of(flow).progress_topic, missing_ok=True)

    def reached(self, topic: str, ends: dict[int, int]) -> bool:
        done = self.store.refresh(30)
        return all((p := done.get(TopicPartition(topic, i))) is not None and p.next_offset >= end
                   for i, end in ends.items())  # fmt: skip


def measure(clusters: Clusters, procedure: str, transactional: bool, rate: int) -> Move:
    """One planned move under a steady producer, on fresh names."""
    tag = uuid.uuid4().hex[:6]
    source, target = f"s{tag}", f"t{tag}"
    topic = f"bench-sw-{tag}"
    config = write_flow_config(clusters, source, target, topic, OUT / f"switchover-{tag}.yaml")
    clusters.admin("dc1").create_topics([TopicSpec(topic, PARTITIONS)])
    replica = f"{source}.{topic}"
    log = (OUT / f"switchover-{tag}-replicate.log").open("w")
    replicate = subprocess.Popen(
        [sys.executable, "-m", "drkit", "replicate", "--config", str(config)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    writer = SteadyProducer(clusters.dc1.bootstrap_servers, topic, rate, transactional).start()
    try:
        time.sleep(5)  # a steady flow, not its start
        latency = replication_latency(clusters, topic, replica)
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {
            tp.partition: end
            for tp, end in clusters.admin("dc1").list_offsets(partitions, "latest").items()
        }
        deadline = time.monotonic() + 120
        progress = _Progress(config)
        try:
            while not progress.reached(topic, ends):
                if time.monotonic() > deadline:
                    raise RuntimeError("replication did not catch up with the producer")
                time.sleep(0.5)
        finally:
            progress.store.close()
        extra = ["--skip-verify"] if procedure == "cutover" else []
        started_at, started = time.time(), time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "drkit", procedure, "--config", str(config),
             "--from", source, "--to", target, "--yes", "-o", "json", *extra],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - started
    finally:
        writer.stop()
        replicate.terminate()
        replicate.wait(60)
    if done.returncode != 0:
        raise RuntimeError(f"{procedure} failed ({done.returncode}): {done.stderr[-2000:]}")
    run = json.loads(done.stdout)
    drain = next((s for s in run["steps"] if s["name"] == "drain"), None)
    refused = writer.refused_at - started_at if writer.refused_at is not None else None
    span = step_span(drain) if drain is not None else None
    return Move(run["write_pause_s"], span, wall, latency, refused, _in_pause(run))


def _in_pause(run: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    """The steps that ran while applications could not write: after ``fence_source`` up to
    and including ``move_pointer``."""
    names = [s["name"] for s in run["steps"]]
    window = run["steps"][names.index("fence_source") + 1 : names.index("move_pointer") + 1]
    return tuple((s["name"], span) for s in window if (span := step_span(s)) is not None)


def main(rate: int = 2000, runs: int = 1) -> str:
    clusters = start_clusters(fresh=False)
    rows, pauses = [], []
    for procedure in ("switchover", "cutover"):
        for transactional in (False, True):
            moves = [measure(clusters, procedure, transactional, rate) for _ in range(runs)]
            rows.append(_row(procedure, transactional, moves))
            middle = sorted(moves, key=lambda m: m.write_pause_s)[len(moves) // 2]
            steps = ", ".join(f"{n} {t:.2f} s" for n, t in middle.in_pause if t > 0.05)
            pauses.append((rows[-1][0], steps))
    header = [
        "move, source writes", "write pause (median) [runs]", "drain",
        "anchor: replication latency", "ratio", "command wall time", "target <= 3 s",
    ]  # fmt: skip
    return (
        f"### Planned moves under a {rate:,} rec/s producer ({PARTITIONS} partitions)\n\n"
        + markdown_table(header, rows)
        + "\n\nWhere the pause goes (the median run of each row; steps over 0.05 s):\n\n"
        + "\n".join(f"- {name}: {where}" for name, where in pauses)
    )


def _row(procedure: str, transactional: bool, moves: list[Move]) -> list[str]:
    pauses = [m.write_pause_s for m in moves]
    pause = statistics.median(pauses)
    latency = statistics.median(m.latency_s for m in moves)
    drains = [m.drain_s for m in moves if m.drain_s is not None]
    runs = f" [{', '.join(f'{p:.2f}' for p in pauses)}]" if len(moves) > 1 else ""
    shown = f"{pause:.2f} s{runs}"
    return [
        f"{procedure}, {'transactional' if transactional else 'plain'}",
        shown,
        f"{statistics.median(drains):.2f} s" if drains else "-",
        f"{latency:.2f} s",
        f"{pause / latency:.1f}x" if latency > 0 else "-",
        f"{statistics.median(m.wall_s for m in moves):.1f} s",
        "met" if pause <= 3 else "MISSED",
    ]
