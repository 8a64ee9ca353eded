"""The failover engine under the faults that split orchestrators' brains, over in-memory clusters.

The engine runs as in production - a real state store (SQLite, and PostgreSQL when available),
real leases, real runbook files - with ``connect`` handing out FakeClusters and, where a test
needs a step to stall or crash at a chosen moment, an injected step.  What is asserted is what
the store and the clusters hold afterwards: the pointer, the run's state, the fences (ACLs), the
flow directives - and that an engine which lost its lease changed none of them.

The same faults with real processes and real brokers (SIGSTOP, kill -9, a skewed clock) are in
tests/integration/test_failover_faults.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import update

from drkit.config import load_config_text
from drkit.config.model import HookConfig
from drkit.control import ControlRepository, DesiredState
from drkit.errors import LeaseLost, RetriableKafkaError, StateStoreError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.engine import Engine, PlanBlocked, RolledBack, RunAbandoned, RunFailed
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.hooks import Hook, HookOutcome
from drkit.failover.lease import (
    FAILOVER_LEASE,
    Lease,
    LeaseHeld,
    LeaseKeeper,
    LeaseRepository,
    maintenance_owner,
)
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.model import (
    Direction,
    PartitionMove,
    Plan,
    Procedure,
    RunState,
    StepName,
    StepState,
)
from drkit.failover.pointer import PointerRepository
from drkit.failover.results import GroupTranslation, Translation
from drkit.failover.run_result import Abandoned, RunOptions, RunResult
from drkit.failover.runbook import load_runbook
from drkit.failover.runs import RunRepository
from drkit.failover.steps import STEPS, Step
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition
from drkit.store import StateStore
from drkit.store.models import LeaseRow
from tests.fake_kafka import FakeClusters, fake_channels

ORDERS, PAYMENTS = "orders", "payments"
TTL_S = 1.0

# A switchover cut to the steps that need no real broker: fence, stop replication, a stand-in
# for the drain (injected per test), move the pointer; a failure before move_pointer rolls back.
SWITCHOVER = {
    "procedure": "switchover",
    "rollback_before": "move_pointer",
    "steps": [
        {"name": "fence_source", "timeout_s": 5, "rollback": "unfence_source"},
        {"name": "stop_replication", "timeout_s": 2, "rollback": "restart_replication"},
        {"name": "drain", "timeout_s": 5},
        {"name": "move_pointer", "timeout_s": 5},
    ],
}


def _config(runbooks: Path, silence_s: float = 1.0) -> Any:
    text = f"""
clusters:
  dc1: {{bootstrap_servers: "127.0.0.1:9"}}
  dc2: {{bootstrap_servers: "127.0.0.1:10"}}
flows:
  - {{source: dc1, target: dc2}}
failover:
  lease_ttl_s: {TTL_S}
  worker_silence_s: {silence_s}
  runbooks_dir: {runbooks}
