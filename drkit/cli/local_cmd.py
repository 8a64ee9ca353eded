"""``drkit local``: two (or more) real Kafka clusters on this machine, from Maven Central jars."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import click

from drkit.cli.context import AppContext, echo_document, output_option, pass_app, say
from drkit.config.discovery import default_config_path
from drkit.config.loader import load_config
from drkit.config_checks import CONFIG_CHECKS
from drkit.errors import ConfigError, DrkitError, LocalClusterError, Problem
from drkit.local import ClusterStatus, LocalKafka
from drkit.local.cluster import cluster_name_problem
from drkit.local.registry import LocalRegistries
from drkit.private_files import private_dir

# A KRaft broker takes several seconds to start (a JVM, then the quorum): a shorter wait can
# only fail, after starting it.
MIN_TIMEOUT_S = 10.0


def _manager(app: AppContext) -> LocalKafka:
    """The local clusters' manager, reaching them through the adapter (this is its edge)."""
    from drkit.kafka import KafkaAdmin

    return LocalKafka(app.state_dir, connect=KafkaAdmin)


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise ConfigError([Problem("--clusters", "give at least one cluster name")])
    if len(set(names)) != len(names):
        raise ConfigError([Problem("--clusters", "cluster names must be distinct")])
    problems = [Problem("--clusters", why) for n in names if (why := cluster_name_problem(n))]
    if problems:
        raise ConfigError(problems)
    return names


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


F = TypeVar("F", bound=Callable[..., object])


def _state_dir_option(func: F) -> F:
    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        app = ctx.find_object(AppContext)
        if value and app is not None:
            app.state_dir_option = value

    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False),
        expose_value=False,
        callback=remember,
        help="State directory (overrides the global --state-dir / DRKIT_STATE_DIR).",
    )(func)


def _print_status(app: AppContext, statuses: list[ClusterStatus], output: str) -> None:
    config_path = default_config_path(app.state_dir)
    if output == "json":
        echo_document(
            "local.status",
            {
                "clusters": {s.name: s.to_json() for s in statuses},
                "config_path": str(config_path) if config_path.exists() else None,
                "state_dir": str(app.state_dir),
            },
        )
        return
    if not statuses:
        click.echo(f"no local clusters in {app.state_dir} (run 'drkit local up')")
        return
    for status in statuses:
        alive = sum(b.alive for b in status.brokers)
        click.echo(
            f"{status.name}: {status.bootstrap_servers}  "
            f"brokers alive {alive}/{len(status.brokers)}"
        )
        for broker in status.brokers:
            state = f"pid {broker.pid}" if broker.alive else "stopped"
            click.echo(f"  broker {broker.id}: {state}  logs {broker.log_dir}")
    if config_path.exists():
        click.echo(f"config: {config_path}")


@click.group("local")
def local() -> None:
    """Run real Kafka clusters (dc1, dc2) on loopback for demos, drills and tests."""


