"""Which groups a plan moves from a reachable source (drkit.failover.snapshot._groups).

Kafka's group listing is best effort: a broker that has just started answers it with no group
and no error until it leads the ``__consumer_offsets`` partitions (seen on a restarted local
broker: 0 groups listed, 3,306 a second later).  A planned move made in that window must not
silently move fewer groups than the checkpoints name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from drkit.config.model import FlowConfig
from drkit.failover import snapshot
from drkit.kafka.admin_base import GroupOffsets
from drkit.offsets.checkpoint import Checkpoint
from drkit.offsets.checkpoint_store import CheckpointSnapshot
from drkit.records import TopicPartition

ORDERS = TopicPartition("orders", 0)
REPLICA = TopicPartition("dc1.orders", 0)


class Source:
    """A source whose listing names ``listed``; it holds ``committed``'s offsets."""

    def __init__(self, listed: Iterable[str], committed: Mapping[str, int]) -> None:
        self.listed = list(listed)
        self.committed = committed
        self.asked: list[str] = []

    def list_groups(self, timeout_s: float | None = None) -> dict[str, str]:
        return dict.fromkeys(self.listed, "EMPTY")

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        self.asked = sorted(groups)
        return {
            g: GroupOffsets(g, {ORDERS: self.committed[g]})
            for g in self.asked
            if g in self.committed
        }


class Target:
    def describe_groups(self, groups: Iterable[str]) -> dict[str, Any]:
        return {}


def _checkpoints(*groups: str) -> CheckpointSnapshot:
    return CheckpointSnapshot(
        {
            (g, REPLICA): Checkpoint(g, REPLICA, 5, 5, info={"source_topic": "orders"})
            for g in groups
        },
        1,
    )


def _moved(source: Source, checkpoints: CheckpointSnapshot) -> dict[str, Mapping[Any, int]]:
    facts, _ = snapshot._groups(
        FlowConfig(source="dc1", target="dc2"),
        source,  # type: ignore[arg-type]
        Target(),  # type: ignore[arg-type]
        checkpoints,
        [ORDERS],
        True,
        None,
    )
    return {f.group: dict(f.committed) for f in facts}


def test_a_group_the_listing_leaves_out_but_the_checkpoints_name_is_still_moved() -> None:
    source = Source(listed=[], committed={"billing": 7, "audit": 9})
    moved = _moved(source, _checkpoints("billing", "audit"))
    assert moved == {"audit": {ORDERS: 9}, "billing": {ORDERS: 7}}


def test_the_listing_and_the_checkpoints_together_name_the_groups_asked_once_each() -> None:
    source = Source(listed=["billing", "fresh"], committed={"billing": 7, "fresh": 1})
    moved = _moved(source, _checkpoints("billing", "gone"))
    # "gone" has a checkpoint but no offsets on the source any more: nothing to move.
    assert moved == {"billing": {ORDERS: 7}, "fresh": {ORDERS: 1}}
    assert source.asked == ["billing", "fresh", "gone"]
