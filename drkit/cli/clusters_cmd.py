"""``drkit clusters check``: can drkit reach every configured cluster?"""

from __future__ import annotations

import time

import click

from drkit.cli.context import (
    AppContext,
    config_option,
    echo_document,
    output_option,
    pass_app,
)
from drkit.errors import ExitCode, UnreachableClusterError
from drkit.kafka import ClusterEndpoint, KafkaAdmin


@click.group("clusters")
def clusters() -> None:
    """Inspect the clusters named in the config."""


@clusters.command("check")
@click.argument("aliases", nargs=-1)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per cluster.")
@config_option
@output_option
@pass_app
def check(
    app: AppContext, aliases: tuple[str, ...], timeout: float, config_file: str | None, output: str
) -> None:
    """Connect to each cluster (all, or ALIASES) and report brokers and cluster id.

    Exits 3, naming each unreachable cluster, when any cannot be reached.
    """
    config = app.config(config_file)
    chosen = list(aliases) or sorted(config.clusters)
    unknown = [a for a in chosen if a not in config.clusters]
    if unknown:
        raise click.BadParameter(f"unknown cluster(s): {', '.join(unknown)}", param_hint="ALIASES")
    results: dict[str, dict[str, object]] = {}
    failures: list[UnreachableClusterError] = []
    for alias in chosen:
        admin = KafkaAdmin(ClusterEndpoint(alias, config.clusters[alias]))
        started = time.monotonic()
        try:
            brokers = admin.wait_ready(timeout_s=timeout)
            cluster_id, controller, _ = admin.describe_cluster(timeout_s=timeout)
        except UnreachableClusterError as err:
            failures.append(err)
            results[alias] = {"reachable": False, "error": str(err)}
            continue
        results[alias] = {
            "reachable": True,
            "brokers": brokers,
            "cluster_id": cluster_id,
            "controller": controller,
            "latency_ms": round((time.monotonic() - started) * 1000, 1),
        }
    if output == "json":
        echo_document("clusters.check", {"clusters": results})
    else:
        for alias, result in results.items():
            if result["reachable"]:
                click.echo(
                    f"{alias}: ok  brokers={result['brokers']} cluster_id={result['cluster_id']} "
                    f"latency={result['latency_ms']}ms"
                )
    if failures:
        for failure in failures:
            click.echo(f"error: {failure}", err=True)
        raise SystemExit(ExitCode.UNHEALTHY)


COMMANDS = [clusters]