"""
    return load_config_text(text, env={})


def _done(_ctx: StepContext, _timeout: float | None) -> StepOutcome:
    return StepOutcome.done(stand_in=True)


class World:
    """Two fake clusters (dc1 has orders and payments), a migrated store, a runbook directory,
    and engines over them; the pointer starts on dc1."""

    def __init__(self, tmp_path: Path, store: StateStore) -> None:
        runbooks = tmp_path / "runbooks"
        runbooks.mkdir()
        (runbooks / "switchover.yaml").write_text(yaml.safe_dump(SWITCHOVER))
        self.config = _config(runbooks)
        self.store = store
        self.clusters = FakeClusters("dc1", "dc2")
        for topic in (ORDERS, PAYMENTS):
            self.clusters["dc1"].add_topic(topic)
        self.state_dir = tmp_path
        self.runs = RunRepository(store)
        self.pointers = PointerRepository(store)
        self.fences = FenceRepository(store)
        self.control = ControlRepository(store)
        self.leases = LeaseRepository(store)
        self.pointers.move("dc1", None)

    def engine(
        self, role: str = "engine", leases: LeaseRepository | None = None, **steps: Step
    ) -> Engine:
        return Engine(
            self.config, self.store, self.state_dir, role=role, connect=self.clusters.connect,
            steps={**STEPS, StepName.DRAIN: _done,
                   **{StepName(name): step for name, step in steps.items()}},
            leases=leases, channels=fake_channels(self.clusters),
        )  # fmt: skip

    def plan(self) -> Plan:
        runbook = load_runbook(Procedure.SWITCHOVER, Path(self.config.failover.runbooks_dir))
        return Plan(
            procedure=Procedure.SWITCHOVER, source="dc1", target="dc2", flow="dc1->dc2",
            reverse_flow=None, source_reachable=True, translation_mode="live",
            steps=runbook.planned_steps(), groups=(), groups_without_checkpoint=(),
            rpo=tuple(PartitionRpo(t, 0, 0, 0, 0, 0, 0.0) for t in (ORDERS, PAYMENTS)),
            findings=(), pointer_from="dc1", pointer_to="dc2",
        )  # fmt: skip

    def expire_lease(self) -> None:
        """The holder stalled past its lease (as a frozen process does): expire it now."""
        with self.store.session() as session:
            session.execute(
                update(LeaseRow)
                .where(LeaseRow.name == FAILOVER_LEASE)
                .values(expires_at=LeaseRow.acquired_at)
            )

    def resume_by_the_monitor(self) -> list[int]:
        """The holder's lease lapses; the monitor's maintenance resumes what it left."""
        self.expire_lease()
        return FailoverMaintenance(
            self.config, self.store, self.state_dir, connect=self.clusters.connect
        ).resume_stale_runs(self.engine("monitor"))

    def only_run(self) -> Any:
        [run] = self.runs.latest()
        return run

    def dc1_writable(self) -> bool:
        return all(self.clusters["dc1"].writable(t) for t in (ORDERS, PAYMENTS))


@pytest.fixture
def world(tmp_path: Path, migrated_store: StateStore) -> World:
    return World(tmp_path, migrated_store)


class Stall:
    """An injected drain that blocks until released, then fails (a step that timed out while
    its process was frozen) or succeeds."""

    def __init__(self, fail: bool = True) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def __call__(self, _ctx: StepContext, _timeout: float | None) -> StepOutcome:
        self.entered.set()
        assert self.release.wait(30)
        if self.fail:
            raise StepFailed("dc1->dc2 did not reach the goal within 5s")
        return StepOutcome.done(stalled=True)


def _in_thread(call: Any) -> tuple[threading.Thread, list[BaseException | Any]]:
    out: list[BaseException | Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as err:
            out.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# -- an engine that lost its lease changes nothing ---------------------------------------------


class StallThen:
    """An injected step that blocks until released, then runs ``then`` - the real step, or a
    failure (a drain that timed out while its process was frozen)."""

    def __init__(self, then: Step) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.then = then

    def __call__(self, ctx: StepContext, timeout: float | None) -> StepOutcome:
        self.entered.set()
        assert self.release.wait(30)
        return self.then(ctx, timeout)


def _timed_out(_ctx: StepContext, _timeout: float | None) -> StepOutcome:
    raise StepFailed("dc1->dc2 did not reach the goal within 5s")


@pytest.mark.parametrize(
    ("step", "then"),
    [
        ("fence_source", STEPS[StepName.FENCE_SOURCE]),
        ("stop_replication", STEPS[StepName.STOP_REPLICATION]),
        ("drain", _timed_out),  # main rolled the move back here: two writable primaries
        ("move_pointer", STEPS[StepName.MOVE_POINTER]),
    ],
)
def test_a_frozen_engine_that_wakes_after_a_takeover_changes_nothing(
    world: World, step: str, then: Step
) -> None:
    """An engine frozen inside a step past its lease (its keeper frozen too); the monitor
    resumes the run and completes it; the engine wakes and carries on with its step.  It must
    raise LeaseLost naming the holder, and leave everything as the winner left it."""
    stall = StallThen(then)
    leases = _FlakyLeases(world.store)
    frozen = world.engine("frozen", leases=leases, **{step: stall})
    thread, out = _in_thread(lambda: frozen.start(world.plan(), RunOptions()))
    assert stall.entered.wait(10)
    leases.failing.set()  # frozen: its step stalls, its keeper renews no more ...
    holder = world.leases.holder()
    assert holder is not None
    while not holder.expired:  # ... until its lease lapses, by the database's clock
        threading.Event().wait(0.1)
        holder = world.leases.holder()
        assert holder is not None
    run = world.only_run()
    # The monitor's maintenance resumes the run whose lease lapsed, and completes it.
    maintenance = FailoverMaintenance(
        world.config, world.store, world.state_dir, connect=world.clusters.connect
    )
    resumed = maintenance.resume_stale_runs(world.engine("monitor"))
    assert resumed == [run.id]
    finished = world.runs.get(run.id)
    assert finished is not None and finished.state is RunState.SUCCEEDED
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.run_id) == ("dc2", run.id)
    audit_before = world.runs.get(run.id)
    acls_before = set(world.clusters["dc1"].acls)

    leases.failing.clear()
    stall.release.set()  # the frozen engine wakes up and goes on with its step
    thread.join(30)
    [error] = out
    assert isinstance(error, LeaseLost), error
    assert "monitor" in str(error)  # it names who holds the lease now
    # Nothing it would have done happened: dc1 stays fenced (same ACLs), the pointer on dc2,
    # the run SUCCEEDED with the same steps, replication of dc1->dc2 stays stopped.
    assert world.clusters["dc1"].acls == acls_before and not world.dc1_writable()
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.epoch) == ("dc2", 2)
    assert world.runs.get(run.id) == audit_before
    assert world.control.directive("dc1->dc2").desired is DesiredState.STOPPED


def test_every_store_write_of_a_run_is_fenced_by_the_token(world: World) -> None:
    leases = world.leases
    stale = leases.acquire("engine-a", 60)
    world.expire_lease()
    leases.acquire("engine-b", 60)  # takes over: token + 1
    keeper = LeaseKeeper(leases, stale, 60)
    run = world.runs.create(world.plan(), "test", "")
    guarded_runs = world.runs.guarded(keeper)
    writes: list[Callable[[], object]] = [
        lambda: guarded_runs.step_started(run.id, StepName.FENCE_SOURCE),
        lambda: guarded_runs.finish(run.id, RunState.ROLLED_BACK, RunResult(error="x")),
        lambda: PointerRepository(world.store, keeper).move("dc2", run.id),
        lambda: ControlRepository(world.store, keeper).set("dc1->dc2", DesiredState.RUNNING, "x"),
        lambda: FenceRepository(world.store, keeper).record("dc1", [ORDERS], FenceState.LIFTED, 1),
    ]
    for write in writes:
        with pytest.raises(LeaseLost, match="engine-b"):
            write()
    assert world.runs.get(run.id) == run
    pointer = world.pointers.get()
    assert pointer is not None and pointer.cluster == "dc1"
    assert world.control.directive("dc1->dc2").epoch == 0
    assert world.fences.topics("dc1", *FenceState) == set()


def test_a_side_effect_never_waits_past_the_lease_that_allowed_it(world: World) -> None:
    """The fence's ACL request is sent right after a confirmation and may wait only as long as
    that lease surely lasts (a short lease: a short request), never a default of its own."""
    ttl_s = 3.0
    keeper = LeaseKeeper(world.leases, world.leases.acquire("engine-a", ttl_s), ttl_s)
    run = world.runs.create(world.plan(), "test", "")
    world.runs.step_started(run.id, StepName.FENCE_SOURCE)
    ctx = StepContext(
        world.config, world.config.flows[0], world.store, world.runs.guarded(keeper), run,
        RunOptions(), world.state_dir, connect=world.clusters.connect, guard=keeper,
    )  # fmt: skip
    STEPS[StepName.FENCE_SOURCE](ctx, 30)
    sent = [t for call, t in world.clusters["dc1"].timeouts if call == "create_entries"]
    assert sent and all(t is not None and 0 < t <= ttl_s for t in sent), sent


def test_a_kafka_side_effect_follows_a_synchronous_check(world: World) -> None:
    """An engine that lost its lease between steps does not touch the cluster: the fence step
    confirms the lease right before creating ACLs."""
    lease = world.leases.acquire("engine-a", 60)
    world.expire_lease()
    world.leases.acquire("engine-b", 60)
    run = world.runs.create(world.plan(), "test", "")
    world.runs.step_started(run.id, StepName.FENCE_SOURCE)  # its intent, recorded in time
    keeper = LeaseKeeper(world.leases, lease, 60)
    ctx = StepContext(
        world.config, world.config.flows[0], world.store, world.runs.guarded(keeper), run,
        RunOptions(), world.state_dir, connect=world.clusters.connect, guard=keeper,
    )  # fmt: skip
    with pytest.raises(LeaseLost):
        STEPS[StepName.FENCE_SOURCE](ctx, 5)
    assert world.clusters["dc1"].acls == set()


# -- leases: one clock, a holder that knows its deadline, a keeper that never dies ------------


# A lease far longer than any test runs (pytest's timeout): what is left of it can be checked
# without a wall-clock threshold - no slow machine takes a test past TEST_TIMEOUT_S (issue 51).
LEASE_S = 3600
TEST_TIMEOUT_S = 300


def test_a_renewal_whose_cosmetic_mirror_fails_is_still_a_renewal(world: World) -> None:
    """The engine mirrors each renewal onto its run (shown by 'failover show'); that write
    failing (a store hiccup right after the renewal committed) once turned the renewal into
    LeaseLost and stopped a run that held its lease."""
    keeper = LeaseKeeper(world.leases, world.leases.acquire("engine-a", LEASE_S), LEASE_S)
    calls: list[int] = []

    def mirror(lease: Any) -> None:
        calls.append(lease.token)
        raise StateStoreError("state store sqlite:///x failed: database is locked")

    keeper.on_renewed(mirror)
    renewed = keeper.confirm()  # no LeaseLost: the lease was renewed
    assert calls == [renewed.token] and keeper.lost is None
    holder = world.leases.holder()
    assert holder is not None and holder.owner == "engine-a"
    assert holder.remaining_s > LEASE_S - TEST_TIMEOUT_S


def test_lease_expiry_is_judged_by_the_database_clock_not_the_callers(world: World) -> None:
    """The holder's own clock plays no part: a lease taken for 60 s is held for 60 s whatever
    a contender's clock says (the skewed-process case runs in the integration suite)."""
    held = world.leases.acquire("engine-a", LEASE_S)
    with pytest.raises(LeaseHeld) as refused:
        world.leases.acquire("engine-b", LEASE_S)
    assert LEASE_S - TEST_TIMEOUT_S < refused.value.remaining_s <= LEASE_S
    holder = world.leases.holder()
    assert holder is not None and holder.owner == held.owner and not holder.expired


