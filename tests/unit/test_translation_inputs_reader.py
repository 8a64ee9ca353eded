"""The one reader of translation inputs (drkit.offsets.inputs): each partition's replica, the
replica's bounds, the source's end and log start, and how far a previous round's answers hold -
what the checkpointer, ``drkit offsets translate`` and the failover plan's snapshot translate
with."""

from __future__ import annotations

from drkit.config.loader import load_config_text
from drkit.offsets.inputs import read_inputs, replica_of
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun
from drkit.topology.flow import FlowTopology
from drkit.translation import (
    EVERYWHERE,
    NO_MAPPING,
    NO_REPLICA,
    CannotTranslate,
    PartitionInputs,
    PartitionMapping,
    TargetBounds,
    translate,
    translate_group,
)
from tests.fake_kafka import FakeClusters

A, B, C = (TopicPartition("orders", p) for p in range(3))


def _topology() -> FlowTopology:
    config = load_config_text(
        "clusters: {dc1: {bootstrap_servers: 'a:1'}, dc2: {bootstrap_servers: 'b:1'}}\n"
        "flows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    return FlowTopology.of(config.flows[0])


def _scene() -> tuple[FakeClusters, dict[TopicPartition, PartitionMapping]]:
    """orders[0..2] on dc1 (log start 5, end 100 each); dc2's replica holds two partitions, the
    map knows orders[0] (copied to dc1.orders[0]) and orders[2] (copied onto a topic dc2 no
    longer has)."""
    clusters = FakeClusters("dc1", "dc2")
    source, target = clusters["dc1"], clusters["dc2"]
    source.add_topic("orders", 3)
    target.add_topic("dc1.orders", 2)
    for tp in (A, B, C):
        source.append("orders", tp.partition, 100)
        source.truncate("orders", tp.partition, 5)
    target.append("dc1.orders", 0, 80)
    target.truncate("dc1.orders", 0, 3)
    target.append("dc1.orders", 1, 10)
    mappings = {
        A: PartitionMapping(A, TopicPartition("dc1.orders", 0), [OffsetRun(0, 0, 80)], 80),
        C: PartitionMapping(C, TopicPartition("dc1.gone", 2), [OffsetRun(0, 0, 50)], 50),
    }
    return clusters, mappings


def test_each_partition_gets_its_replica_bounds_and_the_source_s_end_and_log_start() -> None:
    clusters, mappings = _scene()
    topology = _topology()
    target = clusters["dc2"]
    read = read_inputs(
        [A, B, C], mappings, topology, target, clusters["dc1"], listed=target.list_topics()
    )
    assert read.replicas == {
        A: TopicPartition("dc1.orders", 0),
        B: TopicPartition("dc1.orders", 1),  # no map: the flow's name for it
        C: TopicPartition("dc1.gone", 2),  # where its map says
    }
    assert read.replicas[B] == replica_of(B, mappings, topology)
    assert read.inputs == {
        A: PartitionInputs(mappings[A], TargetBounds(3, 80), 100, 0, 5),
        B: PartitionInputs(None, TargetBounds(0, 10), 100, 0, 5),
        # The target does not list the replica's topic: not asked (the fake would refuse
        # it), no bounds.
        C: PartitionInputs(mappings[C], None, 100, 0, 5),
    }
    assert read.live_ends == {A: 100, B: 100, C: 100}
    # The one group translator over them: a number, no map, no replica.
    results = translate_group({C: 7, B: 6, A: 40}, read.inputs)
    assert list(results) == [A, B, C] and results.fresh == 3
    assert results[A] == translate(40, mappings[A], TargetBounds(3, 80), 100, 5)
    assert results[B] == CannotTranslate(B, 6, NO_MAPPING)
    assert results[C] == CannotTranslate(C, 7, NO_REPLICA)


def test_with_the_source_gone_the_ends_are_the_last_ones_seen_and_no_log_start() -> None:
    clusters, mappings = _scene()
    target = clusters["dc2"]
    read = read_inputs(
        [A, B], mappings, _topology(), target, None, listed=target.list_topics(),
        last_ends={A: 90},
    )  # fmt: skip
    assert read.inputs == {
        A: PartitionInputs(mappings[A], TargetBounds(3, 80), 90, 0, None),
        B: PartitionInputs(None, TargetBounds(0, 10), None, 0, None),
    }
    assert read.live_ends == {}


def test_without_a_listing_every_replica_is_asked() -> None:
    """The checkpointer lists nothing: every mapped partition's replica is asked."""
    clusters, mappings = _scene()
    del mappings[C]
    read = read_inputs([A, B], mappings, _topology(), clusters["dc2"], clusters["dc1"])
    assert read.inputs[A].bounds == TargetBounds(3, 80)
    assert read.inputs[B].bounds == TargetBounds(0, 10)


def test_stable_says_how_far_the_previous_round_s_answers_hold() -> None:
    clusters, mappings = _scene()
    topology, target, source = _topology(), clusters["dc2"], clusters["dc1"]
    first = read_inputs([A], mappings, topology, target, source).inputs
    assert first[A].stable == 0  # no previous round
    again = read_inputs([A], mappings, topology, target, source, previous=first).inputs
    assert again[A].stable == EVERYWHERE  # the very map
    grown = {A: PartitionMapping(A, mappings[A].target, [OffsetRun(0, 0, 90)], 90)}
    assert read_inputs([A], grown, topology, target, source, previous=first).inputs[A].stable == 80
