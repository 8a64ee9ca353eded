"""``drkit checkpoint``: run checkpoint workers on their own (without replicating)."""

from __future__ import annotations

import threading

import click

from drkit.cli.context import AppContext, complete_flows, config_option, pass_app
from drkit.config.model import Role


@click.command("checkpoint")
@config_option
@click.option(
    "--flow",
    "flows",
    multiple=True,
    metavar="SRC->DST",
    shell_complete=complete_flows,
    help="Only this flow (repeatable); default: every flow.",
)
@pass_app
def checkpoint(app: AppContext, config_file: str | None, flows: tuple[str, ...]) -> None:
    """Follow source consumer groups and write translated checkpoints until SIGTERM.

    Use this when replication runs elsewhere (or with --no-checkpoints); 'drkit replicate'
    runs the same workers by default.  Exit code 3 at start: a cluster of every selected flow
    does not answer (named with why); a cluster only some flows need is a warning.
    """
    from drkit.config.loader import known_flow

    config = app.config(config_file).as_role(Role.CHECKPOINTER)
    for name in flows:  # an unknown flow told before the workers' imports (seconds)
        known_flow(config, name, "--flow")
    from drkit.cli.preflight import require_flows_answering
    from drkit.replication_service import install_stop_signals, run_checkpointer, select_flows
    from drkit.store.flow_keys import FlowKeys

    chosen = select_flows(config, flows)
    require_flows_answering(config, chosen)  # exit 3 at start, as drkit replicate
    stop = threading.Event()
    install_stop_signals(stop)
    # The flow keys, as drkit replicate reads them: forged offset syncs are ignored, the
    # worker's tombstones signed (drkit/signing.py).
    keys = FlowKeys(app.store_url(config), config.signing.secret_bytes)
    threads = [
        threading.Thread(
            target=run_checkpointer,
            args=(config, flow, stop),
            kwargs={"keys": keys},
            name=flow.name,
        )
        for flow in chosen
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


COMMANDS = [checkpoint]
