"""``drkit flows list | pause | resume | stop | start``, ``drkit pointer show``, ``drkit fences
list``: the operator's view of (and hand on) the control plane.

A change is the directive the failover engine would write (drkit.control), written under the
failover lease - so it never lands in the middle of a run (exit 5 while one holds it) - with
who and why in its reason, then published on the flow's control channel for workers cut off
from the store, then waited for: each live worker acknowledges it.  What is refused and why:
drkit.control.operator.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from drkit.cli.context import (
    REASON,
    TOPIC,
    AppContext,
    FiniteRange,
    complete_clusters,
    complete_flows,
    config_option,
    echo_document,
    operator,
    output_option,
    pass_app,
)
from drkit.config.loader import known_cluster, known_flow
from drkit.config.model import Role
from drkit.control.model import LIVE_WITHIN_S, default_state
from drkit.control.operator import FlowChangeFacts, FlowVerb, change_blockers, unchanged
from drkit.errors import ConfigError, DrkitError, ExitCode, Problem
from drkit.timestamps import iso_utc

if TYPE_CHECKING:
    from collections.abc import Iterator

    from drkit.config.model import DrkitConfig, FlowConfig
    from drkit.control import ControlRepository
    from drkit.control.channel import ChannelFactory
    from drkit.control.model import DesiredState, FlowDirective, WorkerAck
    from drkit.failover.lease import LeaseKeeper
    from drkit.offsets.follow_on import Copied
    from drkit.offsets.repoint_inputs import RepointReport
    from drkit.records import TopicPartition
    from drkit.repoint import Repointed
    from drkit.store.db import StateStore

log = logging.getLogger(__name__)

_LEASE_TTL_S = 15.0


class Blocked(DrkitError):
    exit_code = ExitCode.BLOCKED


class NotPublished(DrkitError):
    exit_code = ExitCode.FAILED


@click.group("flows")
def flows() -> None:
    """The replication flows: their directives and workers; pause, stop, resume, start."""


@flows.command("list")
@config_option
@output_option
@pass_app
def list_flows(app: AppContext, config_file: str | None, output: str) -> None:
    """Each flow's directive (desired state, epoch, who and why) and its workers' reports."""
    from drkit.control import ControlRepository

    config, store = _reading(app, config_file)
    control = ControlRepository(store)
    rows = [
        (flow, control.directive(flow.name, default_state(flow)), control.acks(flow.name))
        for flow in config.flows
    ]
    if output == "json":
        echo_document("flows", {"flows": [_flow_json(f, d, a) for f, d, a in rows]})
        return
    if not rows:
        click.echo("no flows in the config (flows: a source and a target each)")
    for flow, directive, acks in rows:
        set_by = f" - {directive.reason}" if directive.reason else ""
        click.echo(f"{flow.name}: {directive.desired.value} (epoch {directive.epoch}){set_by}")
        if not acks:
            click.echo("  no worker has reported")
        for ack in sorted(acks, key=lambda a: a.worker):
            click.echo(f"  {ack.worker}: {_ack_text(ack, directive)}")


def _reading(app: AppContext, config_file: str | None) -> tuple[DrkitConfig, StateStore]:
    """The config and its store, for a command that only reads (a mistyped --state-dir is
    refused, not created)."""
    config = app.config(config_file)
    store = app.store(config_file, reading=True)
    store.ensure_current()
    return config, store


def _ack_text(ack: WorkerAck, directive: FlowDirective) -> str:
    if ack.failure is not None:
        return (
            f"{click.style('FAILED', fg='red', bold=True)} - the flow ended for good: "
            f"{ack.failure} (last heard {ack.age_s:.0f}s ago; restart 'drkit replicate' once "
            "the cause is fixed)"
        )
    current = ack.epoch >= directive.epoch and ack.state is directive.desired
    where = "acted on it" if current else f"on epoch {ack.epoch}, {ack.state.value}"
    heard = "silent" if ack.age_s > LIVE_WITHIN_S else "live"
    return f"{where}; {heard}, last heard {ack.age_s:.0f}s ago"


def _flow_json(flow: FlowConfig, directive: FlowDirective, acks: list[WorkerAck]) -> dict[str, Any]:
    return {
        "flow": flow.name,
        "source": flow.source,
        "target": flow.target,
        "desired": directive.desired.value,
        "epoch": directive.epoch,
        "reason": directive.reason,
        "run": directive.run_id,
        "workers": [
            {
                "worker": a.worker,
                "epoch": a.epoch,
                "state": a.state.value,
                "age_s": round(a.age_s, 1),
                "live": a.age_s <= LIVE_WITHIN_S,
                "failure": a.failure,
            }
            for a in sorted(acks, key=lambda a: a.worker)
        ],
    }


def _change_command(verb: FlowVerb, help_text: str) -> click.Command:
    @flows.command(verb.value, help=help_text)
    @click.argument("flow_name", metavar="FLOW", shell_complete=complete_flows)
    @click.option(
        "--reason", "-m", required=True, type=REASON, help="Why (recorded with your name)."
    )
    @click.option(
        "--wait",
        "wait_s",
        type=FiniteRange(0, 3600),
        default=30.0,
        show_default=True,
        metavar="SECONDS",
        help="How long to wait for the live workers to acknowledge (0: do not wait).",
    )
    @config_option
    @output_option
    @pass_app
    def change(
        app: AppContext,
        flow_name: str,
        reason: str,
        wait_s: float,
        config_file: str | None,
        output: str,
    ) -> None:
        _change(app, verb, flow_name, reason, wait_s, config_file, output)

    return change


_change_command(FlowVerb.PAUSE, "Hold FLOW: workers keep their place and group, copy nothing.")
_change_command(FlowVerb.RESUME, "Let a paused FLOW copy again.")
_change_command(FlowVerb.STOP, "Stop FLOW: workers store their progress and leave its group.")
_change_command(FlowVerb.START, "Let a stopped FLOW copy again.")


def _set_directive(
    control: ControlRepository,
    config: DrkitConfig,
    store: StateStore,
    flow: FlowConfig,
    verb: FlowVerb,
    reason: str,
    refused: str,
) -> tuple[FlowDirective, bool]:
    """Under the failover lease (``control`` holds its keeper): ``flow``'s directive after
    ``verb``, and whether it was written - not when the flow already is where ``verb`` puts it.
    Blocked (``refused`` and the blockers) when the change is not allowed now."""
    directive = control.directive(flow.name)
    facts = _facts(config, store, flow, directive.desired)
    if unchanged(verb, facts):
        return directive, False
    blockers = change_blockers(verb, facts)
    if blockers:
        raise Blocked(refused + "; ".join(blockers))
    return control.set(flow.name, verb.desired, reason), True


def _change(
    app: AppContext,
    verb: FlowVerb,
    flow_name: str,
    reason: str,
    wait_s: float,
    config_file: str | None,
    output: str,
) -> None:
    from drkit.control import ControlRepository

    config = app.config(config_file).as_role(Role.ENGINE)  # it publishes as the engine does
    flow = known_flow(config, flow_name, "FLOW")
    store = app.store(config_file)
    store.ensure_current()
    who = operator()
    with _holding_the_failover_lease(store) as keeper:
        control = ControlRepository(store, keeper)
        directive, written = _set_directive(
            control, config, store, flow, verb, f"{who}: {reason}",
            f"{verb.value} {flow.name} refused: ",
        )  # fmt: skip
        note = None
        if not written:  # nothing to write; published again (a retry after a miss)
            note = f"{flow.name} is already {directive.desired.value}: nothing written"
        # Still under the lease: a run starting now publishes after this, never before.
        published = _publish(config, store, flow, directive)
    waited = _wait(store, directive, wait_s) if wait_s > 0 else {}
    _report(output, flow, directive, published, waited, note)
    if published != "published":
        # Either way the operator must hear it: a hold not published lets workers cut off
        # from the store go on copying; a release not published leaves them held.
        effect = "stay held" if verb.desired.value == "running" else "go on copying"
        raise NotPublished(
            f"{flow.name} {directive.desired.value} is in the state store, but not on its "
            f"control channel on {flow.target} ({published}): workers cut off from the store "
            f"do not see it and {effect} - run the command again once the cluster answers"
        )


def _facts(
    config: DrkitConfig, store: StateStore, flow: FlowConfig, current: DesiredState
) -> FlowChangeFacts:
    from drkit.failover.pointer import PointerRepository, active_cluster
    from drkit.failover.runs import RunRepository

    active = active_cluster(PointerRepository(store).get(), config)
    unfinished = tuple(run.id for run in RunRepository(store).unfinished())
    return FlowChangeFacts(flow.name, flow.source, current, active, unfinished)


@contextmanager
def _holding_the_failover_lease(store: StateStore) -> Iterator[LeaseKeeper]:
    """The failover lease for the change (LeaseHeld, exit 5, while a run holds it); one held by
    a process of this host that ended (a command killed mid-copy) is taken at once."""
    from drkit.failover.lease import LeaseKeeper, LeaseRepository, unique_owner

    leases = LeaseRepository(store)
    lease = leases.acquire_from_ended(unique_owner("cli-flows"), _LEASE_TTL_S)
    keeper = LeaseKeeper(leases, lease, _LEASE_TTL_S).start()
    try:
        yield keeper
    finally:
        keeper.stop()
        leases.release(keeper.lease)


def _publish(
    config: DrkitConfig, store: StateStore, flow: FlowConfig, directive: FlowDirective
) -> str:
    from drkit.control.channel import ControlChannel
    from drkit.errors import KafkaError
    from drkit.store.flow_keys import key_for

    channel = ControlChannel.of(config, flow, lambda: key_for(store, flow.name))
    try:
        channel.publish(directive)
        return "published"
    except KafkaError as err:
        return f"not published: {err}"
    finally:
        channel.close()


def _wait(store: StateStore, directive: FlowDirective, wait_s: float) -> dict[str, list[str]]:
    """Wait for the live workers to act on ``directive``: who did, who did not, who is
    silent (cannot be waited for: it holds itself back after the silence window), whose flow
    ended for good (drkit.control.model.acknowledgements: only live workers acknowledge)."""
    from drkit.control import ControlRepository
    from drkit.control.model import acknowledgements

    control = ControlRepository(store)
    deadline = time.monotonic() + wait_s
    while True:
        acks = control.acks(directive.flow)
        waited = acknowledgements(acks, directive.epoch, directive.desired, LIVE_WITHIN_S)
        if not waited["not_yet"] or time.monotonic() >= deadline:
            return waited
        time.sleep(0.5)


def _report(
    output: str,
    flow: FlowConfig,
    directive: FlowDirective,
    published: str,
    waited: dict[str, list[str]],
    note: str | None,
) -> None:
    if output == "json":
        echo_document(
            "flows.change",
            {
                "flow": flow.name,
                "desired": directive.desired.value,
                "epoch": directive.epoch,
                "reason": directive.reason,
                "written": note is None,
                "control_channel": published,
                "workers": waited,
                "at": iso_utc(time.time()),
            },
        )
        return
    click.echo(
        note
        or f"{flow.name}: {directive.desired.value} (epoch {directive.epoch}) - {directive.reason}"
    )
    click.echo(f"  control channel on {flow.target}: {published}")
    if waited:
        click.echo(f"  workers: {_workers_text(waited)}")
        if not waited["acknowledged"] and not waited["not_yet"]:
            click.echo(
                f"  no live 'drkit replicate' runs {flow.name}: the directive is stored and "
                "applies when its workers start"
            )


def _workers_text(waited: dict[str, list[str]]) -> str:
    """``2 acknowledged, not yet: w3``; with no live worker, ``none live (3 ended: FAILED)``
    - a worker whose flow ended for good, or that is not heard from, acknowledges nothing."""
    others = []
    if waited["silent"]:
        others.append(f"silent: {', '.join(waited['silent'])}")
    if waited["ended"]:
        others.append(f"{len(waited['ended'])} ended: FAILED")
    live = len(waited["acknowledged"]) + len(waited["not_yet"])
    if not live:
        return "none live" + (f" ({'; '.join(others)})" if others else " (none has reported)")
    text = f"{len(waited['acknowledged'])} acknowledged"
    if waited["not_yet"]:
        text += f", not yet: {', '.join(waited['not_yet'])}"
    return text + "".join(f", {other}" for other in others)


@click.group("pointer")
def pointer() -> None:
    """The active pointer: the cluster applications should use."""


@pointer.command("show")
@config_option
@output_option
@pass_app
def pointer_show(app: AppContext, config_file: str | None, output: str) -> None:
    """Where the pointer is, since when, and which run moved it (before any failover: the
    first flow's source, as applications are configured)."""
    from drkit.failover.pointer import PointerRepository, active_cluster

    config, store = _reading(app, config_file)
    found = PointerRepository(store).get()
    default = active_cluster(found, config)
    if output == "json":
        echo_document(
            "pointer",
            {
                "cluster": default,
                "set": found is not None,
                "epoch": found.epoch if found is not None else 0,
                "run": found.run_id if found is not None else None,
                "updated_at": iso_utc(found.updated_at) if found is not None else None,
            },
        )
        return
    if found is None:
        click.echo(f"not set (no failover yet): applications use {default or '-'}")
        return
    click.echo(
        f"{found.cluster} (epoch {found.epoch}, run {found.run_id}, "
        f"since {iso_utc(found.updated_at)})"
    )


@pointer.command("key")
@config_option
@pass_app
def pointer_key_command(app: AppContext, config_file: str | None) -> None:
    """Print the pointer key (hex), which applications following the pointer check its records
    with (drkit.client, docs/client-pointer.md).  A secret: hand it to the applications as one.
    Derived from signing.secret when set, else kept in the state store (created if none)."""
    from drkit.failover.pointer import pointer_key

    config, store = _reading(app, config_file)
    click.echo(pointer_key(config, store).hex())


@click.group("fences")
def fences() -> None:
    """Write fences drkit placed on old primaries (DENY WRITE ACLs): list them, lift them."""


@fences.command("list")
@click.option("--all", "everything", is_flag=True, help="Lifted fences too.")
@config_option
@output_option
@pass_app
def fences_list(app: AppContext, everything: bool, config_file: str | None, output: str) -> None:
    """Per cluster, each fenced topic: applied, applying (half on the cluster) or pending (the
    cluster was unreachable: applied when it returns), and which run placed it.  The procedures
    lift their own fences (rollback, failback); `drkit fences lift` is for the rest."""
    from drkit.failover.fences import FenceRepository, FenceState

    _config, store = _reading(app, config_file)
    rows = [
        row
        for row in FenceRepository(store).rows()
        if everything or row.state is not FenceState.LIFTED
    ]
    if output == "json":
        echo_document(
            "fences",
            {
                "fences": [
                    {
                        "cluster": row.cluster,
                        "topic": row.topic,
                        "state": row.state.value,
                        "run": row.run_id,
                        "reads_allowed": row.reads_allowed,
                        "updated_at": iso_utc(row.updated_at),
                    }
                    for row in rows
                ]
            },
        )
        return
    if not rows:
        click.echo("no fences" + ("" if everything else " in place (--all: lifted ones too)"))
        return
    for row in rows:
        run = f"run {row.run_id}" if row.run_id is not None else "no run"
        click.echo(
            f"{row.cluster:<12} {row.topic:<40} {row.state.value:<9} {run}, since "
            f"{iso_utc(row.updated_at)}"
        )


@fences.command("lift")
@click.option(
    "--cluster",
    "cluster_alias",
    required=True,
    metavar="ALIAS",
    shell_complete=complete_clusters,
    help="The cluster whose fence to lift.",
)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    type=TOPIC,
    metavar="TOPIC",
    help="Only this fenced topic (repeatable; default: every one fenced there).",
)
@click.option("--reason", "-m", required=True, type=REASON, help="Why (logged with your name).")
@click.option(
    "--even-if-standby",
    is_flag=True,
    help="Lift although ALIAS is not the active cluster (it is being rebuilt or retired): "
    "applications could then write to both.",
)
@config_option
@output_option
@pass_app
def fences_lift(
    app: AppContext,
    cluster_alias: str,
    topics: tuple[str, ...],
    reason: str,
    even_if_standby: bool,
    config_file: str | None,
    output: str,
) -> None:
    """Let applications write to ALIAS's fenced topics again: deletes drkit's DENY WRITE ACLs
    (and the ALLOWs it added beside them) and records the fence lifted.  A --topic not fenced
    there is refused (exit 2: nothing to lift).  Refused (exit 4) while
    a run has not ended, and when ALIAS is not the active cluster unless --even-if-standby -
    then the opening is recorded and holds until the pointer next moves (fences are desired
    state: the monitor would otherwise put it back).  Idempotent: a lift cut short is run
    again."""
    from drkit.failover.fences import FenceRepository, FenceState
    from drkit.failover.pointer import PointerRepository, active_cluster
    from drkit.failover.reconcile import Reconciler
    from drkit.failover.runs import RunRepository
    from drkit.failover.unfence import LiftFacts, lift_blockers, not_fenced
    from drkit.kafka import KafkaAdmin

    config = app.config(config_file).as_role(Role.ENGINE)  # it changes ACLs as the engine does
    known_cluster(config, cluster_alias, "--cluster")
    store = app.store(config_file, reading=True)
    store.ensure_current()
    with _holding_the_failover_lease(store) as keeper:
        fences = FenceRepository(store, keeper)
        facts = LiftFacts(
            cluster_alias,
            active_cluster(PointerRepository(store).get(), config),
            frozenset(fences.fenced(cluster_alias)),
            frozenset(topics),
            tuple(run.id for run in RunRepository(store).unfinished()),
            even_if_standby,
        )
        was_lifted = fences.topics(cluster_alias, FenceState.LIFTED)
        if (unknown := not_fenced(facts, was_lifted)) is not None:
            raise ConfigError([Problem("--topic", unknown)])
        blockers = lift_blockers(facts)
        if blockers:
            raise Blocked(f"lifting the fence on {cluster_alias} refused: " + "; ".join(blockers))
        lifted: list[str] = []
        if facts.topics:
            pointer = PointerRepository(store).get()
            if cluster_alias != facts.active:
                fences.open(
                    cluster_alias, pointer.epoch if pointer is not None else 0, operator(),
                    reason, facts.requested or None,
                )  # fmt: skip
            # A process frozen since it read the facts must not open a fence a run that took
            # the lease meanwhile placed: the reconciler confirms the lease right before the
            # ACLs change.
            report = Reconciler(config, store, KafkaAdmin, keeper.confirm, keeper).reconcile(
                [cluster_alias], strict=[cluster_alias], timeout_s=30
            )
            lifted = sorted(set(report.clusters[cluster_alias].lifted) & facts.topics)
            log.warning(
                "write fence lifted by hand",
                extra={"cluster": cluster_alias, "topics": ",".join(lifted),
                       "by": operator(), "reason": reason},
            )  # fmt: skip
    if output == "json":
        echo_document("fences.lift", {"cluster": cluster_alias, "lifted": lifted})
    elif lifted:
        click.echo(f"{cluster_alias}: writes allowed again on {len(lifted)} topic(s): "
                   + ", ".join(lifted))  # fmt: skip
    else:
        click.echo(f"{cluster_alias}: nothing fenced")


