"""The drill report: frozen values, and their JSON form ``drkit.drill/v1``.

One report per drill.  Every figure in it was measured during the drill or recounted from the
records afterwards; nothing is estimated unless its field says so.  Times in ``timeline`` and
``series`` are seconds since the drill started (``started_at``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

SCHEMA = "drkit.drill/v1"


class Verdict(StrEnum):
    POLICY_MET = "PolicyMet"
    POLICY_BREACHED = "PolicyBreached"
    READY = "Ready"  # readiness mode: every check passed, nothing was moved
    NOT_READY = "NotReady"


@dataclass(frozen=True)
class Event:
    """One moment of the drill: ``kind`` is a fixed vocabulary (see ``EventKind``)."""

    at_s: float
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class RtoBreakdown:
    """Recovery time, split where an operator can act on it.

    detection: fault -> the monitor declares the source unavailable (0 for planned moves);
    decision: detection -> a failover run starts (operator or automation);
    execution: run start -> the pointer moved (clients belong on the target);
    client_resume: pointer moved -> every consumer group has processed on the target.
    """

    detection_s: float
    decision_s: float
    execution_s: float
    client_resume_s: float

    @property
    def total_s(self) -> float:
        return self.detection_s + self.decision_s + self.execution_s + self.client_resume_s

    def to_json(self) -> dict[str, float]:
        return {**asdict(self), "total_s": round(self.total_s, 3)}


@dataclass(frozen=True)
class UnreplicatedPartition:
    """Records the source acknowledged that never reached the target, for one partition."""

    topic: str
    partition: int
    records: int
    bytes: int
    seconds: float  # newest lost record's age at the fault: its write time - last copied's
    # The source offset the recount read up to (exclusive; None: nothing read, or a report
    # written before the field existed).  A record appended later - a write the cut link
    # delivered after the drill lifted its fences - is outside this report.
    read_to: int | None = None


@dataclass(frozen=True)
class WriteCondition:
    """One workload topic as asked and as it ran: the rate asked, the rate reached (records
    acknowledged over the span between the first and the last acknowledgement; None when
    fewer than two were), records acknowledged, and records refused (a fenced or lost source).
    A drill whose writers could not reach the rate asked tested a lighter load than planned."""

    topic: str
    partitions: int
    asked_per_s: float
    reached_per_s: float | None
    written: int
    refused: int


@dataclass(frozen=True)
class GroupOutcome:
    """What one consumer group did across the move, counted from what it processed."""

    group: str
    processed_on_source: int
    processed_on_target: int
    skipped: int  # records on the target it never processed
    reread: int  # records it processed twice
    resumed_after_s: float | None  # after the run finished: its first record on the target
    verified_exact: bool | None  # drkit verify: the group's position exact (None: not run)


@dataclass(frozen=True)
class DrillCheck:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Targets:
    """The policy a drill is judged against (from the scenario)."""

    rto_s: float
    rpo_records: int
    rpo_s: float | None = None
    reread_records: int = 0  # records consumer groups may process twice in all


@dataclass(frozen=True)
class Series:
    """Samples taken during the drill, one per ``sample_interval_s``.

    ``None`` is a sample that was not measured (the target did not answer in time): it is
    drawn as a gap, never as 0 or as the previous value."""

    t: tuple[float, ...] = ()
    source_end: tuple[int, ...] = ()  # records the writers had acknowledged
    target_end: tuple[int | None, ...] = ()  # records on the replica topic(s)
    lag: tuple[int | None, ...] = ()  # source_end - copied (what replication has still to copy)
    produced_per_s: tuple[float, ...] = ()
    copied_per_s: tuple[float | None, ...] = ()

    @property
    def unmeasured(self) -> int:
        """Samples whose target side was not measured."""
        return sum(1 for value in self.target_end if value is None)


@dataclass(frozen=True)
class Recounted:
    """One origin partition on one other standby after its re-point, counted from the records'
    ``drkit-src`` on both replicas (drills.standbys): distinct origin offsets each replica
    holds, those the promoted one holds and the standby does not (``missing``), extra copies of
    an origin offset on the standby (``duplicated``), origin offsets only the standby holds
    (``only_on_standby``), and the records the standby's replica took past its end before the
    re-point (``written_after``)."""

    promoted_holds: int
    standby_holds: int
    missing: int
    duplicated: int
    only_on_standby: int
    written_after: int


@dataclass(frozen=True, kw_only=True)
class StandbyPartition(Recounted):
    """One origin partition (a workload topic's partition on the source) on one other standby
    after the re-point: what the re-point decided and copied, beside the recount.

    ``outcome``: ``follow`` (copied from the promoted replica), ``ahead`` (the standby held
    more than the promoted cluster: nothing copied), ``cannot_tell`` (nothing copied, why in
    ``detail``).  The re-point's figures are None where its outcome has none."""

    topic: str
    partition: int
    outcome: str
    detail: str
    to_copy: int | None
    copied: int | None
    holes: int | None
    unreachable: int | None
    ahead: int | None


@dataclass(frozen=True)
class RepointedStandby:
    """One of the source's other standbys: how long before the fault its replication stopped
    (0: it ran until the fault), how long its re-point onto the promoted cluster took (after
    the recovery, never part of the RTO; None: it did not run - ``error`` says why), and per
    origin partition what it holds now."""

    cluster: str
    stopped_before_fault_s: float
    repoint_s: float | None
    partitions: tuple[StandbyPartition, ...] = ()
    error: str | None = None

    def total(self, figure: str) -> int:
        """The sum of one of :class:`StandbyPartition`'s figures (unknown ones count 0)."""
        return sum(getattr(p, figure) or 0 for p in self.partitions)


@dataclass(frozen=True)
class StandbyChosen:
    """Which standby the failover promoted and why: ``decision`` manual (the drill chose as
    ``drkit failover --from`` without ``--to`` chooses) or automatic (the monitor's choice);
    ``candidates`` each standby's figures and verdict (drkit.failover.standby_choice's JSON);
    ``promoted``: the cluster the run moved to."""

    decision: str
    chosen: str | None
    promoted: str
    summary: str
    candidates: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Standbys:
    """A drill with standbys besides its target (three data centers): the choice and every
    other standby re-pointed onto the promoted cluster."""

    choice: StandbyChosen
    others: tuple[RepointedStandby, ...]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Standbys:
        choice = dict(raw["choice"])
        choice["candidates"] = tuple(choice.get("candidates", ()))
        return cls(
            StandbyChosen(**choice),
            tuple(
                RepointedStandby(**{
                    **other,
                    "partitions": tuple(StandbyPartition(**p) for p in other["partitions"]),
                })
                for other in raw["others"]
            ),
        )  # fmt: skip


@dataclass(frozen=True)
class DrillReport:
    id: str
    scenario: str
    title: str
    mode: str  # "full" | "readiness"
    procedure: str  # failover | switchover | cutover | failback | none
    source: str
    target: str
    started_at: str  # ISO 8601 UTC
    finished_at: str
    fault: dict[str, Any]  # kind, at_s, how (what was done), note (e.g. a fallback)
    targets: Targets
    rto: RtoBreakdown | None
    rpo: tuple[UnreplicatedPartition, ...]
    groups: tuple[GroupOutcome, ...]
    checks: tuple[DrillCheck, ...]
    verdict: Verdict
    reasons: tuple[str, ...]  # why the verdict (each breached target or failed check)
    timeline: tuple[Event, ...]
    series: Series
    failover_run: dict[str, Any] | None = None  # id, procedure, state, steps (name, seconds)
    accounting: dict[str, Any] | None = None  # drkit verify's totals, or None when not run
    notes: tuple[str, ...] = field(default_factory=tuple)
    conditions: tuple[WriteCondition, ...] = ()  # the writers, as asked and as they ran
    # False: nothing could be counted (a readiness check whose source did not answer) - the
    # RPO is "not measured", never "0 records, nothing lost".
    rpo_measured: bool = True
    # A drill with standbys besides its target (None: a two-cluster drill, and its document
    # has no such key).
    standbys: Standbys | None = None

    @property
    def rpo_records(self) -> int:
        return sum(p.records for p in self.rpo)

    @property
    def rpo_bytes(self) -> int:
        return sum(p.bytes for p in self.rpo)

    @property
    def rpo_seconds(self) -> float:
        return max((p.seconds for p in self.rpo), default=0.0)

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["schema"] = SCHEMA
        document["verdict"] = self.verdict.value
        document["rto"] = self.rto.to_json() if self.rto is not None else None
        document["rpo_totals"] = {
            "records": self.rpo_records,
            "bytes": self.rpo_bytes,
            "seconds": self.rpo_seconds,
        }
        if self.standbys is None:  # a two-cluster drill's document is as it always was
            del document["standbys"]
        return document

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DrillReport:
        rto = raw.get("rto")
        return cls(
            id=raw["id"],
            scenario=raw["scenario"],
            title=raw["title"],
            mode=raw["mode"],
            procedure=raw["procedure"],
            source=raw["source"],
            target=raw["target"],
            started_at=raw["started_at"],
            finished_at=raw["finished_at"],
            fault=dict(raw["fault"]),
            targets=Targets(**raw["targets"]),
            rto=RtoBreakdown(**{k: v for k, v in rto.items() if k != "total_s"}) if rto else None,
            rpo=tuple(UnreplicatedPartition(**p) for p in raw["rpo"]),
            groups=tuple(GroupOutcome(**g) for g in raw["groups"]),
            checks=tuple(DrillCheck(**c) for c in raw["checks"]),
            verdict=Verdict(raw["verdict"]),
            reasons=tuple(raw["reasons"]),
            timeline=tuple(Event(**e) for e in raw["timeline"]),
            series=Series(**{k: tuple(v) for k, v in raw["series"].items()}),
            failover_run=raw.get("failover_run"),
            accounting=raw.get("accounting"),
            notes=tuple(raw.get("notes", ())),
            conditions=tuple(WriteCondition(**c) for c in raw.get("conditions", ())),
            rpo_measured=bool(raw.get("rpo_measured", True)),
            standbys=Standbys.from_json(raw["standbys"]) if raw.get("standbys") else None,
        )
