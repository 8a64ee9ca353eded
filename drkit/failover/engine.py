"""The failover engine: executes a plan as a durable, resumable, leased run.

``plan()`` gathers a snapshot and returns the pure plan (nothing changes; an unfinished run is
a blocker).  ``start()`` takes the failover lease, re-checks the plan's premise under it,
records the run and executes the steps in runbook order.  ``resume()`` continues an unfinished
run in its direction - forward from its first step that is not done, or on with its rollback -
but only after re-checking that its premise still holds (drkit.failover.premise); otherwise the
run is marked ABANDONED with the reason.  ``abandon()`` gives a run up on an operator's word.
The run an engine starts from its own plan gets what planning left (drkit.failover.run_session:
the target's readers, the plan's translations, the planned states); a resumed run's session
reads the same values back from the store.  The run's result is a RunResult
(drkit.failover.run_result), recorded field by field.

The lease (drkit.failover.lease) fences everything the run does: store writes (steps, run
state, pointer, directives, fences) are conditional on the lease token, and each side effect on
a cluster follows a synchronous renewal.  An engine that lost its lease - frozen past it and
woken after another took over - records nothing, rolls nothing back and exits (LeaseLost, 5)
naming who holds the lease now.

Every step records its intent (RUNNING, with its start time) before it acts, its outcome after.
A failure before the runbook's ``rollback_before`` step rolls a planned move back: the run turns
ROLLING_BACK (a crash now resumes the rollback, never the move), and the rollback step of every
step that *started* - the failed one too, since it may have half-applied - runs in reverse
order; then ROLLED_BACK.  A rollback step that fails leaves the run FAILED in the rollback
direction (``--resume`` continues the rollback).  Failures after the pointer moved - and every
failure of an unplanned failover - leave the run FAILED, to be resumed once the cause is fixed.

Exit codes (owned by the error types): 0 done, 1 a step failed (resumable), 2 bad input,
4 blocked by the plan, 5 the lease is held by another run (or was lost), 6 rolled back,
7 vetoed by a hook, 8 abandoned (its premise no longer held).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from drkit import clock
from drkit.config.loader import flow_between
from drkit.config.model import DrkitConfig, FlowConfig, TracingConfig
from drkit.control.channel import ChannelFactory
from drkit.errors import ConfigError, DrkitError, ExitCode, LeaseLost, Problem
from drkit.failover.context import (
    ProgressCallback,
    ProgressReaders,
    StepContext,
    StepFailed,
    StepOutcome,
    progress_topic_reader,
)
from drkit.failover.fences import FenceRepository
from drkit.failover.hooks import HookExecutor, HookOutcome, hooks_for, run_hook, run_hooks
from drkit.failover.lease import (
    MAINTENANCE_TTL_S,
    Lease,
    LeaseHeld,
    LeaseKeeper,
    LeaseRepository,
    is_maintenance,
    unique_owner,
)
from drkit.failover.model import (
    Direction,
    Finding,
    Plan,
    Procedure,
    RunState,
    Severity,
    StepName,
    StepState,
)
from drkit.failover.plan import make_plan
from drkit.failover.pointer import PointerRepository
from drkit.failover.pointer_topic import PointerTopics
from drkit.failover.premise import RunFacts, WorldFacts, broken_premise, pointer_moved
from drkit.failover.reconcile import Reconciler, RegistryFactory
from drkit.failover.results import Translation
from drkit.failover.run_result import Abandoned, RunOptions, RunResult
from drkit.failover.run_session import RunSession
from drkit.failover.runbook import Runbook, load_runbook
from drkit.failover.runs import (
    HOOKS_AFTER,
    HOOKS_BEFORE,
    PENDING_HOOKS,
    RunRecord,
    RunRepository,
    StepRecord,
    failure_detail,
    split_rows,
)
from drkit.failover.snapshot import TargetReaders, gather, schema_facts, sync_signer
from drkit.failover.steps import STEPS, Step
from drkit.failover.steps.offsets import moved_on_source
from drkit.gc_pause import collection_paused
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, prewarm
from drkit.store.db import StateStore
from drkit.store.flow_keys import keys_of
from drkit.store.health_repo import HealthRepository
from drkit.tracing import RunTracer

log = logging.getLogger(__name__)


def hooks_pending(step: StepRecord) -> bool:
    """Whether a done step's after-hooks were recorded pending and never ran (its engine was
    cut off in between): the resume runs them."""
    return step.after_hooks_pending


class PlanBlocked(DrkitError):
    """The plan has blockers; nothing was changed."""

    exit_code = ExitCode.BLOCKED


class RolledBack(DrkitError):
    """A planned move failed and was undone: the source is primary again."""

    exit_code = ExitCode.ROLLED_BACK


class Vetoed(DrkitError):
    """A ``before`` hook vetoed a step."""

    exit_code = ExitCode.VETOED


class RunFailed(DrkitError):
    """A step failed; the run is FAILED and resumable."""

    exit_code = ExitCode.FAILED


class RunAbandoned(DrkitError):
    """An interrupted run's premise no longer holds: it was marked ABANDONED, not resumed."""

    exit_code = ExitCode.ABANDONED


