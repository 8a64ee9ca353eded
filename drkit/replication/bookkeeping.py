"""A flow's bookkeeping topics created where they live: progress and offset syncs on the
target, ``heartbeats`` on the source (names: drkit.topology.internal_topics)."""

from __future__ import annotations

from drkit.kafka.admin import TopicSpec
from drkit.kafka.ports import ClusterAdmin
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import HEARTBEATS


def ensure_bookkeeping_topics(
    topology: FlowTopology, source: ClusterAdmin, target: ClusterAdmin
) -> None:
    """Create a flow's progress and offset-sync topics on the target and ``heartbeats`` on the
    source (a topic that exists is left as it is)."""
    rf = topology.flow.target_replication_factor
    progress = {
        "cleanup.policy": "compact",
        "segment.ms": "600000",
        "min.cleanable.dirty.ratio": "0.1",
    }
    target.create_topics(
        [
            TopicSpec(topology.progress_topic, 1, rf, progress),
            # Compacted by run key: runs below the source's log start are trimmed (drkit.offsets);
            # the rest must stay for translation.
            TopicSpec(topology.offset_syncs_topic, 1, rf, {"cleanup.policy": "compact"}),
        ]
    )
    source.create_topics([TopicSpec(HEARTBEATS, 1, None, {"cleanup.policy": "compact"})])
