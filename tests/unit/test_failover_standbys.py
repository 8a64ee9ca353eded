"""An unplanned failover re-points the source's other standbys itself (issue 48): after
``move_pointer``, ``hold_standby_flows`` stops dc1->dc3 and ``follow_standbys`` copies what dc2
holds of dc1's data and dc3 lacks - the functions ``drkit flows repoint`` runs - so dc3 does not
wait for a dead dc1 until someone remembers the command.

The engine runs as in production (a real store, lease and runbook file, fake clusters and
control channels of tests/fake_kafka.py); the follow-on copy runs over the in-memory replicas
of tests/unit/test_follow_on.py (dc2's replica with a restart's duplicates past X, dc3 holding
origin 0..5), injected as the step's follower.  What is asserted is what dc3's replica, its
offset syncs, the flows' directives and the run hold afterwards."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from drkit import failpoints
from drkit.config import load_config_text
from drkit.control import ControlRepository, DesiredState
from drkit.errors import LeaseLost
from drkit.failover.engine import Engine
from drkit.failover.lease import LeaseRepository
from drkit.failover.model import Plan, Procedure, RunState, StepName, StepState
from drkit.failover.pointer import PointerRepository
from drkit.failover.run_result import RunOptions
from drkit.failover.runbook import load_runbook
from drkit.failover.runs import RunRecord, RunRepository
from drkit.failover.steps import STEPS
from drkit.failover.steps.standbys import follow_standbys_with
from drkit.lag import PartitionRpo
from drkit.offsets.follow_on import Copied, Leased, StandbyWriter, follow_all
from drkit.offsets.provenance_search import copy_offset
from drkit.offsets.repoint_inputs import RepointReport
from drkit.records import Record, TopicPartition
from drkit.repoint import CannotTell
from drkit.store import StateStore
from tests.fake_kafka import FakeClusters, fake_channels
from tests.unit.test_follow_on import (
    DC1,
    DC2_RUNS,
    DC3_RUNS,
    ORIGIN,
    REPLICA,
    SIGNER,
    SYNCS,
    Standby,
    _dc2,
    _dc3_holding,
    _placed,
    _report,
)

COMMAND = "drkit flows repoint --from dc1 --to dc2 --standby dc3"
# The shipped failover runbook's steps that need no real broker, in its order.
FAILOVER = {
    "procedure": "failover",
    "steps": [
        {"name": "stop_replication", "timeout_s": 2},
        {"name": "move_pointer", "timeout_s": 5},
        {"name": "hold_standby_flows", "timeout_s": 2},
        {"name": "follow_standbys"},
    ],
}


def _config(runbooks: Path, targets: tuple[str, ...]) -> Any:
    flows = "\n".join(f"  - {{source: dc1, target: {t}}}" for t in targets)
    clusters = "\n".join(
        f'  {a}: {{bootstrap_servers: "127.0.0.1:{9 + i}"}}'
        for i, a in enumerate(("dc1", *targets))
    )
    text = f"""
clusters:
{clusters}
flows:
{flows}
failover:
  lease_ttl_s: 5
  worker_silence_s: 1
  runbooks_dir: {runbooks}
"""
    return load_config_text(text, env={})


class Follower:
    """The step's follower over in-memory replicas: the re-point plan (``_report``: both maps,
    dc3's syncs merged in, every unmapped position read by provenance) and ``follow_all`` - as
    follow_standby does over Kafka.  Records the directive of dc1->dc3 when each call began."""

    def __init__(self, store: StateStore, cannot_tell: bool = False) -> None:
        self.dc2, self.dc3 = _dc2(), Standby(_dc3_holding(range(6)))
        self.control = ControlRepository(store)
        self.cannot_tell = cannot_tell
        self.calls: list[tuple[str, str, str, DesiredState]] = []
        # Wraps dc3's writer (under the lease's): a test's hook between writes.
        self.writer: Callable[[Standby], StandbyWriter] | None = None

    def __call__(
        self,
        config: object,
        lost: str,
        promoted: str,
        standby: str,
        *,
        connect: object = None,
        keys: object = None,
        confirm: Callable[[], object] | None = None,
    ) -> tuple[RepointReport, dict[TopicPartition, Copied]]:
        self.calls.append((lost, promoted, standby, self.control.directive("dc1->dc3").desired))
        report = _report(self.dc2, DC2_RUNS, self.dc3, DC3_RUNS)
        if self.cannot_tell:
            why = CannotTell(ORIGIN, "positions [3, 4) were not read")
            return replace(report, results={ORIGIN: why}), {}
        writer: StandbyWriter = self.dc3 if self.writer is None else self.writer(self.dc3)
        if confirm is not None:  # as follow_standby does
            writer = Leased(writer, confirm)
        return report, follow_all(report, self.dc2, writer, SYNCS, SIGNER, batch=4)

    def origins(self) -> list[int]:
        """The origin offsets dc3's replica holds, in position order."""
        return self.dc3.origins()


