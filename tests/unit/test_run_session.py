"""A step gets what the plan gave its run one way - the run session
(drkit.failover.run_session): in the process that planned it, the values at hand; in any other
(a resumed run), the same values read back from the stored run."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.failover.model import (
    GroupMove,
    PartitionMove,
    Plan,
    PlannedStep,
    Procedure,
    StepName,
    StepState,
)
from drkit.failover.plan import TranslationMemo
from drkit.failover.results import GroupTranslation, Translation
from drkit.failover.run_session import RunSession
from drkit.failover.runs import RunRecord, RunRepository
from drkit.store import StateStore

MOVE = PartitionMove("orders", 0, "dc1.orders", 0, 40, 38, "exact", 0, 0)


@pytest.fixture
def runs(tmp_path: Path) -> RunRepository:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    return RunRepository(store)


def _recorded(runs: RunRepository) -> tuple[RunRecord, Translation]:
    """A run planned with two groups, its translation recorded by its translate step."""
    plan = Plan(
        Procedure.FAILOVER, "dc1", "dc2", "dc1->dc2", None, False, "checkpoints",
        (PlannedStep(1, StepName.TRANSLATE_OFFSETS, None, None),),
        (GroupMove("app", "empty", False, (MOVE,)), GroupMove("busy", "stable", False, (MOVE,))),
        (), (), (), "dc1", "dc2",
    )  # fmt: skip
    run = runs.create(plan, "test", "")
    translation = Translation(
        "checkpoints", (GroupTranslation("app", "empty", False, (MOVE,)),), (), ()
    )
    runs.step_finished(run.id, StepName.TRANSLATE_OFFSETS, StepState.DONE,
                       translation.to_detail())  # fmt: skip
    fresh = runs.get(run.id)
    assert fresh is not None
    return fresh, translation


def _never() -> RunRecord:
    raise AssertionError("the session read the store although it had the values")


def test_a_session_given_nothing_reads_the_plan_and_the_translation_back(
    runs: RunRepository,
) -> None:
    run, translation = _recorded(runs)
    session = RunSession().for_run()
    assert session.readers is None and not session.translated_here
    assert session.planned_states(run) == {"app": "empty", "busy": "stable"}
    assert session.translation(lambda: run) == translation == Translation.of(run)


def test_a_session_given_the_plan_uses_it_and_shares_the_plans_translations(
    runs: RunRepository,
) -> None:
    run, translation = _recorded(runs)
    memo = TranslationMemo()
    given = RunSession(None, memo)
    session = given.for_run({"app": "dead"})
    assert session.memo is memo  # the plan's translations, reused by the translate step
    assert session.planned_states(run) == {"app": "dead"}  # as planned here, not re-read
    session.translated(translation)
    assert session.translated_here and session.translation(_never) is translation
    # Each run has its own: the engine's session for the flow keeps none of this run's values.
    assert not given.for_run().translated_here
    assert given.for_run().planned_states(run) == {"app": "empty", "busy": "stable"}
