"""``drkit drill``: rehearse disasters and read what the rehearsals measured.

``drkit drill list`` and ``drkit drill show [ID]`` read the drills stored in the state store
(``show -o json`` prints the stored ``drkit.drill/v1`` report, ``show -o html`` the path of its
HTML page); ``drkit drill trend`` puts the finished drills side by side, oldest first, to show
whether RTO and RPO improve; ``drkit drill cleanup DRILL`` removes what a drill killed before
its own clean-up left on the clusters.

Exit codes: 0 done; 2 bad input (e.g. no such drill).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from drkit.cli.context import (
    STORED_ID,
    AppContext,
    complete_clusters,
    config_option,
    confirm,
    echo_document,
    echo_json,
    output_option,
    pass_app,
    say,
    writable_file,
    write_file,
)
from drkit.errors import ConfigError, ExitCode, Problem
from drkit.timestamps import iso_text

if TYPE_CHECKING:
    from drkit.drills.cleanup import Survey
    from drkit.drills.repo import DrillRepository, DrillRow
    from drkit.drills.report import DrillReport
    from drkit.drills.service import DrillOutcome

_REPORT_HTML = "report.html"
_EXACT = {None: "", True: ", verified exact", False: ", NOT exact"}
_LIMIT = click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(min=1, max=100_000),
    help="At most N drills.",
)


def _repository(app: AppContext, config_file: str | None) -> DrillRepository:
    from drkit.drills.repo import DrillRepository

    store = app.store(config_file, reading=True)
    store.ensure_current()
    return DrillRepository(store)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


# -- the group -------------------------------------------------------------------------------


@click.group("drill")
def drill() -> None:
    """Rehearse disasters: scripted drills, measured RTO/RPO, reports."""


@drill.command("run")
@click.argument("scenario")
@config_option
@click.option("--skip-verify", is_flag=True, help="Leave out drkit verify (the Spark proof).")
@click.option("--spark-master", default=None, help="Spark master URL for drkit verify.")
@click.option("--keep", is_flag=True, help="Leave the drill's topics and groups on the clusters.")
@output_option
@pass_app
def run(
    app: AppContext,
    scenario: str,
    config_file: str | None,
    skip_verify: bool,
    spark_master: str | None,
    keep: bool,
    output: str,
) -> None:
    """Run SCENARIO (a file, or a shipped name: runbooks/drills/NAME.yaml) on the local
    clusters and store its report.

    Exit codes: 0 the policy was met; 9 the drill ran and the policy was breached; 1 the drill
    could not finish (its fault is undone, the cause is stored); 2 bad input.
    """
    from drkit.drills.scenario import load_scenario, require_clusters

    # The scenario and the arguments first, before what runs a drill is imported (seconds): a
    # bad one is told at once.
    loaded = load_scenario(scenario)
    config = app.config(config_file)
    # Told before the drill's machinery loads (seconds under load), as the service does.
    require_clusters(loaded, config.clusters, str(app.config_path))
    if not any(f.source == loaded.source and f.target == loaded.target for f in config.flows):
        say(f"note: {app.config_path} has no flow {loaded.source}->{loaded.target}: the drill "
            "rehearses on its own topics and flow between these clusters, not on a flow of "
            "this config (drkit drill readiness checks a configured one)")  # fmt: skip
    if not skip_verify:  # its proof needs the master: refused at the start, not at the end
        from drkit.accounting.session import require_spark_master

        require_spark_master(spark_master)
    from drkit.cli.failover_cmd import progress_printer
    from drkit.drills.service import run_drill
    from drkit.kafka import KafkaAdmin

    store = app.store(config_file, config_required=True)
    store.ensure_current()
    assert app.config_path is not None
    outcome = run_drill(
        loaded,
        config,
        app.config_path,
        store,
        app.state_dir,
        verify=not skip_verify,
        progress=progress_printer(output),
        spark_master=spark_master,
        keep=keep,
        connect=KafkaAdmin,
    )
    _emit(outcome, output, passed="PolicyMet")


@drill.command("cleanup")
@click.argument("drill_id", metavar="DRILL")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@config_option
@output_option
@pass_app
def cleanup(
    app: AppContext, drill_id: str, yes: bool, config_file: str | None, output: str
) -> None:
    """Remove what DRILL (its number from `drkit drill list`, its id or its directory) left on
    the clusters when it was killed before its own clean-up: the ACLs it granted its role
    principals (as recorded in its directory), its flows' standby guards, its runs' write
    fences, and its topics and consumer groups - only the exact names its manifest recorded
    when it started (a group whose members have not timed out yet is named and left).  Only
    a directory the state store recorded as a drill's is accepted.  Shows what it found and
    asks first (--yes: does not ask).  Safe to run again; refused while the drill still runs.

    Exit codes: 0 done; 1 not confirmed; 2 not a recorded drill (nothing was touched), or no
    terminal to ask on without --yes; 4 the drill is still running.
    """
    from drkit.drills.cleanup import clean_up, drill_directory, survey
    from drkit.kafka import KafkaAdmin

    directory = drill_directory(app.state_dir, drill_id, _repository(app, config_file))
    found = survey(directory, KafkaAdmin)
    if output == "text":
        click.echo(_survey_text(found, directory))
    if found.names or found.grants:
        confirm(f"Remove these from the clusters of drill {found.drill}?", yes)
    cleaned = clean_up(directory, KafkaAdmin)
    if output == "json":
        echo_document("drill.cleanup", cleaned.to_json())
        return
    grants = (
        f"{cleaned.grants_removed} recorded ACL grant(s) removed"
        if cleaned.record_found
        else "no grants left to remove (none recorded)"
    )
    fences = ", ".join(cleaned.fences_lifted) or "none"
    click.echo(
        f"{cleaned.drill}: {grants}; standby guards removed; fences lifted on: {fences}; "
        f"{len(cleaned.removed)} topic(s)/group(s) deleted"
    )
    if cleaned.left:
        _echo_left(cleaned.left, "run it again")


def _survey_text(found: Survey, directory: Path) -> str:
    lines = [f"drill {found.drill} ({directory}):"]
    lines.append(f"  {found.grants} recorded ACL grant(s) to remove" if found.record_found
                 else "  no ACL grants recorded")  # fmt: skip
    lines.append("  its flows' standby guards and its runs' fences to lift, where present")
    names = found.names
    lines.append(f"  {len(names)} of its topic(s)/group(s) on the clusters"
                 + (":" if names else ""))  # fmt: skip
    lines += [f"    {name}" for name in names]
    return "\n".join(lines)


def _echo_left(groups: tuple[str, ...], remedy: str) -> None:
    """Groups a clean-up had to leave, on stderr (a JSON reader's stdout stays the document)."""
    say(f"left on the clusters (their members had not gone yet): {', '.join(groups)}; {remedy}")


def _emit(
    outcome: DrillOutcome, output: str, passed: str, failed: ExitCode = ExitCode.NOT_PROVEN
) -> None:
    """The report (text or ``drkit.drill/v1``) and its page; exit ``failed`` unless
    ``passed`` (a drill that breached its policy: 9, the records disprove it)."""
    if output == "json":
        from drkit.drills.summary import report_document

        echo_json(report_document(outcome.report))
    else:
        click.echo("\n".join(_report_text(outcome.report)))
        click.echo(f"report: {outcome.html}")
    if outcome.left_on_clusters:
        _echo_left(
            outcome.left_on_clusters,
            f"remove them with `drkit drill cleanup {outcome.html.parent}`",
        )
    if outcome.report.verdict.value != passed:
        sys.exit(failed)


@drill.command("readiness")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="Current primary.",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The standby.",
)
@config_option
@output_option
@pass_app
def readiness_cmd(
    app: AppContext, source: str, target: str, config_file: str | None, output: str
) -> None:
    """Check, without moving anything, that SOURCE -> TARGET is ready to move now.

    The plan (no blockers), topic and config parity, checkpoints, replication lag, and every
    group translated, verified and committed into a shadow group (deleted again).  Stored
    like every drill.  Exit codes: 0 ready; 3 not ready (a check found a problem); 2 bad
    input (nothing run, nothing stored).
    """
    from drkit.config.loader import flow_between
    from drkit.drills.service import run_readiness
    from drkit.kafka import KafkaAdmin

    config = app.config(config_file)
    # Bad input stores no failed drill, and is told before the store is opened.
    flow_between(config, source, target)
    store = app.store(config_file, config_required=True)
    store.ensure_current()
    outcome = run_readiness(config, store, app.state_dir, source, target, connect=KafkaAdmin)
    _emit(outcome, output, passed="Ready", failed=ExitCode.UNHEALTHY)


