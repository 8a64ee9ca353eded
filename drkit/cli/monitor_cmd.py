"""``drkit monitor`` and ``drkit status``."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from drkit.cli.context import (
    HOST_NAME,
    IDENTITY,
    AppContext,
    config_option,
    echo_json,
    output_option,
    pass_app,
    tls_files,
    tls_options,
)
from drkit.config.loader import known_flow, validation_problems
from drkit.config.model import DrkitConfig, HealthPolicy, HostPort, Role, connects_as
from drkit.errors import ConfigError, DrkitError, ExitCode, LeaseLost, Problem
from drkit.health.group_lag import group_listing
from drkit.health.identity import is_vote
from drkit.health.jobs import JobKind
from drkit.health.observations import Cell, measures
from drkit.listening import is_loopback
from drkit.logs import printable

if TYPE_CHECKING:
    from drkit.status import StatusSnapshot
    from drkit.status.document import FlowControlView, FlowView, ObserverView
    from drkit.store.db import StateStore

log = logging.getLogger(__name__)

# A probe interval outside this range is a typo, not a setting (0.1 s would hammer the
# clusters; more than an hour is no monitoring).
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.1, 3600.0


def _listen(value: str, option: str = "--listen") -> tuple[str, int]:
    try:
        address = HostPort.parse(value, port_zero=True)
    except ValueError as err:
        raise ConfigError([Problem(option, f"{err} (HOST:PORT or [IPv6]:PORT)")]) from None
    return address.host, address.port


def _interval(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (
        math.isfinite(value) and MIN_INTERVAL_S <= value <= MAX_INTERVAL_S
    ):
        raise click.BadParameter(
            f"{value:g} is not a probe interval in seconds ({MIN_INTERVAL_S:g}..{MAX_INTERVAL_S:g})"
        )
    return value


def with_interval(config: DrkitConfig, interval: float | None) -> DrkitConfig:
    """``config`` probing every ``interval`` seconds, re-checked like a loaded config (the
    probe timeout must stay below the interval, the observation window above it)."""
    if interval is None:
        return config
    try:
        health = HealthPolicy.model_validate(
            {**config.health.model_dump(), "probe_interval_s": interval}
        )
    except ValidationError as err:
        raise ConfigError(
            [
                Problem("--interval", f"{interval:g} contradicts health.{p.path}: {p.reason}")
                for p in validation_problems(err)
            ]
        ) from None
    return config.model_copy(update={"health": health})


@click.command("monitor")
@config_option
@click.option(
    "--listen",
    default="127.0.0.1:9464",
    show_default=True,
    help="HOST:PORT for /metrics, /healthz, /api/status and the status page.",
)
@click.option(
    "--api-token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file whose first line is the bearer token /api/translate requires (needed to "
    "serve it when --listen is not a loopback address).",
)
@click.option(
    "--metrics-listen",
    default=None,
    metavar="HOST:PORT",
    help="Also serve /metrics and /healthz - and nothing else - on HOST:PORT, so a scraper's "
    "network never reaches the status API (--listen keeps serving everything).",
)
@tls_options("--listen and --metrics-listen")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    type=HOST_NAME,
    metavar="NAME",
    help="Also answer requests for this Host name on --listen (repeatable). Beyond loopback "
    "the status page and the APIs answer only IP addresses, the listen address and this "
    "machine's names (a web page's DNS rebinding is refused, 421); /metrics and /healthz any.",
)
@click.option(
    "--observer",
    default=None,
    type=IDENTITY,
    help="Name of this vantage point (monitors with different names form a quorum) "
    "[default: hostname].",
)
@click.option(
    "--interval",
    type=float,
    default=None,
    callback=_interval,
    help="Probe interval in seconds, 0.1..3600 and above health.probe_timeout_s "
    "(default: health.probe_interval_s).",
)
@pass_app
def monitor(
    app: AppContext,
    config_file: str | None,
    listen: str,
    api_token_file: str | None,
    metrics_listen: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    allow_hosts: tuple[str, ...],
    observer: str | None,
    interval: float | None,
) -> None:
    """Probe clusters and flows on a schedule, evaluate health, serve status and metrics.

    Runs until SIGTERM/SIGINT.  Observations, states and transitions go to the state store,
    where other observers' monitors read them for the quorum.  Probing goes on while the state
    store is down (/healthz then fails, naming it); what was missed is written when it is back.
    """
    from drkit.health.identity import CLI_PREFIX

    # The arguments first - addresses, TLS files, free ports, the token - before the config,
    # the store and the monitor's modules are loaded (a bad one was told after seconds).
    host, port = _listen(listen)
    metrics_at = _listen(metrics_listen, "--metrics-listen") if metrics_listen else None
    if metrics_at is not None:
        _distinct(listen, (host, port), metrics_at)
    tls = tls_files(tls_cert, tls_key)
    _free("--listen", host, port)
    if metrics_at is not None:
        _free("--metrics-listen", *metrics_at)
    api_token = _api_token(api_token_file)
    if api_token is not None and tls is None and not is_loopback(host):
        why = (f"a bearer token over plain HTTP on {listen} (beyond loopback) can be read on "
               "the way: serve HTTPS with --tls-cert and --tls-key, or listen on loopback "
               "behind a TLS proxy")  # fmt: skip
        raise ConfigError([Problem("--api-token-file", why)])
    name = observer or socket.gethostname()
    if not is_vote(name):
        raise ConfigError(
            [
                Problem(
                    "--observer",
                    f"{name!r}: ids starting {CLI_PREFIX!r} are "
                    "drkit status's own probes, never a vote - choose another",
                )
            ]
        )
    from drkit.automation.metrics import publish_failover_figures
    from drkit.automation.runner import AutomaticFailover
    from drkit.drills.figures import publish_drill_figures
    from drkit.drills.schedule import DrillSchedule
    from drkit.failover.lease import maintenance_owner, unique_owner
    from drkit.failover.maintenance import FailoverMaintenance
    from drkit.failover.pointer_topic import kafka_pointer_topic
    from drkit.health.identity import claim_observer
    from drkit.health.jobs import make_scheduler
    from drkit.health.monitor import Monitor
    from drkit.kafka.admin import KafkaAdmin
    from drkit.replication_service import install_stop_signals
    from drkit.status.current import status_source
    from drkit.status.web import StatusApp, serve

    config = with_interval(app.config(config_file).as_role(Role.MONITOR), interval)
    store = app.store(config_file)
    store.ensure_current()
    claim = claim_observer(store, name)  # one monitor per observer id (refused otherwise)
    # its votes: only while it holds the id
    mon = Monitor(config, name, store, claim=claim, connect=KafkaAdmin)
    scheduler = make_scheduler(mon)
    # Finish what failovers left open: fence returning clusters, resume runs whose engine died.
    maintenance = FailoverMaintenance(
        config, store, app.state_dir, owner=maintenance_owner(name), connect=KafkaAdmin,
        pointer_topics=kafka_pointer_topic,  # the pointer where clients read it, kept current
    )  # fmt: skip
    scheduler.add_job(
        maintenance.tick, "interval", seconds=max(5.0, config.health.probe_interval_s),
        id="failover-maintenance",
    )  # fmt: skip
    # Health-triggered failover: decide every probe interval, act through the engine.
    automatic = AutomaticFailover(
        config, store, app.state_dir, name, metrics=mon.metrics, connect=KafkaAdmin,
        pointer_topics=kafka_pointer_topic,
    )  # fmt: skip
    scheduler.add_job(
        automatic.tick, "interval", seconds=config.health.probe_interval_s,
        id="automatic-failover", max_instances=1, coalesce=True,
    )  # fmt: skip
    # Failover runs and automation, as metrics (whoever ran them).
    scheduler.add_job(
        publish_drill_figures, "interval", args=[store, mon.metrics],
        seconds=max(5.0, config.health.probe_interval_s), id="drill-figures",
        next_run_time=datetime.now(UTC),
    )  # fmt: skip
    scheduler.add_job(
        publish_failover_figures, "interval", args=[store, mon.metrics],
        seconds=max(5.0, config.health.probe_interval_s), id="failover-figures",
        next_run_time=datetime.now(UTC),
    )  # fmt: skip
    # Drills on a cron (drills.schedule): readiness checks, or full drills on local clusters.
    DrillSchedule(
        config, app.config_path, store, app.state_dir, unique_owner(f"monitor:{name}"), KafkaAdmin
    ).add_to(scheduler)
    picture = status_source(config, store, mon.status_failed)
    web = StatusApp(
        picture,
        mon.liveness,
        translator(config, store),
        api_token,
        beyond_loopback=not is_loopback(host),
    )
    servers = [serve(web, host, port, tls=tls, host_names=allow_hosts)]
    if metrics_at is not None:
        scraped = StatusApp(picture, mon.liveness, metrics_only=True)
        servers.append(serve(scraped, *metrics_at, "--metrics-listen", tls=tls))
    server = servers[0]
    scheme = "https" if tls is not None else "http"
    scheduler.start()
    click.echo(
        f"monitor {name}: {scheme}://{_url_host(host)}:{server.server_port}/ "
        f"(probing every {config.health.probe_interval_s:g}s; "
        f"as {connects_as(config, config.clusters)})"
    )
    if metrics_at is not None:
        click.echo(
            f"metrics: {scheme}://{_url_host(metrics_at[0])}:{servers[1].server_port}/metrics"
        )
    stop = threading.Event()
    install_stop_signals(stop)
    try:
        while not stop.wait(1.0):
            if claim.lost is not None:  # frozen or cut off past the claim: another took the id
                raise LeaseLost(
                    f"observer id {name!r} was claimed by another monitor while this one could "
                    f"not renew it ({claim.lost}): stopping - its votes are no longer written"
                )
    finally:
        scheduler.shutdown(wait=False)
        for listener in servers:
            listener.shutdown()
        mon.close()
        claim.stop()
        with contextlib.suppress(DrkitError):
            claim.leases.release(claim.lease)


_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _distinct(listen: str, status: tuple[str, int], metrics: tuple[str, int]) -> None:
    """ConfigError unless --listen and --metrics-listen can both be bound: the same address
    (or one on every address, 0.0.0.0 or ::, and the same port) was refused at the second
    bind, seconds later, as "Address already in use" - by this monitor's own listener."""
    (host, port), (metrics_host, metrics_port) = status, metrics
    if port == 0 or port != metrics_port:
        return  # two ports the system picks are never one
    if host == metrics_host:
        why = "--listen and --metrics-listen name the same address"
    elif (host in _WILDCARDS or metrics_host in _WILDCARDS) and (
        (":" in host) == (":" in metrics_host) or "::" in (host, metrics_host)  # :: takes IPv4
    ):
        why = f"--listen {listen} and --metrics-listen overlap: one listens on every address"
    else:
        return
    raise ConfigError([Problem("--metrics-listen", f"{why}: give each its own port")])