@flows.command("repoint")
@click.option("--from", "lost", required=True, metavar="CLUSTER", help="the lost source (dc1)")
@click.option("--to", "promoted", required=True, metavar="CLUSTER", help="the promoted one (dc2)")
@click.option("--standby", required=True, metavar="CLUSTER", help="the one to re-point (dc3)")
@click.option(
    "--plan", "plan_only", is_flag=True,
    help="print where the standby would follow from, per partition; change nothing",
)  # fmt: skip
@click.option(
    "--wait", "wait_s", type=FiniteRange(0, 3600), default=30.0, show_default=True,
    metavar="SECONDS",
    help="how long the live workers of FROM->STANDBY have to acknowledge STOPPED before "
    "anything is copied (none acknowledging: refused, nothing copied)",
)  # fmt: skip
@config_option
@output_option
@pass_app
def repoint_standby(
    app: AppContext,
    lost: str,
    promoted: str,
    standby: str,
    plan_only: bool,
    wait_s: float,
    config_file: str | None,
    output: str,
) -> None:
    """STANDBY follows TO after FROM is lost (issue 48; docs/three-dc.md): per partition of
    FROM's topics, the records of FROM's data TO holds and STANDBY lacks are copied once from
    TO's replica into STANDBY's, with offset syncs of FROM->STANDBY for them.  Refused until
    the pointer is on TO after FROM (run `drkit failover --from FROM` first).  Before it reads
    or copies a record the run stops the flow FROM->STANDBY it replaces (its live workers must
    acknowledge within --wait, else refused, nothing copied; exit 1): should FROM return, that
    flow would copy again what the run copied and FROM's tail TO never had.  --plan: only
    where STANDBY would follow from, or STANDBY ahead, or why it cannot be told; changes
    nothing.  Exit 3 (nothing copied) when some partition cannot be told.  A second run
    copies nothing; a run killed mid-copy and run again copies each record once."""
    config = app.config(config_file)
    for alias, option in ((lost, "--from"), (promoted, "--to"), (standby, "--standby")):
        known_cluster(config, alias, option)
    known_flow(config, f"{lost}->{promoted}", "--to")
    known_flow(config, f"{lost}->{standby}", "--standby")
    if plan_only:
        store = app.store(config_file, reading=True) if config.signing.secret is None else None
        if store is not None:
            store.ensure_current()
        report = _read_repoint(config, store, lost, promoted, standby)
        _print_repoint(report, None, output, hold=_hold_plan(lost, promoted, standby))
        return
    _run_repoint(app, config, config_file, lost, promoted, standby, wait_s, output)


