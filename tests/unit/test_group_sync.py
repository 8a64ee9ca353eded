"""Group-offset sync on the target: empty groups only, forward only, re-checked before writing.

``decide_group_sync`` is pure; ``GroupOffsetSync`` applies it against a ClusterAdmin - here an
in-memory FakeCluster, whose committed offsets are what the assertions read.
"""

from __future__ import annotations

from drkit.offsets.group_sync import GroupOffsetSync, decide_group_sync
from drkit.records import TopicPartition
from tests.fake_kafka import FakeCluster

P0, P1, P2 = (TopicPartition("dc1.orders", p) for p in range(3))


def test_decision_moves_only_forward_and_never_into_an_active_group() -> None:
    translated = {P0: 40, P1: 17, P2: 5}
    decision = decide_group_sync("app", translated, {P0: 40, P1: 30}, target_group_empty=True)
    assert dict(decision.write) == {P2: 5}  # P0 already there, P1 ahead on the target
    busy = decide_group_sync("app", translated, {}, target_group_empty=False)
    assert busy.skipped_active and dict(busy.write) == {}


def test_sync_writes_forward_offsets_into_an_empty_group_idempotently() -> None:
    target = FakeCluster("dc2")
    target.set_group_offsets("app", {P0: 50, P1: 3})
    sync = GroupOffsetSync(target)

    first = sync.sync("app", {P0: 40, P1: 17, P2: 5})

    assert dict(first.write) == {P1: 17, P2: 5}
    assert target.committed("app") == {P0: 50, P1: 17, P2: 5}  # P0 is never moved back
    again = sync.sync("app", {P0: 40, P1: 17, P2: 5})
    assert dict(again.write) == {}
    assert target.calls.count("alter_group_offsets") == 1


def test_an_active_group_is_left_alone_until_it_is_empty_again() -> None:
    target = FakeCluster("dc2")
    target.activate("app", members=3)
    sync = GroupOffsetSync(target)

    skipped = sync.sync("app", {P0: 40})

    assert skipped.skipped_active
    assert sync.active_skips == {"app"}
    assert target.committed("app") == {}
    assert "alter_group_offsets" not in target.calls
    target.deactivate("app")
    written = sync.sync("app", {P0: 40})
    assert dict(written.write) == {P0: 40}
    assert sync.active_skips == set()
    assert target.committed("app") == {P0: 40}


def test_a_consumer_joining_between_the_check_and_the_write_wins() -> None:
    target = FakeCluster("dc2")
    sync = GroupOffsetSync(target)
    # The group is empty when first described; a member joins before the re-check.
    target.before_next("group_offsets", lambda: target.activate("app"))

    rechecked = sync.sync("app", {P0: 40})

    assert rechecked.skipped_active
    assert target.committed("app") == {}
    assert target.calls.count("describe_groups") == 2
    assert "alter_group_offsets" not in target.calls


def test_a_write_the_broker_refuses_is_reported_and_tried_again() -> None:
    target = FakeCluster("dc2")
    sync = GroupOffsetSync(target)
    # ... and one joining after the re-check: the broker refuses the commit itself.
    target.before_next("alter_group_offsets", lambda: target.activate("app"))

    refused = sync.sync("app", {P0: 40})

    assert refused.failed is not None and "active members" in refused.failed
    assert dict(refused.write) == {}
    assert target.committed("app") == {}
    assert sync.unsynced == {"app"}
    target.deactivate("app")
    assert dict(sync.sync("app", {P0: 40}).write) == {P0: 40}
    assert sync.unsynced == set()
    assert target.committed("app") == {P0: 40}


def test_a_group_gone_from_the_source_is_no_longer_retried() -> None:
    target = FakeCluster("dc2")
    target.activate("app")
    sync = GroupOffsetSync(target)
    sync.sync("app", {P0: 40})
    assert sync.unsynced == {"app"}
    sync.retain({"other"})
    assert sync.unsynced == set() and sync.active_skips == set()