def _free(option: str, host: str, port: int) -> None:
    """ConfigError naming ``option`` when ``host`` does not resolve or ``host``:``port`` is
    in use now, before the config and store are loaded (the listener binds it again when the
    monitor starts and reports anything else then)."""
    import errno

    from drkit.listening import binding

    if port == 0:
        return
    with binding(option, host, port):
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _name, address in found:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
                try:
                    probe.bind(address)
                except OSError as err:
                    if err.errno == errno.EADDRINUSE:
                        raise
                    # another refusal (an address family this host lacks): the server's to tell


def _api_token(path: str | None) -> str | None:
    """The first line of ``path`` (ConfigError naming --api-token-file when it cannot be read or
    is empty); a file others may read is used, with a warning."""
    if path is None:
        return None
    try:
        text = Path(path).read_text().splitlines()
        mode = Path(path).stat().st_mode
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ConfigError([Problem("--api-token-file", f"cannot read {path}: {reason}")]) from None
    token = text[0].strip() if text else ""
    if not token:
        raise ConfigError([Problem("--api-token-file", f"{path}: the first line is empty")])
    if mode & 0o077:
        log.warning("the API token file is readable by others", extra={"file": path})
    return token


def translator(
    config: DrkitConfig, store: StateStore
) -> Callable[[str, list[str]], dict[str, Any]]:
    """``/api/translate``: given offsets of one flow, translated as the CLI does (offset syncs
    verified with the flow's key from ``store``)."""
    from drkit.kafka.admin import KafkaAdmin
    from drkit.offsets.lookup import KeptLoaders, parse_offsets, translate_offsets
    from drkit.store.flow_keys import keys_of

    keys = keys_of(config, store)
    kept = KeptLoaders()  # each flow's offset map read once, then only what was appended

    def translate(flow_name: str, values: list[str]) -> dict[str, Any]:
        flow = known_flow(config, flow_name, "flow")
        positions = parse_offsets(values)
        return translate_offsets(
            config, flow, positions, keys=keys, kept=kept, connect=KafkaAdmin
        ).to_json()

    return translate


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _watch_interval(
    _ctx: click.Context, _param: click.Parameter, value: float | None
) -> float | None:
    if value is not None and not 1 <= value <= MAX_INTERVAL_S:
        raise click.BadParameter(f"{value:g}: give 1 to {MAX_INTERVAL_S:g} seconds")
    return value