@drill.command("list")
@_LIMIT
@config_option
@output_option
@pass_app
def list_drills(app: AppContext, limit: int, config_file: str | None, output: str) -> None:
    """The latest drills, newest first."""
    rows = _repository(app, config_file).latest(limit)
    if output == "json":
        echo_document("drill.list", {"drills": [row.summary() for row in rows]})
        return
    if not rows:
        click.echo("no drills yet")
        return
    click.echo(
        _table(
            ("ID", "SCENARIO", "STATE", "VERDICT", "RTO S", "RPO RECORDS", "STARTED (UTC)"),
            [
                (
                    str(row.id),
                    row.name,
                    row.state,
                    row.verdict.value if row.verdict is not None else "-",
                    _seconds(row.rto_s),
                    _count(row.rpo_records),
                    f"{row.started_at:%Y-%m-%d %H:%M:%S}",
                )
                for row in rows
            ],
        )
    )


@drill.command("show")
@click.argument("drill_id", metavar="[ID]", required=False, type=STORED_ID)
@config_option
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="Output format (html: the path of the drill's HTML report).",
)
@pass_app
def show(app: AppContext, drill_id: int | None, config_file: str | None, output: str) -> None:
    """One drill: verdict and why, RTO split, RPO, groups, checks (default: the latest)."""
    drills = _repository(app, config_file)
    row = drills.get(drill_id) if drill_id is not None else next(iter(drills.latest(1)), None)
    if row is None:
        if drill_id is not None:
            raise ConfigError(
                [Problem("ID", f"no drill {drill_id}; `drkit drill list` shows them")]
            )
        raise ConfigError([Problem("", "no drills yet")])
    if output == "json":
        echo_json(_document(row))
    elif output == "html":
        click.echo(str(_html_path(row)))
    else:
        click.echo(_show_text(row))