# How long a resume waits for the source's committed offsets before it keeps the recorded
# translation (a source that does not answer cannot have told its consumers anything newer).
SOURCE_GROUPS_TIMEOUT_S = 10.0


class Engine:
    """Plans and runs procedures for one config and state store.

    ``role`` names the actor in the lease's owner (made unique per engine: two engines in one
    process, or two processes with one pid, are never the same owner).  ``connect`` reaches a
    cluster's admin API, ``steps`` maps step names to implementations, ``leases`` is the lease
    repository and ``channels`` gives each flow's control channel (tests inject fakes, stalls
    and failures through these); ``pointer_topics``: the clusters' pointer topics the
    ``move_pointer`` step writes the pointer to for clients (the edges pass
    ``drkit.failover.pointer.kafka_pointer_topic``; None: the store only).
    """

    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        state_dir: Path,
        progress: ProgressCallback | None = None,
        role: str = "engine",
        *,
        connect: AdminFactory,
        steps: Mapping[StepName, Step] | None = None,
        leases: LeaseRepository | None = None,
        channels: ChannelFactory | None = None,
        run_hook: HookExecutor = run_hook,
        registries: RegistryFactory | None = None,
        progress_readers: ProgressReaders = progress_topic_reader,
        pointer_topics: PointerTopics | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.state_dir = state_dir
        self.progress: ProgressCallback = progress or (lambda _message, _fraction: None)
        self.owner = unique_owner(role)
        self.connect = connect
        self.steps: Mapping[StepName, Step] = steps if steps is not None else STEPS
        self.runs = RunRepository(store)
        self.leases = leases if leases is not None else LeaseRepository(store)
        self.channels = channels
        self.run_hook = run_hook  # how one hook is run (the simulation records instead)
        self.registries = registries  # schema registries (None: over HTTP)
        self.progress_readers = progress_readers  # flows' progress on their targets
        self.pointers = PointerRepository(store)
        # Where move_pointer writes the pointer for clients (None: the store only).
        self.pointer_topics = pointer_topics
        self._runbooks: dict[Procedure, Runbook] = {}
        # Per flow, what its plans leave the run that executes one (drkit.failover.run_session):
        # the readers of drkit's topics on the target - the translation then reads only what was
        # appended since - and the translations, reused for every group whose inputs did not
        # change since.
        self._given: dict[str, RunSession] = {}
        # Each flow's offset-sync key (drkit/signing.py): syncs that fail it are ignored.
        self._keys: Callable[[str], bytes] = keys_of(config, store)
        self._tracer = RunTracer(TracingConfig())  # the executing run's (see _execute)

    @property
    def ttl_s(self) -> float:
        return self.config.failover.lease_ttl_s

    # -- planning -----------------------------------------------------------------------------

    def runbook(self, procedure: Procedure) -> Runbook:
        """The procedure's runbook, read once per engine (a run reads it at every step)."""
        found = self._runbooks.get(procedure)
        if found is None:
            directory = self.config.failover.runbooks_dir
            found = load_runbook(procedure, Path(directory) if directory else None)
            self._runbooks[procedure] = found
        return found

    def plan(self, procedure: Procedure, source: str, target: str, options: RunOptions) -> Plan:
        """The plan for moving from ``source`` to ``target`` now; changes nothing.  An unfinished
        run (to resume or abandon first) is one of its blockers."""
        flow = flow_between(self.config, source, target)
        # Group requests run in a helper process (drkit.kafka.isolated): start the target's
        # while the snapshot is read, not when the first group request needs it.
        prewarm(self.connect, ClusterEndpoint(target, self.config.clusters[target]))
        given = self._given.get(flow.name)
        if given is None:
            readers = TargetReaders(
                flow,
                ClusterEndpoint(target, self.config.clusters[target]),
                sync_signer(self._keys, flow.name),
            )
            given = self._given[flow.name] = RunSession(readers)
        with collection_paused():  # millions of acyclic objects at 10,000 groups
            return self._plan(procedure, flow, given, options)

    def _plan(
        self, procedure: Procedure, flow: FlowConfig, given: RunSession, options: RunOptions
    ) -> Plan:
        pointer = self.pointers.get()
        snapshot = gather(
            self.config,
            flow,
            procedure,
            pointer.cluster if pointer else None,
            options.force,
            list(options.groups) if options.groups is not None else None,
            readers=given.readers,
            keys=self._keys,
            connect=self.connect,
        )
        if options.groups is None:  # the flow's groups: the monitor may know more of them
            seen = HealthRepository(self.store).groups_seen(flow.name)
            snapshot = replace(snapshot, groups_seen=tuple(sorted(seen)))
        snapshot = replace(snapshot, schemas=schema_facts(self.config, flow))
        plan = make_plan(snapshot, self.runbook(procedure), given.memo)
        extra = self._unfinished_findings() + self._fenced_by_failover(procedure, flow.target)
        return replace(plan, findings=plan.findings + extra)

    def _fenced_by_failover(self, procedure: Procedure, target: str) -> tuple[Finding, ...]:
        """A move to a cluster an unplanned failover fenced skips its divergent tail - records
        it took that the other side never got: only failback captures them before the fence is
        lifted.  An unplanned failover there is blocked too: when the current primary is gone
        and failback cannot run, an operator who accepts the tail as it is opens the fence by
        hand first (``drkit fences lift --cluster X --even-if-standby``)."""
        if procedure not in (Procedure.SWITCHOVER, Procedure.CUTOVER, Procedure.FAILOVER):
            return ()
        fenced_by = FenceRepository(self.store).fenced_by_runs(target)
        failovers = sorted(
            run.id
            for run_id in fenced_by
            if (run := self.runs.get(run_id)) is not None and run.procedure is Procedure.FAILOVER
        )
        if not failovers:
            return ()
        return (
            Finding(
                Severity.BLOCKER,
                "target_fenced_by_failover",
                f"{target} was fenced by failover run(s) {', '.join(map(str, failovers))}: it may "
                f"hold records nobody replicated - 'drkit failback --to {target}' captures them "
                "before it takes writes again (if the current primary is gone: accept them as "
                f"they are with 'drkit fences lift --cluster {target} --even-if-standby -m ...', "
                "then fail over)",
            ),
        )

    def _unfinished_findings(self, own: Lease | None = None) -> tuple[Finding, ...]:
        """A blocker per run that did not end - except one a live engine is executing now (its
        lease answers for it: LeaseHeld, another failover is in progress).  Asked under the
        caller's ``own`` lease, no other engine is live: every unfinished run blocks (the
        caller's lease once hid a dead engine's run, and a new run started beside it)."""
        holder = self.leases.holder()
        live = holder is not None and not holder.expired
        if own is not None and holder is not None and holder.token == own.token:
            live = False
        return tuple(
            Finding(
                Severity.BLOCKER,
                "unfinished_run",
                f"run {run.label()} is unfinished ({_where(run)}): resume it with "
                f"'drkit failover --resume {run.id}' or give it up with "
                f"'drkit failover abandon {run.id} --reason ...'",
            )
            for run in self.runs.unfinished()
            if not (live and run.state.in_progress)
        )

    # -- running ------------------------------------------------------------------------------

    def start(
        self,
        plan: Plan,
        options: RunOptions,
        requested_by: str = "cli",
        reason: str = "",
        on_started: Callable[[RunRecord], None] | None = None,
        recheck: Callable[[], str | None] | None = None,
    ) -> RunRecord:
        """Record and execute ``plan``; raises PlanBlocked when it has blockers.

        ``on_started`` is called with the new run once it holds the lease and is recorded,
        before its first step (so "failover started" is said once, by the run that started).
        ``recheck`` is called under the lease before anything is recorded: a reason it returns
        blocks the run (automation decides again there - its decision may be stale).
        """
        if plan.blockers:
            raise PlanBlocked("the plan is blocked: " + "; ".join(f.message for f in plan.blockers))
        keeper = self._keeper(self._acquire())
        try:
            self._premise_of_new_run(plan, keeper.lease)
            stale = recheck() if recheck is not None else None
            if stale is not None:
                raise PlanBlocked(f"decided again under the lease: {stale}")
            with collection_paused():  # the plan's rows: 500,000 dicts at 10,000 groups
                run = self.runs.guarded(keeper).create(plan, requested_by, reason)
            self.runs.guarded(keeper).merge_result(
                run.id, RunResult(options=options, direction=Direction.FORWARD)
            )
        except BaseException:
            self._release(keeper.lease)
            raise
        if on_started is not None:
            on_started(run)
        try:
            states = {g.group: g.target_state for g in plan.groups}
            session = self._session(run).for_run(states)
            return self._execute(run.id, keeper, options, Direction.FORWARD, session)
        finally:
            self.close_readers()

    def close_readers(self) -> None:
        """Close the readers plans left open (a run closes them when it ends)."""
        given, self._given = self._given, {}
        for session in given.values():
            if session.readers is not None:
                session.readers.close()

    def _session(self, run: RunRecord) -> RunSession:
        """What this engine's plans left for ``run``'s flow (nothing: a session that reads
        everything back from the stored run)."""
        flow = flow_between(self.config, run.source, run.target)
        return self._given.get(flow.name) or RunSession()

    def _premise_of_new_run(self, plan: Plan, own: Lease) -> None:
        """Under the lease: the plan is still about the world as it is."""
        # The plan was made before the lease: if another run moved the pointer in between (two
        # monitors deciding at once, two operators), this plan is stale - never run it.
        pointer = self.pointers.get()
        now_active = pointer.cluster if pointer is not None else None
        if now_active != plan.pointer_from:
            was = plan.pointer_from or "unset"
            raise PlanBlocked(
                f"the active cluster changed since the plan was made ({was} -> {now_active}); "
                "plan again"
            )
        unfinished = self._unfinished_findings(own)
        if unfinished:
            raise PlanBlocked("; ".join(f.message for f in unfinished))

    def premise(self, run: RunRecord) -> str | None:
        """Why ``run`` must not be resumed any more (None: it still may be)."""
        pointer = self.pointers.get()
        facts = RunFacts(
            run.id, run.procedure, run.source, run.target, run.state, run.pointer_from,
            pointer_moved({s.name: s.state for s in run.steps}),
            run.direction is Direction.ROLLBACK,
        )  # fmt: skip
        world = WorldFacts(
            pointer.cluster if pointer else None,
            pointer.run_id if pointer else None,
            tuple(r.label() for r in self.runs.created_after(run.id)),
            any(f.source == run.source and f.target == run.target for f in self.config.flows),
        )
        return broken_premise(facts, world)

    def resume(self, run_id: int) -> RunRecord:
        """Continue an unfinished run in its direction once its premise is re-checked under the
        lease; a run whose premise broke is marked ABANDONED (RunAbandoned)."""
        run = self._unfinished(run_id, "--resume")
        keeper = self._keeper(self._acquire())
        try:
            fresh = self._unfinished(run_id, "--resume")
            broken = self.premise(fresh)
            if broken is not None:
                self._abandon(keeper, fresh, f"not resumed: {broken}", "engine")
                raise RunAbandoned(
                    f"run {run_id} was not resumed and is now abandoned: {broken}. Nothing was "
                    f"changed; 'drkit failover show {run_id}' lists what its steps had done"
                )
            direction = fresh.direction
            state = RunState.RUNNING if direction is Direction.FORWARD else RunState.ROLLING_BACK
            self.runs.guarded(keeper).finish(run_id, state)
        except BaseException:
            self._release(keeper.lease)
            raise
        options = run.result.options or RunOptions()
        return self._execute(run_id, keeper, options, direction)

    def abandon(self, run_id: int, reason: str, by: str) -> RunRecord:
        """Give an unfinished run up (an operator's decision): nothing is undone or redone."""
        self._unfinished(run_id, "RUN")
        keeper = self._keeper(self._acquire())
        try:
            self._abandon(keeper, self._unfinished(run_id, "RUN"), reason, by)
        finally:
            self._release(keeper.lease)
        final = self.runs.get(run_id)
        assert final is not None
        return final

    def _step_context(
        self,
        run: RunRecord,
        keeper: LeaseKeeper,
        options: RunOptions,
        session: RunSession | None = None,
    ) -> StepContext:
        flow = flow_between(self.config, run.source, run.target)
        return StepContext(
            self.config, flow, self.store, self.runs.guarded(keeper), run, options,
            self.state_dir, self.progress, connect=self.connect, guard=keeper,
            channels=self.channels, session=session or self._session(run).for_run(),
            registries=self.registries, progress_readers=self.progress_readers,
            pointer_topics=self.pointer_topics,
        )  # fmt: skip

    def _announce(self, keeper: LeaseKeeper, run: RunRecord) -> None:
        """Run the after-hooks a crash cut off of ``run``'s done steps: an abandoned run undoes
        nothing, so what those steps did stands - and the hooks that announce it (the new
        pointer, to the clients) must still run."""
        pending = [
            s for s in run.steps
            if s.state in (StepState.DONE, StepState.SKIPPED) and hooks_pending(s)
        ]  # fmt: skip
        if not pending:
            return
        ctx = self._step_context(run, keeper, RunOptions())
        runbook = self.runbook(run.procedure)
        for step in pending:
            keeper.check()
            self._after_hooks(ctx, runbook, step.name, step.state, dict(step.detail))

    def _abandon(self, keeper: LeaseKeeper, run: RunRecord, reason: str, by: str) -> None:
        """Give ``run`` up: nothing it did is undone step by step, nothing redone - but it
        wants nothing any more, so the protections are reconciled to the pointer alone first
        (its source, still the pointer's, takes writes again; what it opened is closed), then
        its end recorded: a run that has ended always left the pointer's cluster writable."""
        log.warning("failover run abandoned", extra={"run": run.id, "reason": reason, "by": by})
        try:
            Reconciler(
                self.config, self.store, self.connect, keeper.confirm, keeper, self.registries
            ).reconcile(without=[run.id])
        except LeaseLost:
            raise
        except DrkitError as err:  # the monitor's next tick goes on with it
            log.warning("protections not reconciled after abandoning", extra={"error": str(err)})
        self._announce(keeper, run)
        self.runs.guarded(keeper).finish(
            run.id,
            RunState.ABANDONED,
            RunResult(abandoned=Abandoned(reason, by, run.state.value)),
        )

    def _unfinished(self, run_id: int, what: str) -> RunRecord:
        run = self.runs.get(run_id)
        if run is None:
            raise ConfigError([Problem(what, f"no failover run {run_id}")])
        if not run.state.unfinished:
            raise ConfigError([Problem(what, f"run {run_id} is {run.state.value}: it has ended")])
        return run

    def stale_runs(self) -> list[RunRecord]:
        """Runs in progress whose engine died: the failover lease has lapsed (by the
        database's clock) while they are still RUNNING or ROLLING_BACK."""
        holder = self.leases.holder()
        if holder is not None and not holder.expired:
            return []
        return self.runs.in_progress()

    def _acquire(self) -> Lease:
        """The failover lease; the monitor's maintenance holds it for a few seconds at a time
        (drkit.failover.maintenance), so that holder is waited for - any other is LeaseHeld."""
        deadline = clock.monotonic() + MAINTENANCE_TTL_S + 1
        while True:
            try:
                return self.leases.acquire(self.owner, self.ttl_s)
            except LeaseHeld as held:
                if not is_maintenance(held.owner) or clock.monotonic() > deadline:
                    raise
                clock.sleep(0.2)

    def _keeper(self, lease: Lease) -> LeaseKeeper:
        return LeaseKeeper(self.leases, lease, self.ttl_s)

    def _release(self, lease: Lease) -> None:
        try:
            self.leases.release(lease)
        except DrkitError as err:  # it lapses on its own
            log.warning("could not release the failover lease", extra={"error": str(err)})

    def _execute(
        self,
        run_id: int,
        keeper: LeaseKeeper,
        options: RunOptions,
        direction: Direction,
        session: RunSession | None = None,
    ) -> RunRecord:
        """Run the steps; ``session``: what the plan this process just recorded gave the run
        (None: what this engine's plans left, the rest read back from the store)."""
        tracer = RunTracer(self.config.tracing)
        if not tracer.active:  # no span to fill: not one store read more than the steps make
            return self._execute_steps(run_id, keeper, options, direction, session)
        run = self.runs.get(run_id)
        assert run is not None
        attributes = {
            "drkit.run.id": run_id,
            "drkit.procedure": run.procedure.value,
            "drkit.source": run.source,
            "drkit.target": run.target,
            "drkit.direction": direction.value,
        }
        self._tracer = tracer
        with tracer.run(attributes) as span:
            try:
                return self._execute_steps(run_id, keeper, options, direction, session)
            finally:
                with contextlib.suppress(DrkitError):  # the store away: the span says less
                    ended = self.runs.get(run_id)
                    span.set_attribute("drkit.outcome", ended.state.value if ended else "?")
                self._tracer = RunTracer(TracingConfig())

    def _execute_steps(
        self,
        run_id: int,
        keeper: LeaseKeeper,
        options: RunOptions,
        direction: Direction,
        session: RunSession | None,
    ) -> RunRecord:
        runs = self.runs.guarded(keeper)
        run = runs.get(run_id)
        assert run is not None
        runbook = self.runbook(run.procedure)
        ctx = self._step_context(run, keeper, options, session)

        if not run.plan_head.source_reachable:  # probed at planning: not again at each step
            ctx.reconciler.seen(run.source, False)

        def mirror(lease: Lease) -> None:  # shown by 'failover show' and 'status'
            runs.set_lease(run_id, lease.owner, lease.expires_at)

        keeper.on_renewed(mirror)
        keeper.start()
        try:
            mirror(keeper.lease)
            with collection_paused():  # steps build a move per group and partition
                if direction is Direction.FORWARD:
                    self._forward(ctx, runbook, keeper)
                else:
                    self._rollback_and_end(ctx, runbook, keeper, None)
        except LeaseLost as lost:
            log.error("failover lease lost", extra={"run": run_id, "error": str(lost)})
            raise LeaseLost(
                f"run {run_id}: {lost}. This process stopped and changed nothing more; "
                f"'drkit failover show {run_id}' shows what the holder did"
            ) from None
        finally:
            keeper.stop()
            self._release(keeper.lease)
        final = self.runs.get(run_id)
        assert final is not None
        return final

    def _forward(self, ctx: StepContext, runbook: Runbook, keeper: LeaseKeeper) -> None:
        for step in runbook.steps:
            record = ctx.run.step(step.name)
            if record is not None and record.state in (StepState.DONE, StepState.SKIPPED):
                if hooks_pending(record):  # cut off before they ran
                    keeper.check()
                    self._after_hooks(ctx, runbook, step.name, record.state, record.detail)
                if not self._translation_stale(ctx, step.name, record.state):
                    continue
            keeper.check()
            self._reconcile(ctx)
            timeout = self._timeout(runbook, step.name, step.timeout_s)
            try:
                self._run_step(ctx, runbook, step.name, timeout)
            except LeaseLost:
                raise
            except DrkitError as err:
                self._fail(ctx, runbook, keeper, step.name, err)
        keeper.check()
        self._reconcile(ctx)
        ctx.runs.finish(
            ctx.run.id, RunState.SUCCEEDED, RunResult(pointer=ctx.target, warnings=_warnings(ctx))
        )

    def _translation_stale(self, ctx: StepContext, name: StepName, state: StepState) -> bool:
        """A resumed run whose groups were translated but not yet committed: whether a group
        read on on the source since (the recorded translation would set it back on the target:
        re-reads) - then the translation runs again, recorded as such."""
        if name is not StepName.TRANSLATE_OFFSETS or state is not StepState.DONE:
            return False
        committed = ctx.run.step(StepName.COMMIT_GROUP_OFFSETS)
        if ctx.session.translated_here or (
            committed is not None and committed.state in (StepState.DONE, StepState.SKIPPED)
        ):
            return False
        moved = moved_on_source(ctx, Translation.of(ctx.run), SOURCE_GROUPS_TIMEOUT_S)
        if moved:
            log.warning("groups read on since the translation: translating again",
                        extra={"run": ctx.run.id, "groups": len(moved)})  # fmt: skip
            ctx.runs.merge_result(ctx.run.id, RunResult(translated_again_for=tuple(moved)))
        return bool(moved)

    def _timeout(self, runbook: Runbook, name: StepName, default: float | None) -> float | None:
        if name is StepName.DRAIN and runbook.procedure is not Procedure.FAILOVER:
            return self.config.failover.switchover_timeout_s
        return default

    def _context(self, ctx: StepContext) -> dict[str, Any]:
        pointer = self.pointers.get()
        return {
            "run": ctx.run.id,
            "procedure": ctx.procedure.value,
            "source": ctx.source,
            "target": ctx.target,
            "target_bootstrap_servers": self.config.clusters[ctx.target].bootstrap_servers,
            "source_bootstrap_servers": self.config.clusters[ctx.source].bootstrap_servers,
            "pointer": pointer.cluster if pointer else None,
            "pointer_epoch": pointer.epoch if pointer else None,
            "engine_pid": os.getpid(),
        }

    def _hooks(self, runbook: Runbook) -> list[Any]:
        return [*runbook.hooks, *self.config.failover.hooks]

    def _run_step(
        self, ctx: StepContext, runbook: Runbook, name: StepName, timeout: float | None
    ) -> None:
        attributes = {"drkit.run.id": ctx.run.id, "drkit.procedure": ctx.run.procedure.value}
        with self._tracer.step(name.value, attributes) as span:
            state = self._run_traced_step(ctx, runbook, name, timeout)
            span.set_attribute("drkit.outcome", state.value)

    def _run_traced_step(
        self, ctx: StepContext, runbook: Runbook, name: StepName, timeout: float | None
    ) -> StepState:
        runs = ctx.runs
        before = self._run_hooks(ctx, runbook, "before", name)
        vetoed = next((h for h in before if not h.ok), None)
        if vetoed is not None:
            runs.step_finished(ctx.run.id, name, StepState.FAILED, {"vetoed_by": vetoed.to_json()})
            raise Vetoed(f"step {name.value} vetoed: {vetoed.describe()}")
        runs.step_started(ctx.run.id, name)  # the intent: a rollback undoes a started step
        self.progress(f"{name.value} ...", None)
        log.info("failover step started", extra={"run": ctx.run.id, "step": name.value})
        try:
            outcome = self.steps[name](ctx, timeout)
        except (LeaseLost, DrkitError) as err:
            if isinstance(err, LeaseLost):
                raise
            runs.step_finished(ctx.run.id, name, StepState.FAILED, failure_detail(str(err)))
            raise
        except Exception as err:  # a bug or a library error: still recorded, never a traceback
            log.exception("failover step crashed", extra={"run": ctx.run.id, "step": name.value})
            crashed = failure_detail(f"{type(err).__name__}: {err}")
            runs.step_finished(ctx.run.id, name, StepState.FAILED, crashed)
            raise StepFailed(f"step {name.value} crashed: {type(err).__name__}: {err}") from err
        detail = self._with_hooks(outcome, before)
        if hooks_for(self._hooks(runbook), "after", name.value):
            detail = {**detail, HOOKS_AFTER: PENDING_HOOKS}  # run again on resume if cut off
        runs.step_finished(ctx.run.id, name, outcome.state, detail)
        if HOOKS_AFTER in detail:
            self._after_hooks(ctx, runbook, name, outcome.state, detail)
        log.info(
            "failover step finished",
            extra={"run": ctx.run.id, "step": name.value, "state": outcome.state.value},
        )
        return outcome.state

    def _after_hooks(
        self,
        ctx: StepContext,
        runbook: Runbook,
        name: StepName,
        state: StepState,
        detail: dict[str, Any],
    ) -> None:
        """Run ``name``'s after-hooks (recorded pending with its outcome) and record them."""
        after = self._run_hooks(ctx, runbook, "after", name)
        head, _rows = split_rows(detail)  # the rows were stored with the outcome
        recorded = {**head, HOOKS_AFTER: [h.to_json() for h in after]}
        ctx.runs.record_detail(ctx.run.id, name, state, recorded)
        for failed in (h for h in after if not h.ok):
            log.warning("after-hook failed", extra={"step": name.value, "hook": failed.describe()})

    def _run_hooks(
        self, ctx: StepContext, runbook: Runbook, when: str, name: StepName
    ) -> list[HookOutcome]:
        return run_hooks(
            self._hooks(runbook), when, name.value, self._context(ctx), self.run_hook, ctx.confirm
        )

    @staticmethod
    def _reconcile(ctx: StepContext) -> None:
        """A step boundary: bring every cluster to what the run's recorded steps want (a stale
        or half-applied change put right).  Best effort - a cluster away is the next pass's -
        but a lost lease stops the run."""
        try:
            ctx.reconcile()
        except LeaseLost:
            raise
        except DrkitError as err:
            log.warning(
                "protections not reconciled at a step boundary",
                extra={"run": ctx.run.id, "error": str(err)},
            )

    @staticmethod
    def _with_hooks(outcome: StepOutcome, before: list[HookOutcome]) -> dict[str, Any]:
        if not before:
            return outcome.detail
        return {**outcome.detail, HOOKS_BEFORE: [h.to_json() for h in before]}

    def _fail(
        self,
        ctx: StepContext,
        runbook: Runbook,
        keeper: LeaseKeeper,
        failed_at: StepName,
        err: DrkitError,
    ) -> None:
        """A step failed: roll back (before the pointer moved) or stop FAILED.  Always raises.

        The lease is confirmed first: an engine that lost its run - the failure may be the
        timeout of a step it slept through - must not roll back what another engine did.
        """
        keeper.confirm()
        rollback = runbook.rollback_before is not None and (
            failed_at is runbook.rollback_before or runbook.may_roll_back(failed_at)
        )
        error = str(err)
        if rollback and self._pointer_moved_by(ctx.run.id, ctx.target):
            # The step failed after its pointer write committed: the applications are told to
            # use the target.  Unfencing the source now would make two writable primaries.
            error += f" (after the pointer moved to {ctx.target}: no rollback)"
            rollback = False
        if not rollback:
            ctx.runs.finish(
                ctx.run.id,
                RunState.FAILED,
                RunResult(error=error, failed_step=failed_at, direction=Direction.FORWARD),
            )
            raise RunFailed(
                f"run {ctx.run.id} stopped at {failed_at.value}: {error}. Fix the "
                f"cause, then 'drkit failover --resume {ctx.run.id}'"
            ) from None
        # The intent first: from here on a crash resumes the rollback, never the move.
        ctx.runs.finish(
            ctx.run.id,
            RunState.ROLLING_BACK,
            RunResult(error=error, failed_step=failed_at, direction=Direction.ROLLBACK),
        )
        self._rollback_and_end(ctx, runbook, keeper, err)

    def _pointer_moved_by(self, run_id: int, target: str) -> bool:
        """Whether the pointer is on ``target``, put there by run ``run_id``."""
        pointer = self.pointers.get()
        return pointer is not None and (pointer.cluster, pointer.run_id) == (target, run_id)

    def _rollback_and_end(
        self, ctx: StepContext, runbook: Runbook, keeper: LeaseKeeper, err: DrkitError | None
    ) -> None:
        """Undo every started step, then end ROLLED_BACK (raises RolledBack or Vetoed), or
        FAILED in the rollback direction when an undo step fails (raises RunFailed).

        The run wants nothing any more (its direction is the rollback): the first thing done is
        to reconcile the protections to the pointer alone - a target this run opened is fenced
        again, its registry set back - then the undo steps run (replication restarted, the
        source's fence lifted: unfence_source reconciles again, strictly), then a last pass."""
        self._reconcile(ctx)
        undone, failure = self._roll_back(ctx, runbook, keeper)
        self._reconcile(ctx)
        run = ctx.runs.get(ctx.run.id) or ctx.run
        if failure is not None:
            ctx.runs.finish(
                run.id, RunState.FAILED, RunResult(rolled_back=undone, rollback_error=failure)
            )
            raise RunFailed(
                f"run {run.id}: rolling back stopped at {failure}. {run.source} may still be "
                f"fenced or its replication stopped. Fix the cause, then 'drkit failover "
                f"--resume {run.id}' continues the rollback"
            )
        ctx.runs.finish(run.id, RunState.ROLLED_BACK, RunResult(rolled_back=undone))
        failed_at = run.result.failed_step or "?"
        error = run.result.error or ""
        kind = Vetoed if isinstance(err, Vetoed) else RolledBack
        raise kind(
            f"run {run.id} failed at {failed_at} ({error}) and was rolled back: "
            f"{run.source} is primary again"
        ) from None

    def _roll_back(
        self, ctx: StepContext, runbook: Runbook, keeper: LeaseKeeper
    ) -> tuple[tuple[StepName, ...], str | None]:
        """Run the rollback step of every step that started (done, failed half-way, or cut
        off by a crash), newest first; a step already undone is skipped.  An undo step that
        fails does not stop the others (a fenced source must take writes again even when its
        replication cannot be restarted).  Returns what was undone and, when undo steps failed,
        which and why (a resume retries exactly those)."""
        undone: list[StepName] = []
        failures: list[str] = []
        run = ctx.runs.get(ctx.run.id) or ctx.run
        for step in reversed(runbook.steps):
            record = run.step(step.name)
            if step.rollback is None or not run.started(step.name):
                continue
            if record is not None and record.state is StepState.ROLLED_BACK:
                continue
            keeper.check()
            try:
                self._run_step(ctx, runbook, step.rollback, step.timeout_s)
            except LeaseLost:
                raise
            except DrkitError as failed:
                log.error(
                    "rollback step failed",
                    extra={"run": run.id, "step": step.rollback.value, "error": str(failed)},
                )
                failures.append(f"{step.rollback.value}: {failed}")
                continue
            ctx.runs.mark(run.id, step.name, StepState.ROLLED_BACK)
            undone.append(step.rollback)
        return tuple(undone), "; ".join(failures) or None


def _warnings(ctx: StepContext) -> tuple[str, ...]:
    """The steps' warnings (a reverse flow not confirmed running, ...), for the run's result:
    a run that succeeded with one says so where its outcome is read."""
    run = ctx.runs.get(ctx.run.id) or ctx.run
    return tuple(f"{step.name.value}: {step.warning}" for step in run.steps if step.warning)


def _where(run: RunRecord) -> str:
    """Where an unfinished run stands, in a few words."""
    if run.state is RunState.FAILED:
        failed = run.result.rollback_error or run.result.failed_step or "?"
        direction = "rolling back" if run.direction is Direction.ROLLBACK else "failed"
        return f"{direction} at {failed}"
    return f"{run.state.value}, held by {run.lease_owner or 'nobody'}"