@local.command("up")
@click.option(
    "--clusters",
    default="dc1,dc2",
    show_default=True,
    help="Comma-separated cluster names; the generated config replicates the first to each "
    "of the others (dc1,dc2,dc3: dc1->dc2 and dc1->dc3).",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, 5),
    default=1,
    show_default=True,
    help="Brokers per new cluster (KRaft combined mode; 3 keeps quorum with one down).",
)
@click.option(
    "--netns",
    is_flag=True,
    help="Put each new cluster in its own network namespace (a data center whose link a "
    "drill can cut; needs root).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="Create new clusters secured: SASL_SSL (SCRAM-SHA-512) for clients, mutual TLS between "
    "controllers, and an authorizer that denies whatever no ACL allows.",
)
@click.option(
    "--mtls",
    is_flag=True,
    help="With --secure: clients authenticate with TLS client certificates (one per principal, "
    "CN = the user, made for the run) instead of SCRAM; the same principals and ACLs.",
)
@click.option(
    "--oidc-jwks-url",
    metavar="URL",
    help="With --secure: also accept OAUTHBEARER tokens signed by the keys at URL (your OpenID "
    "provider's JWKS endpoint); the principal is the token's sub claim.",
)
@click.option(
    "--oidc-audience",
    metavar="AUD",
    help="With --oidc-jwks-url: the audience (aud claim) tokens must carry.",
)
@click.option(
    "--oidc-issuer",
    metavar="URL",
    help="With --oidc-jwks-url: the issuer (iss claim) tokens must carry; without it, a token "
    "with any issuer whose keys are at the JWKS URL is accepted (a warning says so).",
)
@click.option(
    "--schema-registry",
    is_flag=True,
    help="Also run a schema registry per cluster (Apicurio Registry 2.x from Maven Central, "
    "in memory) and sync the flow's schemas (docs/schemas.md).",
)
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds to wait.")
@_state_dir_option
@output_option
@pass_app
def up(
    app: AppContext,
    clusters: str,
    brokers: int,
    netns: bool,
    secure: bool,
    mtls: bool,
    oidc_jwks_url: str | None,
    oidc_audience: str | None,
    oidc_issuer: str | None,
    schema_registry: bool,
    timeout: float,
    output: str,
) -> None:
    """Start the local clusters (resolving Kafka's jars on first use) and write a config.

    Running clusters are left as they are, so 'up' is safe to repeat.
    """
    from drkit.local.config_writer import require_config_writable, write_local_config
    from drkit.local.secure import MTLS, SCRAM, OidcValidation

    for option, value in (("--oidc-audience", oidc_audience), ("--oidc-issuer", oidc_issuer)):
        if value and not oidc_jwks_url:
            raise ConfigError([Problem(option, "needs --oidc-jwks-url")])
    if oidc_jwks_url and not oidc_issuer:
        say("--oidc-jwks-url without --oidc-issuer: tokens are not checked for their issuer",
            logging.WARNING)  # fmt: skip
    if oidc_jwks_url and not secure:
        raise ConfigError([Problem("--oidc-jwks-url", "needs --secure")])
    if mtls and not secure:
        raise ConfigError([Problem("--mtls", "needs --secure")])
    if mtls and oidc_jwks_url:
        raise ConfigError([Problem("--mtls", "OAUTHBEARER needs SASL: not with --oidc-jwks-url")])
    oidc = OidcValidation(oidc_jwks_url, oidc_audience, oidc_issuer) if oidc_jwks_url else None
    if not timeout >= MIN_TIMEOUT_S:
        why = (
            f"at least {MIN_TIMEOUT_S:g} seconds (got {timeout:g}): a broker takes seconds to start"
        )
        raise ConfigError([Problem("--timeout", why)])
    names = _names(clusters)
    require_config_writable(app.state_dir)  # before any broker starts, not after
    private_dir(app.state_dir)  # 0700 from the start: the next command has nothing to warn of
    started = time.monotonic()
    manager = _manager(app)
    statuses = manager.up(
        names, brokers=brokers, timeout_s=timeout, namespaced=netns, secure=secure,
        oidc=oidc, client_auth=MTLS if mtls else SCRAM,
    )  # fmt: skip
    try:
        registries = LocalRegistries(app.state_dir)
        if schema_registry:
            registries.up([status.name for status in statuses], timeout)
        urls = registries.urls()
        path = write_local_config(app.state_dir, statuses, manager.secrets, urls)
        config = load_config(path, checks=CONFIG_CHECKS)
        granted = {status.name: manager.grant_roles(status.name, config) for status in statuses}
    except DrkitError as err:  # the clusters run: say so, and how to stop them
        running = [s.name for s in statuses]
        them = "them" if len(running) > 1 else "it"
        failed = LocalClusterError(
            f"{err}; left running: {', '.join(running)}; 'drkit local down' stops {them}"
        )
        failed.exit_code = err.exit_code
        raise failed from err
    if output == "text":
        click.echo(f"ready in {time.monotonic() - started:.1f}s")
    _print_status(app, statuses, output)
    if output == "text":
        for name, url in urls.items():
            click.echo(f"{name}: schema registry at {url}")
        click.echo(f"drkit commands now use {path} by default")
        if any(status.secure for status in statuses):
            how = ("a TLS client certificate (CN=drkit)" if mtls
                   else "SCRAM-SHA-512 over TLS")  # fmt: skip
            what = "keys, certificates" if mtls else "passwords"
            click.echo(
                f"secured: drkit connects as 'drkit' ({how}); {what} and the CA are files in "
                f"{manager.secrets.directory} (owner-only), referenced by the config, never "
                "written into it"
            )
            for name, count in granted.items():
                if count:
                    click.echo(
                        f"{name}: {count} least-privilege ACL(s) for the role principals "
                        "(drkit acls --role ROLE shows them; drkit doctor checks them)"
                    )


