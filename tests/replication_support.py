"""Helpers for replication integration tests: per-test configs and real worker processes.

Every test gets its own cluster aliases (``s<id>`` → dc1, ``t<id>`` → dc2), so consumer groups,
progress, offset-sync topics and replica names never collide between tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import yaml
from prometheus_client.parser import text_string_to_metric_families

from drkit.config import load_config
from drkit.config.model import DrkitConfig
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.io import consume_all
from drkit.local.ports import free_port
from drkit.offsets.lookup import Report, translate_groups
from drkit.records import Record, TopicPartition
from drkit.replication.progress import Progress, ProgressStore, decode_progress
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, Provenance
from drkit.topology.internal_topics import progress_topic
from tests.kafka_backends import ClusterUnderTest


def wait_until(
    predicate: Callable[[], Any],
    timeout_s: float,
    interval_s: float = 0.25,
    what: str | Callable[[], str] = "",
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` at the deadline
    (a callable ``what`` is asked then, so it can describe the state the wait ended in)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    said = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout_s}s waiting for {said or predicate} ({last!r})")


def wait_for_value(
    probe: Callable[[], Any],
    wanted: Any,
    timeout_s: float,
    interval_s: float = 0.25,
    what: str = "",
) -> None:
    """Poll ``probe`` until it returns ``wanted``; fail with the last value seen at the deadline."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last == wanted:
            return
        time.sleep(interval_s)
    raise AssertionError(
        f"timed out after {timeout_s}s waiting for {what or probe}: wanted {wanted!r}, "
        f"last saw {last!r}"
    )


@dataclass
class FlowSetup:
    """A two-cluster config for one test."""

    path: Path
    config: DrkitConfig
    source: str
    target: str
    extra_flows: list[dict[str, Any]] = field(default_factory=list)

    def endpoint(self, alias: str) -> ClusterEndpoint:
        return ClusterEndpoint(alias, self.config.clusters[alias])

    def keys(self, flow: str) -> bytes:
        """``flow``'s signing key from this setup's store: what drkit's commands verify offset
        syncs with (drkit/store/flow_keys.py)."""
        from drkit.store import StateStore
        from drkit.store.flow_keys import key_for

        url = self.config.state_store.url
        assert url is not None, "flow_setup writes a store URL"
        store = StateStore(url.get_secret_value())
        store.ensure_current()
        return key_for(store, flow)

    @property
    def source_endpoint(self) -> ClusterEndpoint:
        return self.endpoint(self.source)

    @property
    def target_endpoint(self) -> ClusterEndpoint:
        return self.endpoint(self.target)


def flow_setup(
    tmp_path: Path,
    source: ClusterUnderTest,
    target: ClusterUnderTest,
    topics: list[str],
    reverse: bool = False,
    document_extra: dict[str, Any] | None = None,
    cluster_extra: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
    **flow: Any,
) -> FlowSetup:
    """Write a config replicating ``topics`` (regexes) from ``source`` to ``target``
    (``cluster_extra``: more settings of the source's and the target's cluster entries)."""
    tag = uuid.uuid4().hex[:6]
    src, dst = f"s{tag}", f"t{tag}"
    flows = [{"source": src, "target": dst, "topics": {"include": topics}, **flow}]
    if reverse:
        flows.append({"source": dst, "target": src, "topics": {"include": topics}, **flow})
    document = {
        "clusters": {
            src: {"bootstrap_servers": source.bootstrap_servers, **cluster_extra[0]},
            dst: {"bootstrap_servers": target.bootstrap_servers, **cluster_extra[1]},
        },
        "flows": flows,
        "state_store": {"url": f"sqlite:///{tmp_path / 'drkit.db'}"},
        **(document_extra or {}),
    }
    path = tmp_path / f"drkit-{tag}.yaml"
    path.write_text(yaml.safe_dump(document))
    return FlowSetup(path, load_config(path), src, dst)


