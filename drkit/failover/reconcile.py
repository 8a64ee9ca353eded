"""The one reconciler of protections: bring the clusters to what drkit.failover.protections
says they should hold, under the failover lease.

A Kubernetes-style controller: it reads the facts (pointer, unfinished runs, openings, flow
directives) from the store, derives the desired protections (pure), reads what each cluster
holds (topics, ACLs, the registry's mode) and applies the difference - then reads the ACLs back
until a broker shows them.  It is idempotent and runs again and again: at every step boundary
of a run (drkit.failover.engine), on every resume, and at every monitor tick outside runs
(drkit.failover.maintenance) - always under the failover lease: ``confirm`` renews it
synchronously right before each cluster's ACLs change, so an actor frozen since it read the
facts changes nothing (LeaseLost).  A stale or half-applied change is put right by the next
pass; no protection depends on a step remembering its inverse.

Order: every restriction on every cluster first, then every relaxation - so a rollback closes
the target again before it opens the source, and no moment has two clusters writable.  ACLs
are not monotonic on an open cluster (the first ACL on a topic ends "everyone may"): what
restricts is creating an ACL that grants applications no write, or deleting one that does.

A cluster that does not answer is skipped and its fence recorded PENDING; ``strict`` clusters
(the step's own) fail the call instead.  Only ACLs drkit can hold are ever deleted: fences of
topics the store has a row for, and the guard and replicator-fence ACLs the config's flows
define - never an operator's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from drkit import clock as drkit_clock
from drkit import failpoints
from drkit.acl.fencing import deny_write
from drkit.acl.rules import (
    ANY_USER,
    AclEntry,
    Operation,
    Permission,
    Resource,
    ResourceType,
)
from drkit.config.model import DrkitConfig, Role
from drkit.control.model import DesiredState, default_state
from drkit.control.repo import ControlRepository
from drkit.errors import DrkitError, RetriableKafkaError, SchemaRegistryError
from drkit.failover.fences import FENCED_STATES, FenceRepository, FenceRow, FenceState
from drkit.failover.lease import request_budget
from drkit.failover.pointer import PointerRepository
from drkit.failover.protections import (
    ClusterProtections,
    ProtectionFacts,
    RunIntent,
    desired,
    fence_entries,
    fence_topics,
    guard_entries_on,
    replicator_fence_entries,
)
from drkit.failover.runs import RunRepository
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.schemas.sync import RegistryPort
from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard

log = logging.getLogger(__name__)

_ON_CLUSTER = (FenceState.APPLIED, FenceState.APPLYING)
PROBE_S = 3.0  # how long a cluster may take to answer before it counts as away
SETTLE_S = 15.0  # how long a broker may take to show an ACL change


RegistryFactory = Callable[[str], RegistryPort]


def default_registries(config: DrkitConfig) -> RegistryFactory:
    from drkit.schemas.sync import registry_of

    def registry(alias: str) -> RegistryPort:
        return registry_of(config, alias, quick=True)

    return registry


@dataclass(frozen=True)
class ClusterOutcome:
    """What one reconcile did on one cluster."""

    cluster: str
    reachable: bool
    fenced: tuple[str, ...] = ()  # topics fenced there now (or pending, when away)
    newly_fenced: tuple[str, ...] = ()
    lifted: tuple[str, ...] = ()
    created: int = 0
    deleted: int = 0
    registry: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.created or self.deleted or self.newly_fenced or self.lifted)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"cluster": self.cluster, "reachable": self.reachable}
        for key in ("fenced", "newly_fenced", "lifted"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        if self.created or self.deleted:
            out["acls_created"], out["acls_deleted"] = self.created, self.deleted
        if self.registry is not None:
            out["registry"] = self.registry
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class ReconcileReport:
    """Per cluster reached (or found away), what was done."""

    clusters: Mapping[str, ClusterOutcome]

    @property
    def changed(self) -> list[str]:
        return sorted(alias for alias, outcome in self.clusters.items() if outcome.changed)

    def to_json(self) -> list[dict[str, object]]:
        return [outcome.to_json() for _alias, outcome in sorted(self.clusters.items())]


@dataclass
class _Plan:
    """One reachable cluster's difference."""

    cluster: str
    admin: ClusterAdmin
    want: ClusterProtections
    fenced: frozenset[str]
    companions: frozenset[str]
    create: set[AclEntry]
    delete: set[AclEntry]
    newly_fenced: frozenset[str]
    lifted: frozenset[str]
    notes: list[str] = field(default_factory=list)


