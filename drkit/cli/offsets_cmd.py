"""``drkit offsets``: translate consumer-group offsets between clusters."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import click

from drkit.cli.context import (
    GROUP,
    AppContext,
    complete_clusters,
    config_option,
    echo_json,
    output_option,
    pass_app,
    say,
)
from drkit.config.model import DrkitConfig
from drkit.errors import ConfigError, ExitCode, Problem
from drkit.kafka.admin import KafkaAdmin
from drkit.offsets.lookup import (
    Report,
    find_flow,
    parse_offsets,
    translate_groups,
    translate_offsets,
)


@click.group("offsets")
def offsets() -> None:
    """Consumer-group offsets across clusters."""


@offsets.command("translate")
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=GROUP,
    help="Consumer group to translate (repeatable).",
)
@click.option(
    "--offset",
    "given",
    multiple=True,
    metavar="TOPIC:PARTITION:OFFSET",
    help="A source position kept outside Kafka (Spark, Flink, a database) to translate "
    "instead of a group (repeatable; '-' reads a JSON list of {topic, partition, offset} "
    "from stdin).",
)
@click.option(
    "--from",
    "source",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="Cluster the groups consumed from.",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="Cluster to translate to (a flow source->target must exist).",
)
@click.option(
    "--from-checkpoints",
    is_flag=True,
    help="Use the latest checkpoints even if the source is reachable (automatic when it is not).",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Check each T exactly: the record at T must be the copy of the first record a consumer "
    "at S reads on the source (read_committed, records the flow leaves out skipped).",
)
@config_option
@output_option
@pass_app
def translate(
    app: AppContext,
    groups: tuple[str, ...],
    given: tuple[str, ...],
    source: str,
    target: str,
    from_checkpoints: bool,
    verify: bool,
    config_file: str | None,
    output: str,
) -> None:
    """Where each group must resume on the target, per topic partition.

    Columns: source topic/partition, target topic/partition, S (committed on the source), T
    (resume here on the target), method (exact, mapped, provenance, clamped, checkpoint),
    expected re-reads (should be 0) and unreplicated records (RPO).  JSON output follows the
    schema drkit.offsets.translate/v1 (see drkit/offsets/lookup.py).
    """
    config = app.config(config_file)
    flow = find_flow(config, source, target)
    if bool(groups) == bool(given):
        raise ConfigError([Problem("--group/--offset", "give groups or offsets (one of the two)")])
    if given:
        if from_checkpoints:
            reason = "checkpoints are per group: given offsets translate from the offset map"
            raise ConfigError([Problem("--from-checkpoints", reason)])
        positions = parse_offsets(given, sys.stdin)
        report = translate_offsets(
            config, flow, positions, verify, keys=_keys(app, config), connect=KafkaAdmin
        )
    else:
        report = translate_groups(
            config, flow, list(groups), True if from_checkpoints else None, verify,
            keys=_keys(app, config), connect=KafkaAdmin,
        )  # fmt: skip
    if output == "json":
        echo_json(report.to_json())
    else:
        _print(report)
        for warning in report.warnings:
            say(warning, logging.WARNING)
    if report.errors:
        raise SystemExit(ExitCode.UNHEALTHY)


def _keys(app: AppContext, config: DrkitConfig) -> Callable[[str], bytes]:
    """Each flow's offset-sync key (drkit/store/flow_keys.py): derived from the signing secret,
    else from the state store (opened only then); syncs that fail it are ignored and named."""
    from drkit.store.flow_keys import keys_of

    store = app.store() if config.signing.secret is None else None
    if store is not None:
        store.ensure_current()
    keys: Callable[[str], bytes] | None = keys_of(config, store)
    assert keys is not None  # a store, or a secret to derive every key from
    return keys


def _print(report: Report) -> None:
    mode = report.mode
    if mode == "checkpoints":
        age = report.checkpoint_age_s
        why = {None: " (as asked)", False: f" ({report.flow.source} unreachable)"}.get(
            report.source_reachable, ""
        )
        click.echo(
            f"from checkpoints{why}; last checkpoint round "
            f"{'never' if age is None else f'{age:.1f}s ago'}"
        )
    header = (
        f"{'source':<34} {'target':<40} {'S':>10} {'T':>10} {'method':<10} "
        f"{'rereads':>7} {'unrepl':>7}  flags"
    )
    for group, rows in sorted(report.groups.items()):
        click.echo(f"\ngroup {group}")
        click.echo(header)
        for row in rows:
            rereads = "-" if row.expected_rereads is None else str(row.expected_rereads)
            unrepl = "-" if row.unreplicated is None else str(row.unreplicated)
            flags = ",".join(row.flags)
            check = _check(row.verified, row.verification)
            if check:
                flags = ",".join(filter(None, [flags, check]))
            click.echo(
                f"{row.source_topic + '-' + str(row.source_partition):<34} "
                f"{row.target_topic + '-' + str(row.target_partition):<40} "
                f"{row.source_offset:>10} {row.target_offset:>10} {row.method:<10} "
                f"{rereads:>7} {unrepl:>7}  {flags}"
            )
    for error in report.errors:
        where = (  # a group-wide error names no partition ("group g -:" read as a typo)
            f" {error['source_topic']}-{error.get('source_partition', '')}"
            if error.get("source_topic")
            else ""
        )
        say(
            f"group {error['group']}{where}: {error['reason']}",
            logging.ERROR,
            exit_code=int(ExitCode.UNHEALTHY),  # what the command ends with (issue 45)
        )


def _check(verified: bool | None, verification: str | None) -> str:
    """The flag text of a verification: verified, MISMATCH(<how>), or unverifiable."""
    if verified is None:
        return verification or ""
    if verified:
        return "verified"
    return f"MISMATCH({verification})" if verification else "MISMATCH"


COMMANDS = [offsets]
