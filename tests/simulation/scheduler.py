"""A deterministic scheduler for real code: simulated processes, threads, time and faults.

Each simulated *process* (an engine, a monitor's tick, a replication worker, an operator's
command) runs real drkit code in one or more threads, but only one thread runs at a
time: every call into the simulated world - a cluster's admin API, the state store, a sleep,
a lease confirmation - is a *point* where the thread parks and the scheduler, driven by one
seeded ``random.Random``, decides what happens next: which thread goes on, whether a process is
killed there (kill -9: it never runs again, no ``finally`` of it runs) or frozen (SIGSTOP: none
of its threads runs until simulated time has passed), whether the world changes (a cluster
down, a topic created, an application's write).  Time is simulated: it advances only when no
thread can run, to the next moment one wakes up.  The same seed gives the same run, event for
event; :attr:`Sim.trace` lists them.

Threads a process starts through ``drkit.clock.every`` (the lease keeper's renewals) are
threads of that process here too: frozen and killed with it.

A simulated thread is a greenlet of the harness's thread: letting one go on to its next point
and back is two greenlet switches - as OS threads taking turns on a lock each way it was two
futex hand-offs and GIL transfers, ~20% of a schedule's CPU.  drkit's per-thread clock
(``drkit.clock``) is kept per greenlet.  A thread that runs ``real_timeout_s`` without a point
is stopped by a watchdog (an exception raised in it) and the schedule ends :class:`Stuck`.
"""

from __future__ import annotations

import contextlib
import ctypes
import random
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import CodeType, FrameType
from typing import Any

import greenlet  # type: ignore[import-untyped]  # SQLAlchemy's own dependency

from drkit import clock as drkit_clock

EPOCH = datetime(2026, 12, 1, tzinfo=UTC)
# A code object's ``file:function`` (the same few hundred functions park over and over).
_NAMES: dict[CodeType, str] = {}


def _named(code: CodeType) -> str:
    """``code``'s ``file:function`` (kept in :data:`_NAMES`)."""
    name = _NAMES.get(code)
    if name is None:
        name = _NAMES[code] = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}"
    return name


class Killed(BaseException):
    """Raised in a parked thread of a killed process once the schedule is over (so it unwinds
    and ends); never while the schedule runs - a killed process simply never runs again."""


class Stuck(Exception):
    """A thread ran too long without reaching a point (real time): the simulated world lacks a
    point somewhere, or the code busy-waits on real time."""


class _Stalled(BaseException):
    """Raised by the watchdog in a thread that ran too long without a point."""


class _PerGreenlet:
    """``drkit.clock``'s per-thread store, per greenlet: each simulated thread (a greenlet)
    has its own clock, as each OS thread has its own (a thread's first greenlet stands for
    it)."""

    _of: weakref.WeakKeyDictionary[Any, dict[str, object]]

    def __init__(self) -> None:
        object.__setattr__(self, "_of", weakref.WeakKeyDictionary())

    def __getattr__(self, name: str) -> object:
        found: dict[str, object] | None = self._of.get(greenlet.getcurrent())
        if found is None or name not in found:
            raise AttributeError(name)
        return found[name]

    def __setattr__(self, name: str, value: object) -> None:
        self._of.setdefault(greenlet.getcurrent(), {})[name] = value


drkit_clock._installed = _PerGreenlet()  # type: ignore[assignment]


@dataclass
class SimThread:
    process: SimProcess
    name: str
    wake_at: float = 0.0
    label: str = "start"
    frame: FrameType | None = None  # where it is parked (read only while it is)
    done: bool = False
    error: BaseException | None = None
    runner: greenlet.greenlet | None = None
    _named: tuple[FrameType | None, tuple[str, ...]] = (None, ())
    _inside: tuple[FrameType | None, str, bool] = (None, "", False)

    @property
    def stack(self) -> tuple[str, ...]:
        """The functions it is parked in (``file:function``), innermost first - walked only
        when asked (most points are never asked), while the thread is parked; kept for as long
        as it parks in the same frame (a frame's callers never change)."""
        if self._named[0] is self.frame:
            return self._named[1]
        names = []
        frame = self.frame
        while frame is not None:
            names.append(_named(frame.f_code))
            frame = frame.f_back
        self._named = (self.frame, tuple(names))
        return self._named[1]

    def inside(self, function: str) -> bool:
        """Whether ``function`` (``file:function``) is on its :attr:`stack` - its frames walked
        up to the first that is (the stack not named), the answer kept for as long as it parks
        in the same frame (asked of every live thread after every event)."""
        frame = self.frame
        kept = self._inside
        if kept[0] is frame and kept[1] == function and frame is not None:
            return kept[2]
        found = False
        while frame is not None:
            if _named(frame.f_code) == function:
                found = True
                break
            frame = frame.f_back
        self._inside = (self.frame, function, found)
        return found