class DrkitProcess:
    """A ``python -m drkit ...`` child process (so tests can SIGTERM or SIGKILL it).

    Every instance is remembered; the ``reap_replicators`` fixture kills leftovers after each
    test so a failed assertion never leaves a process running into the next test.
    """

    started: ClassVar[list[DrkitProcess]] = []

    def __init__(self, args: list[str], log_dir: Path, label: str = "drkit") -> None:
        self.command = [sys.executable, "-m", "drkit", *args]
        self.log_path = log_dir / f"{label}-{uuid.uuid4().hex[:6]}.log"
        self.process: subprocess.Popen[bytes] | None = None
        DrkitProcess.started.append(self)

    @classmethod
    def reap(cls) -> None:
        for worker in cls.started:
            if worker.running:
                worker.kill()
        cls.started.clear()

    def start(self) -> DrkitProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM the process group and wait for the exit code.  A process that does not stop
        in time is asked for every thread's stack (SIGUSR1) first, so the failure shows where
        it waits."""
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGUSR1)
            time.sleep(2)
            raise AssertionError(
                f"drkit {self.command[3]} did not stop within {timeout_s:.0f}s of SIGTERM; its log "
                f"ends:\n{self.log()[-12000:]}"
            ) from None

    def kill(self) -> None:
        """kill -9 the process (and its children, for --workers N)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout_s)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self, after: str = "") -> str:
        """The process's output so far; with ``after``, only what follows its first line that
        contains ``after`` ("" until there is one)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        if not after:
            return text
        at = text.find(after)
        return "" if at < 0 else text[at + len(after) :]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.running:
            try:
                self.stop(30)
            except AssertionError:  # stuck: its stacks are in its log
                self.kill()


class Replicator(DrkitProcess):
    """``drkit replicate`` for one test's flow config."""

    def __init__(self, setup: FlowSetup, *args: str, log_dir: Path) -> None:
        super().__init__(
            ["replicate", "--config", str(setup.path), "--commit-interval", "0.5", *args],
            log_dir,
            "replicate",
        )
        self.setup = setup

    def start(self) -> Replicator:
        super().start()
        return self

    def __enter__(self) -> Self:
        self.start()
        return self


# -- exact comparison of a replica with its source ---------------------------------------------

DRKIT_HEADERS = frozenset({SOURCE_HEADER, ORIGIN_HEADER})


@dataclass(frozen=True)
class CopyCheck:
    """A replica compared with its source record by record, through the provenance header.

    ``sequences`` holds, per target partition, the source offsets of its records in target
    order; the other fields are the faults found (all empty for an exact copy).
    """

    source_count: int
    target_count: int
    sequences: dict[int, list[int]]
    missing: dict[int, list[int]]  # source partition -> source offsets not on the target
    duplicates: dict[int, Counter[int]]  # source partition -> source offset -> extra copies
    altered: list[tuple[int, int]]  # (partition, offset): other key/value/headers/timestamp
    misplaced: list[tuple[int, int]]  # (partition, offset) copied into another partition
    out_of_order: list[int]  # target partitions whose first copies are not in source order

    @property
    def duplicate_count(self) -> int:
        return sum(sum(extra.values()) for extra in self.duplicates.values())

    @property
    def missing_count(self) -> int:
        return sum(len(offsets) for offsets in self.missing.values())

    @property
    def exact(self) -> bool:
        """Every source record exactly once, unchanged, in its partition and in order."""
        return not (
            self.missing or self.duplicates or self.altered or self.misplaced or self.out_of_order
        )

    def summary(self) -> str:
        return (
            f"{self.source_count} source / {self.target_count} target records; missing "
            f"{ {p: o[:5] for p, o in self.missing.items()} } ({self.missing_count}), duplicated "
            f"{ {p: sorted(c)[:5] for p, c in self.duplicates.items()} } "
            f"({self.duplicate_count}), altered {self.altered[:5]}, misplaced "
            f"{self.misplaced[:5]}, out of order in partitions {self.out_of_order}"
        )


def _user_headers(record: Record) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((k, v) for k, v in record.headers if k not in DRKIT_HEADERS)


