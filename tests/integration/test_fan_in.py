"""Fan-in on real brokers: two sources replicate into one aggregate cluster (issue 48, item 2).

Sources ``a`` and ``b`` both have a topic ``orders`` and a group of the same name; the aggregate
holds ``a.orders`` and ``b.orders``.  Each flow's copies, bookkeeping and checkpoints are its
own - no record or group position of one source is attributed to the other (provenance).

A config has one active pointer: a failover of ``a`` into the aggregate would put it there
for every flow and so fence ``b``, whose applications never moved.  drkit refuses that move
in a fan-in config (a blocker naming ``b``); each source of a fan-in runs under a config and
state store of its own, and then a failover of one source moves only that source's groups
and protections while the other keeps replicating, its groups untouched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from drkit.config import load_config
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_all, produce_batch
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.records import TopicPartition
from drkit.replication.progress import ProgressStore
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.failover_support import PARTITIONS, drkit, resumes_at
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, check_copy, wait_until

PER_PARTITION = 100
# The same group name on both sources, at different positions.
AT = {"a": {0: 10, 1: 20, 2: 30}, "b": {0: 70, 1: 80, 2: 90}}


def test_two_sources_replicate_into_one_aggregate_each_on_its_own_and_one_config_refuses_a_move(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, scratch: ClusterUnderTest, names: Names,
    tmp_path: Path,
) -> None:  # fmt: skip
    topic, group = names.topic("orders"), names.group("billing")
    tag = names.prefix[-6:]
    a, b, agg = f"a{tag}", f"b{tag}", f"agg{tag}"
    setup = _config(tmp_path, {a: dc1, b: dc2, agg: scratch}, [(a, agg), (b, agg)], topic, group)
    flows = {f.source: FlowTopology.of(f) for f in setup.config.flows}
    for alias in (a, b):
        _source_with_group(setup.endpoint(alias), alias, topic, group)
    with Replicator(setup, log_dir=tmp_path):
        for alias in (a, b):
            _wait_copied(setup, flows[alias], topic, PER_PARTITION)
        # Each flow's checkpoints state its own source's positions of the group.
        wanted = {
            alias: {TopicPartition(topic, p): o for p, o in AT[alias[:1]].items()}
            for alias in (a, b)
        }
        wait_until(
            lambda: _checkpointed(setup, flows, group) == wanted,
            60,
            what=lambda: f"both flows' checkpoints: {_checkpointed(setup, flows, group)}",
        )
    aggregate = setup.endpoint(agg)
    for alias in (a, b):
        replica = flows[alias].target_topic(topic)
        copies = consume_all(aggregate, replica, expected=PARTITIONS * PER_PARTITION, timeout_s=60)
        source = consume_all(setup.endpoint(alias), topic, timeout_s=60)
        check = check_copy(source, copies)
        assert check.exact, (alias, check.summary())
        # Provenance names this source only, and the values are its own.
        origins = {Provenance.decode(r.header(SOURCE_HEADER) or b"").cluster for r in copies}
        assert origins == {alias}, (replica, origins)
        assert all((r.value or b"").startswith(f"{alias}-".encode()) for r in copies), replica
    # One config, one pointer: moving a's applications would fence b's. Refused, nothing done.
    plan = drkit(setup, "failover", "--from", a, "--to", agg, "--plan", "-o", "json")
    assert plan.code == 4, plan.out + plan.err
    blockers = {f["code"]: f["message"] for f in plan.json()["blockers"]}
    assert "fan_in" in blockers and b in blockers["fan_in"], blockers
    refused = drkit(setup, "failover", "--from", a, "--to", agg, "--yes", "-o", "json")
    assert refused.code == 4, refused.out + refused.err
    assert KafkaAdmin(setup.endpoint(b)).write_denied() & {topic} == set()


def test_a_failover_of_one_source_of_a_fan_in_moves_only_its_groups(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, scratch: ClusterUnderTest, names: Names,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Each source under a config and store of its own, the aggregate shared: ``a`` (scratch)
    dies and fails over into the aggregate; ``b`` replicates on, its group untouched there."""
    topic, group = names.topic("orders"), names.group("billing")
    tag = names.prefix[-6:]
    a, b, agg = f"a{tag}", f"b{tag}", f"agg{tag}"
    clusters = {a: scratch, b: dc1, agg: dc2}
    setups = {
        alias: _config(tmp_path / alias, clusters, [(alias, agg)], topic, group) for alias in (a, b)
    }
    flows = {alias: FlowTopology.of(s.config.flows[0]) for alias, s in setups.items()}
    replicas = {alias: flows[alias].target_topic(topic) for alias in (a, b)}
    for alias in (a, b):
        _source_with_group(setups[alias].endpoint(alias), alias, topic, group)
    aggregate = setups[a].endpoint(agg)
    with (
        Replicator(setups[a], log_dir=tmp_path),
        Replicator(setups[b], log_dir=tmp_path),
    ):
        for alias in (a, b):
            _wait_copied(setups[alias], flows[alias], topic, PER_PARTITION)
        wanted = {
            alias: {TopicPartition(topic, p): o for p, o in AT[alias[:1]].items()}
            for alias in (a, b)
        }
        wait_until(
            lambda: (
                {
                    alias: _checkpointed(setups[alias], {alias: flows[alias]}, group)[alias]
                    for alias in (a, b)
                }
                == wanted
            ),
            60,
            what="each flow's checkpoints",
        )
        # b's group also has a position on the aggregate already (its consumers read there).
        on_b = {TopicPartition(replicas[b], p): 5 * (p + 1) for p in range(PARTITIONS)}
        commit_group_offsets(aggregate, group, on_b)
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)
        done = drkit(setups[a], "failover", "--from", a, "--to", agg, "--yes", "-o", "json")
        assert done.code == 0, done.err + done.out
        # b takes writes and replicates on into the aggregate.
        fill = [(None, f"{b}-{p}-late".encode()) for p in range(PARTITIONS)]
        for p in range(PARTITIONS):
            produce_batch(setups[b].endpoint(b), topic, fill[p : p + 1], partition=p)
        _wait_copied(setups[b], flows[b], topic, PER_PARTITION + 1)
    run = done.json()
    assert run["state"] == "succeeded", run
    moved = {
        g["group"]: {m["source_topic"] for m in g["partitions"]} for g in run["plan"]["groups"]
    }
    assert moved == {group: {topic}}, moved
    committed = KafkaAdmin(aggregate).group_offsets(group).offsets
    # a's positions on a's replica, exactly (the next record is the one it had not read) ...
    on_a = {TopicPartition(replicas[a], p): o for p, o in AT["a"].items()}
    assert {tp: committed.get(tp) for tp in on_a} == on_a
    assert resumes_at(aggregate, on_a) == on_a
    # ... b's untouched, and nothing of b's fenced.
    assert {tp: committed.get(tp) for tp in on_b} == on_b
    assert KafkaAdmin(setups[b].endpoint(b)).write_denied() & {topic} == set()
    # b can still fail over on its own: its pointer is its own.
    plan = drkit(setups[b], "failover", "--from", b, "--to", agg, "--plan", "-o", "json")
    assert plan.code == 0, plan.out + plan.err
    assert plan.json()["pointer"]["from"] in (None, b), plan.json()["pointer"]


