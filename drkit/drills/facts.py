"""What a full drill observed, as frozen values the checks judge (drills.checks, pure).

Gathered once, after the move and before the drill's access is released, by
:func:`drkit.drills.observe.observe` - the only place that reads clusters, the store and the
runner's threads for the checks.  Times are wall-clock seconds (``time.time()``) unless a name
says ``_s`` since the drill's start.
"""

from __future__ import annotations

from dataclasses import dataclass

from drkit.drills.report import DrillCheck


@dataclass(frozen=True)
class LinkAtMove:
    """The last lag sample with a copy count taken at or before the fault (a planned move: the
    run's start); ``at_s`` is that moment, not the sample's."""

    at_s: float
    written: int
    copied: int


@dataclass(frozen=True)
class FenceInForce:
    """From when no write to the old primary may be acknowledged: the fence step's end, or -
    the source cut off by the fault, the fence recorded pending - the fault itself."""

    since: float
    pending: bool


@dataclass(frozen=True)
class WriteAfter:
    """One write to the first workload topic on the old primary once the drill is over:
    ``refusal`` is the error it got (None: the write was accepted)."""

    refusal: str | None

    @property
    def accepted(self) -> bool:
        return self.refusal is None

    @property
    def refused_by_acl(self) -> bool:
        """Refused for authorization - the fence - rather than for any other reason."""
        return self.refusal is not None and "AUTHORIZATION" in self.refusal


@dataclass(frozen=True)
class ReplicaTransactions:
    """Replica partitions whose last stable offset lags their high watermark (an open
    transaction), or the error that kept them from being read."""

    open_partitions: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class DrillFacts:
    """Everything the cluster-facing checks judge (the recount's figures come separately)."""

    source: str  # the scenario's name of the cluster moved away from
    asked_per_s: float  # the workload's write rate asked, all topics
    link: LinkAtMove | None  # None: no sample with a copy count before the move
    parity: DrillCheck  # topic parity is judged where its differences are computed
    moved: bool  # a failover run was recorded
    fence: FenceInForce | None  # None: the source was never fenced
    acked_at: tuple[float, ...]  # when each workload write was acknowledged
    write_after: WriteAfter
    replica_transactions: ReplicaTransactions
    failed_back: bool  # a failback ran: judged by failed_back instead of fencing_held
    exported: int | None  # records of the failback's divergent tail exported (None: none recorded)
