"""Crash isolation for admin requests that can abort the whole process inside librdkafka.

When a broker restarts while one of these requests is in flight, librdkafka (seen in every
release from 2.11 to 2.16) fails an internal assertion or segfaults, killing the Python process:
DescribeConsumerGroups (``rd_kafka_enq_once_del_source_return``), ListConsumerGroupOffsets
(SIGSEGV) and DescribeCluster (``rd_kafka_admin_response_parse``).  A DR monitor or replicator
must survive exactly that event, so :class:`KafkaAdmin` sends the consumer-group requests to a
helper process per cluster (this module).  If the helper dies, the call raises a retriable
error and the next call starts a fresh helper; the caller's process never sees the crash.
(DescribeCluster is avoided altogether: cluster id and controller come from metadata.)

Requests to one helper are serialised; they are small and infrequent (checkpoint rounds,
probes, group syncs).  A helper runs in its own process group (a signal to its owner's group
does not reach it: its owner decides when it ends) and prints its stacks on SIGUSR1.

Helpers are forked from multiprocessing's fork server (one per owner, started with the first
helper, the Kafka adapter imported once), not spawned: a fresh Python with librdkafka's
bindings costs about a second of CPU, and a replicator, monitor or failover starts one per
cluster and again after every crash.  The fork server holds no Kafka client and no thread
worth copying.  It too leaves its owner's process group (drkit.kafka.forkserver_preload).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from drkit.errors import DrkitError, FatalKafkaError, LeaseLost, RetriableKafkaError
from drkit.gc_pause import collection_paused

log = logging.getLogger(__name__)

_FATAL = ("FatalKafkaError",)


class _HelperLost(Exception):
    """The helper process died or hung during a request."""


# A helper with no request for this long ends itself: one kept for every endpoint a process
# ever used (a test session, a drill's short-lived aliases) would hold a librdkafka client
# reconnecting to clusters long gone.  Its next request starts a fresh one (~0.1 s).
IDLE_RETIRE_S = 60.0
# What a retiring helper answers instead of a request it has not run: the owner starts a
# fresh helper and sends the request again (not a lost helper).
_RETIRED = ("retired",)


def _serve(
    admin_class: Callable[..., Any],
    endpoint: Any,
    default_timeout_s: float,
    connection: Connection,
    owner: OwnerIdentity,
    idle_retire_s: float = IDLE_RETIRE_S,
) -> None:
    """Helper process: run requested methods of an ``admin_class`` (KafkaAdmin, handed in by
    the owner: this module runs whatever admin it is given) until the pipe closes, or until no
    request came for ``idle_retire_s`` - then it answers :data:`_RETIRED` (to a request sent
    meanwhile, which it never runs) and ends."""
    from drkit import logs

    # The helper lives and dies with its owner, not with its owner's process group: a SIGTERM
    # or Ctrl-C sent to the whole group (a supervisor's or test's killpg, a terminal) must not
    # kill it under a request the stopping owner would then repeat in a freshly started
    # helper.  The owner ends it (multiprocessing terminates daemon children at exit; atexit:
    # _close_all); an orphan (owner killed -9) exits within a second, even mid-request.
    os.setpgrp()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by the owner's start
    logs.dump_stacks_on_sigusr1()
    threading.Thread(target=_exit_when_orphaned, args=(owner,), daemon=True).start()

    admin = admin_class(endpoint, default_timeout_s, isolate=False)
    while True:
        try:
            if not connection.poll(idle_retire_s):
                connection.send(_RETIRED)
                return
        except (EOFError, OSError):
            return
        # A request and its answer are bursts of acyclic objects - 500,000 offsets for a
        # failover at 10,000 groups, each a librdkafka TopicPartition the collector tracks -
        # during which generation-2 passes cost a third of the helper's CPU, taken from the
        # broker beside it on a small machine (writing 10,000 groups x 50: 3.1 -> 2.1 CPU-s,
        # 4.3 -> 3.6 s).  Cycles made meanwhile are collected once the request is answered.
        with collection_paused():
            if not _answer(admin, connection):
                return


def _answer(admin: Any, connection: Connection) -> bool:
    """Receive one request, run it, send its answer; False when the pipe closed."""
    try:
        method, args, kwargs = connection.recv()
    except (EOFError, OSError):
        return False
    try:
        connection.send(("ok", getattr(admin, method)(*args, **kwargs)))
    except DrkitError as err:
        connection.send(("error", type(err).__name__, str(err)))
    return True


def _retired(connection: Connection) -> bool:
    """Whether the helper's last word in the pipe is :data:`_RETIRED`."""
    try:
        return bool(connection.poll(0)) and connection.recv() == _RETIRED
    except (EOFError, OSError):
        return False


