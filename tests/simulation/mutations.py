"""The fixes of issue 44's findings, each reverted in the smallest way that brings its bug
back - so the simulation can be shown to find it (tests/simulation/test_mutations.py).  And,
for the three-cluster world (issue 48), a two-cluster assumption that is right with two
clusters and wrong with three (:data:`THREE_DC_MUTATIONS`: found only with
``--topology three-dc``).

A mutation is applied with a ``setattr(target, name, value)`` (pytest's monkeypatch, or
:class:`Patched` for ``python -m tests.simulation --mutation NAME``) and names the invariant
that must catch it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from drkit import translation
from drkit.config.model import DrkitConfig
from drkit.failover import engine as engine_module
from drkit.failover import protections
from drkit.failover.model import Direction, Procedure
from drkit.failover.protections import ClusterProtections, ProtectionFacts, RunIntent

SetAttr = Callable[[Any, str, Any], None]


@dataclass(frozen=True)
class Mutation:
    name: str
    finding: str
    invariant: str  # the invariant that must report it
    apply: Callable[[SetAttr], None]


def _rollback_leaves_the_target_open(setattr: SetAttr) -> None:
    """Finding 1: a rolled-back move kept what its unfence_target opened (no inverse): the
    run's "target open" outlives its rollback, its "source fenced" does not."""
    original = RunIntent.of.__func__  # type: ignore[attr-defined]

    def of(cls: type[RunIntent], *args: Any) -> RunIntent | None:
        *head, state, direction, steps = args
        forward: RunIntent | None = original(cls, *head, state, Direction.FORWARD, steps)
        if direction is Direction.ROLLBACK and state.unfinished and forward is not None:
            return replace(forward, source_fenced=False, registry_on_target=False)
        found: RunIntent | None = original(cls, *args)
        return found

    setattr(RunIntent, "of", classmethod(of))


def _no_replicator_fence(setattr: SetAttr) -> None:
    """Finding 5: nothing keeps a stopped flow's replicator from writing into the new
    primary (a worker frozen past its silence window appends when it wakes)."""

    def none(*_args: object) -> tuple[frozenset[object], list[str]]:
        return frozenset(), []

    setattr(protections, "replicator_fence", none)


def _after_hooks_not_resumed(setattr: SetAttr) -> None:
    """Finding 6: an after-hook whose engine died once its step was recorded is lost (the
    resume skips the done step)."""
    setattr(engine_module, "hooks_pending", lambda _step: False)


def _registry_modes_by_the_step_only(setattr: SetAttr) -> None:
    """Finding 7: the registries' modes are set by sync_schemas and never set back - a rolled
    back move leaves the primary's registry READONLY."""
    original = protections.registry_primary

    def primary(config: DrkitConfig, facts: ProtectionFacts) -> str | None:
        moving = [i for i in facts.intents if i.registry_on_target]
        return original(config, facts) if moving else None

    setattr(protections, "registry_primary", primary)


def _pending_fences_whatever_the_pointer(setattr: SetAttr) -> None:
    """Finding 8: a fence a failover left pending is applied when its cluster answers, even
    when that cluster has become the primary since."""
    original = protections.desired

    def desired(config: DrkitConfig, facts: ProtectionFacts) -> dict[str, ClusterProtections]:
        wanted = original(config, facts)
        pending = PENDING.of(config)
        for intent in facts.intents:  # a move that opens it lifts the old fence, as before
            if intent.target_open:
                pending.discard(intent.target)
        return {
            alias: replace(p, fenced=True) if alias in pending else p for alias, p in wanted.items()
        }

    setattr(protections, "desired", desired)
    from drkit.failover import reconcile

    setattr(reconcile, "desired", desired)
    original_away = reconcile.Reconciler._away_outcome

    def away(self: Any, alias: str, *args: Any, **kwargs: Any) -> Any:
        outcome = original_away(self, alias, *args, **kwargs)
        if outcome.fenced:
            PENDING.of(self.config).add(alias)
        return outcome

    setattr(reconcile.Reconciler, "_away_outcome", away)
    # ... and nothing blocks an unplanned failover to a cluster an earlier failover fenced.
    original_blocker = engine_module.Engine._fenced_by_failover

    def not_for_failovers(self: Any, procedure: Procedure, target: str) -> tuple[Any, ...]:
        if procedure is Procedure.FAILOVER:
            return ()
        found: tuple[Any, ...] = original_blocker(self, procedure, target)
        return found

    setattr(engine_module.Engine, "_fenced_by_failover", not_for_failovers)


class _Pending:
    """The clusters the mutated maintenance still means to fence (finding 8's old rows), per
    schedule (each has its own config object; a schedule never sees another's)."""

    def __init__(self) -> None:
        self._by_config: dict[int, tuple[object, set[str]]] = {}

    def of(self, config: object) -> set[str]:
        held = self._by_config.get(id(config))
        if held is None or held[0] is not config:
            held = (config, set())
            self._by_config[id(config)] = held
        return held[1]

    def clear(self) -> None:
        self._by_config.clear()


PENDING = _Pending()


