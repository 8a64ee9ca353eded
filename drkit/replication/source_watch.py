"""What the worker learns from its consumer at each commit: source ends, lag, counters.

The consumer's cached watermarks (refreshed by every fetch) give each partition's source end -
stored with progress so a resumed worker can count records lost with a recreated topic - and
the lag gauges; a partition not fetched yet (just assigned) counts with the end seen when it
was assigned.  The end only grows while a partition stays assigned: librdkafka keeps a
partition's cached watermarks across assignments, so one taken back reads the end from its
earlier ownership until its first fetch (an empty partition's (0, 0) with 10,000 records
to copy, on a real broker).  A log truncated under a running assignment ends in an
offset-out-of-range restart, which assigns afresh.

An idle partition whose consumer position is past its progress only skipped offsets without
records (transaction markers), so progress moves over them.  Worker thread only.
"""

from __future__ import annotations

from collections.abc import Iterable

from drkit.kafka.flow_clients import SourceConsumer
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import PartitionState


def observe_source(
    consumer: SourceConsumer,
    states: Iterable[PartitionState],
    metrics: ReplicationMetrics,
    flow: str,
) -> None:
    """Refresh source ends and lag gauges; move idle progress over record-less offsets."""
    parts = list(states)
    positions = consumer.positions([state.source for state in parts if state.idle])
    for state in parts:
        position = positions.get(state.source)
        if position is not None:
            state.passed(position)
        bounds = consumer.watermarks(state.source, cached=True)
        if bounds is not None and (state.source_end is None or bounds[1] > state.source_end):
            state.source_end = bounds[1]
    report_lag(parts, metrics, flow)


def report_lag(parts: Iterable[PartitionState], metrics: ReplicationMetrics, flow: str) -> None:
    """Set the lag gauges from the partitions' source ends and progress.

    A partition not fetched yet (just assigned) still has the end seen at assignment: leaving
    it out would read "caught up" while it is behind.  Called at every commit and right after
    an assignment - until then the gauge would still show the lag from before the rebalance.
    """
    per_topic: dict[str, int] = {}
    for state in parts:
        if state.source_end is not None and state.next_offset is not None:
            lag = max(0, state.source_end - state.next_offset)
            per_topic[state.source.topic] = per_topic.get(state.source.topic, 0) + lag
    for topic, lag in per_topic.items():
        metrics.lag.labels(flow, topic).set(lag)


def count_replicated(
    states: Iterable[PartitionState], metrics: ReplicationMetrics, flow: str
) -> None:
    """Add what each partition replicated since the last call to the record/byte counters."""
    for state in states:
        records, size = state.unreported()
        if records:
            metrics.records.labels(flow, state.source.topic).inc(records)
            metrics.bytes.labels(flow, state.source.topic).inc(size)
