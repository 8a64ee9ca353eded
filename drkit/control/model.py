"""Value objects of flow control (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drkit.config.model import FlowConfig


class DesiredState(StrEnum):
    """What the operator (or the failover engine) wants a flow to do."""

    RUNNING = "running"  # replicate
    PAUSED = "paused"  # hold: progress stored, nothing consumed, group membership kept
    STOPPED = "stopped"  # leave: progress stored, workers leave the group and idle until told


@dataclass(frozen=True)
class FlowDirective:
    """The desired state of one flow; ``epoch`` grows by one at every change (0: never set)."""

    flow: str
    desired: DesiredState
    epoch: int
    reason: str = ""
    run_id: int | None = None


# Workers report twice a second (drkit.control.gate); one not heard from for longer than this
# is silent.
LIVE_WITHIN_S = 5.0


@dataclass(frozen=True)
class WorkerAck:
    """A worker's latest report for one flow: the epoch it acted on and the state it is in.

    ``age_s`` is how long ago the worker reported (workers report every poll, so a large age
    means the worker is silent: dead, cut off, or unable to reach the store).  ``failure``:
    the worker's flow ended for good on this error (its last report; it writes nothing more).
    """

    flow: str
    worker: str
    epoch: int
    state: DesiredState
    age_s: float
    failure: str | None = None


def pending_workers(
    acks: list[WorkerAck], epoch: int, desired: DesiredState, live_within_s: float
) -> tuple[list[str], list[str]]:
    """(live workers that have not yet acted on ``epoch``, silent workers) for one flow.

    A worker is live when it reported within ``live_within_s``; a silent one cannot be waited
    for - it fences itself after the silence window instead.  A worker whose flow ended on an
    error (``failure``) writes nothing any more: it counts as having acted on PAUSED and
    STOPPED, and is never waited for on RUNNING (it cannot run: see :func:`failed_workers`).
    """
    done = {
        a.worker
        for a in acks
        if (a.epoch >= epoch and a.state is desired and a.failure is None)
        or (a.failure is not None and desired is not DesiredState.RUNNING)
    }
    acks = [a for a in acks if a.failure is None]
    behind = [a.worker for a in acks if a.worker not in done and a.age_s <= live_within_s]
    silent = [a.worker for a in acks if a.worker not in done and a.age_s > live_within_s]
    return behind, silent


def acknowledgements(
    acks: list[WorkerAck], epoch: int, desired: DesiredState, live_within_s: float
) -> dict[str, list[str]]:
    """Who answered a directive, as an operator reads it: ``acknowledged`` - live workers
    (heard within ``live_within_s``) that act on it; ``not_yet`` - live ones that do not yet;
    ``silent`` - workers not heard from (dead, or cut off from the store); ``ended`` - workers
    whose flow ended for good (they write nothing and run nothing: never counted as having
    acknowledged, however long ago they reported)."""
    behind, silent = pending_workers(acks, epoch, desired, live_within_s)
    ended = sorted(failed_workers(acks))
    done = sorted(
        a.worker
        for a in acks
        if a.failure is None
        and a.age_s <= live_within_s
        and a.worker not in behind
        and a.worker not in silent
    )
    return {"acknowledged": done, "not_yet": sorted(behind), "silent": sorted(silent),
            "ended": ended}  # fmt: skip


def failed_workers(acks: list[WorkerAck]) -> dict[str, str]:
    """Workers whose flow ended for good, with the error each named."""
    return {a.worker: a.failure for a in acks if a.failure is not None}


def running_workers(acks: list[WorkerAck], epoch: int) -> list[str]:
    """Workers that acted on RUNNING at ``epoch`` (or later) and have not failed since."""
    return sorted(
        a.worker
        for a in acks
        if a.epoch >= epoch and a.state is DesiredState.RUNNING and a.failure is None
    )


def default_state(flow: FlowConfig) -> DesiredState:
    """A flow's state before any directive was written: a standby flow holds, others run."""
    return DesiredState.PAUSED if flow.standby else DesiredState.RUNNING
