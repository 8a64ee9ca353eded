"""A drill's role principals and their ACLs on deny-by-default clusters.

A config with ``role_security`` runs each drill process as its role (drkit replicate as the
replicator, the monitor as the monitor, the failover as the engine, the workload as the
application).  Their least-privilege ACLs follow the flows (drkit.access.roles), and a drill
has flows of its own (its aliases, topic prefix, bookkeeping topics): the drill grants what
they need for those when it starts, as its own principal, and revokes exactly the ACLs it added
when it stops, with the standby guards of its flows and the write fences its runs left on its
own topics - the clusters' other ACLs are left as they were.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from drkit.access.roles import replica_resources, role_needs
from drkit.acl.rules import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
)
from drkit.config.model import DrkitConfig, Role
from drkit.failover.fences import FENCED_STATES, FenceRepository, FenceRow
from drkit.failover.protections import protection_entries
from drkit.failover.unfence import lift
from drkit.kafka import ClusterEndpoint
from drkit.kafka.apps import APP_TRANSACTIONAL_PREFIX
from drkit.kafka.ports import AdminFactory
from drkit.store import StateStore

_READ = (Operation.READ, Operation.DESCRIBE)


def drill_grants(config: DrkitConfig) -> dict[str, frozenset[AclEntry]]:
    """Per cluster of the drill's ``config``: the ALLOW ACLs every role with credentials of its
    own there needs for the drill's flows, plus what the drill's applications need beyond an
    application's role: their transactional ids, and READ on a flow's replicas to resume on
    its target (their groups are the reverse flow's).  Pure."""
    out: dict[str, frozenset[AclEntry]] = {}
    for alias, cluster in config.clusters.items():
        entries: set[AclEntry] = set()
        for role in cluster.role_security:
            principal = cluster.principal(role)
            if principal is not None:
                entries |= {need.entry(principal) for need in role_needs(role, alias, config).needs}
        producer = cluster.principal(Role.APP_PRODUCER)
        if Role.APP_PRODUCER in cluster.role_security and producer is not None:
            ids = Resource(ResourceType.TRANSACTIONAL_ID, APP_TRANSACTIONAL_PREFIX,
                           PatternType.PREFIXED)  # fmt: skip
            entries |= {AclEntry(producer, ids, op) for op in (Operation.WRITE, Operation.DESCRIBE)}
        consumer = cluster.principal(Role.APP_CONSUMER)
        if Role.APP_CONSUMER in cluster.role_security and consumer is not None:
            for flow in config.flows:
                if flow.target == alias and not flow.standby:
                    replicas, _exact = replica_resources(flow)
                    entries |= {AclEntry(consumer, r, op) for r in replicas for op in _READ}
        if entries:
            out[alias] = frozenset(entries)
    return out


def grant(
    config: DrkitConfig, directory: Path, connect: AdminFactory
) -> dict[str, frozenset[AclEntry]]:
    """Create the drill's ACLs that are missing (as the drill's own principal); returns the ones
    it added, per cluster - what :func:`revoke` takes away again.

    What it is about to add is recorded in the drill's ``directory`` first (:data:`RECORD`,
    with this process's id): a drill killed before its clean-up leaves the record, and
    ``drkit drill cleanup`` (:func:`clean_up`) removes exactly those ACLs later."""
    added: dict[str, frozenset[AclEntry]] = {}
    wanted = drill_grants(config)
    admins = {alias: connect(ClusterEndpoint(alias, config.clusters[alias]))
              for alias in wanted}  # fmt: skip
    for alias, entries in wanted.items():
        added[alias] = frozenset(entries - admins[alias].acl_entries())
    write_record(directory, added)
    for alias, missing in added.items():
        admins[alias].create_entries(missing)
    return added


RECORD = "granted-acls.json"


def write_record(directory: Path, added: Mapping[str, frozenset[AclEntry]]) -> None:
    """Record ``added`` (and this process) in the drill's directory, atomically."""
    document = {
        "pid": os.getpid(),
        "grants": {alias: [_entry_json(e) for e in sorted(entries)]
                   for alias, entries in added.items()},
    }  # fmt: skip
    staged = directory / f".{RECORD}.tmp"
    staged.write_text(json.dumps(document, indent=1))
    staged.replace(directory / RECORD)


def _entry_json(entry: AclEntry) -> dict[str, str]:
    return {
        "principal": entry.principal,
        "resource_type": entry.resource.type.value,
        "resource": entry.resource.name,
        "pattern": entry.resource.pattern.value,
        "operation": entry.operation.value,
        "permission": entry.permission.value,
        "host": entry.host,
    }


def _entry_of(document: Mapping[str, str]) -> AclEntry:
    resource = Resource(
        ResourceType(document["resource_type"]),
        document["resource"],
        PatternType(document["pattern"]),
    )
    return AclEntry(
        document["principal"],
        resource,
        Operation(document["operation"]),
        Permission(document["permission"]),
        document["host"],
    )


@dataclass(frozen=True)
class Leftovers:
    """What a drill's record says it granted, and which process recorded it."""

    pid: int | None
    grants: dict[str, frozenset[AclEntry]]


def read_record(directory: Path) -> Leftovers | None:
    """The drill's record of its grants (None when it has none: never granted, or released).

    Raises ValueError for a record that is not one."""
    path = directory / RECORD
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text())
        grants = {alias: frozenset(_entry_of(e) for e in entries)
                  for alias, entries in document["grants"].items()}  # fmt: skip
        pid = document.get("pid")
        if pid is not None and not isinstance(pid, int):
            raise ValueError(f"pid {pid!r} is not a process id")
        return Leftovers(pid, grants)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a record of a drill's grants ({err})") from None


