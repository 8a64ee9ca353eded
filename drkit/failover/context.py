"""What a failover step works with: the run, the config, the clusters, the stores.

Steps are functions ``(StepContext, timeout_s) -> StepOutcome`` (drkit.failover.steps).  Each is
idempotent: run twice, it does its work once and reports the same result - the engine relies on
that to resume a run whose process died in the middle of a step.

Lease discipline (drkit.failover.lease): every store write a step makes goes through the run's
``guard`` (the engine's lease keeper) and changes nothing once another engine took the run
over; a step calls :meth:`StepContext.confirm` right before each side effect on a cluster (ACLs,
offset commits, produced records), which renews the lease synchronously or raises LeaseLost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from drkit import clock
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.control import ControlRepository
from drkit.control.channel import ChannelFactory, ChannelPort, kafka_channels
from drkit.errors import DrkitError, ExitCode
from drkit.failover.fences import FenceRepository
from drkit.failover.lease import request_budget
from drkit.failover.model import Procedure, StepName, StepState
from drkit.failover.pointer import PointerRepository
from drkit.failover.pointer_topic import PointerTopics
from drkit.failover.reconcile import Reconciler, ReconcileReport, RegistryFactory
from drkit.failover.run_result import RunOptions
from drkit.failover.run_session import RunSession
from drkit.failover.runs import SKIPPED_KEY, RunRecord, RunRepository
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.records import TopicPartition
from drkit.replication.progress import Progress, ProgressStore
from drkit.store.db import StateStore
from drkit.store.guard import WriteGuard
from drkit.topology.flow import FlowTopology


class Confirming(WriteGuard, Protocol):
    """A write guard that can also confirm, synchronously, that its lease is still held."""

    def confirm(self) -> object: ...


class ProgressReading(Protocol):
    """A flow's replication progress as the target holds it (drkit.replication.progress)."""

    def refresh(self) -> Mapping[TopicPartition, Progress]: ...

    def close(self) -> None: ...


ProgressReaders = Callable[[FlowTopology, ClusterEndpoint], ProgressReading]


def progress_topic_reader(topology: FlowTopology, target: ClusterEndpoint) -> ProgressReading:
    """The flow's progress topic on its target, read as it grows (a missing one is empty)."""
    return ProgressStore(target, topology.progress_topic, missing_ok=True)


class StepFailed(DrkitError):
    """A step could not do its work; the run stops there (and a planned move rolls back)."""

    exit_code = ExitCode.FAILED


@dataclass(frozen=True)
class StepOutcome:
    """What a step returns: its state and the document recorded with it (read back as a
    :class:`~drkit.failover.runs.StepRecord`)."""

    state: StepState
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def done(cls, **detail: Any) -> StepOutcome:
        """Done; a ``warning`` in ``detail`` (runs.WARNING_KEY) is what the run's result must
        say of it (StepRecord.warning)."""
        return cls(StepState.DONE, detail)

    @classmethod
    def skipped(cls, why: str, **detail: Any) -> StepOutcome:
        """Nothing to do, and why (StepRecord.skipped_because)."""
        return cls(StepState.SKIPPED, {SKIPPED_KEY: why, **detail})


ProgressCallback = Callable[[str, float | None], None]  # (message, fraction done or None)


