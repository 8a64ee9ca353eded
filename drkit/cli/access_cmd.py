"""``drkit acls`` (the ACLs a role needs, printed or applied) and ``drkit doctor``."""

from __future__ import annotations

import click

from drkit.access import doctor as doctor_checks
from drkit.access.roles import role_needs
from drkit.cli.context import (
    PRINCIPAL,
    AppContext,
    check_timeout_option,
    complete_clusters,
    config_option,
    echo_document,
    output_option,
    pass_app,
    say,
)
from drkit.config.model import Role
from drkit.errors import ConfigError, ExitCode, Problem


@click.command("acls")
@click.option(
    "--role",
    "role_name",
    required=True,
    type=click.Choice([role.value for role in Role]),
    help="The job whose ACLs to show.",
)
@click.option(
    "--cluster",
    "alias",
    required=True,
    shell_complete=complete_clusters,
    help="A cluster alias from the config.",
)
@click.option(
    "--principal",
    type=PRINCIPAL,
    help="Who gets them (User:name); default: the config's principal for the role.",
)
@click.option("--apply", is_flag=True, help="Create them, with the cluster's credentials.")
@click.option(
    "--with-optional",
    is_flag=True,
    help="Also the optional ones: grants the role works without but uses to do its job faster "
    "(e.g. the checkpointer following __consumer_offsets).",
)
@config_option
@output_option
@pass_app
def acls(
    app: AppContext,
    role_name: str,
    alias: str,
    principal: str | None,
    apply: bool,
    with_optional: bool,
    config_file: str | None,
    output: str,
) -> None:
    """Print the exact ACLs ROLE needs on CLUSTER, derived from the flows (and create them with
    --apply: idempotent, needs ALTER on the cluster).  Optional ones are printed as comments
    and created only with --with-optional."""
    config = app.config(config_file)
    if alias not in config.clusters:
        known = ", ".join(sorted(config.clusters))
        raise click.BadParameter(
            f"unknown cluster {alias!r} (known: {known})", param_hint="--cluster"
        )
    role = Role(role_name)
    who = principal or config.clusters[alias].principal(role)
    if who is None:
        raise ConfigError(
            [Problem(f"clusters.{alias}.principals.{role}", "unknown principal: give --principal")]
        )
    if apply:  # a cluster that is down is told in seconds, before anything is printed
        from drkit.kafka.clients import ClusterEndpoint, require_answering

        require_answering(ClusterEndpoint(alias, config.clusters[alias]))
    found = role_needs(role, alias, config)
    chosen = (*found.needs, *found.optional) if with_optional else found.needs
    entries = [need.entry(who) for need in chosen]
    if output == "json":
        echo_document(
            "acls",
            {
                "role": role.value,
                "cluster": alias,
                "principal": who,
                "acls": [
                    {
                        "permission": e.permission.value,
                        "principal": e.principal,
                        "operation": e.operation.value,
                        "resource_type": e.resource.type.value,
                        "pattern_type": e.resource.pattern.value,
                        "resource": e.resource.name,
                        "why": need.why,
                    }
                    for e, need in zip(entries, chosen, strict=True)
                ],
                "optional": [
                    {"operation": n.operation.value, "resource": str(n.resource), "why": n.why}
                    for n in found.optional
                ],
                "widened": list(found.widened),
            },
        )
    else:
        if not entries:
            click.echo(f"# the {role} needs nothing on {alias} with these flows")
        for entry, need in zip(entries, chosen, strict=True):
            click.echo(f"{entry}    # {need.why}")
        if not with_optional:
            for need in found.optional:
                click.echo(f"# optional (--with-optional): {need.entry(who)}    # {need.why}")
        for note in found.widened:
            click.echo(f"# not exact: {note} (a literal or prefix.* pattern gives exact ACLs)")
    if apply and entries:
        from drkit.kafka import ClusterEndpoint, KafkaAdmin

        KafkaAdmin(ClusterEndpoint(alias, config.clusters[alias])).create_entries(entries)
        say(f"created {len(entries)} ACL(s) for {who} on {alias}")


@click.command("doctor")
@click.argument("aliases", nargs=-1)
@check_timeout_option
@config_option
@output_option
@pass_app
def doctor(
    app: AppContext, aliases: tuple[str, ...], timeout: float, config_file: str | None, output: str
) -> None:
    """Check that drkit can do its job: each cluster (all, or ALIASES) reachable, an authorizer
    present, every role's principal holding the ACLs it needs, records that fit the target, Java
    for verify and the store's revision.  One line per finding; exits 3 on any FAIL."""
    from drkit.local.jars import java_executable

    config = app.config(config_file)
    chosen = list(aliases) or sorted(config.clusters)
    unknown = [a for a in chosen if a not in config.clusters]
    if unknown:
        raise click.BadParameter(f"unknown cluster(s): {', '.join(unknown)}", param_hint="ALIASES")

    def revision() -> doctor_checks.StoreRevision:
        store = app.store(config_file)
        current = store.current_revision()
        return current, store.head_revision(), store.knows_revision(current)

    findings = doctor_checks.examine(
        config, chosen, timeout, java_executable, revision, _primary(app, config_file)
    )
    if output == "json":
        echo_document(
            "doctor",
            {
                "findings": [
                    {
                        "status": f.status.value.lower(),
                        "cluster": f.cluster,
                        "check": f.check,
                        "detail": f.detail,
                    }
                    for f in findings
                ]
            },
        )
    else:
        for finding in findings:
            click.echo(finding.line())
    if any(f.status is doctor_checks.Status.FAIL for f in findings):
        raise SystemExit(ExitCode.UNHEALTHY)


def _primary(app: AppContext, config_file: str | None) -> str | None:
    """Where the active pointer is (None before any move, or when the store cannot say)."""
    from drkit.errors import DrkitError
    from drkit.failover.pointer import PointerRepository

    try:
        store = app.store(config_file)
        if store.current_revision() != store.head_revision():
            return None  # the doctor changes nothing, not even the store's schema
        pointer = PointerRepository(store).get()
    except DrkitError:
        return None
    return pointer.cluster if pointer else None


COMMANDS = [acls, doctor]
