"""Is an interrupted run still true?  The check made before any run is resumed (pure).

A run is a plan made against the world as it was.  Resumed later - by ``--resume`` or by the
monitor once its engine's lease lapsed - it may act on a world that moved on: the pointer moved
by another run, the groups consumed further on the target, the flow reconfigured.  Resuming it
then would move the pointer back and commit stale offsets.  :func:`broken_premise` names the
first reason the run no longer holds; the engine marks such a run ABANDONED with that reason
instead of resuming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from drkit.failover.model import Procedure, RunState, StepName, StepState


@dataclass(frozen=True)
class RunFacts:
    """What a premise check needs of the run being resumed."""

    id: int
    procedure: Procedure
    source: str
    target: str
    state: RunState
    pointer_from: str | None  # the active cluster when the run was planned
    pointer_moved: bool  # its move_pointer step is done
    rolling_back: bool = False  # its direction is the rollback


@dataclass(frozen=True)
class WorldFacts:
    """What a premise check needs of the world now."""

    pointer_cluster: str | None
    pointer_run: int | None  # the run that last moved the pointer
    later_runs: tuple[str, ...]  # runs created after this one ("#7 switchover dc2->dc1")
    flow_configured: bool  # the run's flow source->target is still in the config


RESUMABLE = (RunState.RUNNING, RunState.ROLLING_BACK, RunState.FAILED)


def broken_premise(run: RunFacts, world: WorldFacts) -> str | None:
    """Why ``run`` must not be resumed any more, or None when it still may be.

    Invariants: a run never resumes once a later run exists; never once the pointer is
    somewhere its own steps did not put it; never when its flow is gone from the config; a
    rollback never resumes once the run's own move_pointer put the pointer on its target.

    The pointer records the run that moved it: a move_pointer cut off between its write and
    its outcome (a crash, a failure after the write) left it on the target *by this run* -
    the world as the run left it, so a forward run resumes (the move is idempotent).
    """
    if run.state not in RESUMABLE:
        return f"it is {run.state.value}"
    if world.later_runs:
        return f"a later run exists ({', '.join(world.later_runs)}): the world moved on"
    if not world.flow_configured:
        return f"the flow {run.source}->{run.target} is no longer in the config"
    moved_by_it = (world.pointer_cluster, world.pointer_run) == (run.target, run.id)
    if run.pointer_moved:
        if not moved_by_it:
            return (
                f"it moved the pointer to {run.target}, but the pointer is now on "
                f"{world.pointer_cluster or 'nothing'} (moved by run {world.pointer_run})"
            )
        return None
    if moved_by_it:  # its move_pointer wrote the pointer and was cut off before it finished
        if run.rolling_back:
            return (
                f"its move_pointer step put the pointer on {run.target} before it was cut "
                f"off: rolling back now would make {run.source} writable beside the primary "
                "the applications were sent to"
            )
        return None
    if world.pointer_cluster != run.pointer_from:
        return (
            f"it was planned while the active cluster was {run.pointer_from or 'unset'}; "
            f"it is {world.pointer_cluster or 'unset'} now"
        )
    return None


def pointer_moved(steps: dict[StepName, StepState]) -> bool:
    """Whether the run's move_pointer step completed."""
    return steps.get(StepName.MOVE_POINTER) is StepState.DONE