def _fence_the_planned_topics_only(setattr: SetAttr) -> None:
    """Finding 10: the fence, the fence point and confirm_fence cover the topics the plan
    listed - one created between the plan and the move is neither fenced nor drained."""
    from drkit.failover import context, reconcile

    original_topics = protections.fence_topics

    def planned_only(
        config: DrkitConfig, cluster: str, listed: Any, guarded_writers: Any = ()
    ) -> frozenset[str]:
        found = original_topics(config, cluster, listed, guarded_writers)
        return frozenset(t for t in found if not t.startswith("orders.n"))

    setattr(reconcile, "fence_topics", planned_only)

    def plan_partitions(self: Any, timeout_s: float | None = None) -> list[Any]:
        return list(self.replicated_partitions())

    setattr(context.StepContext, "source_partitions_now", plan_partitions)


def _lapsed_lease_floored(setattr: SetAttr) -> None:
    """Found by the simulation (seed 101167, not one of the issue's list): a process frozen
    inside its lease confirmation, after the store write, woke past the lease and got a fresh
    0.1 s budget (a floor) - so it applied one stale fence after another engine took over."""
    from drkit import clock as drkit_clock
    from drkit.clock import Budget
    from drkit.failover import context, lease, reconcile

    original = lease.request_budget

    def floored(confirmed: object, at_most: float | None, clock: Any = None) -> float | None:
        if isinstance(confirmed, lease.Lease):
            now = (clock or drkit_clock.monotonic)()
            left = max(0.1, confirmed.valid_for(now))
            return Budget(left if at_most is None else min(left, at_most), now + left)
        return (
            original(confirmed, at_most) if clock is None else original(confirmed, at_most, clock)
        )

    for module in (lease, reconcile, context):
        setattr(module, "request_budget", floored)


def _no_answer_without_a_verified_run(setattr: SetAttr) -> None:
    """Found in CI (fixed by 74f55c9, not one of the issue's list): a partition whose every
    offset sync failed verification - the store lost the key the workers signed with - had no
    translation, so a failover committed nothing there and its consumers started at the
    replica's end (``auto.offset.reset=latest``), past records they had not read."""
    original = translation.translate

    def translate(
        source_offset: int,
        mapping: translation.PartitionMapping,
        bounds: translation.TargetBounds,
        source_end: int | None = None,
        source_start: int | None = None,
    ) -> translation.TranslationResult:
        empty = mapping.replicated_end is not None and bounds.end == bounds.start
        if mapping.doubt and not mapping.table.src and mapping.adopted is None and not empty:
            return translation.CannotTranslate(mapping.source, source_offset, "no mapping yet")
        return original(source_offset, mapping, bounds, source_end, source_start)

    setattr(translation, "translate", translate)


def _replicator_without_the_secret(setattr: SetAttr) -> None:
    """signing.secret (e33cee1) reverted in the replicator alone: its flow keys (FlowKeys,
    StoredKey) are the store's whatever the config says, while the failover derives each key
    from the secret (``keys_of``) - it rejects every offset sync the workers signed."""
    from drkit.store import flow_keys

    original = flow_keys.StoredKey.__init__

    def init(self: Any, store_of: Any, flow: str, secret: bytes | None = None) -> None:
        original(self, store_of, flow, None)

    setattr(flow_keys.StoredKey, "__init__", init)


def _guard_the_primarys_flows_only(setattr: SetAttr) -> None:
    """Two clusters' assumption: the replicas to guard are those of the flows out of the
    primary (with two clusters, every flow into a standby is one).  With three, dc2 the
    primary, dc3's replicas of dc1 -> dc3 would be left writable."""
    from drkit.access import standby

    original = standby.guarded_flows

    def guarded(config: DrkitConfig, primary: str | None) -> tuple[Any, ...]:
        found = original(config, primary)
        return tuple(flow for flow in found if primary is None or flow.source == primary)

    setattr(protections, "guarded_flows", guarded)


THREE_DC_MUTATIONS = frozenset({"guard-the-primarys-flows-only"})

MUTATIONS = {
    m.name: m
    for m in (
        Mutation("rollback-leaves-target-open", "1", "one writable primary",
                 _rollback_leaves_the_target_open),
        Mutation("no-replicator-fence", "5", "no zombie write", _no_replicator_fence),
        Mutation("after-hooks-not-resumed", "6", "hooks run", _after_hooks_not_resumed),
        Mutation("registry-modes-by-the-step", "7", "primary writable",
                 _registry_modes_by_the_step_only),
        Mutation("pending-fences-whatever-the-pointer", "8", "primary writable",
                 _pending_fences_whatever_the_pointer),
        Mutation("fence-the-planned-topics", "10", "one writable primary",
                 _fence_the_planned_topics_only),
        Mutation("lapsed-lease-floored", "simulation seed 101167", "audit trail",
                 _lapsed_lease_floored),
        Mutation("no-answer-without-a-verified-run", "74f55c9", "a moved group skips nothing",
                 _no_answer_without_a_verified_run),
        Mutation("replicator-without-the-secret", "e33cee1", "a signing secret keeps the keys",
                 _replicator_without_the_secret),
        Mutation("guard-the-primarys-flows-only", "issue 48", "every standby protected",
                 _guard_the_primarys_flows_only),
    )
}  # fmt: skip


class Patched:
    """A ``setattr`` that remembers what it replaced and puts it back on exit."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def __call__(self, target: Any, name: str, value: Any) -> None:
        self._undo.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def undo(self) -> None:
        for target, name, value in reversed(self._undo):
            setattr(target, name, value)
        self._undo.clear()


@contextmanager
def mutated(name: str) -> Iterator[Mutation]:
    patched = Patched()
    mutation = MUTATIONS[name]
    mutation.apply(patched)
    PENDING.clear()
    try:
        yield mutation
    finally:
        patched.undo()
        PENDING.clear()
