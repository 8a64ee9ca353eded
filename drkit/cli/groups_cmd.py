"""``drkit groups lag``: where each consumer group stands on a cluster, partition by partition
(what ``kafka-consumer-groups --describe`` shows, in drkit's JSON envelope too)."""

from __future__ import annotations

import click

from drkit.cli.context import (
    GROUP,
    AppContext,
    complete_clusters,
    config_option,
    echo_document,
    output_option,
    pass_app,
)
from drkit.config.loader import known_cluster
from drkit.errors import ConfigError, Problem


@click.group("groups")
def groups() -> None:
    """Consumer groups on a cluster."""


@groups.command("lag")
@click.option(
    "--cluster",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="Where to look.",
)
@click.option(
    "--group",
    "names",
    multiple=True,
    metavar="GROUP",
    type=GROUP,
    help="Only this group (repeatable; default: every group but drkit's own).",
)
@config_option
@output_option
@pass_app
def lag(
    app: AppContext, cluster: str, names: tuple[str, ...], config_file: str | None, output: str
) -> None:
    """Per group and partition: committed offset, end (last stable offset), lag in offsets
    and the group's state and members.  Lag is an upper bound on records (transaction markers
    take offsets); an end the cluster did not give is shown as unknown, never as 0.

    Exits 2 when a --group has no committed offsets there."""
    from drkit.health.group_lag import lag_rows
    from drkit.kafka import ClusterEndpoint, KafkaAdmin
    from drkit.kafka.clients import require_answering
    from drkit.topology.internal_topics import is_own_group

    config = app.config(config_file)
    known_cluster(config, cluster, "--cluster")
    endpoint = ClusterEndpoint(cluster, config.clusters[cluster])
    admin = KafkaAdmin(endpoint)  # settings librdkafka refuses: bad input, before any network
    require_answering(endpoint)  # a cluster down: told in seconds, not at the call's timeout
    # complete: a listing some broker did not answer is not "no groups"
    wanted = list(names) or sorted(
        g for g in admin.list_groups(complete=True) if not is_own_group(g)
    )
    committed = admin.groups_offsets(wanted)
    missing = [g for g in names if not committed.get(g) or not committed[g].offsets]
    if missing:
        raise ConfigError(
            [Problem("--group", f"no committed offsets on {cluster}: {', '.join(missing)}")]
        )
    partitions = {tp for offsets in committed.values() for tp in offsets.offsets}
    ends = admin.list_offsets(partitions, "latest", isolation="read_committed")
    states = admin.describe_groups(list(committed))
    rows = lag_rows(
        {
            g: {(tp.topic, tp.partition): o for tp, o in c.offsets.items()}
            for g, c in committed.items()
        },
        {(tp.topic, tp.partition): end for tp, end in ends.items()},
        {g: (s.state, s.members) for g, s in states.items()},
    )
    if output == "json":
        echo_document("groups.lag", {"cluster": cluster, "rows": [r.to_json() for r in rows]})
        return
    header = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "STATE", "MEMBERS")
    table = [header] + [
        (r.group, r.topic, str(r.partition), str(r.committed),
         "unknown" if r.end is None else str(r.end),
         "unknown" if r.lag_offsets is None else str(r.lag_offsets), r.state, str(r.members))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if not rows:
        click.echo(f"no consumer group with committed offsets on {cluster}")


COMMANDS = [groups]
