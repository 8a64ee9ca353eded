"""``drkit doctor``: is this installation able to do its job?  One finding per line.

Per configured cluster: reachable; an authorizer present (fencing with ACLs needs one); each
role's principal holding every ACL its role needs (drkit.access.roles) - a missing one is named
with the role that needs it and why; and per flow, a target that accepts the largest record the
source does (``message.max.bytes``).  Then, once: Java for ``drkit verify`` and the state
store's schema revision.

Facts are gathered at the edges (:func:`examine`); what they mean is decided by pure functions
over them (:func:`cluster_findings`, :func:`message_size_findings`), tested without a broker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING

from drkit.access.roles import DRKIT_ROLES, replica_resources, role_needs, source_topic_resources
from drkit.access.standby import guard_of, guarded_flows
from drkit.acl.rules import (
    ANY_USER,
    AclEntry,
    Need,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized,
    missing,
)
from drkit.config.model import DrkitConfig, FailoverPolicy, Role
from drkit.errors import DrkitError, FatalKafkaError
from drkit.topology import internal_topics

if TYPE_CHECKING:
    from drkit.kafka.ports import AdminFactory


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"
    SKIP = "skip"


@dataclass(frozen=True)
class DoctorFinding:
    """One line of the doctor's answer; ``cluster`` None for installation-wide checks."""

    status: Status
    cluster: str | None
    check: str
    detail: str

    def line(self) -> str:
        where = f"{self.cluster}: " if self.cluster else ""
        return f"{self.status.value:<4} {where}{self.check}: {self.detail}"


@dataclass(frozen=True)
class ClusterFacts:
    """What the doctor learned about one cluster.  ``error``: why it could not be reached;
    ``acls``: None when the ACLs could not be read (``acl_error`` says why); ``super_users``:
    None when the brokers do not reveal them."""

    alias: str
    error: str | None = None
    brokers: int = 0
    authorizer: bool | None = None
    acls: frozenset[AclEntry] | None = None
    acl_error: str | None = None
    super_users: frozenset[str] | None = None
    message_max_bytes: int | None = None
    cluster_id: str | None = None


# A cluster that answers metadata with no broker in it: Kafka hides the brokers from a
# principal without DESCRIBE on the cluster (or its topics) - "0 brokers" is never ok.
NO_BROKER = "metadata shows no broker: drkit's principal may lack DESCRIBE on the cluster"


def one_cluster(ids: dict[str, str]) -> list[str]:
    """One line per cluster id that several aliases answer with (alias -> cluster id): two
    aliases for one cluster - a bootstrap pointing at the other cluster's brokers under
    another name - make every failover between them a no-op."""
    by_id: dict[str, list[str]] = {}
    for alias, cluster_id in ids.items():
        by_id.setdefault(cluster_id, []).append(alias)
    out = []
    for cluster_id, aliases in sorted(by_id.items()):
        if len(aliases) > 1:
            names = sorted(aliases)
            both = ", ".join(names[:-1]) + f" and {names[-1]}"
            out.append(f"{both} are one cluster (cluster id {cluster_id})")
    return out


def same_cluster_findings(facts: dict[str, ClusterFacts]) -> list[DoctorFinding]:
    """FAIL for aliases that answer with one cluster id (see :func:`one_cluster`)."""
    ids = {a: f.cluster_id for a, f in facts.items() if f.error is None and f.cluster_id}
    return [DoctorFinding(Status.FAIL, None, "clusters", line) for line in one_cluster(ids)]


def cluster_findings(config: DrkitConfig, facts: ClusterFacts) -> list[DoctorFinding]:
    """Reachability, the authorizer and every drkit role's ACLs on one cluster."""
    alias = facts.alias
    if facts.error is not None:
        return [DoctorFinding(Status.FAIL, alias, "reachable", facts.error)]
    if facts.brokers:
        out = [DoctorFinding(Status.OK, alias, "reachable", f"{facts.brokers} broker(s)")]
    else:
        out = [DoctorFinding(Status.FAIL, alias, "reachable", NO_BROKER)]
    out.append(_authorizer_finding(alias, facts, config.failover))
    if facts.authorizer is False:
        return out
    if facts.acls is None:
        out.append(DoctorFinding(Status.FAIL, alias, "ACLs", facts.acl_error or "cannot be read"))
        return out
    cluster = config.clusters[alias]
    if all(cluster.principal(role) is None for role in DRKIT_ROLES):
        # One line, not one per role: nothing tells the principals apart here.
        detail = "not checked: drkit logs in without a SASL user (PLAINTEXT or TLS identities); "
        detail += f"set clusters.{alias}.principals to check each role"
        out.append(DoctorFinding(Status.WARN, alias, "role ACLs", detail))
        return out
    for role in DRKIT_ROLES:
        out.extend(_role_findings(config, alias, role, facts, cluster.allow_everyone_if_no_acl))
    return out


