"""Run one drill end to end: workload, steady state, fault, detection, decision, failover,
clients resumed, failback - then drills.outcome recounts, verifies and reports.

The path is the real one: ``drkit replicate`` and ``drkit monitor`` run as child processes,
the failover is drkit's engine (in this process, or as a child that gets killed), the
applications are Kafka clients, and every figure in the report is measured or recounted from
the records.  Whatever happens, the drill ends by undoing its fault and stopping what it started
(``finally``), so a failed drill leaves the clusters as it found them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from drkit.acl.rules import AclEntry
from drkit.automation.journal import AutomationJournal
from drkit.automation.standby import best_standby
from drkit.client.follow import FollowingConsumer, PointerWatcher
from drkit.config.model import Role
from drkit.control import ControlRepository
from drkit.drills import access as drill_access
from drkit.drills.environment import DrkitChild, monitor, replicator
from drkit.drills.faults import LocalFaults
from drkit.drills.numbered import encode_value
from drkit.drills.observe import await_fence
from drkit.drills.outcome import build_report, read_back
from drkit.drills.repointing import automatic_choice, manual_choice, repoint_others
from drkit.drills.report import DrillReport
from drkit.drills.running import DrillOptions, RunningDrill
from drkit.drills.sampler import Sampler
from drkit.drills.scenario import DecisionMode, Scenario
from drkit.drills.timeline import (
    CHECKPOINTED,
    CLIENTS_RESUMED,
    DETECTED,
    FAULT,
    POINTER_MOVED,
    RUN_FINISHED,
    RUN_STARTED,
)
from drkit.drills.workload import FollowingMember, GroupMember, Writer, stop_all
from drkit.errors import DrillFailed, DrkitError, KafkaError
from drkit.failover.engine import Engine
from drkit.failover.lease import LeaseRepository
from drkit.failover.model import Plan, Procedure, RunState, StepName
from drkit.failover.pointer import PointerRepository, pointer_key
from drkit.failover.pointer_topic import kafka_pointer_topic
from drkit.failover.results import DivergentTail
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import RunRecord, RunRepository, StepRecord
from drkit.health.evaluation import ClusterState
from drkit.kafka.admin import TopicSpec
from drkit.kafka.apps import APP_CONSUMER, AppProducer
from drkit.kafka.clients import client_settings, consumer_config
from drkit.kafka.ports import ClusterAdmin
from drkit.lag import group_lag
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.records import TopicPartition
from drkit.store.health_repo import HealthRepository
from drkit.store.models import ObserverState

log = logging.getLogger("drkit.drill")

# The timeline's event of the applications' watcher reading a new pointer record.
POINTER_READ = "pointer_read"
# A lagging standby's replication stopped; the choice among the standbys made.
STANDBY_STOPPED = "standby_stopped"
STANDBY_CHOSEN = "standby_chosen"


def _wall(at: datetime | None) -> float | None:
    return at.timestamp() if at is not None else None


class DrillRunner(RunningDrill):
    """Drives one drill (its state: drills.running)."""

    def __init__(self, scenario: Scenario, options: DrillOptions) -> None:
        super().__init__(scenario, options)
        self.faults = LocalFaults(options.local, f"drkit-{self.env.id}")
        self.children: list[DrkitChild] = []
        self._mover: threading.Thread | None = None
        self.granted: dict[str, frozenset[AclEntry]] = {}  # ACLs the drill added, per cluster
        self._move_error: BaseException | None = None
        self.watcher: PointerWatcher | None = None  # the applications' view of the pointer
        self.standby_replicators: dict[str, DrkitChild] = {}  # per other standby (its name)

    # -- the drill ----------------------------------------------------------------------------

    def run(self) -> DrillReport:
        started = datetime.now(UTC)
        try:
            try:
                self._prepare()
                self._move()
                self._await_pointer()
                self._resume_clients()
                self._await_run()
                if self.scenario.move.failback:
                    self._failback()
                if self.scenario.standbys:
                    self._repoint()
            finally:
                self._stop_everything()
            return build_report(self, started)
        finally:
            self._release_access()

    def _prepare(self) -> None:
        s = self.scenario
        for alias in (s.source, s.target):
            self.faults.require(alias)
        source = self.admin(s.source)
        source.create_topics(
            [TopicSpec(self.env.topic(t.name), t.partitions) for t in s.workload.topics]
        )
        self.timeline.add("topics_created", ", ".join(t.name for t in s.workload.topics))
        self.granted = drill_access.grant(self.env.config, self.env.directory, self.options.connect)
        if any(self.granted.values()):
            count = sum(len(entries) for entries in self.granted.values())
            self.timeline.add("roles_granted", f"{count} ACLs for the drill's role principals")
        self._start_replication()
        self.children.append(monitor(self.env))
        self.timeline.add("replication_started", f"{s.source} -> {s.target}")
        for load in s.workload.topics:
            writer = Writer(self.endpoint(s.source, Role.APP_PRODUCER), load.model_copy(
                update={"name": self.env.topic(load.name)}), self.timeline)  # fmt: skip
            self.writers.append(writer)
            writer.start()
        for group in s.workload.groups:
            member = GroupMember(
                self.endpoint(s.source, Role.APP_CONSUMER),
                group.model_copy(update={"name": self.env.group(group.name)}),
                self.env.topic(group.topic),
            )
            self.source_members.append(member)
            member.start()
        self.timeline.add("workload_started", f"{len(self.writers)} writers, "
                          f"{len(self.source_members)} groups on {s.source}")  # fmt: skip
        self.sampler = Sampler(
            self.endpoint(s.target),
            [self.replica(load.name) for load in s.workload.topics],
            lambda: sum(w.acked_count for w in self.writers),
            self.timeline.since_start,
            s.sample_interval_s,
            self.options.connect,
        )
        self.sampler.start()
        self.wait(s.workload.warmup_s, "warming up")
        self.until(self._replicating, 120, "replication copying the workload")
        self._await_checkpoints()
        self._standby_clients()
        self._workload_running()

    def _start_replication(self) -> None:
        """``drkit replicate`` of the drill's flows; with other standbys, each standby's flow
        in a process of its own (so one can stop while the others copy on)."""
        s = self.scenario
        if not s.standbys:
            self.children.append(replicator(self.env))
            return
        own = (f"{self.src}->{self.dst}", f"{self.dst}->{self.src}")
        self.children.append(replicator(self.env, own))
        for standby in s.standbys:
            flow = f"{self.src}->{self.env.alias(standby.cluster)}"
            child = replicator(self.env, (flow,), f"replicate-{standby.cluster}")
            self.children.append(child)
            self.standby_replicators[standby.cluster] = child

    def _workload_running(self) -> None:
        """The workload runs ``fault.at_s``; a standby told to lag has its replication stopped
        its ``stopped_before_fault_s`` before the end (the failover's choice then knows it
        behind: its evidence older by that much)."""
        s = self.scenario
        left = s.fault.at_s
        lagging = [x for x in s.standbys if x.stopped_before_fault_s > 0]
        for standby in sorted(lagging, key=lambda x: -x.stopped_before_fault_s):
            self.wait(left - standby.stopped_before_fault_s, "workload running")
            left = standby.stopped_before_fault_s
            self.standby_replicators[standby.cluster].stop()
            self.timeline.add(STANDBY_STOPPED, f"{standby.cluster}'s replication stopped, "
                              f"{left:g}s before the fault")  # fmt: skip
        self.wait(left, "workload running")

    def _replicating(self) -> bool:
        sampler = self.sampler
        return sampler is not None and sampler.copied_total() > 0

    def _await_checkpoints(self) -> None:
        """Until every workload group has a checkpoint on the target: the steady state a drill
        breaks.  A fault before the first checkpoint round completes (slow on a busy machine:
        SASL handshakes, the first read of the offset syncs) would measure the flow's start-up
        - every group re-reading from the replica's start - not the loss of a running one."""
        groups = [self.env.group(g.name) for g in self.scenario.workload.groups]
        store = CheckpointStore(
            self.endpoint(self.scenario.target), self.topology.checkpoints_topic
        )
        try:
            self.until(
                lambda: not store.refresh(5.0).unchecked(groups),
                120,
                "a checkpoint of every group on the target",
            )
        finally:
            store.close()
        self.timeline.add(CHECKPOINTED, f"{len(groups)} groups on {self.scenario.target}")

    def _standby_clients(self) -> None:
        """The groups' next home: per group a member that follows the pointer (drkit.client:
        the pointer topic on both clusters, signed with the drill store's pointer key), on no
        cluster until a pointer record names one.  When the failover writes it, they join
        their groups there at the translated offsets on their own - the drill starts nothing
        after the move, as applications following the pointer would not need it to."""
        s = self.scenario
        endpoints = {c: self.endpoint(c, Role.APP_CONSUMER) for c in (s.source, s.target)}
        watcher = PointerWatcher(
            {e.alias: client_settings(e) for e in endpoints.values()},
            pointer_key(self.env.config, self.env.store),
            topic=self.env.config.failover.pointer_topic,
        ).start(wait_s=5.0)
        self.watcher = watcher
        watcher.listen(lambda record: self.timeline.add(
            POINTER_READ, f"epoch {record.epoch}: {record.cluster}"))  # fmt: skip
        for group in s.workload.groups:
            name = self.env.group(group.name)
            topics = {
                self.src: [self.env.topic(group.topic)],
                self.dst: [self.replica(group.topic)],
            }
            clusters = {e.alias: consumer_config(e, name, APP_CONSUMER) for e in endpoints.values()}

            def following(
                group_id: str,
                topics: dict[str, list[str]] = topics,
                clusters: dict[str, dict[str, Any]] = clusters,
            ) -> FollowingConsumer:
                return FollowingConsumer(watcher, group_id, topics.__getitem__, clusters=clusters)

            member = FollowingMember(
                endpoints[s.target], group.model_copy(update={"name": name}),
                self.replica(group.topic), following,
            )  # fmt: skip
            self.target_members.append(member)
            member.start()
        self.timeline.add("clients_waiting", f"{len(self.target_members)} groups following "
                          "the pointer")  # fmt: skip

    def _move(self) -> None:
        """Break the source (or stop the applications, for a planned move) and start the move
        in the background: clients follow as soon as the pointer moves, as they would."""
        s = self.scenario
        if s.fault.divergent_records:
            self._diverge()
        if s.planned:
            stop_all(self.source_members)
            self.timeline.add("applications_stopped", f"consumers left {s.source}")
            self._in_background(self._run_engine)
            return
        # Detection is measured from a transition the fault causes: a monitor that already
        # holds the source UNAVAILABLE (probes slow under load while the drill warmed up) would
        # never make one.  It must see the source reachable (HEALTHY or DEGRADED) first.
        self.until(self._source_reachable, 60, f"the monitor seeing {s.source} reachable first")
        self.fault_how = self.faults.inject(s.fault.kind, s.source)
        self.timeline.add(FAULT, self.fault_how)
        self.until(self._detected, 120, f"the monitor declaring {s.source} unavailable")
        # The applications on the lost cluster are abandoned, not shut down: their clients may
        # hang on it, and the move must not wait for them.
        for writer in self.writers:
            writer.stop(wait_s=0)
        for member in self.source_members:
            member.stop(wait_s=0)
        if s.move.decision is DecisionMode.AUTOMATIC:
            self._in_background(self._await_automatic_run)
        else:
            if s.move.decision_delay_s:
                self.wait(s.move.decision_delay_s, "the operator deciding")
            self._in_background(self._run_engine)

    def _in_background(self, move: Callable[[], None]) -> None:
        def run() -> None:
            try:
                move()
            except BaseException as err:  # handed to the drill's thread by _await_run
                self._move_error = err

        self._mover = threading.Thread(target=run, daemon=True, name="drill-move")
        self._mover.start()

    def _await_pointer(self) -> None:
        """Until the run moved the pointer (clients belong on the target from then on)."""
        runs = RunRepository(self.env.store)

        def moved() -> bool:
            if self._move_error is not None:
                raise DrillFailed(f"the move failed: {self._move_error}") from self._move_error
            for run in runs.latest(5):
                step = run.step(StepName.MOVE_POINTER)
                if (
                    run.procedure is not Procedure.FAILBACK
                    and step is not None
                    and (step.state.value == "done" and step.finished_at is not None)
                ):
                    where = f"run {run.id}: clients belong on {self.scenario.target}"
                    self.timeline.add(POINTER_MOVED, where, at_wall=self._moved_at(run, step))
                    return True
            return False

        self.until(moved, 300, "the failover moving the pointer")
        stop_all(self.writers)

    def _moved_at(self, run: RunRecord, step: StepRecord) -> float | None:
        """When the run moved the pointer in the store: clients can follow from then on, so
        the client resume is measured from it - the rest of the step (the pointer written to
        the clusters' topics, the old primary's protections) is the clients' time too.  The
        step's end when the pointer moved again since."""
        pointer = PointerRepository(self.env.store).get()
        if pointer is not None and pointer.run_id == run.id:
            at = pointer.updated_at
            return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()
        return _wall(step.finished_at)

    def _await_run(self) -> None:
        assert self._mover is not None
        while self._mover.is_alive():
            self.say("the failover run finishing", None)
            self._mover.join(0.5)
        if self._move_error is not None:
            raise DrillFailed(f"the move failed: {self._move_error}") from self._move_error

    def _diverge(self) -> None:
        """Replication catches up and dies; then the source takes records the target never
        gets (exactly ``divergent_records`` per partition: the divergent tail)."""
        stop_all(self.writers)
        sampler = self.sampler
        assert sampler is not None
        written = sum(w.acked_count for w in self.writers)
        self.until(lambda: sampler.copied_total() >= written, 60, "replication catching up")
        replication = self.children[0]
        replication.kill()
        self.timeline.add("replication_killed", "the source now diverges from the target")
        count = self.scenario.fault.divergent_records
        for writer in self.writers:
            partitions = writer.load.partitions
            producer = AppProducer(
                self.endpoint(self.scenario.source, Role.APP_PRODUCER), writer.load.name, False
            )
            try:
                for partition in range(partitions):
                    payloads = [
                        (None, encode_value(writer.seq + i, writer.load.value_bytes))
                        for i in range(count)
                    ]
                    writer.seq += count
                    producer.send(payloads, partition=partition)
            finally:
                producer.close()
        self.timeline.add("divergent_writes", f"{count} records per partition after the split")

    def _source_reachable(self) -> bool:
        _now, states = HealthRepository(self.env.store).observer_states(within_s=10.0)
        return observed_reachable(states, self.src)

    def _detected(self) -> bool:
        fault = self.timeline.first(FAULT)
        assert fault is not None  # asked only once the fault is injected
        for transition in HealthRepository(self.env.store).recent_transitions(50):
            if (
                transition.subject_kind == "cluster"
                and transition.subject == self.src
                and transition.to_state == ClusterState.UNAVAILABLE.value
            ):
                at = transition.at.timestamp()
                if at >= self.timeline.started + fault.at_s:
                    self.timeline.add(DETECTED, "monitor: " + transition.to_state, at_wall=at)
                    return True
        return False

    def _run_engine(self) -> None:
        s = self.scenario
        engine = Engine(
            self.env.config.as_role(Role.ENGINE),
            self.env.store,
            self.env.directory,
            role="drill",
            connect=self.options.connect,
            pointer_topics=kafka_pointer_topic,
        )
        procedure = s.move.procedure
        if s.move.engine_killed_after is not None:
            self._run_engine_killed(engine)
            return
        if s.standbys:
            plan = self._chosen_plan(engine)
        else:
            plan = engine.plan(procedure, self.src, self.dst, RunOptions())
        if plan.blockers:
            raise DrillFailed("the plan is blocked: " + "; ".join(b.message for b in plan.blockers))

        def started(run: RunRecord) -> None:
            self.timeline.add(RUN_STARTED, f"run {run.id} ({procedure.value})")

        record = engine.start(plan, RunOptions(), requested_by="drill", on_started=started)
        self._finished(record)

    def _chosen_plan(self, engine: Engine) -> Plan:
        """The operator's decision with several standbys: every standby planned and the one
        ``drkit failover --from`` without ``--to`` would promote chosen, the same way.  A
        choice other than the scenario's target is reported (standby_chosen fails) and the
        drill moves to its target, as an operator naming it with ``--to`` would."""
        plans, choice = best_standby(engine, self.src, RunOptions())
        self.standby_choice = manual_choice(choice, self.dst, self.env.cluster_of)
        self.timeline.add(STANDBY_CHOSEN, self.standby_choice.summary)
        if self.standby_choice.chosen != self.scenario.target:
            self.notes.append(
                f"the standby choice named {self.standby_choice.chosen or 'none'}, not the "
                f"scenario's target {self.scenario.target}: the drill moved to its target"
            )
        if self.dst in plans:
            return plans[self.dst]
        return engine.plan(Procedure.FAILOVER, self.src, self.dst, RunOptions())

    def _run_engine_killed(self, engine: Engine) -> None:
        s = self.scenario
        step = s.move.engine_killed_after
        assert step is not None
        command = [s.move.procedure.value, "--from", self.src, "--to", self.dst, "--yes"]
        child = DrkitChild(self.env, "failover", *command, "--config", str(self.env.config_path))
        runs = RunRepository(self.env.store)

        def step_done() -> RunRecord | None:
            for run in runs.latest(5):
                done = run.step(step)
                if done is not None and done.state.value in ("done", "skipped"):
                    return run
            return None

        self.until(lambda: step_done() is not None or not child.running, 180,
                   f"the engine finishing {step.value}")  # fmt: skip
        child.kill()
        latest = runs.latest(1)
        run = step_done() or (latest[0] if latest else None)
        if run is None:
            raise DrillFailed("the failover engine exited before it recorded a run")
        self.timeline.add(RUN_STARTED, f"run {run.id} ({run.procedure.value})",
                          at_wall=run.started_at.timestamp())  # fmt: skip
        self.timeline.add("engine_killed", f"kill -9 after {step.value}")
        if run.state is RunState.SUCCEEDED:
            self.notes.append(f"the engine finished before it could be killed after {step.value}")
            self._finished(run)
            return
        # A dead engine's run is resumed by the first to see its lease expire: this drill, or the
        # monitor's maintenance job (which resumes interrupted runs on its own).
        self.until(lambda: self._resumable_or_over(runs, run.id), 60, "the lease expiring")
        resumed_by = "the monitor"
        current = runs.get(run.id) or run
        if current.state.in_progress:
            try:
                current = engine.resume(run.id)
                resumed_by = "a new engine"
            except DrkitError:  # the monitor took the run (and its lease) first
                self.until(
                    lambda: not (runs.get(run.id) or run).state.in_progress,
                    120,
                    "the monitor finishing the resumed run",
                )
                current = runs.get(run.id) or run
        self.timeline.add("engine_resumed", f"run {run.id} resumed by {resumed_by}")
        self._finished(current)

    def _resumable_or_over(self, runs: RunRepository, run_id: int) -> bool:
        current = runs.get(run_id)
        if current is None or not current.state.in_progress:
            return True
        holder = LeaseRepository(self.env.store).holder()
        return holder is None or holder.expired

    def _await_automatic_run(self) -> None:
        runs = RunRepository(self.env.store)

        def finished() -> RunRecord | None:
            for run in runs.latest(5):
                if not run.state.in_progress:
                    return run
            return None

        self.until(lambda: finished() is not None, 180, "the monitor failing over by itself")
        run = finished()
        assert run is not None
        self.timeline.add(RUN_STARTED, f"run {run.id} started by {run.requested_by}",
                          at_wall=run.started_at.timestamp())  # fmt: skip
        if self.scenario.standbys:
            decisions = AutomationJournal(self.env.store).decisions(100)
            self.standby_choice = automatic_choice(run, decisions, self.env.cluster_of)
            self.timeline.add(STANDBY_CHOSEN, self.standby_choice.summary)
        self._finished(run)

    def _finished(self, run: RunRecord) -> None:
        self.run_record = run
        if run.state is not RunState.SUCCEEDED:
            error = run.result.error if run.result.error is not None else run.state.value
            raise DrillFailed(f"failover run {run.id} ended {run.state.value}: {error}")
        self.timeline.add(RUN_FINISHED, f"run {run.id} succeeded",
                          at_wall=_wall(run.finished_at))  # fmt: skip

    def _resume_clients(self) -> None:
        """Until every group processed records on the target: its following members switched
        there when the pointer record reached them (:meth:`_standby_clients`)."""
        s = self.scenario
        self.until(self._all_resumed, 180, "consumer groups resuming on " + s.target)
        last = max(self.resumed.values(), default=time.time())
        self.timeline.add(CLIENTS_RESUMED, f"{len(self.resumed)} groups on {s.target}",
                          at_wall=last)  # fmt: skip
        self.until(self._all_drained, 300, "consumer groups reading the replica to its end")

    def _failback(self) -> None:
        """The source returns (fenced by the monitor), replication runs again (its reverse flow
        is active now), and the engine fails back, exporting the source's divergent tail."""
        s = self.scenario
        self.say(f"{s.source} returning", None)
        undone = self.faults.restore()
        self.timeline.add("fault_undone", "; ".join(undone))
        if not await_fence(self.env, self.src, timeout_s=60):
            raise DrillFailed(f"the monitor did not fence {s.source} within 60s of its return")
        self.failover_records = read_back(self)
        self.children.insert(0, replicator(self.env))
        control = ControlRepository(self.env.store)
        back = f"{self.dst}->{self.src}"

        def replicating_back() -> bool:
            epoch = control.directive(back).epoch
            return any(a.epoch >= epoch and a.age_s < 5 for a in control.acks(back))

        self.until(replicating_back, 60, f"a worker running {back}")
        # A failback is a planned move: the applications leave the cluster they are on first
        # (runbooks/switchover.md).  Left running, they would read the divergent tail the original
        # direction copies onto the replica afterwards - re-reads no move caused.
        stop_all(self.target_members)
        self.timeline.add("applications_stopped", f"consumers left {s.target}")
        export = self.env.directory / "divergent-tail.jsonl"
        options = RunOptions(export_file=str(export))
        engine = Engine(
            self.env.config.as_role(Role.ENGINE),
            self.env.store,
            self.env.directory,
            role="drill",
            connect=self.options.connect,
            pointer_topics=kafka_pointer_topic,
        )
        plan = engine.plan(Procedure.FAILBACK, self.dst, self.src, options)
        if plan.blockers:
            raise DrillFailed("failback blocked: " + "; ".join(b.message for b in plan.blockers))

        def started(run: RunRecord) -> None:
            self.timeline.add("failback_started", f"run {run.id}")

        run = engine.start(plan, options, requested_by="drill", on_started=started)
        if run.state is not RunState.SUCCEEDED:
            raise DrillFailed(f"failback run {run.id} ended {run.state.value}")
        tail = DivergentTail.of(run)
        self.failback_record = run
        self.timeline.add("failback_finished", f"run {run.id}: {tail.records if tail else 0} "
                          f"divergent records exported to {export.name}",
                          at_wall=_wall(run.finished_at))  # fmt: skip

    def _repoint(self) -> None:
        """Once the applications run on the promoted cluster: every other standby follows it
        (the source is gone, so their own flows' replication is stopped first)."""
        for child in self.standby_replicators.values():
            child.stop(timeout_s=20)
        self.repointed = repoint_others(self)

    @cached_property
    def target_admin(self) -> ClusterAdmin:
        """One admin client for the polling of the target (clients resuming, draining)."""
        return self.admin(self.scenario.target)

    def _lag(self, member: GroupMember) -> int:
        admin = self.target_admin
        ends = admin.topic_offsets(member.topic, isolation="read_committed")
        committed = admin.group_offsets(member.load.name).offsets
        return sum(
            group_lag(committed.get(TopicPartition(member.topic, p), 0), end)
            for p, (_, end) in ends.items()
        )

    def _all_resumed(self) -> bool:
        for member in self.target_members:
            if member.load.name in self.resumed:
                continue
            if member.first_poll_at is not None:
                self.resumed[member.load.name] = member.first_poll_at
            elif self._lag(member) == 0:  # nothing left to read: resumed at the end
                self.resumed[member.load.name] = time.time()
        return len(self.resumed) == len(self.target_members)

    def _all_drained(self) -> bool:
        return all(self._lag(member) == 0 for member in self.target_members)

    def _stop_everything(self) -> None:
        # At once: consumers stuck on the lost cluster share one wait.
        stop_all([*self.source_members, *self.target_members, *self.writers])
        if self.watcher is not None:
            self.watcher.close()
        if self.sampler is not None:
            self.sampler.stop()
        try:
            undone = self.faults.restore()
            if undone:
                self.timeline.add("fault_undone", "; ".join(undone))
        finally:
            # The monitor applies pending fences once the source is back: give it the chance.
            if self.run_record is not None:
                await_fence(self.env, self.src, timeout_s=30)
            for child in reversed(self.children):
                child.stop(timeout_s=20)  # a worker stuck on a cut link is killed

    def _release_access(self) -> None:
        """Once the report's checks are done (one writes to the fenced source): the drill's
        grants, its flows' standby guards and its runs' fences go."""
        try:
            drill_access.release(
                self.env.config,
                self.granted,
                self.env.store,
                self.env.directory,
                self.options.connect,
            )
        except KafkaError as err:  # reported, never masking the drill's own outcome
            log.warning("the drill's ACLs could not all be removed: %s", err)


REACHABLE_STATES = frozenset({ClusterState.HEALTHY.value, ClusterState.DEGRADED.value})


def observed_reachable(states: Sequence[ObserverState], cluster: str) -> bool:
    """Every fresh observer state of ``cluster`` is HEALTHY or DEGRADED (and there is one):
    from there, losing the cluster is a transition to UNAVAILABLE.  DEGRADED counts: a canary
    slow on a busy machine (SASL handshakes per probe) must not hold the drill back."""
    mine = [state.state for state in states if state.cluster == cluster]
    return bool(mine) and all(state in REACHABLE_STATES for state in mine)
