"""Lag, RPO and divergence - the one home of their rules (pure, but for :func:`count_visible`).

**Records.**  What a ``read_committed`` consumer gets from an offset span of a partition.
Aborted records and transaction markers take offsets but are not records; records behind a
transaction still open are not records yet (they may abort).  So an offset difference is only
an upper bound, and the exact figure needs a read: :func:`count_visible`, bounded - spans wider
in total than ``limit`` offsets, and spans with a transaction open in them, are left uncounted
(:class:`SpanCount` then carries the offset width only, and callers say "at most").

**The span the target lacks** (:func:`lacking_span`): ``[start, source end)`` of one source
partition, ``start`` the highest of the flow's progress (every offset below it is on the
target), the source's log start (below it records are gone - a loss event, not lag) and, for a
consumer group, its committed position (what it already read it does not need).  Used by the
monitor's lag, a failover plan's RPO, translation's ``unreplicated`` per group move and the
checkpointer's totals.

**Seconds the target lacks** (:func:`rpo_seconds`): 0 for a partition caught up with the source's
end read now; for one lagging on a live source whose span was read, the age of the oldest record the
target lacks (now minus the timestamp of the span's first visible record, read with the count; 0 for
a timestamp ahead of now); else the age of the evidence of how far replication got - the time since
the partition's progress last moved while it lags (not a bound: the records lacked may be older, or
younger), the flow's newest progress when it was caught up with an end that is not live (the source
stopped answering: what it took since is unknown).  Heartbeat age is not this figure: it says the
link carries records, not how far a partition got.  Readiness (``drkit status``) and the failover
plan judge ``failover.max_rpo_s`` on it; automation narrows a dead source's window with
:func:`loss_window`.

**Per partition** (:class:`PartitionRpo`, built by :func:`partition_rpo`) and per flow
(:func:`total_records`, :func:`worst_seconds`; :func:`known_seconds`, what ``max_rpo_s`` is
judged on), and a consumer group's lag on a cluster
(:func:`group_lag`: its committed offset to the partition's end, in offsets).

The worker's own ``drkit_replication_lag_records`` gauge is the exception: the source end it
last saw minus its progress, in offsets (drkit/replication/source_watch.py), and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from drkit.clock import age_s
from drkit.records import TopicPartition

if TYPE_CHECKING:  # the port only: importing drkit.kafka would load the client library
    from drkit.kafka.ports import ClusterAdmin

Span = tuple[int, int]  # offsets [start, end) of one partition


def lacking_span(
    replicated_end: int | None,
    source_end: int | None,
    *,
    log_start: int | None = None,
    position: int = 0,
) -> Span | None:
    """The offsets ``[start, source_end)`` of one source partition the target lacks - the one
    span rule (see the module docstring).  ``replicated_end``: the flow's progress, None when
    it has none (the target has nothing of the partition: the span starts at ``log_start``);
    ``position``: a group's committed offset.  The span may be empty (``start >= end``).
    None - unknown - without a source end, or with neither progress nor a log start."""
    if source_end is None or (replicated_end is None and log_start is None):
        return None
    start = max(position, replicated_end or 0, log_start or 0)
    return start, source_end


def width(span: Span) -> int:
    """The offsets in ``span`` (0 when empty): its records' upper bound."""
    return max(0, span[1] - span[0])


def lacking_records(
    replicated_end: int | None,
    source_end: int | None,
    *,
    log_start: int | None = None,
    position: int = 0,
) -> int | None:
    """The width of :func:`lacking_span` (None when unknown), in offsets."""
    span = lacking_span(replicated_end, source_end, log_start=log_start, position=position)
    return None if span is None else width(span)


def lacking_total(span: Span | None, positions: Iterable[int]) -> int:
    """The sum of :func:`lacking_records` over groups at ``positions`` on one partition whose
    span without a position is ``span`` - in one pass (a checkpoint round asks it for every
    partition of thousands of groups).  0 for an unknown or empty span."""
    if span is None or not width(span):
        return 0
    start, end = span
    return sum(end - (p if p > start else start) for p in positions if p < end)