class RepointRefused(DrkitError):
    """The re-pointing would let the standby follow a cluster that is not the primary."""

    exit_code = ExitCode.BAD_INPUT


def _read_repoint(
    config: DrkitConfig, store: StateStore | None, lost: str, promoted: str, standby: str
) -> RepointReport:
    from drkit.kafka.admin import KafkaAdmin
    from drkit.kafka.partition_reader import PartitionReader
    from drkit.offsets.repoint_inputs import read_repoint
    from drkit.store.flow_keys import keys_of

    return read_repoint(
        config, lost, promoted, standby,
        connect=KafkaAdmin, keys=keys_of(config, store), records=PartitionReader,
    )  # fmt: skip


def _run_repoint(
    app: AppContext,
    config: DrkitConfig,
    config_file: str | None,
    lost: str,
    promoted: str,
    standby: str,
    wait_s: float,
    output: str,
) -> None:
    """The run: refuse unless the pointer is on ``promoted`` after ``lost`` and both answer;
    then hold the flow ``lost``->``standby`` STOPPED (:func:`hold_replaced_flow`), then the
    plan, and the follow-on copy of every partition that follows (none when one cannot be
    told)."""
    from drkit.control.channel import kafka_channels
    from drkit.kafka.admin import KafkaAdmin
    from drkit.offsets.follow_on import follow_standby
    from drkit.store.flow_keys import control_keys, keys_of

    store = app.store(config_file, reading=True)
    store.ensure_current()
    _require_promoted(store, lost, promoted)
    for alias in (promoted, standby):
        _require_answering(config, alias)
    engine = config.as_role(Role.ENGINE)  # it publishes the directive as the engine does
    held = hold_replaced_flow(
        engine, store, lost, promoted, standby, wait_s, kafka_channels(engine, control_keys(store))
    )
    # The copy under the failover lease too, confirmed before each write: a failover run
    # re-pointing the same standby (its follow_standbys step, a resumed run) and this command
    # never copy side by side - one of them is refused (LeaseHeld, exit 5) or stops (LeaseLost).
    with _holding_the_failover_lease(store) as keeper:
        report, copied = follow_standby(
            config, lost, promoted, standby, connect=KafkaAdmin, keys=keys_of(config, store),
            confirm=keeper.confirm,
        )  # fmt: skip
    # A partition that cannot be told: nothing was copied (exit 3, from the printing).
    _print_repoint(report, copied, output, _onward(config, promoted, standby, lost), held)


