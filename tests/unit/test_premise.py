"""Whether an interrupted run may be resumed (drkit.failover.premise.broken_premise, pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from drkit.failover.model import Procedure, RunState
from drkit.failover.premise import RunFacts, WorldFacts, broken_premise

RUN = RunFacts(7, Procedure.SWITCHOVER, "dc1", "dc2", RunState.RUNNING, "dc1", False)
AS_PLANNED = WorldFacts("dc1", 3, (), True)


def test_a_run_in_the_world_it_was_planned_in_resumes() -> None:
    assert broken_premise(RUN, AS_PLANNED) is None


@pytest.mark.parametrize("state", [RunState.RUNNING, RunState.FAILED])
def test_a_forward_run_whose_own_cut_off_move_put_the_pointer_on_its_target_resumes(
    state: RunState,
) -> None:
    """move_pointer wrote the pointer, then the run was cut off before the step finished."""
    assert broken_premise(replace(RUN, state=state), WorldFacts("dc2", 7, (), True)) is None


def test_a_rollback_never_resumes_once_its_own_move_put_the_pointer_on_the_target() -> None:
    rolling = replace(RUN, state=RunState.ROLLING_BACK, rolling_back=True)
    assert broken_premise(rolling, AS_PLANNED) is None  # before the pointer moved: it may
    why = broken_premise(rolling, WorldFacts("dc2", 7, (), True))
    assert why is not None and "would make dc1 writable" in why


@pytest.mark.parametrize(
    ("world", "says"),
    [
        (WorldFacts("dc2", 8, (), True), "planned while the active cluster was dc1"),
        (WorldFacts("dc2", None, (), True), "planned while the active cluster was dc1"),
        (WorldFacts("dc1", 3, ("#8 failover dc1->dc2",), True), "a later run exists"),
        (WorldFacts("dc1", 3, (), False), "no longer in the config"),
    ],
)
def test_a_run_whose_world_moved_on_by_other_hands_does_not_resume(
    world: WorldFacts, says: str
) -> None:
    why = broken_premise(RUN, world)
    assert why is not None and says in why


def test_a_moved_pointer_elsewhere_than_the_run_left_it_stops_a_run_that_moved_it() -> None:
    moved = replace(RUN, pointer_moved=True)
    assert broken_premise(moved, WorldFacts("dc2", 7, (), True)) is None
    why = broken_premise(moved, WorldFacts("dc1", 9, (), True))
    assert why is not None and "moved by run 9" in why
