"""Shared benchmark plumbing: dedicated local clusters, Kafka tools, process trees' RSS and CPU,
tables."""

from __future__ import annotations

import hashlib
import os
import re
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.local import LocalKafka
from drkit.local.jars import java_executable, resolve_bundle

OUT = Path(__file__).resolve().parent / "out"


@dataclass
class Clusters:
    dc1: ClusterEndpoint
    dc2: ClusterEndpoint
    manager: LocalKafka

    def admin(self, which: str) -> KafkaAdmin:
        return KafkaAdmin(self.dc1 if which == "dc1" else self.dc2)


def _bench_kafka() -> LocalKafka:
    """The benchmark's clusters (DRKIT_BENCH_STATE_DIR: another directory, for a second bench
    run beside the first)."""
    state = Path(os.environ.get("DRKIT_BENCH_STATE_DIR", OUT / "state"))
    return LocalKafka(
        state, heap=os.environ.get("DRKIT_BENCH_KAFKA_HEAP", "1g"), connect=KafkaAdmin
    )


def stop_clusters() -> None:
    """Stop the benchmark clusters and remove their data (no-op when none run)."""
    _bench_kafka().down(purge=True)


def start_clusters(fresh: bool = True) -> Clusters:
    """dc1 and dc2 for benchmarks, in bench/out/state (purged first when ``fresh``)."""
    manager = _bench_kafka()
    if fresh:
        manager.down(purge=True)
    statuses = {s.name: s for s in manager.up(["dc1", "dc2"])}
    return Clusters(
        ClusterEndpoint.plain("dc1", statuses["dc1"].bootstrap_servers),
        ClusterEndpoint.plain("dc2", statuses["dc2"].bootstrap_servers),
        manager,
    )


def write_flow_config(
    clusters: Clusters, source: str, target: str, topic: str, path: Path, groups: str | None = None
) -> Path:
    """A drkit config at ``path``: ``source`` (dc1) -> ``target`` (dc2) replicating ``topic``
    (and the groups matching the regex ``groups``), fencing with ACLs, a SQLite store beside it."""
    group_filter = f",\n      groups: {{include: ['{groups}']}}" if groups else ""
    path.write_text(
        f"clusters:\n"
        f"  {source}: {{bootstrap_servers: '{clusters.dc1.bootstrap_servers}'}}\n"
        f"  {target}: {{bootstrap_servers: '{clusters.dc2.bootstrap_servers}'}}\n"
        f"flows:\n"
        f"  - {{source: {source}, target: {target}, topics: {{include: ['{topic}']}}"
        f"{group_filter}}}\n"
        f"failover: {{fence_with_acls: true}}\n"
        f"state_store: {{url: 'sqlite:///{path.with_suffix('.db')}'}}\n"
    )
    return path


def timestamp(iso: str) -> float:
    """Epoch seconds of an ISO-8601 time as drkit prints it."""
    return datetime.fromisoformat(iso).timestamp()


def step_span(step: dict[str, Any]) -> float | None:
    """Seconds a failover run's step took, as ``-o json`` prints it (None: not finished)."""
    if not step.get("started_at") or not step.get("finished_at"):
        return None
    return timestamp(str(step["finished_at"])) - timestamp(str(step["started_at"]))


