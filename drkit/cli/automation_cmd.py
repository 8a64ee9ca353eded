"""``drkit automation pause | resume | ack``: the operator's word to automatic failover.

(A group of its own: a top-level ``drkit resume`` read like ``drkit failover --resume RUN``,
which continues an interrupted run - an unrelated thing.)

``pause`` switches health-triggered failover off (``drkit monitor`` keeps deciding and logging,
but never acts) until ``resume``; ``ack RUN`` acknowledges an automatic failover, which blocks
further automatic failovers until someone has looked at it.  Each is recorded with who and
why; ``drkit status`` shows the automation state and the last decision's reasons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from drkit.cli.context import (
    REASON,
    RUN_ID,
    AppContext,
    complete_runs,
    config_option,
    echo_document,
    operator,
    output_option,
    pass_app,
)
from drkit.errors import ConfigError, Problem
from drkit.timestamps import iso_utc

if TYPE_CHECKING:
    from drkit.automation.journal import AutomationJournal

_REASON = click.option(
    "--reason",
    "-m",
    type=REASON,
    help="Why (recorded in the audit trail with your name; not empty, one line).",
)


def _journal(app: AppContext, config_file: str | None) -> AutomationJournal:
    from drkit.automation.journal import AutomationJournal

    store = app.store(config_file)
    store.ensure_current()
    return AutomationJournal(store)


@click.group("automation")
def automation() -> None:
    """Automatic (health-triggered) failover: pause it, resume it, acknowledge its runs."""


@automation.command("pause")
@_REASON
@config_option
@output_option
@pass_app
def pause(app: AppContext, reason: str | None, config_file: str | None, output: str) -> None:
    """Switch automatic failover off until 'drkit automation resume' (manual commands still
    work).  Refused (exit 2, nothing stored) when the config does not enable it
    (failover.automatic): there is nothing to pause, and the pause would outlive the config."""
    if not app.config(config_file).failover.automatic:
        why = (
            "automatic failover is not enabled in the config (failover.automatic is false): "
            "there is nothing to pause - nothing was stored"
        )
        raise ConfigError([Problem("failover.automatic", why)])
    journal = _journal(app, config_file)
    journal.pause(operator(), reason or "")
    if output == "json":
        echo_document("automation", _state(journal))
        return
    click.echo(f"automatic failover paused by {operator()}" + (f": {reason}" if reason else ""))


@automation.command("resume")
@_REASON
@config_option
@output_option
@pass_app
def resume(app: AppContext, reason: str | None, config_file: str | None, output: str) -> None:
    """Switch automatic failover back on after 'drkit automation pause'.  When the config does
    not enable it (failover.automatic), a pause stored earlier is still lifted (automatic
    failover stays off); with no pause to lift it is refused (exit 2, nothing stored)."""
    automatic = app.config(config_file).failover.automatic
    journal = _journal(app, config_file)
    if not automatic and journal.paused() is None:
        why = (
            "automatic failover is not enabled in the config (failover.automatic is false) "
            "and not paused: there is nothing to resume - nothing was stored"
        )
        raise ConfigError([Problem("failover.automatic", why)])
    journal.resume(operator(), reason or "")
    if output == "json":
        echo_document("automation", _state(journal))
        return
    if automatic:
        click.echo("automatic failover resumed")
    else:
        click.echo(
            "pause lifted; automatic failover stays off: failover.automatic is false in the config"
        )


@automation.command("ack")
@click.argument("run_id", metavar="RUN", shell_complete=complete_runs, type=RUN_ID)
@_REASON
@config_option
@output_option
@pass_app
def ack(
    app: AppContext, run_id: int, reason: str | None, config_file: str | None, output: str
) -> None:
    """Acknowledge automatic failover RUN: lifts the block it put on further automatic
    failovers (the block window still applies)."""
    journal = _journal(app, config_file)
    journal.ack(run_id, operator(), reason or "")
    left = journal.unacknowledged()
    if output == "json":
        echo_document("automation", _state(journal))
        return
    tail = f"; still unacknowledged: {', '.join(map(str, left))}" if left else ""
    click.echo(f"run {run_id} acknowledged{tail}")


def _state(journal: AutomationJournal) -> dict[str, object]:
    """What the operator's word left in force (the same fields as ``drkit status``)."""
    paused = journal.paused()
    return {
        "paused": (
            {"by": paused.by, "reason": paused.reason, "at": iso_utc(paused.at)}
            if paused is not None
            else None
        ),
        "unacknowledged_runs": list(journal.unacknowledged()),
    }


COMMANDS = (automation,)