@click.command("status")
@config_option
@output_option
@click.option(
    "--probe/--no-probe",
    default=None,
    help="Probe now (default: only when no monitor reported recently).",
)
@click.option(
    "--watch",
    "watch_s",
    type=float,
    default=None,
    metavar="SECONDS",
    callback=_watch_interval,
    help="Redraw every SECONDS until Ctrl-C (with -o json: one document per line).",
)
@click.option(
    "--color/--no-color",
    default=None,
    help="Colour the states (default: on a terminal only).",
)
@pass_app
def status(
    app: AppContext,
    config_file: str | None,
    output: str,
    probe: bool | None,
    watch_s: float | None,
    color: bool | None,
) -> None:
    """Clusters, flows, lag, checkpoint ages, losses and whether a failover is possible now.

    Exits 3 when the active cluster is unavailable (agreed, or by every fresh observer)."""
    config = app.config(config_file).as_role(Role.MONITOR)
    store = app.store(config_file, reading=True)
    store.ensure_current()
    if watch_s is None:
        picture = _picture(config, store, probe)
        _show(picture, output, color, compact=False)
        if picture.active_unavailable:  # scripts and probes see it without parsing the output
            raise SystemExit(ExitCode.UNHEALTHY)
        return
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
        while True:
            picture = _picture(config, store, probe)
            if output != "json":
                click.clear()
            _show(picture, output, color, compact=True)
            if output != "json":
                click.echo(f"\nevery {watch_s:g}s - Ctrl-C to stop")
            _between_redraws(watch_s)


