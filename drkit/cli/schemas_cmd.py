"""``drkit schemas sync``: copy a flow's source schema registry to its target's, ids kept
(drkit.schemas.sync).  The replication worker does the same every ``schema_sync.interval_s``;
this is the operator's hand on it - before a drill, after a conflict was settled."""

from __future__ import annotations

import click

from drkit.cli.context import (
    AppContext,
    complete_flows,
    config_option,
    echo_document,
    output_option,
    pass_app,
)
from drkit.config.loader import known_flow
from drkit.errors import ConfigError, Problem, SchemaRegistryError
from drkit.schemas.catalogue import drift_lines


@click.group("schemas")
def schemas() -> None:
    """Schema registries: copy a flow's source registry to its target's."""


@schemas.command("sync")
@click.option(
    "--flow",
    "flow_name",
    required=True,
    metavar="SRC->DST",
    shell_complete=complete_flows,
    help="The flow whose registries to sync.",
)
@click.option("--dry-run", is_flag=True, help="Show what is missing; copy nothing.")
@config_option
@output_option
@pass_app
def sync(
    app: AppContext, flow_name: str, dry_run: bool, config_file: str | None, output: str
) -> None:
    """Copy what the source's registry has and the target's lacks, ids kept; refuse (exit 1,
    nothing copied) when the two conflict - one id, two schemas."""
    from drkit.schemas.sync import SchemaSynchronizer

    config = app.config(config_file)
    flow = known_flow(config, flow_name, "--flow")
    for end in (flow.source, flow.target):
        if config.clusters[end].schema_registry is None:
            raise ConfigError([Problem("--flow", f"cluster {end!r} has no schema_registry")])
    synchronizer = SchemaSynchronizer.of(config, flow)
    source, plan = synchronizer.plan()
    if dry_run:
        if output == "json":
            echo_document(
                "schemas.plan",
                {
                    "flow": flow.name,
                    "source_versions": len(source),
                    "present": plan.present,
                    "missing_ids": list(plan.missing_ids()),
                    "conflicts": list(plan.conflicts),
                },
            )
        else:
            lines = drift_lines(plan, flow.target)
            click.echo("\n".join(lines or [f"{flow.target}'s registry has every schema"]))
        if plan.conflicts:
            raise SchemaRegistryError(f"the registries of {flow.name} conflict")
        return
    result = synchronizer.sync()
    if output == "json":
        echo_document("schemas.sync", {"flow": flow.name, **result.to_json()})
        return
    click.echo(
        f"{flow.name}: {result.copied} subject version(s) copied "
        f"(ids {', '.join(map(str, result.ids)) or '-'}), {result.present} already there"
    )


COMMANDS = [schemas]
