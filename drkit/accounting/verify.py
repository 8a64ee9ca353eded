"""``drkit verify``: build the spec, run the Spark job, record the summary in the state store."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from drkit.accounting import job
from drkit.accounting.session import build_session, job_archive, transport_warning
from drkit.accounting.sparkjob.schema import SCHEMA, SCHEMAS, Summary
from drkit.accounting.spec import (
    build_spec,
    in_jvm_properties,
    java_options,
    jvm_properties,
    refuse_command_line_secrets,
)
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import AccountingError, ConfigError, Problem
from drkit.kafka.ports import AdminFactory
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent
from drkit.replication.loss_repo import LossRepository
from drkit.store.db import StateStore
from drkit.store.models import Verification

log = logging.getLogger(__name__)


def verify(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: list[str] | None,
    out: Path,
    master: str | None = None,
    store: StateStore | None = None,
    verbose: bool = False,
    positions: Mapping[str, Mapping[TopicPartition, int]] | None = None,
    per_record: bool = False,
    *,
    connect: AdminFactory,
) -> Summary:
    """Run one verification; returns the ``drkit.verify/v2`` summary (also in ``out``).
    ``positions``: group offsets on the target to judge instead of the live ones (spec.py);
    ``per_record``: never take the copy-run shortcut (job.run); ``connect``: how it reaches
    the clusters (drkit.kafka.ports)."""
    started = datetime.now(UTC)
    spec = build_spec(
        config, flow, groups, topics, recorded_losses(store, flow), positions,
        keys=flow_keys(config, store), connect=connect,
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    hidden = in_jvm_properties(spec)  # a token URL with a credential: kept off command lines
    if hidden and master is not None and not master.startswith("local"):
        refuse_command_line_secrets(spec)
    try:
        properties = java_options(jvm_properties(spec))
        spark = build_session(master, f"drkit verify {flow.name}", verbose, properties)
        for key, value in hidden.items():  # one JVM: the driver runs the executors' tasks
            spark.sparkContext._jvm.java.lang.System.setProperty(key, value)
        warning = transport_warning(master, dict(spark.sparkContext.getConf().getAll()))
        if warning:
            log.warning(warning)
        if master is not None and not master.startswith("local"):
            # Executors on other machines may not have drkit installed: ship the job's stages
            # (what spark-submit's --py-files does on the cluster path).
            spark.sparkContext.addPyFile(str(job_archive(out)))
    except Exception as err:  # no Java, a bad master URL, an unreachable cluster manager...
        raise spark_failure(flow, out, err) from None
    try:
        summary = run_retrying(lambda: job.run(spark, spec, str(out.resolve()), per_record))
    except Exception as err:  # Spark raises Py4J/PySpark errors with JVM stacks
        raise spark_failure(flow, out, err) from None
    finally:
        spark.stop()
    if store is not None:
        record_summary(store, summary, started, datetime.now(UTC))
    return summary


# What a cluster that just came back answers for a moment (partitions still loading, leaders
# moving).  Spark's connector gives up on them at once in its admin offset requests
# (SPARK-55561); a drill verifies right after the lost cluster returned.
TRANSIENT_KAFKA_ERRORS = (
    "UnknownTopicOrPartitionException",
    "NotLeaderOrFollowerException",
    "LeaderNotAvailableException",
)


def is_transient_kafka(error: BaseException) -> bool:
    """Whether a failed job's error names one of :data:`TRANSIENT_KAFKA_ERRORS`."""
    return any(name in str(error) for name in TRANSIENT_KAFKA_ERRORS)


def run_retrying(run: Callable[[], Summary], attempts: int = 3, wait_s: float = 5.0) -> Summary:
    """``run()`` the job; again (up to ``attempts`` in all, ``wait_s`` apart) when it failed on
    a transient Kafka error.  The job overwrites its output, so a retry starts clean."""

    def log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.warning("the Spark job met a transient Kafka error; retrying: %s", str(error)[:200])

    retrying = Retrying(
        retry=retry_if_exception(is_transient_kafka),
        stop=stop_after_attempt(attempts),
        wait=wait_fixed(wait_s),
        before_sleep=log_retry,
        reraise=True,
    )
    return retrying(run)


def flow_keys(config: DrkitConfig, store: StateStore | None) -> Callable[[str], bytes] | None:
    """Each flow's offset-sync key (drkit/store/flow_keys.py ``keys_of``; None with neither a
    signing secret nor a store: nothing verified)."""
    from drkit.store.flow_keys import keys_of

    return keys_of(config, store)


def recorded_losses(store: StateStore | None, flow: FlowConfig) -> list[LossEvent]:
    """The flow's loss events from the state store (none without a store)."""
    return [] if store is None else LossRepository(store).list(flow.name)


def spark_failure(flow: FlowConfig, out: Path, err: BaseException) -> AccountingError:
    """One sentence for a failed Spark job: its root cause, not the JVM stack around it."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by:").strip() for line in lines if "Caused by:" in line]
    reason = (causes[-1] if causes else lines[0] if lines else type(err).__name__)[:300]
    return AccountingError(
        f"flow {flow.name}: the Spark accounting job failed: {reason}. Nothing was recorded; "
        f"partial output may be in {out}. Fix the cause and run drkit verify again "
        "(--verbose-spark shows Spark's own logs)."
    )


def record_summary(
    store: StateStore, summary: Summary, started: datetime, finished: datetime
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


def import_summary(store: StateStore, flow: FlowConfig, path: Path) -> Summary:
    """Record a spark-submit run's ``summary.json`` as a local run would have; returns it."""
    summary = load_summary(path, flow)
    checked: str | float = summary["checked_at"]  # v1 (epoch seconds) or v2 (ISO-8601)
    started = (
        datetime.fromisoformat(checked).timestamp() if isinstance(checked, str) else float(checked)
    )
    record_summary(
        store,
        summary,
        datetime.fromtimestamp(started, UTC),
        datetime.fromtimestamp(started + float(summary["elapsed_s"]), UTC),
    )
    return summary


def load_summary(path: Path, flow: FlowConfig) -> Summary:
    """Read a ``summary.json`` a spark-submit run wrote; raises ConfigError when it is not one."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError([Problem("--import-summary", f"cannot read {path}: {err}")]) from None
    except ValueError as err:  # read, but no JSON (or no UTF-8): not what spark-submit wrote
        why = f"{path} is not a {SCHEMA} summary (not JSON: {err})"
        raise ConfigError([Problem("--import-summary", why)]) from None
    if not isinstance(summary, dict) or summary.get("schema") not in SCHEMAS:
        raise ConfigError([Problem("--import-summary", f"{path} is not a {SCHEMA} summary")])
    if summary.get("flow") != flow.name:
        reason = f"{path} is for flow {summary.get('flow')!r}, not {flow.name!r}"
        raise ConfigError([Problem("--import-summary", reason)])
    return cast(Summary, summary)


def default_out(state_dir: Path, flow: FlowConfig) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return state_dir / "verify" / f"{flow.source}-{flow.target}-{stamp}"
