"""A run's result is one typed value (drkit.failover.run_result): what earlier versions stored
loads, a change is merged key by key as before, and the document is the one they wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drkit.config import load_config_text
from drkit.failover.model import Direction, Plan, Procedure, RunState, StepName
from drkit.failover.render import run_text
from drkit.failover.run_result import Abandoned, Divergence, RunOptions, RunResult
from drkit.failover.runs import RunRepository
from drkit.lag import PartitionRpo
from drkit.status import current_status
from drkit.store import StateStore
from drkit.store.models import FailoverRun

# What a failover stopped half-way through its rollback stored, key by key, before the result
# had a type: every key the engine, the translate step and the maintenance ever wrote - the
# divergence as the first maintenance counted it (no ``offsets``), and a key no version reads.
OLD_RESULT: dict[str, Any] = {
    "options": {"force": True, "skip_verify": False, "export_file": None,
                "export_topic": None, "groups": ["app"]},
    "direction": "rollback",
    "rpo": [{"topic": "orders", "partition": 0, "source_end": 12, "replicated_end": 9,
             "records": 3, "bytes": 120, "seconds": 1.5}],
    "translated_again_for": ["app"],
    "error": "drain timed out",
    "failed_step": "drain",
    "rolled_back": ["restart_replication"],
    "rollback_error": "unfence_source: dc1 does not answer",
    "warnings": ["start_reverse_flow: not confirmed running"],
    "abandoned": {"reason": "moved by hand", "by": "cli:alice", "was": "failed"},
    "divergence": {"at": 1764000000.5, "records": 4, "per_partition": {"orders:0": 4}},
    "noted_by_a_later_version": {"kept": True},
}  # fmt: skip


@pytest.fixture
def runs(tmp_path: Path) -> RunRepository:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    return RunRepository(store)


def _plan() -> Plan:
    return Plan(Procedure.FAILOVER, "dc1", "dc2", "dc1->dc2", None, False, "checkpoints",
                (), (), (), (), (), "dc1", "dc2")  # fmt: skip


def _stored(runs: RunRepository, result: dict[str, Any]) -> int:
    """A run row written as an earlier version wrote it, ``result`` as given."""
    with runs.store.session() as session:
        row = FailoverRun(kind="failover", source="dc1", target="dc2", state="failed",
                          plan=_plan().to_json(), result=result)  # fmt: skip
        session.add(row)
        session.flush()
        return row.id


def _stored_result(runs: RunRepository, run_id: int) -> dict[str, Any]:
    with runs.store.session() as session:
        row = session.get(FailoverRun, run_id)
        assert row is not None
        return dict(row.result)


def test_a_result_stored_by_the_previous_version_loads_field_by_field(
    runs: RunRepository,
) -> None:
    run = runs.get(_stored(runs, OLD_RESULT))
    assert run is not None
    assert run.result == RunResult(
        options=RunOptions(force=True, groups=("app",)),
        direction=Direction.ROLLBACK,
        rpo=(PartitionRpo("orders", 0, 12, 9, 3, 120, 1.5),),
        translated_again_for=("app",),
        warnings=("start_reverse_flow: not confirmed running",),
        error="drain timed out",
        failed_step=StepName.DRAIN,
        rolled_back=(StepName.RESTART_REPLICATION,),
        rollback_error="unfence_source: dc1 does not answer",
        abandoned=Abandoned("moved by hand", "cli:alice", "failed"),
        divergence=Divergence({"orders:0": 4}, 0, 1764000000.5),
    )
    assert run.direction is Direction.ROLLBACK and run.rpo_records == 3
    text = run_text(run)
    assert "error: drain timed out" in text and "abandoned by cli:alice: moved by hand" in text
    # Its document is what was stored, but for the key no version reads - and the fields its
    # values did not have yet, at their defaults (the RPO's ``exact``, ``source_end_live``; the
    # ``offsets`` that divergence never counted).
    shown = run.to_json()["result"]
    known = {k: v for k, v in OLD_RESULT.items() if k != "noted_by_a_later_version"}
    assert shown == {
        **known,
        "rpo": [{**OLD_RESULT["rpo"][0], "exact": False, "source_end_live": False}],
        "divergence": {**OLD_RESULT["divergence"], "offsets": 0},
    }


def test_an_empty_or_missing_result_is_a_forward_run_with_nothing_recorded(
    runs: RunRepository,
) -> None:
    run = runs.get(_stored(runs, {}))
    assert run is not None
    assert run.result == RunResult() == RunResult.from_json(None)
    assert run.direction is Direction.FORWARD and run.rpo_records is None
    assert run.to_json()["result"] == {}


def test_a_change_is_merged_key_by_key_and_keeps_what_it_does_not_name(
    runs: RunRepository,
) -> None:
    run_id = _stored(runs, {"direction": "forward", "noted_by_a_later_version": 1})
    runs.merge_result(run_id, RunResult(translated_again_for=("app",)))
    runs.finish(run_id, RunState.ROLLED_BACK, RunResult(rolled_back=()))
    assert _stored_result(runs, run_id) == {
        "direction": "forward", "noted_by_a_later_version": 1,
        "translated_again_for": ["app"], "rolled_back": [],
    }  # fmt: skip
    run = runs.get(run_id)
    assert run is not None and run.state is RunState.ROLLED_BACK
    assert run.result.rolled_back == () and run.result.translated_again_for == ("app",)


def test_an_unknown_rpo_count_is_never_a_guessed_zero() -> None:
    known = PartitionRpo("orders", 0, 5, 2, 3, None, None)
    unknown = PartitionRpo("orders", 1, None, 2, None, None, None)
    assert RunResult(rpo=(known, known)).rpo_records == 6
    assert RunResult(rpo=(known, unknown)).rpo_records is None
    assert RunResult(rpo=()).rpo_records == 0
    assert RunResult().rpo_records is None and RunResult().rpo_json() is None


def test_every_field_round_trips_through_its_document() -> None:
    full = RunResult.from_json(OLD_RESULT)
    assert RunResult.from_json(full.to_json()) == full
    assert RunResult.from_json(RunResult().to_json()) == RunResult()


def test_the_status_document_reads_the_last_run_as_its_record(
    runs: RunRepository, tmp_path: Path
) -> None:
    """``last_failover`` in drkit.status/v2 comes from the newest run's record: a run stored by
    the previous version, its divergence as the first maintenance counted it, shows as before
    (its moment in ISO-8601 UTC)."""
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    assert current_status(config, runs.store).last_failover is None
    _stored(runs, {"direction": "forward"})
    newest = _stored(runs, OLD_RESULT)
    shown = current_status(config, runs.store).to_json()["last_failover"]
    assert shown["id"] == newest and shown["kind"] == "failover" and shown["state"] == "failed"
    assert (shown["source"], shown["target"], shown["finished_at"]) == ("dc1", "dc2", None)
    assert shown["divergence"] == {
        "at": "2025-11-24T16:00:00.500Z", "records": 4, "per_partition": {"orders:0": 4},
        "offsets": 0,
    }  # fmt: skip
