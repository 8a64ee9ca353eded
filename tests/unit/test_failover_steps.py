"""Failover steps over in-memory clusters: committing group offsets and fencing.

The steps run as the engine runs them - a StepContext over a real SQLite state store and a
recorded run - with ``connect`` handing out FakeClusters (tests/fake_kafka.py) instead of
KafkaAdmins.  What is asserted is what the clusters end up holding (committed offsets, ACLs,
whether a producer is refused) and what the fence table records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from drkit.acl.fencing import topic_acl
from drkit.acl.rules import Operation, Permission
from drkit.config import load_config_text
from drkit.control import ControlRepository, DesiredState
from drkit.failover.context import StepContext, StepFailed
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.lease import LeaseRepository
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.model import (
    Direction,
    PartitionMove,
    Plan,
    PlannedStep,
    Procedure,
    RunState,
    StepName,
    StepState,
)
from drkit.failover.pointer import PointerRepository
from drkit.failover.results import GroupTranslation, Translation
from drkit.failover.run_result import RunOptions, RunResult
from drkit.failover.runs import RunRepository
from drkit.failover.steps.fencing import fence_source, unfence_source
from drkit.failover.steps.offsets import commit_group_offsets
from drkit.failover.steps.promotion import move_pointer
from drkit.failover.steps.replication import start_reverse_flow
from drkit.lag import PartitionRpo
from drkit.records import TopicPartition
from drkit.store import StateStore
from tests.fake_kafka import FakeClusters, fake_channels

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9"}
  dc2: {bootstrap_servers: "127.0.0.1:10"}
flows:
  - {source: dc1, target: dc2}
"""

ORDERS, PAYMENTS = "orders", "payments"
STEPS = (StepName.FENCE_SOURCE, StepName.TRANSLATE_OFFSETS, StepName.COMMIT_GROUP_OFFSETS)


def _plan() -> Plan:
    """A switchover of dc1's orders and payments (one partition each: the plan's RPO rows are
    the run's replicated partitions)."""
    return Plan(
        procedure=Procedure.SWITCHOVER, source="dc1", target="dc2", flow="dc1->dc2",
        reverse_flow=None, source_reachable=True, translation_mode="live",
        steps=tuple(PlannedStep(i + 1, name, None, None) for i, name in enumerate(STEPS)),
        groups=(), groups_without_checkpoint=(),
        rpo=tuple(PartitionRpo(t, 0, 0, 0, 0, 0, 0.0) for t in (ORDERS, PAYMENTS)),
        findings=(), pointer_from="dc1", pointer_to="dc2",
    )  # fmt: skip


