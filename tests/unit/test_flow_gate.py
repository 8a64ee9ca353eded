"""Flow control on the worker side: the gate's pure decision, the gate over an in-memory store,
and the worker's transitions (drkit.control.gate, drkit.replication.gating)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import OperationalError

from drkit.control.channel import ChannelAck, ChannelView
from drkit.control.gate import (
    FlowGate,
    GateDecision,
    GateReason,
    decide,
    describe_store_error,
)
from drkit.control.model import DesiredState, FlowDirective
from drkit.errors import RetriableKafkaError, StateStoreError
from drkit.replication.gating import GateKeeper
from drkit.replication.metrics import FLOW_STATE, ReplicationMetrics

FLOW = "dc1->dc2"
RUNNING, PAUSED, STOPPED = DesiredState.RUNNING, DesiredState.PAUSED, DesiredState.STOPPED

# -- the pure decision ----------------------------------------------------------------------


def test_the_directive_is_followed_while_the_store_answers() -> None:
    paused = FlowDirective(FLOW, PAUSED, 7, "switchover")
    assert decide(paused, 0.0, 30.0) == GateDecision(PAUSED, 7, GateReason.DIRECTIVE)
    running = FlowDirective(FLOW, RUNNING, 8)
    assert decide(running, 29.9, 30.0) == GateDecision(RUNNING, 8, GateReason.DIRECTIVE)
    stopped = FlowDirective(FLOW, STOPPED, 9)
    assert decide(stopped, 5.0, None) == GateDecision(STOPPED, 9, GateReason.DIRECTIVE)


def test_a_worker_silent_for_the_window_fences_itself_keeping_the_epoch() -> None:
    running = FlowDirective(FLOW, RUNNING, 4)
    assert decide(running, 30.0, 30.0) == GateDecision(PAUSED, 4, GateReason.STORE_SILENT)
    assert decide(running, 3600.0, 30.0) == GateDecision(PAUSED, 4, GateReason.STORE_SILENT)
    # A STOPPED flow stays paused, not running, while the store is silent.
    assert decide(FlowDirective(FLOW, STOPPED, 5), 31.0, 30.0).state is PAUSED


def test_without_a_silence_window_a_worker_never_fences_itself() -> None:
    running = FlowDirective(FLOW, RUNNING, 4)
    assert decide(running, 10.0**9, None) == GateDecision(RUNNING, 4, GateReason.DIRECTIVE)


def test_before_the_first_read_the_epoch_is_unknown_and_the_worker_holds() -> None:
    for silence in (None, 30.0):
        assert decide(None, 0.0, silence) == GateDecision(PAUSED, 0, GateReason.NOT_READ_YET)


@given(
    st.sampled_from(list(DesiredState)),
    st.integers(0, 10**6),
    st.floats(0, 10**6, allow_nan=False),
    st.one_of(st.none(), st.floats(0.001, 10**5, allow_nan=False)),
)
def test_never_running_past_the_silence_window(
    desired: DesiredState, epoch: int, silent_for: float, silence: float | None
) -> None:
    decision = decide(FlowDirective(FLOW, desired, epoch), silent_for, silence)
    assert decision.epoch == epoch
    if silence is not None and silent_for >= silence:
        assert decision.state is PAUSED and decision.reason is GateReason.STORE_SILENT
    else:
        assert decision.state is desired and decision.reason is GateReason.DIRECTIVE


@given(
    st.sampled_from(list(DesiredState)),
    st.floats(0, 10**6, allow_nan=False),
    st.one_of(st.none(), st.floats(0, 10**6, allow_nan=False)),
    st.floats(0.001, 10**5, allow_nan=False),
)
def test_never_running_once_neither_the_store_nor_the_channel_answered_for_the_window(
    desired: DesiredState, store_silent: float, channel_silent: float | None, silence: float
) -> None:
    decision = decide(FlowDirective(FLOW, desired, 3), store_silent, silence, channel_silent)
    both_silent = store_silent >= silence and (channel_silent is None or channel_silent >= silence)
    if both_silent:
        assert decision.state is PAUSED and decision.reason is GateReason.STORE_SILENT
    else:
        assert decision.state is desired  # the store, or the channel for it, vouches


def test_a_store_outage_alone_keeps_the_directive_while_the_channel_answers() -> None:
    running = FlowDirective(FLOW, RUNNING, 4)
    assert decide(running, 3600.0, 30.0, 0.5) == GateDecision(RUNNING, 4, GateReason.CHANNEL)
    assert decide(running, 3600.0, 30.0, 30.0) == GateDecision(PAUSED, 4, GateReason.STORE_SILENT)


# -- the gate over an in-memory store -------------------------------------------------------


class FakeStore:
    """ControlPort in memory; ``down`` makes every call fail like a store that is away."""

    def __init__(self) -> None:
        self.directives: dict[str, FlowDirective] = {}
        self.acks: dict[tuple[str, str], tuple[int, DesiredState]] = {}
        self.failures: dict[tuple[str, str], str] = {}
        self.ack_writes = 0
        self.down = False
        self.read_with_default: list[DesiredState] = []

    def _check(self) -> None:
        if self.down:
            raise StateStoreError("state store postgresql://drkit:***@db/drkit failed: refused")

    def set(self, desired: DesiredState) -> FlowDirective:
        epoch = self.directives[FLOW].epoch + 1 if FLOW in self.directives else 1
        self.directives[FLOW] = FlowDirective(FLOW, desired, epoch)
        return self.directives[FLOW]

    def directive(self, flow: str, default: DesiredState) -> FlowDirective:
        self._check()
        self.read_with_default.append(default)
        return self.directives.get(flow, FlowDirective(flow, default, 0))

    def ack(
        self,
        flow: str,
        worker: str,
        epoch: int,
        state: DesiredState,
        failure: str | None = None,
    ) -> None:
        self._check()
        self.ack_writes += 1
        self.acks[(flow, worker)] = (epoch, state)
        if failure is None:
            self.failures.pop((flow, worker), None)
        else:
            self.failures[(flow, worker)] = failure

    def forget_worker(self, flow: str, worker: str) -> None:
        self._check()
        self.acks.pop((flow, worker), None)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _gate(
    store: FakeStore,
    clock: Clock,
    silence_s: float | None = 30.0,
    default: DesiredState = RUNNING,
    errors: list[int] | None = None,
) -> FlowGate:
    return FlowGate(
        store,
        FLOW,
        "w1",
        default,
        silence_s,
        on_error=(lambda: errors.append(1)) if errors is not None else None,
        clock=clock,
    )


def test_the_gate_reads_the_directive_and_acks_what_the_worker_acted_on_at_every_poll() -> None:
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock)
    assert gate.wanted() == GateDecision(PAUSED, 0, GateReason.NOT_READ_YET)
    gate.poll_once()
    # No directive was ever written: the flow's default at epoch 0.
    assert gate.wanted() == GateDecision(RUNNING, 0, GateReason.DIRECTIVE)
    assert store.acks == {}  # nothing acted on yet: nothing to report
    gate.acted(0, RUNNING)
    gate.poll_once()
    assert store.acks == {(FLOW, "w1"): (0, RUNNING)}
    store.set(PAUSED)
    gate.poll_once()
    assert gate.wanted() == GateDecision(PAUSED, 1, GateReason.DIRECTIVE)
    assert store.acks[(FLOW, "w1")] == (0, RUNNING)  # the worker has not acted yet
    gate.acted(1, PAUSED)
    writes = store.ack_writes
    gate.poll_once()
    gate.poll_once()
    # The ack is rewritten at every poll: it is the worker's heartbeat.
    assert store.acks[(FLOW, "w1")] == (1, PAUSED)
    assert store.ack_writes == writes + 2


def test_a_standby_flow_defaults_to_paused() -> None:
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock, default=PAUSED)
    gate.poll_once()
    assert gate.wanted() == GateDecision(PAUSED, 0, GateReason.DIRECTIVE)
    assert store.read_with_default == [PAUSED]
    store.set(RUNNING)
    gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 1, GateReason.DIRECTIVE)


def test_a_silent_store_fences_the_worker_after_the_window_and_it_comes_back_after() -> None:
    store, clock, errors = FakeStore(), Clock(), list[int]()
    gate = _gate(store, clock, silence_s=30.0, errors=errors)
    store.set(RUNNING)
    gate.poll_once()
    gate.acted(1, RUNNING)
    store.down = True
    for _ in range(29):
        clock.now += 1
        gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 1, GateReason.DIRECTIVE)
    assert len(errors) == 29 and gate.errors == 29
    clock.now += 1
    assert gate.wanted() == GateDecision(PAUSED, 1, GateReason.STORE_SILENT)
    store.down = False
    gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 1, GateReason.DIRECTIVE)
    assert store.acks[(FLOW, "w1")] == (1, RUNNING)


class FakeChannel:
    """The flow's control channel in memory (drkit.control.channel.ChannelPort)."""

    def __init__(self) -> None:
        self.directive: FlowDirective | None = None
        self.acks: dict[str, ChannelAck] = {}
        self.down = False
        self.offset = 0

    def _check(self) -> None:
        if self.down:
            raise RetriableKafkaError("dc2: control channel: timed out")

    def publish(self, directive: FlowDirective) -> None:
        self._check()
        self.directive = directive

    def ack(self, worker: str, epoch: int, state: DesiredState) -> None:
        self._check()
        self.offset += 1
        self.acks[worker] = ChannelAck(worker, epoch, state, self.offset)

    def read(self) -> ChannelView:
        self._check()
        return ChannelView(self.directive, dict(self.acks))

    def close(self) -> None:
        pass


