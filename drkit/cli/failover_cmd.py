"""``drkit failover | switchover | cutover | failback``: move applications between clusters.

Every command shows its plan and asks for confirmation (``--yes`` skips it; with no terminal
to ask on and no ``--yes`` it is refused, exit 2, before it plans), ``--plan`` only
prints the plan (nothing changes, nothing is resumed), ``--output json`` prints
``drkit.failover.plan/v2`` or ``drkit.failover.run/v1``.  ``drkit failover show [RUN]`` and
``drkit failover list`` are the audit trail.

``drkit failover --from X`` without ``--to`` promotes the best standby of X: among the clusters
a flow replicates X to, the ones the monitors' quorum sees HEALTHY and whose plan is not
blocked, the smallest RPO (drkit.failover.standby_choice); the plan names it and every other
candidate with its figures and why it lost or was left out (``standby_choice`` in its JSON).

An unfinished run blocks every new one: ``drkit failover --resume RUN`` shows it, re-checks
that its premise still holds and, once confirmed, continues it (forward, or on with its
rollback); ``drkit failover abandon RUN --reason ...`` gives it up.

Exit codes: 0 done; 1 a step failed (the run is resumable: ``drkit failover --resume RUN``);
2 bad input; 4 blocked by the plan; 5 another run holds the lease (or this one lost it);
6 rolled back; 7 vetoed by a hook; 8 abandoned (its premise no longer held).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from drkit import logs
from drkit.cli.context import (
    GROUP,
    REASON,
    RUN_ID,
    AppContext,
    complete_clusters,
    complete_runs,
    config_option,
    confirm,
    echo_document,
    echo_json,
    operator,
    output_option,
    pass_app,
    say,
    writable_file,
)
from drkit.config.loader import known_cluster
from drkit.config.model import TOPIC_NAME, DrkitConfig, Role
from drkit.errors import ConfigError, KafkaError, Problem
from drkit.failover.engine import Engine, PlanBlocked
from drkit.failover.model import Plan, Procedure
from drkit.failover.pointer import Pointer, active_cluster
from drkit.failover.pointer_topic import kafka_pointer_topic
from drkit.failover.render import (
    plan_text,
    remaining_text,
    run_text,
    runs_table,
    standby_text,
)
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import RunRecord, RunRepository
from drkit.failover.standby_choice import StandbyChoice
from drkit.failover.steps.fencing import named_open_transactions, tool_for
from drkit.gc_pause import collection_paused
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.transactions_tool import TransactionsPort
from drkit.records import TopicPartition


def _renamed_force(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--force`` read like "skip the prompt" (patronictl's meaning); it wrote offsets into
    groups with live consumers.  Refused with the new name rather than silently remapped."""
    if value:
        raise ConfigError(
            [Problem("--force", "renamed --overwrite-active-groups (--yes skips the prompt)")]
        )