@dataclass(frozen=True)
class OwnerIdentity:
    """The process that owns a helper: its pid and, where /proc tells it, its start time (a
    pid the system reuses for another process is not the owner)."""

    pid: int
    started: str | None

    @classmethod
    def of_this_process(cls) -> OwnerIdentity:
        stat = _proc_stat(os.getpid())
        return cls(os.getpid(), stat[19] if stat else None)

    def alive(self) -> bool:
        """Whether the owner still runs (a zombie - killed, not yet reaped - does not)."""
        if _PROC is not None:
            stat = _proc_stat(self.pid)
            return (
                stat is not None
                and stat[0] != "Z"
                and (self.started is None or stat[19] == self.started)
            )
        try:
            os.kill(self.pid, 0)  # no /proc (macOS): whether the pid exists at all
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, owned by another user
        return True


_PROC: Path | None = Path("/proc") if Path("/proc/self").is_dir() else None


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    if _PROC is None:
        return None
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals in this thread (a signal sent to the process meanwhile waits,
    or goes to another thread)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _exit_when_orphaned(owner: OwnerIdentity) -> None:
    # Not the parent pid: a helper's parent is the fork server, which may go first.
    while owner.alive():
        time.sleep(1.0)
    os._exit(0)


def _context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """Fork server where the platform has one (Linux, macOS), spawn elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "drkit.kafka.forkserver_preload"])
    return context


# A helper lost twice in a row starts again only after a pause, 1 s doubling up to this: a
# request that aborts librdkafka every time (seen under load) then costs one Python start per
# pause, not one per call.  The first loss is retried at once (AdminHelper.call).
RESPAWN_BACKOFF_MAX_S = 30.0


class AdminHelper:
    """One helper process for one cluster endpoint (started lazily, restarted after a crash)."""

    def __init__(
        self,
        admin_class: Callable[..., Any],
        endpoint: Any,
        default_timeout_s: float,
        name: str = "requests",
        idle_retire_s: float = IDLE_RETIRE_S,
    ) -> None:
        self.admin_class = admin_class
        self.endpoint = endpoint
        self.default_timeout_s = default_timeout_s
        self.name = name
        self.idle_retire_s = idle_retire_s
        self._lock = threading.Lock()
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Connection | None = None
        self.restarts = 0
        self._lost_in_a_row = 0
        self._respawn_at = 0.0  # time.monotonic() before which no new helper is started

    def _start(self) -> Connection:
        context = _context()
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(
                self.admin_class,
                self.endpoint,
                self.default_timeout_s,
                child,
                OwnerIdentity.of_this_process(),
                self.idle_retire_s,
            ),
            name=f"drkit-admin-{self.endpoint.alias}-{self.name}",
            daemon=True,
        )
        try:
            # Blocked here, the stop signals are blocked in a fork server this start launches
            # (the mask is inherited): it starts in the owner's process group and would die of
            # a signal sent to that group before it can leave it (forkserver_preload).  The
            # resource tracker first: starting one unblocks SIGINT and SIGTERM on its way out.
            resource_tracker.ensure_running()
            with _stop_signals_blocked():
                process.start()
        except (EOFError, OSError) as err:
            parent.close()
            child.close()
            raise _HelperLost(
                f"{self.endpoint.alias}: its isolated helper could not be started: {err}"
            ) from None
        child.close()
        self._process, self._connection = process, parent
        return parent

    def start(self) -> None:
        """Start the helper process now unless it runs (the owner's first helper waits for the
        fork server to start: about half a second).  A failed start is left to the next call."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._discard()
                if time.monotonic() >= self._respawn_at:
                    with contextlib.suppress(_HelperLost):
                        self._start()

    def _discard(self) -> None:
        self.kill()
        if self._connection is not None:
            self._connection.close()
        self._process = self._connection = None

    def call(self, method: str, *args: Any, timeout_s: float, **kwargs: Any) -> Any:
        """Run ``KafkaAdmin.<method>`` in the helper; one retry in a fresh helper after a crash."""
        try:
            return self._call_once(method, args, kwargs, timeout_s)
        except _HelperLost:
            pass
        try:
            return self._call_once(method, args, kwargs, timeout_s)
        except _HelperLost as lost:
            raise RetriableKafkaError(str(lost)) from None

    def _call_once(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float
    ) -> Any:
        """One request; a helper that retired instead of running it (it was idle when the
        request came) is replaced and the request sent again - once: a fresh helper does not
        retire before its first request."""
        reply = self._request(method, args, kwargs, timeout_s)
        if reply == _RETIRED:
            reply = self._request(method, args, kwargs, timeout_s)
        if reply[0] == "ok":
            return reply[1]
        _, kind, message = reply
        if kind == LeaseLost.__name__:  # a lease's budget ran out in the helper: nothing sent
            raise LeaseLost(message)
        raise (FatalKafkaError if kind in _FATAL else RetriableKafkaError)(message)

    def _request(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float
    ) -> tuple[Any, ...]:
        with self._lock:
            connection = self._connection
            if connection is None or self._process is None or not self._process.is_alive():
                self._discard()
                pause = self._respawn_at - time.monotonic()
                if pause > 0:
                    raise RetriableKafkaError(
                        f"{self.endpoint.alias}: {method}: its isolated helper was lost "
                        f"{self._lost_in_a_row} times in a row; the next one starts in "
                        f"{pause:.0f}s"
                    )
                connection = self._start()
            try:
                try:
                    connection.send((method, args, {**kwargs, "timeout_s": timeout_s}))
                except OSError:
                    # A helper that retired as we sent (its end closed, its exit not yet seen)
                    # left its answer in the pipe: it never read this request, so it is not
                    # lost - a fresh helper runs it.
                    if _retired(connection):
                        self._discard()
                        return _RETIRED
                    raise
                # Start-up of a fresh helper (imports) plus the request's own deadline.
                if not connection.poll(timeout_s + 30):
                    raise TimeoutError
                reply: tuple[Any, ...] = connection.recv()
            except (EOFError, OSError, TimeoutError):
                exit_code = self._process.exitcode if self._process is not None else None
                self._discard()
                self.restarts += 1
                self._lost_in_a_row += 1
                if self._lost_in_a_row >= 2:
                    pause = min(2.0 ** (self._lost_in_a_row - 2), RESPAWN_BACKOFF_MAX_S)
                    self._respawn_at = time.monotonic() + pause
                log.warning(
                    "admin helper lost; a fresh one serves the next request",
                    extra={
                        "cluster": self.endpoint.alias,
                        "helper": self.name,
                        "request": method,
                        "exit_code": exit_code,
                    },
                )
                raise _HelperLost(
                    f"{self.endpoint.alias}: {method}: the Kafka client crashed or hung in an "
                    f"isolated helper (exit code {exit_code}); retry"
                ) from None
            if reply == _RETIRED:
                self._discard()  # it ends by itself; not lost
                return reply
            self._lost_in_a_row = 0  # it answered
        return reply

    def close(self) -> None:
        with self._lock:
            self._discard()

    def kill(self) -> None:
        """Kill the helper without waiting for the lock: a request in flight then ends at once
        (its pipe closes) instead of holding the exiting process for its whole deadline."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()


_HELPERS: dict[tuple[str, str, str, Callable[..., Any]], AdminHelper] = {}
_HELPERS_LOCK = threading.Lock()


def helper_for(
    admin_class: Callable[..., Any],
    endpoint: Any,
    default_timeout_s: float,
    name: str = "requests",
) -> AdminHelper:
    """The process-wide helper ``name`` for this endpoint (one per alias, connection settings
    and name: a monitor samples every group's offsets in a helper of its own, so its probes'
    requests neither wait behind that bulk work nor die with it)."""
    key = (endpoint.alias, endpoint.config.model_dump_json(), name, admin_class)
    with _HELPERS_LOCK:
        helper = _HELPERS.get(key)
        if helper is None:
            helper = _HELPERS[key] = AdminHelper(admin_class, endpoint, default_timeout_s, name)
        return helper


def prewarm(
    admin_class: Callable[..., Any], endpoint: Any, default_timeout_s: float = 15.0
) -> None:
    """Start ``endpoint``'s helper in the background, so the first group request (e.g. a
    failover's) does not wait for the process to spawn."""
    helper = helper_for(admin_class, endpoint, default_timeout_s)
    threading.Thread(target=helper.start, name="drkit-admin-prewarm", daemon=True).start()


@atexit.register
def _close_all() -> None:
    """At exit: no request is waited for (a thread may still be in one, holding its helper's
    lock until the request's deadline) - the helpers are killed."""
    for helper in list(_HELPERS.values()):
        helper.kill()
