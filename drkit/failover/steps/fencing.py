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

``abort_open_transactions`` fences drkit's own transactional ids on the target and names the
other producers with a transaction open on the flow's replicas (Kafka's kafka-transactions,
drkit.kafka.transactions_tool); it aborts theirs only when the run was given
``--abort-hanging-transactions`` (RunOptions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from drkit import clock
from drkit.config.model import ClusterConfig
from drkit.errors import KafkaError, LocalClusterError
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.model import Procedure
from drkit.failover.results import SourceFence, TransactionsSettled
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.flow_clients import fence_transactional_id
from drkit.kafka.ports import ClusterAdmin
from drkit.kafka.transactions_tool import (
    JavaTool,
    OpenTransaction,
    TransactionsPort,
    TransactionsTool,
    TransactionsToolError,
)
from drkit.records import TopicPartition
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
    read_committed consumers are not stuck behind it); name the other producers with a
    transaction open on the flow's replicas (Kafka's transactions tool) and - the run given
    ``--abort-hanging-transactions`` - abort their transactions."""
    return settle_transactions(ctx, timeout_s, transactions_tool, fence_transactional_id)


TransactionsTools = Callable[[StepContext, str], TransactionsPort]
Fencer = Callable[[ClusterEndpoint, str, float], None]


def transactions_tool(ctx: StepContext, cluster: str) -> TransactionsPort:
    """Kafka's transactions tool against ``cluster``, connecting as this run does."""
    return tool_for(ctx.config.clusters[cluster], cluster)


def tool_for(config: ClusterConfig, cluster: str = "") -> TransactionsTool:
    """Kafka's transactions tool against the cluster ``config`` describes: Kafka's jars as
    drkit.local.jars caches them - never fetched here (a failover does not wait for Maven; the
    failover commands fetch them before a run given --abort-hanging-transactions) -, the
    ``java`` of JAVA_HOME or PATH, the cluster's security as Java client settings (the Spark
    job's: drkit.accounting.spec)."""
    from drkit.accounting.spec import ALLOWED_OAUTH_URLS, spark_kafka_options
    from drkit.local.jars import bundle_dir, is_complete, java_executable

    jars = bundle_dir("kafka")
    if not is_complete("kafka"):
        raise TransactionsToolError(
            f"Kafka's jars are not in {jars} (the failover commands fetch them from Maven "
            "Central when given --abort-hanging-transactions, as 'drkit local up' does)"
        )
    try:
        java = java_executable()
    except LocalClusterError:
        raise TransactionsToolError("kafka-transactions needs Java 17+: 'java' not found") from None
    try:
        options = {k.removeprefix("kafka."): v for k, v in spark_kafka_options(config).items()}
    except OSError as err:  # a certificate or key file it reads
        raise TransactionsToolError(f"{cluster or 'the cluster'}'s TLS files: {err}") from None
    token_url = options.get("sasl.oauthbearer.token.endpoint.url")
    system = {ALLOWED_OAUTH_URLS: token_url} if token_url else {}
    return TransactionsTool(JavaTool(java, jars), config.bootstrap_servers, options, system)


