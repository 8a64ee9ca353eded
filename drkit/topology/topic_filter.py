"""Which source topics (and consumer groups) a flow replicates."""

from __future__ import annotations

import re
from dataclasses import dataclass

from drkit.config.model import FlowConfig, NameFilter
from drkit.topology.internal_topics import HEARTBEATS, is_internal
from drkit.topology.policy import ReplicationPolicy
from drkit.topology.streams import StreamsTopic, streams_topic


@dataclass(frozen=True)
class NameMatcher:
    """Compiled include/exclude regexes, matched against whole names."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, names: NameFilter) -> NameMatcher:
        return cls(
            tuple(re.compile(p) for p in names.include),
            tuple(re.compile(p) for p in names.exclude),
        )

    def matches(self, name: str) -> bool:
        return any(p.fullmatch(name) for p in self.include) and not any(
            p.fullmatch(name) for p in self.exclude
        )


@dataclass(frozen=True)
class TopicFilter:
    """Selects the source topics of one flow.

    Always excluded: internal topics (``__*``, ``*.internal``), topics that are themselves
    replicas of the flow's target cluster (no ping-pong under the prefix policy) and the
    repartition topics of the flow's Kafka Streams applications.  Always included:
    ``heartbeats``, so the target can measure replication latency, and those applications'
    changelogs (drkit.topology.streams).
    """

    flow: FlowConfig
    policy: ReplicationPolicy
    matcher: NameMatcher

    @classmethod
    def of(cls, flow: FlowConfig, policy: ReplicationPolicy) -> TopicFilter:
        return cls(flow, policy, NameMatcher.of(flow.topics))

    def selects(self, topic: str) -> bool:
        if topic == HEARTBEATS:
            return True
        if is_internal(topic) or self.policy.is_remote_of(self.flow.target, topic):
            return False
        kind = streams_topic(topic, self.flow.kafka_streams)
        if kind is not None:
            return kind is StreamsTopic.CHANGELOG
        return self.matcher.matches(topic)
