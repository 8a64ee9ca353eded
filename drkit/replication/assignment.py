"""Where each newly assigned source partition resumes (pure), and what that costs.

When the replication group hands a worker partitions, each resumes at its stored progress -
unless the source no longer has that offset.  :func:`plan_resume` decides per partition from a
snapshot (stored progress, the source log's start and end, topic ids) and returns
:class:`Resume` values; the worker records the losses they carry *before* it assigns, so a
crash in between re-detects the same loss instead of hiding it.

Rules (tests/unit/test_replication_logic.py):
* no stored progress: start at the log start (``start_from=earliest``) or end (``latest``);
  nothing is lost - replication never promised records from before it started;
* stored progress still readable on the same topic: resume exactly there;
* progress below the log start, or the topic recreated (new topic id): a loss event
  (drkit.replication.loss) and resume at the log start;
* progress beyond the log end (the source lost records it had acknowledged, e.g. an unclean
  leader election): resume at the log end - the records below it are the ones already copied -
  and flag it, since new source records will reuse offsets that were replicated before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, detect_loss
from drkit.replication.progress import Progress


class StartFrom(StrEnum):
    """Where partitions without stored progress start."""

    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True)
class SourceLog:
    """What the source says about one partition now."""

    start: int
    end: int
    topic_id: str | None


@dataclass(frozen=True)
class Resume:
    """Where one partition resumes and why."""

    source: TopicPartition
    offset: int
    loss: LossEvent | None = None
    fresh: bool = False  # no stored progress: ``offset`` must be stored as the first progress
    rewound: bool = False  # stored progress was past the source's end


def plan_resume(
    flow: str,
    partitions: Iterable[TopicPartition],
    stored: Mapping[TopicPartition, Progress],
    logs: Mapping[TopicPartition, SourceLog],
    start_from: StartFrom,
    now_ms: int,
    worker_id: str = "",
) -> list[Resume]:
    """Decide where every partition in ``partitions`` resumes; see the module docstring."""
    out: list[Resume] = []
    for tp in partitions:
        log = logs[tp]
        progress = stored.get(tp)
        if progress is None:
            first = log.start if start_from is StartFrom.EARLIEST else log.end
            out.append(Resume(tp, first, fresh=True))
            continue
        point = detect_loss(
            flow,
            tp,
            progress.next_offset,
            log.start,
            stored_topic_id=progress.topic_id,
            current_topic_id=log.topic_id,
            last_seen_end=progress.source_end,
            now_ms=now_ms,
            detected_by=worker_id,
        )
        if point.loss is None and point.next_offset > log.end:
            out.append(Resume(tp, log.end, rewound=True))
            continue
        out.append(Resume(tp, point.next_offset, point.loss))
    return out