def rpo_seconds(
    records: int | None,
    source_end_live: bool,
    progress_age_s: float | None,
    evidence_age_s: float | None,
    lacking_age_s: float | None = None,
) -> float | None:
    """Seconds of source writes one partition's target may lack - the one seconds rule.

    Caught up (``records`` 0) with the source's end read now: 0.  Caught up with an end the
    workers last saw (the source does not answer): ``evidence_age_s``, the flow's newest
    progress - a worker fetching every partition would have copied a new record here too, and
    the source may have taken writes since; never 0 by default.  Lagging on a live source whose
    span was read: ``lacking_age_s``, the age of the oldest record the target lacks
    (:func:`record_age` of the span's first visible record).  Lagging otherwise (the span not
    read: over the budget, a transaction open in it, the source gone; or no timestamp):
    ``progress_age_s``, the time since this partition's progress last moved - not a bound on
    the writes lacked, which may be older (a partition far behind still moving) or far younger
    (a quiet partition that just took a record).  None: unknown."""
    if records == 0:
        return 0.0 if source_end_live else evidence_age_s
    if source_end_live and lacking_age_s is not None:
        return lacking_age_s
    return progress_age_s


def record_age(now_s: float, timestamp_ms: int | None) -> float | None:
    """Seconds since a record stamped ``timestamp_ms`` was written, as of ``now_s``: 0 for a
    stamp ahead of ``now_s`` (a producer's clock ahead of ours), never negative; None without
    a stamp."""
    return None if timestamp_ms is None else max(0.0, now_s - timestamp_ms / 1000)


def progress_age(now_s: float, timestamp_ms: int | None) -> float | None:
    """Seconds since progress stamped ``timestamp_ms`` was stored (None: no stamp, or a clock
    ahead of ``now_s`` - drkit.clock.age_s)."""
    return age_s(now_s, timestamp_ms / 1000) if timestamp_ms else None


def loss_window(evidence_age_s: float, stopped_at: float, now: float) -> float:
    """Seconds of writes a source that stopped answering may have taken that the target lacks:
    from the last evidence that replication was caught up (``evidence_age_s`` before ``now``,
    :func:`rpo_seconds`) to ``stopped_at``, the latest moment it may have taken writes (``now``
    when unknown: an upper bound).  Never negative."""
    return max(0.0, stopped_at - (now - evidence_age_s))


@dataclass(frozen=True)
class PartitionRpo:
    """What the target lacks of one source partition (the RPO), as known when measured."""

    topic: str
    partition: int
    source_end: int | None  # the last source end offset known (live, or last seen by workers)
    replicated_end: int | None  # progress: every source offset below it is on the target
    # Visible records (read committed) when ``exact``; else the offset span, an upper bound
    # (transaction markers and aborted records occupy offsets too); None: unknown.
    records: int | None
    bytes: int | None
    seconds: float | None
    exact: bool = False
    source_end_live: bool = False  # ``source_end`` read now, not the last one workers saw

    def to_json(self) -> dict[str, Any]:
        """``asdict`` for this flat row (primitives only), without its deep copy."""
        return dict(vars(self))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PartitionRpo:
        """The inverse of ``asdict`` (documents written before a field existed get its
        default)."""

        def number(key: str, kind: type[int] | type[float]) -> Any:
            value = raw.get(key)
            return None if value is None else kind(value)

        return cls(
            str(raw["topic"]), int(raw["partition"]), number("source_end", int),
            number("replicated_end", int), number("records", int), number("bytes", int),
            number("seconds", float), bool(raw.get("exact", False)),
            bool(raw.get("source_end_live", False)),
        )  # fmt: skip


def partition_rpo(
    source: TopicPartition,
    source_end: int | None,
    replicated_end: int | None,
    *,
    live: bool,
    visible: int | None = None,
    log_start: int | None = None,
    progress_age_s: float | None = None,
    evidence_age_s: float | None = None,
    lacking_age_s: float | None = None,
) -> PartitionRpo:
    """One partition's RPO: the records of :func:`lacking_span` - ``visible`` when they were
    counted (:func:`count_visible`), else its width in offsets, an upper bound - and
    :func:`rpo_seconds` (``lacking_age_s``: the :func:`record_age` of the span's first visible
    record, when it was read).  ``live``: ``source_end`` was read now.  Exact only when measured
    now: with the source gone, 0 means "nothing missing of what it last showed" - what it
    took after that sighting is not counted (its seconds bound it)."""
    records = (
        visible
        if visible is not None
        else lacking_records(replicated_end, source_end, log_start=log_start)
    )
    return PartitionRpo(
        source.topic,
        source.partition,
        source_end,
        replicated_end,
        records,
        None,
        rpo_seconds(records, live, progress_age_s, evidence_age_s, lacking_age_s),
        visible is not None or (records == 0 and live),
        live,
    )


