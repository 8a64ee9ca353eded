"""Run replication flows: one thread per flow in a process, N processes for scale-out - the
``drkit replicate`` process.  It stands above the data plane (drkit/replication/) and the
checkpoint workers (drkit/offsets/) because it runs both (tests/unit/test_layer_order.py).

Scale-out uses Kafka itself: every worker process joins the flow's consumer group on the source,
so partitions are shared (cooperative rebalancing) and a dead worker's partitions move to the
others within the session timeout.  The parent of ``--workers N`` only supervises: it forwards
SIGTERM/SIGINT and restarts a child that died abnormally; it never coordinates partitions.

With a state store, each flow in each process has a :class:`~drkit.control.gate.FlowGate`: the
flow pauses, resumes or stops as its directive says.  A flow whose directive is STOPPED ends
its worker (progress durable, the source group left) and idles - acknowledging STOPPED at
every poll - until the next directive starts a new worker; the process never exits on its own
because of a directive, so a rollback's RUNNING is always acknowledged by someone.

Exit codes: 0 after a graceful stop, 10 when a flow stopped on a non-retriable error (the error
is logged with topic, partition and offset), 1 for anything else.
"""

from __future__ import annotations

import faulthandler
import logging
import multiprocessing
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from tenacity import RetryCallState, Retrying, retry_if_exception

from drkit.config import DrkitConfig, load_config
from drkit.config.loader import known_flow
from drkit.config.model import FlowConfig, Role, connects_as
from drkit.control.channel import ControlChannel
from drkit.control.gate import FlowGate, StoreControl
from drkit.control.model import DesiredState, default_state
from drkit.errors import (
    ConfigError,
    DrkitError,
    ExitCode,
    KafkaError,
    Problem,
    StateStoreError,
    Stopped,
)
from drkit.kafka import ClusterEndpoint, KafkaAdmin  # the process start: the edge of cluster access
from drkit.listening import Listener, TlsFiles, serve_wsgi
from drkit.replication.assigner import LossSink
from drkit.replication.client_settings import WorkerSettings
from drkit.replication.endpoints import EndedFlows, WorkerEndpoints
from drkit.replication.loss import LossEvent
from drkit.replication.metrics import FLOW_FAILED, default_metrics, show_flow_state
from drkit.replication.supervision import PatienceStop, SuccessBackoff, WorkerLiveness, is_transient
from drkit.replication.worker import FlowWorker
from drkit.signing import Kind
from drkit.topology.flow import FlowTopology

if TYPE_CHECKING:
    from drkit.store.flow_keys import FlowKeys

log = logging.getLogger(__name__)

EXIT_FATAL = ExitCode.REPLICATION_STOPPED


@dataclass(frozen=True)
class ServiceOptions:
    flows: tuple[str, ...] = ()
    workers: int = 1
    worker_id: str = ""
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    tls: TlsFiles | None = None  # the metrics endpoint over HTTPS only
    checkpoints: bool = True  # run each flow's checkpoint worker in this process
    # Where loss events go and flow directives come from (None: nowhere, no flow control).
    store_url: str | None = None
    settings: WorkerSettings = field(default_factory=WorkerSettings)


def select_flows(config: DrkitConfig, names: Sequence[str]) -> list[FlowConfig]:
    """The flows named on the command line (all when none); ConfigError for unknown names."""
    if not config.flows:
        raise ConfigError([Problem("flows", "the config defines no flows to replicate")])
    if not names:
        return list(config.flows)
    return [known_flow(config, name, "--flow") for name in names]


def default_worker_id() -> str:
    """``<host>-<pid>``: unique per process, so two workers on one host never share an id
    (transactional ids and static group membership derive from it)."""
    return f"{socket.gethostname().split('.')[0] or 'worker'}-{os.getpid()}"


