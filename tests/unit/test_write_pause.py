"""The applications' write pause of a move (RunRecord.write_pause_s): fence applied -> pointer
moved, shown by the run's text and its JSON; None whenever it was not measured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from drkit.failover.model import Procedure, RunState, StepName, StepState
from drkit.failover.render import run_text
from drkit.failover.run_result import RunResult
from drkit.failover.runs import RunRecord, StepRecord

T0 = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def _step(seq: int, name: StepName, at_s: float, state: StepState = StepState.DONE,
          **detail: Any) -> StepRecord:  # fmt: skip
    start = T0 + timedelta(seconds=at_s - 0.5)
    return StepRecord(seq, name, state, detail, start, T0 + timedelta(seconds=at_s))


def _run(*steps: StepRecord) -> RunRecord:
    return RunRecord(
        1, Procedure.SWITCHOVER, "dc1", "dc2", RunState.SUCCEEDED, "me", "test", {}, RunResult(),
        None, None, T0, T0 + timedelta(seconds=30), tuple(steps),
    )  # fmt: skip


def test_the_write_pause_runs_from_the_applied_fence_to_the_moved_pointer() -> None:
    run = _run(
        _step(1, StepName.FENCE_SOURCE, 2.0, topics=["orders"], pending=False),
        _step(2, StepName.DRAIN, 3.5),
        _step(3, StepName.MOVE_POINTER, 4.25, cluster="dc2"),
    )
    assert run.write_pause_s == 2.25
    assert run.to_json()["write_pause_s"] == 2.25
    assert "write pause: 2.2s (source fenced -> pointer moved)" in run_text(run)


def test_no_pause_is_claimed_without_an_applied_fence_or_a_moved_pointer() -> None:
    pending = _step(1, StepName.FENCE_SOURCE, 2.0, topics=["orders"], pending=True)
    moved = _step(3, StepName.MOVE_POINTER, 4.0)
    skipped = _step(1, StepName.FENCE_SOURCE, 2.0, StepState.SKIPPED, skipped="fencing off")
    applied = _step(1, StepName.FENCE_SOURCE, 2.0, topics=["orders"], pending=False)
    failed = _step(3, StepName.MOVE_POINTER, 4.0, StepState.FAILED, error="store down")
    for run in (_run(pending, moved), _run(skipped, moved), _run(applied), _run(applied, failed)):
        assert run.write_pause_s is None
        assert "write pause" not in run_text(run)
