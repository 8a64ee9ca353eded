"""The failover engine: executes a plan as a durable, resumable, leased run.

``plan()`` gathers a snapshot and returns the pure plan (nothing changes).  ``start()`` records
the run, takes the lease (one run at a time; the fencing token is checked before every step)
and executes the steps in runbook order; ``resume()`` continues a run from its first step that
is not done.  Every step's start, end, outcome and error is in the state store before the next
one begins; hooks run before and after each step (a failing ``before`` hook vetoes it).

A failure before the runbook's ``rollback_before`` step rolls a planned move back: the
completed steps' rollback steps run in reverse (unfence the source, restart replication) and
the run ends ROLLED_BACK.  Later failures - and every failure of an unplanned failover - leave
the run FAILED, to be resumed once the cause is fixed.

Exit codes (owned by the error types): 0 done, 1 a step failed (resumable), 2 bad input,
4 blocked by the plan, 5 another run holds the lease, 6 rolled back, 7 vetoed by a hook.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import ConfigError, DrkitError, Problem
from drkit.failover.context import Progress, RunOptions, StepContext, StepFailed, StepOutcome
from drkit.failover.hooks import HookOutcome, run_hooks
from drkit.failover.lease import Lease, LeaseLost, LeaseRepository
from drkit.failover.model import Plan, Procedure, RunState, StepName, StepState
from drkit.failover.plan import make_plan
from drkit.failover.pointer import PointerRepository
from drkit.failover.runbook import Runbook, load_runbook
from drkit.failover.runs import RunRecord, RunRepository
from drkit.failover.snapshot import gather
from drkit.failover.steps import STEPS
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.isolated import prewarm
from drkit.store.db import StateStore

log = logging.getLogger(__name__)


class PlanBlocked(DrkitError):
    """The plan has blockers; nothing was changed."""

    exit_code = 4


class RolledBack(DrkitError):
    """A planned move failed and was undone: the source is primary again."""

    exit_code = 6


class Vetoed(DrkitError):
    """A ``before`` hook vetoed a step."""

    exit_code = 7


class RunFailed(DrkitError):
    """A step failed; the run is FAILED and resumable."""

    exit_code = 1


def flow_between(config: DrkitConfig, source: str, target: str) -> FlowConfig:
    """The configured flow ``source->target``; ConfigError naming the known flows otherwise."""
    for alias in (source, target):
        if alias not in config.clusters:
            known = ", ".join(sorted(config.clusters))
            raise ConfigError([Problem("--from/--to", f"unknown cluster {alias!r} ({known})")])
    try:
        return config.flow(f"{source}->{target}")
    except KeyError:
        flows = ", ".join(f.name for f in config.flows) or "none"
        raise ConfigError(
            [Problem("--from/--to", f"no flow {source}->{target} in the config (flows: {flows})")]
        ) from None


class Engine:
    """Plans and runs procedures for one config and state store."""

    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        state_dir: Path,
        progress: Progress | None = None,
        owner: str | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.state_dir = state_dir
        self.progress: Progress = progress or (lambda _message, _fraction: None)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.runs = RunRepository(store)
        self.leases = LeaseRepository(store)
        self.pointers = PointerRepository(store)

    # -- planning -----------------------------------------------------------------------------

    def runbook(self, procedure: Procedure) -> Runbook:
        directory = self.config.failover.runbooks_dir
        return load_runbook(procedure, Path(directory) if directory else None)

    def plan(self, procedure: Procedure, source: str, target: str, options: RunOptions) -> Plan:
        """The plan for moving from ``source`` to ``target`` now; changes nothing."""
        flow = flow_between(self.config, source, target)
        # Group requests run in a helper process (drkit.kafka.isolated): start the target's
        # while the snapshot is read, not when the first group request needs it.
        prewarm(ClusterEndpoint(target, self.config.clusters[target]))
        pointer = self.pointers.get()
        snapshot = gather(
            self.config,
            flow,
            procedure,
            pointer.cluster if pointer else None,
            options.force,
            list(options.groups) if options.groups is not None else None,
        )
        return make_plan(snapshot, self.runbook(procedure))

    # -- running ------------------------------------------------------------------------------

    def start(
        self,
        plan: Plan,
        options: RunOptions,
        requested_by: str = "cli",
        reason: str = "",
        on_started: Callable[[RunRecord], None] | None = None,
    ) -> RunRecord:
        """Record and execute ``plan``; raises PlanBlocked when it has blockers.

        ``on_started`` is called with the new run once it holds the lease and is recorded,
        before its first step (so "failover started" is said once, by the run that started).
        """
        if plan.blockers:
            raise PlanBlocked("the plan is blocked: " + "; ".join(f.message for f in plan.blockers))
        lease = self.leases.acquire(self.owner, self.config.failover.lease_ttl_s)
        # The plan was made before the lease: if another run moved the pointer in between (two
        # monitors deciding at once, two operators), this plan is stale - never run it.
        pointer = self.pointers.get()
        now_active = pointer.cluster if pointer is not None else None
        if now_active != plan.pointer_from:
            self.leases.release(lease)
            was = plan.pointer_from or "unset"
            raise PlanBlocked(
                f"the active cluster changed since the plan was made ({was} -> {now_active}); "
                "plan again"
            )
        run = self.runs.create(plan, requested_by, reason)
        self.runs.merge_result(run.id, {"options": options.to_json()})
        if on_started is not None:
            on_started(run)
        return self._execute(run.id, lease, options)

    def resume(self, run_id: int) -> RunRecord:
        """Continue a RUNNING or FAILED run from its first step that is not done."""
        run = self.runs.get(run_id)
        if run is None:
            raise ConfigError([Problem("--resume", f"no failover run {run_id}")])
        if run.state not in (RunState.RUNNING, RunState.FAILED):
            raise ConfigError(
                [Problem("--resume", f"run {run_id} is {run.state.value}: nothing to resume")]
            )
        lease = self.leases.acquire(self.owner, self.config.failover.lease_ttl_s)
        self.runs.finish(run_id, RunState.RUNNING, {})
        return self._execute(run_id, lease, RunOptions.from_json(run.result.get("options", {})))

    def stale_runs(self) -> list[RunRecord]:
        """RUNNING runs whose process died (their lease expired): to be resumed."""
        return [run for run in self.runs.running() if run.lease_expired]

    def _execute(self, run_id: int, lease: Lease, options: RunOptions) -> RunRecord:
        run = self.runs.get(run_id)
        assert run is not None
        flow = flow_between(self.config, run.source, run.target)
        runbook = self.runbook(run.procedure)
        ctx = StepContext(
            self.config, flow, self.store, self.runs, run, options, self.state_dir, self.progress
        )
        completed: list[StepName] = []
        keeper = _LeaseKeeper(self, run_id, lease)
        keeper.start()
        try:
            for step in runbook.steps:
                record = ctx.run.step(step.name)
                if record is not None and record.state in (StepState.DONE, StepState.SKIPPED):
                    completed.append(step.name)
                    continue
                keeper.check()
                timeout = self._timeout(runbook, step.name, step.timeout_s)
                self._run_step(ctx, runbook, step.name, timeout)
                completed.append(step.name)
            keeper.check()
            self.runs.finish(run_id, RunState.SUCCEEDED, {"pointer": run.target})
        except LeaseLost:
            raise  # another engine owns the run now: record nothing more
        except DrkitError as err:
            self._fail(ctx, runbook, completed, err)
        finally:
            keeper.stop()
            self.leases.release(keeper.lease)
        final = self.runs.get(run_id)
        assert final is not None
        return final

    def renew(self, run_id: int, lease: Lease) -> Lease:
        lease = self.leases.renew(lease, self.config.failover.lease_ttl_s)
        self.runs.set_lease(run_id, lease.owner, lease.expires_at)
        return lease

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
        before = run_hooks(self._hooks(runbook), "before", name.value, self._context(ctx))
        vetoed = next((h for h in before if not h.ok), None)
        if vetoed is not None:
            self.runs.step_finished(
                ctx.run.id, name, StepState.FAILED, {"vetoed_by": vetoed.to_json()}
            )
            raise Vetoed(f"step {name.value} vetoed: {vetoed.describe()}")
        self.runs.step_started(ctx.run.id, name)
        self.progress(f"{name.value} ...", None)
        log.info("failover step started", extra={"run": ctx.run.id, "step": name.value})
        try:
            outcome = STEPS[name](ctx, timeout)
        except DrkitError as err:
            self.runs.step_finished(ctx.run.id, name, StepState.FAILED, {"error": str(err)})
            raise
        except Exception as err:  # a bug or a library error: still recorded, never a traceback
            log.exception("failover step crashed", extra={"run": ctx.run.id, "step": name.value})
            self.runs.step_finished(
                ctx.run.id, name, StepState.FAILED, {"error": f"{type(err).__name__}: {err}"}
            )
            raise StepFailed(f"step {name.value} crashed: {type(err).__name__}: {err}") from err
        self.runs.step_finished(ctx.run.id, name, outcome.state, self._with_hooks(outcome, before))
        after = run_hooks(self._hooks(runbook), "after", name.value, self._context(ctx))
        if after:
            detail = {**outcome.detail, "hooks_after": [h.to_json() for h in after]}
            self.runs.step_finished(ctx.run.id, name, outcome.state, detail)
            for failed in (h for h in after if not h.ok):
                log.warning(
                    "after-hook failed", extra={"step": name.value, "hook": failed.describe()}
                )
        log.info(
            "failover step finished",
            extra={"run": ctx.run.id, "step": name.value, "state": outcome.state.value},
        )

    @staticmethod
    def _with_hooks(outcome: StepOutcome, before: list[HookOutcome]) -> dict[str, Any]:
        if not before:
            return outcome.detail
        return {**outcome.detail, "hooks_before": [h.to_json() for h in before]}

    def _fail(
        self,
        ctx: StepContext,
        runbook: Runbook,
        completed: list[StepName],
        err: DrkitError,
    ) -> None:
        failed_at = next(
            (s.name for s in runbook.steps if s.name not in completed), runbook.steps[-1].name
        )
        rollback = runbook.rollback_before is not None and (
            failed_at is runbook.rollback_before or runbook.may_roll_back(failed_at)
        )
        if not rollback:
            self.runs.finish(
                ctx.run.id, RunState.FAILED, {"error": str(err), "failed_step": failed_at.value}
            )
            raise RunFailed(
                f"run {ctx.run.id} stopped at {failed_at.value}: {err}. Fix the cause, then "
                f"'drkit failover --resume {ctx.run.id}'"
            ) from None
        undone = self._roll_back(ctx, runbook, completed)
        self.runs.finish(
            ctx.run.id,
            RunState.ROLLED_BACK,
            {"error": str(err), "failed_step": failed_at.value, "rolled_back": undone},
        )
        kind = Vetoed if isinstance(err, Vetoed) else RolledBack
        raise kind(
            f"run {ctx.run.id} failed at {failed_at.value} ({err}) and was rolled back: "
            f"{ctx.source} is primary again"
        ) from None

    def _roll_back(
        self, ctx: StepContext, runbook: Runbook, completed: list[StepName]
    ) -> list[str]:
        undone: list[str] = []
        for step in reversed(runbook.steps):
            if step.name not in completed or step.rollback is None:
                continue
            try:
                self._run_step(ctx, runbook, step.rollback, step.timeout_s)
                self.runs.mark(ctx.run.id, step.name, StepState.ROLLED_BACK)
                undone.append(step.rollback.value)
            except DrkitError as err:
                log.error(
                    "rollback step failed",
                    extra={"run": ctx.run.id, "step": step.rollback.value, "error": str(err)},
                )
                undone.append(f"{step.rollback.value} FAILED: {err}")
        return undone


class _LeaseKeeper(threading.Thread):
    """Renews the run's lease every third of its TTL while steps run (a drain may outlast it).

    If renewal finds the lease taken over, ``check()`` raises LeaseLost before the next step.
    """

    def __init__(self, engine: Engine, run_id: int, lease: Lease) -> None:
        super().__init__(name=f"lease run {run_id}", daemon=True)
        self.engine, self.run_id, self.lease = engine, run_id, lease
        self._stop_event = threading.Event()
        self._lost: LeaseLost | None = None
        self.lease = engine.renew(run_id, lease)

    def run(self) -> None:
        interval = self.engine.config.failover.lease_ttl_s / 3
        while not self._stop_event.wait(interval):
            try:
                self.lease = self.engine.renew(self.run_id, self.lease)
            except LeaseLost as lost:
                self._lost = lost
                return
            except DrkitError as err:  # the store is away for a moment: try again
                log.warning("lease renewal failed", extra={"error": str(err)})

    def check(self) -> None:
        if self._lost is not None:
            raise self._lost

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)