class HoldFailed(DrkitError):
    """The flow the re-point replaces could not be proven stopped: nothing was copied."""

    exit_code = ExitCode.FAILED


def _undo(lost: str, promoted: str, standby: str) -> str:
    """How the operator lets the held flow run again, and when drkit allows it."""
    return (
        f"drkit flows start {lost}->{standby} --reason '...' (refused while applications "
        f"write to {promoted}: it would copy {lost}'s divergent tail; after 'drkit failback "
        f"--to {lost}')"
    )


def _hold_plan(lost: str, promoted: str, standby: str) -> dict[str, Any]:
    """What --plan says the run will do to the flow it replaces."""
    return {"flow": f"{lost}->{standby}", "desired": "stopped", "held": False,
            "undo": _undo(lost, promoted, standby)}  # fmt: skip


def hold_replaced_flow(
    config: DrkitConfig,
    store: StateStore,
    lost: str,
    promoted: str,
    standby: str,
    wait_s: float,
    channels: ChannelFactory,
) -> dict[str, Any]:
    """Set the flow ``lost``->``standby`` STOPPED and prove it, before the re-point reads or
    writes a record: should ``lost`` return while ``drkit replicate`` runs that flow, its
    workers would resume from their committed progress and copy into the standby's replica
    again what the follow-on copied (duplicates) and ``lost``'s divergent tail (records the
    promoted cluster never had).

    As a failover's stop_replication does (:func:`drkit.failover.steps.replication.
    publish_directive`, :func:`~drkit.failover.steps.replication.await_workers`): the
    directive written under the failover lease (LeaseHeld, exit 5, while a run holds it;
    Blocked, exit 4, while a run is unfinished) - or kept, when the flow is already STOPPED -
    published on the flow's control channel on ``standby``, then every live worker waited for
    up to ``wait_s``; a silent worker until the silence window has passed (it holds itself
    back by then).  HoldFailed (exit 1) when it cannot be published or a live worker does
    not acknowledge: the caller copies nothing.  Returns what the run prints under ``held``."""
    from drkit.control import ControlRepository
    from drkit.failover.context import StepFailed
    from drkit.failover.steps.replication import (
        FlowSteering,
        await_workers,
        publish_directive,
        unproven_silent,
    )

    flow = config.flow(f"{lost}->{standby}")
    undo = _undo(lost, promoted, standby)
    refused = f"re-point refused, nothing copied: {flow.name}"
    reason = (
        f"{operator()}: drkit flows repoint --from {lost} --to {promoted} --standby {standby} "
        f"({standby} follows {promoted}; {flow.name} must not copy into it again)"
    )
    silence = config.failover.worker_silence_s
    with _holding_the_failover_lease(store) as keeper:
        control = ControlRepository(store, keeper)
        directive, written = _set_directive(
            control, config, store, flow, FlowVerb.STOP, reason, f"{refused} cannot be stopped: "
        )
        steer = FlowSteering(control, channels, silence, keeper.confirm, _quiet)
        try:  # still under the lease: a run starting now publishes after this, never before
            publish_directive(steer, flow, directive)
        except StepFailed as err:
            raise HoldFailed(f"{refused} is not held: {err}") from None
    reading = FlowSteering(ControlRepository(store), channels, silence, _quiet, _quiet)
    try:
        detail = await_workers(reading, flow, directive, wait_s, strict=True)
    except StepFailed as err:
        raise HoldFailed(
            f"{refused} is set STOPPED but not held: {err} (is its 'drkit replicate' stuck? "
            f"run the re-point again once it acknowledges; undo: {undo})"
        ) from None
    # Stricter than a failover's step, which goes on: a worker silent on the store and the
    # channel whose silence window has not passed (--wait shorter than it) may still copy.
    unproven = unproven_silent(reading, flow, detail)
    if unproven:
        raise HoldFailed(
            f"{refused} is set STOPPED but not held: workers {', '.join(unproven)} are silent "
            f"and their silence window ({silence:g}s, failover.worker_silence_s) has not passed "
            f"- they may still copy; run the re-point again with a --wait of at least {silence:g}"
        )
    return {
        "flow": flow.name,
        "desired": directive.desired.value,
        "epoch": directive.epoch,
        "written": written,
        "reason": directive.reason,
        "held": True,
        "acknowledged": detail["acknowledged"],
        "silent": detail["silent"],
        "waited_s": detail["waited_s"],
        "undo": undo,
    }