def test_with_the_store_away_the_channel_keeps_the_flow_running_and_carries_new_directives() -> (
    None
):
    """main paused every worker after worker_silence_s of store outage.  Now the target's
    control channel vouches for the directive; a newer one published there is followed and
    acked there; only with the channel gone too does the worker fence itself."""
    store, clock, channel = FakeStore(), Clock(), FakeChannel()
    gate = FlowGate(store, FLOW, "w1", RUNNING, 30.0, clock=clock, channel=channel)
    channel.publish(store.set(RUNNING))
    gate.poll_once()
    gate.acted(1, RUNNING)
    store.down = True
    for _ in range(120):  # two minutes of store outage, a poll a second
        clock.now += 1
        gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 1, GateReason.CHANNEL)
    assert channel.acks["w1"].epoch == 1 and channel.acks["w1"].offset == 120  # its heartbeat
    # The engine (which still reaches the store) pauses the flow: store and channel.
    channel.publish(store.set(PAUSED))
    clock.now += 1
    gate.poll_once()
    assert gate.wanted() == GateDecision(PAUSED, 2, GateReason.CHANNEL)
    gate.acted(2, PAUSED)
    clock.now += 1
    gate.poll_once()
    assert (channel.acks["w1"].epoch, channel.acks["w1"].state) == (2, PAUSED)
    # An older publish (a stale engine) never wins over what the worker knows.
    channel.publish(FlowDirective(FLOW, RUNNING, 1))
    gate.poll_once()
    assert gate.wanted().state is PAUSED
    # The target gone too: once neither answered for the window, the worker holds.
    channel.publish(store.set(RUNNING))
    gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 3, GateReason.CHANNEL)
    channel.down = True
    clock.now += 29
    gate.poll_once()
    assert gate.wanted().state is RUNNING
    clock.now += 1
    assert gate.wanted() == GateDecision(PAUSED, 3, GateReason.STORE_SILENT)
    store.down = False
    gate.poll_once()
    assert gate.wanted() == GateDecision(RUNNING, 3, GateReason.DIRECTIVE)


