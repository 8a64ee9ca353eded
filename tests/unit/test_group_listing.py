"""A group listing that names no group must not make groups vanish from the monitor's status
or from the checkpointer's round (drkit.kafka.ports.groups_to_read).

Kafka's listing is best effort: a broker that has just started answers with no group and no
error until it leads ``__consumer_offsets`` (a restarted local broker: 0 groups listed, 3,306
a second later).  The groups already known are asked too; one the listing leaves out and that
has no offsets left is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from drkit.config.model import NameFilter
from drkit.health.monitor import sample_groups
from drkit.kafka.admin_base import GroupOffsets
from drkit.offsets.commit_follower import AdminCommits
from drkit.records import TopicPartition
from drkit.replication.topic_filter import NameMatcher

ORDERS = TopicPartition("orders", 0)


class Source:
    """A source listing ``listed``; it holds offsets for the groups in ``committed``."""

    def __init__(self, listed: Iterable[str], committed: Mapping[str, int]) -> None:
        self.listed = list(listed)
        self.committed = dict(committed)

    def list_groups(self, timeout_s: float | None = None) -> dict[str, str]:
        return dict.fromkeys(self.listed, "EMPTY")

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        # A group Kafka does not know answers with no offsets, not an error.
        return {
            g: GroupOffsets(g, {ORDERS: self.committed[g]} if g in self.committed else {})
            for g in groups
        }

    def list_offsets(
        self, partitions: Iterable[TopicPartition], which: str = "latest"
    ) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 100)


def test_a_checkpoint_round_keeps_the_groups_an_empty_listing_left_out() -> None:
    source = Source(["billing", "audit"], {"billing": 10, "audit": 20})
    commits = AdminCommits(source, lambda g: True)  # type: ignore[arg-type]
    assert set(commits.read().committed) == {"billing", "audit"}
    source.listed = []  # the broker restarted: it lists nothing for a moment
    assert dict(commits.read().committed) == {"billing": {ORDERS: 10}, "audit": {ORDERS: 20}}
    del source.committed["audit"]  # deleted meanwhile: no offsets left, not listed
    assert set(commits.read().committed) == {"billing"}
    source.listed = ["fresh"]  # a listed group without offsets is kept, as before
    assert set(commits.read().committed) == {"billing", "fresh"}


def test_the_monitor_samples_known_groups_an_empty_listing_left_out() -> None:
    source = Source([], {"billing": 10, "audit": 20, "other": 5})
    matcher = NameMatcher.of(NameFilter(include=("billing", "audit", "gone")))
    committed, ends = sample_groups(source, matcher, ["billing", "audit", "gone"])  # type: ignore[arg-type]
    assert sorted(committed) == ["audit", "billing"]
    assert ends == {ORDERS: 100}