class _FlakyLeases(LeaseRepository):
    """Renewals fail with an unexpected error while ``failing`` is set."""

    def __init__(self, store: StateStore) -> None:
        super().__init__(store)
        self.failing = threading.Event()
        self.attempts = 0

    def renew(self, lease: Lease, ttl_s: float) -> Lease:
        self.attempts += 1
        if self.failing.is_set():
            raise RuntimeError("connection reset by peer")
        return super().renew(lease, ttl_s)


def test_the_keeper_survives_any_store_error_and_the_holder_stops_past_its_deadline(
    world: World,
) -> None:
    leases = _FlakyLeases(world.store)
    keeper = LeaseKeeper(leases, leases.acquire("engine-a", TTL_S), TTL_S).start()
    try:
        leases.failing.set()
        deadline = keeper.lease.valid_until
        while leases.clock() < deadline + 0.2:
            threading.Event().wait(0.05)
        assert leases.attempts >= 2  # it kept trying
        # Past its monotonic deadline with no renewal, the holder acts no more.
        with pytest.raises(LeaseLost, match="could not be confirmed"):
            keeper.check()
        leases.failing.clear()
        before = leases.attempts
        threading.Event().wait(TTL_S)
        assert leases.attempts > before  # the thread is alive
        keeper.check()  # renewed again: nobody took it meanwhile
    finally:
        keeper.stop()


