"""Lag, RPO and divergence - one definition: the records a ``read_committed`` consumer gets
from an offset span of a partition.

Aborted records and transaction markers take offsets but are not records; records behind a
transaction still open are not records yet (they may abort).  So an offset difference is only
an upper bound, and the exact figure needs a read.  Every place that says "records the target
lacks" (the monitor's replication lag, readiness and automation's RPO gate, a failover plan's
RPO) or "records the old primary holds beyond the failover point" (the divergence report)
counts a span here.

Reading costs, so counting is bounded: spans wider in total than ``limit`` offsets, and spans
with a transaction open in them, are left uncounted - :class:`SpanCount` then carries the
offset width only, and callers say "at most" (``exact`` is False) instead of a number they did
not measure.  The worker's own ``drkit_replication_lag_records`` gauge is the exception: it is
the consumer's fetch lag (high watermark minus position, in offsets) and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drkit.kafka.ports import ClusterAdmin
from drkit.records import TopicPartition

Span = tuple[int, int]  # offsets [start, end) of one partition


@dataclass(frozen=True)
class SpanCount:
    """One span: its width in offsets, and its visible records when they were counted."""

    offsets: int
    records: int | None = None  # None: not counted (too wide to read, or a transaction open)

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
    """Per partition of ``spans``, its visible records - read when the spans' total width is
    at most ``limit`` offsets (None: always) and no transaction is open in the span.

    An empty span is 0 records, exactly, without a read.  Raises the adapter's KafkaError when
    the cluster does not answer (callers decide what an unanswered count means)."""
    out = {tp: SpanCount(0, 0) for tp, (start, end) in spans.items() if end <= start}
    wide = {tp: span for tp, span in spans.items() if span[1] > span[0]}
    if not wide:
        return out
    if limit is not None and sum(end - start for start, end in wide.values()) > limit:
        return out | {tp: SpanCount(end - start) for tp, (start, end) in wide.items()}
    stable = admin.stable_offsets(list(wide), timeout_s)
    settled = {tp: span for tp, span in wide.items() if stable.get(tp, 0) >= span[1]}
    counted = admin.visible_records(settled, timeout_s) if settled else {}
    return out | {tp: SpanCount(end - start, counted.get(tp)) for tp, (start, end) in wide.items()}