def java_tool(main_class: str, args: Sequence[str], timeout_s: float = 600) -> str:
    """Run a kafka-tools main class (ProducerPerformance, ConsumerPerformance) and return stdout."""
    jars = resolve_bundle("kafka")
    command = [java_executable(), "-Xmx512m", "-cp", f"{jars}/*", main_class, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{main_class} failed: {done.stderr[-2000:]}")
    return done.stdout


# drkit's replication producer compresses with lz4; MirrorMaker 2 and the pipe-limit producer
# are configured the same so all three put the same bytes on the wire.
COMPRESSION = "lz4"


def producer_perf(
    endpoint: ClusterEndpoint,
    topic: str,
    records: int,
    size: int,
    throughput: int = -1,
    compression: str = "none",
    batch_size: int = 262_144,
    linger_ms: int = 5,
    payload_file: Path | None = None,
) -> float:
    """Write ``records`` of ``size`` bytes with acks=all; returns records/s as the tool reports.

    ``payload_file``: draw each record from the file's lines (see :func:`payload_pool`) instead
    of having the tool generate ``size`` random letters per record.
    """
    payload = ["--record-size", str(size)]
    if payload_file is not None:
        payload = ["--payload-file", str(payload_file)]
    out = java_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic",
            topic,
            "--num-records",
            str(records),
            *payload,
            "--throughput",
            str(throughput),
            "--producer-props",
            f"bootstrap.servers={endpoint.bootstrap_servers}",
            "acks=all",
            f"linger.ms={linger_ms}",
            f"batch.size={batch_size}",
            f"compression.type={compression}",
        ],
    )
    match = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
    return float(match[-1][1])


def payload_pool(size: int, count: int) -> Path:
    """A file of ``count`` lines of ``size`` random letters A-Z, for ``--payload-file``.

    The same alphabet as ProducerPerformance's ``--record-size`` records (so lz4 compresses both
    alike), but generated once here rather than per record inside the tool, whose single thread
    otherwise spends most of its time drawing random letters.
    """
    path = OUT / f"payload-{size}x{count}.txt"
    if path.exists():
        return path
    wanted = size * count
    # Unbiased letters: keep the random bytes below 26 * 9 = 234, then map them modulo 26.
    letters = bytes(65 + b % 26 for b in range(256))
    dropped = bytes(range(234, 256))
    text = bytearray()
    while len(text) < wanted:
        text += os.urandom(wanted).translate(letters, dropped)
    lines = (bytes(text[i * size : (i + 1) * size]) for i in range(count))
    partial = path.with_suffix(".part")
    partial.write_bytes(b"\n".join(lines) + b"\n")
    partial.replace(path)
    return path


def consumer_perf(
    endpoint: ClusterEndpoint,
    topic: str,
    records: int,
    fetch_size: int = 1_048_576,
    props: Mapping[str, str] | None = None,
) -> float:
    """Read ``records`` from ``topic``; returns records/s.

    ``fetch_size`` is the tool's ``--fetch-size`` (max.partition.fetch.bytes; the tool's default
    is 1 MiB); ``props`` are further consumer settings.
    """
    extra: list[str] = []
    if props:
        text = "".join(f"{key}={value}\n" for key, value in sorted(props.items()))
        config = OUT / f"consumer-perf-{hashlib.sha1(text.encode()).hexdigest()[:8]}.properties"
        config.write_text(text)
        extra = ["--consumer.config", str(config)]
    out = java_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        [
            "--bootstrap-server",
            endpoint.bootstrap_servers,
            "--topic",
            topic,
            "--messages",
            str(records),
            "--fetch-size",
            str(fetch_size),
            *extra,
            "--timeout",
            "60000",
            "--hide-header",
        ],
    )
    # Columns: start, end, MB, MB/s, nMsg, nMsg/s, rebalance ms, fetch ms, fetch MB/s,
    # fetch nMsg/s.  The fetch rate excludes the group join, like the replicators' window.
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    return float(fields[9])


def total_records(admin: KafkaAdmin, topic: str) -> int:
    if topic not in admin.list_topics():
        return 0
    return sum(end - start for start, end in admin.topic_offsets(topic).values())


def stat_fields(stat: str) -> list[str]:
    """A /proc/<pid>/stat line's fields from the state on (field 3 onward): the command name
    before them may hold spaces and parentheses, so it is cut off at the line's last ")"."""
    return stat.rsplit(")", 1)[1].split()


def _proc_stats() -> dict[int, list[str]]:
    """Every process's :func:`stat_fields`, by pid."""
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited since the listing
        stats[int(entry.name)] = stat_fields(stat)
    return stats


