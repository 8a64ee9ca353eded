"""The recount from records (pure): RPO per partition, skipped and re-read per group."""

from __future__ import annotations

from typing import Any

from drkit.drills.numbered import Processed, decode_seq, encode_value
from drkit.drills.recount import group_outcome, placed_or_reset, rpo_of
from drkit.drills.report import UnreplicatedPartition
from drkit.records import Record, TopicPartition


def _record(topic: str, partition: int, offset: int, seq: int, ts: int = 0) -> Record:
    return Record(topic, partition, offset, None, encode_value(seq, 20), timestamp_ms=ts)


def test_values_carry_their_sequence_number() -> None:
    assert decode_seq(encode_value(42, 100)) == 42
    assert len(encode_value(42, 100)) == 100
    assert decode_seq(b"foreign") is None


def test_rpo_counts_what_the_replica_lacks_per_partition_with_its_time_span() -> None:
    source = [_record("o", 0, i, i, ts=1000 * i) for i in range(5)]
    source += [_record("o", 1, 0, 100, ts=0)]
    # Markers and aborted batches make replica offsets differ: matched by value, not offset.
    replica = [_record("dc1.o", 0, i * 2, i, ts=1000 * i) for i in range(3)]
    replica += [_record("dc1.o", 1, 0, 100)]
    assert rpo_of(source, replica, {"o": "dc1.o"}) == (
        # seq 3 and 4 lost, written 2 s after seq 2; the recount read the source below 5
        UnreplicatedPartition("o", 0, 2, 40, 2.0, 5),
        UnreplicatedPartition("o", 1, 0, 0, 0.0, 1),
    )


def test_the_recount_names_its_horizon_and_an_old_report_loads_without_it() -> None:
    """A record the cut link delivers after the drill (offset 7 here) is beyond ``read_to``:
    a later recount compares on the report's horizon, not on records it never saw."""
    source = [_record("o", 0, offset, offset) for offset in (0, 1, 2, 6)]  # 3-5: markers
    (measured,) = rpo_of(source, [], {"o": "dc1.o"})
    assert (measured.records, measured.read_to) == (4, 7)
    old: dict[str, Any] = {"topic": "o", "partition": 0, "records": 4, "bytes": 80, "seconds": 0}
    assert UnreplicatedPartition(**old).read_to is None


def _processed(*seqs: int) -> list[Processed]:
    return [Processed(0.0, "dc2", "dc1.o", 0, i, s) for i, s in enumerate(seqs)]


def test_a_group_resuming_exactly_skips_and_rereads_nothing() -> None:
    source = [_record("o", 0, i, i) for i in range(10)]
    replica = [_record("dc1.o", 0, i, i) for i in range(10)]
    outcome = group_outcome("g", "o", source, replica, {0: 6}, _processed(6, 7, 8, 9), 0.5)
    assert (outcome.processed_on_source, outcome.processed_on_target) == (6, 4)
    assert (outcome.skipped, outcome.reread) == (0, 0)


def test_rereads_count_what_was_done_on_the_source_and_twice_on_the_target() -> None:
    source = [_record("o", 0, i, i) for i in range(10)]
    replica = [_record("dc1.o", 0, i, i) for i in range(10)]
    outcome = group_outcome("g", "o", source, replica, {0: 6}, _processed(4, 5, 6, 7, 7, 8, 9), 1)
    assert (outcome.skipped, outcome.reread) == (0, 3)  # 4 and 5 again, 7 twice


def test_a_record_processed_nowhere_is_skipped() -> None:
    source = [_record("o", 0, i, i) for i in range(10)]
    replica = [_record("dc1.o", 0, i, i) for i in range(10)]
    outcome = group_outcome("g", "o", source, replica, {0: 6}, _processed(8, 9), None)
    assert (outcome.skipped, outcome.reread) == (2, 0)


def test_a_partition_the_failover_left_untranslated_is_judged_from_the_replica_start() -> None:
    """CI once judged such a partition at the group's later commit on the target, so records
    the group went on to read there counted as 610 skipped (consumers-lagging drill)."""
    p0, p1, p2 = (TopicPartition("dc1.events", p) for p in range(3))
    translated = {"slow": {p0: 87}, "other": {p0: 5}}
    wanted = {"slow": [p0, p1, p2], "fast": [p0, p1]}
    starts = {p0: 0, p1: 0, p2: 12}
    assert placed_or_reset(translated, wanted, starts) == {
        "slow": {p0: 87, p1: 0, p2: 12},  # translated kept, the rest at the log start
        "fast": {p0: 0, p1: 0},  # not placed at all (no checkpoint): every partition resets
        "other": {p0: 5},
    }


def test_the_fault_waits_for_a_monitor_that_sees_the_source_reachable() -> None:
    """A monitor that flagged the source UNAVAILABLE before the fault (slow probes on a busy
    machine) makes no transition when the fault lands: the drill waits until it sees the source
    reachable (HEALTHY, or DEGRADED by a slow canary) again, so detection is measured from a
    transition the fault caused."""
    from drkit.drills.runner import observed_reachable
    from drkit.store.models import ObserverState

    def state(observer: str, cluster: str, value: str) -> ObserverState:
        return ObserverState(observer=observer, cluster=cluster, state=value)

    assert observed_reachable([state("a", "dc1", "HEALTHY"), state("a", "dc2", "UNKNOWN")], "dc1")
    assert observed_reachable([state("a", "dc1", "HEALTHY"), state("b", "dc1", "DEGRADED")], "dc1")
    assert not observed_reachable([state("a", "dc1", "UNAVAILABLE")], "dc1")
    assert not observed_reachable([state("a", "dc1", "HEALTHY"), state("b", "dc1", "UNKNOWN")],
                                  "dc1")  # fmt: skip
    assert not observed_reachable([state("a", "dc2", "HEALTHY")], "dc1")  # no word on dc1 yet
