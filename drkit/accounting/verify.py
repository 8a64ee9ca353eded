"""``drkit verify``: build the spec, run the Spark job, record the summary in the state store."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drkit.accounting import job
from drkit.accounting.session import build_session
from drkit.accounting.spec import build_spec
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import ConfigError, Problem
from drkit.store.db import StateStore
from drkit.store.models import Verification


def verify(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: list[str] | None,
    out: Path,
    master: str | None = None,
    store: StateStore | None = None,
    verbose: bool = False,
) -> dict[str, Any]:
    """Run one verification; returns the ``drkit.verify/v1`` summary (also in ``out``)."""
    started = datetime.now(UTC)
    spec = build_spec(config, flow, groups, topics)
    out.mkdir(parents=True, exist_ok=True)
    spark = build_session(master, f"drkit verify {flow.name}", verbose)
    try:
        summary = job.run(spark, spec, str(out.resolve()))
    finally:
        spark.stop()
    if store is not None:
        record_summary(store, summary, started, datetime.now(UTC))
    return summary


def record_summary(
    store: StateStore, summary: dict[str, Any], started: datetime, finished: datetime
) -> None:
    """Store the summary row of one run (local, or imported from a spark-submit run)."""
    totals = summary["totals"]
    with store.session() as session:
        session.add(
            Verification(
                flow=summary["flow"],
                ok=summary["ok"],
                records_checked=totals["records"],
                missing=totals["missing"],
                duplicated=totals["duplicated_records"],
                skipped_by_groups=totals["skipped_by_groups"],
                summary={k: v for k, v in summary.items() if k != "partitions"},
                output_dir=str(summary.get("output") or ""),
                started_at=started,
                finished_at=finished,
            )
        )


def load_summary(path: Path, flow: FlowConfig) -> dict[str, Any]:
    """Read a ``summary.json`` a spark-submit run wrote; raises ConfigError when it is not one."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError([Problem("--import-summary", f"cannot read {path}: {err}")]) from None
    if not isinstance(summary, dict) or summary.get("schema") != job.SCHEMA:
        raise ConfigError([Problem("--import-summary", f"{path} is not a {job.SCHEMA} summary")])
    if summary.get("flow") != flow.name:
        reason = f"{path} is for flow {summary.get('flow')!r}, not {flow.name!r}"
        raise ConfigError([Problem("--import-summary", reason)])
    return summary


def default_out(state_dir: Path, flow: FlowConfig) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return state_dir / "verify" / f"{flow.source}-{flow.target}-{stamp}"