class World:
    def __init__(self, tmp_path: Path, store: StateStore, targets: tuple[str, ...]) -> None:
        runbooks = tmp_path / "runbooks"
        runbooks.mkdir()
        (runbooks / "failover.yaml").write_text(yaml.safe_dump(FAILOVER))
        self.config = _config(runbooks, targets)
        self.store = store
        self.clusters = FakeClusters("dc1", *targets)
        self.clusters["dc1"].add_topic(ORIGIN.topic)
        self.runs = RunRepository(store)
        self.control = ControlRepository(store)
        self.follower = Follower(store)
        self.tmp_path = tmp_path
        PointerRepository(store).move("dc1", None)

    def engine(self) -> Engine:
        steps = {**STEPS, StepName.FOLLOW_STANDBYS: follow_standbys_with(self.follower)}
        return Engine(
            self.config, self.store, self.tmp_path, connect=self.clusters.connect, steps=steps,
            channels=fake_channels(self.clusters),
        )  # fmt: skip

    def plan(self) -> Plan:
        runbook = load_runbook(Procedure.FAILOVER, Path(self.config.failover.runbooks_dir))
        return Plan(
            procedure=Procedure.FAILOVER, source="dc1", target="dc2", flow="dc1->dc2",
            reverse_flow=None, source_reachable=False, translation_mode="checkpoints",
            steps=runbook.planned_steps(), groups=(), groups_without_checkpoint=(),
            rpo=(PartitionRpo(ORIGIN.topic, 0, 0, 0, 0, 0, 0.0),), findings=(),
            pointer_from="dc1", pointer_to="dc2",
        )  # fmt: skip

    def fail_over(self) -> RunRecord:
        return self.engine().start(self.plan(), RunOptions())


def _step(run: RunRecord, name: StepName) -> Any:
    record = run.step(name)
    assert record is not None
    return record


def test_the_shipped_failover_runbook_follows_after_the_pointer_moved() -> None:
    """Placement: after move_pointer (the move's RTO is not held up), the hold before the
    copy; the planned procedures do not re-point (docs/three-dc.md says why)."""
    names = [s.name for s in load_runbook(Procedure.FAILOVER).steps]
    moved = names.index(StepName.MOVE_POINTER)
    assert names.index(StepName.HOLD_STANDBY_FLOWS) > moved
    assert names.index(StepName.FOLLOW_STANDBYS) == names.index(StepName.HOLD_STANDBY_FLOWS) + 1
    for planned in (Procedure.SWITCHOVER, Procedure.CUTOVER):
        assert StepName.FOLLOW_STANDBYS not in [s.name for s in load_runbook(planned).steps]


def test_two_clusters_skip_both_steps_with_why(tmp_path: Path, migrated_store: StateStore) -> None:
    world = World(tmp_path, migrated_store, ("dc2",))
    run = world.fail_over()
    assert run.state is RunState.SUCCEEDED, run.result
    for name in (StepName.HOLD_STANDBY_FLOWS, StepName.FOLLOW_STANDBYS):
        step = _step(run, name)
        assert step.state is StepState.SKIPPED
        assert step.skipped_because == "dc1 has no standby beside dc2: no other cluster to re-point"
    assert world.follower.calls == []
    assert run.result.warnings == ()