def test_owners_are_unique_per_engine_so_one_role_never_holds_two_runs(world: World) -> None:
    first, second = world.engine("drill"), world.engine("drill")
    assert first.owner != second.owner
    first.leases.acquire(first.owner, 60)
    with pytest.raises(LeaseHeld):
        second.leases.acquire(second.owner, 60)


# -- rollback undoes what started, and resumes as a rollback -----------------------------------


def test_a_half_applied_fence_is_rolled_back_from_what_the_cluster_holds(world: World) -> None:
    """The fence created its ACLs, then timed out waiting to see them: the step failed.  The
    rollback must lift them (an undone switchover that leaves dc1 fenced is an outage)."""
    world.clusters["dc1"].fail_after_next(
        "create_entries", RetriableKafkaError("dc1: ACL changes for User:* not visible after 5s")
    )
    with pytest.raises(RolledBack, match="dc1 is primary again"):
        world.engine().start(world.plan(), RunOptions())
    run = world.only_run()
    assert run.state is RunState.ROLLED_BACK
    assert run.step(StepName.FENCE_SOURCE).state is StepState.ROLLED_BACK
    assert world.clusters["dc1"].acls == set()
    assert world.dc1_writable()


def test_companions_survive_a_half_applied_fence_so_lifting_leaves_topics_writable(
    world: World,
) -> None:
    """First attempt: ACLs (DENY + companion ALLOWs) created, then an error.  Second attempt
    (the resumed step) sees the topics no longer bare; the companions it lifts must still be
    the first attempt's, or the lone ALLOW READs leave the topics unwritable for everyone."""
    world.clusters["dc1"].fail_after_next("create_entries", RetriableKafkaError("not visible"))
    world.runs.create(world.plan(), "test", "")
    run = world.only_run()
    world.runs.step_started(run.id, StepName.FENCE_SOURCE)  # the intent, recorded first
    ctx = StepContext(
        world.config, world.config.flows[0], world.store, world.runs, run, RunOptions(),
        world.state_dir, connect=world.clusters.connect,
    )  # fmt: skip
    with pytest.raises(RetriableKafkaError):
        STEPS[StepName.FENCE_SOURCE](ctx, 5)
    STEPS[StepName.FENCE_SOURCE](ctx, 5)  # the resumed step
    assert not world.dc1_writable()
    world.runs.finish(run.id, RunState.ROLLING_BACK, RunResult(direction=Direction.ROLLBACK))
    STEPS[StepName.UNFENCE_SOURCE](ctx, 5)
    assert world.clusters["dc1"].acls == set()
    assert world.dc1_writable()


