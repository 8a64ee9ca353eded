"""Loss events: source records that disappeared before they were replicated.

A replication flow resumes every source partition at its stored progress ``next`` (the first
source offset not yet durably on the target).  When that offset is no longer on the source -
retention or DeleteRecords moved the log start past it, or the topic was deleted and recreated
(its topic id changed) - the records in between can never be copied.  A consumer's automatic
offset reset would hide that hole; drkit instead turns it into a :class:`LossEvent`, recorded in
the state store before replication moves past it, counted in a metric, logged at ERROR, shown by
``drkit status`` and counted as lost by ``drkit verify``.

:func:`detect_loss` is the pure decision; the worker supplies what it read from the source.

Invariants (tests/unit/test_loss.py):
* an event's range is non-empty: ``first_offset <= last_offset`` and
  ``count == last_offset - first_offset + 1``;
* no event when ``next_offset`` is still readable (``log_start <= next_offset``) on the same
  topic id;
* after a recreation the event covers what was known to exist on the old topic past
  ``next_offset`` (up to the last end offset the worker saw), and replication of the new topic
  starts at its log start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from drkit.records import TopicPartition


class LossReason(StrEnum):
    """Why records were lost before replication."""

    TRUNCATED = "truncated"  # retention or DeleteRecords moved the source log start past them
    RECREATED = "recreated"  # the source topic was deleted and created again (new topic id)


@dataclass(frozen=True)
class LossEvent:
    """Source offsets ``first_offset..last_offset`` (inclusive) of one partition were lost."""

    flow: str
    source: TopicPartition
    first_offset: int
    last_offset: int
    reason: LossReason
    detected_at_ms: int
    detected_by: str = ""
    topic_id: str | None = None  # the (old) topic id the lost offsets belonged to, if known

    def __post_init__(self) -> None:
        if self.last_offset < self.first_offset:
            raise ValueError(
                f"empty loss range {self.first_offset}..{self.last_offset} for {self.source}"
            )

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1

    def describe(self) -> str:
        """One sentence for logs and errors."""
        what = (
            "deleted before replication"
            if self.reason is LossReason.TRUNCATED
            else ("lost when the topic was deleted and recreated")
        )
        return (
            f"flow {self.flow}: {self.count} records of {self.source.topic} partition "
            f"{self.source.partition} (offsets {self.first_offset}..{self.last_offset}) were "
            f"{what}"
        )


@dataclass(frozen=True)
class ResumePoint:
    """Where a partition must resume, and the loss that resuming there implies (if any)."""

    next_offset: int
    loss: LossEvent | None


def detect_loss(
    flow: str,
    source: TopicPartition,
    next_offset: int,
    log_start: int,
    *,
    stored_topic_id: str | None,
    current_topic_id: str | None,
    last_seen_end: int | None,
    now_ms: int,
    detected_by: str = "",
) -> ResumePoint:
    """Decide where to resume ``source`` given stored progress and the source log's state.

    ``next_offset`` is the stored progress; ``log_start`` the current log start offset of the
    partition; ``stored_topic_id`` the topic id progress was recorded against (None when
    progress predates topic ids); ``current_topic_id`` the topic's id now; ``last_seen_end`` the
    highest source end offset the flow knew for the old topic (None if unknown).
    """
    recreated = (
        stored_topic_id is not None
        and current_topic_id is not None
        and stored_topic_id != current_topic_id
    )
    if recreated:
        # Everything the old topic held past our progress is gone; the new topic starts over.
        loss = None
        if last_seen_end is not None and last_seen_end > next_offset:
            loss = LossEvent(
                flow,
                source,
                next_offset,
                last_seen_end - 1,
                LossReason.RECREATED,
                now_ms,
                detected_by,
                stored_topic_id,
            )
        return ResumePoint(log_start, loss)
    if log_start > next_offset:
        return ResumePoint(
            log_start,
            LossEvent(
                flow,
                source,
                next_offset,
                log_start - 1,
                LossReason.TRUNCATED,
                now_ms,
                detected_by,
                current_topic_id,
            ),
        )
    return ResumePoint(next_offset, None)
