"""A run's per-group rows live in their own table: reading the run back stays cheap at 10,000
groups, and every reader still sees the whole plan and translation (SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import func, select

from drkit.failover.model import (
    GroupMove,
    PartitionMove,
    Plan,
    PlannedStep,
    Procedure,
    StepName,
    StepState,
)
from drkit.failover.results import GroupTranslation, Translation
from drkit.failover.runs import ROWS_MARK, RunRepository
from drkit.store import StateStore
from drkit.store.models import FailoverRun, FailoverRunGroup


@pytest.fixture
def runs(empty_store: StateStore) -> RunRepository:
    empty_store.upgrade()
    return RunRepository(empty_store)


def _plan(groups: int, partitions: int = 3) -> Plan:
    moves = tuple(
        GroupMove(
            f"g{g:03d}",
            "empty",
            False,
            tuple(
                PartitionMove("orders", p, "dc1.orders", p, 100 + g, 90 + g, "exact", 0, 0)
                for p in range(partitions)
            ),
        )
        for g in range(groups)
    )
    steps = (
        PlannedStep(1, StepName.TRANSLATE_OFFSETS, None, None),
        PlannedStep(2, StepName.MOVE_POINTER, None, None),
    )
    return Plan(Procedure.FAILOVER, "dc1", "dc2", "dc1->dc2", None, False, "checkpoints",
                steps, moves, (), (), (), "dc1", "dc2")  # fmt: skip


_RPO = {"topic": "orders", "partition": 0, "source_end": 9, "replicated_end": 9,
        "records": 0, "bytes": 0, "seconds": 0.0}  # fmt: skip


def _translation_detail(groups: int) -> dict[str, Any]:
    return {
        "mode": "checkpoints",
        "groups": {
            f"g{g:03d}": {
                "target_state": "empty",
                "from_checkpoints": True,
                "partitions": [
                    PartitionMove("orders", 0, "dc1.orders", 0, 7, 5 + g, "exact", 0, 0).to_json()
                ],
            }
            for g in range(groups)
        },
        "groups_without_checkpoint": [],
        "rpo": [_RPO],
    }


def test_the_plans_rows_are_stored_apart_and_read_back_only_when_asked(
    runs: RunRepository,
) -> None:
    plan = _plan(40)
    created = runs.create(plan, "test", "why")
    with runs.store.session() as session:
        stored = session.get(FailoverRun, created.id)
        assert stored is not None
        assert "groups" not in stored.plan and stored.plan[ROWS_MARK] == 40
        assert session.scalar(select(func.count()).select_from(FailoverRunGroup)) == 40
    loaded = runs.get(created.id)
    assert loaded is not None
    assert loaded.groups_planned == 40
    assert loaded.plan_head.groups == () and loaded.pointer_from == "dc1"
    assert loaded.planned == plan  # every group and partition, in order
    assert loaded.planned_target_states() == {g.group: "empty" for g in plan.groups}
    assert loaded.to_json()["plan"]["groups"] == plan.to_json()["groups"]
    assert ROWS_MARK in loaded.to_json(rows=False)["plan"]


def test_a_steps_rows_are_stored_apart_replaced_when_it_runs_again_and_read_whole(
    runs: RunRepository,
) -> None:
    run = runs.create(_plan(2), "test", "why")
    runs.step_finished(run.id, StepName.TRANSLATE_OFFSETS, StepState.DONE, _translation_detail(5))
    runs.step_finished(run.id, StepName.TRANSLATE_OFFSETS, StepState.DONE, _translation_detail(3))
    loaded = runs.get(run.id)
    assert loaded is not None
    head = loaded.detail_head(StepName.TRANSLATE_OFFSETS)
    assert "groups" not in head and head[ROWS_MARK] == 3
    assert loaded.detail(StepName.TRANSLATE_OFFSETS) == _translation_detail(3)
    translation = Translation.of(loaded)
    assert translation.group_names == ["g000", "g001", "g002"]
    assert translation.positions()["g002"] != {}
    steps = {s["name"]: s for s in loaded.to_json()["steps"]}
    assert steps["translate_offsets"]["detail"] == _translation_detail(3)
    with runs.store.session() as session:
        parts = session.execute(
            select(FailoverRunGroup.part, func.count()).group_by(FailoverRunGroup.part)
        ).tuples()
        counts: dict[str, int] = dict(parts.all())
    assert counts == {"plan": 2, "translate_offsets": 3}


def test_a_run_stored_with_its_rows_inline_reads_as_before(runs: RunRepository) -> None:
    plan = _plan(4)
    with runs.store.session() as session:
        row = FailoverRun(kind="failover", source="dc1", target="dc2", state="running",
                          plan=plan.to_json(), result={})  # fmt: skip
        session.add(row)
        session.flush()
        run_id = row.id
    loaded = runs.get(run_id)
    assert loaded is not None
    assert loaded.planned == plan and loaded.groups_planned == 4
    assert loaded.planned_target_states() == {g.group: "empty" for g in plan.groups}
    assert loaded.to_json()["plan"] == plan.to_json()


def test_moves_are_stored_packed_and_read_back_as_the_documents_had_them(
    runs: RunRepository,
) -> None:
    """Groups that share move objects (the planner's memo) are stored as columns and rows and
    read back as one dict per move: the plan, the translation and the run's JSON are what they
    were, whether a move is shared or a group's own."""
    shared = PartitionMove("orders", 0, "dc1.orders", 0, 40, 38, "checkpoint+exact", 2, 0)
    own = PartitionMove("orders", 1, "dc1.orders", 1, None, None, "none", None, None, "why")
    groups = tuple(
        GroupMove(f"g{g}", "empty", g == 2, (shared, own) if g % 2 else (shared,)) for g in range(4)
    )
    plan = replace(_plan(0), groups=groups)
    run = runs.create(plan, "test", "why")
    translation = Translation(
        "checkpoints",
        tuple(GroupTranslation(g.group, "empty", True, g.partitions) for g in groups),
        (),
        (),
    )
    runs.step_finished(run.id, StepName.TRANSLATE_OFFSETS, StepState.DONE, translation.to_detail())
    with runs.store.session() as session:
        bodies = list(session.scalars(select(FailoverRunGroup.body)))
    rows = [body.get("value", body) for body in bodies]
    assert len(rows) == 8 and all(row.keys() & {"partitions"} == set() for row in rows)
    assert all(row["packed_partitions"]["columns"][0] == "source_topic" for row in rows)
    loaded = runs.get(run.id)
    assert loaded is not None
    assert loaded.planned == plan
    assert loaded.to_json()["plan"]["groups"] == plan.to_json()["groups"]
    assert Translation.of(loaded) == translation
    stored = loaded.detail(StepName.TRANSLATE_OFFSETS)["groups"]
    assert stored["g1"]["partitions"] == [shared.to_json(), own.to_json()]
    assert Translation.from_detail(translation.to_detail()) == translation
