"""Is the state store taking the monitor's writes?  Tracked, not assumed.

Every store call the monitor makes goes through :class:`StoreWatch`: a success marks the store
available, a failure (an error or an overrun budget) marks it unavailable - with the time it
started and the last error - until the next success.  ``/healthz`` fails while it is
unavailable, ``drkit_state_store_up`` is 0, and ``drkit_state_store_errors_total{operation}``
counts the failures per kind of operation (a bounded label).

Probing does not depend on it: the monitor keeps probing, evaluating and updating metrics with
the store down, and writes the newest state (with any transition it missed) once the store
answers again.

Thread-safe: jobs report from the scheduler's worker threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import StrEnum

from drkit.health.metrics import MonitorMetrics


class StoreOperation(StrEnum):
    """What the monitor was doing with the store (the ``operation`` label)."""

    PROBE = "probe"  # a cluster probe's observation, observer state, transition
    FLOW = "flow"  # a flow observation
    GROUPS = "groups"  # consumer-group lag transitions
    QUORUM = "quorum"  # reading every observer's state, writing quorum transitions
    PRUNE = "prune"  # dropping old observations
    STATUS = "status"  # reading the status picture (/api/status, the page)


@dataclass(frozen=True)
class StoreHealth:
    """The store as the monitor last found it."""

    available: bool
    since: float | None  # when it became unavailable (None while available)
    error: str | None  # the latest failure while unavailable
    operation: StoreOperation | None  # which operation failed last while unavailable


class StoreWatch:
    def __init__(self, metrics: MonitorMetrics) -> None:
        self._metrics = metrics
        self._lock = threading.Lock()
        self._health = StoreHealth(True, None, None, None)
        metrics.store_up.set(1)

    def succeeded(self) -> None:
        with self._lock:
            self._health = StoreHealth(True, None, None, None)
        self._metrics.store_up.set(1)

    def failed(self, operation: StoreOperation, error: str, now: float | None = None) -> None:
        at = time.time() if now is None else now
        with self._lock:
            since = self._health.since if not self._health.available else at
            self._health = StoreHealth(False, since, error, operation)
        self._metrics.store_up.set(0)
        self._metrics.store_errors.labels(operation.value).inc()

    @property
    def health(self) -> StoreHealth:
        with self._lock:
            return self._health
