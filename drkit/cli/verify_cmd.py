"""``drkit verify``: prove on the records that nothing was skipped; count every duplicate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from drkit.cli.context import (
    GROUP,
    AppContext,
    complete_flows,
    config_option,
    echo_json,
    output_option,
    pass_app,
    writable_file,
)
from drkit.config.loader import known_flow
from drkit.config.model import DrkitConfig, FlowConfig, Role
from drkit.errors import ConfigError, ExitCode, Problem

if TYPE_CHECKING:
    from drkit.accounting.sparkjob.schema import Summary
    from drkit.store.db import StateStore

# What spark-submit accepts as --master (checked here: a bad one kills Spark's JVM noisily).
_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[.+\]|spark://.+|yarn|k8s://.+)$"
)


@click.command("verify")
@config_option
@click.option(
    "--flow",
    "flow_name",
    required=True,
    metavar="SRC->DST",
    shell_complete=complete_flows,
    help="Flow to verify.",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=GROUP,
    help="Consumer group whose failover position to check (repeatable).",
)
@click.option("--topics", default=None, help="Comma-separated source topics (default: all).")
@click.option(
    "--spark-master",
    default=None,
    help="Spark master URL (default local[*]); for spark-submit on a cluster see "
    "--write-spec and --import-summary.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Output directory for Parquet tables and summary.json "
    "[default: <state-dir>/verify/<flow>-<time>].",
)
@click.option(
    "--write-spec",
    "spec_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Only gather what to check (offset ranges, group positions) into FILE (mode 0600) "
    "and print the spark-submit command that runs the job on a cluster; Spark is not started.",
)
@click.option(
    "--import-summary",
    "summary_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Record the summary.json of a spark-submit run in the state store and report it "
    "(same output and exit code as a local run); Spark is not started.",
)
@click.option("--verbose-spark", is_flag=True, help="Show Spark's own INFO logs (default: quiet).")
@click.option(
    "--per-record",
    is_flag=True,
    help="Account record by record even when the flow's copy runs prove it healthy (slower; "
    "the same tables).",
)
@output_option
@pass_app
def verify(
    app: AppContext,
    config_file: str | None,
    flow_name: str,
    groups: tuple[str, ...],
    topics: str | None,
    spark_master: str | None,
    out_dir: str | None,
    spec_file: str | None,
    summary_file: str | None,
    verbose_spark: bool,
    per_record: bool,
    output: str,
) -> None:
    """Compare every source record with its replicas (Spark, joined on provenance).

    Per partition: records checked, replicated once, duplicated, missing (skipped by
    replication), order violations per key, unreplicated tail (RPO).  Per group: records it
    would skip or read again if it resumed at its target position.  Exit code 9 when anything
    was missing or would be skipped.
    """
    from drkit.accounting.verify import default_out, import_summary
    from drkit.accounting.verify import verify as run_verify
    from drkit.kafka import KafkaAdmin

    if spec_file is not None and summary_file is not None:
        # The two ends of one spark-submit round trip: --write-spec before the job, then
        # --import-summary of its result (one of them was silently ignored).
        why = "choose one: --write-spec gathers a check for spark-submit, --import-summary "
        raise ConfigError([Problem("--write-spec/--import-summary", why + "records its result")])
    # Refused, as every output file's option is, when its directory is missing - it was
    # created silently, so a typo put the spec (and the job's archive beside it) out of sight.
    spec_path = writable_file("--write-spec", spec_file) if spec_file is not None else None
    config = app.config(config_file).as_role(Role.VERIFIER)
    flow = known_flow(config, flow_name, "--flow")
    if spark_master is not None and not _MASTER.match(spark_master):
        raise ConfigError(
            [
                Problem(
                    "--spark-master",
                    f"{spark_master!r} is not a Spark master URL (local[N], spark://HOST:PORT, "
                    "yarn or k8s://HOST:PORT)",
                )
            ]
        )
    if topics is not None and not any(t.strip() for t in topics.split(",")):
        # an empty list read as "every topic" and ran the whole check
        raise ConfigError([Problem("--topics", "names no topic (leave it out to check all)")])
    if spec_file is None and summary_file is None:  # Spark runs here: its master answers?
        from drkit.accounting.session import require_spark_master

        require_spark_master(spark_master)
    if summary_file is None:  # both clusters are read: a refused one is named in seconds
        from drkit.kafka.clients import ClusterEndpoint, require_answering

        for alias in (flow.source, flow.target):
            require_answering(ClusterEndpoint(alias, config.clusters[alias]))
        if groups:  # before Spark: a typo'd group was dropped and the check said OK
            _require_committed(config, flow, groups)
    topic_list = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
    store = app.store(config_file)
    store.ensure_current()
    if spec_path is not None:
        _write_spec_only(
            config,
            flow,
            list(groups),
            topic_list,
            spec_path,
            out_dir,
            output,
            store,
            per_record,
        )
        return
    out = Path(out_dir) if out_dir else default_out(app.state_dir, flow)
    if summary_file is not None:
        summary = import_summary(store, flow, Path(summary_file))
    else:
        summary = run_verify(
            config,
            flow,
            list(groups),
            topic_list,
            out,
            spark_master,
            store,
            verbose_spark,
            per_record=per_record,
            connect=KafkaAdmin,
        )
    if output == "json":
        echo_json(summary)
    else:
        _print(summary)
    if not summary["ok"]:
        raise SystemExit(ExitCode.NOT_PROVEN)


def _require_committed(config: DrkitConfig, flow: FlowConfig, groups: tuple[str, ...]) -> None:
    """ConfigError (exit 2) naming each ``--group`` with no committed offsets on the flow's
    source: there is no position of it to check (Kafka answers an unknown group so too)."""
    from drkit.kafka import ClusterEndpoint, KafkaAdmin

    admin = KafkaAdmin(ClusterEndpoint(flow.source, config.clusters[flow.source]))
    try:
        committed = admin.groups_offsets(list(dict.fromkeys(groups)))
    finally:
        admin.close()
    missing = [g for g in dict.fromkeys(groups) if not (c := committed.get(g)) or not c.offsets]
    if missing:
        raise ConfigError(
            [
                Problem("--group", f"{g!r}: no committed offsets on {flow.source} (a typo?)")
                for g in missing
            ]
        )


def _write_spec_only(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: list[str] | None,
    spec_path: Path,
    out_dir: str | None,
    output: str,
    store: StateStore,
    per_record: bool,
) -> None:
    """``--write-spec``: snapshot the check for spark-submit and print how to run it."""
    import shlex

    from drkit.accounting.session import job_archive
    from drkit.accounting.spec import (
        build_spec,
        jvm_properties,
        refuse_command_line_secrets,
        submit_command,
        write_spec,
    )
    from drkit.accounting.verify import flow_keys, recorded_losses
    from drkit.kafka import KafkaAdmin

    spec = build_spec(
        config, flow, groups, topics, recorded_losses(store, flow), secrets_by_name=True,
        keys=flow_keys(config, store), connect=KafkaAdmin,
    )  # fmt: skip
    refuse_command_line_secrets(spec)  # spark-submit's JVMs are allowed it on a command line
    write_spec(spec, spec_path)
    secret_env = spec.get("secret_env") or {}
    archive = job_archive(spec_path.parent)
    command = submit_command(
        spec_path, out_dir or "<output dir on shared storage>", archive, per_record,
        jvm_properties(spec),
    )  # fmt: skip
    if output == "json":
        echo_json(
            {
                "spec": str(spec_path),
                "py_files": str(archive),
                "partitions": len(spec["partitions"]),
                "groups": len({g["group"] for g in spec["groups"]}),
                "command": command,
                "secret_env": secret_env,
            }
        )
        return
    click.echo(f"spec for {flow.name} ({len(spec['partitions'])} partitions) -> {spec_path}")
    click.echo("run it on a cluster (add --master and deploy options):")
    click.echo("  " + shlex.join(command))
    if secret_env:
        # The spec names these and holds none: the job's driver reads them when it starts.
        click.echo(
            "the job reads these secrets from its driver's environment (client mode: export "
            "them; Kubernetes: spark.kubernetes.driver.secretKeyRef.<NAME>):"
        )
        for name, what in secret_env.items():
            click.echo(f"  {name}: {what}")


# How the job accounted (summary "method"; absent from earlier summaries).
_METHODS = {"copy-runs": " (from its copy runs)", "per-record": " (record by record)"}


def _method(summary: Summary) -> str:
    return _METHODS.get(summary.get("method", ""), "")


def _print(summary: Summary) -> None:
    t = summary["totals"]
    click.echo(
        f"flow {summary['flow']}: {t['records']} source records checked in "
        f"{summary['elapsed_s']:.1f}s{_method(summary)} -> {summary['output']}"
    )
    click.echo(
        f"  replicated once {t['replicated_once']}, duplicated {t['duplicated_records']} "
        f"(+{t['extra_copies']} copies), missing {t['missing']}, "
        f"filtered by the flow {t.get('filtered', 0)}, "
        f"lost before replication {t.get('lost_before_replication', 0)}, "
        f"unreplicated tail {t['unreplicated_tail']}, order violations "
        f"{t['order_violations']}"
    )
    click.echo(
        f"  offset syncs: {t['unmapped_replicas']} replicas unmapped, "
        f"{t['mismatched_replicas']} mapped to another offset"
    )
    for note in summary.get("notes", []):
        click.echo(f"  note: {note}")
    for line in _problems(summary):
        click.echo(f"  {line}")
    for g in summary["groups"]:
        state = "exact" if g["exact"] else "NOT EXACT"
        click.echo(
            f"  group {g['group']} {g['src_topic']}-{g['src_partition']}: S={g['s']} "
            f"T={g['t']} ({g['t_kind']}) skipped {g['skipped']}, read again "
            f"{g['read_again']}: {state}"
        )
    click.echo("OK: nothing skipped or missing" if summary["ok"] else "FAILED: see above")


def _problems(summary: Summary) -> list[str]:
    """One line per damaged partition, lost range, unmapped replica set and missing range."""
    lines = [
        f"{p['src_topic']}-{p['src_partition']}: missing {p['missing']}, "
        f"duplicated {p['duplicated_records']}, order {p['order_violations']}, "
        f"unmapped {p['unmapped_replicas']}"
        for p in summary["partitions"]
        if p["missing"]
        or p["duplicated_records"]
        or p["order_violations"]
        or p["unmapped_replicas"]
    ]
    for lost in summary.get("lost_before_replication", []):
        offsets = ", ".join(f"{r['from_offset']}..{r['to_offset']}" for r in lost["ranges"])
        lines.append(
            f"LOST {lost['src_topic']}-{lost['src_partition']}: {lost['records']} records "
            f"deleted from the source before replication (offsets {offsets}; "
            f"{', '.join(lost['reasons'])})"
        )
    lines += [
        f"UNMAPPED {u['dst_topic']}-{u['dst_partition']}: {u['replicas']} replicas of "
        f"{u['src_topic']}-{u['src_partition']} (source offsets {u['first_src_offset']}.."
        f"{u['last_src_offset']}) that no offset-sync run describes"
        for u in summary.get("unmapped", [])
    ]
    lines += [
        f"missing {r['src_topic']}-{r['src_partition']} offsets "
        f"{r['from_offset']}..{r['to_offset']} ({r['records']})"
        for r in summary["missing_ranges"][:20]
    ]
    return lines


COMMANDS = [verify]
