"""Drills in the state store: one ``drills`` row per drill, its report as JSON.

A drill's row is written when it starts (state ``running``) and closed when it ends: ``finished``
with the ``drkit.drill/v1`` report (plus ``report_dir``, where the HTML and raw files went), or
``failed`` with the error.  A drill that crashed is never left ``running`` by the runner.  The
drill's own failover run lives in the drill's own store, so ``failover_run_id`` stays NULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import select

from drkit.drills.report import DrillReport, Verdict
from drkit.drills.summary import report_document
from drkit.store.db import StateStore
from drkit.store.models import Drill
from drkit.timestamps import iso_or_none, iso_utc

REPORT_DIR_KEY = "report_dir"  # added to the stored report: where the drill's files are
ERROR_KEY = "error"  # the stored "report" of a failed drill


class DrillState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


@dataclass(frozen=True)
class DrillRow:
    """One stored drill; ``report`` is parsed for finished drills, ``error`` set for failed
    ones (or when a finished drill's stored report cannot be read)."""

    id: int
    name: str
    flow: str
    state: str
    verdict: Verdict | None
    rto_s: float | None
    rpo_records: int | None
    started_at: datetime
    finished_at: datetime | None
    report_dir: str | None
    report: DrillReport | None
    error: str | None

    def summary(self) -> dict[str, Any]:
        """The row as JSON (without the report itself), for ``drkit drill list -o json``."""
        return {
            "id": self.id,
            "name": self.name,
            "flow": self.flow,
            "state": self.state,
            "verdict": self.verdict.value if self.verdict is not None else None,
            "rto_s": self.rto_s,
            "rpo_records": self.rpo_records,
            "started_at": iso_utc(self.started_at),
            "finished_at": iso_or_none(self.finished_at),
            "report_dir": self.report_dir,
            "error": self.error,
        }


def _resolved(directory: str) -> str:
    return str(Path(directory).resolve())


def _row(row: Drill) -> DrillRow:
    stored: dict[str, Any] = row.report or {}
    report: DrillReport | None = None
    error: str | None = None
    report_dir = stored.get(REPORT_DIR_KEY)
    if row.state == DrillState.FINISHED.value:
        try:
            report = DrillReport.from_json(stored)
        except (KeyError, TypeError, ValueError) as err:
            error = f"the stored report cannot be read ({type(err).__name__}: {err})"
    elif row.state == DrillState.FAILED.value:
        error = str(stored.get(ERROR_KEY) or "failed (no error recorded)")
    verdict: Verdict | None = None
    if row.verdict:
        try:
            verdict = Verdict(row.verdict)
        except ValueError:
            verdict = None
    return DrillRow(
        id=row.id,
        name=row.name,
        flow=row.flow,
        state=row.state,
        verdict=verdict,
        rto_s=row.rto_s,
        rpo_records=row.rpo_records,
        started_at=row.started_at,
        finished_at=row.finished_at,
        report_dir=str(report_dir) if report_dir is not None else None,
        report=report,
        error=error,
    )


class DrillRepository:
    def __init__(self, store: StateStore) -> None:
        self.store = store

    def start(self, name: str, flow: str) -> int:
        """A new ``running`` drill; its id."""
        with self.store.session() as session:
            row = Drill(name=name, flow=flow, state=DrillState.RUNNING.value, report={})
            session.add(row)
            session.flush()
            return row.id

    def place(self, drill_id: int, directory: str) -> None:
        """Record where the running drill keeps its files, before it touches a cluster: what
        ``drkit drill cleanup`` accepts as a drill's directory (:meth:`of_directory`)."""
        with self.store.session() as session:
            row = self._require(session.get(Drill, drill_id), drill_id)
            row.report = {**(row.report or {}), REPORT_DIR_KEY: directory}

    def of_directory(self, directory: str) -> DrillRow | None:
        """The drill recorded with ``directory`` (compared resolved), if any."""
        wanted = _resolved(directory)
        with self.store.session() as session:
            for row in session.scalars(select(Drill).order_by(Drill.id.desc())):
                stored = (row.report or {}).get(REPORT_DIR_KEY)
                if isinstance(stored, str) and _resolved(stored) == wanted:
                    return _row(row)
        return None

    def finish(self, drill_id: int, report: DrillReport, report_dir: str) -> None:
        """Close the drill with its report; ``report_dir`` is where its files were written."""
        with self.store.session() as session:
            row = self._require(session.get(Drill, drill_id), drill_id)
            row.state = DrillState.FINISHED.value
            row.verdict = report.verdict.value
            row.rto_s = report.rto.total_s if report.rto is not None else None
            row.rpo_records = report.rpo_records if report.rpo_measured else None
            row.report = {**report_document(report), REPORT_DIR_KEY: report_dir}
            row.finished_at = datetime.now(UTC)

    def fail(self, drill_id: int, error: str) -> None:
        """Close the drill as ``failed`` with ``error`` (it crashed or was interrupted); where
        it kept its files stays recorded."""
        with self.store.session() as session:
            row = self._require(session.get(Drill, drill_id), drill_id)
            row.state = DrillState.FAILED.value
            placed = (row.report or {}).get(REPORT_DIR_KEY)
            row.report = {ERROR_KEY: error, **({REPORT_DIR_KEY: placed} if placed else {})}
            row.finished_at = datetime.now(UTC)

    def get(self, drill_id: int) -> DrillRow | None:
        with self.store.session() as session:
            row = session.get(Drill, drill_id)
            return _row(row) if row is not None else None

    def latest(self, limit: int = 50) -> list[DrillRow]:
        """The latest drills, newest first."""
        with self.store.session() as session:
            rows = session.scalars(select(Drill).order_by(Drill.id.desc()).limit(limit)).all()
            return [_row(row) for row in rows]

    def reports(self, limit: int = 50) -> list[DrillReport]:
        """The reports of the latest ``limit`` finished drills, oldest first (a trend)."""
        with self.store.session() as session:
            rows = session.scalars(
                select(Drill)
                .where(Drill.state == DrillState.FINISHED.value)
                .order_by(Drill.id.desc())
                .limit(limit)
            ).all()
            found = [_row(row).report for row in reversed(rows)]
        return [report for report in found if report is not None]

    @staticmethod
    def _require(row: Drill | None, drill_id: int) -> Drill:
        if row is None:
            raise LookupError(f"no drill {drill_id} in the state store")
        return row