def _authorizer_finding(alias: str, facts: ClusterFacts, failover: FailoverPolicy) -> DoctorFinding:
    if facts.authorizer:
        return DoctorFinding(Status.OK, alias, "authorizer", "present")
    if facts.authorizer is None:
        # Only the broker's explicit SECURITY_DISABLED means no authorizer; a refusal or a
        # timeout when describing the ACLs tells nothing (drkit may be the one denied).
        reason = (facts.acl_error or "the ACLs could not be read").removeprefix(
            "cannot read them: "
        )
        return DoctorFinding(Status.WARN, alias, "authorizer", f"cannot tell: {reason}")
    if failover.fence_with_acls:
        return DoctorFinding(
            Status.FAIL, alias, "authorizer",
            "none (SECURITY_DISABLED): fencing with ACLs cannot stop writers on this cluster; "
            "set authorizer.class.name on the brokers, or failover.fence_with_acls: false",
        )  # fmt: skip
    return DoctorFinding(
        Status.WARN, alias, "authorizer", "none: nothing stops writers to a replica"
    )


def _role_findings(
    config: DrkitConfig, alias: str, role: Role, facts: ClusterFacts, allow_everyone: bool
) -> list[DoctorFinding]:
    needs = role_needs(role, alias, config)
    check = f"{role} ACLs"
    if not needs.needs:
        return []
    principal = config.clusters[alias].principal(role)
    if principal is None:
        return [
            DoctorFinding(
                Status.WARN,
                alias,
                check,
                f"cannot tell who does it (no SASL user): set clusters.{alias}.principals.{role}",
            )
        ]
    supers = facts.super_users or frozenset()
    if principal in supers:
        detail = (f"{principal} is a super user: far more than the {role} needs (Kafka checks "
                  "no ACL for it - it may rewrite any ACL, write through any fence); give the "
                  "role a principal of its own")  # fmt: skip
        return [DoctorFinding(Status.WARN, alias, check, detail)]
    acls = facts.acls or frozenset()
    wider = _wider_than_needed(config, alias, role, principal, needs.needs, acls)
    lacking = missing(
        principal, needs.needs, acls, super_users=supers, allow_everyone_if_no_acl=allow_everyone
    )
    if not lacking:
        detail = f"{principal} holds all {len(needs.needs)}"
        if facts.super_users is None:
            detail += " (super users not readable)"
        unused = missing(
            principal, needs.optional, acls, super_users=supers,
            allow_everyone_if_no_acl=allow_everyone,
        )  # fmt: skip
        if unused:
            grants = ", ".join(f"{n.operation.value.upper()} on {n.resource}" for n in unused)
            detail += f"; optional, not held: {grants} - the {role} {unused[0].why}"
        return [DoctorFinding(Status.OK, alias, check, detail), *wider]
    hint = "" if facts.super_users is not None else " (unless it is a super user: not readable)"
    return [
        DoctorFinding(
            Status.FAIL,
            alias,
            check,
            f"{principal} lacks ALLOW {need.operation.value.upper()} on {need.resource} - "
            f"the {role} {need.why}{hint}",
        )
        for need in lacking
    ] + wider


