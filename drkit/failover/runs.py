"""Durable runs: one ``failover_runs`` row per run, one ``failover_steps`` row per step.

Every step's start, end, result and error is written before the engine moves on, so a run
whose process died is resumed from its last completed step and the audit trail
(``drkit failover show RUN``) tells exactly what happened.  JSON form: ``drkit.failover.run/v1``.

Per-group rows - the plan's ``groups`` and a step's ``detail.groups`` (the translation) - live
in ``failover_run_groups``, one row per group, written once; the run's JSON carries
``group_rows`` (their count) in their place.  Every step reads the run back, and at 10,000
groups x 50 partitions the rows are 500,000: a :class:`RunRecord` loads them only when asked
(``planned``, ``detail``, ``to_json``), once.  Runs stored before keep them inline.

A run's ``result`` column is read and written as a :class:`~drkit.failover.run_result.RunResult`
(a change is merged into the stored document key by key, as every version did).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, partial
from typing import Any

from sqlalchemy import delete, func, insert, select

from drkit.failover.model import (
    PACKED_MOVES,
    RUN_SCHEMA,
    Direction,
    Plan,
    Procedure,
    RunState,
    StepName,
    StepState,
    unpacked_moves,
)
from drkit.failover.run_result import RunResult
from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard, write_session
from drkit.store.models import FailoverRun, FailoverRunGroup, FailoverStep
from drkit.timestamps import iso_or_none, iso_utc

# The keys of a step's document that any step may carry, read only through StepRecord's
# properties (a step's own keys are read through drkit.failover.results' values).
ERROR_KEY, WARNING_KEY, SKIPPED_KEY = "error", "warning", "skipped"
HOOKS_BEFORE, HOOKS_AFTER, PENDING_HOOKS = "hooks_before", "hooks_after", "pending"
# ``fence_source``'s own key, written and read by drkit.failover.results.SourceFence; the one
# reader below it is RunRecord.write_pause_s (results imports this module, not the reverse).
FENCE_PENDING_KEY = "pending"


def failure_detail(message: str) -> dict[str, Any]:
    """The document of a step that failed: why."""
    return {ERROR_KEY: message}


@dataclass(frozen=True)
class StepRecord:
    """One step of a run as recorded: its state and its document (``detail``)."""

    seq: int
    name: StepName
    state: StepState
    detail: dict[str, Any]
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def error(self) -> str | None:
        """Why the step failed, as recorded (kept when a rollback changes its state)."""
        return _text(self.detail.get(ERROR_KEY))

    @property
    def skipped_because(self) -> str | None:
        """Why a skipped step had nothing to do; None unless it was skipped."""
        return _text(self.detail.get(SKIPPED_KEY)) if self.state is StepState.SKIPPED else None

    @property
    def warning(self) -> str | None:
        """What a done step warns of (a reverse flow not confirmed running): the run's result
        says it; None unless the step is done."""
        return _text(self.detail.get(WARNING_KEY)) if self.state is StepState.DONE else None

    @property
    def after_hooks_pending(self) -> bool:
        """Whether its after-hooks were recorded pending and never ran (its engine was cut off
        in between): a resume runs them."""
        return self.detail.get(HOOKS_AFTER) == PENDING_HOOKS


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


# In a run's JSON (its plan, a step's detail): the per-group list kept in failover_run_groups,
# and the key that says so (the number of rows).
ROWS_KEY = "groups"
ROWS_MARK = "group_rows"
ROWS_KEYED = "group_rows_keyed"  # the list was a mapping by group name
PLAN_PART = "plan"

RowLoader = Callable[[str], list[Any]]


def _no_rows(_part: str) -> list[Any]:
    return []


def split_rows(document: dict[str, Any]) -> tuple[dict[str, Any], list[Any] | None]:
    """``document`` without its per-group ``groups`` (a list, or a mapping by group name),
    marked with their count, and the rows; the document unchanged and None without any."""
    rows = document.get(ROWS_KEY)
    if isinstance(rows, dict):
        rest = {k: v for k, v in document.items() if k != ROWS_KEY}
        keyed = [{"key": key, "value": value} for key, value in rows.items()]
        return {**rest, ROWS_MARK: len(keyed), ROWS_KEYED: True}, keyed
    if isinstance(rows, list):
        rest = {k: v for k, v in document.items() if k != ROWS_KEY}
        return {**rest, ROWS_MARK: len(rows)}, rows
    return document, None


def unpack_row(row: Any) -> Any:
    """A stored row as its document has it: a group's packed moves
    (drkit.failover.model.packed_moves, the plan's rows and the translation's) as
    ``partitions``, one dict per move; a keyed row (``{"key", "value"}``) unpacks its value."""
    if not isinstance(row, dict):
        return row
    if row.keys() == {"key", "value"}:
        return {"key": row["key"], "value": unpack_row(row["value"])}
    packed = row.get(PACKED_MOVES)
    if packed is None:
        return row
    out = {key: value for key, value in row.items() if key != PACKED_MOVES}
    out["partitions"] = unpacked_moves(packed)
    return out


def join_rows(document: dict[str, Any], load: Callable[[], list[Any]]) -> dict[str, Any]:
    """``document`` with its per-group ``groups`` back in place (loaded only when it was
    split)."""
    if ROWS_MARK not in document:
        return document
    rest = {k: v for k, v in document.items() if k not in (ROWS_MARK, ROWS_KEYED)}
    rows = load()
    if document.get(ROWS_KEYED):
        return {**rest, ROWS_KEY: {row["key"]: row["value"] for row in rows}}
    return {**rest, ROWS_KEY: rows}


@dataclass(frozen=True)
class RunRecord:
    id: int
    procedure: Procedure
    source: str
    target: str
    state: RunState
    requested_by: str
    reason: str
    plan: dict[str, Any]
    result: RunResult
    lease_owner: str | None
    lease_expires_at: datetime | None
    started_at: datetime
    finished_at: datetime | None
    steps: tuple[StepRecord, ...]
    # Reads the run's per-group rows of a part ("plan", a step's name) from the store.
    load_rows: RowLoader = field(default=_no_rows, compare=False, repr=False)
    _rows: dict[str, list[Any]] = field(default_factory=dict, compare=False, repr=False, init=False)

    def rows(self, part: str) -> list[Any]:
        """The per-group rows of ``part``, read once per record."""
        if part not in self._rows:
            self._rows[part] = self.load_rows(part)
        return self._rows[part]

    @property
    def groups_planned(self) -> int:
        """How many groups the plan moves (without reading their rows)."""
        stored = self.plan.get(ROWS_MARK)
        return int(stored) if stored is not None else len(self.plan.get(ROWS_KEY, []))

    @property
    def duration_s(self) -> float | None:
        return run_duration_s(self.started_at, self.finished_at)

    @property
    def rpo_records(self) -> int | None:
        return self.result.rpo_records

    @property
    def write_pause_s(self) -> float | None:
        """How long the applications could not write in this move: from the source's fence
        applied (``fence_source`` done, not pending) to the pointer moved (``move_pointer``
        done), when they may write on the target.  None when not measured: no fence applied (an
        unplanned failover's source is gone; fencing off), or the pointer has not moved."""
        fence, pointer = self.step(StepName.FENCE_SOURCE), self.step(StepName.MOVE_POINTER)
        if fence is None or pointer is None or fence.state is not StepState.DONE:
            return None
        if fence.detail.get(FENCE_PENDING_KEY) is not False:  # recorded, not applied yet
            return None
        if fence.finished_at is None or pointer.finished_at is None:
            return None
        if pointer.state is not StepState.DONE:
            return None
        return round((pointer.finished_at - fence.finished_at).total_seconds(), 3)

    def step(self, name: StepName) -> StepRecord | None:
        return next((s for s in self.steps if s.name is name), None)

    def detail(self, name: StepName) -> dict[str, Any]:
        """What step ``name`` recorded, its per-group rows included (read on first use)."""
        found = self.step(name)
        if found is None:
            return {}
        return join_rows(found.detail, partial(self.rows, name.value))

    def detail_head(self, name: StepName) -> dict[str, Any]:
        """What step ``name`` recorded, without its per-group rows when they are stored apart
        (``group_rows`` counts them)."""
        found = self.step(name)
        return found.detail if found is not None else {}

    @property
    def direction(self) -> Direction:
        """Rolling back (in progress, or stopped at a failed rollback step) or forward."""
        if self.state is RunState.ROLLING_BACK:
            return Direction.ROLLBACK
        return self.result.direction or Direction.FORWARD

    @cached_property
    def planned(self) -> Plan:
        """The plan the run executes, as a value (parsed once per record: at 10,000 groups
        it holds 500,000 partition rows, read from their table only here)."""
        return Plan.from_json(join_rows(self.plan, partial(self.rows, PLAN_PART)))

    @cached_property
    def plan_head(self) -> Plan:
        """The plan without its per-group rows (``groups`` is empty when they are stored
        apart): its steps, pointer, reachability and RPO, without reading 500,000 rows."""
        return Plan.from_json(self.plan)

    def planned_target_states(self) -> dict[str, str]:
        """Per planned group, its state on the target when the run was planned - from the
        stored rows, without building their 500,000 partition values."""
        groups = join_rows(self.plan, partial(self.rows, PLAN_PART)).get(ROWS_KEY, [])
        return {str(g["group"]): str(g.get("target_state", "")) for g in groups}

    @property
    def pointer_from(self) -> str | None:
        """The active cluster when the run was planned."""
        return self.plan_head.pointer_from

    def started(self, name: StepName) -> bool:
        """Whether ``name`` began executing in this run (its intent was recorded)."""
        found = self.step(name)
        return found is not None and found.started_at is not None

    def label(self) -> str:
        return f"#{self.id} {self.procedure.value} {self.source}->{self.target}"

    def to_json(self, rows: bool = True) -> dict[str, Any]:
        """The ``drkit.failover.run/v1`` document; ``rows=False``: the per-group lists are left
        out (``group_rows`` says how many there are)."""

        def full(document: dict[str, Any], part: str) -> dict[str, Any]:
            return join_rows(document, partial(self.rows, part)) if rows else document

        return {
            "schema": RUN_SCHEMA,
            "id": self.id,
            "procedure": self.procedure.value,
            "source": self.source,
            "target": self.target,
            "state": self.state.value,
            "requested_by": self.requested_by,
            "reason": self.reason,
            "started_at": iso_utc(self.started_at),
            "finished_at": iso_or_none(self.finished_at),
            "lease_owner": self.lease_owner,
            "write_pause_s": self.write_pause_s,
            "steps": [
                {
                    "seq": s.seq,
                    "name": s.name.value,
                    "state": s.state.value,
                    "started_at": iso_or_none(s.started_at),
                    "finished_at": iso_or_none(s.finished_at),
                    "detail": full(s.detail, s.name.value),
                }
                for s in self.steps
            ],
            "result": self.result.to_json(),
            "plan": full(self.plan, PLAN_PART),
        }


def run_duration_s(started_at: datetime, finished_at: datetime | None) -> float | None:
    """Wall time from a run's start to its end (None while it has not ended)."""
    return None if finished_at is None else (finished_at - started_at).total_seconds()


def _record(row: FailoverRun, load_rows: RowLoader = _no_rows) -> RunRecord:
    return RunRecord(
        row.id,
        Procedure(row.kind),
        row.source,
        row.target,
        RunState(row.state),
        row.requested_by,
        row.reason,
        row.plan,
        RunResult.from_json(row.result),
        row.lease_owner,
        row.lease_expires_at,
        row.started_at,
        row.finished_at,
        tuple(
            StepRecord(
                s.seq, StepName(s.name), StepState(s.state), s.detail, s.started_at, s.finished_at
            )
            for s in row.steps
        ),
        load_rows,
    )


class RunRepository:
    def __init__(self, store: StateStore, guard: WriteGuard | None = None) -> None:
        self.store = store
        self.guard = guard

    def guarded(self, guard: WriteGuard) -> RunRepository:
        """The same runs, written only while ``guard``'s lease is held."""
        return RunRepository(self.store, guard)

    def _writing(self) -> Any:
        return write_session(self.store, self.guard)

    def _record(self, row: FailoverRun) -> RunRecord:
        return _record(row, partial(self.load_rows, row.id))

    def load_rows(self, run_id: int, part: str) -> list[Any]:
        """Run ``run_id``'s per-group rows of ``part`` ("plan", a step's name), in order."""
        with self.store.session() as session:
            return [
                unpack_row(body)
                for body in session.scalars(
                    select(FailoverRunGroup.body)
                    .where(FailoverRunGroup.run_id == run_id, FailoverRunGroup.part == part)
                    .order_by(FailoverRunGroup.seq)
                )
            ]

    @staticmethod
    def _store_rows(session: Any, run_id: int, part: str, rows: list[Any]) -> None:
        """Replace ``part``'s rows (a step that runs again records its rows afresh)."""
        session.execute(
            delete(FailoverRunGroup).where(
                FailoverRunGroup.run_id == run_id, FailoverRunGroup.part == part
            )
        )
        if rows:
            session.execute(
                insert(FailoverRunGroup),
                [{"run_id": run_id, "part": part, "seq": i, "body": r} for i, r in enumerate(rows)],
            )

    def create(self, plan: Plan, requested_by: str, reason: str) -> RunRecord:
        """A new RUNNING run with every planned step PENDING; the plan's per-group rows go to
        their own table."""
        document = {**plan.to_json(groups=False), ROWS_MARK: len(plan.groups)}
        groups = plan.group_rows()
        with self._writing() as session:
            row = FailoverRun(
                kind=plan.procedure.value,
                source=plan.source,
                target=plan.target,
                state=RunState.RUNNING.value,
                requested_by=requested_by,
                reason=reason,
                plan=document,
                result={},
            )
            row.steps = [
                FailoverStep(seq=step.seq, name=step.name.value, state=StepState.PENDING.value)
                for step in plan.steps
            ]
            session.add(row)
            session.flush()
            self._store_rows(session, row.id, PLAN_PART, groups or [])
            return self._record(row)

    def get(self, run_id: int) -> RunRecord | None:
        with self.store.session() as session:
            row = session.get(FailoverRun, run_id)
            return self._record(row) if row is not None else None

    def latest(self, limit: int = 50) -> list[RunRecord]:
        with self.store.session() as session:
            rows = session.scalars(
                select(FailoverRun).order_by(FailoverRun.id.desc()).limit(limit)
            ).all()
            return [self._record(row) for row in rows]

    def in_progress(self) -> list[RunRecord]:
        """Runs marked RUNNING or ROLLING_BACK (being executed, or their engine died)."""
        return self._in_states(RunState.RUNNING, RunState.ROLLING_BACK)

    def unfinished(self) -> list[RunRecord]:
        """Runs that did not end: in progress, or FAILED at a step (to resume or abandon)."""
        return self._in_states(RunState.RUNNING, RunState.ROLLING_BACK, RunState.FAILED)

    def _in_states(self, *states: RunState) -> list[RunRecord]:
        with self.store.session() as session:
            rows = session.scalars(
                select(FailoverRun)
                .where(FailoverRun.state.in_([s.value for s in states]))
                .order_by(FailoverRun.id)
            ).all()
            return [self._record(row) for row in rows]

    def counts(self) -> dict[tuple[Procedure, RunState], int]:
        """How many stored runs there are per (procedure, state)."""
        with self.store.session() as session:
            rows = session.execute(
                select(FailoverRun.kind, FailoverRun.state, func.count()).group_by(
                    FailoverRun.kind, FailoverRun.state
                )
            ).all()
            return {(Procedure(p), RunState(s)): int(n) for p, s, n in rows}

    def latest_figures(self, procedure: Procedure) -> tuple[float | None, int | None] | None:
        """(duration, RPO records) of the newest run of ``procedure``; None without one.  Reads
        three columns, not the run's plan and steps: the monitor asks every few seconds."""
        with self.store.session() as session:
            row = session.execute(
                select(FailoverRun.started_at, FailoverRun.finished_at, FailoverRun.result)
                .where(FailoverRun.kind == procedure.value)
                .order_by(FailoverRun.id.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        figures = RunResult.from_json(row.result)
        return run_duration_s(row.started_at, row.finished_at), figures.rpo_records

    def created_after(self, run_id: int) -> list[RunRecord]:
        """Runs recorded after ``run_id``, oldest first."""
        with self.store.session() as session:
            rows = session.scalars(
                select(FailoverRun).where(FailoverRun.id > run_id).order_by(FailoverRun.id)
            ).all()
            return [self._record(row) for row in rows]

    def set_lease(self, run_id: int, owner: str | None, expires_at: datetime | None) -> None:
        with self._writing() as session:
            row = session.get(FailoverRun, run_id)
            if row is not None:
                row.lease_owner, row.lease_expires_at = owner, expires_at

    def step_started(self, run_id: int, name: StepName) -> None:
        self._update_step(run_id, name, StepState.RUNNING, None, started=True)

    def step_finished(
        self, run_id: int, name: StepName, state: StepState, detail: dict[str, Any]
    ) -> None:
        self._update_step(run_id, name, state, detail, finished=True)

    def record_detail(
        self, run_id: int, name: StepName, state: StepState, detail: dict[str, Any]
    ) -> None:
        """Replace a step's detail, keeping its times (its per-group rows, when ``detail``
        only marks them, stay as stored)."""
        self._update_step(run_id, name, state, detail)

    def mark(self, run_id: int, name: StepName, state: StepState) -> None:
        """Change a step's state, keeping its detail (e.g. rolled back)."""
        self._update_step(run_id, name, state, None)

    def _update_step(
        self,
        run_id: int,
        name: StepName,
        state: StepState,
        detail: dict[str, Any] | None,
        started: bool = False,
        finished: bool = False,
    ) -> None:
        now = datetime.now(UTC)
        with self._writing() as session:
            step = session.scalars(
                select(FailoverStep).where(
                    FailoverStep.run_id == run_id, FailoverStep.name == name.value
                )
            ).first()
            if step is None:  # a rollback step: appended after the planned ones
                last = session.scalars(
                    select(FailoverStep.seq)
                    .where(FailoverStep.run_id == run_id)
                    .order_by(FailoverStep.seq.desc())
                ).first()
                step = FailoverStep(run_id=run_id, seq=(last or 0) + 1, name=name.value)
                session.add(step)
            step.state = state.value
            if detail is not None:
                step.detail, rows = split_rows(detail)
                if rows is not None:
                    self._store_rows(session, run_id, name.value, rows)
            if started:
                step.started_at, step.finished_at = now, None
            if finished:
                step.finished_at = now

    def finish(self, run_id: int, state: RunState, result: RunResult | None = None) -> None:
        """Set the run's state (an end state stamps ``finished_at``) and merge ``result``'s set
        fields into the stored one."""
        with self._writing() as session:
            row = session.get(FailoverRun, run_id)
            if row is not None:
                row.state = state.value
                row.result = _merged(row.result, result)
                row.finished_at = None if state.in_progress else datetime.now(UTC)
                if not state.in_progress:
                    row.lease_owner, row.lease_expires_at = None, None

    def merge_result(self, run_id: int, result: RunResult) -> None:
        """Record ``result``'s set fields in the run's result (the others stay as stored)."""
        with self._writing() as session:
            row = session.get(FailoverRun, run_id)
            if row is not None:
                row.result = _merged(row.result, result)

    def last_completed_move(self, source: str, target: str) -> RunRecord | None:
        """The newest succeeded run that moved the pointer from ``source`` to ``target``."""
        with self.store.session() as session:
            row = session.scalars(
                select(FailoverRun)
                .where(
                    FailoverRun.source == source,
                    FailoverRun.target == target,
                    FailoverRun.state == RunState.SUCCEEDED.value,
                )
                .order_by(FailoverRun.id.desc())
            ).first()
            return self._record(row) if row is not None else None


def _merged(stored: dict[str, Any] | None, change: RunResult | None) -> dict[str, Any]:
    """The stored result document with ``change``'s set fields written over it, key by key (a
    key this version does not know stays)."""
    return {**(stored or {}), **(change.to_json() if change is not None else {})}