def _document(row: DrillRow) -> dict[str, Any]:
    """The stored ``drkit.drill/v1`` document of a finished drill, else the row's summary."""
    from drkit.drills.summary import report_document

    if row.report is None:
        return row.summary()
    document = report_document(row.report)
    if row.report_dir is not None:
        document["report_dir"] = row.report_dir
    return document


def _html_path(row: DrillRow) -> Path:
    if row.report_dir is None or row.report is None:
        why = row.error or f"it is {row.state}"
        raise ConfigError([Problem("ID", f"drill {row.id} has no HTML report ({why})")])
    path = Path(row.report_dir) / _REPORT_HTML
    if not path.is_file():
        raise ConfigError([Problem("ID", f"drill {row.id}'s report is missing: {path}")])
    return path


def _show_text(row: DrillRow) -> str:
    lines = [f"drill {row.id}: {row.name} (flow {row.flow}): {row.state}"]
    finished = f", finished {row.finished_at:%H:%M:%S}" if row.finished_at else ""
    lines.append(f"  started {row.started_at:%Y-%m-%d %H:%M:%S} UTC{finished}")
    if row.error:
        lines.append(f"  error: {row.error}")
    report = row.report
    if report is not None:
        lines += _report_text(report)
    if row.report_dir is not None and report is not None:
        lines += ["", f"report: {Path(row.report_dir) / _REPORT_HTML}"]
    elif row.report_dir is not None:
        lines += ["", f"its files: {row.report_dir} (`drkit drill cleanup {row.id}` removes "
                      "what it left on the clusters)"]  # fmt: skip
    return "\n".join(lines)


