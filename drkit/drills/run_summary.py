"""What a drill's report says about its failover run (and failback): steps with their
durations, the write pause, the planned RPO and where each group was moved (pure)."""

from __future__ import annotations

from typing import Any

from drkit.failover.results import Translation
from drkit.failover.runs import RunRecord


def run_summary(run: RunRecord | None, failback: RunRecord | None) -> dict[str, Any] | None:
    """The report's ``failover_run`` section (None: the drill ran no failover)."""
    if run is None:
        return None
    steps = []
    for step in [*run.steps, *(failback.steps if failback is not None else ())]:
        seconds = (
            (step.finished_at - step.started_at).total_seconds()
            if step.started_at is not None and step.finished_at is not None
            else None
        )
        steps.append({"name": step.name.value, "state": step.state.value, "seconds": seconds})
    return {
        "id": run.id,
        "procedure": run.procedure.value,
        "state": run.state.value,
        "requested_by": run.requested_by,
        # A planned move's applications could not write from the fence to the pointer move.
        "write_pause_s": run.write_pause_s,
        "steps": steps,
        "rpo_estimate": run.result.rpo_json(),
        "translations": translations(run),
        "failback": None
        if failback is None
        else {"id": failback.id, "state": failback.state.value},
    }


def translations(run: RunRecord) -> list[dict[str, Any]]:
    """Where each group was moved: S on the source -> T on the target, per partition."""
    return [
        {
            "group": group.group,
            "partition": move.source_partition,
            "source_offset": move.source_offset,
            "target_offset": move.target_offset,
            "method": move.method,
        }
        for group in sorted(Translation.of(run).groups, key=lambda g: g.group)
        for move in group.partitions
    ]