@dataclass
class StepContext:
    """One run's world.  Steps reach clusters' admin APIs through :meth:`admin`, built by
    ``connect`` (the edge's factory - the adapter, or in unit tests in-memory fakes), one per
    alias - or through ``connect`` itself: the translate step's ``gather``, the verify step and
    the reconciler (as the fencer role).  Records go through the adapter's clients (the divergent
    tail, transactional fencing, control channels, progress readers)."""

    config: DrkitConfig
    flow: FlowConfig
    store: StateStore
    runs: RunRepository
    run: RunRecord
    options: RunOptions
    state_dir: Path
    progress: ProgressCallback = field(default=lambda _message, _fraction: None)
    connect: AdminFactory = field(kw_only=True)
    guard: Confirming | None = None  # the engine's lease keeper (None: unguarded, tests)
    channels: ChannelFactory | None = None  # flows' control channels (None: on Kafka)
    # What the plan gave this run, and what its translate step translated (drkit.failover.
    # run_session): a session given nothing reads the same values back from the stored run.
    session: RunSession = field(default_factory=RunSession)
    registries: RegistryFactory | None = None  # schema registries (None: over HTTP)
    pointer_topics: PointerTopics | None = None  # where clients read the pointer (None: nowhere)
    progress_readers: ProgressReaders = progress_topic_reader  # flows' progress on targets
    _admins: dict[str, ClusterAdmin] = field(default_factory=dict, init=False)
    _reconciler: Reconciler | None = field(default=None, init=False)

    # -- what the run is about ------------------------------------------------------------

    @property
    def procedure(self) -> Procedure:
        return self.run.procedure

    @property
    def source(self) -> str:
        return self.run.source

    @property
    def target(self) -> str:
        return self.run.target

    @property
    def topology(self) -> FlowTopology:
        return FlowTopology.of(self.flow)

    @property
    def reverse_flow(self) -> FlowConfig | None:
        name = f"{self.flow.target}->{self.flow.source}"
        return next((f for f in self.config.flows if f.name == name), None)

    def replicated_partitions(self) -> list[TopicPartition]:
        """The flow's source data partitions as the plan recorded them."""
        return sorted(TopicPartition(r.topic, r.partition) for r in self.run.plan_head.rpo)

    def replicated_topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.replicated_partitions()})

    def source_partitions_now(self, timeout_s: float | None = None) -> list[TopicPartition]:
        """The flow's source data partitions as the source lists them now: a topic created
        after the plan is waited for by the drain and counted by confirm_fence like the others
        (else its records would be left behind); one deleted since holds nothing to wait for."""
        topology = self.topology
        listed = self.admin(self.source).list_topics(timeout_s)
        now = {
            TopicPartition(info.name, p.partition)
            for info in listed.values()
            if topology.selects(info.name) and info.name != "heartbeats"
            for p in info.partitions
        }
        return sorted(now)

    def detail(self, step: StepName) -> dict[str, Any]:
        """What an earlier step of this run recorded (refreshed from the store)."""
        return self.refreshed().detail(step)

    def refreshed(self) -> RunRecord:
        """The run as the store holds it now (what its steps recorded so far)."""
        fresh = self.runs.get(self.run.id)
        if fresh is not None:
            self.run = fresh
        return self.run

    # -- stores and clusters ----------------------------------------------------------------

    @property
    def control(self) -> ControlRepository:
        return ControlRepository(self.store, self.guard)

    @property
    def fences(self) -> FenceRepository:
        return FenceRepository(self.store, self.guard)

    @property
    def pointers(self) -> PointerRepository:
        return PointerRepository(self.store, self.guard)

    def channel(self, flow: FlowConfig) -> ChannelPort:
        """``flow``'s control channel on its target (drkit.control.channel)."""
        from drkit.store.flow_keys import control_keys

        return (self.channels or kafka_channels(self.config, control_keys(self.store)))(flow)

    def confirm(self, timeout_s: float | None = None) -> float | None:
        """Right before a side effect on a cluster: the run's lease is surely still held
        (LeaseLost otherwise - the step stops without touching the cluster).  Returns how long
        the side effect may wait for its answer: ``timeout_s``, cut to what the lease surely
        has left (drkit.failover.lease.request_budget)."""
        if self.guard is None:
            return timeout_s
        return request_budget(self.guard.confirm(), timeout_s)

    def progress_of(self, topology: FlowTopology) -> ProgressReading:
        """A reader of ``topology``'s progress on its target (close it when done)."""
        return self.progress_readers(topology, self.endpoint(topology.target))

    def endpoint(self, alias: str) -> ClusterEndpoint:
        return ClusterEndpoint(alias, self.config.clusters[alias])

    def admin(self, alias: str) -> ClusterAdmin:
        if alias not in self._admins:
            self._admins[alias] = self.connect(self.endpoint(alias))
        return self._admins[alias]

    @property
    def reconciler(self) -> Reconciler:
        """The run's reconciler of protections (one per run: it remembers who was away)."""
        if self._reconciler is None:
            # Its own admins: it connects as the fencer (drkit.access.roles), not the engine.
            self._reconciler = Reconciler(
                self.config, self.store, self.connect, self.confirm, self.guard, self.registries
            )
        return self._reconciler

    def reconcile(
        self,
        clusters: Iterable[str] | None = None,
        strict: Iterable[str] = (),
        known_topics: Mapping[str, Iterable[str]] | None = None,
        timeout_s: float | None = None,
    ) -> ReconcileReport:
        """Bring ``clusters`` to the protections this run's recorded steps want (the step
        calling it has recorded its start: its intent is in): drkit.failover.reconcile."""
        return self.reconciler.reconcile(clusters, strict, known_topics, timeout_s)

    def reachable(self, alias: str, timeout_s: float = 3.0) -> bool:
        try:
            answered = self.admin(alias).answers(timeout_s)
        except DrkitError:
            answered = False
        self.reconciler.seen(alias, answered)
        return answered


def deadline_loop(timeout_s: float | None, interval_s: float = 0.5) -> Callable[[], bool]:
    """A polling helper: each call sleeps ``interval_s`` (after the first) and says whether
    time is left."""
    limit = clock.monotonic() + (timeout_s if timeout_s is not None else 3600.0)
    first = [True]

    def more() -> bool:
        if first[0]:
            first[0] = False
            return True
        clock.sleep(interval_s)
        return clock.monotonic() < limit

    return more