def _quiet(*_args: object) -> None:
    """Neither a lease to confirm nor progress to show."""


def _require_promoted(store: StateStore, lost: str, promoted: str) -> None:
    """RepointRefused unless the pointer is on ``promoted``, moved there by a run from
    ``lost``: before the failover the standby would follow a standby."""
    from drkit.failover.pointer import PointerRepository
    from drkit.failover.runs import RunRepository

    pointer = PointerRepository(store).get()
    first = f"run `drkit failover --from {lost}` first"
    if pointer is None or pointer.cluster != promoted:
        where = "not set" if pointer is None else f"on {pointer.cluster}"
        raise RepointRefused(f"the pointer is {where}, not on {promoted}: {first}")
    run = RunRepository(store).get(pointer.run_id) if pointer.run_id is not None else None
    if run is None or run.source != lost:
        came = f"from {run.source}" if run is not None else "by hand"
        raise RepointRefused(
            f"the pointer moved to {promoted} {came}, not after {lost}: nothing to re-point"
        )


def _require_answering(config: DrkitConfig, alias: str) -> None:
    from drkit.errors import UnreachableClusterError
    from drkit.kafka.clients import ClusterEndpoint, not_answering

    cluster = config.clusters[alias]
    why = not_answering(ClusterEndpoint(alias, cluster))
    if why is not None:
        raise UnreachableClusterError(alias, cluster.bootstrap_servers, why)


