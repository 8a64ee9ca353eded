"""Steps that steer replication: stop, restart, reverse, fence point, drain, replicate back.

Workers obey flow directives (drkit.control); these steps write a directive and wait for the
workers' acknowledgements.  A worker that stays silent is waited for until
``failover.worker_silence_s`` has passed since it was last heard from - by then it has stopped
writing on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass

from drkit import clock
from drkit.config.model import FlowConfig
from drkit.control import ControlRepository, DesiredState, FlowDirective
from drkit.control.channel import ChannelFactory, ChannelPort
from drkit.control.model import (
    LIVE_WITHIN_S,
    failed_workers,
    pending_workers,
    running_workers,
)
from drkit.errors import KafkaError
from drkit.failover.context import (
    ProgressCallback,
    ProgressReading,
    StepContext,
    StepFailed,
    StepOutcome,
    deadline_loop,
)
from drkit.failover.model import StepName
from drkit.failover.results import FencePoint, partition_of
from drkit.failover.runs import WARNING_KEY
from drkit.lag import count_visible
from drkit.records import TopicPartition
from drkit.topology.flow import FlowTopology


@dataclass(frozen=True)
class FlowSteering:
    """What writing a flow's directive and waiting for its workers needs, apart from a run:
    the store's directives and acks (``control``, guarded by the writer's lease), the flows'
    control channels, the silence window after which a silent worker holds itself back,
    ``confirm`` (called right before publishing: the writer's lease is surely still held) and
    ``progress`` (what is being waited for).  The failover steps build it from their context
    (:func:`steering`); ``drkit flows repoint`` from the failover lease it holds."""

    control: ControlRepository
    channels: ChannelFactory
    silence_s: float | None
    confirm: Callable[[], object]
    progress: ProgressCallback


def steering(ctx: StepContext) -> FlowSteering:
    """A run's :class:`FlowSteering`: its guarded control, channels, silence window, lease."""
    return FlowSteering(
        ctx.control, ctx.channel, ctx.config.failover.worker_silence_s, ctx.confirm, ctx.progress
    )


def _directive(
    ctx: StepContext, flow: FlowConfig, desired: DesiredState
) -> tuple[FlowDirective, dict[str, object]]:
    """Write the directive once per run (a resumed step reuses it), then publish it on the
    flow's control channel; returns it and what publishing said."""
    current = ctx.control.directive(flow.name)
    if not (current.desired is desired and current.run_id == ctx.run.id):
        current = ctx.control.set(
            flow.name, desired, f"{ctx.procedure.value} run {ctx.run.id}", ctx.run.id
        )
    return current, publish_directive(steering(ctx), flow, current)


def publish_directive(
    steer: FlowSteering, flow: FlowConfig, directive: FlowDirective
) -> dict[str, object]:
    """Publish ``directive`` on ``flow``'s control channel (its target), where workers that
    cannot reach the store read it.  Required for a directive that holds a flow back
    (StepFailed when it cannot be published); one that lets it run may fail to publish (its
    target may be the dead old primary): store-silent workers then keep their older, stricter
    directive."""
    steer.confirm()
    channel = steer.channels(flow)
    try:
        channel.publish(directive)
    except KafkaError as err:
        if directive.desired is DesiredState.RUNNING:
            return {"control_channel": f"not published ({flow.target}): {err}"}
        raise StepFailed(
            f"could not publish {directive.desired.value} for {flow.name} on its control "
            f"channel on {flow.target} ({err}): workers cut off from the state store would "
            "not see it"
        ) from None
    finally:
        channel.close()
    return {"control_channel": "published"}


CHANNEL_WATCH_S = 2.5  # a worker alive on the channel acks there every poll (0.5 s)


def wait_for_workers(
    ctx: StepContext,
    flow: FlowConfig,
    directive: FlowDirective,
    timeout_s: float | None,
    strict: bool,
) -> dict[str, object]:
    """:func:`await_workers` for a run's step."""
    return await_workers(steering(ctx), flow, directive, timeout_s, strict)


def await_workers(
    steer: FlowSteering,
    flow: FlowConfig,
    directive: FlowDirective,
    timeout_s: float | None,
    strict: bool,
) -> dict[str, object]:
    """Wait until every worker of the flow acted on ``directive``.

    Live workers (acking in the store) are waited for up to ``timeout_s``.  A worker silent in
    the store may be cut off from it and following the flow's control channel: one that acked
    ``directive`` there is done; one whose channel acks keep coming is live and waited for like
    the others; one silent on both is waited for until the silence window has passed since its
    last store ack - by then it has stopped writing on its own.  ``strict``: a live worker that
    never acknowledges fails the step (StepFailed; else it is reported).
    """
    silence = steer.silence_s
    started = clock.monotonic()
    more = deadline_loop(timeout_s, 0.2)
    behind: list[str] = []
    silent: list[str] = []
    watch = _ChannelWatch(steer.channels, flow, directive)
    try:
        while more():
            acks = steer.control.acks(directive.flow)
            behind, silent = pending_workers(
                acks, directive.epoch, directive.desired, LIVE_WITHIN_S
            )
            done, moving, watching = watch.look(silent)
            silent = [w for w in silent if w not in done]
            behind += [w for w in silent if w in moving]
            waiting_for_silent = [
                a.worker
                for a in acks
                if a.worker in silent
                and a.worker not in moving
                and (silence is None or a.age_s < silence or watching)
            ]
            if not behind and not waiting_for_silent:
                break
            steer.progress(
                f"waiting for {len(behind)} worker(s) of {directive.flow} to acknowledge "
                f"{directive.desired.value}, {len(waiting_for_silent)} silent",
                None,
            )
    finally:
        watch.close()
    detail: dict[str, object] = {
        "flow": directive.flow,
        "desired": directive.desired.value,
        "epoch": directive.epoch,
        "waited_s": round(clock.monotonic() - started, 2),
        "acknowledged": sorted(
            {
                a.worker
                for a in steer.control.acks(directive.flow)
                if a.epoch >= directive.epoch and a.state is directive.desired and not a.failure
            }
            | watch.acknowledged
        ),
        "silent": sorted(silent),
    }
    if watch.acknowledged:
        detail["acknowledged_on_channel"] = sorted(watch.acknowledged)
    if behind:
        if strict:
            raise StepFailed(
                f"workers {', '.join(sorted(behind))} of {directive.flow} did not acknowledge "
                f"{directive.desired.value} within {timeout_s}s"
            )
        detail["not_acknowledged"] = sorted(behind)
    if silent and silence is None:
        detail[WARNING_KEY] = (
            "silent workers cannot be known to have stopped (failover.worker_silence_s is null)"
        )
    return detail


def unproven_silent(steer: FlowSteering, flow: FlowConfig, detail: dict[str, object]) -> list[str]:
    """The workers :func:`await_workers` left ``silent`` (in ``detail``) whose silence window
    (``steer.silence_s``) has not passed since their last store ack: they may still copy.  A
    hold that must be *proven* before records are written into the flow's target (the
    re-point's, :mod:`drkit.failover.steps.standbys`) counts them as not held."""
    listed = detail["silent"]
    silent = {str(w) for w in listed} if isinstance(listed, list) else set()
    silence = steer.silence_s
    return sorted(
        a.worker
        for a in steer.control.acks(flow.name)
        if a.worker in silent and silence is not None and a.age_s < silence
    )


class _ChannelWatch:
    """The control channel as seen while waiting for store-silent workers: who acked the
    directive there, whose acks keep coming (alive), and whether we have watched long enough
    to tell (CHANNEL_WATCH_S).  Read only when some worker is silent; an unreadable channel
    tells nothing (the store's silence rule applies alone)."""

    def __init__(
        self, channels: ChannelFactory, flow: FlowConfig, directive: FlowDirective
    ) -> None:
        self.channels, self.flow, self.directive = channels, flow, directive
        self.acknowledged: set[str] = set()
        self._channel: ChannelPort | None = None
        self._first: dict[str, int] | None = None
        self._since = 0.0

    def look(self, silent: list[str]) -> tuple[set[str], set[str], bool]:
        """(acked the directive on the channel, alive on the channel, still watching)."""
        if not silent:
            return set(), set(), False
        if self._channel is None:
            self._channel = self.channels(self.flow)
        try:
            view = self._channel.read()
        except KafkaError:
            return set(), set(), False
        if self._first is None:
            self._first = {w: a.offset for w, a in view.acks.items()}
            self._since = clock.monotonic()
        done = {
            w
            for w in silent
            if (a := view.acks.get(w)) is not None
            and a.epoch >= self.directive.epoch
            and a.state is self.directive.desired
        }
        self.acknowledged |= done
        moving = {
            w for w in silent if w in view.acks and view.acks[w].offset > self._first.get(w, -1)
        }
        return done, moving, clock.monotonic() - self._since < CHANNEL_WATCH_S

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()


def stop_replication(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    directive, published = _directive(ctx, ctx.flow, DesiredState.STOPPED)
    detail = wait_for_workers(ctx, ctx.flow, directive, timeout_s, strict=True)
    return StepOutcome.done(**detail, **published)


def restart_replication(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Rollback of stop_replication: the flow runs again - proven by the workers.

    Every live worker must acknowledge RUNNING, and at least one must when the flow has
    workers at all (workers idle on STOPPED, so they are there to answer); a flow no worker
    ever reported for is only set RUNNING (nothing to prove it with)."""
    directive, published = _directive(ctx, ctx.flow, DesiredState.RUNNING)
    detail = wait_for_workers(ctx, ctx.flow, directive, timeout_s, strict=True)
    if ctx.control.acks(ctx.flow.name) and not detail["acknowledged"]:
        raise StepFailed(
            f"no worker of {ctx.flow.name} acknowledged RUNNING within {timeout_s}s: replication "
            f"is not running again (start 'drkit replicate --flow {ctx.flow.name}', then resume "
            "the rollback)"
        )
    if not detail["acknowledged"]:
        detail["note"] = f"no worker ever reported for {ctx.flow.name}: set RUNNING, unproven"
    return StepOutcome.done(**detail, **published)


def start_reverse_flow(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Set the reverse flow RUNNING and prove it: done and ``confirmed`` once a live worker
    acknowledged RUNNING at the directive's epoch (its data path is in its loop, following the
    directive).  Unconfirmed - no worker acknowledged within ``timeout_s``, every worker's flow
    ended on an error, or the old primary (the reverse flow's target) does not answer - the step
    is still done (the pointer has moved; nothing to undo) but says so in ``warning``, which the
    run's result and text carry (drkit.failover.engine)."""
    reverse = ctx.reverse_flow
    if reverse is None:
        return StepOutcome.skipped(
            f"no flow {ctx.flow.target}->{ctx.flow.source} in the config: nothing replicates "
            f"back to {ctx.flow.source}"
        )
    directive, published = _directive(ctx, reverse, DesiredState.RUNNING)
    started = clock.monotonic()
    detail = wait_for_workers(ctx, reverse, directive, timeout_s, strict=False)
    returning = ctx.reachable(reverse.target)
    running: list[str] = running_workers(ctx.control.acks(reverse.name), directive.epoch)
    if not running and returning:
        # A worker may still be starting (it acks once its data path follows the directive).
        left = None if timeout_s is None else max(0.0, timeout_s - (clock.monotonic() - started))
        running = _wait_for_a_runner(ctx, reverse, directive, left)
    failed = failed_workers(ctx.control.acks(reverse.name))
    detail.update(confirmed=bool(running), running=running)
    if failed:
        detail["failed"] = failed
    if not running:
        detail[WARNING_KEY] = _not_confirmed(reverse, timeout_s, returning, failed)
    return StepOutcome.done(**detail, **published)


def _wait_for_a_runner(
    ctx: StepContext, flow: FlowConfig, directive: FlowDirective, timeout_s: float | None
) -> list[str]:
    """Wait up to ``timeout_s`` for a live worker to acknowledge RUNNING at ``directive``'s
    epoch; the workers that did (none at the deadline, or once every worker's flow failed)."""
    more = deadline_loop(timeout_s, 0.25)
    while more():
        acks = ctx.control.acks(flow.name)
        live = [a for a in acks if a.age_s <= LIVE_WITHIN_S]
        running = running_workers(live, directive.epoch)
        if running:
            return running
        if acks and all(a.failure is not None for a in acks):
            return []  # every worker that ever reported has ended: nobody will answer
        ctx.progress(f"waiting for a worker to run {flow.name}", None)
    return []


def _not_confirmed(
    flow: FlowConfig, timeout_s: float | None, returning: bool, failed: dict[str, str]
) -> str:
    """What the run says when the reverse flow is not proven running, and what to check."""
    if failed:
        why = "its workers' flow ended: " + "; ".join(f"{w}: {e}" for w, e in failed.items())
    elif not returning:
        why = f"{flow.target} does not answer (it starts once {flow.target} returns)"
    else:
        why = f"no worker acknowledged RUNNING within {timeout_s:g}s" if timeout_s else "no worker"
    return (
        f"reverse flow {flow.name} is NOT confirmed running - {why}. {flow.source} has no "
        f"standby until it runs: check 'drkit flows list', and start or restart 'drkit "
        f"replicate --flow {flow.name}'"
    )


# -- fence point and drain ----------------------------------------------------------------------


def _ends(ctx: StepContext, alias: str, partitions: list[TopicPartition]) -> dict[str, int]:
    ends = ctx.admin(alias).list_offsets(partitions, "latest")
    return {f"{tp.topic}:{tp.partition}": end for tp, end in sorted(ends.items())}


def record_fence_point(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """The source's end offsets once two reads a second apart agree (the fence holds) - of
    every partition the flow selects there now, topics created since the plan included."""
    partitions = ctx.source_partitions_now(timeout_s)
    more = deadline_loop(timeout_s, 1.0)
    previous: dict[str, int] | None = None
    while more():
        now = _ends(ctx, ctx.source, partitions)
        if now == previous:
            return StepOutcome.done(**FencePoint(now).to_detail())
        previous = now
    raise StepFailed(
        f"{ctx.source}'s end offsets kept moving for {timeout_s}s after the fence: writes are "
        "still accepted (is the fence effective for every producer?)"
    )


def _progress(store: ProgressReading) -> dict[str, int]:
    return {f"{tp.topic}:{tp.partition}": p.next_offset for tp, p in store.refresh().items()}


def _wait_caught_up(
    ctx: StepContext,
    topology: FlowTopology,
    goal: dict[str, int],
    timeout_s: float | None,
    waiting_on: Callable[[dict[str, int]], str] | None = None,
) -> dict[str, object]:
    """Wait until the flow's progress reaches ``goal`` on every partition.

    ``waiting_on`` (given the partitions still behind and their progress) says what holds
    them, for the progress line and the failure; "" when nothing in particular.
    """
    if not goal:
        return {"waited_s": 0.0, "partitions": 0}  # nothing to copy: no progress to read
    total = sum(goal.values())
    started = clock.monotonic()
    more = deadline_loop(timeout_s, 0.25)
    behind: dict[str, int] = dict(goal)
    held = ""
    # One reader for the whole wait: each poll reads only the progress records appended since.
    store = ctx.progress_of(topology)
    with closing(store):
        while more():
            done = _progress(store)
            behind = {
                key: end - done.get(key, 0) for key, end in goal.items() if done.get(key, 0) < end
            }
            remaining = sum(behind.values())
            if behind and waiting_on is not None:
                held = waiting_on({key: done.get(key, 0) for key in behind})
            ctx.progress(
                f"{topology.name}: {remaining} records to go on {len(behind)} partition(s){held}",
                1.0 - remaining / total if total else 1.0,
            )
            if not behind:
                return {"waited_s": round(clock.monotonic() - started, 2), "partitions": len(goal)}
    raise StepFailed(
        f"{topology.name} did not reach the goal within {timeout_s:g}s: "
        f"{sum(behind.values())} records behind on {len(behind)} partition(s){held}"
    )


def drain(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Wait until replication has copied everything up to the fence point.

    A transaction a source producer left open below the fence point cannot be copied until it
    ends (the replicator reads committed data only): its producer commits or aborts it, or its
    coordinator aborts it after the producer's ``transaction.timeout.ms``.  The drain says so
    while it waits and records the partitions that held one (``open_transactions``): that part
    of the applications' write pause is the producer's, not the copy's.
    """
    goal = dict(_fence_point(ctx).ends)  # {} when the flow has no partitions yet
    held: set[str] = set()
    asked_at = 0.0

    def waiting_on(progress: dict[str, int]) -> str:
        nonlocal asked_at
        if clock.monotonic() - asked_at >= 1.0:  # one read of the source a second at most
            asked_at = clock.monotonic()
            held.update(_held_by_open_transactions(ctx, progress, goal))
        stuck = held & set(progress)
        if not stuck:
            return ""
        return f"; {len(stuck)} held by a transaction still open on {ctx.source}"

    caught = _wait_caught_up(ctx, ctx.topology, goal, timeout_s, waiting_on)
    return StepOutcome.done(**caught, open_transactions=sorted(held))


def _held_by_open_transactions(
    ctx: StepContext, progress: dict[str, int], goal: dict[str, int]
) -> set[str]:
    """Partitions (``topic:partition``) whose copy reached the source's last stable offset
    while that offset is still below the goal: what is left is an open transaction's."""
    partitions = {key: partition_of(key) for key in progress}
    try:
        stable = ctx.admin(ctx.source).stable_offsets(partitions.values(), timeout_s=5.0)
    except KafkaError:
        return set()  # only an explanation: the wait itself goes on
    return {
        key
        for key, tp in partitions.items()
        if tp in stable and progress[key] >= stable[tp] and stable[tp] < goal[key]
    }


def _fence_point(ctx: StepContext) -> FencePoint:
    ctx.detail(StepName.RECORD_FENCE_POINT)  # refresh the run
    point = FencePoint.of(ctx.run)
    if point is None:
        raise StepFailed("no fence point recorded: record_fence_point must run first")
    return point


SLIPPED_COUNT_LIMIT = 100_000  # offsets past the fence point read at most to count records


def confirm_fence(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Right before the pointer moves: the source holds no record past the fence point.

    Replication stopped at the fence point, so a record the source accepted after it (a super
    user, a principal the fence does not cover, a slow producer's retry) would be lost once
    applications move.  Such writes are counted per partition and fail the step - the move
    rolls back and the source stays primary - rather than moving with a loss nobody chose.

    Offsets are not records: a fenced transactional producer's ABORT markers (or the
    coordinator's, when the transaction times out) land after the fence point and carry no
    data, so the span is counted as a read_committed consumer sees it (``drkit.lag``).  A span
    that cannot be counted - a transaction still open in it, or too wide - fails the step too:
    "at most N" is not "none".
    """
    point = _fence_point(ctx).ends
    # Listed again: a topic created after the fence point (before the reconcile fenced it)
    # counts from offset 0 - its every record would be left behind.
    partitions = ctx.source_partitions_now(timeout_s)
    now = _ends(ctx, ctx.source, partitions)
    by_key = {f"{tp.topic}:{tp.partition}": tp for tp in partitions}
    spans = {
        by_key[key]: (point.get(key, 0), end) for key, end in now.items() if end > point.get(key, 0)
    }
    counts = count_visible(ctx.admin(ctx.source), spans, SLIPPED_COUNT_LIMIT, timeout_s)
    slipped = {tp: c for tp, c in counts.items() if not c.exact or c.at_most > 0}
    if slipped:
        listed = ", ".join(
            f"{tp.topic}:{tp.partition} +{c.at_most}" for tp, c in sorted(slipped.items())
        )
        total = sum(c.at_most for c in slipped.values())
        open_txn = any(not c.exact for c in slipped.values())
        amount = f"at most {total}" if open_txn else str(total)
        why = (
            " (a transaction still open or too many offsets to read past the fence point, so "
            "they cannot be counted yet)"
            if open_txn
            else ""
        )
        raise StepFailed(
            f"{amount} record(s) reached {ctx.source} after its fence point ({listed}){why}: "
            f"the fence does not stop every writer (a super user, or a principal other than "
            f"{ctx.config.failover.fence_principal}?); moving now would lose them"
        )
    markers = sum(c.offsets for c in counts.values())
    return StepOutcome.done(
        fence_point_holds=True, partitions=len(now), markers_after_fence_point=markers
    )


def replicate_back(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    """Failback: run this run's flow (current primary -> original primary) until caught up.

    Replicas it writes under their own names (identity policy) into the original primary are
    fenced there; with the flow RUNNING they are its standby guard's (only the replicator may
    write them) and the reconcile lifts the fence from them - never without a guard: then the
    step fails, naming what to configure, rather than open them to the applications."""
    directive, _published = _directive(ctx, ctx.flow, DesiredState.RUNNING)
    lifted = _replicas_opened(ctx, timeout_s)
    acks = wait_for_workers(ctx, ctx.flow, directive, min(timeout_s or 60.0, 60.0), strict=False)
    if not acks["acknowledged"]:
        raise StepFailed(
            f"no worker runs {ctx.flow.name}: start 'drkit replicate --flow {ctx.flow.name}' "
            "and resume this run"
        )
    goal = _ends(ctx, ctx.source, ctx.source_partitions_now(timeout_s))
    caught = _wait_caught_up(ctx, ctx.topology, goal, timeout_s)
    return StepOutcome.done(fences_lifted=lifted, **caught)


def _replicas_opened(ctx: StepContext, timeout_s: float | None) -> list[str]:
    """Reconcile the original primary now that the flow into it runs; the replicas whose
    fence went (to their guard).  StepFailed when a replica stays fenced: no guard can take
    the fence's place (drkit.access.standby says why), and opening it to every writer would
    let the applications write into the cluster they left."""
    topology = ctx.topology
    replicas = {topology.target_topic(t) for t in ctx.replicated_topics()}
    if not ctx.reachable(ctx.target):
        raise StepFailed(f"{ctx.target} does not answer: nothing can be replicated back to it")
    outcome = ctx.reconcile([ctx.target], strict=[ctx.target], timeout_s=timeout_s)
    fenced = replicas & set(outcome.clusters[ctx.target].fenced)
    if fenced:
        raise StepFailed(
            f"{ctx.flow.name} writes {', '.join(sorted(fenced))} under their own names into "
            f"{ctx.target}, where they are fenced, and no read-only standby guard can take the "
            f"fence's place ({'; '.join(outcome.clusters[ctx.target].notes) or 'see drkit doctor'})"
        )
    return sorted(replicas & set(outcome.clusters[ctx.target].lifted))