def _wider_than_needed(
    config: DrkitConfig,
    alias: str,
    role: Role,
    principal: str,
    needs: Iterable[Need],
    acls: Iterable[AclEntry],
) -> list[DoctorFinding]:
    """ALTER on the cluster held by a role that does not need it (issue: a monitor or engine
    that could rewrite every ACL and SCRAM credential); the fencer's own principal excepted.
    And WRITE on drkit's own topics held by a role that does not write them (security review
    6, L5: an engine or monitor granted every ``drkit-`` topic could forge progress) - unless
    the same principal does another role that writes them here."""
    acls = tuple(acls)
    out: list[DoctorFinding] = []
    alter = Need(Resource.cluster(), Operation.ALTER, "")
    needed = any(n.resource == alter.resource and n.operation is alter.operation for n in needs)
    fencer = principal == config.clusters[alias].principal(Role.FENCER)
    if not needed and not fencer and authorized(principal, alter, acls):
        detail = (f"{principal} holds ALTER on the cluster, which the {role} does not need: it "
                  "may rewrite every ACL and SCRAM credential; only the fencer needs it "
                  f"('drkit acls --role fencer --cluster {alias}')")  # fmt: skip
        out.append(DoctorFinding(Status.WARN, alias, f"{role} ACLs", detail))
    elif not needed and fencer and role is not Role.FENCER:
        # The same powers by another road: roles that log in as the fencer (security review
        # 8, L2) - said once, by the first of them, naming them all.
        cluster = config.clusters[alias]
        sharing = [
            r
            for r in DRKIT_ROLES
            if r is not Role.FENCER
            and cluster.principal(r) == principal
            and role_needs(r, alias, config).needs
        ]  # fmt: skip (the roles checked here)
        if role is sharing[0]:
            roles = ", ".join(str(r) for r in sharing)
            detail = (f"{roles} connect as {principal}, the fencer's principal: it may rewrite "
                      "every ACL and SCRAM credential, which only the fencer needs; give each "
                      f"role a principal of its own (clusters.{alias}.principals)")  # fmt: skip
            out.append(DoctorFinding(Status.WARN, alias, f"{role} ACLs", detail))
    cluster = config.clusters[alias]
    same = [r for r in DRKIT_ROLES if r is role or cluster.principal(r) == principal]
    # What the grants it needs allow already (a replica prefix may cover a bookkeeping name).
    needed_acls = [n.entry(principal) for r in same for n in role_needs(r, alias, config).needs]
    needed_acls += [n.entry(principal) for n in needs]
    extra = []
    for topic in own_topics(config, alias):
        write = Need(Resource(ResourceType.TOPIC, topic), Operation.WRITE, "")
        if authorized(principal, write, acls) and not authorized(principal, write, needed_acls):
            extra.append(topic)
    if extra:
        detail = (f"{principal} may write {', '.join(extra)}, which the {role} does not need: "
                  "it could forge progress records and checkpoints; 'drkit acls --role "
                  f"{role} --cluster {alias}' lists what it needs - remove the wider "
                  "grant")  # fmt: skip
        out.append(DoctorFinding(Status.WARN, alias, f"{role} ACLs", detail))
    return out


def standby_findings(
    config: DrkitConfig, facts: ClusterFacts, primary: str | None
) -> list[DoctorFinding]:
    """Per flow into this cluster that should be read-only now (drkit.access.standby): whether
    its guard is in place, or why there can be none."""
    if not config.failover.read_only_standby or facts.acls is None:
        return []
    out: list[DoctorFinding] = []
    for flow in guarded_flows(config, primary):
        if flow.target != facts.alias:
            continue
        guard = guard_of(flow, config)
        check = f"{flow.name} read-only standby"
        if guard.note:
            out.append(DoctorFinding(Status.WARN, facts.alias, check, f"no guard: {guard.note}"))
        elif guard.entries <= facts.acls:
            out.append(DoctorFinding(Status.OK, facts.alias, check, f"{len(guard.entries)} ACL(s)"))
        else:
            missing_count = len(guard.entries - facts.acls)
            out.append(
                DoctorFinding(
                    Status.WARN, facts.alias, check,
                    f"{missing_count} guard ACL(s) missing: applications could write the "
                    "replicas (the monitor applies them; is it running?)",
                )
            )  # fmt: skip
    return out


def own_topics(config: DrkitConfig, alias: str) -> list[str]:
    """drkit's bookkeeping topics on ``alias`` (the target of its flows): what a failover
    trusts - control directives, offset syncs, adopted ranges (read for every flow, adopted
    or not), progress, checkpoints."""
    names: list[str] = []
    for flow in config.flows:
        if flow.target == alias:
            names += [
                internal_topics.control_topic(flow.source),
                internal_topics.offset_syncs_topic(flow.source),
                internal_topics.adopted_topic(flow.source),
                internal_topics.progress_topic(flow.source),
                internal_topics.checkpoints_topic(flow.source),
            ]
    return sorted(set(names))


