"""``drkit verify``: build the spec, run the Spark job, record the summary in the state store."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drkit.accounting import job
from drkit.accounting.session import build_session
from drkit.accounting.spec import build_spec
from drkit.config.model import DrkitConfig, FlowConfig
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
        totals = summary["totals"]
        with store.session() as session:
            session.add(
                Verification(
                    flow=flow.name,
                    ok=summary["ok"],
                    records_checked=totals["records"],
                    missing=totals["missing"],
                    duplicated=totals["duplicated_records"],
                    skipped_by_groups=totals["skipped_by_groups"],
                    summary={k: v for k, v in summary.items() if k != "partitions"},
                    output_dir=str(out),
                    started_at=started,
                    finished_at=datetime.now(UTC),
                )
            )
    return summary


def default_out(state_dir: Path, flow: FlowConfig) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return state_dir / "verify" / f"{flow.source}-{flow.target}-{stamp}"
