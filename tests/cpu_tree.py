"""The CPU seconds a test costs the machine: its process tree and the test brokers it uses.

Wall time on a shared machine is noisy; CPU is not.  :class:`TreeCpu` measures, across one
test phase, the CPU of

* this process (``RUSAGE_SELF``) and its reaped children (``RUSAGE_CHILDREN``);
* every live descendant (``/proc/<pid>/stat``: its own and its reaped children's time) -
  drkit subprocesses, replication workers, helpers, Spark, brokers this process started;
* every process once seen among them that lives on outside the tree (a broker started by a
  ``drkit local up`` child that has exited, a JVM its parent left behind), until it ends;
* the brokers recorded under the tests' state dir (dc1/dc2 kept from an earlier run).

A sampler thread reads ``/proc`` twice a second, which also says where the time went, by
kind: ``broker:<cluster>`` (``broker:scratch`` for the scratch clusters), ``other-jvm``
(Spark, Kafka's tools), ``python:<drkit command>`` (``replicate``, ``monitor``,
``failover``...; ``forkserver``: drkit's isolated helpers), ``test`` (this process), other
programs by name, and ``unseen`` - what ended between two samples.  Linux only; used by
tests/machine_load.py when ``DRKIT_TEST_CPU`` is set.
"""

from __future__ import annotations

import json
import os
import resource
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcTimes:
    ppid: int
    started: int  # start time in ticks since boot: a reused pid is another process
    own: float  # utime + stime, seconds
    reaped: float  # cutime + cstime: its children it has waited for


def _read(pid: int) -> ProcTimes | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # From the state field on (after the name): state=0, ppid=1, utime=11, stime=12,
    # cutime=13, cstime=14, starttime=19.
    fields = text.rsplit(")", 1)[-1].split()
    return ProcTimes(
        int(fields[1]),
        int(fields[19]),
        (int(fields[11]) + int(fields[12])) / _TICK,
        (int(fields[13]) + int(fields[14])) / _TICK,
    )


def _all() -> dict[int, ProcTimes]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            times = _read(int(entry.name))
            if times is not None:
                out[int(entry.name)] = times
    return out


def _descendants(root: int, table: dict[int, ProcTimes]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, times in table.items():
        children.setdefault(times.ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _broker_pids(state_dir: Path) -> set[int]:
    pids: set[int] = set()
    for path in (state_dir / "local").glob("*/cluster.json"):
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pids.update(b["pid"] for b in raw.get("brokers", []) if b.get("pid"))
    return pids


def _kind(pid: int) -> str:
    if pid == os.getpid():
        return "test"
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    program = Path(words[0].decode(errors="replace")).name if words else ""
    if program.startswith("java"):
        if b"kafka.Kafka" not in words:
            return "other-jvm"
        properties = Path(words[-2].decode(errors="replace")) if len(words) > 2 else Path()
        cluster = properties.parent.parent.name
        return "broker:scratch" if cluster.startswith("scratch-") else f"broker:{cluster}"
    if program.startswith("python"):
        return f"python:{_python_role(words)}"
    try:  # a program that rewrote its command line (Chromium's helpers) keeps its name here
        return Path(f"/proc/{pid}/comm").read_text().strip() or "other"
    except OSError:
        return program or "other"


def _python_role(words: list[bytes]) -> str:
    """``replicate``, ``monitor``, ``failover``... for ``python -m drkit [--state-dir D] CMD``;
    ``forkserver`` for drkit's isolated helpers; else ``other``."""
    text = [w.decode(errors="replace") for w in words[1:] if w]
    if text[:2] == ["-m", "drkit"] or (text and text[0].endswith("/drkit")):
        rest = text[2:] if text[0] == "-m" else text[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("--state-dir", "--config", "--log-format") else rest[1:]
        return rest[0] if rest else "drkit"
    if any("forkserver" in w for w in text):
        return "forkserver"
    return "other"


_SETTLED = ("broker", "other-jvm", "python", "test")  # prefixes of kinds no exec changes


class _Tracker:
    """Every process this session has seen in its tree, followed until it ends (one per
    process: the tests' phases share it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.followed: dict[int, tuple[int, float, bool]] = {}  # pid -> started, all, in tree
        self.departed = 0.0  # the time of followed processes that ended outside the tree
        self.kinds: dict[tuple[int, int], str] = {}

    def sample(self, state_dir: Path) -> tuple[float, dict[tuple[int, int], float]]:
        """(the total so far, every followed live process's own seconds by (pid, start))."""
        with self.lock:
            table = _all()
            me = os.getpid()
            tree = _descendants(me, table)
            usage = [
                resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            ]
            total = sum(u.ru_utime + u.ru_stime for u in usage)
            watched = tree | (_broker_pids(state_dir) & set(table))
            for pid, (started, last, in_tree) in list(self.followed.items()):
                now = table.get(pid)
                if now is None or now.started != started:
                    del self.followed[pid]
                    if not in_tree:  # reaped by init: its time is nowhere else
                        self.departed += last
                else:
                    watched.add(pid)
            own: dict[tuple[int, int], float] = {}
            if me in table:
                own[(me, table[me].started)] = table[me].own
            for pid in watched:
                times = table[pid]
                key = (pid, times.started)
                everything = times.own + times.reaped
                total += everything
                own[key] = times.own
                self.followed[pid] = (times.started, everything, pid in tree)
                if not self.kinds.get(key, "").startswith(_SETTLED):  # a shell may exec java
                    self.kinds[key] = _kind(pid)
            self.kinds.setdefault((me, table[me].started if me in table else 0), "test")
            return total + self.departed, own


_TRACKER = _Tracker()


@dataclass
class TreeCpu:
    """One measurement: :meth:`start`, then :meth:`stop` returns the seconds by kind."""

    state_dir: Path
    interval_s: float = 0.5
    _before: float = 0.0
    _first: dict[tuple[int, int], float] = field(default_factory=dict)
    _last: dict[tuple[int, int], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._before, own = _TRACKER.sample(self.state_dir)
        self._first = dict(own)
        self._last = dict(own)
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="cpu-tree", daemon=True)
        self._thread.start()

    def _observe(self, own: dict[tuple[int, int], float]) -> None:
        for key, seconds in own.items():
            self._first.setdefault(key, 0.0)  # a process born during the phase starts at 0
            self._last[key] = seconds

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._observe(_TRACKER.sample(self.state_dir)[1])

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        after, own = _TRACKER.sample(self.state_dir)
        self._observe(own)
        total = after - self._before
        by_kind: dict[str, float] = {}
        for key, last in self._last.items():
            kind = _TRACKER.kinds.get(key, "other")
            by_kind[kind] = by_kind.get(kind, 0.0) + max(0.0, last - self._first.get(key, 0.0))
        by_kind["unseen"] = max(0.0, total - sum(by_kind.values()))
        by_kind["total"] = max(total, sum(by_kind.values()))
        return by_kind


def describe(by_kind: dict[str, float], kinds: Iterable[str] = ()) -> str:
    """``total 12.3 = broker:dc2 4.0 + test 3.1 + ...`` (largest first)."""
    parts = sorted(
        ((k, v) for k, v in by_kind.items() if k != "total" and (v >= 0.05 or k in kinds)),
        key=lambda kv: -kv[1],
    )
    return f"total {by_kind.get('total', 0.0):6.1f} = " + " + ".join(
        f"{k} {v:.1f}" for k, v in parts
    )