def own_topic_findings(config: DrkitConfig, facts: ClusterFacts) -> list[DoctorFinding]:
    """Who besides drkit's roles could write drkit's own topics here.  Offset syncs, adopted
    ranges and directives are signed (drkit/signing.py: a forgery is ignored and named, and
    the range it claims is re-read), but a foreign writer can still compact real ones away or
    replay them, and progress and checkpoints are not signed (docs/security.md): ACLs are the
    fix.  One warning per way in; ok when only drkit's roles can."""
    alias, topics = facts.alias, own_topics(config, facts.alias)
    check = "drkit's own topics"
    if not topics or facts.error is not None:
        return []
    if facts.authorizer is False:
        detail = (f"no authorizer: any client may write {', '.join(topics)} (a forged offset "
                  "sync, adopted range or directive is ignored and counted, and translation "
                  "re-reads the range it claims; but progress and checkpoints are not signed, "
                  "and a real record can be compacted away or replayed - a failover may then "
                  "commit wrong positions. ACLs are the fix: 'drkit acls --apply'; "
                  "docs/security.md)")  # fmt: skip
        return [DoctorFinding(Status.WARN, alias, check, detail)]
    if facts.acls is None:
        return []
    cluster = config.clusters[alias]
    drkit = {cluster.principal(role) for role in DRKIT_ROLES} - {None}
    out: list[DoctorFinding] = []
    for topic in topics:
        resource = Resource(ResourceType.TOPIC, topic)
        applying = [entry for entry in facts.acls if entry.resource.overlaps(resource)]
        if cluster.allow_everyone_if_no_acl and not applying:
            detail = (f"{topic} has no ACL and the cluster allows everyone where none is found: "
                      "any client may write it ('drkit acls --apply' grants drkit's roles, "
                      "which closes it to the others)")  # fmt: skip
            out.append(DoctorFinding(Status.WARN, alias, check, detail))
            continue
        others = sorted({
            entry.principal for entry in applying
            if entry.permission is Permission.ALLOW
            and entry.operation in (Operation.WRITE, Operation.ALL)
            and entry.resource.covers(resource) and entry.principal not in drkit
        })  # fmt: skip
        if others:
            detail = f"{', '.join(others)} may write {topic}: only drkit's roles should"
            out.append(DoctorFinding(Status.WARN, alias, check, detail))
    if not out:
        detail = f"only drkit's roles may write its {len(topics)} topics here"
        out.append(DoctorFinding(Status.OK, alias, check, detail))
    return out


def bypass_findings(
    config: DrkitConfig, facts: ClusterFacts, primary: str | None
) -> list[DoctorFinding]:
    """Who can write through drkit's write protections here - the guarantees, not drkit's
    grants.  Super users: Kafka checks no ACL for them, so neither the fence nor the standby
    guard stops them (an application producer among them is a failure: a failover cannot
    stop its writes).  A broad ALLOW WRITE that reaches a guarded standby's replicas for
    anyone but the replicator, or a fenced source's topics for anyone the fence does not
    name (``failover.fence_principal``), is a way past them."""
    if facts.error is not None or facts.authorizer is False or facts.acls is None:
        return []
    out = _super_user_findings(config, facts)
    out += _guard_bypass_findings(config, facts, primary)
    out += _fence_bypass_findings(config, facts)
    return out


def _super_user_findings(config: DrkitConfig, facts: ClusterFacts) -> list[DoctorFinding]:
    alias, check = facts.alias, "super users"
    if facts.super_users is None:
        detail = ("not known (the brokers do not show super.users): cannot tell who writes "
                  "through a fence or a standby guard; list them in "
                  f"clusters.{alias}.super_users")  # fmt: skip
        return [DoctorFinding(Status.WARN, alias, check, detail)]
    cluster = config.clusters[alias]
    apps = {cluster.principals.get(role) for role in (Role.APP_PRODUCER, Role.APP_CONSUMER)}
    drkit = {cluster.principal(role) for role in DRKIT_ROLES}
    reason = ("the applications' principal, is a super user: no fence or standby guard stops "
              "its writes, so a failover leaves two writable primaries; give the applications "
              "a principal that is not a super user")  # fmt: skip
    out = [
        DoctorFinding(Status.FAIL, alias, check, f"{user}, {reason}")
        for user in sorted(facts.super_users & {a for a in apps if a is not None})
    ]
    others = sorted(facts.super_users - apps - drkit)
    if others:
        detail = (f"{', '.join(others)}: each writes through any fence and standby guard "
                  "(keep applications off them)")  # fmt: skip
        out.append(DoctorFinding(Status.OK, alias, check, detail))
    return out


