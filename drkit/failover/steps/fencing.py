"""Steps that fence: the old primary's writes, and drkit's own transactions on the target.

Fencing is the weakest point of Kafka DR (vendors say "stop your producers"); here it is an
explicit, verified step: DENY WRITE ACLs on every replicated topic of the old primary, checked
by reading the ACLs back.  When the old primary does not answer (an unplanned failover) the
fence is recorded as pending and applied as soon as it answers again.

Companion ALLOWs are added only where a topic without ACLs is open to everyone
(the cluster's ``allow_everyone_if_no_acl``, mirroring the brokers' setting): on a
deny-by-default cluster the DENY alone stops the writes and readers keep exactly the ACLs they
had.

Half-applied fences: the intent (state APPLYING, with the topics that get companion ALLOWs) is
recorded *before* any ACL is created, so a fence that created its ACLs and then failed - e.g.
timed out waiting to see them - is known to the store, and a second attempt keeps the
companions the first one decided (the topics no longer look bare once fenced).  Lifting a fence
also looks at the cluster: every DENY WRITE ACL of the fence principal on the run's topics goes.
"""

from __future__ import annotations

from collections.abc import Iterable

from drkit import failpoints
from drkit.config.model import ClusterConfig
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.fences import FenceState
from drkit.failover.results import SourceFence
from drkit.kafka.flow_clients import fence_transactional_id
from drkit.kafka.ports import ClusterAdmin
from drkit.replication.progress import ProgressStore


def fence_companions(
    admin: ClusterAdmin,
    cluster: ClusterConfig,
    topics: set[str],
    decided: set[str],
    timeout_s: float | None = None,
) -> set[str]:
    """The topics of ``topics`` whose fence also gets companion ALLOW READ/DESCRIBE ACLs: those
    without any ACL now - only on a cluster where such topics are open to everyone
    (``allow_everyone_if_no_acl``; on a deny-by-default cluster an ALLOW for ``User:*`` would
    widen reads) - and those an earlier, half-applied attempt already ``decided`` on (once
    fenced they no longer look bare).  Callers record the answer before creating any ACL."""
    bare = topics - admin.topics_with_acls(timeout_s) if cluster.allow_everyone_if_no_acl else set()
    return bare | (decided & topics)


def fence_source(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    topics = ctx.replicated_topics()
    policy = ctx.config.failover
    if not policy.fence_with_acls:
        return StepOutcome.skipped(
            "failover.fence_with_acls is false: fence with a 'before' hook on this step",
            topics=topics,
        )
    if not ctx.reachable(ctx.source):
        ctx.fences.record(ctx.source, topics, FenceState.PENDING, ctx.run.id)
        note = f"{ctx.source} is unreachable: fence pending, applied when it answers"
        return StepOutcome.done(**SourceFence(tuple(topics), True, note=note).to_detail())
    admin = ctx.admin(ctx.source)
    decided = ctx.fences.reads_allowed(ctx.source) & ctx.fences.fenced(ctx.source)
    cluster = ctx.config.clusters[ctx.source]
    companions = fence_companions(admin, cluster, set(topics), decided, timeout_s)
    ctx.fences.record(ctx.source, topics, FenceState.APPLYING, ctx.run.id, companions)
    ctx.confirm()
    admin.deny_writes(topics, policy.fence_principal, timeout_s=timeout_s, companions=companions)
    failpoints.reach("fence_source.after_acls")
    ctx.fences.record(ctx.source, topics, FenceState.APPLIED, ctx.run.id, companions)
    denied = admin.write_denied(policy.fence_principal, timeout_s)
    missing = sorted(set(topics) - denied)
    if missing:
        raise StepFailed(f"the fence did not take on {ctx.source}: {', '.join(missing)}")
    fence = SourceFence(tuple(topics), False, policy.fence_principal)
    return StepOutcome.done(**fence.to_detail())


def _lift(
    ctx: StepContext, cluster: str, timeout_s: float | None, also: Iterable[str] = ()
) -> StepOutcome:
    """Lift drkit's fence on ``cluster``: every topic the store knows fenced (or being fenced),
    and those of ``also`` that carry a DENY WRITE ACL of the fence principal there now."""
    principal = ctx.config.failover.fence_principal
    fenced = ctx.fences.fenced(cluster)
    wanted = set(also)
    if not fenced and not wanted:
        return StepOutcome.skipped(f"nothing fenced on {cluster}")
    if not ctx.reachable(cluster):
        raise StepFailed(f"{cluster} does not answer: its fence cannot be lifted")
    admin = ctx.admin(cluster)
    on_cluster = admin.write_denied(principal, timeout_s) & wanted if wanted else set()
    lifting = fenced | on_cluster
    if not lifting:
        return StepOutcome.skipped(f"nothing fenced on {cluster}")
    ctx.confirm()
    admin.allow_writes(
        lifting, principal, ctx.fences.reads_allowed(cluster) & lifting, timeout_s=timeout_s
    )
    ctx.fences.record(cluster, lifting, FenceState.LIFTED, ctx.run.id)
    unrecorded = sorted(on_cluster - fenced)  # a half-applied fence the store missed
    extra = {"found_on_cluster_only": unrecorded} if unrecorded else {}
    return StepOutcome.done(cluster=cluster, topics=sorted(lifting), **extra)


def unfence_source(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Rollback of fence_source: the source takes writes again - judged from the store and
    from the cluster (a fence that half-applied may have left ACLs the store does not list)."""
    return _lift(ctx, ctx.source, timeout_s, also=ctx.replicated_topics())


def unfence_target(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """The new primary takes writes: after a failover (failback) or an earlier switchover
    fenced it, its fence is lifted before the pointer moves there."""
    return _lift(ctx, ctx.target, timeout_s)


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