def _onward(config: DrkitConfig, promoted: str, standby: str, lost: str) -> dict[str, Any]:
    """The ordinary flow for the promoted cluster's new writes: configured, or the YAML to
    add (the standby's flow from ``lost`` with its source replaced; config files are never
    edited here)."""
    import yaml

    name = f"{promoted}->{standby}"
    configured = next((flow for flow in config.flows if flow.name == name), None)
    if configured is not None:
        return {"flow": name, "configured": True, "yaml": None,
                "follows": lost in configured.follows}  # fmt: skip
    model = config.flow(f"{lost}->{standby}")
    own = {"source", "target", "standby", "follows"}
    body = model.model_dump(mode="json", exclude_defaults=True, exclude=own)
    # follows: the flow carries the promoted cluster's replicas of the lost one over by name
    # (checkpoints, a later failover) through the onward map this command writes.
    body = {"source": promoted, "target": standby, **body, "follows": [lost]}
    return {"flow": name, "configured": False, "follows": True,
            "yaml": yaml.safe_dump({"flows": [body]}, sort_keys=False)}  # fmt: skip


def _print_repoint(
    report: RepointReport,
    copied: dict[TopicPartition, Copied] | None,
    output: str,
    onward: dict[str, Any] | None = None,
    hold: dict[str, Any] | None = None,
) -> None:
    """The plan (``copied`` None), or a run's outcome: per partition what was copied (``{}``:
    refused, nothing copied); ``hold``: the flow the run stops (the plan) or stopped (a run,
    :func:`hold_replaced_flow`), and how to undo it."""
    rows = [_repoint_row(tp, report.replicas[tp], result) for tp, result in report.results.items()]
    if copied is not None:
        for tp, row in zip(report.results, rows, strict=True):
            done = copied.get(tp)
            row["copied"] = done.copied if done is not None else 0
            row["placed"] = done.placed if done is not None else 0
            if done is not None:
                row.update(read=done.read, copied_first=done.first, copied_end=done.end)
                row["onward_mapped"] = done.onward
    lost, promoted, standby = report.lost, report.promoted, report.standby
    refused = any(row["state"] == "cannot_tell" for row in rows)
    onward = None if refused else onward
    if output == "json":
        document: dict[str, Any] = {"from": lost, "to": promoted, "standby": standby,
                                    "plan": copied is None, "partitions": rows}  # fmt: skip
        if onward is not None:
            document["onward"] = {**onward, "map_not_written": report.onward}
        if hold is not None:
            document["hold"] = hold
        echo_document("flows.repoint", document)
    else:
        _echo_repoint(rows, copied, lost, promoted, standby, onward)
        if onward is not None and copied is not None:
            _echo_onward_map(rows, onward, report.onward, lost, promoted, standby)
        if hold is not None:
            _echo_hold(hold)
    if refused:
        raise SystemExit(ExitCode.UNHEALTHY)


