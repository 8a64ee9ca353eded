"""Steps that make the source's other standbys follow the target after an unplanned failover
(issue 48; docs/three-dc.md): dc1 lost, dc2 promoted, dc3 - which copied dc1 too - follows
dc2 from where it is, in the run itself rather than by an operator's later command.

Both come after ``move_pointer`` (and ``start_reverse_flow``) in runbooks/failover.yaml: the
applications were sent to the target before either starts, so they add nothing to the move's
RTO.  They do exactly what ``drkit flows repoint --from SOURCE --to TARGET --standby X`` does
(drkit/cli/flows_cmd.py), with the same functions:

* ``hold_standby_flows`` - for every other standby X: the flow SOURCE->X set STOPPED under
  the run's lease, published on its control channel on X and its workers waited for
  (:func:`~drkit.failover.steps.replication.publish_directive`,
  :func:`~drkit.failover.steps.replication.await_workers`, and
  :func:`~drkit.failover.steps.replication.unproven_silent`, the command's proof that a silent
  worker can no longer write).  Should SOURCE return, the flow would otherwise copy again what
  the follow-on copied, and SOURCE's divergent tail.
* ``follow_standbys`` - for every standby the hold proved stopped: the re-point plan and the
  follow-on copy with SOURCE->X's offset syncs and, when a flow TARGET->X is configured, the
  onward map (:func:`drkit.offsets.follow_on.follow_standby`).  Nothing is copied for a
  standby any of whose partitions cannot be told.

Failure policy: the pointer has moved, so neither step fails the run.  A standby that does not
answer, cannot be held, cannot be told, or whose copy fails is reported in the step's detail
under ``pending`` with the exact ``drkit flows repoint ...`` command to run later, and in its
``warning`` - which the run's result (``drkit failover show``, ``status``) carries.  The
command is idempotent: after the run did the work it copies nothing.

Resume policy: a run killed inside either step resumes it from the top (its record is
RUNNING); the hold reuses the run's directive and the follow-on copier re-reads what the
standby holds, so no record is copied twice.  A step that ended DONE with a standby pending is
not retried by ``--resume`` (the run succeeded): the command it names is the retry.

A source with no other standby: both are skipped, with why (two-cluster runs are unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.control import DesiredState
from drkit.errors import DrkitError, LeaseLost
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import StepName
from drkit.failover.runs import WARNING_KEY
from drkit.failover.steps.replication import (
    _directive,
    steering,
    unproven_silent,
    wait_for_workers,
)
from drkit.kafka.ports import AdminFactory
from drkit.offsets.follow_on import Copied, follow_standby
from drkit.offsets.repoint_inputs import RepointReport
from drkit.records import TopicPartition
from drkit.repoint import CannotTell, StandbyAhead
from drkit.store.flow_keys import keys_of
from drkit.topology.fan_in import other_standbys


class Follower(Protocol):
    """:func:`drkit.offsets.follow_on.follow_standby`'s signature (tests pass fakes)."""

    def __call__(
        self,
        config: DrkitConfig,
        lost: str,
        promoted: str,
        standby: str,
        *,
        connect: AdminFactory,
        keys: Callable[[str], bytes] | None,
        confirm: Callable[[], object] | None = None,
    ) -> tuple[RepointReport, dict[TopicPartition, Copied]]: ...


def repoint_command(lost: str, promoted: str, standby: str) -> str:
    """What an operator runs to do a standby's part later (``drkit flows repoint``)."""
    return f"drkit flows repoint --from {lost} --to {promoted} --standby {standby}"


def _others(ctx: StepContext) -> tuple[str, ...]:
    return other_standbys(ctx.config.flows, ctx.source, ctx.target)


def _no_other_standby(ctx: StepContext) -> StepOutcome:
    return StepOutcome.skipped(
        f"{ctx.source} has no standby beside {ctx.target}: no other cluster to re-point"
    )


def _pending(lost: str, promoted: str, standby: str, why: str) -> dict[str, str]:
    return {"why": why, "run_later": repoint_command(lost, promoted, standby)}


def _outcome(
    done: Mapping[str, object], pending: Mapping[str, dict[str, str]], key: str
) -> StepOutcome:
    """DONE either way (the pointer has moved): what was done under ``key``, what was not
    under ``pending`` and, when some was not, a warning naming each command to run later."""
    detail: dict[str, Any] = {key: dict(done), "pending": dict(pending)}
    if pending:
        detail[WARNING_KEY] = "; ".join(
            f"{standby} does not follow yet ({p['why']}): run '{p['run_later']}'"
            for standby, p in sorted(pending.items())
        )
    return StepOutcome.done(**detail)