@local.command("down")
@click.option("--purge", is_flag=True, help="Also delete the clusters' data and logs.")
@_state_dir_option
@pass_app
def down(app: AppContext, purge: bool) -> None:
    """Stop every local broker cleanly (SIGTERM, controlled shutdown)."""
    manager = _manager(app)
    LocalRegistries(app.state_dir).down()
    stopped = manager.stop_clusters()
    for name, count in stopped.items():
        click.echo(f"{name}: stopped" if count else f"{name}: already stopped")
    if not stopped:
        click.echo(f"no local clusters in {app.state_dir}")
    if not purge:
        return
    removed, left = manager.purge()
    config_path = default_config_path(app.state_dir)
    if config_path.is_file():
        config_path.unlink()
        removed.append(config_path)
    for path in removed:
        click.echo(f"removed {path}")
    if not removed:
        click.echo("removed nothing")
    for path in left:
        why = " (the local CA and passwords)" if path == manager.secrets.directory else ""
        click.echo(f"left {path}{why}")


@local.command("status")
@_state_dir_option
@output_option
@pass_app
def status(app: AppContext, output: str) -> None:
    """Show the local clusters, their brokers and whether each is alive."""
    _print_status(app, _manager(app).status(), output)


def _broker_command(name: str, verb: str, idle: str, none: str, doc: str) -> click.Command:
    """``idle``: what a broker it left alone was ("was not running"); ``none``: what the
    cluster was when it left every broker alone."""

    @local.command(name, help=doc)
    @click.argument("cluster")
    @click.option("--broker", type=int, default=None, help="Broker id (default: all brokers).")
    @_state_dir_option
    @pass_app
    def command(app: AppContext, cluster: str, broker: int | None) -> None:
        manager = _manager(app)
        done, alone = getattr(manager, f"{name}_broker")(cluster, broker)
        if broker is not None:
            click.echo(f"{cluster}: broker {broker} {verb if done else idle}")
        elif not done:
            click.echo(f"{cluster}: {none}")
        elif not alone:
            click.echo(f"{cluster}: all brokers {verb} ({_ids(done)})")
        else:
            these = "brokers" if len(done) > 1 else "broker"
            those, were = ("brokers", idle.replace("was ", "were ")) if len(alone) > 1 else (
                "broker", idle)  # fmt: skip
            click.echo(f"{cluster}: {these} {_ids(done)} {verb}; {those} {_ids(alone)} {were}")

    return command


_broker_command("stop", "stopped", "was not running", "no broker was running",
                "Gracefully stop one broker (or all) of CLUSTER.")  # fmt: skip
_broker_command("kill", "killed", "was not running", "no broker was running",
                "Kill -9 one broker (or all) of CLUSTER: a simulated crash.")  # fmt: skip
_broker_command("start", "started", "already running", "already running (every broker)",
                "Start stopped brokers of CLUSTER again and wait for them.")  # fmt: skip


@local.command("logs")
@click.argument("cluster")
@click.option(
    "--lines",
    "-n",
    type=click.IntRange(1, 1_000_000),
    default=40,
    show_default=True,
    help="Lines per broker.",
)
@_state_dir_option
@pass_app
def logs(app: AppContext, cluster: str, lines: int) -> None:
    """Print the tail of CLUSTER's broker logs."""
    for path in _manager(app).log_files(cluster):
        click.echo(f"==> {path} <==")
        if path.exists():
            click.echo("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))


COMMANDS = [local]