def _writers(acls: Iterable[AclEntry], resource: Resource) -> set[str]:
    """The principals an ALLOW WRITE (or ALL) lets write some of ``resource``'s topics."""
    return {
        entry.principal for entry in acls
        if entry.permission is Permission.ALLOW
        and entry.operation in (Operation.WRITE, Operation.ALL)
        and entry.resource.overlaps(resource)
    }  # fmt: skip


def _denied(acls: Iterable[AclEntry], principal: str, resource: Resource) -> bool:
    """Whether a DENY WRITE (or ALL) for ``principal`` (or everyone) covers all of
    ``resource``."""
    return any(
        entry.permission is Permission.DENY
        and entry.operation in (Operation.WRITE, Operation.ALL)
        and entry.principal in (principal, ANY_USER)
        and entry.resource.covers(resource)
        for entry in acls
    )


def _guard_bypass_findings(
    config: DrkitConfig, facts: ClusterFacts, primary: str | None
) -> list[DoctorFinding]:
    if not config.failover.read_only_standby:
        return []
    out: list[DoctorFinding] = []
    cluster = config.clusters[facts.alias]
    replicator = cluster.principal(Role.REPLICATOR)
    # drkit's own topics can share the replicas' prefix (``dc1.checkpoints.internal``): a grant
    # on one of them by name writes bookkeeping, not replicas.
    own = set(own_topics(config, facts.alias))
    acls = {
        entry for entry in facts.acls or frozenset()
        if not (entry.resource.pattern is PatternType.LITERAL and entry.resource.name in own)
    }  # fmt: skip
    for flow in guarded_flows(config, primary):
        guard = guard_of(flow, config)
        if flow.target != facts.alias or guard.note:
            continue
        for resource in replica_resources(flow)[0]:
            past = sorted(
                principal for principal in _writers(acls | set(guard.entries), resource)
                if principal != replicator and not _denied(guard.entries, principal, resource)
            )  # fmt: skip
            if past:
                detail = (f"{', '.join(past)} may write {resource}, {flow.name}'s replicas on "
                          "a standby: its guard stops only the applications' principal; "
                          "narrow that ALLOW WRITE")  # fmt: skip
                out.append(DoctorFinding(Status.WARN, facts.alias, "standby guard", detail))
    return out


def _fence_bypass_findings(config: DrkitConfig, facts: ClusterFacts) -> list[DoctorFinding]:
    fenced = config.failover.fence_principal
    if not config.failover.fence_with_acls or fenced == ANY_USER:
        return []  # the fence denies everyone Kafka checks ACLs for
    out: list[DoctorFinding] = []
    drkit = {config.clusters[facts.alias].principal(role) for role in DRKIT_ROLES}
    acls = facts.acls or frozenset()
    for flow in config.flows:
        if flow.source != facts.alias or flow.standby:
            continue
        for resource in source_topic_resources(flow):
            past = sorted(_writers(acls, resource) - drkit - {fenced})
            if past:
                detail = (f"{', '.join(past)} may write {resource}: a fence of {flow.name}'s "
                          f"source denies only {fenced} (failover.fence_principal), so these "
                          "keep writing the old primary")  # fmt: skip
                out.append(DoctorFinding(Status.WARN, facts.alias, "fence", detail))
    return out


