"""A synchronous, typed facade over confluent-kafka's AdminClient.

Every call takes a deadline (``timeout_s``), unwraps the futures, retries retriable broker errors
until the deadline (tenacity) and raises drkit exceptions.  Results are frozen value objects.
Thread-safety: one ``KafkaAdmin`` may be shared by threads (librdkafka's admin client is).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as _RdTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from drkit.errors import (
    FatalKafkaError,
    KafkaError,
    RetriableKafkaError,
    UnreachableClusterError,
)
from drkit.kafka.clients import ClusterEndpoint, client_settings
from drkit.kafka.errors import is_code, translate
from drkit.kafka.records import TopicPartition

T = TypeVar("T")


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class ConfigValue:
    """A topic config entry as the broker reports it."""

    value: str | None
    is_default: bool
    is_sensitive: bool
    read_only: bool
    # Where the value comes from: "DYNAMIC_TOPIC_CONFIG" when set on the topic itself.
    source: str = "UNKNOWN_CONFIG"

    @property
    def set_on_topic(self) -> bool:
        return self.source == "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class GroupOffsets:
    """Committed offsets of one consumer group."""

    group: str
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str
    members: int

    @property
    def is_empty(self) -> bool:
        """True when no member is active: the only state in which offsets may be written."""
        return self.state.upper() in ("EMPTY", "DEAD", "UNKNOWN") and self.members == 0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = -1
    configs: Mapping[str, str] | None = None


def _source_name(source: object) -> str:
    """confluent-kafka reports a config's source as an int; name it like the enum does."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


