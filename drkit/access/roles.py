"""What each drkit role needs on one cluster, derived from the config (pure).

A role is a job one drkit principal does; an operator may run each with its own credentials
(least privilege) or all as one principal (which then needs the union).  The needs follow from
the flows: a cluster that is the *source* of a flow is read (topics, groups) and holds its
``heartbeats``; a cluster that is its *target* receives the replicas and drkit's bookkeeping
topics.  Names come from the same places the workers take them (drkit.topology.flow), so
the ACLs and the clients cannot disagree.

Topic and group selections are regexes; Kafka ACLs are literals or prefixes
(drkit.acl.rules.resource_for_pattern) - a selection that is neither becomes "every topic",
and :func:`role_needs` reports it in :attr:`RoleNeeds.widened`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from drkit.acl.rules import (
    Need,
    Operation,
    PatternType,
    Resource,
    ResourceType,
    resource_for_pattern,
)
from drkit.config.model import (
    CommitSource,
    DrkitConfig,
    FlowConfig,
    NameFilter,
    ReplicationPolicyKind,
    Role,
)
from drkit.topology import internal_topics
from drkit.topology.internal_topics import OFFSETS_TOPIC

__all__ = ["DRKIT_ROLES", "OWN_PREFIX", "Role", "RoleNeeds", "replica_resources", "role_needs"]

# drkit's own consumer groups, transactional ids and bookkeeping topics share this prefix
# (drkit.topology.internal_topics.OWN_GROUP_PREFIXES).
OWN_PREFIX = "drkit-"


DRKIT_ROLES = (
    Role.REPLICATOR,
    Role.CHECKPOINTER,
    Role.MONITOR,
    Role.ENGINE,
    Role.FENCER,
    Role.VERIFIER,
)

_READ = (Operation.READ, Operation.DESCRIBE)
_DESCRIBE = (Operation.DESCRIBE,)
_OWN_TOPIC = (Operation.CREATE, Operation.WRITE, Operation.READ, Operation.DESCRIBE)


@dataclass(frozen=True)
class RoleNeeds:
    """The needs of one role on one cluster; ``widened``: selections (regexes) that no ACL
    pattern can express exactly, granted on a wider or narrower resource instead;
    ``optional``: grants the role works without but uses when it holds them (a faster way to
    the same answers) - never part of ``needs``, so least privilege stays least."""

    role: Role
    cluster: str
    needs: tuple[Need, ...]
    widened: tuple[str, ...] = ()
    optional: tuple[Need, ...] = ()


@dataclass(frozen=True)
class _Optional:
    need: Need


@dataclass(frozen=True)
class _Selection:
    resources: tuple[Resource, ...]
    inexact: tuple[str, ...]


def _select(kind: ResourceType, names: NameFilter, what: str) -> _Selection:
    resources: list[Resource] = []
    inexact: list[str] = []
    for regex in names.include:
        resource, exact = resource_for_pattern(kind, regex)
        resources.append(resource)
        if not exact:
            inexact.append(f"{what} {regex!r} -> {resource}")
    # An ALLOW cannot leave a name out: an exclusion inside an included pattern is widened.
    for regex in names.exclude:
        excluded, _exact = resource_for_pattern(kind, regex)
        covering = [r for r in resources if r.overlaps(excluded)]
        if covering:
            inexact.append(f"{what} exclude {regex!r} -> still covered by {covering[0]}")
    return _Selection(tuple(dict.fromkeys(resources)), tuple(inexact))


def _topics_of(flow: FlowConfig) -> _Selection:
    """The source topics a flow selects: its ``topics`` and its Kafka Streams applications'
    changelogs (drkit.topology.streams), as ``<application.id>-`` prefixes - wider than the
    changelogs alone (the applications' other internal topics too), so reported as inexact."""
    selected = _select(ResourceType.TOPIC, flow.topics, f"topics of {flow.name}")
    return _with_streams(flow, selected)


def _with_streams(flow: FlowConfig, selected: _Selection) -> _Selection:
    if not flow.kafka_streams:
        return selected
    prefixes = [Resource(ResourceType.TOPIC, f"{app}-", PatternType.PREFIXED)
                for app in flow.kafka_streams]  # fmt: skip
    notes = [f"changelogs of the Kafka Streams application {app} -> {prefix}"
             for app, prefix in zip(flow.kafka_streams, prefixes, strict=True)]  # fmt: skip
    return _Selection(
        tuple(dict.fromkeys([*selected.resources, *prefixes])), (*selected.inexact, *notes)
    )


def _replicas(flow: FlowConfig) -> _Selection:
    """The replicas a flow writes on its target (changelogs keep their names there)."""
    return _with_streams(flow, _policy_replicas(flow))


def _policy_replicas(flow: FlowConfig) -> _Selection:
    policy = flow.replication_policy
    if flow.transforms:
        # Route renames can send a replica anywhere: no pattern covers them for sure.
        every = Resource(ResourceType.TOPIC, "*")
        note = f"replicas of {flow.name} (renamed by transforms) -> {every}"
        return _Selection((every,), (note,))
    if policy.kind == ReplicationPolicyKind.PREFIX:
        prefix = f"{flow.source}{policy.separator}"
        return _Selection((Resource(ResourceType.TOPIC, prefix, PatternType.PREFIXED),), ())
    if policy.kind == ReplicationPolicyKind.IDENTITY:
        return _select(ResourceType.TOPIC, flow.topics, f"topics of {flow.name}")
    every = Resource(ResourceType.TOPIC, "*")
    return _Selection((every,), (f"replicas of {flow.name} (policy {policy.kind}) -> {every}",))


def source_topic_resources(flow: FlowConfig) -> tuple[Resource, ...]:
    """The ACL resources of the source topics ``flow`` selects (what a fence of its source
    covers), at least as wide as the topics themselves."""
    return _topics_of(flow).resources


def replica_resources(flow: FlowConfig) -> tuple[tuple[Resource, ...], bool]:
    """The ACL resources of the replicas ``flow`` writes on its target, and whether they
    stand for exactly those names (see drkit.acl.rules.resource_for_pattern)."""
    replicas = _replicas(flow)
    return replicas.resources, not replicas.inexact


def _needs(
    resources: Iterable[Resource], operations: Iterable[Operation], why: str
) -> Iterator[Need]:
    operations = tuple(operations)
    for resource in resources:
        for operation in operations:
            yield Need(resource, operation, why)


def _topic(name: str) -> Resource:
    return Resource(ResourceType.TOPIC, name)


def _own(kind: ResourceType) -> Resource:
    return Resource(kind, OWN_PREFIX, PatternType.PREFIXED)


def _replicator(flow: FlowConfig, cluster: str) -> Iterator[Need | str]:
    if flow.source == cluster:
        topics = _topics_of(flow)
        yield from topics.inexact
        why = f"reads the topics {flow.name} replicates"
        ops: tuple[Operation, ...] = (*_READ, Operation.DESCRIBE_CONFIGS)
        yield from _needs(topics.resources, ops, why)
        heartbeats = _topic(internal_topics.HEARTBEATS)
        why = f"writes {flow.name}'s heartbeats and replicates them (configs included)"
        yield from _needs([heartbeats], (*_OWN_TOPIC, Operation.DESCRIBE_CONFIGS), why)
        group = Resource(ResourceType.GROUP, f"drkit-replicate.{flow.source}.{flow.target}")
        yield from _needs([group], _READ, f"the consumer group of {flow.name}'s workers")
    if flow.target == cluster:
        replicas = _replicas(flow)
        yield from replicas.inexact
        ops = (*_OWN_TOPIC, Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS)
        why = f"creates and writes the replicas of {flow.name}"
        yield from _needs(replicas.resources, ops, why)
        bookkeeping = [
            _topic(internal_topics.progress_topic(flow.source)),
            _topic(internal_topics.offset_syncs_topic(flow.source)),
            _topic(internal_topics.control_topic(flow.source)),
        ]
        yield from _needs(bookkeeping, _OWN_TOPIC, f"{flow.name}'s progress, offset syncs, control")
        yield from _needs([_own(ResourceType.GROUP)], _READ, "drkit's readers' group ids")
        if flow.exactly_once:
            ids = Resource(
                ResourceType.TRANSACTIONAL_ID,
                f"drkit-{flow.source}-{flow.target}-",
                PatternType.PREFIXED,
            )
            why = f"{flow.name}'s exactly-once transactions"
            yield from _needs([ids], (Operation.WRITE, Operation.DESCRIBE), why)
        why = f"idempotent writes of {flow.name}"
        yield from _needs([Resource.cluster()], [Operation.IDEMPOTENT_WRITE], why)
    if flow.acl_sync.enabled and flow.source == cluster:
        # Only reading them: the fencer writes them on the target (see _fencer) - ALTER on the
        # cluster would let the replicator rewrite every ACL and SCRAM credential.
        why = f"reads the consumers' topic ACLs {flow.name} copies (acl_sync)"
        yield from _needs([Resource.cluster()], _DESCRIBE, why)


def _mapping_topics(flow: FlowConfig) -> list[Resource]:
    """What a translation reads on the target (drkit.offsets.mapping_loader): offset syncs,
    progress and - for a flow taken over from MirrorMaker 2 - its adopted range."""
    return [
        _topic(internal_topics.offset_syncs_topic(flow.source)),
        _topic(internal_topics.progress_topic(flow.source)),
        _topic(internal_topics.adopted_topic(flow.source)),
    ]


def _checkpointer(flow: FlowConfig, cluster: str) -> Iterator[Need | str | _Optional]:
    if flow.source == cluster:
        groups = _select(ResourceType.GROUP, flow.groups, f"groups of {flow.name}")
        yield from groups.inexact
        yield from _needs(groups.resources, [Operation.DESCRIBE], f"reads the offsets {flow.name} "
                          "checkpoints")  # fmt: skip
        topics = _topics_of(flow)
        yield from _needs(topics.resources, [Operation.DESCRIBE], "sees the groups' offsets")
        why = f"follows the commits {flow.name} checkpoints on the log"
        if flow.checkpoint_commits_from is CommitSource.OFFSETS_TOPIC:
            yield from _needs([_topic(OFFSETS_TOPIC)], _READ, why)
        elif flow.checkpoint_commits_from is CommitSource.AUTO:
            why += " (without it every round reads every group's offsets)"
            yield from map(_Optional, _needs([_topic(OFFSETS_TOPIC)], _READ, why))
    if flow.target == cluster:
        checkpoints = _topic(internal_topics.checkpoints_topic(flow.source))
        yield from _needs([checkpoints], _OWN_TOPIC, f"writes {flow.name}'s checkpoints")
        why = f"translates with {flow.name}'s offset syncs and progress"
        yield from _needs(_mapping_topics(flow), _READ, why)
        yield from _needs([_own(ResourceType.GROUP)], _READ, "the checkpoint election group")
        why = f"bounds translations by the log starts of {flow.name}'s replicas"
        yield from _needs(_replicas(flow).resources, [Operation.DESCRIBE], why)
        if flow.sync_group_offsets:
            groups = _select(ResourceType.GROUP, flow.groups, f"groups of {flow.name}")
            yield from _needs(groups.resources, _READ, "commits translated offsets")
            yield from _needs(_replicas(flow).resources, _READ, "commits translated offsets")


def _monitor(config: DrkitConfig, cluster: str) -> Iterator[Need | str]:
    # The monitor runs the engine's periodic duties (drkit.failover.maintenance: pending
    # fences, standby guards, resuming interrupted runs), so it needs what the engine needs.
    yield from _engine(config, cluster)
    canary = _topic(config.health.canary_topic)
    yield from _needs([canary], _OWN_TOPIC, "the canary probe")
    yield from _needs([_own(ResourceType.GROUP)], _READ, "the canary reader's group id")
    yield from _needs([_own(ResourceType.TOPIC)], _READ, "reads workers' progress and acks")
    for flow in config.flows:
        if flow.target == cluster:
            replicas = _replicas(flow).resources
            yield from _needs(replicas, _READ, f"measures {flow.name}'s lag and heartbeats")
        if flow.source == cluster:
            topics = _topics_of(flow).resources
            yield from _needs(topics, [Operation.DESCRIBE], f"measures {flow.name}'s lag")


def _fencer(config: DrkitConfig, cluster: str) -> Iterator[Need | str]:
    """The only role with ALTER on the cluster (Kafka's one grant for ACL changes): the
    protections' reconciler (drkit.failover.reconcile) runs as it - in failover runs, the
    monitor's maintenance and ``drkit fences`` - and, with ``acl_sync``, so does the copy of
    the consumers' topic ACLs onto the target (the replicator's process connects as the fencer
    for it), so that the replicator never holds ALTER on the cluster."""
    why = "places and lifts fences, standby guards and replicator fences (ACLs)"
    copied = [f.name for f in config.flows if f.acl_sync.enabled and f.target == cluster]
    if copied:  # the replicator's process writes them with the fencer's credentials
        why += f"; copies the consumers' topic ACLs of {', '.join(copied)} (acl_sync)"
    yield from _needs([Resource.cluster()], (Operation.ALTER, Operation.DESCRIBE), why)
    for flow in config.flows:
        if flow.source == cluster:
            topics = _topics_of(flow)
            yield from topics.inexact
            why = f"sees which of {flow.name}'s topics exist to fence them"
            yield from _needs(topics.resources, [Operation.DESCRIBE], why)
        if flow.target == cluster:
            why = f"sees which of {flow.name}'s replicas exist to guard them"
            yield from _needs(_replicas(flow).resources, [Operation.DESCRIBE], why)


def _engine(config: DrkitConfig, cluster: str) -> Iterator[Need | str]:
    # No ALTER on the cluster: ACL changes are the fencer's (see _fencer).
    why = "reads the fences and guards in place (ACLs)"
    yield from _needs([Resource.cluster()], [Operation.DESCRIBE], why)
    why = "reads the brokers' super.users and limits"
    yield from _needs([Resource.cluster()], [Operation.DESCRIBE_CONFIGS], why)
    # Of drkit's own topics it writes only the control topics (directives); the rest - acks,
    # offset syncs, progress, adopted ranges, checkpoints - it reads (security review 6, L5).
    why = "reads workers' acks and translates with offset syncs, progress and adopted ranges"
    yield from _needs([_own(ResourceType.TOPIC)], _READ, why)
    controls = [_topic(internal_topics.control_topic(flow.source))
                for flow in config.flows if flow.target == cluster]  # fmt: skip
    yield from _needs(controls, _OWN_TOPIC, "publishes flow directives (the control topic)")
    # On every cluster: a move writes the pointer for the applications wherever it can
    # (drkit.failover.pointer_topic), the monitor's maintenance creates the topic ahead.
    pointer = _topic(config.failover.pointer_topic)
    yield from _needs([pointer], _OWN_TOPIC, "writes the active pointer for applications")
    yield from _needs([_own(ResourceType.GROUP)], _READ, "drkit's readers' group ids")
    why = "fences drkit's transactional ids before a move"
    ids = _own(ResourceType.TRANSACTIONAL_ID)
    yield from _needs([ids], (Operation.WRITE, Operation.DESCRIBE), why)
    for flow in config.flows:
        if cluster not in (flow.source, flow.target):
            continue
        topics = _topics_of(flow)
        groups = _select(ResourceType.GROUP, flow.groups, f"groups of {flow.name}")
        yield from topics.inexact
        yield from groups.inexact
        if flow.target == cluster:
            replicas = _replicas(flow).resources
            why = f"counts and moves {flow.name}'s replicas"
            yield from _needs(replicas, (*_READ, Operation.DESCRIBE_CONFIGS), why)
            checkpoints = _topic(internal_topics.checkpoints_topic(flow.source))
            yield from _needs([checkpoints], _READ, f"reads {flow.name}'s checkpoints")
        if flow.source == cluster:
            why = f"counts {flow.name}'s topics and fences them"
            yield from _needs(topics.resources, (*_READ, Operation.DESCRIBE_CONFIGS), why)
        why = f"reads and commits the offsets of {flow.name}'s groups"
        yield from _needs(groups.resources, _READ, why)


def _verifier(config: DrkitConfig, cluster: str) -> Iterator[Need | str]:
    yield from _needs([_own(ResourceType.GROUP)], _READ, "drkit's readers' group ids")
    for flow in config.flows:
        if cluster in (flow.source, flow.target):
            groups = _select(ResourceType.GROUP, flow.groups, f"groups of {flow.name}")
            why = f"reads the positions of {flow.name}'s groups"
            yield from _needs(groups.resources, [Operation.DESCRIBE], why)
        if flow.source == cluster:
            topics = _topics_of(flow)
            yield from topics.inexact
            yield from _needs(topics.resources, _READ, f"recounts {flow.name}'s source records")
        if flow.target == cluster:
            replicas = _replicas(flow).resources
            yield from _needs(replicas, _READ, f"recounts {flow.name}'s replicas")
            yield from _needs(_mapping_topics(flow), _READ, f"maps {flow.name}'s offsets")


def _application(role: Role, config: DrkitConfig, cluster: str) -> Iterator[Need | str]:
    """An application of the flows' topics: writes or reads the selection on a source (and,
    once it is promoted, the same names on the new primary - granted then, not before) - and,
    on every cluster, reads the pointer topic, where it learns which cluster is the primary
    (drkit.client: it must read it on a standby before any move)."""
    pointer = _topic(config.failover.pointer_topic)
    yield from _needs([pointer], _READ, "follows the active pointer (the pointer topic)")
    for flow in config.flows:
        if flow.source != cluster:
            continue
        topics = _topics_of(flow)
        yield from topics.inexact
        if role is Role.APP_PRODUCER:
            yield from _needs(topics.resources, (Operation.WRITE, Operation.DESCRIBE), "produces")
        else:
            yield from _needs(topics.resources, _READ, "consumes")
            groups = _select(ResourceType.GROUP, flow.groups, f"groups of {flow.name}")
            yield from _needs(groups.resources, _READ, "commits its offsets")


def role_needs(role: Role, cluster: str, config: DrkitConfig) -> RoleNeeds:
    """Every permission ``role`` needs on ``cluster`` (deduplicated, in a stable order)."""
    found: list[Need | str | _Optional]
    if role is Role.REPLICATOR:
        found = [item for flow in config.flows for item in _replicator(flow, cluster)]
    elif role is Role.CHECKPOINTER:
        found = [item for flow in config.flows for item in _checkpointer(flow, cluster)]
    elif role is Role.MONITOR:
        found = list(_monitor(config, cluster))
    elif role is Role.ENGINE:
        found = list(_engine(config, cluster))
    elif role is Role.FENCER:
        found = list(_fencer(config, cluster))
    elif role is Role.VERIFIER:
        found = list(_verifier(config, cluster))
    else:
        found = list(_application(role, config, cluster))
    needs: dict[tuple[Resource, Operation], Need] = {}
    optional: dict[tuple[Resource, Operation], Need] = {}
    widened: dict[str, None] = {}
    for item in found:
        if isinstance(item, Need):
            needs.setdefault((item.resource, item.operation), item)
        elif isinstance(item, _Optional):
            optional.setdefault((item.need.resource, item.need.operation), item.need)
        else:
            widened[item] = None
    # A grant another flow needs is not optional.
    wanted = tuple(need for key, need in optional.items() if key not in needs)
    return RoleNeeds(role, cluster, tuple(needs.values()), tuple(widened), wanted)