def _between_redraws(seconds: float) -> None:
    """The wait of ``status --watch``; its own name so a test can press Ctrl-C here alone
    (patching ``time.sleep`` would reach every thread in the process)."""
    time.sleep(seconds)


def _picture(config: DrkitConfig, store: StateStore, probe: bool | None) -> StatusSnapshot:
    """The status from the store; probed first when asked, or when no monitor reports."""
    from drkit.health.identity import cli_observer
    from drkit.health.monitor import Monitor
    from drkit.kafka.admin import KafkaAdmin
    from drkit.status import current_status

    picture = current_status(config, store)
    if probe or (probe is None and not any(is_vote(o) for o in picture.observers)):
        # No monitor reports: look now, as this host's CLI observer - one row per host, never
        # a vote, counting its failures in a row across calls (and redraws of --watch).
        mon = Monitor(_answering_quickly(config), cli_observer(), store, connect=KafkaAdmin)
        try:
            mon.resume_views()
            run_all_at_once(mon.run_job, [
                *(f"{JobKind.PROBE}:{alias}" for alias in config.clusters),
                *(f"{JobKind.FLOW}:{flow.name}" for flow in config.flows),
            ])  # fmt: skip
        finally:
            mon.close()
        picture = current_status(config, store)
    return picture


def _answering_quickly(config: DrkitConfig) -> DrkitConfig:
    """``config`` whose probes wait at most the first answer's bound
    (:data:`~drkit.kafka.clients.FIRST_ANSWER_S`) for an answer, for ``drkit status`` probing
    on its own (one observer per host, never a vote): a cluster down, hung or not Kafka is
    named within 3 s of the command's start (issue 45); a healthy broker answers its metadata
    request in milliseconds.  The monitor keeps the configured ``health.probe_timeout_s``."""
    from drkit.kafka.clients import FIRST_ANSWER_S

    if config.health.probe_timeout_s <= FIRST_ANSWER_S:
        return config
    health = config.health.model_copy(update={"probe_timeout_s": FIRST_ANSWER_S})
    return config.model_copy(update={"health": health})


def run_all_at_once(run: Callable[[str], None], jobs: list[str]) -> None:
    """Run every job at the same time, each on a daemon thread of its own, and wait for all:
    a cluster that does not answer costs its own probe timeout, not one more per cluster and
    flow after it (the status of a config with a cluster down took 3-12 s, issue 45).  The
    monitor runs the same jobs concurrently in its scheduler's pool; Ctrl-C ends the wait at
    once."""
    from drkit.kafka.interruptible import InFlight

    running = [InFlight(partial(run, job), name=f"drkit-status {job}") for job in jobs]
    for call in running:
        call.wait()


def _show(picture: StatusSnapshot, output: str, color: bool | None, compact: bool) -> None:
    if output == "json":
        document = picture.to_json()
        if compact:
            click.echo(json.dumps(document, sort_keys=True, default=str))
        else:
            echo_json(document)
        return
    for line in _lines(picture):
        click.echo(line, color=color)


