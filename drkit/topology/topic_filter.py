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
    repartition topics of the flow's Kafka Streams applications, and the replicas of the
    clusters the flow ``follows`` (carried over by name, never copied:
    :meth:`TopicFilter.carries`).  Always included:
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
        if any(self.policy.is_remote_of(origin, topic) for origin in self.flow.follows):
            return False
        kind = streams_topic(topic, self.flow.kafka_streams)
        if kind is not None:
            return kind is StreamsTopic.CHANGELOG
        return self.matcher.matches(topic)

    def carries(self, topic: str) -> bool:
        """Whether ``topic`` is a replica, on the flow's source, of a cluster the flow
        ``follows`` whose origin topic the flow's topic filter selects (``dc1.orders`` on dc2
        for dc2->dc3 following dc1, when ``orders`` matches): the flow does not copy it, but
        translates groups on it onto the target's replica of the same name (docs/three-dc.md:
        the re-point copied it and wrote the offset syncs)."""
        if is_internal(topic):
            return False
        for origin in self.flow.follows:
            upstream = self.policy.upstream(origin, topic)
            if upstream is not None and self.policy.is_remote_of(origin, topic):
                return not is_internal(upstream) and self.matcher.matches(upstream)
        return False