class _StoreLossSink:
    """Loss events into the state store (opened lazily: most flows never lose anything)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._repo: object | None = None

    def record(self, event: LossEvent) -> bool:
        from drkit.replication.loss_repo import LossRepository
        from drkit.store import StateStore

        if self._repo is None:
            store = StateStore(self.url)
            store.ensure_current()
            self._repo = LossRepository(store)
        assert isinstance(self._repo, LossRepository)
        return self._repo.record(event)


class _LogOnlyLossSink:
    """No state store configured: the loss is still logged at ERROR and counted."""

    def record(self, event: LossEvent) -> bool:
        return True


def loss_sink(options: ServiceOptions) -> LossSink:
    return _StoreLossSink(options.store_url) if options.store_url else _LogOnlyLossSink()


def metrics_listener(options: ServiceOptions, ended: EndedFlows | None = None) -> Listener | None:
    """Serve this worker's /metrics (and its ended flows) on ``--metrics-port``, over HTTPS
    only with ``options.tls``; None when no port is set."""
    if not options.metrics_port:
        return None
    app = WorkerEndpoints(ended or EndedFlows())
    listener = serve_wsgi(
        app, options.metrics_host, options.metrics_port, "--metrics-port", options.tls
    )
    scheme = "https" if options.tls else "http"
    log.info("metrics on %s://%s:%d/metrics", scheme, options.metrics_host, listener.server_port)
    return listener


def _flow_keys(url: str | None, secret: bytes | None) -> FlowKeys | None:
    """Each flow's key: derived from the signing secret, else read from the store at ``url``;
    None with neither (nothing signed, nothing verified)."""
    from drkit.store.flow_keys import FlowKeys

    return FlowKeys(url or None, secret) if url or secret is not None else None


def run_flows(config: DrkitConfig, options: ServiceOptions, stop: threading.Event) -> int:
    """Replicate the selected flows in this process until ``stop`` is set or all flows end.

    Each part connects with its role's credentials (``role_security``): the flows as the
    replicator, the checkpoint workers as the checkpointer.
    """
    checkpointing = config.as_role(Role.CHECKPOINTER)
    config = config.as_role(Role.REPLICATOR)
    flows = select_flows(config, options.flows)
    metrics = default_metrics()
    ended = EndedFlows()
    metrics_listener(options, ended)
    results: dict[str, BaseException | None] = {}
    losses = loss_sink(options)
    control = StoreControl(options.store_url) if options.store_url else None
    # Each flow's key (drkit/signing.py): derived from the signing secret, or read from the
    # store once and kept through outages.
    keys = _flow_keys(options.store_url, config.signing.secret_bytes)
    from drkit.offsets.metrics import default_metrics as checkpoint_metrics

    unverified = checkpoint_metrics().unverified

    def gate_of(flow: FlowConfig) -> FlowGate | None:
        if control is None or keys is None:
            return None
        return FlowGate(
            control,
            flow.name,
            options.settings.worker_id,
            default_state(flow),
            config.failover.worker_silence_s,
            on_error=metrics.errors.labels(flow.name, "control").inc,
            # Read only while the store does not answer: the target vouches for the directive.
            channel=ControlChannel.of(config, flow, keys.control(flow.name)),
            on_rejected=unverified.labels(flow.name, "control").inc,
        ).start()

    def run_one(flow: FlowConfig) -> None:
        # One WorkerLiveness and one gate per flow for all its attempts: patience counts from the
        # last success, silence from the last read of the store.
        liveness = WorkerLiveness()
        gate = gate_of(flow)

        def before_retry(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            metrics.errors.labels(flow.name, "retry").inc()
            log.warning(
                "flow failed, retrying",
                extra={"flow": flow.name, "error": str(error), "idle_s": liveness.idle_s()},
            )

        def attempt() -> None:
            if stop.is_set():
                return
            # The keys before anything is copied (a store away at start: retried like Kafka):
            # the control channel's too - the gate follows it only while the store is away,
            # and it is the store's own key (never derived), so it cannot be read then.
            signer = keys.signer(flow.name, Kind.OFFSET_SYNC) if keys is not None else None
            if gate is not None and keys is not None:
                keys.control(flow.name)()
            try:
                FlowWorker(
                    flow,
                    config.clusters[flow.source],
                    config.clusters[flow.target],
                    options.settings,
                    metrics,
                    stop,
                    losses,
                    liveness,
                    gate,
                    signer,
                    connect=KafkaAdmin,
                ).run()
            except Stopped:
                if not stop.is_set():
                    raise  # not this flow's stop: an error like any other
                # the stop came while a request waited: nothing was in flight to deliver

        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            stop=PatienceStop(liveness, flow.retry),
            wait=SuccessBackoff(liveness, flow.retry),
            sleep=_interruptible(stop),
            before_sleep=before_retry,
            reraise=True,
        )
        failure: str | None = None
        try:
            while True:
                retrying(attempt)  # returns when stopped, or when the flow's directive is STOPPED
                if gate is None or stop.is_set():
                    break
                idle_while_stopped(gate, stop)
            results[flow.name] = None
        except BaseException as err:  # said now, in one line; the exit code says it again
            results[flow.name] = err
            failure = flow_ended(flow.name, err)
            show_flow_state(metrics, flow.name, FLOW_FAILED)
            ended.ended(flow.name, failure)
        finally:
            if gate is not None:
                gate.close(failure=failure)

    flow_threads = [
        threading.Thread(target=run_one, args=(flow,), name=f"flow {flow.name}") for flow in flows
    ]
    # Checkpoint workers live as long as the flows do: they end when every flow has ended.
    checkpoints_stop = threading.Event()
    checkpoint_threads = [
        threading.Thread(
            target=run_checkpointer,
            args=(checkpointing, flow, checkpoints_stop, options.settings.worker_id),
            kwargs={"keys": keys},
            name=f"checkpoints {flow.name}",
            daemon=True,
        )
        for flow in flows
        if options.checkpoints
    ]
    for thread in flow_threads + checkpoint_threads:
        thread.start()
    log.info(
        "replicating",
        extra={
            "flows": ",".join(f.name for f in flows),
            "worker": options.settings.worker_id,
            "as": connects_as(config, {c for f in flows for c in (f.source, f.target)}),
        },
    )
    for thread in flow_threads:
        thread.join()
    checkpoints_stop.set()
    join_within(checkpoint_threads, CHECKPOINT_STOP_BUDGET_S)
    return _exit_code(results)


# How long a stopping replicator waits for its checkpoint worker's final round (it reads every
# followed group's offsets: slow on a cluster with thousands of groups or a loaded broker).
CHECKPOINT_STOP_BUDGET_S = 15.0


def join_within(threads: Sequence[threading.Thread], budget_s: float) -> list[str]:
    """Join ``threads`` against one shared deadline; returns (and logs) the names of those
    still running, which the process then leaves behind (they must be daemon threads).

    Leaving a checkpoint worker mid-round loses nothing: checkpoints are latest-wins per group
    and partition, so the next start's first round writes what this one did not.
    """
    deadline = time.monotonic() + budget_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [thread.name for thread in threads if thread.is_alive()]
    if left:
        log.warning(
            "stopping without waiting longer for the final checkpoint round; the next start "
            "writes it",
            extra={"threads": ",".join(left), "waited_s": budget_s},
        )
    return left


def idle_while_stopped(gate: FlowGate, stop: threading.Event) -> None:
    """The flow's directive is STOPPED: wait (the gate acks STOPPED at every poll) until a
    directive wants it again or ``stop`` is set."""
    log.info("flow stopped by its directive; idle until the next one", extra={"flow": gate.flow})
    while not stop.is_set() and gate.wanted().state is DesiredState.STOPPED:
        stop.wait(gate.poll_s)
    if not stop.is_set():
        log.info("flow wanted again", extra={"flow": gate.flow, "state": gate.wanted().state})


def _interruptible(stop: threading.Event) -> Callable[[float], None]:
    """A sleep for tenacity that a stop request cuts short."""

    def sleep(seconds: float) -> None:
        stop.wait(seconds)

    return sleep


def run_checkpointer(
    config: DrkitConfig,
    flow: FlowConfig,
    stop: threading.Event,
    member: str = "",
    *,
    keys: FlowKeys | None,
) -> None:
    """Run one flow's checkpoint worker until ``stop``; it retries failed rounds itself.

    Every ``drkit replicate`` process runs one; they elect, through a consumer group on the
    target, the one that writes checkpoints (drkit.kafka.election): a dead or hung worker's
    duty moves to another within the group's session timeout.

    ``keys``: the flow keys - the runs it translates with are verified, its tombstones signed
    (drkit/signing.py); None (no signing secret and no store) verifies nothing - no default,
    so every caller says which.
    """
    from drkit.kafka.election import GroupElection
    from drkit.offsets.checkpointer import Checkpointer

    topology = FlowTopology.of(flow)
    target = ClusterEndpoint(flow.target, config.clusters[flow.target])
    while not stop.is_set():
        election: GroupElection | None = None
        try:
            signer = keys.signer(flow.name, Kind.OFFSET_SYNC) if keys is not None else None
            checkpointer = Checkpointer(
                flow,
                config.clusters[flow.source],
                config.clusters[flow.target],
                stop=stop,
                signer=signer,
                connect=KafkaAdmin,
            )
            try:
                checkpointer.prepare()  # the election's topic must exist before it is joined
                election = GroupElection(
                    target, topology.checkpoint_group, topology.checkpoints_topic, member
                )
                checkpointer.run(stop, election.leading)
            finally:
                if election is not None:
                    election.close()
                checkpointer.close()
        except Stopped:
            return  # a request under way was given up: the stop came
        except (KafkaError, StateStoreError) as err:
            log.warning(
                "checkpoint worker failed; restarting", extra={"flow": flow.name, "error": str(err)}
            )
            stop.wait(5)


def describe_flow_end(error: BaseException) -> str:
    """The error a flow ended on, in one line: drkit's own message, else the type and text."""
    text = str(error) if isinstance(error, DrkitError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split()) or type(error).__name__


