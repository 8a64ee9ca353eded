"""Consumers' topic ACLs copied to the replicas (opt-in: ``flows[].acl_sync``).

After a failover the applications read the replicas; without their ACLs on the target a
secured standby refuses them.  drkit copies, as MirrorMaker 2 does, the ACLs that let
principals *read* the flow's topics - never WRITE: the standby must stay read-only until a
failover promotes it (drkit.access.standby):

* topic ACLs only, LITERAL on a topic the flow selects, or PREFIXED on a prefix it selects as a
  name (the wildcard ``*`` is not copied: on the target it would open every topic);
* READ and DESCRIBE as they are; ALL becomes READ and DESCRIBE; other operations are skipped;
* ALLOW and DENY alike (a restriction lost on the standby would widen access);
* the principal through the flow's mapping (``null``: not copied), the host as it is.

Copying only adds: an ACL removed on the source stays on the target (removing could revoke
what an operator granted there).  :func:`missing` is the drift ``drkit status`` shows.
The decisions are pure; :class:`AclSynchronizer` does the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from drkit.acl.rules import WILDCARD, AclEntry, Operation, Resource, ResourceType
from drkit.kafka.ports import ClusterAdmin
from drkit.topology.flow import FlowTopology

log = logging.getLogger(__name__)

_COPIED = {
    Operation.READ: (Operation.READ,),
    Operation.DESCRIBE: (Operation.DESCRIBE,),
    Operation.ALL: (Operation.READ, Operation.DESCRIBE),
}


def replica_entries(
    entry: AclEntry,
    selects: Callable[[str], bool],
    rename: Callable[[str], str],
    principals: Mapping[str, str | None],
) -> tuple[AclEntry, ...]:
    """The target ACLs one source ACL becomes (none when it is not copied)."""
    resource = entry.resource
    if resource.type is not ResourceType.TOPIC or resource.name == WILDCARD:
        return ()
    if not selects(resource.name):
        return ()
    principal = principals.get(entry.principal, entry.principal)
    if principal is None:
        return ()
    target = Resource(ResourceType.TOPIC, rename(resource.name), resource.pattern)
    return tuple(
        AclEntry(principal, target, operation, entry.permission, entry.host)
        for operation in _COPIED.get(entry.operation, ())
    )


def desired_entries(
    source: Iterable[AclEntry], topology: FlowTopology, principals: Mapping[str, str | None]
) -> frozenset[AclEntry]:
    """Every target ACL the source's ACLs call for, for one flow."""
    return frozenset(
        copy
        for entry in source
        for copy in replica_entries(entry, topology.selects, topology.target_topic, principals)
    )


def missing(desired: Iterable[AclEntry], target: Iterable[AclEntry]) -> tuple[AclEntry, ...]:
    """Desired ACLs the target lacks, sorted: the ACL drift of a flow."""
    present = set(target)
    return tuple(sorted(entry for entry in desired if entry not in present))


def drift_lines(entries: Iterable[AclEntry], target: str) -> list[str]:
    """How ``drkit status`` names each missing ACL."""
    return [f"ACL missing on {target}: {entry}" for entry in entries]


class AclSynchronizer:
    """One flow's ACL copy: :meth:`compare` reads both clusters, :meth:`sync` adds what is
    missing.  Needs DESCRIBE on both clusters and ALTER on the target: the replicator reads
    the source, the fencer writes the target (drkit.replication.background.side_syncs)."""

    def __init__(self, topology: FlowTopology, source: ClusterAdmin, target: ClusterAdmin) -> None:
        self.topology = topology
        self.source = source
        self.target = target

    def compare(self) -> tuple[AclEntry, ...]:
        """The target's missing ACLs; raises KafkaError when either cluster cannot say."""
        desired = desired_entries(
            self.source.acl_entries(), self.topology, self.topology.flow.acl_sync.principals
        )
        return missing(desired, self.target.acl_entries())

    def sync(self) -> tuple[AclEntry, ...]:
        """Create the missing ACLs on the target; returns what was created."""
        absent = self.compare()
        if absent:
            self.target.create_entries(absent)
            log.info(
                "copied ACLs to the replicas",
                extra={"flow": self.topology.name, "acls": len(absent)},
            )
        return absent
