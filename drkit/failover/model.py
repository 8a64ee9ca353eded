"""The failover engine's vocabulary: procedures, steps, run and step states, plan values.

Everything here is a frozen value or an enum; the planner (drkit.failover.plan) produces these
from a snapshot, the engine (drkit.failover.engine) records them.  JSON forms are versioned:
``drkit.failover.plan/v2`` (:meth:`Plan.to_json`) and ``drkit.failover.run/v1``
(drkit.failover.runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

from drkit.lag import PartitionRpo, total_records
from drkit.timestamps import iso_utc

PLAN_SCHEMA = "drkit.failover.plan/v2"
RUN_SCHEMA = "drkit.failover.run/v1"


class Procedure(StrEnum):
    """The four ways drkit moves applications between clusters."""

    FAILOVER = "failover"  # unplanned: the source may be dead; promote now, report the loss
    SWITCHOVER = "switchover"  # planned: fence, drain, translate exactly, reverse replication
    CUTOVER = "cutover"  # migration: like a switchover, one way, replication stopped at the end
    FAILBACK = "failback"  # back to the original primary after a failover


class StepName(StrEnum):
    """Every step the engine knows; runbooks (runbooks/*.yaml) order them per procedure."""

    STOP_REPLICATION = "stop_replication"
    FENCE_SOURCE = "fence_source"
    RECORD_FENCE_POINT = "record_fence_point"
    DRAIN = "drain"
    ABORT_OPEN_TRANSACTIONS = "abort_open_transactions"
    TRANSLATE_OFFSETS = "translate_offsets"
    COMMIT_GROUP_OFFSETS = "commit_group_offsets"
    SYNC_SCHEMAS = "sync_schemas"
    CONFIRM_FENCE = "confirm_fence"
    MOVE_POINTER = "move_pointer"
    START_REVERSE_FLOW = "start_reverse_flow"
    # After an unplanned move: the source's other standbys follow the target (issue 48).
    HOLD_STANDBY_FLOWS = "hold_standby_flows"
    FOLLOW_STANDBYS = "follow_standbys"
    CAPTURE_DIVERGENT_TAIL = "capture_divergent_tail"
    REPLICATE_BACK = "replicate_back"
    UNFENCE_TARGET = "unfence_target"
    VERIFY = "verify"
    # Rollback steps (switchover and cutover, before the pointer moved).
    UNFENCE_SOURCE = "unfence_source"
    RESTART_REPLICATION = "restart_replication"


class RunState(StrEnum):
    RUNNING = "running"
    ROLLING_BACK = "rolling_back"  # a planned move being undone (a crash resumes the rollback)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # stopped at a step (forward or rolling back); resumable with --resume
    ROLLED_BACK = "rolled_back"  # a planned move undone: the source is primary again
    ABANDONED = "abandoned"  # given up: its premise no longer held, or an operator said so

    @property
    def in_progress(self) -> bool:
        """An engine is (or was, until it died) executing it."""
        return self in (RunState.RUNNING, RunState.ROLLING_BACK)

    @property
    def unfinished(self) -> bool:
        """Not ended: in progress, or stopped at a failed step (resume or abandon it)."""
        return self.in_progress or self is RunState.FAILED


class Direction(StrEnum):
    """Which way a run's steps go: its runbook's steps, or their rollback steps."""

    FORWARD = "forward"
    ROLLBACK = "rollback"


class StepState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"  # nothing to do (e.g. no reverse flow configured)
    ROLLED_BACK = "rolled_back"


class Severity(StrEnum):
    BLOCKER = "blocker"  # the run will not start (unless forced, where allowed)
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """Something the operator must know before the run: a blocker or a warning."""

    severity: Severity
    code: str
    message: str


@dataclass(frozen=True)
class PartitionMove:
    """Where one group resumes on one partition, and what that costs."""

    source_topic: str
    source_partition: int
    target_topic: str
    target_partition: int
    source_offset: int | None  # S: committed on the source (live or checkpointed); None: unknown
    target_offset: int | None  # T, None when it cannot be translated (see ``reason``)
    method: str  # exact / mapped / clamped / provenance / checkpoint
    expected_rereads: int | None
    unreplicated: int | None  # records of this partition at >= S the target never got
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """``asdict`` for this flat row (primitives only), without its recursive deep copy: a
        plan at 10,000 groups x 50 partitions holds 500,000 of these."""
        return dict(vars(self))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PartitionMove:
        if raw.keys() == _MOVE_FIELDS:  # written by to_json: every field, JSON's own types
            return cls(**raw)
        return cls(
            str(raw["source_topic"]), int(raw["source_partition"]), str(raw["target_topic"]),
            int(raw["target_partition"]), _int(raw.get("source_offset")),
            _int(raw.get("target_offset")), str(raw.get("method", "")),
            _int(raw.get("expected_rereads")), _int(raw.get("unreplicated")),
            str(raw.get("reason", "")),
        )  # fmt: skip


_MOVE_FIELDS = {f.name for f in fields(PartitionMove)}


@dataclass(frozen=True)
class GroupMove:
    group: str
    target_state: str  # the group's state on the target: empty, stable, absent, ...
    blocked: bool  # active on the target: offsets are not written unless forced
    partitions: tuple[PartitionMove, ...]


@dataclass(frozen=True)
class PlannedStep:
    seq: int
    name: StepName
    timeout_s: float | None
    rollback: StepName | None  # the step that undoes it, when the procedure may roll back


@dataclass(frozen=True)
class Plan:
    """Everything a run will do and cost; a pure function of a snapshot (drkit.failover.plan)."""

    procedure: Procedure
    source: str
    target: str
    flow: str
    reverse_flow: str | None
    source_reachable: bool
    translation_mode: str  # live (source committed offsets) or checkpoints
    steps: tuple[PlannedStep, ...]
    groups: tuple[GroupMove, ...]
    groups_without_checkpoint: tuple[str, ...]
    rpo: tuple[PartitionRpo, ...]
    findings: tuple[Finding, ...]
    pointer_from: str | None
    pointer_to: str
    open_transactions: tuple[str, ...] = ()
    created_at_ms: int = 0
    target_reachable: bool = True
    notes: tuple[str, ...] = field(default=())

    @property
    def blockers(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.BLOCKER]

    @property
    def rpo_records(self) -> int | None:
        """Records the target lacks in all; None (unknown) when any partition's is unknown, or
        when no partition is known at all while a cluster did not answer."""
        if not self.rpo and not (self.source_reachable and self.target_reachable):
            return None
        return total_records(self.rpo)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Plan:
        """The plan of a ``drkit.failover.plan/v2`` (or v1, as older runs stored it) document."""
        findings = [
            Finding(Severity(f["severity"]), str(f["code"]), str(f["message"]))
            for f in [*raw.get("blockers", []), *raw.get("warnings", [])]
        ]
        rpo = raw.get("rpo", {})
        return cls(
            procedure=Procedure(raw["procedure"]),
            source=str(raw["source"]),
            target=str(raw["target"]),
            flow=str(raw.get("flow", f"{raw['source']}->{raw['target']}")),
            reverse_flow=raw.get("reverse_flow"),
            source_reachable=bool(raw.get("source_reachable", False)),
            translation_mode=str(raw.get("translation_mode", "")),
            steps=tuple(
                PlannedStep(
                    int(s["seq"]),
                    StepName(s["name"]),
                    _float(s.get("timeout_s")),
                    StepName(s["rollback"]) if s.get("rollback") else None,
                )
                for s in raw.get("steps", [])
            ),
            groups=tuple(
                GroupMove(
                    str(g["group"]),
                    str(g["target_state"]),
                    bool(g["blocked"]),
                    tuple(PartitionMove.from_json(m) for m in g.get("partitions", [])),
                )
                for g in raw.get("groups", [])
            ),
            groups_without_checkpoint=tuple(raw.get("groups_without_checkpoint", [])),
            rpo=tuple(PartitionRpo.from_json(r) for r in rpo.get("partitions", [])),
            findings=tuple(findings),
            pointer_from=raw.get("pointer", {}).get("from"),
            pointer_to=str(raw.get("pointer", {}).get("to", raw["target"])),
            open_transactions=tuple(raw.get("open_transactions", [])),
            created_at_ms=_created_at_ms(raw),
            notes=tuple(raw.get("notes", [])),
            target_reachable=bool(raw.get("target_reachable", True)),
        )

    def group_rows(self) -> list[dict[str, Any]]:
        """The ``groups`` of :meth:`to_json` as stored, each group's moves packed
        (:func:`packed_moves`)."""
        return self._group_documents(PACKED_MOVES, packed_moves)

    def _group_documents(
        self, key: str, encode: Callable[[tuple[PartitionMove, ...], dict[int, Any]], Any]
    ) -> list[dict[str, Any]]:
        """One document per group, its moves under ``key`` as ``encode`` writes them (a move
        shared by groups encoded once: :func:`moves_json`, :func:`packed_moves`)."""
        seen: dict[int, Any] = {}
        return [
            {
                "group": g.group,
                "target_state": g.target_state,
                "blocked": g.blocked,
                key: encode(g.partitions, seen),
            }
            for g in self.groups
        ]

    def to_json(self, groups: bool = True) -> dict[str, Any]:
        """The ``drkit.failover.plan/v2`` document (``groups=False``: without its ``groups``,
        for a store that keeps :meth:`group_rows` apart)."""
        return {
            "schema": PLAN_SCHEMA,
            "procedure": self.procedure.value,
            "source": self.source,
            "target": self.target,
            "flow": self.flow,
            "reverse_flow": self.reverse_flow,
            "source_reachable": self.source_reachable,
            "translation_mode": self.translation_mode,
            "pointer": {"from": self.pointer_from, "to": self.pointer_to},
            "steps": [
                {
                    "seq": s.seq,
                    "name": s.name.value,
                    "timeout_s": s.timeout_s,
                    "rollback": s.rollback.value if s.rollback else None,
                }
                for s in self.steps
            ],
            **({"groups": self._group_documents("partitions", moves_json)} if groups else {}),
            "groups_without_checkpoint": list(self.groups_without_checkpoint),
            "rpo": {
                "records": self.rpo_records,
                "partitions": [p.to_json() for p in self.rpo],
            },
            "open_transactions": list(self.open_transactions),
            "blockers": [asdict(f) for f in self.blockers],
            "warnings": [asdict(f) for f in self.findings if f.severity is Severity.WARNING],
            "notes": list(self.notes),
            "created_at": iso_utc(self.created_at_ms / 1000),
            "target_reachable": self.target_reachable,
        }


MOVE_COLUMNS = tuple(f.name for f in fields(PartitionMove))
# A group's moves as stored: {"columns": MOVE_COLUMNS, "rows": [values per move]} instead of a
# dict per move - at 10,000 groups x 50 partitions 44 MB of JSON instead of 118 MB.
PACKED_MOVES = "packed_partitions"


def packed_moves(moves: tuple[PartitionMove, ...], seen: dict[int, Any]) -> dict[str, Any]:
    """``moves`` as columns and rows (see :data:`PACKED_MOVES`)."""
    return {"columns": list(MOVE_COLUMNS), "rows": _once_per_move(moves, seen, _values)}


def unpacked_moves(packed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The move dicts of :func:`packed_moves`' output (as :meth:`PartitionMove.to_json`)."""
    columns = packed["columns"]
    return [dict(zip(columns, row, strict=True)) for row in packed["rows"]]


def moves_json(moves: tuple[PartitionMove, ...], seen: dict[int, Any]) -> list[dict[str, Any]]:
    """The moves' JSON rows, one dict per move."""
    return _once_per_move(moves, seen, PartitionMove.to_json)


def _values(move: PartitionMove) -> list[Any]:
    return list(vars(move).values())  # the fields in MOVE_COLUMNS' order


def _once_per_move(
    moves: tuple[PartitionMove, ...], seen: dict[int, Any], encode: Callable[[PartitionMove], Any]
) -> list[Any]:
    """Each move encoded for one document.  Groups that committed the same offset share one
    move object (drkit.failover.plan.TranslationMemo): such a move is encoded once and its
    encoding used at each of its places - ``seen`` holds them by the move's id (the moves
    outlive the document's making, so an id is never reused meanwhile).  A document is written
    out or stored, never changed in place."""
    out = []
    for move in moves:
        encoded = seen.get(id(move))
        if encoded is None:
            encoded = seen[id(move)] = encode(move)
        out.append(encoded)
    return out


def _created_at_ms(raw: Mapping[str, Any]) -> int:
    """When the plan was made: ``created_at`` (v2, ISO-8601 UTC) or ``created_at_ms`` (v1, as
    runs stored before v2 hold it)."""
    if isinstance(raw.get("created_at"), str):
        return round(datetime.fromisoformat(raw["created_at"]).timestamp() * 1000)
    return int(raw.get("created_at_ms", 0))


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
