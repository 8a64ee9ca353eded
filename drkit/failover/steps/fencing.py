"""Steps that fence: the old primary's writes, and drkit's own transactions on the target.

Fencing is the weakest point of Kafka DR (vendors say "stop your producers"); here it is an
explicit, verified step.  Which topics of which cluster refuse application writes is desired
state (drkit.failover.protections): this step's start row is the run's intent "the source is
fenced", and the step reconciles the source to it (drkit.failover.reconcile) - DENY WRITE ACLs
on every topic the flows replicate from it (those created since the plan too), read back until
a broker shows them.  When the source does not answer (an unplanned failover) the fence is
recorded PENDING and applied when it answers again (the monitor reconciles every tick).

The inverse is not a step's memory but the same reconciliation: a rollback voids the run's
intent and ``unfence_source`` reconciles - the source opens, and a target this run opened is
fenced again (restrictions before relaxations).  ``unfence_target`` records "the target takes
writes" the same way.
"""

from __future__ import annotations

from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import Procedure
from drkit.failover.results import SourceFence
from drkit.kafka.flow_clients import fence_transactional_id
from drkit.replication.progress import ProgressStore


def fence_source(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    topics = ctx.replicated_topics()
    policy = ctx.config.failover
    if not policy.fence_with_acls:
        return StepOutcome.skipped(
            "failover.fence_with_acls is false: fence with a 'before' hook on this step",
            topics=topics,
        )
    if not ctx.reachable(ctx.source):
        if ctx.procedure is not Procedure.FAILOVER:
            # A planned move drains, translates exactly and confirms on the source: without
            # its fence it would open the target beside a source that takes writes.
            raise StepFailed(
                f"{ctx.source} does not answer: a planned {ctx.procedure.value} cannot fence it "
                "(use 'drkit failover' for an unplanned move)"
            )
        ctx.reconcile([ctx.source], known_topics={ctx.source: topics}, timeout_s=timeout_s)
        note = f"{ctx.source} is unreachable: fence pending, applied when it answers"
        return StepOutcome.done(**SourceFence(tuple(topics), True, note=note).to_detail())
    report = ctx.reconcile([ctx.source], strict=[ctx.source], timeout_s=timeout_s)
    fenced = set(report.clusters[ctx.source].fenced)
    existing = set(ctx.admin(ctx.source).list_topics(timeout_s))
    missing = sorted((set(topics) & existing) - fenced)
    if missing:
        raise StepFailed(f"the fence did not take on {ctx.source}: {', '.join(missing)}")
    fence = SourceFence(tuple(sorted(fenced | set(topics))), False, policy.fence_principal)
    return StepOutcome.done(**fence.to_detail())


def _open(
    ctx: StepContext, cluster: str, timeout_s: float | None, skip_if_unchanged: bool
) -> StepOutcome:
    """Reconcile the run's clusters now that its intent changed; done with what opened on
    ``cluster`` - skipped when nothing changed there and ``skip_if_unchanged`` - and a
    StepFailed when it does not answer."""
    if not ctx.reachable(cluster):
        raise StepFailed(f"{cluster} does not answer: its fence cannot be lifted")
    clusters = sorted({ctx.source, ctx.target})
    report = ctx.reconcile(clusters, strict=[cluster], timeout_s=timeout_s)
    outcome = report.clusters[cluster]
    if skip_if_unchanged and not outcome.lifted and not outcome.changed:
        return StepOutcome.skipped(f"nothing fenced on {cluster}")
    return StepOutcome.done(
        cluster=cluster, topics=list(outcome.lifted), protections=report.to_json()
    )


def unfence_source(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Rollback of fence_source: the run is rolling back, so it wants nothing any more - the
    source (the pointer's) takes writes again and whatever this run opened is closed again,
    judged from what the clusters hold (a fence that half-applied included).  Done whenever
    the source is open afterwards - the rollback's first reconcile may have opened it already
    (``topics`` lists what this step itself lifted)."""
    return _open(ctx, ctx.source, timeout_s, skip_if_unchanged=False)


def unfence_target(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """The new primary takes writes: after a failover (failback) or an earlier switchover
    fenced it, its fence is lifted before the pointer moves there."""
    return _open(ctx, ctx.target, timeout_s, skip_if_unchanged=True)


def abort_open_transactions(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Fence drkit's own transactional ids on the target (aborting what they left open, so
    read_committed consumers are not stuck behind it); report other open transactions."""
    topology = ctx.topology
    fenced: list[str] = []
    if ctx.flow.exactly_once:
        store = ProgressStore(ctx.endpoint(ctx.target), topology.progress_topic, missing_ok=True)
        try:
            workers = {p.worker for p in store.refresh().values() if p.worker}
        finally:
            store.close()
        workers |= {a.worker for a in ctx.control.acks(ctx.flow.name)}
        for worker in sorted(workers):
            transactional_id = topology.transactional_id(worker)
            ctx.confirm()
            fence_transactional_id(ctx.endpoint(ctx.target), transactional_id, timeout_s or 30.0)
            fenced.append(transactional_id)
    admin = ctx.admin(ctx.target)
    replicas = [topology.target_partition(tp) for tp in ctx.replicated_partitions()]
    existing = [tp for tp in replicas if tp.topic in admin.list_topics()]
    stable = admin.stable_offsets(existing)
    ends = admin.list_offsets(existing, "latest")
    still_open = sorted(
        f"{tp.topic}[{tp.partition}]" for tp in existing if stable.get(tp, 0) < ends.get(tp, 0)
    )
    return StepOutcome.done(fenced_transactional_ids=fenced, open_transactions=still_open)
