"""Records lost before replication, as ``drkit verify`` counts them (pure).

The accounting starts where replication should have started, not at today's source log start.
Records below the log start that were never replicated are gone from the source, so the Spark
job cannot see them; they are counted here, from two sources of truth:

* the flow's recorded loss events (drkit.replication.loss, written by the replication worker
  when it finds its stored progress below the source log start or the topic recreated);
* verify's own check: a partition whose stored progress ``next`` is below the source's current
  log start ``L`` lost ``next..L-1`` - the worker may not have run since (no event yet).

Invariants (tests/unit/test_accounting_losses.py):

* a lost offset is counted once, however many events and checks name it (ranges are merged
  per partition and topic incarnation);
* offsets of different incarnations of a topic (an event of a topic since deleted and
  recreated names the old topic id) are different records and are never merged;
* ``records == recorded + unrecorded``; ``unrecorded`` counts only what no event covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from drkit.accounting.sparkjob.schema import LostPartition
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent


class LostBy(StrEnum):
    """Why records are counted as lost: an event's reason, or verify's own finding."""

    TRUNCATED = "truncated"  # a loss event: retention or DeleteRecords
    RECREATED = "recreated"  # a loss event: the topic was deleted and recreated
    UNRECORDED = "unrecorded"  # progress below the log start and no event covers it


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Source offsets ``first..last`` (inclusive) of one partition."""

    first: int
    last: int

    @property
    def records(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class PartitionLoss:
    """Everything lost before replication in one source partition."""

    source: TopicPartition
    ranges: tuple[OffsetRange, ...]
    recorded: int  # covered by loss events
    unrecorded: int  # found by verify alone
    reasons: tuple[LostBy, ...]

    @property
    def records(self) -> int:
        return self.recorded + self.unrecorded

    def as_record(self) -> LostPartition:
        """The spec's and summary's JSON form (schema ``drkit.verify/v2``)."""
        return {
            "src_topic": self.source.topic,
            "src_partition": self.source.partition,
            "records": self.records,
            "recorded": self.recorded,
            "unrecorded": self.unrecorded,
            "reasons": [reason.value for reason in self.reasons],
            "ranges": [
                {"from_offset": r.first, "to_offset": r.last, "records": r.records}
                for r in self.ranges
            ],
        }


def merge(ranges: Iterable[OffsetRange]) -> tuple[OffsetRange, ...]:
    """The union of ``ranges`` as sorted, disjoint, non-adjacent ranges."""
    merged: list[OffsetRange] = []
    for current in sorted(ranges):
        if merged and current.first <= merged[-1].last + 1:
            last = merged[-1]
            merged[-1] = OffsetRange(last.first, max(last.last, current.last))
        else:
            merged.append(current)
    return tuple(merged)


Incarnation = tuple[TopicPartition, str | None]  # a partition of one topic id


def _recorded(
    events: Iterable[LossEvent], ids: Mapping[str, str]
) -> dict[Incarnation, list[OffsetRange]]:
    """The loss events' ranges per partition and topic incarnation (None: id unknown)."""
    out: dict[Incarnation, list[OffsetRange]] = {}
    for event in events:
        incarnation = (event.source, event.topic_id or ids.get(event.source.topic))
        out.setdefault(incarnation, []).append(OffsetRange(event.first_offset, event.last_offset))
    return out


def _gaps(
    progress: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    ids: Mapping[str, str],
) -> dict[Incarnation, OffsetRange]:
    """Verify's own finding: ``next..log_start-1`` where stored progress is below the log start."""
    out: dict[Incarnation, OffsetRange] = {}
    for source, log_start in log_starts.items():
        next_offset = progress.get(source)
        if next_offset is not None and next_offset < log_start:
            out[(source, ids.get(source.topic))] = OffsetRange(next_offset, log_start - 1)
    return out


def lost_before_replication(
    events: Iterable[LossEvent],
    progress: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    topic_ids: Mapping[str, str] | None = None,
) -> list[PartitionLoss]:
    """Per source partition, the records lost before replication (partitions without loss are
    left out), sorted by topic and partition.

    ``events`` are the flow's recorded loss events; ``progress`` the stored next source offset
    per partition (from the target); ``log_starts`` the source's current log start offsets of
    the partitions checked; ``topic_ids`` the source topics' current ids (an event naming
    another id is of an earlier incarnation of the topic).
    """
    ids = topic_ids or {}
    events = list(events)
    recorded, gaps = _recorded(events, ids), _gaps(progress, log_starts, ids)
    reasons: dict[TopicPartition, set[LostBy]] = {}
    for event in events:
        reasons.setdefault(event.source, set()).add(LostBy(event.reason.value))
    ranges: dict[TopicPartition, list[OffsetRange]] = {}
    counts: dict[TopicPartition, tuple[int, int]] = {}  # (recorded, unrecorded)
    for incarnation in sorted(set(recorded) | set(gaps), key=lambda i: (i[0], i[1] or "")):
        source = incarnation[0]
        by_events = recorded.get(incarnation, [])
        gap = gaps.get(incarnation)
        union = merge([*by_events, *([gap] if gap is not None else [])])
        rec = sum(r.records for r in merge(by_events))
        unrec = sum(r.records for r in union) - rec
        if unrec:
            reasons.setdefault(source, set()).add(LostBy.UNRECORDED)
        ranges.setdefault(source, []).extend(union)
        before = counts.get(source, (0, 0))
        counts[source] = (before[0] + rec, before[1] + unrec)
    return [
        PartitionLoss(source, tuple(ranges[source]), rec, unrec, tuple(sorted(reasons[source])))
        for source, (rec, unrec) in sorted(counts.items())
    ]
