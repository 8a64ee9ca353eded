"""Topic and config parity of a flow: does every selected source topic have its replica on the
target, with as many partitions and the same replicable configs?  (Read-only.)"""

from __future__ import annotations

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.drills.report import DrillCheck
from drkit.kafka import ClusterEndpoint
from drkit.kafka.ports import AdminFactory
from drkit.replication.topic_sync import TopicSynchronizer, differences
from drkit.topology.flow import FlowTopology


def parity_check(
    config: DrkitConfig, flow: FlowConfig, connect: AdminFactory, only: set[str] | None = None
) -> DrillCheck:
    """``topic_parity``: the changes topic sync would make, read as findings (none: parity)."""
    topology = FlowTopology.of(flow)
    synchronizer = TopicSynchronizer(
        connect(ClusterEndpoint(flow.source, config.clusters[flow.source])),
        connect(ClusterEndpoint(flow.target, config.clusters[flow.target])),
        topology.selects,
        topology.target_topic,
        flow.target_replication_factor,
        sync_configs=False,
    )
    selected, plan = synchronizer.compare(only)
    problems = differences(plan)
    detail = "; ".join(problems) or f"{selected} topics: replicas, partitions, configs match"
    return DrillCheck("topic_parity", not problems, detail)