def _echo_repoint(
    rows: list[dict[str, Any]],
    copied: dict[TopicPartition, Copied] | None,
    lost: str,
    promoted: str,
    standby: str,
    onward: dict[str, Any] | None,
) -> None:
    if copied is None:
        click.echo(f"{standby} following {promoted} after {lost} (plan only: nothing changed)")
    elif any(row["state"] == "cannot_tell" for row in rows):
        click.echo(f"{standby} following {promoted} after {lost}: refused, nothing copied "
                   "(some partition cannot be told)")  # fmt: skip
    else:
        total = sum(int(row["copied"]) for row in rows)
        click.echo(f"{standby} following {promoted} after {lost}: {total} copied")
    if not rows:
        click.echo(f"  no partition of {lost} has an offset map on {promoted} or {standby}")
    for row in rows:
        text = row["text"]
        if "copied" in row and row["state"] == "follow":
            placed = f" (and the offset syncs of {row['placed']} earlier copies)"
            text = f"{row['copied']} copied{placed if row['placed'] else ''}; planned {text}"
        click.echo(f"  {row['origin']} ({row['promoted_replica']} -> "
                   f"{row['standby_replica']}): {text}")  # fmt: skip
    if onward is None:
        return
    if onward["configured"]:
        click.echo(f"new writes on {promoted}: flow {onward['flow']} is configured - run it "
                   "(drkit replicate)")  # fmt: skip
    else:
        click.echo(
            f"new writes on {promoted} reach {standby} only through a flow "
            f"{onward['flow']}; add it to the config (this command edits no file):"
        )
        click.echo(onward["yaml"].rstrip())


