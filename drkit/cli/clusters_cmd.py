"""``drkit clusters check``: can drkit reach every configured cluster?"""

from __future__ import annotations

import logging
import time
from functools import partial

import click

from drkit.access.doctor import NO_BROKER, one_cluster
from drkit.cli.context import (
    AppContext,
    check_timeout_option,
    chosen_clusters,
    config_option,
    echo_document,
    output_option,
    pass_app,
    say,
)
from drkit.config.model import DrkitConfig
from drkit.errors import ExitCode, UnreachableClusterError
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.clients import FIRST_ANSWER_S, not_answering
from drkit.kafka.interruptible import InFlight


@click.group("clusters")
def clusters() -> None:
    """Inspect the clusters named in the config."""


@clusters.command("check")
@click.argument("aliases", nargs=-1)
@check_timeout_option
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
    chosen = chosen_clusters(config, aliases)
    # Every cluster at once (the slowest sets the time, not their sum), each refused at once
    # when no bootstrap server takes a TCP connection - a stopped broker is known in
    # microseconds, not at the Kafka client's timeout.  On daemon threads waited on here: a
    # Ctrl-C acts at once, not after the slowest check (drkit.kafka.interruptible).
    checks = {a: InFlight(partial(_check_one, config, a, timeout)) for a in chosen}
    answers = {alias: check.wait() for alias, check in checks.items()}
    results = {alias: result for alias, (result, _error) in answers.items()}
    failures = [error for _result, error in answers.values() if error is not None]
    # A cluster that answers with no broker in its metadata is not ok: drkit cannot use it
    # (a principal denied DESCRIBE on the cluster sees none).
    blind = [a for a, r in results.items() if r["reachable"] and not r["brokers"]]
    for alias in blind:
        results[alias]["error"] = f"cluster '{alias}': {NO_BROKER}"
    ids = {a: str(r["cluster_id"]) for a, r in results.items() if r.get("cluster_id")}
    shared = one_cluster(ids)
    if output == "json":
        echo_document("clusters.check", {"clusters": results, "warnings": shared})
    else:
        for alias, result in results.items():
            if result["reachable"] and alias not in blind:
                click.echo(
                    f"{alias}: ok  brokers={result['brokers']} cluster_id={result['cluster_id']} "
                    f"latency={result['latency_ms']}ms"
                )
    for warning in shared:  # two aliases, one cluster: a failover between them moves nothing
        say(warning, logging.WARNING)
    if failures or blind:
        # Each line carries the exit status it ends the command with, as the error boundary's
        # lines do: a reader of --log-format json needs no second source for it.
        for failure in failures:
            say(str(failure), logging.ERROR, cluster=failure.cluster, exit_code=failure.exit_code)
        for alias in blind:
            say(str(results[alias]["error"]), logging.ERROR, cluster=alias,
                exit_code=int(ExitCode.UNHEALTHY))  # fmt: skip
        raise SystemExit(ExitCode.UNHEALTHY)


def _check_one(
    config: DrkitConfig, alias: str, timeout: float
) -> tuple[dict[str, object], UnreachableClusterError | None]:
    endpoint = ClusterEndpoint(alias, config.clusters[alias])
    started = time.monotonic()

    def left() -> float:  # the whole check within --timeout (each Kafka try takes >= 1 s)
        return max(0.1, timeout - (time.monotonic() - started))

    admin = KafkaAdmin(endpoint)  # settings librdkafka refuses: bad input, before any network
    try:
        # Refused, unresolvable, or a listener that takes the connection but is not a broker
        # answering (hung, HTTP, TLS expected): named in seconds, not after the whole timeout.
        wrong = not_answering(endpoint, min(timeout, FIRST_ANSWER_S))
        if wrong is not None:
            raise UnreachableClusterError(alias, endpoint.bootstrap_servers, wrong)
        brokers = admin.wait_ready(timeout_s=left())
        cluster_id, controller, _ = admin.describe_cluster(timeout_s=left())
    except UnreachableClusterError as err:
        return {"reachable": False, "error": str(err)}, err
    return {
        "reachable": True,
        "brokers": brokers,
        "cluster_id": cluster_id,
        "controller": controller,
        "latency_ms": round((time.monotonic() - started) * 1000, 1),
    }, None


COMMANDS = [clusters]
