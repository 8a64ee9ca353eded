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


def test_unchecked_names_each_group_not_yet_checkpointed_in_order() -> None:
    """What a drill waits on before it breaks the source: a tick alone is not a checkpoint."""
    tp = TopicPartition("dc1.orders", 0)
    snapshot = CheckpointSnapshot({("billing", tp): Checkpoint("billing", tp, 5, 5)}, 1_000)
    assert snapshot.unchecked(["analytics", "billing", "audit"]) == [
        "analytics",
        "audit",
    ]
    assert snapshot.unchecked(["billing"]) == []
    assert CheckpointSnapshot({}, 1_000).unchecked(["billing"]) == ["billing"]
