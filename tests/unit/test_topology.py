"""FlowTopology: the one place a flow's names come from."""

from __future__ import annotations

from drkit.config.model import FlowConfig, NameFilter
from drkit.records import TopicPartition
from drkit.topology.flow import FlowTopology


def _flow(**extra: object) -> FlowConfig:
    return FlowConfig.model_validate({"source": "dc1", "target": "dc2", **extra})


def test_prefix_policy_names_and_bookkeeping_topics() -> None:
    topology = FlowTopology.of(_flow())
    assert topology.target_topic("orders") == "dc1.orders"
    assert topology.target_partition(TopicPartition("orders", 3)) == TopicPartition("dc1.orders", 3)
    assert topology.heartbeats_replica == "dc1.heartbeats"
    assert topology.progress_topic == "drkit-progress.dc1.internal"
    assert topology.offset_syncs_topic == "drkit-offset-syncs.dc1.internal"
    assert topology.checkpoints_topic == "dc1.checkpoints.internal"
    assert topology.replicate_group == "drkit-replicate.dc1.dc2"
    assert topology.transactional_id("h-0") == "drkit-dc1-dc2-h-0"


def test_route_renames_apply_to_every_replica_name_including_heartbeats() -> None:
    topology = FlowTopology.of(
        _flow(
            transforms=[
                {"type": "route", "options": {"pattern": r"^dc1\.(.*)$", "replacement": r"dr.\1"}}
            ]
        )
    )
    assert topology.target_topic("orders") == "dr.orders"
    assert topology.heartbeats_replica == "dr.heartbeats"


def test_selection_excludes_internal_and_remote_topics() -> None:
    topology = FlowTopology.of(_flow(topics={"include": ["orders.*"]}))
    assert topology.selects("orders")
    assert topology.selects("heartbeats")
    assert not topology.selects("payments")
    assert not topology.selects("dc2.orders")  # a replica of the target: never sent back
    assert not topology.selects("drkit-progress.dc1.internal")


def test_a_flow_following_an_origin_carries_its_replicas_by_name_and_never_copies_them() -> None:
    # dc2->dc3 after dc1 was lost (issue 48, docs/three-dc.md): dc2's dc1.orders maps onto
    # dc3's dc1.orders for checkpoints and failover; the workers copy only dc2's own topics.
    flow = FlowConfig.model_validate(
        {"source": "dc2", "target": "dc3", "follows": ["dc1"], "topics": {"include": ["orders"]}}
    )
    topology = FlowTopology.of(flow)
    assert not topology.selects("dc1.orders")
    assert topology.carries("dc1.orders") and topology.translates("dc1.orders")
    assert topology.target_topic("dc1.orders") == "dc1.orders"
    assert topology.selects("orders") and not topology.carries("orders")
    assert topology.target_topic("orders") == "dc2.orders"
    assert not topology.carries("dc1.payments")  # its origin topic is not selected
    assert not topology.carries("dc4.orders") and not topology.carries("dc1.checkpoints.internal")
    # Every topic selected (the default): the replica still is not copied, only carried.
    every = FlowTopology.of(flow.model_copy(update={"topics": NameFilter()}))
    assert not every.selects("dc1.orders") and every.carries("dc1.orders")
    assert every.selects("orders") and every.selects("dc4.orders")
    # Without follows the replica is neither carried nor excluded from the workers' copy.
    plain = FlowTopology.of(FlowConfig.model_validate({"source": "dc2", "target": "dc3"}))
    assert plain.selects("dc1.orders") and not plain.carries("dc1.orders")
    assert plain.target_topic("dc1.orders") == "dc2.dc1.orders"