def test_a_store_that_never_answered_keeps_the_worker_held() -> None:
    store, clock = FakeStore(), Clock()
    store.down = True
    gate = _gate(store, clock, silence_s=None)
    gate.poll_once()
    clock.now += 3600
    assert gate.wanted() == GateDecision(PAUSED, 0, GateReason.NOT_READ_YET)
    stop = threading.Event()
    stop.set()
    assert gate.wait_read(stop) is False


def test_acting_wakes_the_poll_thread_so_the_ack_does_not_wait_for_the_next_poll() -> None:
    store = FakeStore()
    # The next poll comes 600 s after the first: an ack seen within a tenth of that was
    # written because acting woke the thread (issue 51: the deadline is a hang guard only).
    poll_s = 600.0
    gate = FlowGate(store, FLOW, "w1", RUNNING, 30.0, poll_s=poll_s).start()
    try:
        assert gate.wait_read(threading.Event())
        gate.acted(0, PAUSED)
        deadline = time.monotonic() + poll_s / 10
        while store.acks.get((FLOW, "w1")) != (0, PAUSED) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.acks.get((FLOW, "w1")) == (0, PAUSED)
    finally:
        gate.close()


def test_a_worker_that_leaves_drops_its_ack_but_a_stopped_one_keeps_it() -> None:
    store = FakeStore()
    leaving = FlowGate(store, FLOW, "w1", RUNNING, 30.0, poll_s=0.05).start()
    stopped = FlowGate(store, FLOW, "w2", RUNNING, 30.0, poll_s=0.05).start()
    for gate in (leaving, stopped):
        assert gate.wait_read(threading.Event())
    leaving.acted(0, RUNNING)
    stopped.acted(3, STOPPED)
    leaving.close()
    stopped.close()
    assert store.acks == {(FLOW, "w2"): (3, STOPPED)}