@dataclass
class SimProcess:
    """One simulated process: its threads, its monotonic clock, its fate."""

    sim: Sim
    name: str
    kind: str
    threads: list[SimThread] = field(default_factory=list)
    ended_threads: int = 0  # how many of ``threads`` are done
    frozen_until: float = 0.0
    killed: bool = False
    offset: float = 0.0  # its monotonic clock's origin differs from every other's
    result: object = None
    error: BaseException | None = None

    @property
    def alive(self) -> bool:
        return not self.killed and self.ended_threads < len(self.threads)

    @property
    def finished(self) -> bool:
        return not self.killed and (not self.threads or self.threads[0].done)


class ProcessClock:
    """``drkit.clock.Clock`` for the threads of one simulated process."""

    def __init__(self, process: SimProcess) -> None:
        self.process = process

    def monotonic(self) -> float:
        return self.process.sim.now + self.process.offset

    def sleep(self, seconds: float) -> None:
        self.process.sim.sleep(max(0.0, seconds))

    def every(
        self, interval_s: float, task: Callable[[], None], name: str
    ) -> drkit_clock.Stoppable:
        return self.process.sim.every(self.process, interval_s, task, name)


class _Every:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class Sim:
    """The scheduler; see the module docstring."""

    def __init__(self, seed: int, real_timeout_s: float = 20.0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.processes: list[SimProcess] = []  # every one ever started
        self.live: list[SimProcess] = []  # those not killed with a thread not done
        self.ended: list[SimProcess] = []  # ended, not killed, not yet taken
        self.trace: list[str] = []
        self.over = False
        self._current: SimThread | None = None  # the one let go on (:meth:`step`)
        self._harness = greenlet.getcurrent()
        self._ident = threading.get_ident()
        self._real_timeout_s = real_timeout_s
        self._watchdog: threading.Event | None = None
        self._counter = 0
        # Grows whenever a process starts, is killed or a thread of it ends: what depends only
        # on which processes are alive (:meth:`prune`, the driver's workers) is redone then.
        self.changes = 0
        self._pruned = -1
        self.steps = 0  # how many times a thread was let go on (:meth:`step`)
        self.stepped: SimThread | None = None  # the last one

    # -- time -----------------------------------------------------------------------------

    def wall(self) -> datetime:
        """The simulated wall clock (the state store's clock)."""
        return EPOCH + timedelta(seconds=self.now)

    def log(self, event: str) -> None:
        self.trace.append(f"{self.now:9.3f} {event}")

    # -- processes ------------------------------------------------------------------------

    def spawn(self, kind: str, body: Callable[[], object], name: str | None = None) -> SimProcess:
        """Start a simulated process running ``body`` in its first thread."""
        self._counter += 1
        process = SimProcess(self, name or f"{kind}#{self._counter}", kind)
        process.offset = self.rng.uniform(0, 1000)
        self.processes.append(process)
        self.live.append(process)
        self.changes += 1
        self._thread(process, process.name, body, main=True)
        self.log(f"spawn {process.name}")
        return process

    def every(
        self, process: SimProcess, interval_s: float, task: Callable[[], None], name: str
    ) -> _Every:
        handle = _Every()

        def loop() -> None:
            while True:
                self.sleep(interval_s)
                if handle.stopped:
                    return
                task()

        self._thread(process, f"{process.name}/{name}", loop, main=False)
        return handle

    def _thread(
        self, process: SimProcess, name: str, body: Callable[[], object], main: bool
    ) -> SimThread:
        state = SimThread(process, name, wake_at=self.now)
        process.threads.append(state)

        def run() -> None:
            drkit_clock.install(ProcessClock(process))
            try:
                if self.over or process.killed:
                    raise Killed()
                result = body()
                if main:
                    process.result = result
            except Killed:
                pass
            except BaseException as err:  # recorded: the actor's outcome
                state.error = err
                if main:
                    process.error = err
                if not isinstance(err, Exception):
                    raise  # the watchdog, Ctrl-C, a test's timeout: the harness's own
            finally:
                state.done = True
                process.ended_threads += 1
                self.changes += 1
                state.frame = None
                drkit_clock.install(None)

        state.runner = greenlet.greenlet(run, parent=self._harness)
        return state

    # -- points (called in simulated threads) -----------------------------------------------

    def current(self) -> SimThread | None:
        if self._current is None or threading.get_ident() != self._ident:
            return None  # the harness, or a thread of the OS a simulated one started
        return self._current

    def point(self, label: str) -> None:
        """Park the calling thread here; the scheduler decides when it goes on."""
        state = self.current()
        if state is None:
            return  # the harness itself (setting the scene, checking): not simulated
        if self.over:
            raise Killed()  # unwinding at the end: never park again
        state.label = label
        # The caller's frame, taken by the thread itself (``sys._current_frames`` from another
        # thread can deadlock with thread start-up); its names are read only if asked.
        state.frame = sys._getframe(1)
        self._harness.switch()
        if self.over or state.process.killed:
            raise Killed()

    def sleep(self, seconds: float) -> None:
        state = self.current()
        if state is None:
            return
        state.wake_at = self.now + seconds
        self.point(f"sleep {seconds:g}")

    # -- scheduling (the harness's thread) --------------------------------------------------

    def prune(self) -> None:
        """Drop the killed and the ended from :attr:`live`; the ended (not killed) wait in
        :attr:`ended` until the harness judges them (:meth:`take_ended`).  Nothing to do
        unless a process was killed or a thread ended since the last time."""
        if self._pruned == self.changes:
            return
        self._pruned = self.changes
        live = []
        for process in self.live:
            if process.alive:
                live.append(process)
            elif not process.killed:
                self.ended.append(process)
        self.live = live

    def take_ended(self) -> list[SimProcess]:
        """The processes that ended (not killed) since the last call."""
        self.prune()
        ended, self.ended = self.ended, []
        return ended

    def runnable(self) -> list[SimThread]:
        self.prune()
        return [
            t
            for p in self.live
            if p.frozen_until <= self.now
            for t in p.threads
            if not t.done and t.wake_at <= self.now
        ]

    def waiting(self) -> list[float]:
        """When the threads that cannot run now could (wake-ups, thaws)."""
        moments = []
        for p in self.live:
            if p.killed:
                continue
            for t in p.threads:
                if not t.done:
                    moments.append(max(t.wake_at, p.frozen_until))
        return [m for m in moments if m > self.now]

    def step(self, thread: SimThread) -> None:
        """Let ``thread`` run until its next point (or its end)."""
        self.steps += 1
        self.stepped = thread
        if self._watchdog is None:
            self._watchdog = self._watch()
        try:
            self._run(thread)
        except _Stalled:
            raise Stuck(f"{thread.name} ran {self._real_timeout_s:g}s without a point") from None

    def _run(self, thread: SimThread) -> None:
        """Switch to ``thread`` until it parks or ends."""
        assert thread.runner is not None
        self._current = thread
        try:
            thread.runner.switch()
        finally:
            self._current = None

    def _watch(self) -> threading.Event:
        """A watchdog: a thread let go on that runs ``real_timeout_s`` (real time) without a
        point gets :class:`_Stalled` raised in it (the harness's thread), which ends it and
        the schedule (:class:`Stuck`).  Stopped by :meth:`finish`."""
        stop = threading.Event()
        poll_s = min(1.0, self._real_timeout_s / 4)

        def watch() -> None:
            seen, since = -1, 0.0
            while not stop.wait(poll_s):
                running = self._current is not None
                if not running or self.steps != seen:
                    seen, since = self.steps, 0.0
                    continue
                since += poll_s
                if since >= self._real_timeout_s:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(self._ident), ctypes.py_object(_Stalled)
                    )
                    seen, since = -1, 0.0

        threading.Thread(target=watch, name=f"sim {self.seed} watchdog", daemon=True).start()
        return stop

    def advance(self, to: float) -> None:
        if to > self.now:
            self.now = to

    def kill(self, process: SimProcess) -> None:
        process.killed = True
        self.changes += 1
        self.log(f"KILL {process.name} at {self._where(process)}")

    def freeze(self, process: SimProcess, seconds: float) -> None:
        process.frozen_until = max(process.frozen_until, self.now + seconds)
        self.log(f"FREEZE {process.name} {seconds:g}s at {self._where(process)}")

    @staticmethod
    def _where(process: SimProcess) -> str:
        live = [t.label for t in process.threads if not t.done]
        return live[0] if live else "end"

    def finish(self) -> None:
        """End the schedule: every parked thread unwinds (Killed) and ends."""
        self.over = True
        try:
            for process in self.processes:
                for thread in process.threads:
                    if not thread.done:
                        with contextlib.suppress(_Stalled):
                            self._run(thread)
        finally:
            if self._watchdog is not None:
                self._watchdog.set()
            drkit_clock.install(None)