class KafkaAdmin:
    """Admin operations against one cluster."""

    def __init__(
        self, endpoint: ClusterEndpoint, default_timeout_s: float = 15.0, isolate: bool = True
    ) -> None:
        self.endpoint = endpoint
        self.default_timeout_s = default_timeout_s
        # Consumer-group requests run in a helper process (see drkit.kafka.isolated) unless
        # this instance *is* that helper.
        self.isolate = isolate
        self._client = AdminClient(client_settings(endpoint))

    def _isolated(self, method: str, timeout_s: float | None, *args: Any) -> Any:
        from drkit.kafka.isolated import helper_for

        helper = helper_for(self.endpoint, self.default_timeout_s)
        return helper.call(method, *args, timeout_s=self._deadline(timeout_s))

    # -- helpers --------------------------------------------------------------------------

    def _deadline(self, timeout_s: float | None) -> float:
        return self.default_timeout_s if timeout_s is None else timeout_s

    def _call(self, context: str, timeout_s: float | None, fn: Callable[[float], T]) -> T:
        """Run ``fn(per_try_timeout)``, retrying retriable failures until the deadline."""
        deadline = self._deadline(timeout_s)

        @retry(
            retry=retry_if_exception_type(RetriableKafkaError),
            stop=stop_after_delay(deadline),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            reraise=True,
        )
        def attempt() -> T:
            try:
                return fn(max(1.0, deadline))
            except KafkaException as err:
                raise translate(err, f"{self.endpoint.alias}: {context}") from None
            except TimeoutError:
                raise RetriableKafkaError(
                    f"{self.endpoint.alias}: {context}: timed out after {deadline:.0f}s"
                ) from None

        return attempt()

    @staticmethod
    def _result(future: Future[Any], timeout: float) -> Any:
        return future.result(timeout=timeout)

    # -- cluster --------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 30.0) -> int:
        """Block until the cluster answers a metadata request; returns its broker count.

        Raises UnreachableClusterError naming the cluster when the deadline passes.
        """
        try:
            return self._call(
                "metadata", timeout_s, lambda t: len(self._client.list_topics(timeout=t).brokers)
            )
        except KafkaError as err:
            raise UnreachableClusterError(
                self.endpoint.alias, self.endpoint.bootstrap_servers, str(err).split(": ")[-1]
            ) from None

    def describe_cluster(self, timeout_s: float | None = None) -> tuple[str | None, int, int]:
        """(cluster id, controller id, broker count), from metadata.

        Not DescribeCluster: that request can abort the process when a broker restarts
        mid-request (drkit.kafka.isolated).
        """

        def run(t: float) -> tuple[str | None, int, int]:
            metadata = self._client.list_topics(timeout=t)
            return metadata.cluster_id, int(metadata.controller_id), len(metadata.brokers)

        return self._call("describe cluster", timeout_s, run)

    # -- topics ---------------------------------------------------------------------------

    def list_topics(
        self, timeout_s: float | None = None, include_internal: bool = False
    ) -> dict[str, TopicInfo]:
        """Every topic with its partitions (leader, replicas, ISR)."""

        def run(t: float) -> dict[str, TopicInfo]:
            metadata = self._client.list_topics(timeout=t)
            topics: dict[str, TopicInfo] = {}
            for name, topic in metadata.topics.items():
                if topic.error is not None:
                    if is_code(topic.error, "UNKNOWN_TOPIC_OR_PART"):
                        continue
                    raise translate(topic.error, f"topic {name}")
                if not include_internal and name.startswith("__"):
                    continue
                parts = tuple(
                    PartitionInfo(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                    for p in sorted(topic.partitions.values(), key=lambda p: p.id)
                )
                topics[name] = TopicInfo(name, parts)
            return topics

        return self._call("list topics", timeout_s, run)

    def create_topics(self, specs: Iterable[TopicSpec], timeout_s: float | None = None) -> None:
        """Create topics; a topic that already exists is not an error."""
        new = [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                config=dict(s.configs or {}),
            )
            for s in specs
        ]
        if not new:
            return

        def run(t: float) -> None:
            futures = self._client.create_topics(new, request_timeout=t, operation_timeout=t)
            for name, future in futures.items():
                try:
                    future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "TOPIC_ALREADY_EXISTS"):
                        continue
                    raise translate(err, f"create topic {name}") from None

        self._call("create topics", timeout_s, run)

    def create_partitions(self, topic: str, total: int, timeout_s: float | None = None) -> None:
        """Grow ``topic`` to ``total`` partitions (never shrinks)."""

        def run(t: float) -> None:
            futures = self._client.create_partitions(
                [NewPartitions(topic, total)], request_timeout=t, operation_timeout=t
            )
            for future in futures.values():
                try:
                    future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "INVALID_PARTITIONS"):
                        return  # already has at least ``total`` partitions
                    raise

        self._call(f"create partitions {topic}", timeout_s, run)

    def delete_topics(self, topics: Iterable[str], timeout_s: float | None = None) -> None:
        """Delete topics (tests and benchmarks only; drkit never deletes on a target)."""
        names = list(topics)
        if not names:
            return

        def run(t: float) -> None:
            for future in self._client.delete_topics(names, operation_timeout=t).values():
                try:
                    future.result(timeout=t)
                except KafkaException as err:
                    if not is_code(err.args[0], "UNKNOWN_TOPIC_OR_PART"):
                        raise

        self._call("delete topics", timeout_s, run)

    def topic_configs(
        self, topics: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, dict[str, ConfigValue]]:
        """Every config entry of each topic."""
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in topics]
        if not resources:
            return {}

        def run(t: float) -> dict[str, dict[str, ConfigValue]]:
            out: dict[str, dict[str, ConfigValue]] = {}
            futures = self._client.describe_configs(resources, request_timeout=t)
            for resource, future in futures.items():
                entries = future.result(timeout=t)
                out[resource.name] = {
                    name: ConfigValue(
                        entry.value,
                        bool(entry.is_default),
                        bool(entry.is_sensitive),
                        bool(entry.is_read_only),
                        _source_name(entry.source),
                    )
                    for name, entry in entries.items()
                }
            return out

        return self._call("describe topic configs", timeout_s, run)

    def set_topic_configs(
        self, topic: str, configs: Mapping[str, str], timeout_s: float | None = None
    ) -> None:
        """Set (incrementally) the given configs of ``topic``; other configs are untouched."""
        if not configs:
            return
        entries = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)

        def run(t: float) -> None:
            for future in self._client.incremental_alter_configs(
                [resource], request_timeout=t
            ).values():
                future.result(timeout=t)

        self._call(f"alter configs of {topic}", timeout_s, run)

    # -- offsets --------------------------------------------------------------------------

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        which: str = "latest",
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, int]:
        """Earliest or latest (high watermark) offsets; ``which`` is "earliest" or "latest"."""
        spec = (
            OffsetSpec.latest()  # type: ignore[no-untyped-call]
            if which == "latest"
            else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        )
        request = {_RdTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        if not request:
            return {}

        def run(t: float) -> dict[TopicPartition, int]:
            futures = self._client.list_offsets(request, request_timeout=t)
            return {
                TopicPartition(tp.topic, tp.partition): int(future.result(timeout=t).offset)
                for tp, future in futures.items()
            }

        return self._call(f"list {which} offsets", timeout_s, run)

    def topic_offsets(
        self, topic: str, timeout_s: float | None = None
    ) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: (log start offset, high watermark)."""
        info = self.list_topics(timeout_s, include_internal=True).get(topic)
        if info is None:
            raise FatalKafkaError(f"{self.endpoint.alias}: topic {topic} does not exist")
        tps = [TopicPartition(topic, p.partition) for p in info.partitions]
        start = self.list_offsets(tps, "earliest", timeout_s)
        end = self.list_offsets(tps, "latest", timeout_s)
        return {tp.partition: (start[tp], end[tp]) for tp in tps}

    # -- consumer groups ------------------------------------------------------------------

    def list_groups(self, timeout_s: float | None = None) -> dict[str, str]:
        """Every consumer group with its state name."""

        def run(t: float) -> dict[str, str]:
            result = self._client.list_consumer_groups(request_timeout=t).result(timeout=t)
            return {
                g.group_id: (g.state.name if g.state is not None else "UNKNOWN")
                for g in result.valid
            }

        return self._call("list consumer groups", timeout_s, run)

    def _direct_describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        names = list(groups)
        if not names:
            return {}

        def run(t: float) -> dict[str, GroupState]:
            futures = self._client.describe_consumer_groups(names, request_timeout=t)
            out: dict[str, GroupState] = {}
            for name, future in futures.items():
                desc = future.result(timeout=t)
                state = desc.state.name if desc.state is not None else "UNKNOWN"
                out[name] = GroupState(name, state, len(desc.members))
            return out

        return self._call("describe consumer groups", timeout_s, run)

    def _direct_group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        """The committed offsets of ``group`` (partitions without a commit are left out)."""

        def run(t: float) -> GroupOffsets:
            futures = self._client.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=t
            )
            result = futures[group].result(timeout=t)
            offsets = {
                TopicPartition(tp.topic, tp.partition): int(tp.offset)
                for tp in result.topic_partitions
                if tp.offset >= 0 and tp.error is None
            }
            return GroupOffsets(group, offsets)

        return self._call(f"offsets of group {group}", timeout_s, run)

    def _direct_groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        """Committed offsets of many groups: one request each, all in flight at once.

        Groups that vanished between listing and this call are left out.
        """
        names = list(groups)
        if not names:
            return {}

        def run(t: float) -> dict[str, GroupOffsets]:
            futures = {
                name: self._client.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(name)], request_timeout=t
                )[name]
                for name in names
            }
            out: dict[str, GroupOffsets] = {}
            for name, future in futures.items():
                try:
                    result = future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "GROUP_ID_NOT_FOUND"):
                        continue
                    raise
                out[name] = GroupOffsets(
                    name,
                    {
                        TopicPartition(tp.topic, tp.partition): int(tp.offset)
                        for tp in result.topic_partitions
                        if tp.offset >= 0 and tp.error is None
                    },
                )
            return out

        return self._call("offsets of groups", timeout_s, run)

    def _direct_alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        """Commit ``offsets`` for ``group``; the broker refuses if the group has active members."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            group, [_RdTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        )

        def run(t: float) -> None:
            futures = self._client.alter_consumer_group_offsets([request], request_timeout=t)
            result = futures[group].result(timeout=t)
            for tp in result.topic_partitions:
                if tp.error is not None:
                    raise translate(tp.error, f"commit {group} {tp.topic}-{tp.partition}")

        self._call(f"alter offsets of group {group}", timeout_s, run)

    def _direct_delete_groups(self, groups: Iterable[str], timeout_s: float | None = None) -> None:
        names = list(groups)
        if not names:
            return

        def run(t: float) -> None:
            for future in self._client.delete_consumer_groups(names, request_timeout=t).values():
                try:
                    future.result(timeout=t)
                except KafkaException as err:
                    if not is_code(err.args[0], "GROUP_ID_NOT_FOUND"):
                        raise

        self._call("delete groups", timeout_s, run)

    # -- consumer-group requests, isolated ---------------------------------------------------

    def describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        """State and member count of each group."""
        names = list(groups)
        if not self.isolate or not names:
            return self._direct_describe_groups(names, timeout_s)
        return dict(self._isolated("_direct_describe_groups", timeout_s, names))

    def group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        """The committed offsets of ``group`` (partitions without a commit are left out)."""
        if not self.isolate:
            return self._direct_group_offsets(group, timeout_s)
        return self._isolated("_direct_group_offsets", timeout_s, group)  # type: ignore[no-any-return]

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        """Committed offsets of many groups (groups gone meanwhile are left out)."""
        names = list(groups)
        if not self.isolate or not names:
            return self._direct_groups_offsets(names, timeout_s)
        return dict(self._isolated("_direct_groups_offsets", timeout_s, names))

    def alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        """Commit ``offsets`` for ``group``; the broker refuses if the group has active members."""
        if not self.isolate or not offsets:
            self._direct_alter_group_offsets(group, offsets, timeout_s)
            return
        self._isolated("_direct_alter_group_offsets", timeout_s, group, dict(offsets))

    def delete_groups(self, groups: Iterable[str], timeout_s: float | None = None) -> None:
        names = list(groups)
        if not self.isolate or not names:
            self._direct_delete_groups(names, timeout_s)
            return
        self._isolated("_direct_delete_groups", timeout_s, names)
