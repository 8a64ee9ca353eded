"""The checkpoint snapshot answers per group from an index, with the same answers as a scan."""

from __future__ import annotations

from drkit.offsets.checkpoint import Checkpoint
from drkit.offsets.checkpoint_store import CheckpointSnapshot
from drkit.records import TopicPartition


def test_for_group_returns_exactly_that_groups_latest_checkpoints() -> None:
    latest = {
        (group, TopicPartition("dc1.orders", p)): Checkpoint(
            group, TopicPartition("dc1.orders", p), 100 + p, 90 + p
        )
        for group in ("a", "b", "a.b")
        for p in range(3)
    }
    snapshot = CheckpointSnapshot(latest, None)
    for group in ("a", "b", "a.b"):
        found = snapshot.for_group(group)
        assert found == {tp: c for (g, tp), c in latest.items() if g == group}
        found.clear()  # callers get their own dict
        assert len(snapshot.for_group(group)) == 3
    assert snapshot.for_group("unknown") == {}
