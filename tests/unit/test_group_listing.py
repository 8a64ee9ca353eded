"""A group listing that names no group must not make groups vanish from the monitor's status
or from the checkpointer's round (drkit.kafka.ports.read_group_offsets).

Kafka's listing is best effort: a broker that has just started answers with no group and no
error until it leads ``__consumer_offsets`` (a restarted local broker: 0 groups listed, 3,306
a second later).  The groups already known are asked too; one the listing leaves out and that
has no offsets left is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry

from drkit.config import load_config_text
from drkit.config.model import NameFilter
from drkit.health.metrics import MonitorMetrics
from drkit.health.monitor import Monitor, sample_groups
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.admin_base import GroupOffsets
from drkit.offsets.commit_follower import AdminCommits, CommitFollower
from drkit.records import TopicPartition
from drkit.store import StateStore
from drkit.topology.topic_filter import NameMatcher

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


def test_the_monitor_forgets_a_group_that_is_gone_and_keeps_the_rest(tmp_path: Path) -> None:
    """Known groups are asked every round; one found gone (not listed, no offsets) leaves the
    monitor's state, or every later round would ask for it again."""
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:9'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:10'}\n"
        "flows:\n  - {source: dc1, target: dc2, topics: {include: [orders]}}\n",
        env={},
    )
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    metrics = MonitorMetrics.create(CollectorRegistry())
    monitor = Monitor(config, "o1", store, metrics, {}, connect=KafkaAdmin)
    flow = config.flows[0]
    matcher = NameMatcher.of(flow.groups)
    source = Source(["billing", "audit"], {"billing": 10, "audit": 20})
    monitor.record_groups(flow, *sample_groups(source, matcher, []))  # type: ignore[arg-type]
    known = [g for (_, g) in monitor._group_states]
    assert sorted(known) == ["audit", "billing"]
    source.listed = []  # a restarted broker: nothing listed, both still there
    monitor.record_groups(flow, *sample_groups(source, matcher, known))  # type: ignore[arg-type]
    assert sorted(g for (_, g) in monitor._group_states) == ["audit", "billing"]
    del source.committed["audit"]  # deleted
    known = [g for (_, g) in monitor._group_states]
    monitor.record_groups(flow, *sample_groups(source, matcher, known))  # type: ignore[arg-type]
    assert [g for (_, g) in monitor._group_states] == ["billing"]


def test_a_following_checkpointer_starts_from_the_checkpointed_groups_too() -> None:
    """offsets_topic mode: the first snapshot asks the groups the checkpoints name, or a
    follower started inside the window would follow an idle group only once it commits."""
    source = Source([], {"billing": 10, "audit": 20})
    follower = CommitFollower(source, lambda g: True, lambda: ["billing", "audit", "gone"])  # type: ignore[arg-type]
    assert follower._snapshot(5.0) == {"billing": {ORDERS: 10}, "audit": {ORDERS: 20}}