def _common(func: Any) -> Any:
    options: list[Any] = [
        config_option,
        click.option(
            "--plan",
            "plan_only",
            is_flag=True,
            help="Print the plan; change nothing (exit 4 when it has a blocker).",
        ),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
        output_option,
        click.option(
            "--overwrite-active-groups",
            "force",
            is_flag=True,
            help="Also write the offsets of groups that have members on the target (each one "
            "warned in the plan); by default such groups are left alone.",
        ),
        click.option(
            "--force",
            "renamed_force",
            is_flag=True,
            hidden=True,
            expose_value=False,
            callback=_renamed_force,
        ),
        click.option(
            "--abort-hanging-transactions",
            "abort_transactions",
            is_flag=True,
            help="Abort every transaction other producers left open on the target's replicas "
            "(Kafka's kafka-transactions abort; needs Java 17+ and Kafka's jars, fetched from "
            "Maven Central once); by default they are named and left open.",
        ),
        click.option(
            "--group",
            "groups",
            multiple=True,
            metavar="GROUP",
            type=GROUP,
            help="Only these consumer groups (repeatable; default: the flow's groups).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def progress_printer(output: str) -> Any:
    """Progress lines on stderr (a bar when it is a terminal); silent for JSON."""
    tty = sys.stderr.isatty()

    def report(message: str, fraction: float | None) -> None:
        if output == "json":
            return
        if logs.json_lines():
            say(message, progress=fraction)
            return
        if fraction is None:
            click.echo(f"  {message}", err=True)
            return
        width = 30
        filled = int(width * max(0.0, min(1.0, fraction)))
        bar = f"[{'#' * filled}{' ' * (width - filled)}] {fraction * 100:5.1f}% {message}"
        click.echo(("\r" if tty else "") + bar, err=True, nl=not tty)

    return report


def _engine(app: AppContext, config_file: str | None, output: str) -> Engine:
    config = app.config(config_file).as_role(Role.ENGINE)
    store = app.store(config_file, config_required=True)
    store.ensure_current()
    return Engine(
        config, store, app.state_dir, progress_printer(output), connect=KafkaAdmin,
        pointer_topics=kafka_pointer_topic,  # move_pointer writes it where clients read it
    )  # fmt: skip


def _run_repository(app: AppContext, config_file: str | None) -> RunRepository:
    """The runs, for a command that only reads them (a store nothing ran on yet is migrated
    first, as every command does: "no runs yet", not "no such table")."""
    store = app.store(config_file, reading=True)
    store.ensure_current()
    return RunRepository(store)


def _emit(output: str, document: Callable[[], dict[str, Any]], text: Callable[[], str]) -> None:
    """Print ``document()`` or ``text()`` - only the one asked for is built: a run's document
    at 10,000 groups holds 500,000 moves (its rows alone took 1.5 s to read back)."""
    if output == "json":
        echo_json(document())
    else:
        click.echo(text())


def _run(
    app: AppContext,
    procedure: Procedure,
    source: str,
    target: str | None,
    config_file: str | None,
    plan_only: bool,
    yes: bool,
    output: str,
    options: RunOptions,
) -> None:
    """Plan ``source`` -> ``target`` and run it (or print it, ``plan_only``).  ``target``
    None (an unplanned failover without ``--to``): the best standby of ``source``."""
    if not plan_only and not yes and not sys.stdin.isatty():
        # No terminal to confirm on and no --yes: the run could never start - said before the
        # plan is computed (seconds at many groups) and printed, not after (trial 5, k12).
        raise ConfigError([Problem("--yes", (
            "not a terminal: confirm with --yes, or see the plan alone with --plan - nothing "
            "was planned or done"
        ))])  # fmt: skip
    if options.abort_hanging_transactions and not plan_only:
        _require_transactions_tool()
    if target is not None:
        _require_both_answering(app.config(config_file), procedure, source, target)
    engine = _engine(app, config_file, output)
    # One command, one run: the collector stays off from the plan to the printed run, so the
    # millions of acyclic objects built at 10,000 groups are not walked again at every pause's
    # end (cycles made meanwhile wait for the command's end).
    with collection_paused():
        choice: StandbyChoice | None = None
        if target is None:
            plans, choice = best_standby(engine, source, options)
            if choice.chosen is None:
                if plan_only:
                    _emit(output, lambda: {"standby_choice": choice.to_json()},
                          partial(standby_text, choice))  # fmt: skip
                raise PlanBlocked(choice.why_none() + " - nothing was done; name one with --to")
            plan = plans[choice.chosen.target]
        else:
            plan = engine.plan(procedure, source, target, options)
        if plan_only:
            _emit(output, partial(_plan_document, plan, choice),
                  partial(plan_text, plan, choice))  # fmt: skip
            _echo_producers(output, engine.config, plan)
            if plan.blockers:  # the same answer the run itself would give, without running it
                raise SystemExit(PlanBlocked.exit_code)
            return
        _confirm(plan, yes, output, engine.config, choice)
        reason = choice.summary() if choice is not None else ""
        _finish(output, engine.start(plan, options, requested_by=operator(), reason=reason))


def _plan_document(plan: Plan, choice: StandbyChoice | None) -> dict[str, Any]:
    """The plan's ``drkit.failover.plan/v2`` document, with the standby choice when the
    command chose the target."""
    document = plan.to_json()
    if choice is not None:
        document["standby_choice"] = choice.to_json()
    return document


def best_standby(
    engine: Engine, source: str, options: RunOptions
) -> tuple[dict[str, Plan], StandbyChoice]:
    """:func:`drkit.automation.standby.best_standby` (a drill with several standbys decides by
    it too), imported when a command needs it: ``--help`` and bad arguments stay quick."""
    from drkit.automation.standby import best_standby as plans_and_choice

    return plans_and_choice(engine, source, options)


def _require_transactions_tool() -> None:
    """--abort-hanging-transactions runs Kafka's kafka-transactions (Java): its jars fetched
    now (from Maven Central, once) and Java found - or refused before anything is planned or
    done (exit 2), rather than in the run's abort step."""
    from drkit.errors import LocalClusterError
    from drkit.local.jars import java_executable, resolve_bundle

    def refused(why: str) -> ConfigError:
        needs = f"needs Kafka's kafka-transactions tool: {why} - nothing was done"
        return ConfigError([Problem("--abort-hanging-transactions", needs)])

    try:
        java_executable()
    except LocalClusterError:
        raise refused("Java 17+: 'java' not found (PATH, JAVA_HOME)") from None
    try:
        resolve_bundle("kafka")
    except LocalClusterError as err:
        raise refused(str(err)) from None


def _require_both_answering(
    config: DrkitConfig, procedure: Procedure, source: str, target: str
) -> None:
    """A planned move (switchover, cutover, failback) needs both clusters: one down, hung or
    not Kafka is named within 3 s of the command's start (exit 3) - the plan waited 3 s for
    the source and then read the target, 6-9 s with a frozen source (issue 45, seventh
    trial).  An unplanned failover is planned without its source, as before."""
    if procedure is Procedure.FAILOVER:
        return
    from drkit.config.loader import flow_between
    from drkit.kafka.clients import ClusterEndpoint, require_all_answering

    flow_between(config, source, target)  # bad input first (exit 2), as the plan says it

    needed = (f"a {procedure.value} needs both clusters; 'drkit failover --from {source} "
              f"--to {target}' moves without the source")  # fmt: skip
    require_all_answering(
        [ClusterEndpoint(alias, config.clusters[alias]) for alias in (source, target)], needed
    )


def _confirm(
    plan: Plan, yes: bool, output: str, config: DrkitConfig, choice: StandbyChoice | None = None
) -> None:
    if output == "text":
        click.echo(plan_text(plan, choice))
        _echo_producers(output, config, plan)
    # blockers: the engine refuses with the reasons
    confirm(f"Run this {plan.procedure.value}?", yes or bool(plan.blockers))


# How the plan names a target partition behind an open transaction: "topic[p] (stable ...)".
_HELD_PARTITION = re.compile(r"([^\s\[\]]+)\[(\d+)\]")


def _echo_producers(output: str, config: DrkitConfig, plan: Plan) -> None:
    """Under the plan's text: who holds the transactions it found open on the target."""
    if output == "text" and plan.open_transactions:
        click.echo(producers_text(plan, lambda: tool_for(config.clusters[plan.target])))


def producers_text(plan: Plan, tool: Callable[[], TransactionsPort], within_s: float = 30.0) -> str:
    """The producers of the transactions ``plan`` found open on its target, one line each,
    as Kafka's kafka-transactions names them (``tool``) - or why they are not named.  Text
    output only: the plan's document lists the partitions."""
    partitions = [
        TopicPartition(m[1], int(m[2]))
        for entry in plan.open_transactions
        if (m := _HELD_PARTITION.match(entry))
    ]
    until = time.monotonic() + within_s
    try:
        found = named_open_transactions(
            tool(), partitions, lambda: max(0.0, until - time.monotonic())
        )
    except KafkaError as err:
        return f"open transactions on {plan.target}: producers not named ({err})"
    if not found:
        return f"open transactions on {plan.target}: none open any more"
    head = (
        f"open transactions on {plan.target} (drkit's own are fenced; the others are left "
        "open unless --abort-hanging-transactions):"
    )
    return "\n".join([head, *(f"  {t}" for t in found)])


def _finish(output: str, run: RunRecord) -> None:
    _emit(output, run.to_json, partial(run_text, run))


def _resume(
    engine: Engine,
    run_id: int,
    yes: bool,
    output: str,
    source: str | None = None,
    target: str | None = None,
) -> None:
    """Show the unfinished run and what is left of it, check its premise, confirm, resume.

    ``source``/``target``: --from/--to given beside --resume - a run of another flow is refused
    before anything is done (they were ignored: the operator resumed a run they did not mean)."""
    run = engine.runs.get(run_id)
    if run is None:
        raise ConfigError([Problem("--resume", f"no failover run {run_id}")])
    if (source is not None and source != run.source) or (
        target is not None and target != run.target
    ):
        given = " ".join(
            f"{flag} {name}" for flag, name in (("--from", source), ("--to", target)) if name
        )
        why = (
            f"run {run_id} moves {run.source} -> {run.target}, not {given}: leave --from/--to "
            "out (the run knows its flow) - nothing was done"
        )
        raise ConfigError([Problem("--resume", why)])
    broken = engine.premise(run) if run.state.unfinished else None
    if output == "text":
        click.echo(run_text(run))
        click.echo(remaining_text(run, engine.runbook(run.procedure)))
    if broken is None and run.state.unfinished:
        confirm(f"Resume run {run_id}?", yes)
    # A broken premise is recorded (ABANDONED) and reported by the engine, under the lease.
    with collection_paused():  # as for a new run (_run)
        _finish(output, engine.resume(run_id))


def _options(
    force: bool, groups: tuple[str, ...], abort_transactions: bool, **extra: Any
) -> RunOptions:
    return RunOptions(
        force=force,
        groups=groups or None,
        abort_hanging_transactions=abort_transactions,
        **extra,
    )


# -- failover (+ show, list) -----------------------------------------------------------------


@click.group("failover", invoke_without_command=True)
@click.option(
    "--from",
    "source",
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The cluster being lost.",
)
@click.option(
    "--to",
    "target",
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The cluster to promote [default: the best standby of --from - healthy by the "
    "monitors' quorum, smallest RPO; the plan says why].",
)
@click.option(
    "--resume",
    "resume",
    type=RUN_ID,
    metavar="RUN",
    shell_complete=complete_runs,
    help="Continue an interrupted run (--from/--to, if given, must be its own).",
)
@_common
@pass_app
@click.pass_context
def failover(
    ctx: click.Context,
    app: AppContext,
    source: str | None,
    target: str | None,
    resume: int | None,
    config_file: str | None,
    plan_only: bool,
    yes: bool,
    output: str,
    force: bool,
    groups: tuple[str, ...],
    abort_transactions: bool,
) -> None:
    """Unplanned failover: promote --to (or the best standby) now; --from may be dead.
    Reports the loss (RPO)."""
    if ctx.invoked_subcommand is not None:
        if config_file is not None:  # 'failover --config F list': F is the subcommand's config
            app.config(config_file)
        return
    if resume is not None:
        if plan_only:
            # Read as "change nothing, show me the resume" - but a resume plans nothing (it
            # continues the run's own steps), and the old answer named neither (issue 45).
            why = (
                f"nothing to plan: a resume makes no new plan, it continues run {resume}'s own "
                f"steps; 'drkit failover show {resume}' shows the run and its steps, and "
                f"'drkit failover --resume {resume}' shows what is left of it and asks before "
                "it continues - nothing was done"
            )
            raise ConfigError([Problem("--plan/--resume", why)])
        if abort_transactions:
            why = (
                f"run {resume} keeps the options it started with; abort open transactions "
                "by hand (kafka-transactions.sh abort) or in a new run - nothing was done"
            )
            raise ConfigError([Problem("--abort-hanging-transactions", why)])
        _resume(_engine(app, config_file, output), resume, yes, output, source, target)
        return
    if not source:
        why = "required (with --to, or alone to promote its best standby; or --resume RUN)"
        raise ConfigError([Problem("--from", why)])
    options = _options(force, groups, abort_transactions)
    _run(app, Procedure.FAILOVER, source, target, config_file, plan_only, yes, output, options)


@failover.command("show")
@click.argument("run_id", required=False, type=RUN_ID, shell_complete=complete_runs)
@config_option
@output_option
@pass_app
def show(app: AppContext, run_id: int | None, config_file: str | None, output: str) -> None:
    """One run with its steps (default: the latest)."""
    runs = _run_repository(app, config_file)
    run = runs.get(run_id) if run_id is not None else next(iter(runs.latest(1)), None)
    if run is None:
        raise ConfigError([Problem("RUN", "no such failover run" if run_id else "no runs yet")])
    _emit(output, run.to_json, partial(run_text, run))


@failover.command("abandon")
@click.argument("run_id", type=RUN_ID, shell_complete=complete_runs)
@click.option("--reason", required=True, type=REASON, help="Why (recorded in the audit trail).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@config_option
@output_option
@pass_app
def abandon(
    app: AppContext, run_id: int, reason: str, yes: bool, config_file: str | None, output: str
) -> None:
    """Give an unfinished run up: nothing it did is undone, nothing is redone."""
    engine = _engine(app, config_file, output)
    run = engine.runs.get(run_id)
    if run is None:
        raise ConfigError([Problem("RUN", f"no failover run {run_id}")])
    if output == "text":
        click.echo(run_text(run))
    confirm(f"Abandon run {run_id}? What its steps did stays done", yes)
    _finish(output, engine.abandon(run_id, reason, operator()))


@failover.command("list")
@config_option
@output_option
@pass_app
def list_runs(app: AppContext, config_file: str | None, output: str) -> None:
    """The latest runs, newest first (each run's groups counted, not listed: ``failover show
    RUN -o json`` has them)."""
    runs = _run_repository(app, config_file).latest()
    if output == "json":
        echo_document("failover.list", {"runs": [r.to_json(rows=False) for r in runs]})
    else:
        click.echo(runs_table(runs))


# -- switchover, cutover, failback ----------------------------------------------------------


@click.command("switchover")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="Current primary.",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="New primary.",
)
@_common
@pass_app
def switchover(
    app: AppContext,
    source: str,
    target: str,
    config_file: str | None,
    plan_only: bool,
    yes: bool,
    output: str,
    force: bool,
    groups: tuple[str, ...],
    abort_transactions: bool,
) -> None:
    """Planned switchover: fence, drain, translate exactly, promote, replicate back.

    Rolls back (unfences the source, resumes replication) on a timeout or error before the
    pointer moves.
    """
    options = _options(force, groups, abort_transactions)
    _run(app, Procedure.SWITCHOVER, source, target, config_file, plan_only, yes, output, options)


@click.command("cutover")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The old cluster.",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The new cluster.",
)
@click.option("--skip-verify", is_flag=True, help="No final Spark accounting run.")
@_common
@pass_app
def cutover(
    app: AppContext,
    source: str,
    target: str,
    skip_verify: bool,
    config_file: str | None,
    plan_only: bool,
    yes: bool,
    output: str,
    force: bool,
    groups: tuple[str, ...],
    abort_transactions: bool,
) -> None:
    """Migration cutover: like a switchover, one way; the old cluster stays fenced."""
    options = _options(force, groups, abort_transactions, skip_verify=skip_verify)
    _run(app, Procedure.CUTOVER, source, target, config_file, plan_only, yes, output, options)


@click.command("failback")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The original primary.",
)
@click.option(
    "--from",
    "source",
    metavar="CLUSTER",
    shell_complete=complete_clusters,
    help="The current primary [default: the pointer].",
)
@click.option(
    "--export-file", type=click.Path(dir_okay=False), help="Divergent tail as JSON lines here."
)
@click.option("--export-topic", metavar="CLUSTER:TOPIC", help="...or copied into this topic.")
@_common
@pass_app
def failback(
    app: AppContext,
    target: str,
    source: str | None,
    export_file: str | None,
    export_topic: str | None,
    config_file: str | None,
    plan_only: bool,
    yes: bool,
    output: str,
    force: bool,
    groups: tuple[str, ...],
    abort_transactions: bool,
) -> None:
    """Return to the original primary: capture its divergent tail, replicate back, switch over."""
    if export_file and export_topic:
        raise ConfigError([Problem("--export-file/--export-topic", "choose one")])
    if export_file:  # a missing directory is refused, as for every output file (issue 45)
        writable_file("--export-file", export_file)
    if export_file and Path(export_file).exists():
        # The tail is the only copy of records nobody replicated: never written over one.
        why = f"{export_file} exists (an earlier tail?): name a new file or move it away"
        raise ConfigError([Problem("--export-file", why + " - nothing was done")])
    if export_topic is not None:
        _check_export_topic(app.config(config_file), export_topic)
    if source is None:
        engine = _engine(app, config_file, output)
        known_cluster(engine.config, target, "--to")
        pointer = engine.pointers.get()
        if pointer is None or pointer.cluster == target:
            raise PlanBlocked(nothing_to_fail_back(engine.config, target, pointer))
        source = pointer.cluster
    options = _options(
        force, groups, abort_transactions, export_file=export_file, export_topic=export_topic
    )
    _run(app, Procedure.FAILBACK, source, target, config_file, plan_only, yes, output, options)


def nothing_to_fail_back(config: DrkitConfig, target: str, pointer: Pointer | None) -> str:
    """Why a failback to ``target`` has nothing to do: no move ever set the pointer, or it is on
    ``target`` already (issue 45: "the active pointer is on nothing")."""
    if pointer is None:
        where = active_cluster(None, config)
        uses = (
            f"; applications use {where}, the first flow's source, as configured" if where else ""
        )
        return (
            f"nothing to fail back to {target}: no failover or switchover was recorded (the "
            f"active pointer is unset{uses}) - nothing was done"
        )
    run = f", moved there by run {pointer.run_id}" if pointer.run_id is not None else ""
    return (
        f"nothing to fail back: the active pointer is already on {target}{run} - nothing was done"
    )


def _check_export_topic(config: DrkitConfig, value: str) -> None:
    """--export-topic names a configured cluster and a legal topic - refused before the run
    (with --plan too), not in its export step after the fence (issue 45)."""
    alias, colon, topic = value.partition(":")
    if not colon or not alias or not topic:
        raise ConfigError([Problem("--export-topic", f"{value!r} is not CLUSTER:TOPIC")])
    known_cluster(config, alias, "--export-topic")
    if not TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        why = f"{topic!r} is not a valid topic name (letters, digits, '.', '_', '-'; at most 249)"
        raise ConfigError([Problem("--export-topic", why)])


COMMANDS = [failover, switchover, cutover, failback]