def total_records(rpo: Iterable[PartitionRpo]) -> int | None:
    """The records a flow's target lacks, over its partitions; None when one is unknown."""
    records = [p.records for p in rpo]
    return None if None in records else sum(r or 0 for r in records)


def worst_seconds(rpo: Iterable[PartitionRpo]) -> float | None:
    """The seconds a flow's target lacks: its worst partition's (0.0 for none); None when one
    is unknown (automation's RPO gate: a failover whose cost is unknown is not taken)."""
    seconds = [p.seconds for p in rpo]
    return None if None in seconds else max((s or 0.0 for s in seconds), default=0.0)


def known_seconds(rpo: Iterable[PartitionRpo]) -> tuple[float | None, int]:
    """What ``failover.max_rpo_s`` is judged on, by the plan and readiness alike: the worst
    seconds among the partitions whose seconds are known (0.0 for no partition, None when
    none is known), and how many partitions' seconds are unknown - the known ones are judged
    and the unknown ones named, neither hiding the other."""
    seconds = [p.seconds for p in rpo]
    known = [s for s in seconds if s is not None]
    unknown = len(seconds) - len(known)
    return max(known, default=None if unknown else 0.0), unknown


@overload
def group_lag(committed: int, end: int) -> int: ...
@overload
def group_lag(committed: int, end: int | None) -> int | None: ...
def group_lag(committed: int, end: int | None) -> int | None:
    """A consumer group's lag on one partition: from its committed offset to ``end`` (the
    partition's end as its consumers reach it), in offsets - an upper bound on records; None
    when the end is unknown, never a made-up 0."""
    return None if end is None else max(0, end - committed)


def group_total(committed: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> int:
    """A group's lag over its partitions whose end is known (:func:`group_lag`)."""
    return sum(group_lag(offset, ends[tp]) for tp, offset in committed.items() if tp in ends)


@dataclass(frozen=True)
class SpanCount:
    """One span: its width in offsets, and its visible records when they were counted - with
    the first one's timestamp (epoch ms; None: not read, no record, or none reported)."""

    offsets: int
    records: int | None = None  # None: not counted (too wide to read, or a transaction open)
    first_timestamp_ms: int | None = None

    @property
    def exact(self) -> bool:
        return self.records is not None

    @property
    def at_most(self) -> int:
        """The records, or their upper bound (the width) when they were not counted."""
        return self.offsets if self.records is None else self.records


def count_visible(
    admin: ClusterAdmin,
    spans: Mapping[TopicPartition, Span],
    limit: int | None,
    timeout_s: float | None = None,
) -> dict[TopicPartition, SpanCount]:
    """Per partition of ``spans``, its visible records and the first one's timestamp - read
    when the spans' total width is at most ``limit`` offsets (None: always) and no transaction
    is open in the span.

    An empty span is 0 records, exactly, without a read.  Raises the adapter's KafkaError when
    the cluster does not answer (callers decide what an unanswered count means)."""
    out = {tp: SpanCount(0, 0) for tp, span in spans.items() if not width(span)}
    wide = {tp: span for tp, span in spans.items() if width(span)}
    if not wide:
        return out
    if limit is not None and sum(width(span) for span in wide.values()) > limit:
        return out | {tp: SpanCount(width(span)) for tp, span in wide.items()}
    stable = admin.stable_offsets(list(wide), timeout_s)
    settled = {tp: span for tp, span in wide.items() if stable.get(tp, 0) >= span[1]}
    counted = admin.visible_records(settled, timeout_s) if settled else {}
    return out | {
        tp: SpanCount(width(span))
        if (read := counted.get(tp)) is None
        else SpanCount(width(span), read.records, read.first_timestamp_ms)
        for tp, span in wide.items()
    }
