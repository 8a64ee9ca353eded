"""Protections as desired state: what every cluster should refuse, derived from the pointer,
the unfinished runs and the flows (pure).

A protection is something a cluster enforces so that at most one cluster takes application
writes: a **fence** (DENY WRITE for ``failover.fence_principal`` on the topics applications
write there - the flows' source topics), a **standby guard** (a flow's replicas writable by its
replicator only, drkit.access.standby), a **replicator fence** (DENY WRITE for a flow's
replicator on its replicas and bookkeeping once its target is the primary: a worker frozen past
its silence window that wakes after the promotion appends nothing) and a schema registry's
**mode** (READWRITE where applications write, READONLY on the clusters they left).

Nothing here remembers what was done.  :func:`desired` answers "what should hold now" from:

* the **pointer** - every cluster that is the source of a flow and not the pointer's is fenced
  (before any move, with no pointer, nothing is); an operator's ``drkit fences lift
  --even-if-standby`` opens one cluster until the pointer next moves;
* each **unfinished forward run**, whose recorded steps are its intent: once ``fence_source``
  started its source is fenced (though still the pointer's); once ``unfence_target``,
  ``sync_schemas`` or ``move_pointer`` started its target is open and its registry writable.
  A run rolling back, rolled back, failed in its rollback, abandoned or ended wants nothing: the
  pointer alone decides again.  So a rollback never needs an inverse: "intent back, reconcile"
  (drkit.failover.reconcile applies the difference, under the failover lease);
* the **flows** - which topics a fence covers (each flow's selection over the cluster's topics
  now, so a topic created mid-run is fenced at the next reconcile), which flows' replicas are
  guarded (those into a cluster that is not the primary) and which replicators are fenced.

Invariants (tests/unit/test_protections.py, and after every event in tests/simulation):
the pointer's cluster is never fenced once no run wants otherwise; a run's source is fenced
before its target opens (both are recorded intent, and the reconciler restricts before it
relaxes); a topic a running flow replicates into a cluster under an effective guard is the
guard's, never the fence's (the fence would stop the replicator too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from drkit.access.roles import replica_resources
from drkit.access.standby import guard_of, guarded_flows
from drkit.acl.fencing import KEPT_READS, deny_write, topic_acl
from drkit.acl.rules import ANY_USER, AclEntry, Operation, Permission, Resource, ResourceType
from drkit.config.model import DrkitConfig, FlowConfig, Role
from drkit.failover.model import Direction, Procedure, RunState, StepName, StepState
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import HEARTBEATS

READWRITE, READONLY = "READWRITE", "READONLY"

# Steps whose start records a run's intent (their rows are written before they act).
_FENCES_SOURCE = (StepName.FENCE_SOURCE,)
_OPENS_TARGET = (StepName.UNFENCE_TARGET, StepName.MOVE_POINTER)
_REGISTRY_TO_TARGET = (StepName.SYNC_SCHEMAS, StepName.MOVE_POINTER)
_STARTED = (StepState.RUNNING, StepState.DONE, StepState.FAILED)


@dataclass(frozen=True)
class RunIntent:
    """What one unfinished forward run wants of the protections, read from its steps."""

    run_id: int
    procedure: Procedure
    source: str
    target: str
    source_fenced: bool
    target_open: bool
    registry_on_target: bool
    # A failback's target (the original primary) until the run opens it: its divergent tail
    # is read and exported meanwhile, so nothing may write there - openings notwithstanding.
    target_held: bool = False

    @classmethod
    def of(
        cls,
        run_id: int,
        procedure: Procedure,
        source: str,
        target: str,
        state: RunState,
        direction: Direction,
        steps: Mapping[StepName, StepState],
    ) -> RunIntent | None:
        """The run's intent; None when it wants nothing (ended, or rolling back)."""
        if not state.unfinished or direction is Direction.ROLLBACK:
            return None

        def started(names: Iterable[StepName]) -> bool:
            return any(steps.get(name) in _STARTED for name in names)

        return cls(
            run_id,
            procedure,
            source,
            target,
            started(_FENCES_SOURCE),
            started(_OPENS_TARGET),
            started(_REGISTRY_TO_TARGET),
            procedure is Procedure.FAILBACK and not started(_OPENS_TARGET),
        )


@dataclass(frozen=True)
class ProtectionFacts:
    """What the desired protections are derived from (read at the edge)."""

    pointer: str | None
    intents: tuple[RunIntent, ...] = ()
    # Opened by an operator until the pointer moves: the cluster (None) or some of its topics.
    opened: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    running_flows: frozenset[str] = frozenset()  # flows whose directive is RUNNING


