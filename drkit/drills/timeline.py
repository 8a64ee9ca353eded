"""The drill's clock and event log.

Every moment the report speaks about (fault injected, source declared unavailable, run started
and finished, clients resumed) is one :class:`~drkit.drills.report.Event` here, timed from the
drill's start.  Thread-safe: writers, group members and the runner all add to it.
"""

from __future__ import annotations

import logging
import threading
import time

from drkit.drills.report import Event

log = logging.getLogger("drkit.drill")

# Every workload group has a checkpoint on the target: the steady state a fault may break.
CHECKPOINTED = "checkpoints_current"
# The moments RTO is measured between (see measure.rto_of).
FAULT = "fault_injected"
DETECTED = "source_unavailable"
RUN_STARTED = "failover_started"
POINTER_MOVED = "pointer_moved"
RUN_FINISHED = "failover_finished"
CLIENTS_RESUMED = "clients_resumed"


class Timeline:
    def __init__(self, started_wall: float | None = None) -> None:
        self.started = started_wall if started_wall is not None else time.time()
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def since_start(self, wall: float | None = None) -> float:
        return round((wall if wall is not None else time.time()) - self.started, 3)

    def add(self, kind: str, detail: str = "", at_wall: float | None = None) -> Event:
        event = Event(self.since_start(at_wall), kind, detail)
        with self._lock:
            self._events.append(event)
        log.info("drill event %s at %.1fs: %s", kind, event.at_s, detail)
        return event

    def first(self, kind: str) -> Event | None:
        with self._lock:
            return next((e for e in self._events if e.kind == kind), None)

    def events(self) -> tuple[Event, ...]:
        with self._lock:
            return tuple(sorted(self._events, key=lambda e: e.at_s))
