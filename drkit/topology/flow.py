"""Every name one flow uses, computed in one place.

A :class:`FlowTopology` answers, for one flow ``source->target``: which source topics it
replicates, what each replica is called on the target (replication policy, then the route
renames of the transform chain), where its bookkeeping lives (progress, offset syncs,
checkpoints, heartbeats) and which consumer group its workers share on the source.  The worker,
the mapping loader, the checkpointer, the probes, the monitor and the accounting spec all ask
it, so they can never disagree about a name (before it existed the prober ignored route
renames).

Built once per flow with :meth:`FlowTopology.of`; immutable and cheap to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from drkit.config.model import FlowConfig
from drkit.records import TopicPartition
from drkit.topology import internal_topics
from drkit.topology.policy import ReplicationPolicy, build_policy
from drkit.topology.streams import StreamsTopic, streams_topic
from drkit.topology.topic_filter import TopicFilter
from drkit.topology.transforms import TransformChain, build_chain


@dataclass(frozen=True)
class FlowTopology:
    """Names of one flow; see the module docstring."""

    flow: FlowConfig
    policy: ReplicationPolicy
    chain: TransformChain

    @classmethod
    def of(cls, flow: FlowConfig) -> FlowTopology:
        """Build the flow's policy and transform chain (plugins included) and wrap them."""
        return cls(flow, build_policy(flow.replication_policy), build_chain(flow.transforms))

    # -- identity ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``source->target``, as on the CLI and in metrics."""
        return self.flow.name

    @property
    def source(self) -> str:
        return self.flow.source

    @property
    def target(self) -> str:
        return self.flow.target

    # -- topics -----------------------------------------------------------------------------

    @cached_property
    def topic_filter(self) -> TopicFilter:
        return TopicFilter.of(self.flow, self.policy)

    def selects(self, source_topic: str) -> bool:
        """Whether the flow replicates ``source_topic`` (its workers copy it)."""
        return self.topic_filter.selects(source_topic)

    def carries(self, source_topic: str) -> bool:
        """Whether ``source_topic`` is a replica of a cluster the flow ``follows``, carried
        over by name and never copied by its workers (:meth:`TopicFilter.carries`)."""
        return bool(self.flow.follows) and self.topic_filter.carries(source_topic)

    def translates(self, source_topic: str) -> bool:
        """Whether the flow's checkpoints and a failover over it translate groups on
        ``source_topic``: what it replicates and what it carries over."""
        return self.selects(source_topic) or self.carries(source_topic)

    def target_topic(self, source_topic: str) -> str:
        """The replica's name on the target: the policy's name after the route renames - but
        a Kafka Streams application's changelog keeps its name (drkit.topology.streams), and
        so does a replica of a followed cluster (``dc1.orders`` stays ``dc1.orders``)."""
        if streams_topic(source_topic, self.flow.kafka_streams) is StreamsTopic.CHANGELOG:
            return source_topic
        if self.carries(source_topic):
            return source_topic
        return self.chain.rename(self.policy.target_topic(self.flow.source, source_topic))

    def target_partition(self, source: TopicPartition) -> TopicPartition:
        """Where records of ``source`` land when the target has the partition (no hashing)."""
        return TopicPartition(self.target_topic(source.topic), source.partition)

    @property
    def heartbeats_replica(self) -> str:
        """The target topic the source cluster's ``heartbeats`` are replicated into."""
        return self.target_topic(internal_topics.HEARTBEATS)

    # -- bookkeeping (all on the target, except the source's heartbeats) -----------------

    @property
    def progress_topic(self) -> str:
        return internal_topics.progress_topic(self.flow.source)

    @property
    def offset_syncs_topic(self) -> str:
        return internal_topics.offset_syncs_topic(self.flow.source)

    @property
    def adopted_topic(self) -> str:
        """MirrorMaker 2's range of a flow drkit adopted (drkit.adoption.adopted)."""
        return internal_topics.adopted_topic(self.flow.source)

    @property
    def control_topic(self) -> str:
        """Flow directives and acks beside the store (drkit.control.channel)."""
        return internal_topics.control_topic(self.flow.source)

    @property
    def checkpoints_topic(self) -> str:
        return internal_topics.checkpoints_topic(self.flow.source)

    @property
    def heartbeats_topic(self) -> str:
        """The topic heartbeats are written to on the source."""
        return internal_topics.HEARTBEATS

    @property
    def checkpoint_group(self) -> str:
        """The consumer group (on the target) whose member holding partition 0 of the
        checkpoints topic runs the flow's checkpoint worker: one at a time, any process."""
        return f"drkit-checkpoints.{self.flow.source}.{self.flow.target}"

    @property
    def replicate_group(self) -> str:
        """The consumer group the flow's workers share on the source."""
        return f"drkit-replicate.{self.flow.source}.{self.flow.target}"

    def transactional_id(self, worker_id: str) -> str:
        """The exactly-once producer id of one worker of this flow on the target."""
        return f"drkit-{self.flow.source}-{self.flow.target}-{worker_id}"