@dataclass(frozen=True)
class ClusterProtections:
    """What one cluster should hold.  ``fenced``: its applications' topics refuse writes
    (which topics: :func:`fence_topics` over what the cluster lists now); ``guard`` and
    ``replicator_fence``: exactly the ACLs of those kinds drkit wants there; ``registry``:
    the mode its schema registry should be in (None: drkit leaves it alone)."""

    cluster: str
    fenced: bool
    guard: frozenset[AclEntry] = frozenset()
    replicator_fence: frozenset[AclEntry] = frozenset()
    registry: str | None = None
    # Running flows into the cluster whose replicas are their guard's, not the fence's.
    guarded_writers: frozenset[str] = frozenset()
    open_topics: frozenset[str] = frozenset()  # an operator opened these (fenced cluster)
    notes: tuple[str, ...] = field(default=())


def write_primary(config: DrkitConfig, facts: ProtectionFacts) -> str | None:
    """Where applications write: the pointer's cluster (before any move, the first flow's
    source) - or, once a run's target opened, that target."""
    primary = facts.pointer
    if primary is None and config.flows:
        primary = config.flows[0].source
    for intent in facts.intents:
        if intent.target_open:
            primary = intent.target
    return primary


def fenced_clusters(config: DrkitConfig, facts: ProtectionFacts) -> frozenset[str]:
    """The clusters whose applications' topics refuse writes."""
    sources = {flow.source for flow in config.flows}
    fenced: set[str] = set()
    if facts.pointer is not None:
        whole = {cluster for cluster, topics in facts.opened.items() if topics is None}
        fenced = sources - {facts.pointer} - whole
    for intent in facts.intents:
        if intent.source_fenced:
            fenced.add(intent.source)
        if intent.target_open:
            fenced.discard(intent.target)
    return frozenset(fenced | held_by_runs(facts))


def held_by_runs(facts: ProtectionFacts) -> frozenset[str]:
    """Clusters a run needs fenced whole, whatever an operator opened (a failback's target
    while its tail is captured)."""
    return frozenset(intent.target for intent in facts.intents if intent.target_held)


def registry_primary(config: DrkitConfig, facts: ProtectionFacts) -> str | None:
    """The cluster whose schema registry takes writes: the pointer's (before any move, the
    first flow's source) - or, once a run's sync_schemas started, that run's target."""
    primary = facts.pointer
    if primary is None and config.flows:
        primary = config.flows[0].source
    for intent in facts.intents:
        if intent.registry_on_target:
            primary = intent.target
    return primary


def desired(config: DrkitConfig, facts: ProtectionFacts) -> dict[str, ClusterProtections]:
    """Per configured cluster: the protections it should hold now (see the module docstring)."""
    fenced = fenced_clusters(config, facts) if config.failover.fence_with_acls else frozenset()
    primary = write_primary(config, facts)
    guarded = {flow.name for flow in guarded_flows(config, primary)}
    guards = {flow.name: guard_of(flow, config) for flow in config.flows}
    registry_on = registry_primary(config, facts)
    held = held_by_runs(facts)
    out: dict[str, ClusterProtections] = {}
    for alias in config.clusters:
        notes: list[str] = []
        guard: set[AclEntry] = set()
        if config.failover.read_only_standby:
            for flow in config.flows:
                if flow.target != alias or flow.name not in guarded:
                    continue
                found = guards[flow.name]
                guard |= found.entries
                if found.note:
                    notes.append(f"{flow.name}: replicas not guarded: {found.note}")
        stopped, why = (
            replicator_fence(config, alias, primary, facts.running_flows)
            if config.failover.fence_with_acls
            else (frozenset(), [])
        )
        notes += why
        out[alias] = ClusterProtections(
            alias,
            alias in fenced,
            frozenset(guard),
            stopped,
            _registry_mode(config, alias, registry_on),
            _left_to_guards(config, alias, facts.running_flows),
            frozenset() if alias in held else facts.opened.get(alias) or frozenset(),
            tuple(notes),
        )
    return out


def fence_topics(
    config: DrkitConfig, cluster: str, listed: Iterable[str], guarded_writers: Iterable[str] = ()
) -> frozenset[str]:
    """The topics of ``cluster`` a fence covers, from what it lists now: every topic a flow out
    of it replicates or carries over by name (``follows``: a lost cluster's replicas whose
    groups a move translates - docs/three-dc.md; not ``heartbeats``, drkit's own) - but the
    replicas the flows named in ``guarded_writers`` write into it under the same name
    (identity), which are their guard's."""
    out_of = [FlowTopology.of(flow) for flow in config.flows if flow.source == cluster]
    writers = [FlowTopology.of(flow) for flow in config.flows if flow.name in set(guarded_writers)]
    return frozenset(
        topic
        for topic in listed
        if topic != HEARTBEATS
        and any(topology.translates(topic) for topology in out_of)
        and not any(w.selects(topic) and w.target_topic(topic) == topic for w in writers)
    )


