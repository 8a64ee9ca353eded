"""drkit's command line (click).

The root group owns the error boundary: a :class:`drkit.errors.DrkitError` becomes one line per
problem on stderr and its exit code; nothing an operator can cause prints a traceback.
Subcommands live in one module each and stay thin: parse, call the engine, render.
"""

from __future__ import annotations

import faulthandler
import importlib
import itertools
import logging
import warnings
from typing import Any

import click

from drkit import __version__, failpoints, logs
from drkit.cli.context import AppContext, say
from drkit.errors import EXIT_CODES_TEXT, ConfigError, DrkitError, ExitCode
from drkit.kafka import set_client_log_level


class _Boundary(click.Group):
    """A click group that turns drkit errors into clean one-line messages, and loads each
    subcommand's module only when that command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = _COMMANDS.get(cmd_name)
        if module is None:
            return None
        commands = importlib.import_module(f"drkit.cli.{module}").COMMANDS
        found: click.Command = next(c for c in commands if c.name == cmd_name)
        _with_exit_codes(found)
        return found

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as err:
            # `drkit --config F failover` said only "No such option" (issue 45, sixth trial)
            if err.option_name in _COMMAND_OPTIONS:
                at = next((i for i, arg in enumerate(args) if arg in _COMMANDS), len(args))
                words = [*itertools.takewhile(lambda a: not a.startswith("-"), args[at:])]
                command = " ".join(words) or "COMMAND"
                raise click.NoSuchOption(
                    err.option_name,
                    f"No such option: {err.option_name} goes after the command, e.g. "
                    f"drkit {command} {err.option_name} ...",
                    ctx=err.ctx,
                ) from None
            raise

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():  # Click 9 moves these tokens into ``args``
            warnings.simplefilter("ignore", DeprecationWarning)
            as_json = _wants_json([*getattr(ctx, "protected_args", ()), *ctx.args])
        from drkit.cli.context import PRINTED

        PRINTED.document = False
        try:
            return super().invoke(ctx)
        except ConfigError as err:
            for line in err.lines():
                say(line, logging.ERROR, exit_code=err.exit_code)
            _error_document(as_json, err.lines(), err.exit_code)
            ctx.exit(err.exit_code)
        except DrkitError as err:
            say(str(err), logging.ERROR, exit_code=err.exit_code)
            _error_document(as_json, [str(err)], err.exit_code)
            ctx.exit(err.exit_code)
        except click.UsageError as err:
            _error_document(as_json, [err.format_message()], err.exit_code)
            if not logs.json_lines():
                raise  # click prints its usage and the error itself
            say(err.format_message(), logging.ERROR, exit_code=err.exit_code)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            say("interrupted", logging.INFO, exit_code=ExitCode.INTERRUPTED)
            ctx.exit(ExitCode.INTERRUPTED)


# Options of the commands (not of drkit itself) that are typed before the command by mistake.
_COMMAND_OPTIONS = ("--config", "-o", "--output")


def _wants_json(args: list[str]) -> bool:
    """Whether the command line asks for ``-o json`` / ``--output json`` (in any spelling)."""
    for index, arg in enumerate(args):
        if arg in ("-o", "--output") and index + 1 < len(args) and args[index + 1] == "json":
            return True
        if arg in ("-ojson", "--output=json"):
            return True
    return False


def _error_document(as_json: bool, lines: list[str], code: int) -> None:
    """Under ``-o json`` an error is a document on stdout too (a reader never gets nothing):
    ``drkit.error/v1`` with the lines stderr says and the exit code.  Commands that printed
    their own document (``config validate``) are not doubled: they raise after printing, so
    this only runs when stdout holds no document yet (``drkit.cli.context.PRINTED``)."""
    from drkit.cli.context import PRINTED, echo_document

    if not as_json or PRINTED.document:
        return
    echo_document("error", {"ok": False, "errors": lines, "exit_code": int(code)})


# One table for every command; \b keeps click from rewrapping it.
EXIT_CODES_EPILOG = "\b\nExit codes (the same for every drkit command):\n" + EXIT_CODES_TEXT


def _with_exit_codes(command: click.Command) -> None:
    """Print the exit-code table under the help of ``command`` and of every command in it."""
    if command.epilog is None:
        command.epilog = EXIT_CODES_EPILOG
    if isinstance(command, click.Group):
        for child in command.commands.values():
            _with_exit_codes(child)


@click.group(
    cls=_Boundary,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_EPILOG,
)
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
    if state_dir is not None and not state_dir.strip():  # "" would mean the default, silently
        raise click.BadParameter("cannot be empty", param_hint="--state-dir")
    if verbose >= 2:
        set_client_log_level(7)
    if staged := failpoints.armed():  # a typo in a staged fault is an error, not a no-op
        logging.getLogger("drkit").warning("failpoints armed", extra={"failpoints": staged})
    ctx.obj = AppContext(state_dir_option=state_dir)


# Command name -> the module that defines it.  Only the invoked command's module is imported
# (each pulls in its engine: Spark, the monitor, the failover engine ...), which keeps a
# command's start - part of a failover's wall time - short; --help imports them all.
_COMMANDS = {
    "local": "local_cmd",
    "config": "config_cmd",
    "adopt": "adopt_cmd",
    "db": "db_cmd",
    "clusters": "clusters_cmd",
    "doctor": "access_cmd",
    "acls": "access_cmd",
    "replicate": "replicate_cmd",
    "checkpoint": "checkpoint_cmd",
    "offsets": "offsets_cmd",
    "groups": "groups_cmd",
    "monitor": "monitor_cmd",
    "status": "monitor_cmd",
    "verify": "verify_cmd",
    "failover": "failover_cmd",
    "switchover": "failover_cmd",
    "cutover": "failover_cmd",
    "failback": "failover_cmd",
    "automation": "automation_cmd",
    "demo": "demo_cmd",
    "drill": "drill_cmd",
    "flows": "flows_cmd",
    "pointer": "flows_cmd",
    "fences": "flows_cmd",
    "schemas": "schemas_cmd",
}


def main() -> None:
    """Console-script entry point."""
    # A crash inside a C library (librdkafka asserts abort the process) then leaves the
    # Python stacks of every thread on stderr, naming the call that triggered it.
    faulthandler.enable(all_threads=True)
    logs.dump_stacks_on_sigusr1()
    cli.main(prog_name="drkit")


if __name__ == "__main__":  # pragma: no cover
    main()