def check_copy(source: list[Record], replica: list[Record]) -> CopyCheck:
    """Compare ``replica`` (a target topic) with ``source`` (its source topic), see CopyCheck."""
    originals = {(r.partition, r.offset): r for r in source}
    sequences: dict[int, list[int]] = defaultdict(list)
    copies: Counter[tuple[int, int]] = Counter()
    altered: list[tuple[int, int]] = []
    misplaced: list[tuple[int, int]] = []
    for record in replica:
        raw = record.header(SOURCE_HEADER)
        assert raw is not None, f"replica record without provenance: {record}"
        provenance = Provenance.decode(raw)
        where = (provenance.partition, provenance.offset)
        copies[where] += 1
        sequences[record.partition].append(provenance.offset)
        if provenance.partition != record.partition:
            misplaced.append(where)
        original = originals.get(where)
        if original is not None and (
            (original.key, original.value, original.timestamp_ms, _user_headers(original))
            != (record.key, record.value, record.timestamp_ms, _user_headers(record))
        ):
            altered.append(where)
    missing: dict[int, list[int]] = defaultdict(list)
    for partition, offset in sorted(set(originals) - set(copies)):
        missing[partition].append(offset)
    duplicates: dict[int, Counter[int]] = defaultdict(Counter)
    for (partition, offset), n in copies.items():
        if n > 1:
            duplicates[partition][offset] = n - 1
    out_of_order = []
    for partition, offsets in sequences.items():
        firsts = list(dict.fromkeys(offsets))  # first copies, in target order
        if firsts != sorted(firsts):
            out_of_order.append(partition)
    return CopyCheck(
        len(source),
        len(replica),
        dict(sequences),
        dict(missing),
        dict(duplicates),
        altered,
        misplaced,
        sorted(out_of_order),
    )


def progress_behind(setup: FlowSetup, topic: str) -> dict[int, int]:
    """Per partition of the source ``topic``: offsets between the flow's stored progress and
    the source's end (empty when every partition's progress reached the end).

    The independent view of "caught up": a worker's lag gauge is its own word (three times it
    read 0 too early), while stored progress is what a takeover or a failover resumes from -
    and the offset syncs are stored before it, so translation can map what it covers."""
    ends = KafkaAdmin(setup.source_endpoint).topic_offsets(topic)
    store = ProgressStore(setup.target_endpoint, progress_topic(setup.source), missing_ok=True)
    try:
        stored = store.refresh()
    finally:
        store.close()
    behind = {}
    for partition, (_, end) in ends.items():
        progress = stored.get(TopicPartition(topic, partition))
        reached = progress.next_offset if progress is not None else 0
        if reached < end:
            behind[partition] = end - reached
    return behind


def progress_history(target: ClusterEndpoint, topic: str) -> list[Progress]:
    """Every progress record on ``topic`` in the order written (the topic has one partition)."""
    out = []
    for record in consume_all(target, topic, timeout_s=30):
        decoded = decode_progress(record.key or b"", record.value)
        if decoded is not None and decoded[0] == target.alias:
            out.append(decoded[1])
    return out


# -- Prometheus metrics of a child process -----------------------------------------------------


def free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 (``--workers N`` uses PORT+i)."""
    for _ in range(100):
        first = free_port()  # below the ephemeral range: a restarted child binds it again
        if first + count > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(first, first + count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise AssertionError(f"no {count} consecutive free ports")


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape of a ``/metrics`` endpoint: (sample name, labels) -> value."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    @classmethod
    def parse(cls, text: str) -> MetricsSnapshot:
        samples = {
            (sample.name, frozenset(sample.labels.items())): float(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        return cls(samples)

    def value(self, name: str, **labels: str) -> float | None:
        """The sum of the samples ``name`` whose labels include ``labels``; None if none."""
        wanted = set(labels.items())
        found = [v for (n, have), v in self.samples.items() if n == name and wanted <= have]
        return sum(found) if found else None


def scrape(port: int) -> MetricsSnapshot | None:
    """The metrics served on 127.0.0.1:``port``, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            return MetricsSnapshot.parse(reply.read().decode())
    except OSError:
        return None


def translate(
    setup: FlowSetup,
    groups: list[str],
    *,
    use_checkpoints: bool | None = None,
    verify: bool = False,
) -> Report:
    """``translate_groups`` for the setup's first flow, with its keys, through the adapter."""
    return translate_groups(
        setup.config,
        setup.config.flows[0],
        groups,
        use_checkpoints,
        verify,
        keys=setup.keys,
        connect=KafkaAdmin,
    )