def test_a_failed_stop_replication_is_undone_and_restart_needs_a_worker_to_answer(
    world: World,
) -> None:
    """stop_replication wrote STOPPED, then no worker acknowledged: rolled back, the flow is
    RUNNING again.  When a worker exists but never answers RUNNING, the rollback does not
    report success - the run stops FAILED in the rollback direction."""
    world.control.ack("dc1->dc2", "worker-1", 0, DesiredState.RUNNING)  # a live worker...
    # ... that never acts on anything again (it keeps reporting epoch 0).

    def stuck_worker() -> Iterator[None]:
        while True:
            world.control.ack("dc1->dc2", "worker-1", 0, DesiredState.RUNNING)
            yield

    beats = stuck_worker()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.2):
            next(beats)

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    try:
        with pytest.raises(RunFailed, match="continues the rollback"):
            world.engine().start(world.plan(), RunOptions())
    finally:
        stop.set()
        beating.join(5)
    run = world.only_run()
    assert run.state is RunState.FAILED and run.direction is Direction.ROLLBACK
    assert "restart_replication" in (run.result.rollback_error or "")
    assert world.dc1_writable()  # the fence was undone first
    # The directive says RUNNING (it was written), but nothing claims it was obeyed.
    assert world.control.directive("dc1->dc2").desired is DesiredState.RUNNING


def test_a_rollback_cut_off_by_a_crash_resumes_as_a_rollback(world: World) -> None:
    """kill -9 in the middle of a rollback: the monitor resumes it - as a rollback, never the
    move (old engines resumed it forward, reusing the old fence point)."""

    class Crash(BaseException):
        """A process killed: nothing after it runs, nothing is recorded."""

    def crash(_ctx: StepContext, _timeout: float | None) -> StepOutcome:
        raise Crash()

    failing_drain = Stall(fail=True)
    failing_drain.release.set()
    engine = world.engine(drain=failing_drain, restart_replication=crash)
    with pytest.raises(Crash):
        engine.start(world.plan(), RunOptions())
    run = world.only_run()
    assert run.state is RunState.ROLLING_BACK
    # The rollback first gave the intent back and reconciled: dc1 took writes again at once.
    assert world.dc1_writable()

    assert world.resume_by_the_monitor() == [run.id]
    final = world.runs.get(run.id)
    assert final is not None and final.state is RunState.ROLLED_BACK
    assert world.dc1_writable()
    pointer = world.pointers.get()
    assert pointer is not None and pointer.cluster == "dc1"
    moved = final.step(StepName.MOVE_POINTER)
    assert moved is not None and moved.state is StepState.PENDING


# -- a pointer that moved in a step that did not finish ----------------------------------------


