"""A run's result, as a typed value: what the run as a whole ended with.

Beside its steps' outcomes (drkit.failover.results) a run keeps one small document, its
``result`` (the ``failover_runs.result`` JSON column, ``result`` in ``drkit.failover.run/v1``):
the operator's choices it runs with, its direction, and what the engine, the translate step and
the monitor's maintenance recorded about it as a whole.  :class:`RunResult` is that document as
one frozen value - the engine, the renderers, the drills, automation and the status read its
fields, never its keys.

The stored shape is the one every earlier version wrote: a JSON object whose keys appear only
once set (``{}`` for a run just created), so a run stored by any version loads
(:meth:`RunResult.from_json` reads each key as it was written, absent keys as unset).  The store
merges a change into the stored object key by key (:meth:`RunResult.to_json` of the change: only
its set fields), as it always did - a key it does not know survives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from drkit.failover.model import Direction, StepName
from drkit.lag import PartitionRpo

T = TypeVar("T")


@dataclass(frozen=True)
class RunOptions:
    """Operator choices that change what steps do (recorded with the run)."""

    force: bool = False  # write offsets into groups active on the target
    skip_verify: bool = False  # cutover: no final Spark accounting
    export_file: str | None = None  # failback: where the divergent tail goes (JSON lines)
    export_topic: str | None = None  # failback: or into CLUSTER:TOPIC
    groups: tuple[str, ...] | None = None  # only these groups (default: the flow's groups)
    # abort_open_transactions also aborts other producers' transactions open on the target
    abort_hanging_transactions: bool = False

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "force": self.force,
            "skip_verify": self.skip_verify,
            "export_file": self.export_file,
            "export_topic": self.export_topic,
            "groups": list(self.groups) if self.groups is not None else None,
        }
        if self.abort_hanging_transactions:  # written once asked: earlier documents unchanged
            document["abort_hanging_transactions"] = True
        return document

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RunOptions:
        groups = raw.get("groups")
        return cls(
            bool(raw.get("force", False)),
            bool(raw.get("skip_verify", False)),
            raw.get("export_file"),
            raw.get("export_topic"),
            tuple(groups) if groups is not None else None,
            bool(raw.get("abort_hanging_transactions", False)),
        )


@dataclass(frozen=True)
class Divergence:
    """An old primary's records beyond the failover point, counted once it answered again:
    visible records per partition, and the same span in offsets (markers included)."""

    per_partition: Mapping[str, int]
    offsets: int
    at: float = field(default_factory=time.time)

    @property
    def records(self) -> int:
        return sum(self.per_partition.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "records": self.records,
            "per_partition": dict(self.per_partition),
            "offsets": self.offsets,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Divergence:
        """A stored report (written before ``offsets`` was counted: 0)."""
        return cls(
            {str(k): int(v) for k, v in (raw.get("per_partition") or {}).items()},
            int(raw.get("offsets") or 0),
            float(raw.get("at") or 0.0),
        )


@dataclass(frozen=True)
class Abandoned:
    """Who gave an unfinished run up, why, and what state it was in then."""

    reason: str
    by: str
    was: str

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "by": self.by, "was": self.was}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Abandoned:
        return cls(str(raw.get("reason", "")), str(raw.get("by", "")), str(raw.get("was", "")))


@dataclass(frozen=True)
class RunResult:
    """A run's result.  Every field is unset (None; ``warnings`` empty) until recorded:

    * ``options`` and ``direction`` - recorded when the run is created; a rollback turns the
      direction (a resume goes on that way; unset reads as forward).
    * ``rpo`` - per source partition, what the target lacked when the translate step ran.
    * ``translated_again_for`` - the groups a resume translated again (they read on since).
    * ``pointer``, ``warnings`` - where a succeeded run left the pointer; its steps' warnings.
    * ``error``, ``failed_step`` - why and where it stopped or turned back.
    * ``rolled_back``, ``rollback_error`` - the undo steps that ran; the ones that failed.
    * ``abandoned`` - given up by an operator or a resume whose premise broke.
    * ``divergence`` - the old primary's records beyond the failover point (the maintenance).
    """

    options: RunOptions | None = None
    direction: Direction | None = None
    rpo: tuple[PartitionRpo, ...] | None = None
    translated_again_for: tuple[str, ...] | None = None
    pointer: str | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    failed_step: StepName | None = None
    rolled_back: tuple[StepName, ...] | None = None
    rollback_error: str | None = None
    abandoned: Abandoned | None = None
    divergence: Divergence | None = None

    @property
    def rpo_records(self) -> int | None:
        """Records the target never got, as the run's translation counted them; None when it
        did not get that far or any partition's count is unknown (never a guessed 0)."""
        if self.rpo is None or any(r.records is None for r in self.rpo):
            return None
        return sum(r.records or 0 for r in self.rpo)

    def rpo_json(self) -> list[dict[str, Any]] | None:
        """The RPO rows as the run's document has them (None: not translated yet)."""
        return None if self.rpo is None else [r.to_json() for r in self.rpo]

    def to_json(self) -> dict[str, Any]:
        """The stored document: the set fields only (a change merged into a stored result
        overwrites exactly these keys)."""
        out: dict[str, Any] = {}
        if self.options is not None:
            out["options"] = self.options.to_json()
        if self.direction is not None:
            out["direction"] = self.direction.value
        if self.rpo is not None:
            out["rpo"] = self.rpo_json()
        if self.translated_again_for is not None:
            out["translated_again_for"] = list(self.translated_again_for)
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.error is not None:
            out["error"] = self.error
        if self.failed_step is not None:
            out["failed_step"] = self.failed_step.value
        if self.rolled_back is not None:
            out["rolled_back"] = [s.value for s in self.rolled_back]
        if self.rollback_error is not None:
            out["rollback_error"] = self.rollback_error
        if self.abandoned is not None:
            out["abandoned"] = self.abandoned.to_json()
        if self.divergence is not None:
            out["divergence"] = self.divergence.to_json()
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> RunResult:
        """A stored result, as any version wrote it (absent keys: unset; unknown ones are left
        to the stored document)."""
        raw = raw or {}
        options, direction = raw.get("options"), raw.get("direction")
        abandoned, divergence = raw.get("abandoned"), raw.get("divergence")
        failed_step = raw.get("failed_step")
        return cls(
            options=RunOptions.from_json(options) if isinstance(options, Mapping) else None,
            direction=Direction(direction) if direction is not None else None,
            rpo=_rows(raw.get("rpo"), PartitionRpo.from_json),
            translated_again_for=_names(raw.get("translated_again_for")),
            pointer=_text(raw.get("pointer")),
            warnings=tuple(str(w) for w in raw.get("warnings") or ()),
            error=_text(raw.get("error")),
            failed_step=StepName(failed_step) if failed_step is not None else None,
            rolled_back=_rows(raw.get("rolled_back"), StepName),
            rollback_error=_text(raw.get("rollback_error")),
            abandoned=Abandoned.from_json(abandoned) if isinstance(abandoned, Mapping) else None,
            divergence=(
                Divergence.from_json(divergence) if isinstance(divergence, Mapping) else None
            ),
        )


def _text(raw: Any) -> str | None:
    return None if raw is None else str(raw)


def _names(raw: Sequence[Any] | None) -> tuple[str, ...] | None:
    return None if raw is None else tuple(str(name) for name in raw)


def _rows(raw: Sequence[Any] | None, read: Callable[[Any], T]) -> tuple[T, ...] | None:
    return None if raw is None else tuple(read(row) for row in raw)
