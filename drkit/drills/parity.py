"""Topic and config parity of a flow: does every selected source topic have its replica on the
target, with as many partitions and the same replicable configs?  (Read-only.)"""

from __future__ import annotations

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.drills.report import DrillCheck
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.replication.topic_sync import TopicSynchronizer, plan_topic_sync
from drkit.replication.topology import FlowTopology


def parity_check(config: DrkitConfig, flow: FlowConfig, only: set[str] | None = None) -> DrillCheck:
    """``topic_parity``: the changes topic sync would make, read as findings (none: parity)."""
    topology = FlowTopology.of(flow)
    synchronizer = TopicSynchronizer(
        KafkaAdmin(ClusterEndpoint(flow.source, config.clusters[flow.source])),
        KafkaAdmin(ClusterEndpoint(flow.target, config.clusters[flow.target])),
        topology.selects,
        topology.target_topic,
        flow.target_replication_factor,
        sync_configs=False,
    )
    sources = synchronizer.read_sources(only)
    plan = plan_topic_sync(
        sources, synchronizer.read_targets(sources), topology.target_topic, None, False
    )
    problems = [f"{spec.name} missing" for spec in plan.create]
    problems += [f"{topic} has fewer partitions (source: {n})" for topic, n in plan.add_partitions]
    problems += [
        f"{d.topic} {d.key}={d.target_value} (source: {d.source_value})" for d in plan.drift
    ]
    detail = "; ".join(problems) or f"{len(sources)} topics: replicas, partitions, configs match"
    return DrillCheck("topic_parity", not problems, detail)
