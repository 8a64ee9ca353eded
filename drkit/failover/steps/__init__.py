"""Every step the engine can run, by name; runbooks (runbooks/*.yaml) order them.

A step is ``(StepContext, timeout_s) -> StepOutcome`` and idempotent (see
drkit.failover.context).  tests/unit/test_failover_engine_parts.py holds this table and the
runbooks' step names equal.
"""

from __future__ import annotations

from collections.abc import Callable

from drkit.failover.context import StepContext, StepOutcome
from drkit.failover.model import StepName
from drkit.failover.steps.divergence import capture_divergent_tail
from drkit.failover.steps.fencing import (
    abort_open_transactions,
    fence_source,
    unfence_source,
    unfence_target,
)
from drkit.failover.steps.offsets import commit_group_offsets, translate_offsets
from drkit.failover.steps.promotion import move_pointer, verify
from drkit.failover.steps.replication import (
    confirm_fence,
    drain,
    record_fence_point,
    replicate_back,
    restart_replication,
    start_reverse_flow,
    stop_replication,
)
from drkit.failover.steps.schemas import sync_schemas
from drkit.failover.steps.standbys import follow_standbys, hold_standby_flows

Step = Callable[[StepContext, float | None], StepOutcome]

STEPS: dict[StepName, Step] = {
    StepName.STOP_REPLICATION: stop_replication,
    StepName.FENCE_SOURCE: fence_source,
    StepName.RECORD_FENCE_POINT: record_fence_point,
    StepName.DRAIN: drain,
    StepName.ABORT_OPEN_TRANSACTIONS: abort_open_transactions,
    StepName.TRANSLATE_OFFSETS: translate_offsets,
    StepName.COMMIT_GROUP_OFFSETS: commit_group_offsets,
    StepName.SYNC_SCHEMAS: sync_schemas,
    StepName.CONFIRM_FENCE: confirm_fence,
    StepName.MOVE_POINTER: move_pointer,
    StepName.START_REVERSE_FLOW: start_reverse_flow,
    StepName.HOLD_STANDBY_FLOWS: hold_standby_flows,
    StepName.FOLLOW_STANDBYS: follow_standbys,
    StepName.CAPTURE_DIVERGENT_TAIL: capture_divergent_tail,
    StepName.REPLICATE_BACK: replicate_back,
    StepName.UNFENCE_TARGET: unfence_target,
    StepName.VERIFY: verify,
    StepName.UNFENCE_SOURCE: unfence_source,
    StepName.RESTART_REPLICATION: restart_replication,
}