def release(
    config: DrkitConfig,
    added: Mapping[str, frozenset[AclEntry]],
    store: StateStore,
    directory: Path,
    connect: AdminFactory,
) -> list[str]:
    """Everything a drill leaves on the clusters goes: its grants (:func:`revoke`, with its
    flows' standby guards) and its runs' fences (:func:`lift_fences`); then its record.  Cut
    short anywhere, running it again finishes (an absent ACL deletes without error).  Returns
    the clusters whose fences were lifted.

    The grants recorded in ``directory`` go too: a :func:`grant` that failed half-way returned
    nothing to its caller, but recorded what it was creating."""
    try:
        recorded = read_record(directory)
    except ValueError:
        recorded = None  # a damaged record: what the caller knows is all there is
    if recorded is not None:
        added = {alias: added.get(alias, frozenset()) | recorded.grants.get(alias, frozenset())
                 for alias in set(added) | set(recorded.grants)}  # fmt: skip
    revoke(config, added, connect)
    lifted = lift_fences(config, store, connect)
    (directory / RECORD).unlink(missing_ok=True)
    return lifted


def revoke(
    config: DrkitConfig, added: Mapping[str, frozenset[AclEntry]], connect: AdminFactory
) -> None:
    """Delete exactly the ACLs :func:`grant` added, and the standby guards and replicator
    fences of the drill's own flows (the reconciler placed them on its replicas and its
    bookkeeping topics; they name nothing outside the drill's prefix)."""
    guards = protection_entries(config)
    for alias in sorted(set(added) | set(guards)):
        entries = added.get(alias, frozenset()) | guards.get(alias, frozenset())
        if entries:  # deleting an absent ACL is no error
            connect(ClusterEndpoint(alias, config.clusters[alias])).delete_entries(entries)


def lift_fences(config: DrkitConfig, store: StateStore, connect: AdminFactory) -> list[str]:
    """Lift the write fences the drill's runs left on its own topics - its store holds exactly
    those - where the cluster runs an authorizer; returns the clusters lifted.  Called once the
    report's checks (``fencing_held`` writes to the fenced source) are done."""
    fences = FenceRepository(store)
    fenced: dict[str, list[FenceRow]] = {}
    for row in fences.rows():
        if row.state in FENCED_STATES:
            fenced.setdefault(row.cluster, []).append(row)
    lifted: list[str] = []
    for cluster, rows in sorted(fenced.items()):
        admin = connect(ClusterEndpoint(cluster, config.clusters[cluster]))
        if not admin.authorizer_enabled():
            continue
        lift(admin, fences, cluster, {row.topic for row in rows}, config.failover.fence_principal)
        lifted.append(cluster)
    return lifted
