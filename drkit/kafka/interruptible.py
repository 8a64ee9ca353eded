"""Blocking librdkafka calls that a Ctrl-C still interrupts at once.

Some client calls (a metadata request: ``list_topics``) block inside C until the broker
answers or their timeout passes; Python runs signal handlers only between bytecodes, so a
Ctrl-C during one acts only when it returns - up to its whole timeout (8-13 s against a cluster
that accepts connections and never answers).  Such a call runs here on a daemon thread of its
own while the caller waits on an event, which a signal does interrupt.

The same holds for a thread that is asked to stop (a replication flow whose process got
SIGTERM): ``wait(stop)`` gives up when the event is set, raising :class:`~drkit.errors.Stopped`.

Contract: :meth:`InFlight.wait` returns the call's result or raises its exception; when the
wait itself is interrupted (KeyboardInterrupt, anything a signal handler raises, or Stopped)
the call runs on to its own timeout on that thread, and its client must not be destroyed
before then - ``AdminBase.close`` hands such a client to the reaper, which waits for the call
first (:func:`drkit.kafka.lifetimes.close_when_idle`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from drkit.errors import Stopped

T = TypeVar("T")

# How often a wait that may be stopped looks at its stop event.
STOP_CHECK_S = 0.1


class InFlight(Generic[T]):
    """``fn()`` running on a daemon thread of its own from construction on."""

    def __init__(self, fn: Callable[[], T], name: str = "drkit-blocking-call") -> None:
        self._fn = fn
        self._done = threading.Event()
        self._result: T | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as err:  # handed to the waiting caller, raised there
            self._error = err
        finally:
            self._done.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, stop: threading.Event | None = None) -> T:
        """The call's result (its exception raised here); a signal interrupts the wait, and
        ``stop`` once set ends it with Stopped."""
        if stop is None:
            self._done.wait()
        while not self._done.wait(STOP_CHECK_S):
            if stop is not None and stop.is_set():
                raise Stopped(f"{self.thread.name}: given up, the process is stopping")
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]