def _config(
    directory: Path,
    clusters: dict[str, ClusterUnderTest],
    flows: list[tuple[str, str]],
    topic: str,
    group: str,
) -> FlowSetup:
    """A config of ``clusters`` (alias -> cluster) and ``flows`` (source, target) replicating
    ``topic`` with ``group``; its state dir and store in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "clusters": {
            alias: {"bootstrap_servers": cluster.bootstrap_servers}
            for alias, cluster in clusters.items()
        },
        "flows": [
            {
                "source": source,
                "target": target,
                "topics": {"include": [re.escape(topic)]},
                "groups": {"include": [re.escape(group)]},
            }
            for source, target in flows
        ],
        "state_store": {"url": f"sqlite:///{directory / 'drkit.db'}"},
    }
    path = directory / "drkit.yaml"
    path.write_text(yaml.safe_dump(document))
    return FlowSetup(path, load_config(path), flows[0][0], flows[0][1])


def _source_with_group(endpoint: ClusterEndpoint, alias: str, topic: str, group: str) -> None:
    KafkaAdmin(endpoint).create_topics([TopicSpec(topic, PARTITIONS)])
    for p in range(PARTITIONS):
        values = [(None, f"{alias}-{p}-{i}".encode()) for i in range(PER_PARTITION)]
        produce_batch(endpoint, topic, values, partition=p)
    commit_group_offsets(endpoint, group, {TopicPartition(topic, p): o
                                           for p, o in AT[alias[:1]].items()})  # fmt: skip


def _wait_copied(setup: FlowSetup, flow: FlowTopology, topic: str, count: int) -> None:
    def progress() -> dict[int, int]:
        store = ProgressStore(setup.endpoint(flow.target), flow.progress_topic, missing_ok=True)
        try:
            return {tp.partition: p.next_offset for tp, p in store.refresh().items()
                    if tp.topic == topic}  # fmt: skip
        finally:
            store.close()

    wait_until(lambda: progress() == dict.fromkeys(range(PARTITIONS), count), 60,
               what=lambda: f"{flow.name} copied {count} a partition: {progress()}")  # fmt: skip


def _checkpointed(
    setup: FlowSetup, flows: dict[str, FlowTopology], group: str
) -> dict[str, dict[TopicPartition, int]]:
    """Per source alias: the group's positions its flow's checkpoints state."""
    out = {}
    for alias, flow in flows.items():
        store = CheckpointStore(setup.endpoint(flow.target), flow.checkpoints_topic)
        try:
            out[alias] = store.refresh().committed_by_group.get(group, {})
        finally:
            store.close()
    return out