def test_a_move_pointer_that_failed_after_the_pointer_moved_is_not_rolled_back(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pointer write committed, then the step failed (its outcome unknown to the engine -
    here a failpoint right after the write).  Rolling back now would unfence dc1 and restart
    dc1->dc2 while the pointer sends the applications to dc2: two writable primaries.  The run
    stops FAILED in the forward direction instead; its resume finishes the move."""
    monkeypatch.setenv("DRKIT_FAILPOINTS", "move_pointer.after_move=error")
    with pytest.raises(RunFailed, match="--resume"):
        world.engine().start(world.plan(), RunOptions())
    run = world.only_run()
    assert run.state is RunState.FAILED and run.direction is Direction.FORWARD
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.run_id) == ("dc2", run.id)
    assert not world.dc1_writable()  # still fenced: no rollback ran
    monkeypatch.delenv("DRKIT_FAILPOINTS")
    final = world.engine().resume(run.id)
    assert final.state is RunState.SUCCEEDED
    assert not world.dc1_writable()
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.run_id) == ("dc2", run.id)


def test_a_run_cut_off_right_after_it_moved_the_pointer_is_resumed_not_abandoned(
    world: World,
) -> None:
    """kill -9 between the pointer's write and the step's outcome (what CI's
    engine-killed-mid-failover drill hit): the pointer is on the target, put there by this very
    run, and move_pointer is idempotent - the monitor resumes the run to its end.  (It was
    abandoned as "planned while the active cluster was dc1; it is dc2 now", leaving the move
    without its last steps.)"""

    class Crash(BaseException):
        """A process killed: nothing after it runs, nothing is recorded."""

    def move_then_crash(ctx: StepContext, timeout: float | None) -> StepOutcome:
        STEPS[StepName.MOVE_POINTER](ctx, timeout)
        raise Crash()

    with pytest.raises(Crash):
        world.engine(move_pointer=move_then_crash).start(world.plan(), RunOptions())
    run = world.only_run()
    assert run.state is RunState.RUNNING
    assert world.resume_by_the_monitor() == [run.id]
    final = world.runs.get(run.id)
    assert final is not None
    assert final.state is RunState.SUCCEEDED, final.result
    assert not world.dc1_writable()
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.run_id) == ("dc2", run.id)


# -- resume only what is still true ------------------------------------------------------------


def test_an_old_run_whose_world_moved_on_is_abandoned_not_resumed(world: World) -> None:
    failing = Stall(fail=True)
    failing.release.set()
    engine = world.engine(drain=failing)
    # A failover (no rollback) stopped at a step: FAILED, resumable.
    (Path(world.config.failover.runbooks_dir) / "failover.yaml").write_text(
        yaml.safe_dump(
            {
                "procedure": "failover",
                "steps": [{"name": "drain"}, {"name": "move_pointer"}],
            }
        )
    )
    plan = world.plan()
    failover = replace(plan, procedure=Procedure.FAILOVER)
    with pytest.raises(RunFailed):
        engine.start(failover, RunOptions())
    old = world.only_run()
    # Later, the pointer moves by other means (an operator's run elsewhere, a restored store).
    world.pointers.move("dc2", 999)
    with pytest.raises(RunAbandoned, match="active cluster was dc1"):
        world.engine().resume(old.id)
    after = world.runs.get(old.id)
    assert after is not None and after.state is RunState.ABANDONED
    pointer = world.pointers.get()
    assert pointer is not None and (pointer.cluster, pointer.run_id) == ("dc2", 999)


def test_an_unfinished_run_blocks_new_runs_until_resumed_or_abandoned(world: World) -> None:
    failing = Stall(fail=True)
    failing.release.set()
    (Path(world.config.failover.runbooks_dir) / "failover.yaml").write_text(
        yaml.safe_dump({"procedure": "failover", "steps": [{"name": "drain"}]})
    )
    with pytest.raises(RunFailed):
        world.engine(drain=failing).start(
            replace(world.plan(), procedure=Procedure.FAILOVER), RunOptions()
        )
    old = world.only_run()
    with pytest.raises(PlanBlocked, match=f"--resume {old.id}"):
        world.engine().start(world.plan(), RunOptions())
    abandoned = world.engine().abandon(old.id, "moved by hand", "cli:alice")
    assert abandoned.state is RunState.ABANDONED
    assert abandoned.result.abandoned == Abandoned("moved by hand", "cli:alice", "failed")
    done = world.engine().start(world.plan(), RunOptions())
    assert done.state is RunState.SUCCEEDED


def test_a_new_run_under_its_own_lease_still_sees_a_dead_engines_run(world: World) -> None:
    """An engine killed mid-run leaves its run RUNNING; once its lease lapsed, a new run whose
    plan was made while that lease still held (so the plan saw no blocker) takes the lease and
    checks again - and its own live lease once hid the dead run: it started beside it."""

    class Crash(BaseException):
        """A process killed: nothing after it runs, nothing is recorded."""

    def crash(_ctx: StepContext, _timeout: float | None) -> StepOutcome:
        raise Crash()

    with pytest.raises(Crash):
        world.engine(drain=crash).start(world.plan(), RunOptions())
    dead = world.only_run()
    assert dead.state is RunState.RUNNING
    world.expire_lease()
    with pytest.raises(PlanBlocked, match=f"--resume {dead.id}"):
        world.engine().start(world.plan(), RunOptions())
    assert [run.id for run in world.runs.latest()] == [dead.id]


def test_a_resumed_run_translates_again_when_a_group_read_on_since(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover failed before its commit; the applications read on (and committed) on the
    source, which answers, before the operator resumed it.  Committing the recorded
    translation would set the group back on the target (re-reads of what it had done): the
    resume translates again - through the engine's own step - and commits that.  (The real
    translation needs brokers: tests/integration/test_failover_faults.py.)"""
    (Path(world.config.failover.runbooks_dir) / "failover.yaml").write_text(yaml.safe_dump(
        {"procedure": "failover", "steps": [{"name": "translate_offsets"},
                                            {"name": "commit_group_offsets"}]}))  # fmt: skip
    dc1, dc2 = world.clusters["dc1"], world.clusters["dc2"]
    dc2.add_topic(f"dc1.{ORDERS}", 1)
    source, replica = TopicPartition(ORDERS, 0), TopicPartition(f"dc1.{ORDERS}", 0)
    dc1.set_group_offsets("app", {source: 40})
    dc1.set_group_offsets("still", {source: 20})
    translated: list[dict[str, int]] = []

    def translate(ctx: StepContext, _timeout: float | None) -> StepOutcome:
        """Exact by construction: S on the source is T on the replica."""
        now = {g: dc1.committed(g)[source] for g in ("app", "still")}
        translated.append(now)
        translation = Translation("live", tuple(
            GroupTranslation(g, "absent", False, (PartitionMove(
                ORDERS, 0, replica.topic, 0, s, s, "exact", 0, 0),)) for g, s in now.items()
        ), (), ())  # fmt: skip
        ctx.session.translated(translation)
        return StepOutcome.done(**translation.to_detail())

    failover = replace(world.plan(), procedure=Procedure.FAILOVER)
    monkeypatch.setenv("DRKIT_FAILPOINTS", "commit_group_offsets.before_write=error")
    with pytest.raises(RunFailed):
        world.engine(translate_offsets=translate).start(failover, RunOptions())
    run = world.only_run()
    assert run.state is RunState.FAILED and "app" not in dc2.groups
    monkeypatch.delenv("DRKIT_FAILPOINTS")
    dc1.set_group_offsets("app", {source: 55})  # read on since the translation
    done = world.engine(translate_offsets=translate).resume(run.id)
    assert done.state is RunState.SUCCEEDED, done.result
    assert translated == [{"app": 40, "still": 20}, {"app": 55, "still": 20}]
    assert dc2.committed("app") == {replica: 55}  # not set back to 40
    assert dc2.committed("still") == {replica: 20}
    assert done.result.translated_again_for == ("app",)
    recorded = {g.group: g.partitions[0].source_offset for g in Translation.of(done).groups}
    assert recorded == {"app": 55, "still": 20}


def test_a_store_that_is_down_stops_the_run_before_any_side_effect(
    world: World, tmp_path: Path
) -> None:
    """No store, no failover: the engine refuses with the store's error and touches nothing."""
    down = StateStore("postgresql+psycopg://drkit:secret@127.0.0.1:1/drkit")  # nothing listens
    engine = Engine(world.config, down, world.state_dir, connect=world.clusters.connect)
    with pytest.raises(StateStoreError, match=r"127\.0\.0\.1:1") as refused:
        engine.start(world.plan(), RunOptions())
    assert "secret" not in str(refused.value)
    assert world.clusters["dc1"].acls == set()


# -- one monitor per observer id ----------------------------------------------------------------


def test_a_second_monitor_with_the_same_observer_id_is_refused(world: World) -> None:
    from drkit.errors import ConfigError
    from drkit.health.identity import claim_observer

    first = claim_observer(world.store, "site-a", ttl_s=30)
    try:
        with pytest.raises(ConfigError, match=r"site-a.*in use by another monitor"):
            claim_observer(world.store, "site-a", ttl_s=30)
        other = claim_observer(world.store, "site-b", ttl_s=30)  # another id is fine
        other.stop()
    finally:
        first.stop()


def test_a_restarted_monitor_takes_its_id_back_from_its_dead_predecessor(world: World) -> None:
    import socket
    import subprocess
    import sys

    from drkit.errors import ConfigError
    from drkit.health.identity import claim_observer, lease_name

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(ended.stdout)
    here = f"monitor:site-a:{socket.gethostname()}:{dead_pid}:0000"
    world.leases.acquire(here, 300, name=lease_name("site-a"))
    claim = claim_observer(world.store, "site-a", ttl_s=30)
    claim.stop()
    holder = world.leases.holder(lease_name("site-a"))
    assert holder is not None and holder.owner == claim.lease.owner
    # A live holder on another host is never taken over, however it looks.
    elsewhere = f"monitor:site-c:other-host:{dead_pid}:0000"
    world.leases.acquire(elsewhere, 300, name=lease_name("site-c"))
    with pytest.raises(ConfigError, match="other-host"):
        claim_observer(world.store, "site-c", ttl_s=30)


def test_a_monitor_whose_observer_id_was_taken_over_writes_no_vote(world: World) -> None:
    """A monitor frozen past its claim's TTL (SIGSTOP, a VM pause) wakes after another monitor
    claimed the same observer id: its votes would overwrite the other's under one id.  Its
    writes are fenced by its claim: refused (LeaseLost), the new holder's row stands."""
    from drkit.errors import LeaseLost
    from drkit.health.identity import claim_observer, lease_name
    from drkit.store.health_repo import HealthRepository

    frozen = claim_observer(world.store, "site-a", ttl_s=30)
    frozen.stop()  # its renewals stopped with it
    with world.store.session() as session:  # ... past its TTL
        session.execute(update(LeaseRow).where(LeaseRow.name == lease_name("site-a"))
                        .values(expires_at=LeaseRow.acquired_at))  # fmt: skip
    other = claim_observer(world.store, "site-a", ttl_s=30)
    try:
        HealthRepository(world.store, guard=other).record_probe(
            "site-a", "dc1", 100.0, True, 1.0, {}, "HEALTHY", 100.0, {}, None
        )
        with pytest.raises(LeaseLost):
            HealthRepository(world.store, guard=frozen).record_probe(
                "site-a", "dc1", 101.0, False, None, {}, "UNAVAILABLE", 101.0, {}, "HEALTHY"
            )
        [row] = HealthRepository(world.store).all_observer_states()
        assert (row.observer, row.state) == ("site-a", "HEALTHY")
    finally:
        other.stop()


# -- the control channel: workers cut off from the store --------------------------------------


def _stop_context(world: World) -> StepContext:
    run = world.runs.create(world.plan(), "test", "")
    return StepContext(
        world.config, world.config.flows[0], world.store, world.runs, run, RunOptions(),
        world.state_dir, connect=world.clusters.connect, channels=fake_channels(world.clusters),
    )  # fmt: skip


def test_a_worker_cut_off_from_the_store_is_stopped_through_the_channel(world: World) -> None:
    """The worker last acked in the store long ago (the store is away for it) but acks on the
    target's channel every poll: stop_replication publishes STOPPED there and waits for its
    channel ack - it does not take the old store silence as proof the worker stopped."""
    world.control.ack("dc1->dc2", "worker-1", 0, DesiredState.RUNNING)
    with world.store.session() as session:  # its last store ack: a minute ago
        from drkit.store.models import FlowAck

        session.execute(update(FlowAck).values(at=datetime.now(UTC) - timedelta(seconds=60)))
    channel = fake_channels(world.clusters)(world.config.flows[0])
    stop = threading.Event()

    def worker() -> None:  # follows the channel, acking every 0.3 s
        while not stop.wait(0.3):
            view = channel.read()
            if view.directive is not None:
                channel.ack("worker-1", view.directive.epoch, view.directive.desired)
            else:
                channel.ack("worker-1", 0, DesiredState.RUNNING)

    beating = threading.Thread(target=worker, daemon=True)
    beating.start()
    try:
        outcome = STEPS[StepName.STOP_REPLICATION](_stop_context(world), 10)
    finally:
        stop.set()
        beating.join(5)
    assert outcome.detail["acknowledged_on_channel"] == ["worker-1"]
    assert outcome.detail["control_channel"] == "published"
    published = channel.read().directive
    assert published is not None and published.desired is DesiredState.STOPPED


def test_a_directive_that_holds_a_flow_back_must_reach_the_channel(world: World) -> None:
    world.clusters["dc2"].go_down()
    with pytest.raises(StepFailed, match="control channel on dc2"):
        STEPS[StepName.STOP_REPLICATION](_stop_context(world), 5)
    # One that lets a flow run may not (its target can be the dead old primary): noted.
    outcome = STEPS[StepName.RESTART_REPLICATION](_stop_context(world), 5)
    assert "not published" in str(outcome.detail["control_channel"])


# -- after-hooks a crash cut off ------------------------------------------------------------


def test_an_abandoned_run_still_runs_the_after_hooks_of_its_done_steps(world: World) -> None:
    """The engine died after move_pointer was recorded, before its after-hook (the client
    config writer) ran; an operator then abandoned the run (the simulation's seed 194).  main
    ended it ABANDONED with the pointer on dc2 and the clients never told: abandoning undoes
    nothing, so what the done steps did stands - and their announcement must run."""

    class Crash(BaseException):
        """A process killed in the hook: nothing after it runs."""

    hook = HookConfig(when="after", step="move_pointer", command=("announce",))
    world.config = world.config.model_copy(
        update={"failover": world.config.failover.model_copy(update={"hooks": [hook]})}
    )
    ran: list[dict[str, Any]] = []

    def crash(_hook: Hook, _context: dict[str, Any]) -> HookOutcome:
        raise Crash()

    def record(hook: Hook, context: dict[str, Any]) -> HookOutcome:
        ran.append(context)
        return HookOutcome(hook.command, hook.when, hook.step, 0, False, "")

    dying = world.engine()
    dying.run_hook = crash
    with pytest.raises(Crash):
        dying.start(world.plan(), RunOptions())
    run = world.only_run()
    assert run.step(StepName.MOVE_POINTER).state is StepState.DONE
    world.expire_lease()
    operator = world.engine("operator")
    operator.run_hook = record
    operator.abandon(run.id, "the on-call gave it up", "ana")
    assert world.only_run().state is RunState.ABANDONED
    assert [c["pointer"] for c in ran] == ["dc2"]
    announced = world.only_run().step(StepName.MOVE_POINTER)
    assert announced is not None and announced.detail["hooks_after"][0]["exit_code"] == 0


def test_an_engine_waits_for_a_monitors_maintenance_holding_the_lease(world: World) -> None:
    """A monitor's maintenance holds the failover lease for seconds at a time; an engine
    starting then waits for it.  The monitor named its maintenance "monitor:NAME:..." - not a
    maintenance owner to the engine, so a drill's move failed with LeaseHeld (CI, the
    consumers-lagging drill) whenever it started during its monitor's tick."""
    held = world.leases.acquire(maintenance_owner("drill"), 1.0)
    run = world.engine().start(world.plan(), RunOptions())
    assert run.state is RunState.SUCCEEDED
    assert held.owner.startswith("maintenance:drill:")