def message_size_findings(
    config: DrkitConfig, facts: dict[str, ClusterFacts]
) -> list[DoctorFinding]:
    """Per flow: the target must accept the largest record the source accepts."""
    out: list[DoctorFinding] = []
    for flow in config.flows:
        source, target = facts.get(flow.source), facts.get(flow.target)
        if source is None or target is None:
            continue
        check = f"{flow.name} record size"
        if source.message_max_bytes is None or target.message_max_bytes is None:
            if source.error is None and target.error is None:
                out.append(
                    DoctorFinding(Status.WARN, flow.target, check, "message.max.bytes unknown")
                )
            continue
        if target.message_max_bytes < source.message_max_bytes:
            out.append(
                DoctorFinding(
                    Status.FAIL,
                    flow.target,
                    check,
                    f"message.max.bytes {target.message_max_bytes} < {source.message_max_bytes} "
                    f"on {flow.source}: a record the source accepted can be refused here",
                )
            )
        else:
            out.append(
                DoctorFinding(
                    Status.OK,
                    flow.target,
                    check,
                    f"message.max.bytes {target.message_max_bytes} >= "
                    f"{source.message_max_bytes} on {flow.source}",
                )
            )
    return out


def replication_factor_findings(
    config: DrkitConfig, facts: dict[str, ClusterFacts]
) -> list[DoctorFinding]:
    """Per flow with a target_replication_factor: the target must have that many brokers, or
    the first replica the flow creates is refused (INVALID_REPLICATION_FACTOR) and the flow
    stops - doctor said nothing of it (issue 45, sixth trial)."""
    out: list[DoctorFinding] = []
    for flow in config.flows:
        wanted, target = flow.target_replication_factor, facts.get(flow.target)
        if wanted is None or target is None or target.error is not None or not target.brokers:
            continue
        check = f"{flow.name} replication factor"
        if wanted > target.brokers:
            detail = (f"target_replication_factor {wanted} > the {target.brokers} broker(s) of "
                      f"{flow.target}: creating a replica is refused (INVALID_REPLICATION_FACTOR) "
                      "and the flow stops")  # fmt: skip
            out.append(DoctorFinding(Status.FAIL, flow.target, check, detail))
        else:
            detail = f"target_replication_factor {wanted} <= {target.brokers} broker(s)"
            out.append(DoctorFinding(Status.OK, flow.target, check, detail))
    return out


# -- gathering (I/O) ---------------------------------------------------------------------------


def examine_cluster(
    alias: str, config: DrkitConfig, timeout_s: float, connect: AdminFactory
) -> ClusterFacts:
    """Reach one cluster (through ``connect``) and read what the findings need, all within
    ``timeout_s`` (each Kafka try takes at least a second); never raises a drkit error."""
    from drkit.kafka import ClusterEndpoint
    from drkit.kafka.clients import FIRST_ANSWER_S, require_answering

    started = time.monotonic()

    def left() -> float:
        return max(0.1, timeout_s - (time.monotonic() - started))

    endpoint = ClusterEndpoint(alias, config.clusters[alias])
    admin = connect(endpoint, default_timeout_s=timeout_s)
    try:
        # Refused, unresolvable or not Kafka (hung, HTTP, TLS expected): told in seconds, as
        # `clusters check` tells it.
        require_answering(endpoint, min(timeout_s, FIRST_ANSWER_S))
        brokers = admin.wait_ready(timeout_s=left())
    except DrkitError as err:
        return ClusterFacts(alias, error=str(err))
    cluster_id: str | None = None
    with contextlib.suppress(DrkitError):  # not told: no comparison with the other clusters
        cluster_id = admin.describe_cluster(left())[0]
    authorizer: bool | None = True
    acls: frozenset[AclEntry] | None = None
    acl_error: str | None = None
    try:
        acls = frozenset(admin.acl_entries(left()))
    except FatalKafkaError as err:
        if "SECURITY_DISABLED" in str(err):
            authorizer = False
        else:
            authorizer, acl_error = None, f"cannot read them: {err} (DESCRIBE on the cluster)"
    except DrkitError as err:
        authorizer, acl_error = None, f"cannot read them: {err}"
    supers: frozenset[str] | None = None
    max_bytes: int | None = None
    try:
        configs = admin.broker_configs(left())
    except DrkitError:
        configs = {}
    if (value := configs.get("super.users")) is not None and value.value is not None:
        supers = frozenset(p.strip() for p in value.value.split(";") if p.strip())
    elif "super.users" in configs and not configs["super.users"].is_sensitive:
        supers = frozenset()
    elif (configured := config.clusters[alias].super_users) is not None:
        supers = frozenset(configured)  # the brokers do not show it: the operator said
    if (value := configs.get("message.max.bytes")) is not None and value.value is not None:
        max_bytes = int(value.value)
    return ClusterFacts(
        alias, brokers=brokers, authorizer=authorizer, acls=acls, acl_error=acl_error,
        super_users=supers, message_max_bytes=max_bytes, cluster_id=cluster_id,
    )  # fmt: skip


