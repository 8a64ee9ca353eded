"""Topic management: make the target mirror the source's selected topics.

:func:`plan_topic_sync` is pure: from the source and target topic states it decides what to
create, which partitions to add, which configs to copy and which drift to report.
:class:`TopicSynchronizer` reads the clusters and carries the plan out.  It never deletes a topic,
never removes partitions and never unsets a config on the target.

Configs copied: the configs set on the source topic itself (not broker-wide defaults, which are
the target brokers' business), non-sensitive and writable, except the ones below, which describe
one cluster's brokers rather than the data and would be wrong or harmful on another cluster (the
set MirrorMaker 2 excludes by default, plus the newer timestamp bounds):

* ``follower.replication.throttled.replicas``, ``leader.replication.throttled.replicas`` -
  broker ids of the source cluster;
* ``message.timestamp.type``, ``message.timestamp.difference.max.ms``,
  ``message.timestamp.before.max.ms``, ``message.timestamp.after.max.ms`` - the target must
  keep the source's CreateTime and accept old records;
* ``unclean.leader.election.enable``, ``min.insync.replicas`` - durability is the target's own
  policy (its replication factor may differ).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from drkit.errors import ReplicationError
from drkit.kafka.admin import ConfigValue, TopicSpec
from drkit.kafka.ports import ClusterAdmin
from drkit.topology.internal_topics import is_internal

log = logging.getLogger(__name__)

EXCLUDED_CONFIGS = frozenset(
    {
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "unclean.leader.election.enable",
        "min.insync.replicas",
    }
)


def replicable_configs(configs: Mapping[str, ConfigValue]) -> dict[str, str]:
    """The configs of a source topic that are copied to its replica."""
    return {
        name: entry.value
        for name, entry in configs.items()
        if entry.value is not None
        and entry.set_on_topic
        and not entry.is_sensitive
        and not entry.read_only
        and name not in EXCLUDED_CONFIGS
    }


@dataclass(frozen=True)
class TopicState:
    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigDrift:
    topic: str
    key: str
    source_value: str
    target_value: str | None


@dataclass(frozen=True)
class TopicSyncPlan:
    create: tuple[TopicSpec, ...] = ()
    add_partitions: tuple[tuple[str, int], ...] = ()
    set_configs: tuple[tuple[str, Mapping[str, str]], ...] = ()
    drift: tuple[ConfigDrift, ...] = ()
    # (target topic, source partitions, target partitions) where the target has more
    # partitions than the source: records keep their partition number, which still works, but
    # the extra target partitions stay empty.  Fewer is impossible after add_partitions.
    wider_target: tuple[tuple[str, int, int], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.create or self.add_partitions or self.set_configs)


def plan_topic_sync(
    sources: Mapping[str, TopicState],
    targets: Mapping[str, TopicState],
    target_name: Callable[[str], str],
    replication_factor: int | None,
    sync_configs: bool,
) -> TopicSyncPlan:
    """Decide the target changes for the selected ``sources`` (pure).

    ``targets`` holds the current state of the target topics (by target name) with their
    current values for every key of the corresponding source's replicable configs.
    """
    create: list[TopicSpec] = []
    grow: list[tuple[str, int]] = []
    set_configs: list[tuple[str, Mapping[str, str]]] = []
    drift: list[ConfigDrift] = []
    wider: list[tuple[str, int, int]] = []
    # Route transforms may merge topics: one replica then holds the widest of its sources, and
    # is created or grown once (a name twice in one request is refused: INVALID_REQUEST).
    widest: dict[str, int] = {}
    for name, source in sources.items():
        replica = target_name(name)
        widest[replica] = max(widest.get(replica, 0), source.partitions)
    planned: set[str] = set()
    for name in sorted(sources):
        source = sources[name]
        replica = target_name(name)
        current = targets.get(replica)
        if current is None:
            if replica not in planned:
                planned.add(replica)
                create.append(
                    TopicSpec(replica, widest[replica], replication_factor, dict(source.configs))
                )
            continue
        if current.partitions < widest[replica]:
            if replica not in planned:
                planned.add(replica)
                grow.append((replica, widest[replica]))
        elif current.partitions > widest[replica]:
            wider.append((replica, source.partitions, current.partitions))
        differing = {
            key: value for key, value in source.configs.items() if current.configs.get(key) != value
        }
        drift.extend(
            ConfigDrift(replica, key, value, current.configs.get(key))
            for key, value in sorted(differing.items())
        )
        if differing and sync_configs:
            set_configs.append((replica, differing))
    return TopicSyncPlan(tuple(create), tuple(grow), tuple(set_configs), tuple(drift), tuple(wider))


def internal_replicas(
    sources: Mapping[str, TopicState], target_name: Callable[[str], str]
) -> list[tuple[str, str]]:
    """(source topic, replica) for each selected topic whose replica name is an internal one
    - Kafka's own (``__consumer_offsets``) or drkit's bookkeeping (``*.internal``): only a route
    transform can make one, and copying records into it would corrupt the target (pure)."""
    named = ((name, target_name(name)) for name in sorted(sources))
    return [(name, replica) for name, replica in named if is_internal(replica)]


def differences(plan: TopicSyncPlan) -> list[str]:
    """What differs between the selected source topics and their replicas, one line each (a
    replica missing, fewer or more partitions, a replicable config with another value)."""
    lines = [f"{spec.name} missing" for spec in plan.create]
    lines += [f"{topic} has fewer partitions (source: {n})" for topic, n in plan.add_partitions]
    lines += [
        f"{topic} has more partitions ({target}; source: {source})"
        for topic, source, target in plan.wider_target
    ]
    lines += [f"{d.topic} {d.key}={d.target_value} (source: {d.source_value})" for d in plan.drift]
    return lines


class TopicSynchronizer:
    """Reads both clusters, plans and applies topic changes for one flow.

    Thread-safety: call from one thread at a time (the worker's topic-sync thread or the
    rebalance callback, which the worker serialises with a lock).
    """

    def __init__(
        self,
        source: ClusterAdmin,
        target: ClusterAdmin,
        selects: Callable[[str], bool],
        target_name: Callable[[str], str],
        replication_factor: int | None,
        sync_configs: bool,
    ) -> None:
        self.source = source
        self.target = target
        self.selects = selects
        self.target_name = target_name
        self.replication_factor = replication_factor
        self.sync_configs = sync_configs
        self.last_plan = TopicSyncPlan()
        self.source_partitions: dict[str, int] = {}

    def read_sources(self, only: set[str] | None = None) -> dict[str, TopicState]:
        listed = self.source.list_topics()
        names = [n for n in listed if self.selects(n) and (only is None or n in only)]
        configs = self.source.topic_configs(names) if names else {}
        return {
            name: TopicState(
                name, listed[name].partition_count, replicable_configs(configs.get(name, {}))
            )
            for name in names
        }

    def read_targets(self, sources: Mapping[str, TopicState]) -> dict[str, TopicState]:
        listed = self.target.list_topics()
        wanted = {self.target_name(n): s for n, s in sources.items()}
        present = [name for name in wanted if name in listed]
        configs = self.target.topic_configs(present) if present else {}
        out: dict[str, TopicState] = {}
        for name in present:
            entries = configs.get(name, {})
            current = {
                key: entries[key].value
                for key in wanted[name].configs
                if key in entries and entries[key].value is not None
            }
            out[name] = TopicState(name, listed[name].partition_count, current)  # type: ignore[arg-type]
        return out

    def compare(self, only: set[str] | None = None) -> tuple[int, TopicSyncPlan]:
        """Read-only: (selected source topics, the changes sync would make) - the parity of the
        source topics and their replicas, for checks and status."""
        sources = self.read_sources(only)
        plan = plan_topic_sync(sources, self.read_targets(sources), self.target_name, None, False)
        return len(sources), plan

    def sync(self, only: set[str] | None = None) -> TopicSyncPlan:
        """Bring the target in line with the source (for all selected topics, or ``only``).

        Raises ReplicationError (the flow ends for good, naming them) when a replica would be
        an internal topic: no retry makes that right, and nothing is created or written."""
        sources = self.read_sources(only)
        internal = internal_replicas(sources, self.target_name)
        if internal:
            named = ", ".join(f"{name} -> {replica}" for name, replica in internal)
            raise ReplicationError(
                f"replica topic names that are internal topics (Kafka's own or drkit's "
                f"bookkeeping): {named} - a route transform maps onto them; nothing was "
                "copied into them"
            )
        plan = plan_topic_sync(
            sources,
            self.read_targets(sources),
            self.target_name,
            self.replication_factor,
            self.sync_configs,
        )
        self.apply(plan)
        found = {n: s.partitions for n, s in sources.items()}
        if only is None:
            # The topics selected now: one deleted since leaves the worker's subscription (a
            # subscription holding only deleted topics would never become empty, and the flow
            # would never notice it has nothing left to read).
            self.source_partitions = found
            self.last_plan = plan
        else:
            self.source_partitions.update(found)
        return plan

    def apply(self, plan: TopicSyncPlan) -> None:
        if plan.create:
            self.target.create_topics(plan.create)
            for spec in plan.create:
                log.info(
                    "created target topic",
                    extra={"topic": spec.name, "partitions": spec.partitions},
                )
        for topic, count in plan.add_partitions:
            self.target.create_partitions(topic, count)
            log.info("added target partitions", extra={"topic": topic, "partitions": count})
        for topic, configs in plan.set_configs:
            self.target.set_topic_configs(topic, configs)
            log.info(
                "synced topic configs", extra={"topic": topic, "keys": ",".join(sorted(configs))}
            )
        for drift in plan.drift:
            if not self.sync_configs:
                log.warning(
                    "topic config drift",
                    extra={
                        "topic": drift.topic,
                        "key": drift.key,
                        "source": drift.source_value,
                        "target": drift.target_value,
                    },
                )
