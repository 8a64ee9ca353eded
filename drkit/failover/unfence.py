"""Lifting a write fence outside a run: ``drkit fences lift`` and a drill's clean-up.

The procedures lift their own fences (rollback's ``unfence_source``, failback's
``unfence_target``).  An operator needs it by hand when no procedure will: the old primary is
being decommissioned or rebuilt, or a run that fenced it was abandoned.  Lifting lets
applications write to that cluster again, so it is refused (:func:`lift_blockers`, pure)
while any run is unfinished - its steps place and lift fences themselves - and, unless the
operator says otherwise, when the cluster is not the active one: writes there would be a split
brain.  :func:`lift` deletes drkit's ACLs, records the topics LIFTED and checks that no DENY
WRITE of the fence principal is left on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from drkit.errors import KafkaError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.kafka.ports import ClusterAdmin


@dataclass(frozen=True)
class LiftFacts:
    """What a manual lift of ``cluster``'s fence is judged on."""

    cluster: str
    active: str | None  # the pointer's cluster (None: no pointer and no default)
    fenced: frozenset[str]  # topics the store holds fenced there (applying, applied, pending)
    requested: frozenset[str]  # the topics asked for; empty: every fenced one
    unfinished_runs: tuple[int, ...]
    even_if_standby: bool = False

    @property
    def topics(self) -> frozenset[str]:
        """The topics the lift would open for writes."""
        return self.requested or self.fenced


def not_fenced(facts: LiftFacts, lifted: Iterable[str] = ()) -> str | None:
    """Why the topics asked for cannot be lifted: not fenced there - nothing to lift, bad input
    rather than a blocker (None: every one is fenced).  ``lifted``: topics whose fence was
    lifted already, said so.  Pure."""
    unknown = sorted(facts.requested - facts.fenced)
    if not unknown:
        return None
    already = "already lifted; " if set(unknown) <= set(lifted) else ""
    fenced = ", ".join(sorted(facts.fenced)) or "nothing"
    return f"not fenced on {facts.cluster}: {', '.join(unknown)} ({already}fenced there: {fenced})"


def lift_blockers(facts: LiftFacts) -> list[str]:
    """Why lifting ``facts.cluster``'s fence must not happen now (empty: it may).  Pure.  The
    topics asked for are judged first, by :func:`not_fenced`."""
    blockers: list[str] = []
    if facts.unfinished_runs:
        runs = ", ".join(f"#{run}" for run in facts.unfinished_runs)
        blockers.append(
            f"run {runs} has not ended: resume or abandon it first (drkit failover --resume / "
            "--abandon), its steps place and lift fences themselves"
        )
    if facts.cluster != facts.active and not facts.even_if_standby:
        blockers.append(
            f"{facts.cluster} is not the active cluster ({facts.active or 'none set'} is): "
            "applications could write to both - a split brain.  To move back, run drkit "
            "failback; to open it anyway (it is being rebuilt or retired), add --even-if-standby"
        )
    return blockers


def lift(
    admin: ClusterAdmin,
    fences: FenceRepository,
    cluster: str,
    topics: Iterable[str],
    principal: str,
    timeout_s: float | None = None,
) -> list[str]:
    """Delete drkit's fence ACLs on ``topics`` of ``cluster`` (and the companion ALLOWs it
    added), record them LIFTED, and check the cluster agrees; returns the topics, sorted.

    Idempotent: deleting an ACL that is gone is no error, so a lift cut short is repeated.
    """
    lifting = set(topics)
    companions = fences.reads_allowed(cluster) & lifting
    fences.record(cluster, lifting, FenceState.LIFTING, None)  # never APPLIED over open topics
    admin.allow_writes(lifting, principal, companions, timeout_s=timeout_s)
    fences.record(cluster, lifting, FenceState.LIFTED, None)
    left = sorted(admin.write_denied(principal, timeout_s) & lifting)
    if left:
        raise KafkaError(f"{cluster}: a DENY WRITE for {principal} is still on {', '.join(left)}")
    return sorted(lifting)