def fence_entries(
    topics: Iterable[str], principal: str, companions: Iterable[str]
) -> set[AclEntry]:
    """The ACLs of a fence on ``topics``: a DENY WRITE each, and the companion ALLOW READs on
    ``companions`` (topics that had no ACL on an open cluster: readers keep reading)."""
    names = set(topics)
    return {deny_write(topic, principal) for topic in names} | {
        topic_acl(topic, principal, operation)
        for topic in names & set(companions)
        for operation in KEPT_READS
    }


def replicator_fence(
    config: DrkitConfig, cluster: str, primary: str | None, running: frozenset[str]
) -> tuple[frozenset[AclEntry], list[str]]:
    """DENY WRITE for the replicator of every flow into ``cluster`` that does not run (its
    directive holds it: stopped by a move, or a standby flow) while ``cluster`` is the primary:
    on its replicas and its progress and offset-sync topics - a worker of it frozen past its
    silence window that wakes up after the promotion appends nothing.  With notes where a
    flow's replicator cannot be fenced (unknown principal, one principal for replicator and
    applications, replicas that are no set of literal or prefixed names)."""
    if primary != cluster:
        return frozenset(), []
    entries: set[AclEntry] = set()
    notes: list[str] = []
    for flow in config.flows:
        if flow.target != cluster or flow.name in running:
            continue
        found, note = _replicator_fence_of(config, flow)
        entries |= found
        if note:
            notes.append(f"{flow.name}: replicator not fenced on {cluster}: {note}")
    return frozenset(entries), notes


def replicator_fence_entries(config: DrkitConfig, cluster: str) -> frozenset[AclEntry]:
    """Every replicator-fence ACL drkit may hold on ``cluster`` (those it may delete)."""
    entries: set[AclEntry] = set()
    for flow in config.flows:
        if flow.target == cluster:
            entries |= _replicator_fence_of(config, flow)[0]
    return frozenset(entries)


def guard_entries_on(config: DrkitConfig, cluster: str) -> frozenset[AclEntry]:
    """Every standby-guard ACL drkit may hold on ``cluster`` (those it may delete)."""
    entries: set[AclEntry] = set()
    for flow in config.flows:
        if flow.target == cluster:
            entries |= guard_of(flow, config).entries
    return frozenset(entries)


def protection_entries(config: DrkitConfig) -> dict[str, frozenset[AclEntry]]:
    """Per cluster: every guard and replicator-fence ACL the config's flows can hold there
    (what taking the flows away - a drill's scratch flows at its end - deletes)."""
    out = {
        alias: guard_entries_on(config, alias) | replicator_fence_entries(config, alias)
        for alias in config.clusters
    }
    return {alias: entries for alias, entries in out.items() if entries}


def _replicator_fence_of(config: DrkitConfig, flow: FlowConfig) -> tuple[set[AclEntry], str]:
    target = config.clusters[flow.target]
    replicator = target.principal(Role.REPLICATOR)
    if replicator is None:
        return set(), "its principal is unknown (set clusters.<target>.principals.replicator)"
    apps = {target.principals.get(role) for role in (Role.APP_PRODUCER,)}
    if replicator in apps or replicator == "User:*":
        return set(), f"it shares its principal with the applications ({replicator})"
    resources, exact = replica_resources(flow)
    if not exact or any(r.name == "*" for r in resources):
        return set(), "its replicas are no set of literal or prefixed names"
    topology = FlowTopology.of(flow)
    own = [
        Resource(ResourceType.TOPIC, name)
        for name in (topology.progress_topic, topology.offset_syncs_topic)
    ]
    covered = (*resources, *own)
    entries = {AclEntry(replicator, r, Operation.WRITE, Permission.DENY) for r in covered}
    if target.allow_everyone_if_no_acl:
        # On an open cluster the first ACL on a resource ends "everyone may" for it: everyone
        # keeps every right there but the replicator's write (a DENY beats an ALLOW).
        entries |= {AclEntry(ANY_USER, r, Operation.ALL) for r in covered}
    return entries, ""


def _left_to_guards(config: DrkitConfig, cluster: str, running: frozenset[str]) -> frozenset[str]:
    """The running flows into ``cluster`` whose replicas a guard protects: their replicas are
    left to the guard (it lets only the replicator write them; a fence would stop it too)."""
    return frozenset(
        flow.name
        for flow in config.flows
        if flow.target == cluster and flow.name in running and guard_of(flow, config).entries
    )


def _registry_mode(config: DrkitConfig, cluster: str, primary: str | None) -> str | None:
    touched = any(
        flow.schema_sync.enabled and cluster in (flow.source, flow.target) for flow in config.flows
    )
    if primary is None or not touched or config.clusters[cluster].schema_registry is None:
        return None
    return READWRITE if cluster == primary else READONLY