def test_a_worker_whose_flow_failed_keeps_its_row_with_the_error() -> None:
    """A flow that ended for good is not a worker that left: its row stays, naming why, so the
    store's readers (flows list, status, the failover steps) see the flow does not run."""
    store = FakeStore()
    before_acting = FlowGate(store, FLOW, "w1", PAUSED, 30.0, poll_s=0.05).start()
    after_acting = FlowGate(store, FLOW, "w2", RUNNING, 30.0, poll_s=0.05).start()
    for gate in (before_acting, after_acting):
        assert gate.wait_read(threading.Event())
    after_acting.acted(2, RUNNING)
    before_acting.close(failure="KafkaError: dc2: subscribe: _INVALID_ARG")
    after_acting.close(failure="record too large")
    assert store.acks == {(FLOW, "w1"): (0, PAUSED), (FLOW, "w2"): (2, RUNNING)}
    assert store.failures == {
        (FLOW, "w1"): "KafkaError: dc2: subscribe: _INVALID_ARG",
        (FLOW, "w2"): "record too large",
    }


def test_store_errors_are_described_without_the_statement_or_its_parameters() -> None:
    error = OperationalError(
        "UPDATE flow_acks SET worker=%(w)s", {"w": "hunter2"}, OSError("connection refused")
    )
    described = describe_store_error(error)
    assert "connection refused" in described
    assert "hunter2" not in described and "UPDATE" not in described
    masked = StateStoreError("state store postgresql://drkit:***@db/drkit failed: x")
    assert describe_store_error(masked) == str(masked)
    assert describe_store_error(RuntimeError("secret=hunter2")) == "RuntimeError"


# -- the worker's transitions ---------------------------------------------------------------