def hold_standby_flows(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Every other standby's flow from the source STOPPED and proven stopped (see the module
    docstring); one that cannot be is pending, never a failed run."""
    others = _others(ctx)
    if not others:
        return _no_other_standby(ctx)
    held: dict[str, object] = {}
    pending: dict[str, dict[str, str]] = {}
    for standby in others:
        flow = ctx.config.flow(f"{ctx.source}->{standby}")
        try:
            held[standby] = _hold(ctx, flow, timeout_s)
        except StepFailed as err:
            pending[standby] = _pending(ctx.source, ctx.target, standby, f"not held: {err}")
    return _outcome(held, pending, "held")


def _hold(ctx: StepContext, flow: FlowConfig, timeout_s: float | None) -> dict[str, object]:
    """``flow`` STOPPED by this run (a resumed step reuses its directive), published, and its
    workers acknowledged - or silent past the silence window (StepFailed otherwise)."""
    directive, published = _directive(ctx, flow, DesiredState.STOPPED)
    detail = wait_for_workers(ctx, flow, directive, timeout_s, strict=True)
    unproven = unproven_silent(steering(ctx), flow, detail)
    if unproven:
        raise StepFailed(
            f"workers {', '.join(unproven)} of {flow.name} are silent and their silence window "
            "(failover.worker_silence_s) has not passed: they may still copy"
        )
    return {**detail, **published}


def follow_standbys_with(follow: Follower) -> Callable[[StepContext, float | None], StepOutcome]:
    """The ``follow_standbys`` step over ``follow`` (the real one:
    :func:`drkit.offsets.follow_on.follow_standby`)."""

    def follow_standbys(ctx: StepContext, _timeout_s: float | None) -> StepOutcome:
        """Every standby the hold proved stopped follows the target (see the module
        docstring); one that cannot, now, is pending with the command to run later."""
        others = _others(ctx)
        if not others:
            return _no_other_standby(ctx)
        held = ctx.detail(StepName.HOLD_STANDBY_FLOWS).get("held") or {}
        done: dict[str, object] = {}
        pending: dict[str, dict[str, str]] = {}
        for standby in others:
            why = _cannot_start(ctx, standby, held)
            if why is None:
                why, followed = _follow(ctx, follow, standby)
                if why is None:
                    done[standby] = followed
            if why is not None:
                pending[standby] = _pending(ctx.source, ctx.target, standby, why)
        return _outcome(done, pending, "followed")

    return follow_standbys


def _cannot_start(ctx: StepContext, standby: str, held: Mapping[str, object]) -> str | None:
    if standby not in held:
        return f"its flow {ctx.source}->{standby} is not held (hold_standby_flows)"
    for alias in (ctx.target, standby):
        if not ctx.reachable(alias):
            return f"{alias} does not answer"
    return None


def _follow(
    ctx: StepContext, follow: Follower, standby: str
) -> tuple[str | None, dict[str, object]]:
    """One standby's re-point plan and follow-on copy: (why it did not follow, or None; what
    was copied)."""
    ctx.confirm()  # the copy writes into the standby: the run's lease is surely still held
    try:
        # ... and before each of its writes: a copy takes as long as the data (Leased).
        report, copied = follow(
            ctx.config, ctx.source, ctx.target, standby,
            connect=ctx.connect, keys=keys_of(ctx.config, ctx.store), confirm=ctx.confirm,
        )  # fmt: skip
    except LeaseLost:
        raise  # the run stops here (a resumed run re-runs the step): not a pending standby
    except DrkitError as err:
        return f"the follow-on copy failed: {err}", {}
    cannot = {tp: r for tp, r in report.results.items() if isinstance(r, CannotTell)}
    if cannot:
        shown = "; ".join(
            f"{tp.topic}[{tp.partition}]: {r.reason}" for tp, r in sorted(cannot.items())[:3]
        )
        return (
            f"{len(cannot)} partition(s) cannot tell where to follow from, nothing "
            f"copied ({shown})",
            {},
        )
    ahead = sum(isinstance(r, StandbyAhead) for r in report.results.values())
    return None, {
        "partitions": len(report.results),
        "standby_ahead": ahead,
        "copied": sum(c.copied for c in copied.values()),
        "placed": sum(c.placed for c in copied.values()),
        "onward": "written" if report.onward is None else _onward_later(ctx, standby),
    }


def _onward_later(ctx: StepContext, standby: str) -> str:
    """Why the onward map was not written (no flow TARGET->standby in the config), and how to
    write it once the flow is added: the command copies nothing then, it writes the map."""
    return (
        f"not written: no flow {ctx.target}->{standby} in the config; add it (follows: "
        f"[{ctx.source}]) and run '{repoint_command(ctx.source, ctx.target, standby)}'"
    )


follow_standbys = follow_standbys_with(follow_standby)
