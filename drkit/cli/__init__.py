"""drkit's command line (click).

The root group owns the error boundary: a :class:`drkit.errors.DrkitError` becomes one line per
problem on stderr and its exit code; nothing an operator can cause prints a traceback.
Subcommands live in one module each and stay thin: parse, call the engine, render.
"""

from __future__ import annotations

import faulthandler
import logging
from typing import Any

import click

from drkit import __version__, logs
from drkit.cli.context import AppContext
from drkit.errors import ConfigError, DrkitError
from drkit.kafka import set_client_log_level


class _Boundary(click.Group):
    """A click group that turns drkit errors into clean one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as err:
            for line in err.lines():
                click.echo(f"error: {line}", err=True)
            ctx.exit(err.exit_code)
        except DrkitError as err:
            click.echo(f"error: {err}", err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Boundary, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="drkit")
@click.option(
    "--state-dir",
    envvar="DRKIT_STATE_DIR",
    type=click.Path(file_okay=False),
    help="Where drkit keeps local clusters, the SQLite store and the generated config "
    "[env DRKIT_STATE_DIR; default ~/.local/state/drkit].",
)
@click.option("-v", "--verbose", count=True, help="More logging (-vv: Kafka client logs too).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log line format on stderr.",
)
@click.pass_context
def cli(ctx: click.Context, state_dir: str | None, verbose: int, log_format: str) -> None:
    """drkit: disaster-recovery failover orchestrator for Apache Kafka.

    Replicates topics between clusters with exact offset mapping, monitors health, translates
    consumer-group offsets and proves on the records that nothing was lost.
    """
    logs.configure(logging.DEBUG if verbose else logging.INFO, log_format)
    if verbose >= 2:
        set_client_log_level(7)
    ctx.obj = AppContext(state_dir_option=state_dir)


def _register() -> None:
    from drkit.cli import (
        automation_cmd,
        checkpoint_cmd,
        clusters_cmd,
        config_cmd,
        db_cmd,
        demo_cmd,
        failover_cmd,
        local_cmd,
        monitor_cmd,
        offsets_cmd,
        replicate_cmd,
        verify_cmd,
    )

    modules = (
        local_cmd,
        config_cmd,
        db_cmd,
        clusters_cmd,
        replicate_cmd,
        checkpoint_cmd,
        offsets_cmd,
        monitor_cmd,
        verify_cmd,
        failover_cmd,
        automation_cmd,
        demo_cmd,
    )
    for module in modules:
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    # A crash inside a C library (librdkafka asserts abort the process) then leaves the
    # Python stacks of every thread on stderr, naming the call that triggered it.
    faulthandler.enable(all_threads=True)
    cli.main(prog_name="drkit")


if __name__ == "__main__":  # pragma: no cover
    main()