def _tree(pid: int, stats: Mapping[int, Sequence[str]]) -> list[int]:
    """``pid`` and its descendants among ``stats`` (field 4, the parent pid, links them)."""
    children: dict[int, list[int]] = {}
    for child, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(child)
    out, stack = [], [pid]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(children.get(current, []))
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc)."""
    return _tree(pid, _proc_stats())


def stat_cpu_seconds(fields: Sequence[str], ticks_per_s: int) -> float:
    """CPU seconds in one process's :func:`stat_fields`: utime + stime of all its threads, plus
    cutime + cstime - the children it has reaped, whose time would otherwise leave the tree
    with them."""
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])  # stat fields 14-17
    return (utime + stime + cutime + cstime) / ticks_per_s


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by ``pid``'s process tree (every live descendant, and the reaped
    ones through their parents' cutime/cstime); 0.0 once ``pid`` is gone.  Resolution: one
    clock tick (10 ms on Linux), so windows under a second are coarse."""
    stats = _proc_stats()
    if pid not in stats:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return sum(stat_cpu_seconds(stats[p], tick) for p in _tree(pid, stats) if p in stats)


class CpuWindow:
    """The CPU a process tree used over a timed window and how many records arrived in it:
    :func:`wait_for_count` calls :meth:`open` at the first record and :meth:`close` at the
    last, so the window is the one the throughput is computed over."""

    def __init__(self, pid_source: Callable[[], int]) -> None:
        self.pid_source = pid_source
        self._opened: tuple[float, int] | None = None
        self.cpu_s: float | None = None  # None until closed
        self.records = 0

    def open(self, seen: int) -> None:
        self._opened = (tree_cpu_seconds(self.pid_source()), seen)

    def close(self, seen: int) -> None:
        if self._opened is None:
            return
        cpu, before = self._opened
        self.cpu_s = tree_cpu_seconds(self.pid_source()) - cpu
        self.records = seen - before

    def per_cpu_second(self) -> float | None:
        """Records copied in the window per CPU-second the tree used in it (None: no window,
        or too short for the clock tick to have moved)."""
        if not self.cpu_s or self.cpu_s <= 0 or self.records <= 0:
            return None
        return self.records / self.cpu_s


def rss_mb(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class PeakRss:
    """Samples the RSS of a process tree every 0.2 s; ``peak`` is the maximum seen."""

    def __init__(self, pid_source: Callable[[], int]) -> None:
        self.pid_source = pid_source
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, rss_mb(process_tree(self.pid_source())))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _busy_cores() -> tuple[float, float]:
    """(busy, total) CPU seconds of the machine so far (from /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


def settle(max_busy_cores: float = 0.3, window_s: float = 1.0, timeout_s: float = 30.0) -> float:
    """Wait until the machine is quiet - at most ``max_busy_cores`` busy over ``window_s`` - so
    that a timed run does not inherit the previous one's tail (a JVM exiting, brokers flushing,
    deleting topics).  Gives up after ``timeout_s``; returns the last busy figure."""
    deadline = time.monotonic() + timeout_s
    busy = float("inf")
    while time.monotonic() < deadline:
        before = _busy_cores()[0]
        time.sleep(window_s)
        busy = (_busy_cores()[0] - before) / window_s
        if busy <= max_busy_cores:
            break
    return busy


def wait_for_count(
    admin: KafkaAdmin,
    topic: str,
    expected: int,
    timeout_s: float,
    stop: threading.Event | None = None,
    window: CpuWindow | None = None,
) -> tuple[float, float]:
    """(time first record appeared, time ``expected`` were there), monotonic seconds.

    ``stop``: give up early (TimeoutError) once it is set, e.g. when the writer failed.
    ``window``: opened and closed at those two moments (with the counts seen then).
    """
    first = 0.0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        seen = total_records(admin, topic)
        now = time.monotonic()
        if seen and not first:
            first = now
            if window is not None:
                window.open(seen)
        if seen >= expected:
            if window is not None:
                window.close(seen)
            return first, now
        time.sleep(0.1)
    raise TimeoutError(f"{topic}: fewer than {expected} records (timeout {timeout_s}s or stopped)")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