def settle_transactions(
    ctx: StepContext, timeout_s: float | None, tools: TransactionsTools, fence: Fencer
) -> StepOutcome:
    """abort_open_transactions with its two edges given: ``tools`` (Kafka's transactions tool
    for a cluster) and ``fence`` (a transactional id's producers fenced, its transaction
    aborted).  A transaction of a producer whose transactional id is one of this flow's
    workers' is drkit's: fenced, never aborted by offset."""
    budget = _Deadline(timeout_s or 60.0)
    topology = ctx.topology
    target = ctx.target
    fenced: list[str] = []
    if ctx.flow.exactly_once:
        store = ProgressStore(ctx.endpoint(target), topology.progress_topic, missing_ok=True)
        try:
            workers = {p.worker for p in store.refresh().values() if p.worker}
        finally:
            store.close()
        workers |= {a.worker for a in ctx.control.acks(ctx.flow.name)}
        for worker in sorted(workers):
            transactional_id = topology.transactional_id(worker)
            ctx.confirm()
            fence(ctx.endpoint(target), transactional_id, timeout_s or 30.0)
            fenced.append(transactional_id)
    admin = ctx.admin(target)
    replicas = [topology.target_partition(tp) for tp in ctx.replicated_partitions()]
    existing = [tp for tp in replicas if tp.topic in admin.list_topics()]
    held = _behind_open_transactions(admin, existing)
    if not held:
        return StepOutcome.done(**TransactionsSettled(tuple(fenced), ()).to_detail())
    abort = ctx.options.abort_hanging_transactions
    try:
        tool = tools(ctx, target)
        transactions = named_open_transactions(tool, held, budget.left)
    except KafkaError as err:
        if abort:
            raise StepFailed(f"open transactions on {target} cannot be aborted: {err}") from err
        settled = TransactionsSettled(tuple(fenced), _named(held), unnamed_because=str(err))
        unnamed = (
            f"{len(held)} partition(s) of {target} are behind an open transaction "
            f"(read_committed consumers wait there): {', '.join(_named(held))}; its producers "
            f"are not named: {err}"
        )
        return StepOutcome.done(warning=unnamed, **settled.to_detail())
    own = topology.transactional_id("")
    missed = {t.transactional_id for t in transactions if t.transactional_id and _is_own(t, own)}
    for transactional_id in sorted(missed - set(fenced)):
        ctx.confirm()
        fence(ctx.endpoint(target), transactional_id, timeout_s or 30.0)
        fenced.append(transactional_id)
    others = tuple(t for t in transactions if not _is_own(t, own))
    aborted = tuple(_abort(ctx, tool, t, budget) for t in others) if abort else ()
    still = _named(_behind_open_transactions(admin, held))
    settled = TransactionsSettled(
        tuple(fenced), still, others, tuple(t for t in aborted if t is not None)
    )
    warning: str | None = None
    if others and not abort:
        warning = (
            f"{len(others)} transaction(s) of other producers are open on {target} "
            f"(read_committed consumers wait behind them): {'; '.join(map(str, others))} - "
            "left open: 'drkit failover --abort-hanging-transactions' (or kafka-transactions "
            "abort) aborts them"
        )
    elif still:
        warning = f"still behind an open transaction on {target}: {', '.join(still)}"
    extra = {"warning": warning} if warning else {}
    return StepOutcome.done(**extra, **settled.to_detail())


def named_open_transactions(
    tool: TransactionsPort, partitions: Sequence[TopicPartition], left: Callable[[], float]
) -> list[OpenTransaction]:
    """The transactions open on ``partitions``, each with its producer's transactional id where
    a coordinator knows it (``left``: the seconds still allowed, asked before each call)."""
    found = tool.open_transactions(partitions, left())
    names = tool.transactional_ids(left()) if found else {}
    return [t.named(names) for t in found]


def _is_own(transaction: OpenTransaction, prefix: str) -> bool:
    """Whether ``transaction``'s producer is one of the flow's workers (by transactional id)."""
    return (transaction.transactional_id or "").startswith(prefix)


def _abort(
    ctx: StepContext, tool: TransactionsPort, transaction: OpenTransaction, budget: _Deadline
) -> OpenTransaction | None:
    """Abort ``transaction`` (right after confirming the lease); None when it ended by itself
    meanwhile - its producer or coordinator ended it, or an earlier attempt of this step did."""
    allowed = ctx.confirm(budget.left())
    try:
        tool.abort(transaction, allowed if allowed is not None else budget.left())
    except KafkaError as err:
        again = tool.open_transactions([transaction.tp], budget.left())
        if any(
            (t.producer_id, t.start_offset) == (transaction.producer_id, transaction.start_offset)
            for t in again
        ):
            raise StepFailed(f"could not abort {transaction}: {err}") from err
        return None
    return transaction


def _behind_open_transactions(
    admin: ClusterAdmin, partitions: Sequence[TopicPartition]
) -> list[TopicPartition]:
    """The ``partitions`` whose last stable offset is below their end."""
    stable = admin.stable_offsets(partitions)
    ends = admin.list_offsets(partitions, "latest")
    return [tp for tp in partitions if stable.get(tp, 0) < ends.get(tp, 0)]


def _named(partitions: Iterable[TopicPartition]) -> tuple[str, ...]:
    return tuple(sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions))


class _Deadline:
    """What is left of the step's time (the tool refuses a call left too little)."""

    def __init__(self, seconds: float) -> None:
        self.until = clock.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.until - clock.monotonic())