StoreRevision = tuple[str | None, str | None, bool]  # (current, head, current is known)


def installation_findings(
    java: Callable[[], str], store_revision: Callable[[], StoreRevision]
) -> list[DoctorFinding]:
    """Java for ``drkit verify`` and the store's schema revision (callables: the I/O).

    A store behind head is fine (every command migrates it on first use); one at a revision
    this drkit does not know was migrated by a newer drkit, which this one must not use."""
    out: list[DoctorFinding] = []
    try:
        out.append(DoctorFinding(Status.OK, None, "java (for drkit verify)", java()))
    except DrkitError as err:
        out.append(DoctorFinding(Status.FAIL, None, "java (for drkit verify)", str(err)))
    try:
        current, head, known = store_revision()
    except DrkitError as err:
        out.append(DoctorFinding(Status.FAIL, None, "state store", str(err)))
        return out
    if current == head:
        out.append(DoctorFinding(Status.OK, None, "state store", f"at revision {current}"))
    elif not known:
        out.append(
            DoctorFinding(
                Status.FAIL, None, "state store",
                f"at revision {current}, which this drkit does not know (a newer drkit "
                f"migrated it; this one needs {head}): upgrade drkit",
            )
        )  # fmt: skip
    else:
        out.append(
            DoctorFinding(
                Status.OK, None, "state store",
                f"at revision {current or 'none (empty)'}; drkit migrates it to {head} on "
                "first use ('drkit db upgrade' does it now)",
            )
        )  # fmt: skip
    return out


def setting_findings(config: DrkitConfig, aliases: Iterable[str]) -> list[DoctorFinding]:
    """The config's weakened security (drkit.config.security, as ``config validate`` warns):
    plaintext SASL, unchecked certificates, clear-text URLs that carry a secret, overrides of
    the connection's security - per cluster checked, then the webhooks once."""
    from drkit.config.security import security_warnings

    chosen = [f"clusters.{alias}." for alias in aliases]
    out: list[DoctorFinding] = []
    for warning in security_warnings(config):
        cluster = next((c for c in chosen if warning.startswith(c)), None)
        if cluster is None and warning.startswith("clusters."):
            continue  # a cluster not asked about
        alias = cluster.removeprefix("clusters.").rstrip(".") if cluster else None
        out.append(DoctorFinding(Status.WARN, alias, "security settings", warning))
    return out


def examine(
    config: DrkitConfig,
    aliases: Iterable[str],
    timeout_s: float,
    java: Callable[[], str],
    store_revision: Callable[[], StoreRevision],
    primary: str | None = None,
    *,
    connect: AdminFactory,
) -> list[DoctorFinding]:
    """Every finding for ``aliases`` and the installation, in the order to print them
    (``primary``: where the active pointer is, None before any move; ``connect``: how it
    reaches the clusters, drkit.kafka.ports)."""
    from drkit.kafka.interruptible import InFlight

    # Every cluster at once: --timeout bounds the command's wait, not a sum over clusters.
    asked = {a: InFlight(partial(examine_cluster, a, config, timeout_s, connect)) for a in aliases}
    facts = {alias: answer.wait() for alias, answer in asked.items()}
    out: list[DoctorFinding] = same_cluster_findings(facts)
    for alias in facts:
        out.extend(cluster_findings(config, facts[alias]))
        out.extend(standby_findings(config, facts[alias], primary))
        out.extend(own_topic_findings(config, facts[alias]))
        out.extend(bypass_findings(config, facts[alias], primary))
    out.extend(message_size_findings(config, facts))
    out.extend(replication_factor_findings(config, facts))
    out.extend(setting_findings(config, facts))
    out.extend(installation_findings(java, store_revision))
    return out


__all__ = [
    "NO_BROKER",
    "ClusterFacts",
    "DoctorFinding",
    "Status",
    "bypass_findings",
    "cluster_findings",
    "examine",
    "message_size_findings",
    "one_cluster",
    "own_topic_findings",
    "replication_factor_findings",
    "same_cluster_findings",
    "setting_findings",
]
