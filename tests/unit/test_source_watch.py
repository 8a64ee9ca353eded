"""observe_source: the lag gauge never reads 0 while an assigned partition is behind."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from drkit.records import TopicPartition
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.partition_state import PartitionState
from drkit.replication.source_watch import observe_source


class _Consumer:
    """A source consumer that has fetched only the partitions in ``fetched``."""

    def __init__(self, fetched: dict[TopicPartition, tuple[int, int]]) -> None:
        self.fetched = fetched

    def positions(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {}

    def watermarks(self, tp: TopicPartition, cached: bool = True) -> tuple[int, int] | None:
        return self.fetched.get(tp)


def _state(partition: int, next_offset: int, source_end: int | None) -> PartitionState:
    state = PartitionState(
        TopicPartition("orders", partition), "dc1.orders", 4, "dc1", next_offset, b"o"
    )
    state.source_end = source_end
    return state


def _lag_after(fetched: dict[TopicPartition, tuple[int, int]], *states: PartitionState) -> float:
    """The lag gauge after one observe_source over ``states`` with ``fetched`` watermarks."""
    registry = CollectorRegistry()
    observe_source(_Consumer(fetched), states, ReplicationMetrics.create(registry), "f")  # type: ignore[arg-type]
    lag = registry.get_sample_value(
        "drkit_replication_lag_records", {"flow": "f", "topic": "orders"}
    )
    assert lag is not None
    return lag


def test_a_just_assigned_partition_without_a_fetch_counts_its_known_lag() -> None:
    """Taken over at 7,522 with the source at 12,500 and nothing fetched yet: the gauge says
    4,978, not 0 (a worker that had just taken partitions over once read as caught up)."""
    caught_up = _state(0, 12_500, 12_500)
    taken_over = _state(2, 7_522, 12_500)
    assert _lag_after({caught_up.source: (0, 12_500)}, caught_up, taken_over) == 4_978


def test_fetched_watermarks_win_over_the_end_seen_at_assignment() -> None:
    state = _state(0, 100, 100)
    assert _lag_after({state.source: (0, 160)}, state) == 60
    assert state.source_end == 160


def test_a_stale_cached_end_from_an_earlier_assignment_does_not_hide_a_backlog() -> None:
    """librdkafka keeps a partition's cached watermarks across assignments: a worker that owned
    partition 2 while it was empty, lost it, and took it back at 2,500 with the source at
    12,500 reads (0, 0) until its first fetch of it (measured on a real broker).  The gauge
    says 10,000, not 0 - a test once stopped a worker that read 'caught up' with 3,938 records
    of a taken-over partition still to copy."""
    taken_back = _state(2, 2_500, 12_500)
    assert _lag_after({taken_back.source: (0, 0)}, taken_back) == 10_000
    assert taken_back.source_end == 12_500
