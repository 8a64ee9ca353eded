"""What a full drill saw, read once after the move: the I/O behind drills.checks.

:func:`observe` writes one record to the old primary (to see the fence hold, or a failback
undo it), reads the replica's stable offsets, the fence the run recorded and the writers'
acknowledgements, and returns them as :class:`~drkit.drills.facts.DrillFacts`.  It must run
before the drill releases its access (the write goes through the drill's own principal).
"""

from __future__ import annotations

import time

from drkit.drills.environment import DrillEnvironment
from drkit.drills.facts import DrillFacts, FenceInForce, LinkAtMove, ReplicaTransactions, WriteAfter
from drkit.drills.parity import parity_check
from drkit.drills.running import RunningDrill
from drkit.drills.timeline import FAULT, RUN_STARTED
from drkit.errors import DrkitError, KafkaError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.model import StepName
from drkit.failover.results import DivergentTail, SourceFence
from drkit.failover.runs import RunRecord
from drkit.kafka.io import produce_batch


def await_fence(env: DrillEnvironment, cluster: str, timeout_s: float) -> bool:
    """Wait until no fence of ``cluster`` is pending (the monitor applies them on return)."""
    fences = FenceRepository(env.store)
    deadline = time.monotonic() + timeout_s
    while fences.topics(cluster, FenceState.PENDING):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def observe(runner: RunningDrill) -> DrillFacts:
    s = runner.scenario
    failback = runner.failback_record
    tail = DivergentTail.of(failback) if failback is not None else None
    return DrillFacts(
        source=s.source,
        asked_per_s=sum(t.records_per_s for t in s.workload.topics),
        link=_link_at_move(runner),
        parity=parity_check(
            runner.env.config,
            runner.env.flow,
            runner.options.connect,
            {runner.env.topic(t.name) for t in s.workload.topics},
        ),
        moved=runner.run_record is not None,
        fence=_fence_in_force(runner),
        acked_at=tuple(at for w in runner.writers for at, _ in w.acked()),
        write_after=_write_to_source(runner, b"after-failback" if failback else b"after-fence"),
        replica_transactions=_replica_transactions(runner),
        failed_back=failback is not None,
        exported=tail.records if tail is not None else None,
    )


def _link_at_move(runner: RunningDrill) -> LinkAtMove | None:
    moment = runner.timeline.first(FAULT) or runner.timeline.first(RUN_STARTED)
    if runner.sampler is None or moment is None:
        return None
    measured = [(w, c) for t, w, c in runner.sampler.rows if t <= moment.at_s and c is not None]
    if not measured:
        return None
    written, copied = measured[-1]
    assert copied is not None
    return LinkAtMove(moment.at_s, written, copied)


def _fence_in_force(runner: RunningDrill) -> FenceInForce | None:
    run: RunRecord | None = runner.run_record
    step = run.step(StepName.FENCE_SOURCE) if run is not None else None
    fence = SourceFence.of(run) if run is not None else None
    if step is None or step.finished_at is None or fence is None:
        return None
    fault = runner.timeline.first(FAULT)
    if fence.pending and fault is not None:
        return FenceInForce(runner.timeline.started + fault.at_s, pending=True)
    return FenceInForce(step.finished_at.timestamp(), pending=fence.pending)


def _write_to_source(runner: RunningDrill, value: bytes) -> WriteAfter:
    """One write to the first workload topic on the source."""
    s = runner.scenario
    topic = runner.env.topic(s.workload.topics[0].name)
    try:
        produce_batch(runner.endpoint(s.source), topic, [(None, value)], timeout_s=10)
    except KafkaError as err:
        return WriteAfter(str(err))
    return WriteAfter(None)


def _replica_transactions(runner: RunningDrill) -> ReplicaTransactions:
    admin = runner.admin(runner.scenario.target)
    open_partitions: list[str] = []
    try:
        for load in runner.scenario.workload.topics:
            replica = runner.replica(load.name)
            stable = admin.topic_offsets(replica, isolation="read_committed")
            high = admin.topic_offsets(replica)
            open_partitions += [f"{replica}-{p}" for p in high if stable[p][1] != high[p][1]]
    except DrkitError as err:
        return ReplicaTransactions(error=str(err))
    return ReplicaTransactions(tuple(open_partitions))
