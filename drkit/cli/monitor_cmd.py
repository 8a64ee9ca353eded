"""``drkit monitor`` and ``drkit status``."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import click

from drkit.cli.context import AppContext, config_option, echo_json, output_option, pass_app
from drkit.errors import ConfigError, Problem
from drkit.replication.service import default_worker_id, install_stop_signals


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError([Problem("--listen", f"{value!r} is not HOST:PORT")])
    return host, int(port)


@click.command("monitor")
@config_option
@click.option(
    "--listen",
    default="127.0.0.1:9464",
    show_default=True,
    help="HOST:PORT for /metrics, /healthz, /api/status and the status page.",
)
@click.option(
    "--observer",
    default=None,
    help="Name of this vantage point (monitors with different names form a quorum) "
    "[default: hostname].",
)
@click.option(
    "--interval",
    type=float,
    default=None,
    help="Probe interval in seconds (default: health.probe_interval_s).",
)
@pass_app
def monitor(
    app: AppContext,
    config_file: str | None,
    listen: str,
    observer: str | None,
    interval: float | None,
) -> None:
    """Probe clusters and flows on a schedule, evaluate health, serve status and metrics.

    Runs until SIGTERM/SIGINT.  Observations, states and transitions go to the state store,
    where other observers' monitors read them for the quorum.
    """
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    from drkit.health import jobs
    from drkit.health.monitor import Monitor
    from drkit.health.web import StatusApp, serve

    config = app.config(config_file)
    if interval is not None:
        config = config.model_copy(
            update={"health": config.health.model_copy(update={"probe_interval_s": interval})}
        )
    host, port = _listen(listen)
    name = observer or default_worker_id()
    store = app.store(config_file)
    store.ensure_current()
    mon = Monitor(config, name, store)
    mon.key = name
    jobs.register(mon.key, mon)
    table = "drkit_jobs_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=store.engine, tablename=table)},
        executors={"default": ThreadPoolExecutor(max(4, len(mon.job_names())))},
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": int(config.health.probe_interval_s * 2) + 1,
        },
        timezone="UTC",
    )
    scheduler.start(paused=True)
    wanted = set(mon.job_names())
    for job in scheduler.get_jobs():
        if job.id not in wanted:
            job.remove()  # a cluster or flow that left the config
    for job_name in mon.job_names():
        every = 3600.0 if job_name == "prune" else config.health.probe_interval_s
        scheduler.add_job(
            jobs.run,
            "interval",
            seconds=every,
            args=[mon.key, job_name],
            id=job_name,
            name=job_name,
            replace_existing=True,
        )
    scheduler.resume()
    server, _thread = serve(StatusApp(mon.status), host, port)
    click.echo(
        f"monitor {name}: http://{host}:{server.server_port}/ "
        f"(probing every {config.health.probe_interval_s:g}s)"
    )
    stop = threading.Event()
    install_stop_signals(stop)
    try:
        for job_name in mon.job_names():  # first round right away, not one interval later
            if job_name != "prune":
                scheduler.modify_job(job_name, next_run_time=_now())
        stop.wait()
    finally:
        scheduler.shutdown(wait=False)
        server.shutdown()
        jobs.unregister(mon.key)
        mon.close()


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


@click.command("status")
@config_option
@output_option
@click.option(
    "--probe/--no-probe",
    default=None,
    help="Probe now (default: only when no monitor reported recently).",
)
@pass_app
def status(app: AppContext, config_file: str | None, output: str, probe: bool | None) -> None:
    """Clusters, flows, lag, checkpoint ages and whether a failover is possible now."""
    from drkit.health.monitor import Monitor, current_status
    from drkit.store.health_repo import HealthRepository

    config = app.config(config_file)
    store = app.store(config_file)
    store.ensure_current()
    repo = HealthRepository(store)
    picture = current_status(config, repo)
    if probe or (probe is None and not picture["observers"]):
        mon = Monitor(config, f"cli-{default_worker_id()}", store)
        try:
            for alias in config.clusters:
                mon.run_job(f"probe:{alias}")
            for flow in config.flows:
                mon.run_job(f"flow:{flow.name}")
        finally:
            mon.close()
        picture = current_status(config, repo)
    if output == "json":
        echo_json(picture)
        return
    _print(picture)


def _print(picture: dict[str, Any]) -> None:
    click.echo(
        f"observers: {', '.join(picture['observers']) or 'none'}   "
        f"active cluster: {picture['active_cluster'] or '-'}   "
        f"automation: {'allowed' if picture['automation']['allowed'] else 'off'} "
        f"({picture['automation']['reason']})"
    )
    click.echo("\nclusters")
    for alias, cluster in picture["clusters"].items():
        votes = f"{len(cluster['down_votes'])}/{cluster['quorum']} down votes"
        click.echo(f"  {alias:<12} {cluster['state']:<12} {votes}")
        for observer, view in cluster["observers"].items():
            click.echo(f"    {observer}: {view['state']} - {view['reason'] or ''}")
    click.echo("\nflows")
    for name, flow in picture["flows"].items():
        ready = flow["failover"]
        age = flow.get("checkpoint_age_s")
        latency = flow.get("heartbeat_age_s")
        click.echo(
            f"  {name:<16} latency {'-' if latency is None else f'{latency:.1f}s'}  "
            f"lag {flow.get('lag_records', '-')}  "
            f"checkpoints {'-' if age is None else f'{age:.1f}s old'}  "
            f"workers {flow.get('workers', '-')}"
        )
        verdict = (
            f"yes (RPO {ready['rpo_records']} records, {ready['rpo_seconds']}s)"
            if ready["possible"]
            else f"no: {'; '.join(ready['reasons'])}"
        )
        click.echo(f"    fail over now: {verdict}")
    last = picture["last_failover"]
    click.echo(f"\nlast failover: {last['kind'] + ' ' + last['state'] if last else 'none'}")
    if picture["transitions"]:
        click.echo("\nrecent transitions")
        for t in picture["transitions"][:10]:
            when = time.strftime("%H:%M:%S", time.gmtime(t["at"])) if t["at"] else "-"
            click.echo(
                f"  {when} {t['kind']} {t['subject']} ({t['observer']}): "
                f"{t['from'] or '-'} -> {t['to']}  {t['reason'] or ''}"
            )


COMMANDS = [monitor, status]
