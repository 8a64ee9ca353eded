"""The worker side of flow control: which state the store wants this worker's flow in.

One :class:`FlowGate` per flow per ``drkit replicate`` process.  A daemon thread reads the
flow's :class:`~drkit.control.model.FlowDirective` every ``poll_s`` and, at each successful
read, writes this worker's ack - the (epoch, state) the worker last reported through
:meth:`FlowGate.acted` - so the ack row doubles as the worker's heartbeat.  The worker thread
asks :meth:`FlowGate.wanted` (in memory, cheap) which state to be in, and calls
:meth:`FlowGate.acted` once it is there (progress durable); that wakes the thread, so the ack
is written at once rather than at the next poll.

The store away (Patroni's failsafe mode is the model): each poll whose store read fails reads
the flow's control channel on its target instead (drkit.control.channel), adopts a directive
published there with a newer epoch, and acks on the channel.  Only records signed with the
flow's key count (drkit/signing.py): a forged directive is ignored, logged and counted.  While
the channel answers, the worker keeps its directive however long the store is silent - a store
outage alone does not stop healthy replication.  Self-fencing: the decision (:func:`decide`,
pure) is PAUSED once the gate has read neither the store nor the channel for
``failover.worker_silence_s`` - its epoch may be stale, so it stops writing - and follows the
directive again as soon as a read succeeds.
Before its first successful read the gate does not know the flow's epoch at all: PAUSED too.
The silence is measured on the worker's monotonic clock from its last successful *read*; the
ack of that poll is written after it, so by the time the engine sees an ack that old (and no
channel ack moving) the worker has already decided to stop (it then settles what is in flight,
which can take up to the flow's delivery timeout: the engine should allow for that).

Store errors never end the flow: they are logged (without secrets: the store's own message,
never the URL or the statement) and counted through ``on_error``.

For the engine (drkit.failover): a worker that read directive N just before the engine wrote
N+1 acts on N+1 within ``poll_s``; its ack of N may arrive after the engine first lists the
acks, so waiting for acks is only conclusive once ``poll_s`` plus a margin has passed since the
write.  A worker that leaves (SIGTERM, an error it cannot ride out) drops its ack row; a flow
that is STOPPED keeps acking (state STOPPED) while its process idles for the next directive.

Threads: the poll thread owns the store calls; ``wanted``/``acted`` are called from the worker
thread; shared fields are under one lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from drkit.control.channel import ChannelPort
from drkit.control.model import DesiredState, FlowDirective
from drkit.errors import StateStoreError

log = logging.getLogger(__name__)

# How often a worker reads its flow's directive (and acks it: the ack is its heartbeat).  A
# failover's stop_replication waits for the workers' next read - on average half of this: at
# 1 s it was a tenth of an unplanned failover of 10,000 groups (0.85-1.08 s of ~10 s).  Two
# reads and two ack writes a second per worker and flow; LIVE_WITHIN_S (5 s) is unchanged.
DEFAULT_POLL_S = 0.5


class GateReason(StrEnum):
    """Why the gate wants the state it wants."""

    DIRECTIVE = "directive"  # the store's directive (the flow's default when none was written)
    NOT_READ_YET = "not_read_yet"  # the store has not answered yet: the epoch is unknown
    STORE_SILENT = "store_silent"  # no successful read for worker_silence_s: self-fenced
    CHANNEL = "channel"  # the store is silent; the target's control channel vouches for it


@dataclass(frozen=True)
class GateDecision:
    """The state the worker must be in, for which epoch (0: no directive read), and why."""

    state: DesiredState
    epoch: int
    reason: GateReason


def decide(
    directive: FlowDirective | None,
    silent_for_s: float,
    silence_s: float | None,
    channel_silent_for_s: float | None = None,
) -> GateDecision:
    """The state a worker must be in (pure).

    ``directive`` is the newest one read successfully, from the store or the channel (None:
    none yet); ``silent_for_s`` the time since the last successful store read (since the gate
    started when there was none); ``channel_silent_for_s`` the time since the last successful
    channel read (None: never read); ``silence_s`` the policy's ``failover.worker_silence_s``
    (None: never self-fence).

    Invariants: never RUNNING without a directive read; never RUNNING once neither the store
    nor the channel was read for ``silence_s``; otherwise exactly the directive's state and
    epoch.
    """
    if directive is None:
        return GateDecision(DesiredState.PAUSED, 0, GateReason.NOT_READ_YET)
    if silence_s is not None and silent_for_s >= silence_s:
        if channel_silent_for_s is not None and channel_silent_for_s < silence_s:
            return GateDecision(directive.desired, directive.epoch, GateReason.CHANNEL)
        return GateDecision(DesiredState.PAUSED, directive.epoch, GateReason.STORE_SILENT)
    return GateDecision(directive.desired, directive.epoch, GateReason.DIRECTIVE)


class ControlPort(Protocol):
    """What the gate needs of the state store (drkit.control.repo.ControlRepository)."""

    def directive(self, flow: str, default: DesiredState) -> FlowDirective: ...

    def ack(
        self,
        flow: str,
        worker: str,
        epoch: int,
        state: DesiredState,
        failure: str | None = None,
    ) -> None: ...

    def forget_worker(self, flow: str, worker: str) -> None: ...


class StoreControl:
    """A :class:`ControlRepository` on a store URL, migrated on first use (not at start: the
    store may be away when the worker starts).  Thread-safe; one per process is enough."""

    def __init__(self, url: str) -> None:
        from drkit.control.repo import ControlRepository
        from drkit.store.db import StateStore

        self._store = StateStore(url)
        self._repo = ControlRepository(self._store)
        self._ready = False
        self._lock = threading.Lock()

    def _current(self) -> None:
        with self._lock:
            if not self._ready:
                self._store.ensure_current()
                self._ready = True

    def directive(self, flow: str, default: DesiredState) -> FlowDirective:
        self._current()
        return self._repo.directive(flow, default)

    def ack(
        self,
        flow: str,
        worker: str,
        epoch: int,
        state: DesiredState,
        failure: str | None = None,
    ) -> None:
        self._current()
        self._repo.ack(flow, worker, epoch, state, failure)

    def forget_worker(self, flow: str, worker: str) -> None:
        self._current()
        self._repo.forget_worker(flow, worker)


def describe_store_error(error: BaseException) -> str:
    """A store failure for logs: drkit's message (URL masked) or the driver's own message -
    never SQLAlchemy's text, which carries the statement and its parameters."""
    if isinstance(error, StateStoreError):
        return str(error)
    original = getattr(error, "orig", None)
    if isinstance(original, BaseException):
        return f"{type(original).__name__}: {original}"
    return type(error).__name__