def flow_ended(flow: str, error: BaseException) -> str:
    """Say, the moment it happens, that ``flow`` ended for good and why (one line; a traceback
    beside it only for an error drkit did not expect); returns that line."""
    line = describe_flow_end(error)
    log.error(
        "flow ended for good: %s",
        line,
        exc_info=None if isinstance(error, DrkitError) else error,
        extra={"flow": flow},
    )
    return line


def _exit_code(results: dict[str, BaseException | None]) -> int:
    """0 when every flow ended cleanly; 10 (the README's "a flow stopped on an error it cannot
    ride out") when one ended for good on an error drkit raised on purpose - a record or
    setting the target refuses, a Kafka answer no retry cures (a topic it may not or cannot
    create), patience run out; 1 for anything else, drkit's own bug (drkit.errors: a
    non-DrkitError keeps its traceback).  Each was logged when its flow ended."""
    code = 0
    for error in results.values():
        if error is None:
            continue
        code = max(code, EXIT_FATAL if isinstance(error, DrkitError) else 1)
    return code


STOP_GRACE_S = 50.0
# The --workers supervisor outlives its children's own deadline, to collect their exit codes.
SUPERVISOR_STOP_GRACE_S = STOP_GRACE_S + 15


def install_stop_signals(stop: threading.Event, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM/SIGINT set ``stop``; a process still running ``grace_s`` after the first one
    writes every thread's stack to stderr and exits with code 1.

    The graceful stop delivers what is in flight and stores progress; should it wait on
    something that never answers, the deadline ends it anyway.  That loses nothing: progress
    lives on the target, so a forced exit is a kill -9 the next start resumes from, and the
    stacks say where it waited.  (The supervisor of ``--workers N`` waits longer than this for
    its children.)  The deadline runs in faulthandler's own thread, so it fires even when a
    thread holds the interpreter lock.

    The handler itself only hands the signal to a relay thread, through the one queue whose put
    is re-entrant: a Python signal handler runs in the main thread between two of its bytecodes,
    possibly while that thread holds ``stop``'s (non re-entrant) lock - inside ``stop.wait``, or
    inside the ``set`` of the signal before (a supervisor's children get its forwarded SIGTERM
    and the group's own).  Setting the event from the handler deadlocked there.
    """
    received: queue.SimpleQueue[int] = queue.SimpleQueue()

    def relay() -> None:
        signum = received.get()
        # The deadline first, then the stop: neither may wait on the log (a handler's lock
        # held by a hung thread must not keep the process from stopping).
        faulthandler.dump_traceback_later(grace_s, exit=True)
        stop.set()  # later signals change nothing: the stop and its deadline are under way
        log.info("stopping on %s (forced after %.0fs)", signal.Signals(signum).name, grace_s)

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.put(signum)

    threading.Thread(target=relay, name="stop signals", daemon=True).start()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _child(config_path: str, options: ServiceOptions, index: int, log_level: int) -> None:
    from drkit import logs

    logs.configure(log_level)
    logs.dump_stacks_on_sigusr1()
    stop = threading.Event()
    install_stop_signals(stop)
    config = load_config(config_path)
    child_options = replace(
        options,
        workers=1,
        checkpoints=options.checkpoints,  # every worker stands by; one is elected to write
        metrics_port=options.metrics_port + index if options.metrics_port else 0,
        settings=replace(
            options.settings,
            worker_id=f"{options.worker_id}-{index}",
            buffer_share=1.0 / options.workers,
            # The supervisor restarts a dead child under the same id: as a static member it
            # gets its partitions back at once.
            static_membership=True,
        ),
    )
    try:
        code = run_flows(config, child_options, stop)
    except ConfigError as err:  # its options refused (a metrics port in use): say, stop all
        log.error("worker %d: %s", index, err)
        code = ExitCode.BAD_INPUT
    raise SystemExit(code)


def run_workers(config_path: Path, options: ServiceOptions, stop: threading.Event) -> int:
    """Fork ``options.workers`` supervised worker processes (same flows, shared groups)."""
    context = multiprocessing.get_context("spawn")
    level = logging.getLogger().level

    def spawn(index: int) -> multiprocessing.process.BaseProcess:
        process = context.Process(
            target=_child,
            args=(str(config_path), options, index, level),
            name=f"drkit-replicate-{index}",
        )
        process.start()
        log.info("worker started", extra={"index": index, "pid": process.pid})
        return process

    children = {index: spawn(index) for index in range(options.workers)}
    code = 0
    while not stop.is_set():
        stop.wait(0.5)
        for index, process in list(children.items()):
            if process.is_alive():
                continue
            exit_code = process.exitcode
            if exit_code == 0:
                del children[index]
            elif exit_code == ExitCode.BAD_INPUT:
                log.error("worker refused its input; stopping all", extra={"index": index})
                code = ExitCode.BAD_INPUT
                stop.set()
            elif exit_code == EXIT_FATAL:
                log.error(
                    "worker stopped on a non-retriable error; stopping all", extra={"index": index}
                )
                code = EXIT_FATAL
                stop.set()
            else:
                log.warning(
                    "worker died; restarting", extra={"index": index, "exit_code": exit_code}
                )
                time.sleep(1.0)
                children[index] = spawn(index)
        if not children:
            break
    for process in children.values():
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process in children.values():
        process.join(timeout=SUPERVISOR_STOP_GRACE_S - 5)  # a child exits at STOP_GRACE_S
        if process.is_alive():
            process.kill()
        if process.exitcode not in (0, None) and code == 0:
            code = EXIT_FATAL if process.exitcode == EXIT_FATAL else 1
    return code