class World:
    """Two fake clusters, a state store with one recorded switchover run, and contexts on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = load_config_text(CONFIG, env={})
        self.store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
        self.store.upgrade()
        self.runs = RunRepository(self.store)
        self.run_id = self.runs.create(_plan(), "test", "unit").id
        self.clusters = FakeClusters("dc1", "dc2")
        for topic in (ORDERS, PAYMENTS):
            self.clusters["dc1"].add_topic(topic)
        self.state_dir = tmp_path
        self.fences = FenceRepository(self.store)

    def context(self, options: RunOptions | None = None) -> StepContext:
        run = self.runs.get(self.run_id)
        assert run is not None
        return StepContext(
            self.config, self.config.flows[0], self.store, self.runs, run,
            options or RunOptions(), self.state_dir, connect=self.clusters.connect,
        )  # fmt: skip

    def unplanned(self) -> None:
        """The run becomes an unplanned failover, planned with dc1 gone."""
        self.runs.finish(self.run_id, RunState.SUCCEEDED)
        failover = replace(_plan(), procedure=Procedure.FAILOVER, source_reachable=False)
        self.run_id = self.runs.create(failover, "test", "unit").id

    def fencing(self) -> StepContext:
        """A context whose run recorded fence_source's start: its intent (the source fenced),
        as the engine records it before the step acts."""
        self.runs.step_started(self.run_id, StepName.FENCE_SOURCE)
        return self.context()

    def rolling_back(self) -> StepContext:
        """A context whose run turned to its rollback: it wants nothing any more."""
        self.runs.finish(
            self.run_id, RunState.ROLLING_BACK, RunResult(direction=Direction.ROLLBACK)
        )
        return self.context()

    def translated(self, groups: dict[str, dict[int, int | None]]) -> None:
        """Record the translate step's detail: per group, T per partition of dc1.orders."""
        translation = Translation(
            "live",
            tuple(
                GroupTranslation(
                    group,
                    "absent",
                    False,
                    tuple(
                        PartitionMove(ORDERS, p, f"dc1.{ORDERS}", p, t, t, "exact", 0, 0)
                        for p, t in sorted(offsets.items())
                    ),
                )
                for group, offsets in groups.items()
            ),
            (),
            (),
        )
        self.runs.step_finished(
            self.run_id, StepName.TRANSLATE_OFFSETS, StepState.DONE, translation.to_detail()
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def replica(partition: int) -> TopicPartition:
    return TopicPartition(f"dc1.{ORDERS}", partition)


# -- commit_group_offsets ---------------------------------------------------------------------


def test_commit_writes_exact_offsets_into_empty_and_absent_groups_only(world: World) -> None:
    dc2 = world.clusters["dc2"]
    dc2.add_topic(f"dc1.{ORDERS}", 2)
    dc2.set_group_offsets("empty", {replica(0): 1})  # an old commit, group EMPTY
    dc2.activate("busy", members=2)
    dc2.set_group_offsets("busy", {replica(0): 5})
    world.translated(
        {
            "absent": {0: 40, 1: 17},
            "empty": {0: 40, 1: 17},
            "busy": {0: 40, 1: 17},
            "untranslatable": {0: None, 1: None},
        }
    )

    outcome = commit_group_offsets(world.context(), None)

    assert outcome.state is StepState.DONE
    assert outcome.detail["committed"] == {"absent": 2, "empty": 2}
    assert set(outcome.detail["skipped"]) == {"busy", "untranslatable"}
    assert "2 members" in outcome.detail["skipped"]["busy"]
    assert dc2.committed("absent") == {replica(0): 40, replica(1): 17}
    assert dc2.committed("empty") == {replica(0): 40, replica(1): 17}
    assert dc2.committed("busy") == {replica(0): 5}  # the active group owns its offsets
    assert "untranslatable" not in dc2.groups
    assert dc2.calls.count("alter_group_offsets") == 2


def test_commit_is_idempotent_when_a_resumed_run_repeats_it(world: World) -> None:
    dc2 = world.clusters["dc2"]
    world.translated({"app": {0: 40, 1: 17}})
    first = commit_group_offsets(world.context(), None)
    again = commit_group_offsets(world.context(), None)
    assert first.detail == again.detail == {"committed": {"app": 2}, "skipped": {}, "forced": False}
    assert dc2.committed("app") == {replica(0): 40, replica(1): 17}


def test_force_writes_a_group_without_members_and_reports_the_brokers_refusal(
    world: World,
) -> None:
    dc2 = world.clusters["dc2"]
    dc2.activate("busy", members=1)
    dc2.set_group_offsets("idle", {replica(0): 3})
    world.translated({"busy": {0: 40}, "idle": {0: 40}})

    outcome = commit_group_offsets(world.context(RunOptions(force=True)), None)

    assert outcome.detail["forced"] is True
    assert outcome.detail["committed"] == {"idle": 1}
    # The broker refuses commits while the group has members, --overwrite-active-groups or not.
    assert "UNKNOWN_MEMBER_ID" in outcome.detail["skipped"]["busy"]
    assert dc2.committed("busy") == {}


def test_a_group_that_gets_members_just_before_its_write_is_skipped_not_a_failed_run(
    world: World,
) -> None:
    dc2 = world.clusters["dc2"]
    world.translated({"late": {0: 40}, "quiet": {0: 41}})
    # "late" is empty when the step looks, and has a member when its offsets are written.
    dc2.before_next("alter_group_offsets", lambda: dc2.activate("late"))

    outcome = commit_group_offsets(world.context(), None)

    assert outcome.detail["committed"] == {"quiet": 1}
    assert set(outcome.detail["skipped"]) == {"late"}
    assert "1 members" in outcome.detail["skipped"]["late"]
    assert dc2.committed("late") == {}
    assert dc2.committed("quiet") == {replica(0): 41}


def test_a_write_refused_for_another_reason_fails_the_step_naming_the_group(
    world: World,
) -> None:
    dc2 = world.clusters["dc2"]
    world.translated({"app": {0: 40}})
    dc2.before_next("alter_group_offsets", dc2.go_down)
    with pytest.raises(StepFailed) as failed:
        commit_group_offsets(world.context(), None)
    assert "app" in str(failed.value)
    assert dc2.committed("app") == {}


# -- fence_source / unfence_source -----------------------------------------------------------


def test_fence_denies_writes_keeps_reads_and_unfence_restores_exactly_the_old_acls(
    world: World,
) -> None:
    dc1 = world.clusters["dc1"]
    # payments already has an ACL of its own: it gets no companion ALLOWs (and keeps its ACL).
    own = topic_acl(PAYMENTS, "User:billing", Operation.READ, Permission.ALLOW)
    dc1.acls.add(own)

    outcome = fence_source(world.fencing(), None)

    assert outcome.detail == {"topics": [ORDERS, PAYMENTS], "principal": "User:*", "pending": False}
    assert dc1.write_denied() == {ORDERS, PAYMENTS}
    assert {a for a in dc1.acls if a.permission is Permission.ALLOW} == {
        own,
        *(topic_acl(ORDERS, "User:*", op, Permission.ALLOW) for op in (
            Operation.READ, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)),
    }  # fmt: skip
    assert world.fences.topics("dc1", FenceState.APPLIED) == {ORDERS, PAYMENTS}
    assert world.fences.reads_allowed("dc1") == {ORDERS}
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
        dc1.append(ORDERS)

    # A resumed run fences again: nothing changes, the companions stay recorded.
    fence_source(world.fencing(), None)
    assert world.fences.reads_allowed("dc1") == {ORDERS}

    lifted = unfence_source(world.rolling_back(), None)

    assert (lifted.detail["cluster"], lifted.detail["topics"]) == ("dc1", [ORDERS, PAYMENTS])
    assert dc1.acls == {own}
    assert world.fences.topics("dc1", FenceState.LIFTED) == {ORDERS, PAYMENTS}
    assert dc1.append(ORDERS) == 1


def test_an_unreachable_source_is_fenced_when_it_returns_then_lifted_with_its_companions(
    world: World,
) -> None:
    world.unplanned()
    dc1 = world.clusters["dc1"]
    dc1.go_down()

    outcome = fence_source(world.fencing(), None)

    assert outcome.detail["pending"] is True
    assert world.fences.topics("dc1", FenceState.PENDING) == {ORDERS, PAYMENTS}
    assert dc1.acls == set()
    maintenance = FailoverMaintenance(
        world.config, world.store, world.state_dir, connect=world.clusters.connect
    )
    assert maintenance.reconcile_protections().changed == []  # still away
    dc1.come_back()
    assert maintenance.reconcile_protections().changed == ["dc1"]
    assert dc1.write_denied() == {ORDERS, PAYMENTS}
    assert world.fences.topics("dc1", FenceState.APPLIED) == {ORDERS, PAYMENTS}
    assert world.fences.reads_allowed("dc1") == {ORDERS, PAYMENTS}
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
        dc1.append(PAYMENTS)

    unfence_source(world.rolling_back(), None)
    assert dc1.acls == set()  # the DENY and its companion ALLOWs, all gone
    assert dc1.append(ORDERS) == 1


def test_a_planned_move_whose_source_stops_answering_at_its_fence_fails_not_pending(
    world: World,
) -> None:
    """A switchover whose source went away between the plan and the fence (the simulation's
    seed 1669): main recorded the fence PENDING and went on - draining, confirming and opening
    the target beside a source that took writes again once back.  A planned move needs its
    fence: the step fails (and the run rolls back)."""
    world.clusters["dc1"].go_down()
    with pytest.raises(StepFailed, match="a planned switchover cannot fence it"):
        fence_source(world.fencing(), None)
    assert world.fences.rows() == []


def test_move_pointer_fences_a_source_that_came_back_before_the_target_opens(
    world: World,
) -> None:
    """An unplanned failover planned with dc1 gone; dc1 answers again by move_pointer (the
    simulation's seed 34: a resumed run).  main opened dc2 and moved the pointer with dc1 still
    taking writes - until the monitor's next tick, or for as long as the monitor was frozen."""
    world.unplanned()
    dc1 = world.clusters["dc1"]
    dc1.go_down()
    ctx = world.fencing()
    assert fence_source(ctx, None).detail["pending"] is True
    dc1.come_back()
    world.runs.step_started(world.run_id, StepName.MOVE_POINTER)
    move_pointer(ctx, None)  # the same context: it saw dc1 gone a moment ago
    assert dc1.write_denied() == {ORDERS, PAYMENTS}
    assert world.fences.topics("dc1", FenceState.APPLIED) == {ORDERS, PAYMENTS}


def test_one_monitor_at_a_time_runs_the_maintenance_duties(world: World) -> None:
    """Two monitors share a store: while one runs the duties (its lease), the other's tick does
    nothing - a returning cluster is fenced, and a divergence reported, once."""
    world.unplanned()
    dc1 = world.clusters["dc1"]
    dc1.go_down()
    fence_source(world.fencing(), None)
    dc1.come_back()
    world.runs.finish(world.run_id, RunState.SUCCEEDED)  # nothing left to resume
    PointerRepository(world.store).move("dc2", world.run_id)  # the run moved it
    east, west = (
        FailoverMaintenance(
            world.config, world.store, world.state_dir, connect=world.clusters.connect, owner=o
        )
        for o in ("monitor:east", "monitor:west")
    )
    held = LeaseRepository(world.store).acquire("maintenance:east", 60)
    west.tick()
    assert world.fences.topics("dc1", FenceState.PENDING) == {ORDERS, PAYMENTS}  # untouched
    LeaseRepository(world.store).release(held)
    west.tick()
    assert world.fences.topics("dc1", FenceState.APPLIED) == {ORDERS, PAYMENTS}
    east.tick()  # the lease is free again after west's tick
    assert dc1.write_denied() == {ORDERS, PAYMENTS}


# -- drain ------------------------------------------------------------------------------------


def test_drain_with_an_empty_fence_point_has_nothing_to_wait_for(world: World) -> None:
    """A flow with no topics on its source yet (a failback before any application wrote to
    the new primary) records an empty fence point: drain is done, not "never recorded"."""
    from drkit.failover.steps.replication import drain

    world.runs.step_finished(
        world.run_id, StepName.RECORD_FENCE_POINT, StepState.DONE, {"fence_point": {}}
    )
    outcome = drain(world.context(), timeout_s=5)
    assert outcome.detail["partitions"] == 0


def test_drain_before_the_fence_point_was_recorded_fails_naming_the_step(world: World) -> None:
    from drkit.failover.context import StepFailed
    from drkit.failover.steps.replication import drain

    with pytest.raises(StepFailed, match="record_fence_point must run first"):
        drain(world.context(), timeout_s=5)


# -- divergence, in visible records -----------------------------------------------------------


def test_divergence_counts_visible_records_and_waits_for_open_transactions(world: World) -> None:
    """A returning old primary's tail beyond the failover point, in records a read_committed
    consumer sees: transaction markers and aborted records are not loss (main counted offsets:
    its status said 33 where the drill's recount said 20); an open transaction in the tail is
    counted once it ended, never half."""
    from dataclasses import replace

    runs = world.runs
    failover = runs.create(replace(_plan(), procedure=Procedure.FAILOVER), "test", "")
    rpo = [{"topic": ORDERS, "partition": 0, "replicated_end": 5}]
    runs.step_finished(failover.id, StepName.TRANSLATE_OFFSETS, StepState.DONE, {"rpo": rpo})
    runs.finish(failover.id, RunState.SUCCEEDED)
    runs.finish(world.run_id, RunState.SUCCEEDED)
    dc1 = world.clusters["dc1"]
    world.clusters["dc2"].add_topic(f"dc1.{ORDERS}")  # its replica (no copy past the point)
    dc1.append(ORDERS, 0, 5)  # replicated before the failover
    dc1.append(ORDERS, 0, 7)  # the tail: 7 records ...
    dc1.append_invisible(ORDERS, 0, 3)  # ... 2 aborted + a marker
    dc1.append(ORDERS, 0, 2)
    dc1.open_transaction(ORDERS, 0)
    dc1.append(ORDERS, 0, 4)
    maintenance = FailoverMaintenance(
        world.config, world.store, world.state_dir, connect=world.clusters.connect
    )
    assert maintenance.report_divergence() == []  # a transaction is open in the tail
    dc1.end_transaction(ORDERS, 0)
    assert maintenance.report_divergence() == [failover.id]
    reported = runs.get(failover.id)
    assert reported is not None
    divergence = reported.result.divergence
    assert divergence is not None
    assert divergence.records == 13 and divergence.offsets == 16
    assert divergence.per_partition == {f"{ORDERS}:0": 13}


# -- confirm_fence ----------------------------------------------------------------------------


def test_a_write_that_slipped_past_the_fence_fails_confirm_fence_naming_it(world: World) -> None:
    """A super user (whom ACLs do not stop) writes after the fence point: moving the pointer
    now would lose that record (replication has stopped), so confirm_fence fails, counting it."""
    from drkit.failover.results import FencePoint
    from drkit.failover.steps.replication import confirm_fence

    dc1 = world.clusters["dc1"]
    dc1.append(ORDERS, 0, 10)
    fence_source(world.fencing(), None)
    point = FencePoint({f"{ORDERS}:0": 10, f"{PAYMENTS}:0": 0})
    world.runs.step_finished(
        world.run_id, StepName.RECORD_FENCE_POINT, StepState.DONE, point.to_detail()
    )
    assert confirm_fence(world.context(), 5).detail["fence_point_holds"] is True
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
        dc1.append(ORDERS, 0, 1)  # an application is refused ...
    dc1.append(ORDERS, 0, 1, super_user=True)  # ... a super user is not
    with pytest.raises(
        StepFailed, match=rf"1 record\(s\) reached dc1 after its fence point \({ORDERS}:0 \+1\)"
    ):
        confirm_fence(world.context(), 5)


def test_transaction_markers_after_the_fence_point_are_not_slipped_writes(world: World) -> None:
    """A fenced transactional producer aborts (or the coordinator times its transaction out):
    the ABORT markers take offsets after the fence point but are no records - nothing would
    be lost, so confirm_fence holds and says how many marker offsets it passed over."""
    from drkit.failover.results import FencePoint
    from drkit.failover.steps.replication import confirm_fence

    dc1 = world.clusters["dc1"]
    dc1.append(ORDERS, 0, 10)
    fence_source(world.fencing(), None)
    point = FencePoint({f"{ORDERS}:0": 10, f"{PAYMENTS}:0": 0})
    world.runs.step_finished(
        world.run_id, StepName.RECORD_FENCE_POINT, StepState.DONE, point.to_detail()
    )
    dc1.append_invisible(ORDERS, 0, 1)  # the abort marker, written by the coordinator
    outcome = confirm_fence(world.context(), 5)
    assert outcome.detail["fence_point_holds"] is True
    assert outcome.detail["markers_after_fence_point"] == 1


def test_a_transaction_open_after_the_fence_point_fails_confirm_fence(world: World) -> None:
    """Records past the fence point inside a transaction still open cannot be counted (they
    may yet commit): confirm_fence does not guess 0 - it fails, naming the open transaction."""
    from drkit.failover.results import FencePoint
    from drkit.failover.steps.replication import confirm_fence

    dc1 = world.clusters["dc1"]
    fence_source(world.fencing(), None)
    point = FencePoint({f"{ORDERS}:0": 0, f"{PAYMENTS}:0": 0})
    world.runs.step_finished(
        world.run_id, StepName.RECORD_FENCE_POINT, StepState.DONE, point.to_detail()
    )
    dc1.open_transaction(ORDERS, 0)
    dc1.append(ORDERS, 0, 2, super_user=True)
    with pytest.raises(StepFailed, match=r"at most 2 record\(s\).*transaction still open"):
        confirm_fence(world.context(), 5)


def test_on_a_deny_by_default_cluster_the_fence_widens_nobodys_reads(world: World) -> None:
    """allow_everyone_if_no_acl false: a companion ALLOW READ for User:* would open the topic
    to every principal; the DENY alone stops the writes there."""
    dc1 = world.clusters["dc1"]
    closed = world.config.clusters["dc1"].model_copy(update={"allow_everyone_if_no_acl": False})
    world.config = world.config.model_copy(
        update={"clusters": {**world.config.clusters, "dc1": closed}}
    )
    fence_source(world.fencing(), None)
    assert dc1.write_denied() == {ORDERS, PAYMENTS}
    assert {a for a in dc1.acls if a.permission is Permission.ALLOW} == set()
    assert world.fences.reads_allowed("dc1") == set()
    unfence_source(world.rolling_back(), None)
    assert dc1.acls == set()


# -- start_reverse_flow -------------------------------------------------------------------------

REVERSE_CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9"}
  dc2: {bootstrap_servers: "127.0.0.1:10"}
flows:
  - {source: dc1, target: dc2}
  - {source: dc2, target: dc1, standby: true}
"""


def _reverse_context(
    world: World, on_wait: Callable[[ControlRepository], None] = lambda _control: None
) -> StepContext:
    """A context whose config has the reverse flow dc2->dc1; ``on_wait`` runs at each of the
    step's progress reports (a worker acting while the step waits)."""
    config = load_config_text(REVERSE_CONFIG, env={})
    run = world.runs.get(world.run_id)
    assert run is not None
    control = ControlRepository(world.store)
    return StepContext(
        config, config.flows[0], world.store, world.runs, run, RunOptions(), world.state_dir,
        progress=lambda _message, _fraction: on_wait(control),
        connect=world.clusters.connect, channels=fake_channels(world.clusters),
    )  # fmt: skip


def _acks_running(worker: str) -> Callable[[ControlRepository], None]:
    def act(control: ControlRepository) -> None:
        directive = control.directive(REVERSE)
        control.ack(REVERSE, worker, directive.epoch, DesiredState.RUNNING)

    return act


REVERSE = "dc2->dc1"


def test_the_reverse_flow_is_confirmed_once_a_worker_acknowledges_running(world: World) -> None:
    """A worker still starting when the step begins (no ack yet) is waited for: the step is
    confirmed by its first RUNNING ack, not by the directive alone."""
    outcome = start_reverse_flow(_reverse_context(world, _acks_running("w1")), 10.0)
    assert outcome.state is StepState.DONE
    assert outcome.detail["confirmed"] is True and outcome.detail["running"] == ["w1"]
    assert "warning" not in outcome.detail


def test_a_reverse_flow_nobody_runs_is_done_but_not_confirmed_and_says_what_to_check(
    world: World,
) -> None:
    outcome = start_reverse_flow(_reverse_context(world), 0.6)
    assert outcome.state is StepState.DONE and outcome.detail["confirmed"] is False
    warning = outcome.detail["warning"]
    assert "NOT confirmed" in warning and "no worker acknowledged RUNNING within 0.6s" in warning
    assert "drkit flows list" in warning and "--flow dc2->dc1" in warning


def test_a_reverse_flow_whose_worker_failed_is_not_confirmed_and_names_the_error(
    world: World,
) -> None:
    """The race of issue 52: the worker's flow had ended (an empty subscription) before the
    switchover - its last report names the error, and the step does not wait it out."""
    ControlRepository(world.store).ack(
        REVERSE, "w1", 0, DesiredState.PAUSED, failure="dc2: subscribe: _INVALID_ARG"
    )
    outcome = start_reverse_flow(_reverse_context(world), 30.0)
    assert outcome.detail["confirmed"] is False
    assert outcome.detail["failed"] == {"w1": "dc2: subscribe: _INVALID_ARG"}
    assert "w1: dc2: subscribe: _INVALID_ARG" in outcome.detail["warning"]
    assert outcome.detail["waited_s"] < 5  # nobody left to answer: no wait for the timeout


def test_a_reverse_flow_towards_a_dead_old_primary_is_not_waited_for(world: World) -> None:
    world.clusters["dc1"].up = False
    outcome = start_reverse_flow(_reverse_context(world), 30.0)
    assert outcome.detail["confirmed"] is False
    assert "dc1 does not answer" in outcome.detail["warning"]
