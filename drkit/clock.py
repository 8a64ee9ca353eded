"""The control plane's clock: budgets, waits and background renewals, in one replaceable place.

The failover engine, its steps, the lease keeper and the reconciler measure durations (deadlines,
polling intervals, a lease's validity) and wait; they ask this module instead of ``time``, so
that the deterministic simulation of the control plane (tests/simulation) can run the real code
on simulated time: a clock installed for a thread answers ``monotonic``, ``sleep`` and runs its
``every`` tasks at the right simulated moments, and a simulated process frozen for a minute
renews nothing during it, exactly as a SIGSTOPped one.

Without an installed clock (production) this is the system's monotonic clock, ``time.sleep`` and
one daemon thread per ``every`` task.  Wall-clock moments compared across hosts never come from
here: they come from the state store (drkit.store.clock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from drkit.errors import LeaseLost


class Budget(float):
    """A timeout, in seconds, for a side effect a lease allowed - which also remembers until
    when that lease surely lasts (:attr:`lease_until`, on this thread's :func:`monotonic`).

    A float wherever a timeout is expected.  The cluster adapters call :func:`time_left` right
    before they send and before each retry: a process that stood still between the lease's
    confirmation and the request (SIGSTOP, a paused VM, a long GC) sends nothing once the lease
    may have lapsed, and no retry outlives it.  What remains is the instant between that check
    and the bytes leaving the process."""

    lease_until: float

    def __new__(cls, seconds: float, lease_until: float) -> Budget:
        made = super().__new__(cls, seconds)
        made.lease_until = lease_until
        return made

    def __reduce__(self) -> tuple[object, ...]:
        return (Budget, (float(self), self.lease_until))


def time_left(timeout_s: float | None, what: str) -> float | None:
    """``timeout_s`` as it stands now: for a :class:`Budget`, no more than its lease surely has
    left - and :class:`~drkit.errors.LeaseLost` (``what`` was not sent) once that is nothing.
    Any other timeout unchanged."""
    if not isinstance(timeout_s, Budget):
        return timeout_s
    left = timeout_s.lease_until - monotonic()
    if left <= 0:
        raise LeaseLost(
            f"{what}: not sent - the lease that allowed it may have lapsed while this process "
            f"stood still ({-left:.1f}s past what it surely had)"
        )
    return min(float(timeout_s), left)


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Clock(Protocol):
    """What the control plane asks of time."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def every(self, interval_s: float, task: Callable[[], None], name: str) -> Stoppable:
        """Run ``task`` every ``interval_s`` (the first after one interval) until stopped."""
        ...


class _Repeating:
    """A daemon thread running a task every interval until stopped (the system clock's)."""

    def __init__(self, interval_s: float, task: Callable[[], None], name: str) -> None:
        self._stop = threading.Event()
        self._interval_s, self._task = interval_s, task
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._task()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread() and self._thread.is_alive():
            self._thread.join(5)


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def every(self, interval_s: float, task: Callable[[], None], name: str) -> Stoppable:
        return _Repeating(interval_s, task, name)


SYSTEM: Clock = SystemClock()
_installed = threading.local()


def current() -> Clock:
    """The clock of the calling thread: the one installed for it, else the system's."""
    found: Clock | None = getattr(_installed, "clock", None)
    return found if found is not None else SYSTEM


def install(clock: Clock | None) -> None:
    """Use ``clock`` in the calling thread from now on (None: the system's again)."""
    _installed.clock = clock


def monotonic() -> float:
    return current().monotonic()


def sleep(seconds: float) -> None:
    current().sleep(seconds)


def every(interval_s: float, task: Callable[[], None], name: str) -> Stoppable:
    return current().every(interval_s, task, name)


# A moment stamped by another host's clock may lie a little in the future of ours (NTP keeps
# hosts within milliseconds; a write and a read a few ms apart): that much is "just now".
SKEW_TOLERANCE_S = 1.0


def age_s(now_s: float, then_s: float) -> float | None:
    """Seconds from ``then_s`` (a wall-clock moment, perhaps stamped by another host) to
    ``now_s``.  None - unknown, the clocks disagree - when ``then_s`` lies more than
    SKEW_TOLERANCE_S ahead: an age is never made 0 to hide a skew (a negative age clamped to 0
    reads as "fresh" exactly when nothing is known)."""
    age = now_s - then_s
    if age < -SKEW_TOLERANCE_S:
        return None
    return max(0.0, age)