def _report_text(report: DrillReport) -> list[str]:
    from drkit.drills.summary import condition_lines, fault_facts, standby_lines, summary

    lines = [
        summary(report),
        f"  {report.title}" if report.title else "",
        f"  {report.mode} drill, {report.procedure} {report.source} -> {report.target}",
    ]
    lines = [line for line in lines if line]
    facts = fault_facts(report)
    if facts:
        lines.append("  fault: " + "; ".join(f"{key} {value}" for key, value in facts))
    conditions = condition_lines(report)
    if conditions:
        lines.append("  writes:")
        lines += [f"    {line}" for line in conditions]

    lines += ["", f"verdict: {report.verdict.value}"]
    lines += [f"  - {reason}" for reason in report.reasons]

    targets = report.targets
    lines.append("")
    rto = report.rto
    if rto is None:
        lines.append(f"RTO: not measured (target {targets.rto_s:g}s)")
    else:
        lines.append(f"RTO: {rto.total_s:.1f}s (target {targets.rto_s:g}s)")
        lines.append(
            f"  detection {rto.detection_s:.1f}s, decision {rto.decision_s:.1f}s, "
            f"execution {rto.execution_s:.1f}s, client resume {rto.client_resume_s:.1f}s"
        )
    rpo_target = f"{targets.rpo_records} records" + (
        f", {targets.rpo_s:g}s" if targets.rpo_s is not None else ""
    )
    lost = [p for p in report.rpo if p.records]
    lines.append(
        f"RPO: {report.rpo_records} records, {report.rpo_bytes} bytes, "
        f"{report.rpo_seconds:.1f}s (target {rpo_target}) on {len(lost)} of "
        f"{len(report.rpo)} partitions"
        if report.rpo_measured
        else f"RPO: not measured (target {rpo_target}): see the note"
    )
    lines += [
        f"  {p.topic}[{p.partition}]: {p.records} records, {p.bytes} bytes, {p.seconds:.1f}s"
        for p in lost
    ]

    if report.groups:
        skipped = sum(g.skipped for g in report.groups)
        reread = sum(g.reread for g in report.groups)
        lines += ["", f"groups: {len(report.groups)} (skipped {skipped}, re-read {reread})"]
        for group in report.groups:
            resumed = (
                "never resumed"
                if group.resumed_after_s is None
                else f"resumed after {group.resumed_after_s:.1f}s"
            )
            exact = _EXACT[group.verified_exact]
            lines.append(
                f"  {group.group}: skipped {group.skipped}, re-read {group.reread}, "
                f"{resumed}{exact}"
            )

    standbys = standby_lines(report)  # a three-cluster drill's choice and re-point
    if standbys:
        lines += ["", *standbys]

    if report.checks:
        passed = sum(1 for c in report.checks if c.passed)
        lines += ["", f"checks: {passed} of {len(report.checks)} passed"]
        for check in report.checks:
            detail = f"  {check.detail}" if check.detail else ""
            lines.append(f"  {'ok  ' if check.passed else 'FAIL'} {check.name}{detail}")

    if report.failover_run:
        run = report.failover_run
        lines += ["", f"failover run: {run.get('id', '?')} {run.get('state', '')}".rstrip()]
    lines += [f"note: {note}" for note in report.notes]
    return lines


@drill.command("trend")
@_LIMIT
@config_option
@output_option
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write the trend as an HTML page to FILE.",
)
@pass_app
def trend(
    app: AppContext, limit: int, config_file: str | None, output: str, html_file: str | None
) -> None:
    """Finished drills side by side, oldest first: RTO, RPO and verdict over time."""
    page = writable_file("--html", html_file) if html_file is not None else None
    reports = _repository(app, config_file).reports(limit)
    if page is not None:
        from drkit.drills.html import render_trend

        write_file("--html", page, render_trend(reports))
        say(f"trend page written to {html_file}")
    if output == "json":
        echo_document("drill.trend", {"points": [_trend_point(report) for report in reports]})
        return
    if not reports:
        click.echo("no finished drills yet")
        return
    click.echo(
        _table(
            _TREND_HEADER,
            [
                (
                    report.started_at[:19].replace("T", " "),
                    report.scenario,
                    report.mode,
                    _seconds(report.rto.total_s if report.rto is not None else None),
                    f"{report.targets.rto_s:g}",
                    str(report.rpo_records),
                    str(report.targets.rpo_records),
                    report.verdict.value,
                )
                for report in reports
            ],
        )
    )


_TREND_HEADER = (
    "STARTED", "SCENARIO", "MODE", "RTO S", "RTO TARGET", "RPO RECORDS", "RPO TARGET", "VERDICT"
)  # fmt: skip


def _trend_point(report: DrillReport) -> dict[str, Any]:
    return {
        "id": report.id,
        "scenario": report.scenario,
        "mode": report.mode,
        "started_at": iso_text(report.started_at),
        "rto_s": round(report.rto.total_s, 3) if report.rto is not None else None,
        "rto_target_s": report.targets.rto_s,
        "rpo_records": report.rpo_records,
        "rpo_target_records": report.targets.rpo_records,
        "rpo_seconds": report.rpo_seconds,
        "verdict": report.verdict.value,
    }


COMMANDS = [drill]
