"""A synchronous, typed facade over confluent-kafka's AdminClient.

Every call takes a deadline (``timeout_s``), unwraps the futures, retries retriable broker errors
until the deadline (tenacity) and raises drkit exceptions.  Results are frozen value objects.
Thread-safety: one ``KafkaAdmin`` may be shared by threads (librdkafka's admin client is).

The class is assembled from parts: drkit.kafka.admin_base (client, deadlines, value objects),
admin_groups (consumer groups, isolated), admin_acls (write fencing) and this module (cluster,
topics, offsets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import IsolationLevel, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as _RdTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from drkit.errors import (
    CredentialsRefusedError,
    FatalKafkaError,
    KafkaError,
    UnreachableClusterError,
)
from drkit.kafka.admin_acls import AclAdmin
from drkit.kafka.admin_base import (
    ConfigValue,
    GroupOffsets,
    GroupState,
    PartitionInfo,
    TopicInfo,
    TopicSpec,
    _source_name,
)
from drkit.kafka.admin_groups import GroupAdmin
from drkit.kafka.clients import FIRST_ANSWER_S, ClusterEndpoint, not_answering, tcp_unreachable
from drkit.kafka.errors import is_code, translate
from drkit.kafka.isolated import prewarm
from drkit.records import TopicPartition, VisibleSpan

__all__ = [
    "ConfigValue",
    "GroupOffsets",
    "GroupState",
    "KafkaAdmin",
    "PartitionInfo",
    "TopicInfo",
    "TopicSpec",
]


class KafkaAdmin(GroupAdmin, AclAdmin):
    """Admin operations against one cluster."""

    @classmethod
    def prewarm(cls, endpoint: ClusterEndpoint) -> None:
        """Start ``endpoint``'s helper process for group requests (drkit.kafka.isolated) in the
        background, so the first group request - a failover's - does not wait for it."""
        prewarm(cls, endpoint)

    # -- cluster --------------------------------------------------------------------------

    def answers(self, timeout_s: float = 3.0) -> bool:
        """Whether the cluster answers a metadata request now; a cluster whose brokers refuse
        TCP connections is known to be down at once (no waiting out the timeout)."""
        try:
            self.wait_ready(timeout_s)
        except KafkaError:
            return False
        return True

    def not_answering(self, timeout_s: float = FIRST_ANSWER_S) -> str | None:
        """:func:`drkit.kafka.clients.not_answering` for this cluster (the port's contract)."""
        return not_answering(self.endpoint, timeout_s)

    def wait_ready(self, timeout_s: float = 30.0) -> int:
        """Block until the cluster answers a metadata request; returns its broker count.

        Raises UnreachableClusterError naming the cluster when the deadline passes - at once
        when every bootstrap server refuses TCP connections (it is down now, not slow: the
        Kafka client would only retry until the deadline) - and CredentialsRefusedError when
        it answered but refused drkit's login.  Callers that wait for a cluster to come up
        ask again.
        """
        refused = tcp_unreachable(self.endpoint, min(1.0, timeout_s))
        if refused is not None:
            raise UnreachableClusterError(
                self.endpoint.alias, self.endpoint.bootstrap_servers, refused
            )
        try:
            return self._call("metadata", timeout_s, lambda t: len(self._metadata(t).brokers))
        except CredentialsRefusedError:
            raise  # it answered: not unreachable
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
            metadata = self._metadata(t)
            return metadata.cluster_id, int(metadata.controller_id), len(metadata.brokers)

        return self._call("describe cluster", timeout_s, run)

    # -- topics ---------------------------------------------------------------------------

    def list_topics(
        self, timeout_s: float | None = None, include_internal: bool = False
    ) -> dict[str, TopicInfo]:
        """Every topic with its partitions (leader, replicas, ISR)."""

        def run(t: float) -> dict[str, TopicInfo]:
            metadata = self._metadata(t)
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
                # librdkafka's "use the broker default" is -1.
                replication_factor=s.replication_factor or -1,
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
        return self._describe_configs(resources, "describe topic configs", timeout_s)

    def broker_configs(self, timeout_s: float | None = None) -> dict[str, ConfigValue]:
        """Every config entry of one broker (the controller the cluster names), sensitive
        values (passwords, and ``super.users`` on some versions) reported without a value."""
        _, controller, _ = self.describe_cluster(timeout_s)
        resource = ConfigResource(ResourceType.BROKER, str(controller))
        return self._describe_configs([resource], "describe broker configs", timeout_s)[
            str(controller)
        ]

    def _describe_configs(
        self, resources: list[ConfigResource], what: str, timeout_s: float | None
    ) -> dict[str, dict[str, ConfigValue]]:
        if not resources:
            return {}

        def run(t: float) -> dict[str, dict[str, ConfigValue]]:
            out: dict[str, dict[str, ConfigValue]] = {}
            futures = self._client.describe_configs(resources, request_timeout=t)
            for resource, future in futures.items():
                try:
                    entries = future.result(timeout=t)
                except KafkaException as err:  # name the resource: "which topic?" is the question
                    place = f"{self.endpoint.alias}: {what} of {resource.name or 'the cluster'}"
                    raise translate(err, place) from None
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

        return self._call(what, timeout_s, run)

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
        isolation: str = "read_uncommitted",
    ) -> dict[TopicPartition, int]:
        """Earliest or latest offsets; ``which`` is "earliest" or "latest".  Latest is the high
        watermark, or the last stable offset (before any open transaction) when ``isolation``
        is "read_committed"."""
        spec = (
            OffsetSpec.latest()  # type: ignore[no-untyped-call]
            if which == "latest"
            else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        )
        request = {_RdTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        if not request:
            return {}

        level = (
            IsolationLevel.READ_COMMITTED
            if isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )

        def run(t: float) -> dict[TopicPartition, int]:
            futures = self._client.list_offsets(request, isolation_level=level, request_timeout=t)
            return {
                TopicPartition(tp.topic, tp.partition): int(future.result(timeout=t).offset)
                for tp, future in futures.items()
            }

        return self._call(f"list {which} offsets", timeout_s, run)

    def visible_records(
        self,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, VisibleSpan]:
        """See the ClusterAdmin port: counted by reading them (read_committed)."""
        from drkit.kafka.io import consume_ranges

        counts = dict.fromkeys(ranges, 0)
        first: dict[TopicPartition, int | None] = {}
        for record in consume_ranges(self.endpoint, ranges, timeout_s or 120.0):
            tp = TopicPartition(record.topic, record.partition)
            counts[tp] += 1
            first.setdefault(tp, record.timestamp_ms)  # read in offset order: the first
        return {tp: VisibleSpan(n, first.get(tp)) for tp, n in counts.items()}

    def stable_offsets(
        self, partitions: Iterable[TopicPartition], timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """The last stable offset per partition (read_committed end): below the high watermark
        while a transaction is open on the partition."""
        request = {
            _RdTopicPartition(tp.topic, tp.partition): OffsetSpec.latest()  # type: ignore[no-untyped-call]
            for tp in partitions
        }
        if not request:
            return {}

        def run(t: float) -> dict[TopicPartition, int]:
            futures = self._client.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=t
            )
            return {
                TopicPartition(tp.topic, tp.partition): int(future.result(timeout=t).offset)
                for tp, future in futures.items()
            }

        return self._call("list stable offsets", timeout_s, run)

    def delete_records(
        self, before: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """Delete every record below ``before[tp]`` (DeleteRecords); returns the new log starts.

        Tests and drills use it to simulate retention; drkit never deletes records itself.
        """
        request = [_RdTopicPartition(tp.topic, tp.partition, off) for tp, off in before.items()]
        if not request:
            return {}

        def run(t: float) -> dict[TopicPartition, int]:
            futures = self._client.delete_records(request, request_timeout=t, operation_timeout=t)
            return {
                TopicPartition(tp.topic, tp.partition): int(future.result(timeout=t).low_watermark)
                for tp, future in futures.items()
            }

        return self._call("delete records", timeout_s, run)

    def topic_ids(self, topics: Iterable[str], timeout_s: float | None = None) -> dict[str, str]:
        """The Kafka topic id of each existing topic (a topic deleted and recreated gets a new
        one); topics that do not exist are left out."""
        names = sorted(set(topics))
        if not names:
            return {}

        def run(t: float) -> dict[str, str]:
            out: dict[str, str] = {}
            futures = self._client.describe_topics(TopicCollection(names), request_timeout=t)
            for name, future in futures.items():
                try:
                    description = future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "UNKNOWN_TOPIC_OR_PART"):
                        continue
                    raise
                out[name] = str(description.topic_id)
            return out

        return self._call("describe topics", timeout_s, run)

    def topic_offsets(
        self, topic: str, timeout_s: float | None = None, isolation: str = "read_uncommitted"
    ) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: (log start offset, high watermark - or last stable offset
        under ``isolation="read_committed"``)."""
        info = self.list_topics(timeout_s, include_internal=True).get(topic)
        if info is None:
            raise FatalKafkaError(
                f"{self.endpoint.alias}: topic {topic} does not exist", ends_flows=False
            )
        tps = [TopicPartition(topic, p.partition) for p in info.partitions]
        start = self.list_offsets(tps, "earliest", timeout_s)
        end = self.list_offsets(tps, "latest", timeout_s, isolation)
        return {tp.partition: (start[tp], end[tp]) for tp in tps}
