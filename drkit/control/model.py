"""Value objects of flow control (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
    means the worker is silent: dead, cut off, or unable to reach the store).
    """

    flow: str
    worker: str
    epoch: int
    state: DesiredState
    age_s: float


def pending_workers(
    acks: list[WorkerAck], epoch: int, desired: DesiredState, live_within_s: float
) -> tuple[list[str], list[str]]:
    """(live workers that have not yet acted on ``epoch``, silent workers) for one flow.

    A worker is live when it reported within ``live_within_s``; a silent one cannot be waited
    for - it fences itself after the silence window instead.
    """
    done = {a.worker for a in acks if a.epoch >= epoch and a.state is desired}
    behind = [a.worker for a in acks if a.worker not in done and a.age_s <= live_within_s]
    silent = [a.worker for a in acks if a.worker not in done and a.age_s > live_within_s]
    return behind, silent
