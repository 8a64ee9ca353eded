"""Read-only standby: the ACLs that keep applications from writing into a standby's replicas,
and which of them should exist for a given primary (pure).

A replica written by anyone but the replicator is a split brain waiting to happen (Confluent's
mirror topics are read-only for the same reason).  Kafka cannot say "DENY WRITE for everyone
but the replicator" (a DENY beats every ALLOW), so the guard depends on the cluster:

* **open** (``allow_everyone_if_no_acl``): a topic without ACLs is writable by all, and one
  with any ACL only by whom they allow.  The guard ALLOWs the replicator everything it does to
  the replicas and everyone READ / DESCRIBE / DESCRIBE_CONFIGS - so readers keep reading, and
  nobody else may write;
* **deny by default**: nobody writes a replica unless an ACL allows it; the guard DENYs WRITE
  to the applications' principal (``principals.app-producer``), in case a broad ALLOW (``*``)
  would let it.

The guard is a desired state: a flow's replicas are guarded while its target is not the
primary (the pointer; before any move, the targets of the active - not ``standby`` - flows).
Promotion (``move_pointer``) lifts the new primary's guard; the old primary's replicas of the
reverse flow are guarded from then on.  A guard needs the replicas to be a set of literal or
prefixed names (prefix policy, or an identity policy over literal/prefix selections) and a
replicator that differs from the applications - else :attr:`StandbyGuard.note` says why there
is none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from drkit.access.roles import replica_resources
from drkit.acl.rules import (
    ANY_USER,
    WILDCARD,
    AclEntry,
    Operation,
    PatternType,
    Permission,
)
from drkit.config.model import DrkitConfig, FlowConfig, Role

# What the replicator does to its replicas (drkit.access.roles: the replicator on a target).
REPLICATOR_OPERATIONS = (
    Operation.CREATE,
    Operation.WRITE,
    Operation.READ,
    Operation.DESCRIBE,
    Operation.ALTER,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
)
READER_OPERATIONS = (Operation.READ, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)


@dataclass(frozen=True)
class StandbyGuard:
    """The guard of one flow's replicas on its target; no ``entries`` and a ``note`` when
    the flow's replicas cannot be guarded."""

    flow: str
    cluster: str
    entries: frozenset[AclEntry] = field(default_factory=frozenset)
    note: str | None = None


def guard_of(flow: FlowConfig, config: DrkitConfig) -> StandbyGuard:
    """The ACLs that make ``flow``'s replicas read-only on its target (module docstring)."""
    cluster = config.clusters[flow.target]
    resources, exact = replica_resources(flow)
    if not exact or any(r.name == WILDCARD and r.pattern is PatternType.LITERAL for r in resources):
        note = "its replicas are not a set of literal or prefixed names (an ACL on every topic "
        note += "would also stop drkit's own writers there)"
        return StandbyGuard(flow.name, flow.target, note=note)
    replicator = cluster.principal(Role.REPLICATOR)
    app = cluster.principals.get(Role.APP_PRODUCER)
    if cluster.allow_everyone_if_no_acl:
        if replicator is None:
            note = "the replicator's principal is unknown (PLAINTEXT, or TLS identities): "
            note += f"set clusters.{flow.target}.principals.replicator"
            return StandbyGuard(flow.name, flow.target, note=note)
        if replicator in (app, ANY_USER):
            note = f"the replicator and the applications are one principal ({replicator})"
            return StandbyGuard(flow.name, flow.target, note=note)
        entries = {
            AclEntry(replicator, resource, operation)
            for resource in resources
            for operation in REPLICATOR_OPERATIONS
        } | {
            AclEntry(ANY_USER, resource, operation)
            for resource in resources
            for operation in READER_OPERATIONS
        }
        return StandbyGuard(flow.name, flow.target, frozenset(entries))
    if app is None or app == replicator:
        note = "deny by default: read-only unless an ACL lets applications write them; set "
        note += f"clusters.{flow.target}.principals.app-producer to DENY it"
        return StandbyGuard(flow.name, flow.target, note=note)
    deny = {AclEntry(app, r, Operation.WRITE, Permission.DENY) for r in resources}
    return StandbyGuard(flow.name, flow.target, frozenset(deny))


def guard_entries(config: DrkitConfig) -> dict[str, frozenset[AclEntry]]:
    """Per cluster: every ACL a guard of one of ``config``'s flows can hold there (pure) - what
    taking the flows away (a drill's scratch flows at its end) deletes."""
    out: dict[str, set[AclEntry]] = {}
    for flow in config.flows:
        out.setdefault(flow.target, set()).update(guard_of(flow, config).entries)
    return {cluster: frozenset(entries) for cluster, entries in out.items() if entries}


def guarded_flows(config: DrkitConfig, primary: str | None) -> tuple[FlowConfig, ...]:
    """The flows whose replicas must be read-only: those into a cluster that is not
    ``primary``; with no primary known yet, those that replicate now (not ``standby``)."""
    if primary is None:
        return tuple(flow for flow in config.flows if not flow.standby)
    return tuple(flow for flow in config.flows if flow.target != primary)


@dataclass(frozen=True)
class GuardPlan:
    """What to create and delete on one cluster to reach the desired guard."""

    cluster: str
    create: frozenset[AclEntry]
    delete: frozenset[AclEntry]
    notes: tuple[str, ...] = ()


def plan_guards(
    config: DrkitConfig, primary: str | None, present: Mapping[str, Iterable[AclEntry]]
) -> list[GuardPlan]:
    """Per cluster of ``present`` (the ACLs it has now): the guard ACLs to create and those of
    flows no longer guarded to delete.  Only ACLs a guard of *some* flow would hold are ever
    deleted - never an operator's other ACLs."""
    wanted = {flow.name for flow in guarded_flows(config, primary)}
    guards = [guard_of(flow, config) for flow in config.flows]
    plans: list[GuardPlan] = []
    for cluster, acls in sorted(present.items()):
        now = set(acls)
        mine = [guard for guard in guards if guard.cluster == cluster]
        desired = {e for guard in mine if guard.flow in wanted for e in guard.entries}
        possible = {e for guard in mine for e in guard.entries}
        notes = tuple(
            f"{guard.flow}: replicas not guarded: {guard.note}"
            for guard in mine
            if guard.flow in wanted and guard.note
        )
        plans.append(
            GuardPlan(
                cluster,
                frozenset(desired - now),
                frozenset((possible - desired) & now),
                notes,
            )
        )
    return plans