def _seconds(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.1f}s{suffix}"


# A state's colour on a terminal: the eye finds the red line first.
_STATE_COLOURS = {"HEALTHY": "green", "DEGRADED": "yellow", "UNAVAILABLE": "red"}


def _state(value: str, width: int = 0) -> str:
    """``value`` padded to ``width``, coloured by what it means (UNKNOWN stays plain)."""
    return click.style(
        value.ljust(width), fg=_STATE_COLOURS.get(value), bold=value == "UNAVAILABLE"
    )


def _alarm(word: str) -> str:
    return click.style(word, fg="red", bold=True)


def _safe(value: object) -> str:
    """Text drkit did not choose (group and topic names, errors, reasons, worker ids) made one
    line with no terminal codes - before any colour of drkit's own is added around it."""
    return printable(str(value))


def _observer_line(observer: str, view: ObserverView, now: float) -> str:
    """One observer's word on a cluster; one too old to count says so and how old it is (a
    stopped monitor's last 'HEALTHY' read as if it held now)."""
    vote = "" if is_vote(observer) else " (drkit status's own probe: not a vote)"
    stale = (
        "" if view.fresh else f" (stale: last heard {now - view.updated_at:.0f}s ago, not counted)"
    )
    reason = _safe(view.reason or "")
    line = f"    {_safe(observer)}: {_state(view.state.value)} - {reason}{vote}{stale}"
    # The latest probe's cause when it failed or degraded: refused, unresolvable, hung and
    # 'answers HTTP' read alike as 'probe failed' otherwise.
    error = view.probe.get("error")
    if error and view.probe.get("outcome") in ("failed", "degraded"):
        line += f"\n      why: {_safe(error)}"
    return line


def _lines(picture: StatusSnapshot) -> list[str]:
    """``drkit status`` as text, states coloured (click drops the colour off a terminal).
    Every value from outside drkit passes through :func:`_safe`."""
    out: list[str] = []
    automation = picture.automation
    out.append(
        f"observers: {_safe(', '.join(picture.observers)) or 'none'}   "
        f"active cluster: {picture.active_cluster or '-'}   "
        f"automation: {'allowed' if automation.allowed else 'off'} ({_safe(automation.reason)})"
    )
    decided = automation.last_decision
    if decided is not None:
        when = decided.at.strftime("%Y-%m-%d %H:%M:%S")
        action = f"failed over (run {decided.run_id})" if decided.act else "held"
        out.append(
            f"last automatic decision ({_safe(decided.observer)}, {when}): {action} - "
            f"{_safe(decided.summary)}"
        )
    out.append("\nclusters")
    for alias, cluster in picture.clusters.items():
        votes = f"{len(cluster.down_votes)}/{cluster.quorum} down votes"
        out.append(f"  {alias:<12} {_state(cluster.state.value, 12)} {votes}")
        for observer, view in cluster.observers.items():
            out.append(_observer_line(observer, view, time.time()))
    out.append("\nflows")
    for name, flow in picture.flows.items():
        out.append(f"  {name:<16} {_flow_line(flow)}")
        out += [f"    {line}" for line in _control_lines(flow.control)]
        for line in _flow_detail(flow):
            out.append(f"    {line}")
        if flow.losses:
            out.append(f"    {_alarm('LOST')} {flow.lost_records} records before replication:")
            for event in flow.losses:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.detected_at_ms / 1000))
                out.append(
                    f"      {_safe(event.source.topic)}[{event.source.partition}] offsets "
                    f"{event.first_offset}..{event.last_offset} ({event.count}, "
                    f"{event.reason.value}) detected {when} UTC"
                )
        ready = flow.failover
        verdict = (
            f"{click.style('yes', fg='green')} (RPO {ready.rpo_records} records, "
            f"{_seconds(ready.rpo_seconds)})"
            if ready.possible
            else f"{click.style('no', fg='yellow')}: {_safe('; '.join(ready.reasons))}"
        )
        out.append(f"    fail over now: {verdict}")
    pointer = picture.pointer
    out.append(
        "\nactive pointer: "
        + (
            f"{pointer.cluster} (epoch {pointer.epoch}, run {pointer.run_id})"
            if pointer is not None
            else "not set (no failover yet)"
        )
    )
    for fenced, topics in picture.pending_fences.items():
        out.append(
            f"  {_alarm('PENDING FENCE')} on {fenced} (unreachable at failover): "
            + _safe(", ".join(topics))
        )
    last = picture.last_failover
    described = (
        f"run {last.id} {last.kind} {last.source} -> {last.target}: {last.state}"
        if last
        else "none"
    )
    out.append(f"last failover: {described}")
    for kind, drill in sorted(picture.drills.items()):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(drill.finished_at))
        verdict = drill.verdict or f"{drill.state} (no verdict)"
        shown = verdict if drill.passed else _alarm(verdict)
        out.append(f"last {kind}: #{drill.id} {_safe(drill.flow)} {shown} at {when} UTC")
    if last is not None and last.divergence is not None:
        out.append(
            f"  {_alarm('DIVERGENCE')}: {last.source} came back holding "
            f"{last.divergence.records} records "
            f"{last.target} never got (drkit failback exports them)"
        )
    if picture.transitions:
        out.append("\nrecent transitions")
        for t in picture.transitions[:10]:
            when = time.strftime("%H:%M:%S", time.gmtime(t.at)) if t.at else "-"
            out.append(
                f"  {when} {t.kind} {_safe(t.subject)} ({_safe(t.observer)}): "
                f"{t.from_state or '-'} -> {t.to_state}  {_safe(t.reason or '')}"
            )
    return out


