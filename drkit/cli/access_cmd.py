"""``drkit acls`` (the ACLs a role needs, printed or applied) and ``drkit doctor``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from drkit.access import doctor as doctor_checks
from drkit.access.roles import role_needs
from drkit.acl.rules import AclEntry, newly_checked
from drkit.cli.context import (
    PRINCIPAL,
    AppContext,
    check_timeout_option,
    chosen_clusters,
    complete_clusters,
    config_option,
    confirm,
    echo_document,
    output_option,
    pass_app,
    say,
)
from drkit.config.model import Role
from drkit.errors import ConfigError, DrkitError, ExitCode, Problem

if TYPE_CHECKING:
    from drkit.kafka import KafkaAdmin


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
    "--yes",
    "-y",
    is_flag=True,
    help="With --apply: create them without asking where they lock other principals out (the "
    "first ACL on a resource of a cluster that lets everyone in where no ACL is found).",
)
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
    yes: bool,
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

        admin = KafkaAdmin(ClusterEndpoint(alias, config.clusters[alias]))
        declared = config.clusters[alias].allow_everyone_if_no_acl
        _confirm_lockout(admin, alias, who, entries, declared, yes)
        admin.create_entries(entries)
        say(f"created {len(entries)} ACL(s) for {who} on {alias}")


ALLOW_EVERYONE = "allow.everyone.if.no.acl.found"


def _confirm_lockout(
    admin: KafkaAdmin, alias: str, who: str, entries: list[AclEntry], declared: bool, yes: bool
) -> None:
    """Issue 45: on a cluster without ACLs that lets everyone in, the first ALLOW on a
    resource (``*``: every topic) locks every other principal out of it - the applications
    stopped, unwarned.  Warn naming the resources and ask (``--yes``; without a terminal:
    refused, exit 2).  The brokers' ``allow.everyone.if.no.acl.found`` decides when they show
    it - Kafka reports a setting it does not define itself without its value - else the
    config's ``allow_everyone_if_no_acl`` (``declared``), and the warning says it is the
    config's word."""
    existing = admin.acl_entries()
    closed = newly_checked(existing, entries)
    if not closed:
        return
    try:
        shown = admin.broker_configs().get(ALLOW_EVERYONE)
    except DrkitError:  # no DESCRIBE_CONFIGS: not known here, the config's word counts
        shown = None
    setting = shown.value.strip().lower() if shown is not None and shown.value else None
    if setting == "false" or (setting is None and not declared):  # deny by default
        return
    names = [str(resource) for resource in closed]
    what = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    where = "no ACL at all" if not existing else f"no ACL on {what}"
    if setting == "true":
        why = f"{ALLOW_EVERYONE}=true"
    else:
        why = (f"clusters.{alias}.allow_everyone_if_no_acl is true (its brokers do not show "
               f"{ALLOW_EVERYONE}; set it false if they deny by default)")  # fmt: skip
    say(f"{alias} has {where} and {why}: every principal may use {what} now, and once these "
        f"ACLs exist only {who} and the super users may - grant the other principals (the "
        "applications) their ACLs first", logging.WARNING, cluster=alias)  # fmt: skip
    confirm(f"Create {len(entries)} ACL(s) for {who} on {alias} anyway?", yes)


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
    from drkit.kafka import KafkaAdmin
    from drkit.local.jars import java_executable

    config = app.config(config_file)
    chosen = chosen_clusters(config, aliases)

    def revision() -> doctor_checks.StoreRevision:
        store = app.store(config_file)
        current = store.current_revision()
        return current, store.head_revision(), store.knows_revision(current)

    findings = doctor_checks.examine(
        config,
        chosen,
        timeout,
        java_executable,
        revision,
        _primary(app, config_file),
        connect=KafkaAdmin,
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