def test_a_third_cluster_is_held_then_follows_each_record_once(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    run = world.fail_over()
    assert run.state is RunState.SUCCEEDED, run.result
    held = world.control.directive("dc1->dc3")
    assert (held.desired, held.run_id) == (DesiredState.STOPPED, run.id)
    # The copy began only once the flow it replaces was held.
    assert world.follower.calls == [("dc1", "dc2", "dc3", DesiredState.STOPPED)]
    hold = _step(run, StepName.HOLD_STANDBY_FLOWS)
    assert hold.state is StepState.DONE and set(hold.detail["held"]) == {"dc3"}
    assert hold.detail["held"]["dc3"]["control_channel"] == "published"
    followed = _step(run, StepName.FOLLOW_STANDBYS)
    assert followed.detail["pending"] == {}
    assert followed.detail["followed"]["dc3"]["copied"] == 12  # origin 6..17, dc2's dupes once
    assert world.follower.origins() == list(range(18))
    held_at = {
        copy_offset(r, DC1): r.offset for r in world.follower.dc3.logs[REPLICA.topic].visible()
    }
    assert _placed(world.follower.dc3) == held_at  # dc1->dc3's syncs place every copy
    assert run.result.warnings == ()
    # The command after the run: the same follower, nothing left to copy.
    _report_again, again = world.follower(None, "dc1", "dc2", "dc3")
    assert again[ORIGIN].copied == 0 and world.follower.origins() == list(range(18))


def test_a_standby_that_does_not_answer_leaves_the_run_succeeded_with_the_command(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    world.clusters["dc3"].go_down()
    run = world.fail_over()
    assert run.state is RunState.SUCCEEDED, run.result
    pointer_step = _step(run, StepName.MOVE_POINTER)
    assert pointer_step.state is StepState.DONE
    for name in (StepName.HOLD_STANDBY_FLOWS, StepName.FOLLOW_STANDBYS):
        step = _step(run, name)
        assert step.state is StepState.DONE
        assert step.detail["pending"]["dc3"]["run_later"] == COMMAND
    assert world.follower.calls == []  # nothing copied into a standby not held
    [warning, _follow] = run.result.warnings
    assert warning.startswith("hold_standby_flows: dc3 does not follow yet") and COMMAND in warning


def test_a_standby_whose_partitions_cannot_tell_is_pending_nothing_copied(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    world.follower.cannot_tell = True
    run = world.fail_over()
    assert run.state is RunState.SUCCEEDED, run.result
    pending = _step(run, StepName.FOLLOW_STANDBYS).detail["pending"]["dc3"]
    assert "cannot tell" in pending["why"] and pending["run_later"] == COMMAND
    assert world.follower.origins() == list(range(6))
    assert any(COMMAND in w for w in run.result.warnings)


class Crash(BaseException):
    """The engine killed (kill -9): nothing after it runs, nothing is recorded."""


def test_an_engine_killed_inside_the_copy_resumes_it_and_copies_each_record_once(
    tmp_path: Path, migrated_store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed at follow_on.before_syncs (a batch's copies written into dc3, their offset syncs
    not): the run is left RUNNING at follow_standbys; ``--resume`` runs the step again, whose
    plan reads the unsynced copies by provenance - each origin offset is on dc3 once."""
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    real = failpoints.reach

    def reach(name: str) -> None:
        if name == "follow_on.before_syncs" and not getattr(reach, "fired", False):
            reach.fired = True  # type: ignore[attr-defined]
            raise Crash()
        real(name)

    monkeypatch.setattr(failpoints, "reach", reach)
    with pytest.raises(Crash):
        world.fail_over()
    [run] = world.runs.latest()
    assert run.state is RunState.RUNNING
    assert _step(run, StepName.FOLLOW_STANDBYS).state is StepState.RUNNING
    assert world.follower.origins() == list(range(10))  # the first batch copied, unsynced
    final = world.engine().resume(run.id)
    assert final.state is RunState.SUCCEEDED, final.result
    assert world.follower.origins() == list(range(18))
    held_at = {
        copy_offset(r, DC1): r.offset for r in world.follower.dc3.logs[REPLICA.topic].visible()
    }
    assert _placed(world.follower.dc3) == held_at
    followed = _step(final, StepName.FOLLOW_STANDBYS).detail["followed"]["dc3"]
    assert (followed["copied"], followed["placed"]) == (8, 4)


def test_a_standby_whose_flow_is_not_proven_stopped_gets_no_copy(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    """dc3 answers, but a live worker of dc1->dc3 does not acknowledge STOPPED (its loop is
    wedged): should it copy on, it would write beside the follow-on - nothing is copied, the
    standby is pending with the command (which refuses until the flow is held)."""
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    world.control.ack("dc1->dc3", "w1", 0, DesiredState.RUNNING)  # live, never acknowledging
    run = world.fail_over()
    assert run.state is RunState.SUCCEEDED, run.result
    hold = _step(run, StepName.HOLD_STANDBY_FLOWS).detail["pending"]["dc3"]
    assert "did not acknowledge stopped" in hold["why"] and hold["run_later"] == COMMAND
    follow = _step(run, StepName.FOLLOW_STANDBYS).detail["pending"]["dc3"]
    assert "is not held" in follow["why"]
    assert world.follower.calls == [] and world.follower.origins() == list(range(6))


class _TakenAfterFirstWrite:
    """dc3's writer; once its first write landed, another engine takes the failover lease (a
    resumed run, the copying engine frozen past its lease meanwhile)."""

    def __init__(self, dc3: Standby, store: StateStore) -> None:
        self.dc3, self.leases, self.writes = dc3, LeaseRepository(store), 0

    def begin(self) -> None:
        self.dc3.begin()

    def write(self, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
        self.writes += 1
        landed = self.dc3.write(topic, partition, records)
        if self.writes == 1:
            holder = self.leases.holder()
            assert holder is not None
            assert self.leases.take_from(holder.name, holder.owner, "engine-b", 60)
        return landed

    def commit(self) -> None:
        self.dc3.commit()

    def abort(self) -> None:
        self.dc3.abort()


def test_a_copy_whose_lease_was_taken_stops_before_its_next_write(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    """The copy confirms the run's lease before each write (Leased): once another engine holds
    it, this one writes nothing more into dc3 and its run stops with LeaseLost - not a pending
    standby, and not a copy beside the new holder's."""
    world = World(tmp_path, migrated_store, ("dc2", "dc3"))
    taken: list[_TakenAfterFirstWrite] = []

    def wrap(dc3: Standby) -> StandbyWriter:
        taken.append(_TakenAfterFirstWrite(dc3, migrated_store))
        return taken[-1]

    world.follower.writer = wrap
    with pytest.raises(LeaseLost, match="engine-b"):
        world.fail_over()
    assert [t.writes for t in taken] == [1]  # nothing written after the lease was taken
    assert world.follower.origins() == list(range(10))  # dc3's 6 and the first batch of 4