def _echo_onward_map(
    rows: list[dict[str, Any]],
    onward: dict[str, Any],
    missing: str | None,
    lost: str,
    promoted: str,
    standby: str,
) -> None:
    """What the run did for groups on the promoted cluster's replicas of ``lost``: the
    onward map (offset syncs of the flow promoted->standby) written, or why not."""
    if missing is not None:
        click.echo(f"onward map not written ({promoted} positions -> {standby} positions for "
                   f"groups on {promoted}'s replicas of {lost}): {missing}")  # fmt: skip
        return
    gained = sum(int(row.get("onward_mapped") or 0) for row in rows)
    click.echo(f"onward map: {gained} {promoted} positions newly mapped onto {standby} in "
               f"{onward['flow']}'s offset syncs (groups on {promoted}'s replicas of {lost} "
               f"translate onto {standby})")  # fmt: skip
    if not onward.get("follows"):
        click.echo(f"  flow {onward['flow']} does not follow {lost}: add 'follows: [{lost}]' to "
                   "it, or its checkpoints and a failover leave those groups behind")  # fmt: skip


def _echo_hold(hold: dict[str, Any]) -> None:
    flow = hold["flow"]
    if not hold["held"]:
        click.echo(f"the run first stops flow {flow} (its live workers must acknowledge STOPPED "
                   "before anything is copied)")  # fmt: skip
    else:
        workers = ", ".join(hold["acknowledged"]) or "no live worker"
        silent = f"; silent (held back by the silence window): {', '.join(hold['silent'])}"
        click.echo(f"flow {flow} held STOPPED (epoch {hold['epoch']}; acknowledged by "
                   f"{workers}{silent if hold['silent'] else ''})")  # fmt: skip
    click.echo(f"  to let it run again: {hold['undo']}")


def _repoint_row(
    origin: TopicPartition, replicas: tuple[TopicPartition, TopicPartition], result: Repointed
) -> dict[str, Any]:
    """One partition's answer, for the JSON document and the text."""
    from drkit.repoint import FollowFrom, StandbyAhead

    row: dict[str, Any] = {
        "origin": f"{origin.topic}-{origin.partition}",
        "promoted_replica": f"{replicas[0].topic}-{replicas[0].partition}",
        "standby_replica": f"{replicas[1].topic}-{replicas[1].partition}",
    }
    if isinstance(result, FollowFrom):
        row.update(
            state="follow", start=result.start, frontier=result.frontier,
            to_copy=result.to_copy, unreachable=result.unreachable, holes=result.holes,
            evidence=result.evidence.value,
            text=f"from {result.start} (origin offsets >= {result.frontier}): "
            f"{result.to_copy} to copy, {result.unreachable} unreachable, "
            f"{result.holes} holes ({result.evidence.value})",
        )  # fmt: skip
    elif isinstance(result, StandbyAhead):
        row.update(
            state="standby_ahead", start=result.start, first=result.first, end=result.end,
            records=result.records,
            text=f"standby ahead by {result.records} records of origin offsets "
            f"[{result.first}, {result.end}): nothing to copy",
        )  # fmt: skip
    else:
        row.update(state="cannot_tell", reason=result.reason, text=f"cannot tell: {result.reason}")
    return row


COMMANDS = [flows, pointer, fences]