COMMANDS = [monitor, status]


def _flow_detail(flow: FlowView) -> list[str]:
    """Lag per source topic, then one line per consumer group: its lag status (Burrow's rules,
    as the monitor judged it) and what moving it now would cost, from its checkpoints; then
    each measure shown on a line of its own."""
    seen = flow.observation
    if seen is None:
        return []
    lines = []
    if seen.lag_by_topic:
        bound = "" if seen.lag_exact is not False else " (at most)"
        topics = ", ".join(f"{_safe(t)} {n}" for t, n in sorted(seen.lag_by_topic.items()))
        lines.append(f"lag by topic{bound}: {topics}")
    listing = group_listing(seen.group_lag, seen.groups)
    if listing.left_out:  # thousands of groups: counts, then the worst first
        by_count = ", ".join(f"{status} {n:,}" for status, n in listing.counts.items())
        worst = len(listing.shown)
        lines.append(f"groups: {listing.total:,} ({by_count}); the worst {worst} first")
    for group in listing.shown:
        status = seen.group_lag.get(group, "unknown")
        moved = seen.groups.get(group)
        cost = (
            f"moving it now: {moved.rereads} re-read, {moved.unreplicated} not replicated "
            f"({moved.partitions} partitions checkpointed)"
            if moved is not None
            else "no checkpoint yet: it would start at its auto.offset.reset"
        )
        lines.append(f"group {_safe(group)}: lag {_safe(status)}; {cost}")
    if listing.left_out:
        lines.append(f"... {listing.left_out:,} more groups (drkit groups lag, or -o json)")
    lines += [_cell_text(cell) for label, cell in _shown(flow) if label is None]
    return lines


def _control_lines(control: FlowControlView | None) -> list[str]:
    """The flow's directive and its workers: a flow that ended for good, or that should run
    and has no live worker running it, in red."""
    if control is None:
        return []
    running = _safe(", ".join(control.running)) or "none"
    lines = [f"directive: {control.desired} (epoch {control.epoch}); running on: {running}"]
    if control.not_running:
        lines.append(
            f"{_alarm('NOT RUNNING')}: no live worker acknowledged RUNNING (drkit flows list)"
        )
    lines += [
        f"{_alarm('FAILED')} on {_safe(worker)}: {_safe(error)}"
        for worker, error in control.failed.items()
    ]
    return lines


def _shown(flow: FlowView) -> list[tuple[str | None, Cell]]:
    """Each measure status shows, as ``drkit status`` shows it (its label, or None for a line
    of its own), read from the observation's stored form (drkit.health.observations)."""
    seen = flow.observation
    stored = seen.to_json() if seen is not None else flow.observed.unobserved_json(flow.name)
    return [
        (known.shown.label, known.shown.terminal(stored))
        for _name, known in measures(flow.observed)
        if known.shown is not None
    ]


def _cell_text(cell: Cell) -> str:
    text = _safe(cell.text) + (f" {_safe(cell.note)}" if cell.note else "")
    return f"{_alarm(cell.alarm)} {text}" if cell.alarm else text


def _flow_line(flow: FlowView) -> str:
    """The flow's measures on one line, each after its label."""
    return "  ".join(
        f"{label} {_cell_text(cell)}" for label, cell in _shown(flow) if label is not None
    )