class FlowGate:
    """See the module docstring."""

    def __init__(
        self,
        port: ControlPort,
        flow: str,
        worker: str,
        default: DesiredState,
        silence_s: float | None,
        poll_s: float = DEFAULT_POLL_S,
        on_error: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        channel: ChannelPort | None = None,
        on_rejected: Callable[[int], None] | None = None,
    ) -> None:
        """``on_rejected(n)``: n more records of the flow on the channel failed verification
        (drkit/signing.py) and were ignored; each time, a warning is logged too."""
        self.flow = flow
        self._on_rejected = on_rejected
        self._rejected = 0
        self.worker = worker
        self.default = default
        self.silence_s = silence_s
        self.poll_s = poll_s
        self._port = port
        self._on_error = on_error
        self._clock = clock
        self._lock = threading.Lock()
        self._started = clock()
        self._directive: FlowDirective | None = None
        self._last_read: float | None = None
        self._channel = channel
        self._last_channel_read: float | None = None
        self._acted: tuple[int, DesiredState] | None = None
        self._failure: str | None = None  # the flow ended for good on this error
        self._failing = False
        self.errors = 0
        self._read = threading.Event()  # set at the first successful read
        self._wake = threading.Event()
        self._quit = threading.Event()
        self._thread: threading.Thread | None = None

    # -- worker thread ----------------------------------------------------------------------

    def wanted(self) -> GateDecision:
        """The state the worker must be in now (see :func:`decide`)."""
        with self._lock:
            directive, last, channel = self._directive, self._last_read, self._last_channel_read
        now = self._clock()
        since = self._started if last is None else last
        channel_silent = None if channel is None else now - channel
        return decide(directive, now - since, self.silence_s, channel_silent)

    def acted(self, epoch: int, state: DesiredState) -> None:
        """The worker is in ``state`` for ``epoch`` (progress durable): ack it now."""
        with self._lock:
            self._acted = (epoch, state)
        self._wake.set()

    def wait_read(self, stop: threading.Event, timeout_s: float | None = None) -> bool:
        """Block until the first successful read (True), ``stop`` is set or ``timeout_s`` has
        passed (False)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            if self._read.wait(0.1):
                return True
        return False

    # -- poll thread ------------------------------------------------------------------------

    def start(self) -> FlowGate:
        self._thread = threading.Thread(target=self._loop, name=f"gate {self.flow}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = 10.0, failure: str | None = None) -> None:
        """Stop polling.  A worker whose flow is STOPPED writes its ack one last time; one whose
        flow ended on an error (``failure``, one line) writes it with the error and keeps its
        row, so the store shows why the flow does not run; any other worker drops its ack row
        (it left: nothing to wait for).  Bounded by ``timeout_s``."""
        with self._lock:
            self._failure = failure
        self._quit.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._channel is not None:
            try:
                self._channel.close()
            except Exception as err:
                self._failed("channel close", err)

    def _loop(self) -> None:
        while not self._quit.is_set():
            self._wake.clear()
            self.poll_once()
            self._wake.wait(self.poll_s)
        self._leave()

    def poll_once(self) -> None:
        """One round: read the directive; after a successful read, write the ack (if any)."""
        try:
            directive = self._port.directive(self.flow, self.default)
        except Exception as err:  # a store error must never end the flow
            self._failed("read", err)
            self._consult_channel()
            return
        with self._lock:
            self._directive, self._last_read = directive, self._clock()
            acted = self._acted
        self._read.set()
        if self._failing:
            self._failing = False
            log.info("state store answers again", extra={"flow": self.flow, "errors": self.errors})
        if acted is not None:
            try:
                self._port.ack(self.flow, self.worker, *acted)
            except Exception as err:
                self._failed("ack", err)

    def _consult_channel(self) -> None:
        """The store did not answer: read the flow's control channel on the target; adopt a
        directive published there with a newer epoch; ack there (the ack is the heartbeat)."""
        if self._channel is None:
            return
        try:
            view = self._channel.read()
        except Exception as err:
            self._failed("channel read", err)
            return
        if view.rejected > self._rejected:
            more, self._rejected = view.rejected - self._rejected, view.rejected
            log.warning(
                "flow control: ignored control-channel records that failed verification "
                "(no valid drkit-mac: not written by drkit for this flow)",
                extra={"flow": self.flow, "records": more},
            )
            if self._on_rejected is not None:
                self._on_rejected(more)
        published = view.directive or FlowDirective(self.flow, self.default, 0)
        with self._lock:
            known = self._directive
            if known is None or published.epoch > known.epoch:
                self._directive = published
                log.warning(
                    "flow control: following the control channel (the store does not answer)",
                    extra={"flow": self.flow, "epoch": published.epoch,
                           "desired": published.desired.value},
                )  # fmt: skip
            self._last_channel_read = self._clock()
            acted = self._acted
        self._read.set()
        if acted is not None:
            try:
                self._channel.ack(self.worker, *acted)
            except Exception as err:
                self._failed("channel ack", err)

    def _leave(self) -> None:
        with self._lock:
            acted, failure = self._acted, self._failure
        try:
            if failure is not None:
                epoch, state = acted if acted is not None else (0, DesiredState.PAUSED)
                self._port.ack(self.flow, self.worker, epoch, state, failure)
            elif acted is not None and acted[1] is DesiredState.STOPPED:
                self._port.ack(self.flow, self.worker, *acted)
            else:
                self._port.forget_worker(self.flow, self.worker)
        except Exception as err:
            self._failed("leave", err)

    def _failed(self, operation: str, error: BaseException) -> None:
        self.errors += 1
        if self._on_error is not None:
            self._on_error()
        # One warning per outage; the rest at debug (the poll runs twice a second).
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(
            level,
            "flow control: state store call failed",
            extra={
                "flow": self.flow,
                "operation": operation,
                "error": describe_store_error(error),
                "errors": self.errors,
            },
        )
