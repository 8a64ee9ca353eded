"""A recorded step read as a value: why it failed or was skipped, its warning, its after-hooks'
mark (drkit.failover.runs.StepRecord) - and what `drkit failover show` prints of them."""

from __future__ import annotations

from drkit.failover.context import StepOutcome
from drkit.failover.model import StepName, StepState
from drkit.failover.render import run_text
from drkit.failover.results import GroupsCommitted
from drkit.failover.runs import HOOKS_AFTER, PENDING_HOOKS, StepRecord, failure_detail
from tests.unit.test_write_pause import _run, _step


def _recorded(seq: int, name: StepName, outcome: StepOutcome) -> StepRecord:
    return _step(seq, name, float(seq), outcome.state, **outcome.detail)


def test_each_key_any_step_may_record_is_read_for_the_state_that_writes_it() -> None:
    skipped = _recorded(1, StepName.SYNC_SCHEMAS, StepOutcome.skipped("schema_sync is off"))
    warned = _recorded(2, StepName.START_REVERSE_FLOW, StepOutcome.done(warning="not confirmed"))
    failed = _step(3, StepName.DRAIN, 3.0, StepState.FAILED, **failure_detail("drain timed out"))
    assert (skipped.skipped_because, skipped.warning, skipped.error) == (
        "schema_sync is off", None, None)  # fmt: skip
    assert (warned.warning, warned.skipped_because, warned.error) == ("not confirmed", None, None)
    assert (failed.error, failed.warning, failed.skipped_because) == ("drain timed out", None, None)
    # A done step's own "skipped" (the groups a commit left alone) is not a reason it skipped.
    commit = _recorded(
        4, StepName.COMMIT_GROUP_OFFSETS,
        StepOutcome.done(**GroupsCommitted({"a": 2}, {"b": "became active"}).to_detail()),
    )  # fmt: skip
    assert commit.skipped_because is None and commit.warning is None
    assert not any(s.after_hooks_pending for s in (skipped, warned, failed, commit))
    pending = _step(5, StepName.MOVE_POINTER, 5.0, StepState.DONE, **{HOOKS_AFTER: PENDING_HOOKS})
    assert pending.after_hooks_pending


def test_the_run_text_names_each_steps_problem_and_the_groups_a_commit_left_alone() -> None:
    commit = GroupsCommitted({"a": 2}, {"b": "became active on dc2 (1 members)"})
    run = _run(
        _recorded(1, StepName.SYNC_SCHEMAS, StepOutcome.skipped("schema_sync is off")),
        _recorded(2, StepName.COMMIT_GROUP_OFFSETS, StepOutcome.done(**commit.to_detail())),
        _step(3, StepName.DRAIN, 3.0, StepState.FAILED, **failure_detail("drain timed out")),
    )
    lines = run_text(run).splitlines()
    assert any("sync_schemas" in line and "schema_sync is off" in line for line in lines)
    assert any(
        "commit_group_offsets" in line
        and "left alone: b (became active on dc2 (1 members))" in line
        for line in lines
    )
    assert any("drain" in line and "drain timed out" in line for line in lines)
    assert GroupsCommitted.from_detail(run.steps[1].detail) == commit