class FakeWorker:
    """Holdable: records what the keeper asks of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def settle_all(self) -> None:
        self.calls.append("settle")

    def pause_partitions(self) -> None:
        self.calls.append("pause")

    def resume_partitions(self) -> None:
        self.calls.append("resume")


def holds(keeper: GateKeeper) -> bool:
    """(A call, so that mypy does not narrow the property between transitions.)"""
    return keeper.holding


def _states(metrics: ReplicationMetrics, registry: CollectorRegistry) -> dict[str, float]:
    return {
        state.value: registry.get_sample_value(FLOW_STATE, {"flow": FLOW, "state": state.value})
        or 0.0
        for state in DesiredState
    }


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def test_the_keeper_settles_pauses_resumes_and_acks_each_epoch_once(
    registry: CollectorRegistry,
) -> None:
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock)
    metrics = ReplicationMetrics.create(registry)
    keeper, worker = GateKeeper(gate, FLOW, metrics), FakeWorker()
    store.set(RUNNING)
    gate.poll_once()
    assert keeper.admit(threading.Event())
    keeper.new_session()
    assert keeper.follow(worker) is RUNNING and worker.calls == []
    assert keeper.follow(worker) is RUNNING
    assert _states(metrics, registry) == {"running": 1.0, "paused": 0.0, "stopped": 0.0}

    store.set(PAUSED)
    gate.poll_once()
    assert keeper.follow(worker) is PAUSED
    # Settled before pausing: progress is durable by the time the ack goes out.
    assert worker.calls == ["settle", "pause"]
    assert holds(keeper)
    gate.poll_once()
    assert store.acks[(FLOW, "w1")] == (2, PAUSED)
    assert _states(metrics, registry) == {"running": 0.0, "paused": 1.0, "stopped": 0.0}
    keeper.follow(worker)
    assert worker.calls == ["settle", "pause"]  # nothing more for the same epoch

    store.set(PAUSED)  # a new epoch with the same state: ack only
    gate.poll_once()
    keeper.follow(worker)
    gate.poll_once()
    assert worker.calls == ["settle", "pause"] and store.acks[(FLOW, "w1")] == (3, PAUSED)

    store.set(RUNNING)
    gate.poll_once()
    assert keeper.follow(worker) is RUNNING and not holds(keeper)
    assert worker.calls == ["settle", "pause", "resume"]

    store.set(STOPPED)
    gate.poll_once()
    assert keeper.follow(worker) is STOPPED
    assert worker.calls == ["settle", "pause", "resume", "settle", "pause"]
    gate.poll_once()
    assert store.acks[(FLOW, "w1")] == (5, STOPPED)
    assert _states(metrics, registry) == {"running": 0.0, "paused": 0.0, "stopped": 1.0}


def test_a_new_session_pauses_again_and_a_fenced_worker_resumes_when_the_store_answers(
    registry: CollectorRegistry,
) -> None:
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock, silence_s=3.0)
    keeper, worker = GateKeeper(gate, FLOW, ReplicationMetrics.create(registry)), FakeWorker()
    assert holds(keeper)  # before its first session the worker replicates nothing
    store.set(PAUSED)
    gate.poll_once()
    keeper.new_session()
    keeper.follow(worker)
    keeper.new_session()  # a restarted session has a fresh consumer: nothing paused on it
    assert not holds(keeper)
    keeper.follow(worker)
    assert worker.calls == ["settle", "pause", "settle", "pause"] and holds(keeper)

    store.set(RUNNING)
    gate.poll_once()
    keeper.follow(worker)
    worker.calls.clear()
    store.down = True
    clock.now += 3.0
    assert keeper.follow(worker) is PAUSED
    assert worker.calls == ["settle", "pause"]
    store.down = False
    gate.poll_once()
    assert keeper.follow(worker) is RUNNING
    assert worker.calls == ["settle", "pause", "resume"]


def test_a_flow_stopped_before_the_worker_starts_is_acked_and_never_admitted(
    registry: CollectorRegistry,
) -> None:
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock)
    store.set(STOPPED)
    gate.poll_once()
    keeper = GateKeeper(gate, FLOW, ReplicationMetrics.create(registry))
    assert keeper.admit(threading.Event()) is False
    assert keeper.state is STOPPED
    gate.poll_once()
    assert store.acks[(FLOW, "w1")] == (1, STOPPED)


def test_between_sessions_only_a_stopped_flow_is_entered_and_acked_without_the_worker(
    registry: CollectorRegistry,
) -> None:
    """An abandoned session's worker (nothing in flight) stops on a STOPPED directive without
    settling or pausing anything: there is no session left to settle."""
    store, clock = FakeStore(), Clock()
    gate = _gate(store, clock)
    keeper, worker = GateKeeper(gate, FLOW, ReplicationMetrics.create(registry)), FakeWorker()
    gate.poll_once()
    keeper.new_session()
    keeper.follow(worker)
    for wanted in (RUNNING, PAUSED):
        store.set(wanted)
        gate.poll_once()
        assert keeper.stop_if_wanted() is False and keeper.state is RUNNING
    store.set(STOPPED)
    gate.poll_once()
    assert keeper.stop_if_wanted() is True and keeper.state is STOPPED
    gate.poll_once()
    assert store.acks[(FLOW, "w1")] == (3, STOPPED)
    assert worker.calls == []
    assert (
        GateKeeper(None, FLOW, ReplicationMetrics.create(CollectorRegistry())).stop_if_wanted()
        is False
    )


def test_without_a_gate_the_worker_always_runs(registry: CollectorRegistry) -> None:
    keeper, worker = GateKeeper(None, FLOW, ReplicationMetrics.create(registry)), FakeWorker()
    assert keeper.admit(threading.Event())
    assert keeper.follow(worker) is RUNNING and not holds(keeper) and worker.calls == []


def test_a_failed_worker_has_acted_on_a_hold_but_never_on_running() -> None:
    """What the failover steps wait for: a worker whose flow failed writes nothing (so a
    STOPPED or PAUSED is as good as acknowledged) and cannot run (never awaited, never counted
    as running)."""
    from drkit.control.model import WorkerAck, failed_workers, pending_workers, running_workers

    acks = [
        WorkerAck(FLOW, "ok", 3, RUNNING, 0.4),
        WorkerAck(FLOW, "dead", 1, PAUSED, 0.4, failure="boom"),
        WorkerAck(FLOW, "late", 2, PAUSED, 0.4),
    ]
    assert pending_workers(acks, 3, RUNNING, 5.0) == (["late"], [])
    assert pending_workers(acks, 4, STOPPED, 5.0) == (["ok", "late"], [])
    assert running_workers(acks, 3) == ["ok"]
    assert failed_workers(acks) == {"dead": "boom"}
    failed_running = [WorkerAck(FLOW, "dead", 3, RUNNING, 0.4, failure="boom")]
    assert running_workers(failed_running, 3) == []
    assert pending_workers(failed_running, 3, RUNNING, 5.0) == ([], [])
