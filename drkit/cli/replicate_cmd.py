"""``drkit replicate``: run the replication workers of the configured flows."""

from __future__ import annotations

import socket
import threading
from dataclasses import replace

import click

from drkit.cli.context import (
    IDENTITY,
    AppContext,
    FiniteRange,
    complete_flows,
    config_option,
    pass_app,
    tls_files,
    tls_options,
)
from drkit.cli.preflight import require_flows_answering
from drkit.errors import ConfigError, Problem
from drkit.listening import binding
from drkit.replication.assignment import StartFrom
from drkit.replication.client_settings import WorkerSettings
from drkit.replication_service import (
    STOP_GRACE_S,
    SUPERVISOR_STOP_GRACE_S,
    ServiceOptions,
    default_worker_id,
    install_stop_signals,
    run_flows,
    run_workers,
    select_flows,
)


@click.command("replicate")
@config_option
@click.option(
    "--flow",
    "flows",
    multiple=True,
    metavar="SRC->DST",
    shell_complete=complete_flows,
    help="Replicate only this flow (repeatable); default: every flow in the config.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes; they share partitions through a consumer group on the source.",
)
@click.option(
    "--worker-id",
    default=None,
    type=IDENTITY,
    help="Stable id of this worker: a worker restarted under the same id takes its partitions "
    "back at once (static group membership); transactional ids derive from it "
    "[default: <host>-<pid>, unique per process].",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Serve Prometheus /metrics here (worker i of --workers uses PORT+i); 0 disables.",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Metrics bind address."
)
@tls_options("--metrics-port")
@click.option(
    "--commit-interval",
    type=FiniteRange(min=0.05, max=3600),
    default=1.0,
    show_default=True,
    help="Seconds between progress commits (and transactions in exactly-once mode).",
)
@click.option(
    "--transaction-timeout",
    type=FiniteRange(min=1, max=900),
    default=10.0,
    show_default=True,
    help="Exactly-once flows: seconds an open transaction may last before the target's "
    "coordinator aborts it.",
)
@click.option(
    "--start-from",
    type=click.Choice(["earliest", "latest"]),
    default="earliest",
    show_default=True,
    help="Where partitions without stored progress start.",
)
@click.option(
    "--checkpoints/--no-checkpoints",
    default=True,
    show_default=True,
    help="Also run each flow's checkpoint worker (consumer-group offset translation).",
)
@pass_app
def replicate(
    app: AppContext,
    config_file: str | None,
    flows: tuple[str, ...],
    workers: int,
    worker_id: str | None,
    metrics_port: int,
    metrics_host: str,
    tls_cert: str | None,
    tls_key: str | None,
    commit_interval: float,
    transaction_timeout: float,
    start_from: str,
    checkpoints: bool,
) -> None:
    """Replicate the configured flows until SIGTERM/SIGINT, then stop gracefully.

    In-flight records are delivered and progress is stored on the target before exit.
    Exit code 10: a flow stopped on an error it cannot ride out - e.g. a record the target
    refuses (the log names topic, partition and offset; nothing after it was skipped).
    Exit code 3 at start: a cluster of every selected flow does not answer (named with its
    address); a cluster only some flows need is a warning, and the others run.
    """
    tls = tls_files(tls_cert, tls_key)
    if tls is not None and not metrics_port:
        raise ConfigError(
            [Problem("--tls-cert", "serves --metrics-port over HTTPS; without --metrics-port "
                     "nothing listens")]
        )  # fmt: skip
    config = app.config(config_file)
    chosen = select_flows(config, flows)  # fail fast on unknown flows, before forking
    if metrics_port:  # bad input before an unreachable cluster: exit 2 keeps its meaning
        _refuse_taken_ports(metrics_host, metrics_port, workers)
    require_flows_answering(config, chosen)
    identity = worker_id or default_worker_id()
    options = ServiceOptions(
        flows=flows,
        workers=workers,
        worker_id=identity,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        tls=tls,
        checkpoints=checkpoints,
        store_url=app.store_url(config),
        settings=WorkerSettings(
            worker_id=identity,
            commit_interval_s=commit_interval,
            transaction_timeout_ms=int(transaction_timeout * 1000),
            start_from=StartFrom(start_from),
            static_membership=worker_id is not None,
        ),
    )
    stop = threading.Event()
    install_stop_signals(stop, STOP_GRACE_S if workers == 1 else SUPERVISOR_STOP_GRACE_S)
    if workers == 1:
        code = run_flows(
            config,
            replace(options, settings=replace(options.settings, worker_id=f"{identity}-0")),
            stop,
        )
    else:
        assert app.config_path is not None
        code = run_workers(app.config_path, options, stop)
    raise SystemExit(code)


def _refuse_taken_ports(host: str, port: int, workers: int) -> None:
    """Refuse (ConfigError naming --metrics-port) a port another process listens on - each
    worker's, PORT+i - before the clusters are asked (the workers bind them themselves)."""
    for index in range(workers):
        with binding("--metrics-port", host, port + index):
            family, kind, proto, _name, address = socket.getaddrinfo(
                host, port + index, type=socket.SOCK_STREAM
            )[0]
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server
                probe.bind(address)


COMMANDS = [replicate]