class Reconciler:
    """See the module docstring.  ``confirm`` proves the lease right before a cluster changes
    (LeaseLost stops the pass); ``guard`` fences the store writes by the lease's token."""

    def __init__(
        self,
        config: DrkitConfig,
        store: StateStore,
        connect: AdminFactory,
        confirm: Callable[[], object],
        guard: WriteGuard | None = None,
        registries: RegistryFactory | None = None,
        clock: Callable[[], float] = drkit_clock.monotonic,
        sleep: Callable[[float], None] = drkit_clock.sleep,
        away_for_s: float = 10.0,
    ) -> None:
        self.config = config
        self.store = store
        self.connect = connect
        self.confirm = confirm
        self.fences = FenceRepository(store, guard)
        self.registries = registries or default_registries(config)
        self.clock, self.sleep = clock, sleep
        self.away_for_s = away_for_s  # a cluster found away is not probed again for this long
        self._away: dict[str, float] = {}
        self._admins: dict[str, ClusterAdmin] = {}

    def seen(self, alias: str, answered: bool) -> None:
        """What another probe of ``alias`` found (a cluster away is not probed again by
        non-strict passes for ``away_for_s``: a dead source costs one probe, not one a step)."""
        if answered:
            self._away.pop(alias, None)
        else:
            self._away[alias] = self.clock()

    # -- facts ------------------------------------------------------------------------------

    def facts(self, without: Iterable[int] = ()) -> ProtectionFacts:
        """The facts as the store holds them now (``without`` these runs' intents)."""
        pointer = PointerRepository(self.store).get()
        intents = []
        ignored = set(without)
        for run in RunRepository(self.store).unfinished():
            if run.id in ignored:
                continue
            intent = RunIntent.of(
                run.id, run.procedure, run.source, run.target, run.state, run.direction,
                {step.name: step.state for step in run.steps},
            )  # fmt: skip
            if intent is not None:
                intents.append(intent)
        opened: dict[str, frozenset[str] | None] = {}
        if pointer is not None:
            opened = {o.cluster: o.topics for o in self.fences.openings(pointer.epoch)}
        directives = ControlRepository(self.store).directives(
            {flow.name: default_state(flow) for flow in self.config.flows}
        )
        running = frozenset(
            name for name, found in directives.items() if found.desired is DesiredState.RUNNING
        )
        return ProtectionFacts(
            pointer.cluster if pointer is not None else None, tuple(intents), opened, running
        )

    # -- the pass ---------------------------------------------------------------------------

    def reconcile(
        self,
        clusters: Iterable[str] | None = None,
        strict: Iterable[str] = (),
        known_topics: Mapping[str, Iterable[str]] | None = None,
        timeout_s: float | None = None,
        without: Iterable[int] = (),
    ) -> ReconcileReport:
        """One pass over ``clusters`` (default: every configured one).  ``strict`` clusters
        must be reached and settled (else the error propagates); ``known_topics``: topics to
        record PENDING for a cluster that does not answer (it cannot list them); ``without``:
        runs about to end, whose intent no longer counts (their end is recorded after)."""
        facts = self.facts(without)
        wanted = desired(self.config, facts)
        scope = sorted(set(clusters) if clusters is not None else set(self.config.clusters))
        must = set(strict)
        outcomes: dict[str, ClusterOutcome] = {}
        plans: list[_Plan] = []
        rows: dict[str, dict[str, FenceRow]] = {}
        for row in self.fences.rows():
            rows.setdefault(row.cluster, {})[row.topic] = row
        remembered = {alias for alias in scope if self._remembered_away(alias, alias in must)}

        def scan(aliases: Iterable[str], trust_memo: bool) -> None:
            for alias in aliases:
                skip = trust_memo and alias in remembered
                admin = None if skip else self._reached(alias, alias in must)
                if admin is None:
                    known = (known_topics or {}).get(alias, ())
                    outcomes[alias] = self._away_outcome(
                        alias, wanted[alias], known, rows.get(alias, {})
                    )
                    continue
                try:
                    plans.append(
                        self._plan(alias, admin, wanted[alias], rows.get(alias, {}), timeout_s)
                    )
                except DrkitError as err:
                    if alias in must:
                        raise
                    self._away[alias] = self.clock()
                    outcomes[alias] = ClusterOutcome(
                        alias, False, notes=(f"not reconciled: {err}",)
                    )

        scan(scope, trust_memo=True)
        opening = any(i.target_open for i in facts.intents) or any(map(self._relaxes, plans))
        recheck = sorted(a for a in remembered if wanted[a].fenced)
        if opening and recheck:
            # Applications are sent somewhere new (a run opens its target, a pass lifts a
            # fence): never on the memo's word that a cluster to fence is away - one back since
            # (a failover's source) is restricted in this very pass, restrictions first.
            scan(recheck, trust_memo=False)
        run_of = _run_of_fences(facts)
        for plan in plans:  # restrictions everywhere first ...
            if plan.newly_fenced:
                self.fences.record(
                    plan.cluster, plan.newly_fenced, FenceState.APPLYING,
                    run_of.get(plan.cluster), plan.companions & plan.newly_fenced,
                )  # fmt: skip
            grants = self._grants_writes(plan.cluster)
            self._apply(plan, {e for e in plan.create if not grants(e)}, create=True)
            self._apply(plan, {e for e in plan.delete if grants(e)}, create=False)
        for plan in plans:  # ... then relaxations
            if plan.lifted:
                # Said before the first ACL goes: a pass cut short (the cluster gone, a kill)
                # leaves rows that claim no fence, not APPLIED ones over an open topic.
                self.fences.record(plan.cluster, plan.lifted, FenceState.LIFTING, None)
            grants = self._grants_writes(plan.cluster)
            self._apply(plan, {e for e in plan.create if grants(e)}, create=True)
            self._apply(plan, {e for e in plan.delete if not grants(e)}, create=False)
        if any(plan.create or plan.delete for plan in plans):
            failpoints.reach("reconcile.after_acls")
        for plan in plans:
            outcomes[plan.cluster] = self._settle(plan, run_of.get(plan.cluster), timeout_s)
        for alias, protections in wanted.items():
            if alias in scope and protections.registry is not None:
                mode = self._registry(alias, protections.registry)
                outcomes[alias] = replace(outcomes[alias], registry=mode)
        report = ReconcileReport(outcomes)
        for alias in report.changed:
            log.warning("protections reconciled", extra=outcomes[alias].to_json())
        return report

    def _apply(self, plan: _Plan, entries: set[AclEntry], create: bool) -> None:
        if entries:
            budget = request_budget(self.confirm(), None, self.clock)  # never past the lease
            change = plan.admin.create_entries if create else plan.admin.delete_entries
            change(entries, budget)

    def _grants_writes(self, alias: str) -> Callable[[AclEntry], bool]:
        """Whether an ACL lets applications write (an ALLOW WRITE or ALL for everyone or the
        applications' principal): creating one relaxes, deleting one restricts.  Every other
        ACL drkit holds restricts applications when created (a DENY; on an open cluster any
        ACL at all) and relaxes them when deleted.  The order of a pass rests on it."""
        apps = {ANY_USER}
        app = self.config.clusters[alias].principals.get(Role.APP_PRODUCER)
        if app is not None:
            apps.add(app)

        def grants(entry: AclEntry) -> bool:
            return (
                entry.permission is Permission.ALLOW
                and entry.principal in apps
                and entry.operation in (Operation.WRITE, Operation.ALL)
            )

        return grants

    def _relaxes(self, plan: _Plan) -> bool:
        """Whether ``plan`` lets applications write somewhere they could not."""
        grants = self._grants_writes(plan.cluster)
        return any(grants(e) for e in plan.create) or any(not grants(e) for e in plan.delete)

    def _remembered_away(self, alias: str, strict: bool) -> bool:
        """Whether a non-strict pass skips ``alias``: found away less than away_for_s ago."""
        away_at = self._away.get(alias)
        return not strict and away_at is not None and self.clock() - away_at < self.away_for_s

    def _reached(self, alias: str, strict: bool) -> ClusterAdmin | None:
        """The cluster's admin when it answers, probed now; None when it is away (a strict
        cluster's absence raises)."""
        # As the fencer: the one role allowed to change ACLs (drkit.access.roles).
        admin = self._admins.get(alias) or self.connect(
            ClusterEndpoint(alias, self.config.clusters[alias].for_role(Role.FENCER))
        )
        self._admins[alias] = admin
        try:
            answers = admin.answers(PROBE_S)
        except DrkitError:
            answers = False
        if answers:
            self._away.pop(alias, None)
            return admin
        self._away[alias] = self.clock()
        if strict:
            raise RetriableKafkaError(f"{alias} does not answer: its protections cannot change")
        return None

    def _plan(
        self,
        alias: str,
        admin: ClusterAdmin,
        want: ClusterProtections,
        rows: Mapping[str, FenceRow],
        timeout_s: float | None,
    ) -> _Plan:
        listed = set(admin.list_topics(timeout_s))
        present = admin.acl_entries(timeout_s)
        principal = self.config.failover.fence_principal
        fenced = (
            fence_topics(self.config, alias, listed, want.guarded_writers) - want.open_topics
            if want.fenced
            else frozenset()
        )
        # On the cluster already (a PENDING fence never reached it).
        already = {t for t, row in rows.items() if row.state in _ON_CLUSTER}
        decided = {t for t, row in rows.items() if row.reads_allowed}
        open_cluster = self.config.clusters[alias].allow_everyone_if_no_acl
        bare = {t for t in fenced - already if open_cluster and _bare(t, present)}
        companions = frozenset((decided & fenced) | bare)
        wanted = fence_entries(fenced, principal, companions) | want.guard | want.replicator_fence
        # What drkit may take away: fences of topics it ever recorded (with the companions it
        # decided on) and the guard / replicator-fence ACLs of the config's flows.
        mine = (
            fence_entries(set(rows) - fenced, principal, decided)
            | guard_entries_on(self.config, alias)
            | replicator_fence_entries(self.config, alias)
        )
        # A companion kept for a fenced topic stays; one of a lifted topic goes with its fence.
        delete = (mine & present) - wanted
        lifted = frozenset(
            t
            for t in set(rows) - fenced
            if deny_write(t, principal) in present or rows[t].state in FENCED_STATES
        )
        return _Plan(
            alias, admin, want, fenced, companions, wanted - present, delete,
            frozenset(fenced - already), lifted, list(want.notes),
        )  # fmt: skip

    def _settle(self, plan: _Plan, run_id: int | None, timeout_s: float | None) -> ClusterOutcome:
        """Read the ACLs back until a broker shows the change; then record the fence rows."""
        deadline = self.clock() + (timeout_s if timeout_s is not None else SETTLE_S)
        while plan.create or plan.delete:
            present = plan.admin.acl_entries(timeout_s)
            if plan.create <= present and not plan.delete & present:
                break
            if self.clock() >= deadline:
                raise RetriableKafkaError(
                    f"{plan.cluster}: the protections' ACL changes are not visible after "
                    f"{timeout_s if timeout_s is not None else SETTLE_S:g}s"
                )
            self.sleep(0.1)
        if plan.fenced:
            self.fences.record(
                plan.cluster, plan.fenced, FenceState.APPLIED, run_id, plan.companions
            )
        if plan.lifted:
            self.fences.record(plan.cluster, plan.lifted, FenceState.LIFTED, None)
        return ClusterOutcome(
            plan.cluster, True, tuple(sorted(plan.fenced)), tuple(sorted(plan.newly_fenced)),
            tuple(sorted(plan.lifted)), len(plan.create), len(plan.delete), None,
            tuple(plan.notes),
        )  # fmt: skip

    def _away_outcome(
        self,
        alias: str,
        want: ClusterProtections,
        known: Iterable[str],
        rows: Mapping[str, FenceRow],
    ) -> ClusterOutcome:
        """A cluster that does not answer: a fence it should carry is PENDING (applied when it
        answers); pending rows of a fence it should no longer carry never applied: LIFTED."""
        if want.fenced:
            applied = {t for t, r in rows.items() if r.state in _ON_CLUSTER}
            topics = {t for t, r in rows.items() if r.state in FENCED_STATES} | set(known)
            pending = topics - applied
            if pending:
                self.fences.record(alias, pending, FenceState.PENDING, None)
            return ClusterOutcome(alias, False, tuple(sorted(topics)), notes=("does not answer",))
        pending = {t for t, r in rows.items() if r.state is FenceState.PENDING}
        if pending:
            self.fences.record(alias, pending, FenceState.LIFTED, None)
        return ClusterOutcome(alias, False, notes=("does not answer",))

    def _registry(self, alias: str, mode: str) -> str:
        """Put ``alias``'s registry in ``mode``; what it says now (or why not)."""
        try:
            registry = self.registries(alias)
            now = registry.mode()
            if now is None:
                return "unsupported (the registry has no modes)"
            if now == mode:
                return now
            self.confirm()
            return registry.set_mode(mode)
        except SchemaRegistryError as err:
            return f"not set: {err}"


def _bare(topic: str, present: Iterable[AclEntry]) -> bool:
    """Whether no ACL applies to ``topic`` (on an open cluster, everyone may use it)."""
    resource = Resource(ResourceType.TOPIC, topic)
    return not any(
        entry.resource.type is ResourceType.TOPIC and entry.resource.covers(resource)
        for entry in present
    )


def _run_of_fences(facts: ProtectionFacts) -> dict[str, int]:
    """Which run a cluster's fence is attributed to: the newest run that fences it."""
    out: dict[str, int] = {}
    for intent in facts.intents:
        if intent.source_fenced:
            out[intent.source] = intent.run_id
    return out
