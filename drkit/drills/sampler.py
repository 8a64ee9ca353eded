"""A drill's lag series: records written (acknowledged) and copied, once per sample interval.

The sampler runs beside the drill in a thread of its own.  What it cannot measure stays
unknown: a sample whose read of the target failed records ``None`` as copied (drawn as a gap
in the report), never a 0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from drkit.drills.measure import per_second
from drkit.drills.report import Series
from drkit.errors import DrkitError
from drkit.kafka import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin

log = logging.getLogger(__name__)


class Sampler(threading.Thread):
    """Every ``interval_s``: ``written()`` and the records on the ``replicas`` of ``target``,
    stamped with ``clock()`` (seconds since the drill started)."""

    def __init__(
        self,
        target: ClusterEndpoint,
        replicas: Sequence[str],
        written: Callable[[], int],
        clock: Callable[[], float],
        interval_s: float,
        connect: AdminFactory,
    ) -> None:
        super().__init__(daemon=True, name="drill-sampler")
        self.target, self.replicas, self.connect = target, tuple(replicas), connect
        self.written, self.clock, self.interval_s = written, clock, interval_s
        self._stop_event = threading.Event()
        self.rows: list[tuple[float, int, int | None]] = []
        self._lock = threading.Lock()

    def copied_total(self) -> int:
        """Records on the replica at the latest sample that measured them (0 before any)."""
        with self._lock:
            return next((c for _, _, c in reversed(self.rows) if c is not None), 0)

    def _copied(self, admin: ClusterAdmin) -> int:
        total = 0
        topics = admin.list_topics(timeout_s=2.0)
        for replica in self.replicas:
            if replica in topics:
                ends = admin.topic_offsets(replica, timeout_s=2.0)
                total += sum(end - start for start, end in ends.values())
        return total

    def run(self) -> None:
        admin = self.connect(self.target)
        while not self._stop_event.is_set():
            written = self.written()
            copied: int | None = None  # unknown unless the target answers now
            try:
                copied = self._copied(admin)
            except DrkitError as err:
                log.debug("sample of the target failed: %s", err)
            with self._lock:
                self.rows.append((self.clock(), written, copied))
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)

    def series(self) -> Series:
        with self._lock:
            rows = list(self.rows)
        t = tuple(r[0] for r in rows)
        produced = tuple(r[1] for r in rows)
        copied = tuple(r[2] for r in rows)
        return Series(
            t=t,
            source_end=produced,
            target_end=copied,
            lag=tuple(
                None if c is None else max(0, p - c) for p, c in zip(produced, copied, strict=True)
            ),
            produced_per_s=tuple(0.0 if r is None else r for r in per_second(t, produced)),
            copied_per_s=per_second(t, copied),
        )
