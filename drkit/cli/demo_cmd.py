"""``drkit demo``: drkit's main job on the embedded local default - a full DR drill.

Brings up dc1 and dc2 (if needed) and runs the drill ``unplanned-loss-of-dc1``
(runbooks/drills/): a transactional workload with aborted transactions on dc1 (so dc1's offsets
are not dc2's), two consumer groups, replication with checkpoints, dc1's brokers killed, the
monitor declaring it unavailable, drkit's failover to dc2, the groups resuming there from
translated offsets, the Spark proof (``drkit verify``), and a report (HTML + JSON) stored in the
state store.
"""

from __future__ import annotations

import sys

import click

from drkit.cli.context import AppContext, pass_app
from drkit.drills.report import DrillReport
from drkit.errors import ConfigError, ExitCode, Problem

DEMO_CLUSTERS = ("dc1", "dc2")  # what the demo brings up when they are not there


@click.command("demo")
@click.option(
    "--scenario",
    default="unplanned-loss-of-dc1",
    show_default=True,
    help="The drill to run (a shipped name or a file).",
)
@click.option(
    "--skip-verify",
    is_flag=True,
    help="Leave out the Spark accounting run (saves ~30 s).",
)
@pass_app
def demo(app: AppContext, scenario: str, skip_verify: bool) -> None:
    """Run a full DR drill on local dc1/dc2: lose dc1, fail over, resume, prove, report."""
    from drkit.drills.scenario import load_scenario
    from drkit.kafka import KafkaAdmin
    from drkit.local import LocalKafka

    loaded = load_scenario(scenario)  # a bad scenario told before the drill's imports (seconds)
    local = LocalKafka(app.state_dir, connect=KafkaAdmin)
    # Refused before a cluster starts or the local config is rewritten: the demo runs on
    # dc1 and dc2 (made on first use) or the local clusters there are.
    there = sorted({*DEMO_CLUSTERS, *local.cluster_names()})
    unknown = [a for a in (loaded.source, loaded.target) if a not in there]
    if unknown:
        raise ConfigError([Problem("--scenario", (
            f"{loaded.name} names {', '.join(unknown)}, not a local cluster (the demo runs on "
            f"{', '.join(there)}); nothing was done"
        ))])  # fmt: skip
    from drkit.cli.failover_cmd import progress_printer
    from drkit.config import load_config
    from drkit.config_checks import CONFIG_CHECKS
    from drkit.drills.service import run_drill
    from drkit.local.config_writer import require_config_writable, write_local_config
    from drkit.store import StateStore

    require_config_writable(app.state_dir)
    click.echo(f"1. starting local {loaded.source} and {loaded.target} (first run: Kafka's jars)")
    statuses = local.up([loaded.source, loaded.target])
    config_path = write_local_config(app.state_dir, statuses)
    config = load_config(config_path, checks=CONFIG_CHECKS)
    store = StateStore(app.store_url(config))
    store.ensure_current()
    click.echo(f"2. drill {loaded.name!r}: {loaded.title}")
    outcome = run_drill(
        loaded,
        config,
        config_path,
        store,
        app.state_dir,
        verify=not skip_verify,
        progress=progress_printer("text"),
        connect=KafkaAdmin,
    )
    _summary(outcome.report)
    click.echo(f"report: {outcome.html}")
    click.echo(
        f"        {outcome.json} (drkit drill show {outcome.drill_id}); the clusters keep "
        "running ('drkit local down' stops them)"
    )
    if outcome.report.verdict.value != "PolicyMet":
        sys.exit(ExitCode.NOT_PROVEN)


def _summary(report: DrillReport) -> None:
    run = report.failover_run or {}
    moves = run.get("translations", [])
    click.echo(f"3. where each group resumes on {report.target} (offsets differ: transactions)")
    click.echo(f"   {'group':<34} {'part':>4} {'S on ' + report.source:>9} "
               f"{'T on ' + report.target:>9}  method")  # fmt: skip
    for move in moves:
        click.echo(
            f"   {move['group']:<34} {move['partition']:>4} "
            f"{move['source_offset'] if move['source_offset'] is not None else '-':>9} "
            f"{move['target_offset'] if move['target_offset'] is not None else '-':>9}  "
            f"{move['method']}"
        )
    rto = report.rto
    if rto is not None:
        click.echo(
            f"4. RTO {rto.total_s:.1f}s = detection {rto.detection_s:.1f}s + decision "
            f"{rto.decision_s:.1f}s + failover {rto.execution_s:.1f}s + clients "
            f"{rto.client_resume_s:.1f}s (target {report.targets.rto_s:.0f}s)"
        )
    click.echo(
        f"   RPO {report.rpo_records} records, {report.rpo_bytes} bytes, "
        f"{report.rpo_seconds:.1f}s (records dc1 acknowledged that never reached dc2)"
    )
    for group in report.groups:
        click.echo(f"   {group.group}: {group.skipped} skipped, {group.reread} re-read")
    if report.accounting is not None:
        from drkit.drills.checks import verify_lost

        totals = report.accounting.get("totals", {})
        agrees = next((c for c in report.checks if c.name == "accounting_agrees"), None)
        click.echo(
            f"5. Spark proof (drkit verify): {totals.get('records')} records checked, "
            f"{verify_lost(totals)} never reached dc2 (the RPO), {totals.get('skipped_by_groups')} "
            f"skipped and {totals.get('read_again_by_groups')} read again by the groups, "
            f"{totals.get('duplicated_records')} duplicated - "
            + ("the same as the recount" if agrees and agrees.passed else "NOT the recount")
        )
    passed = sum(1 for c in report.checks if c.passed)
    click.echo(f"verdict: {report.verdict.value} ({passed} of {len(report.checks)} checks passed)")
    for reason in report.reasons:
        click.echo(f"  - {reason}")


COMMANDS = [demo]
