"""An in-memory Kafka cluster that implements drkit's ``ClusterAdmin`` port, for unit tests of
orchestration logic (failover steps, group-offset sync, fence maintenance).

What it models, in plain dicts: topics (an id, partitions with log start, high watermark and an
optional open transaction, configs), consumer groups (state, members, committed offsets), and
ACLs (drkit.acl.rules values, one set - fencing follows the adapter's own policy), judged as
Kafka's authorizer judges them (drkit.acl.rules.authorized: DENY wins, prefixed resources,
``allow.everyone.if.no.acl.found`` when the cluster is ``open``, super users).  It answers as
a broker does where drkit relies on it: an unknown group is DEAD with no members, committing
offsets into a group with members is refused (UNKNOWN_MEMBER_ID), appending to a topic the
producer's principal may not write is refused (TOPIC_AUTHORIZATION_FAILED), and a cluster that
is down raises UnreachableClusterError from ``wait_ready`` and RetriableKafkaError from
everything else.

It is not a broker: no records (but for :meth:`FakeCluster.write`'s log, with headers, that a
test reads back as drkit's readers would), no replication, no timing; deadlines (``timeout_s``) are
ignored.  Behaviour of real brokers is covered by the adapter's contract tests
(tests/integration/test_kafka_adapter.py).  ``calls`` records every port call by name, so a
test can assert what was (not) asked; :meth:`FakeCluster.before_next` makes the world change
between two calls (a consumer joins a group just before a write).
"""

from __future__ import annotations

import threading
import uuid
from bisect import bisect_left, insort
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit.acl.fencing import (
    fence_acls,
    fence_acls_with,
    lift_acls,
)
from drkit.acl.rules import (
    ANY_USER,
    AclEntry,
    Need,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized,
)
from drkit.clock import time_left
from drkit.config.model import FlowConfig
from drkit.control.channel import ChannelAck, ChannelFactory, ChannelView, ControlChannel
from drkit.control.model import DesiredState, FlowDirective
from drkit.errors import FatalKafkaError, KafkaError, RetriableKafkaError, UnreachableClusterError
from drkit.kafka.admin_base import (
    ConfigValue,
    GroupOffsets,
    GroupState,
    PartitionInfo,
    TopicInfo,
    TopicSpec,
)
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.keyed_topic import Accept, KeyedValue, Sign, encode_document, keep_latest
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.records import Headers, Record, TopicPartition, VisibleSpan
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.topology.internal_topics import control_topic


@dataclass
class FakePartition:
    log_start: int = 0
    end: int = 0  # high watermark
    open_transaction_at: int | None = None  # first offset of an open transaction, if any
    invisible: set[int] = field(default_factory=set)  # transaction markers, aborted records
    timestamps: dict[int, int] = field(default_factory=dict)  # offset -> ms, where a test set it
    # Metadata answers still to come without a leader (a topic just created on a busy broker);
    # list_offsets is refused as librdkafka refuses it until a metadata answer names one.
    leaderless_answers: int = 0

    @property
    def stable_end(self) -> int:
        return self.end if self.open_transaction_at is None else self.open_transaction_at


@dataclass
class FakeTopic:
    topic_id: str
    partitions: list[FakePartition]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeGroup:
    state: str = "EMPTY"
    members: int = 0
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


class FakeCluster:
    """One in-memory cluster; see the module docstring for what it models."""

    def __init__(self, alias: str = "fake", brokers: int = 3) -> None:
        self.alias = alias
        self.brokers = brokers
        self.up = True
        self.topics: dict[str, FakeTopic] = {}
        self.groups: dict[str, FakeGroup] = {}
        self.share_groups: set[str] = set()  # groups of another type (KIP-932 share groups)
        self.acls: set[AclEntry] = set()  # every ACL, fences and guards alike
        self.open = True  # allow.everyone.if.no.acl.found
        self.super_users: set[str] = set()
        self.calls: list[str] = []
        self.timeouts: list[tuple[str, float | None]] = []  # (call, the timeout it was given)
        self._before: dict[str, list[Callable[[], None]]] = {}
        self._fail_after: dict[str, KafkaError] = {}
        self.channels: dict[str, dict[str, object]] = {}  # flow -> its control channel
        self.channel_offset = 0
        # Records kept with their content, for the few topics a test writes them to
        # (write/read): (key, value, headers) per topic, partition 0, in offset order.
        self.logs: dict[str, list[tuple[bytes | None, bytes | None, Headers]]] = {}
        # How many metadata answers a topic created through the port goes without a leader
        # (0: led at once; a loaded broker takes a moment to elect one).
        self.leaderless_after_create = 0

    # -- setting the scene ------------------------------------------------------------------

    def add_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> None:
        self.topics[name] = FakeTopic(
            uuid.uuid4().hex, [FakePartition() for _ in range(partitions)], dict(configs or {})
        )

    def append(
        self,
        topic: str,
        partition: int = 0,
        count: int = 1,
        super_user: bool = False,
        principal: str = ANY_USER,
        timestamp_ms: int | None = None,
    ) -> int:
        """Write ``count`` records (as a producer would); returns the new high watermark.
        ``timestamp_ms``: the records' timestamp (None: the broker reports none).

        Refused like a broker refuses a fenced topic: FatalKafkaError naming
        TOPIC_AUTHORIZATION_FAILED when ``principal`` may not write it (``User:*``: any
        application) - unless the producer is a super user (ACLs do not apply to one).
        """
        if not super_user and not self.writable(topic, principal):
            raise FatalKafkaError(f"{self.alias}: produce to {topic}: TOPIC_AUTHORIZATION_FAILED")
        part = self._partition(TopicPartition(topic, partition))
        if timestamp_ms is not None:
            part.timestamps.update(dict.fromkeys(range(part.end, part.end + count), timestamp_ms))
        part.end += count
        return part.end

    def write(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        principal: str = ANY_USER,
    ) -> int:
        """Write one record with its content and headers to partition 0 of ``topic`` (created
        with one partition if missing), refused like :meth:`append`; returns its offset."""
        self._answer("produce")
        if topic not in self.topics:
            self.add_topic(topic)
        self.append(topic, 0, 1, principal=principal)
        log = self.logs.setdefault(topic, [])
        log.append((key, value, tuple(headers)))
        return len(log) - 1

    def read(self, topic: str) -> list[tuple[bytes | None, bytes | None, Headers, int]]:
        """Every record :meth:`write` put in ``topic``: (key, value, headers, offset)."""
        self._answer("fetch")
        return [(k, v, h, offset) for offset, (k, v, h) in enumerate(self.logs.get(topic, []))]

    def append_invisible(self, topic: str, partition: int = 0, count: int = 1) -> int:
        """Offsets no read_committed consumer sees (aborted records, transaction markers)."""
        part = self._partition(TopicPartition(topic, partition))
        part.invisible |= set(range(part.end, part.end + count))
        part.end += count
        return part.end

    def truncate(self, topic: str, partition: int, log_start: int) -> None:
        """Records below ``log_start`` are gone (retention, DeleteRecords)."""
        self._partition(TopicPartition(topic, partition)).log_start = log_start

    def open_transaction(self, topic: str, partition: int = 0) -> None:
        """A producer left a transaction open from the current end on (stable end stays)."""
        part = self._partition(TopicPartition(topic, partition))
        part.open_transaction_at = part.end

    def end_transaction(self, topic: str, partition: int = 0) -> None:
        """The open transaction committed or aborted: the stable end catches up."""
        self._partition(TopicPartition(topic, partition)).open_transaction_at = None

    def set_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.groups.setdefault(group, FakeGroup()).offsets.update(offsets)

    def activate(self, group: str, members: int = 1) -> None:
        """Consumers joined ``group``: it is STABLE with ``members`` members."""
        found = self.groups.setdefault(group, FakeGroup())
        found.state, found.members = "STABLE", members

    def deactivate(self, group: str) -> None:
        """Every member left: the group is EMPTY (its offsets stay)."""
        found = self.groups.setdefault(group, FakeGroup())
        found.state, found.members = "EMPTY", 0

    def go_down(self) -> None:
        """The cluster stops answering (every broker gone, or the link cut)."""
        self.up = False

    def come_back(self) -> None:
        self.up = True

    def before_next(self, call: str, action: Callable[[], None]) -> None:
        """Run ``action`` once, right before the next port call named ``call`` is answered."""
        self._before.setdefault(call, []).append(action)

    def fail_after_next(self, call: str, error: KafkaError) -> None:
        """The next ``call`` applies its change, then raises ``error`` (ACLs created but not
        seen before the deadline: a half-applied step)."""
        self._fail_after[call] = error

    def writable(self, topic: str, principal: str = ANY_USER) -> bool:
        """Whether ``principal`` may write ``topic`` (``User:*``: an application no ACL names),
        as Kafka's authorizer decides over this cluster's ACLs."""
        need = Need(Resource(ResourceType.TOPIC, topic), Operation.WRITE, "write")
        return authorized(
            principal,
            need,
            self.acls,
            super_users=self.super_users,
            allow_everyone_if_no_acl=self.open,
        )

    def committed(self, group: str) -> dict[TopicPartition, int]:
        found = self.groups.get(group)
        return dict(found.offsets) if found is not None else {}

    # -- ClusterAdmin: cluster --------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 30.0) -> int:
        self.calls.append("wait_ready")
        for action in self._before.pop("wait_ready", []):
            action()
        if not self.up:
            raise UnreachableClusterError(self.alias, f"{self.alias}:9092", "connection refused")
        return self.brokers

    def answers(self, timeout_s: float = 3.0) -> bool:
        self.calls.append("answers")
        for action in self._before.pop("answers", []):
            action()
        return self.up

    def not_answering(self, timeout_s: float = 1.5) -> str | None:
        self.calls.append("not_answering")
        for action in self._before.pop("not_answering", []):
            action()
        return None if self.up else "connection refused"

    def describe_cluster(self, timeout_s: float | None = None) -> tuple[str | None, int, int]:
        self._answer("describe_cluster")
        return f"{self.alias}-id", 1, self.brokers

    @property
    def endpoint(self) -> ClusterEndpoint:
        return ClusterEndpoint.plain(self.alias, f"{self.alias}:9092")

    def close(self) -> None:
        """Nothing to release: the cluster stays usable (FakeClusters hands out the same one)."""

    def broker_configs(self, timeout_s: float | None = None) -> dict[str, ConfigValue]:
        self._answer("broker_configs")
        return {}

    # -- ClusterAdmin: topics ---------------------------------------------------------------

    def list_topics(
        self, timeout_s: float | None = None, include_internal: bool = False
    ) -> dict[str, TopicInfo]:
        self._answer("list_topics")
        replicas = tuple(range(1, self.brokers + 1))
        return {
            name: TopicInfo(
                name,
                tuple(
                    PartitionInfo(index, self._answer_leader(part), replicas, replicas)
                    for index, part in enumerate(topic.partitions)
                ),
            )
            for name, topic in sorted(self.topics.items())
            if include_internal or not name.startswith("__")
        }

    @staticmethod
    def _answer_leader(partition: FakePartition) -> int:
        if partition.leaderless_answers > 0:
            partition.leaderless_answers -= 1
            return -1
        return 1

    def create_topics(self, specs: Iterable[TopicSpec], timeout_s: float | None = None) -> None:
        self._answer("create_topics")
        for spec in specs:
            if spec.name not in self.topics:
                self.add_topic(spec.name, spec.partitions, spec.configs or {})
                for part in self.topics[spec.name].partitions:
                    part.leaderless_answers = self.leaderless_after_create

    def create_partitions(self, topic: str, total: int, timeout_s: float | None = None) -> None:
        self._answer("create_partitions")
        partitions = self._topic(topic).partitions
        partitions.extend(FakePartition() for _ in range(total - len(partitions)))

    def delete_topics(self, topics: Iterable[str], timeout_s: float | None = None) -> None:
        self._answer("delete_topics")
        for name in topics:
            self.topics.pop(name, None)

    def set_topic_configs(
        self, topic: str, configs: Mapping[str, str], timeout_s: float | None = None
    ) -> None:
        self._answer("set_topic_configs")
        self._topic(topic).configs.update(configs)

    def topic_configs(
        self, topics: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, dict[str, ConfigValue]]:
        self._answer("topic_configs")
        return {
            name: {
                key: ConfigValue(value, False, False, False, "DYNAMIC_TOPIC_CONFIG")
                for key, value in self.topics[name].configs.items()
            }
            for name in topics
            if name in self.topics
        }

    def topic_ids(self, topics: Iterable[str], timeout_s: float | None = None) -> dict[str, str]:
        self._answer("topic_ids")
        return {
            name: self.topics[name].topic_id for name in sorted(set(topics)) if name in self.topics
        }

    # -- ClusterAdmin: offsets --------------------------------------------------------------

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        which: str = "latest",
        timeout_s: float | None = None,
        isolation: str = "read_uncommitted",
    ) -> dict[TopicPartition, int]:
        self._answer("list_offsets")
        out: dict[TopicPartition, int] = {}
        for tp in partitions:
            part = self._partition(tp)
            if part.leaderless_answers > 0:
                # What the adapter makes of librdkafka's _NOENT for a partition whose leader
                # its metadata does not hold: fatal, as for a topic deleted under it.
                raise FatalKafkaError(
                    f"{self.alias}: list offsets: Failed to query partition leaders: "
                    "No leaders found"
                )
            if which == "earliest":
                out[tp] = part.log_start
            else:
                out[tp] = part.stable_end if isolation == "read_committed" else part.end
        return out

    def visible_records(
        self,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, VisibleSpan]:
        self._answer("visible_records")
        out: dict[TopicPartition, VisibleSpan] = {}
        for tp, (start, end) in ranges.items():
            part = self._partition(tp)
            seen = [offset for offset in range(start, end) if offset not in part.invisible]
            out[tp] = VisibleSpan(len(seen), part.timestamps.get(seen[0]) if seen else None)
        return out

    def stable_offsets(
        self, partitions: Iterable[TopicPartition], timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        self._answer("stable_offsets")
        return {tp: self._partition(tp).stable_end for tp in partitions}

    def topic_offsets(
        self, topic: str, timeout_s: float | None = None, isolation: str = "read_uncommitted"
    ) -> dict[int, tuple[int, int]]:
        self._answer("topic_offsets")
        if topic not in self.topics:
            raise FatalKafkaError(f"{self.alias}: topic {topic} does not exist")
        return {
            index: (p.log_start, p.stable_end if isolation == "read_committed" else p.end)
            for index, p in enumerate(self.topics[topic].partitions)
        }

    # -- ClusterAdmin: consumer groups ------------------------------------------------------

    def list_groups(self, timeout_s: float | None = None, complete: bool = False) -> dict[str, str]:
        self._answer("list_groups")  # every fake broker answers: complete either way
        return {name: group.state for name, group in sorted(self.groups.items())}

    def other_groups(self, timeout_s: float | None = None) -> tuple[str, ...]:
        self._answer("other_groups")
        return tuple(sorted(self.share_groups))

    def describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        self._answer("describe_groups")
        out: dict[str, GroupState] = {}
        for name in groups:
            found = self.groups.get(name)
            out[name] = (
                GroupState(name, found.state, found.members)
                if found is not None
                else GroupState(name, "DEAD", 0)
            )
        return out

    def group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        self._answer("group_offsets")
        return GroupOffsets(group, self.committed(group))

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        self._answer("groups_offsets")
        return {g: GroupOffsets(g, self.committed(g)) for g in groups if g in self.groups}

    def alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        self._answer("alter_group_offsets")
        time_left(timeout_s, f"{self.alias}: alter_group_offsets")  # as the adapter: a lease's
        if not offsets:  # budget spent while it stood still -> LeaseLost, nothing sent
            return
        found = self.groups.get(group)
        if found is not None and found.members > 0:
            raise FatalKafkaError(
                f"{self.alias}: alter offsets of group {group}: UNKNOWN_MEMBER_ID: "
                f"the group has {found.members} active members"
            )
        self.set_group_offsets(group, offsets)

    def alter_groups_offsets(
        self, requests: Mapping[str, Mapping[TopicPartition, int]], timeout_s: float | None = None
    ) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for group, offsets in requests.items():
            try:
                self.alter_group_offsets(group, offsets, timeout_s)
                out[group] = None
            except KafkaError as err:
                out[group] = str(err)
        return out

    def delete_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> tuple[str, ...]:
        self._answer("delete_groups")
        names = list(groups)
        refused = tuple(g for g in names if g in self.groups and self.groups[g].members > 0)
        for name in names:
            if name not in refused:
                self.groups.pop(name, None)
        return refused

    # -- ClusterAdmin: ACLs of any kind ------------------------------------------------------

    def authorizer_enabled(self, timeout_s: float | None = None) -> bool:
        self._answer("authorizer_enabled")
        return True

    def grant(self, wanted: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        self._answer("grant")
        self.acls |= set(wanted)

    def allow_everything(self, principal: str, timeout_s: float | None = None) -> None:
        self._answer("allow_everything")
        self.super_users.add(principal)

    def acl_entries(self, timeout_s: float | None = None) -> set[AclEntry]:
        self._answer("acl_entries")
        return set(self.acls)

    def create_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        self.timeouts.append(("create_entries", timeout_s))
        self._answer("create_entries")
        time_left(timeout_s, f"{self.alias}: create_entries")
        self.acls |= set(entries)
        self._after("create_entries")

    def delete_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        self.timeouts.append(("delete_entries", timeout_s))
        self._answer("delete_entries")
        time_left(timeout_s, f"{self.alias}: delete_entries")
        self.acls -= set(entries)
        self._after("delete_entries")

    # -- ClusterAdmin: write fencing --------------------------------------------------------

    def deny_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        keep_reads: bool = True,
        timeout_s: float | None = None,
        companions: Iterable[str] | None = None,
    ) -> set[str]:
        self._answer("deny_writes")
        if companions is not None:
            bare, wanted = fence_acls_with(topics, principal, companions)
        else:
            bare, wanted = fence_acls(topics, principal, keep_reads, self.topics_with_acls())
        self.acls |= set(wanted)
        self._after("deny_writes")
        return set(bare)

    def topics_with_acls(self, timeout_s: float | None = None) -> set[str]:
        self._answer("topics_with_acls")
        return {
            acl.resource.name
            for acl in self.acls
            if acl.resource.type is ResourceType.TOPIC
            and acl.resource.pattern is PatternType.LITERAL
        }

    def allow_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        reads_allowed: Iterable[str] = (),
        timeout_s: float | None = None,
    ) -> None:
        self._answer("allow_writes")
        self.acls -= set(lift_acls(topics, principal, reads_allowed))
        self._after("allow_writes")

    def write_denied(self, principal: str = "User:*", timeout_s: float | None = None) -> set[str]:
        self._answer("write_denied")
        return {
            acl.resource.name
            for acl in self.acls
            if acl.principal == principal
            and acl.operation is Operation.WRITE
            and acl.permission is Permission.DENY
            and acl.resource.type is ResourceType.TOPIC
            and acl.resource.pattern is PatternType.LITERAL
        }

    # -- internals ----------------------------------------------------------------------------

    def _answer(self, call: str) -> None:
        self.calls.append(call)
        for action in self._before.pop(call, []):
            action()
        if not self.up:
            raise RetriableKafkaError(f"{self.alias}: {call}: timed out (cluster down)")

    def _after(self, call: str) -> None:
        """A change was applied: fail now if the test said so (a half-applied change)."""
        error = self._fail_after.pop(call, None)
        if error is not None:
            raise error

    def _topic(self, name: str) -> FakeTopic:
        topic = self.topics.get(name)
        if topic is None:
            raise FatalKafkaError(f"{self.alias}: {name}: UNKNOWN_TOPIC_OR_PART")
        return topic

    def _partition(self, tp: TopicPartition) -> FakePartition:
        topic = self.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            raise RetriableKafkaError(f"{self.alias}: {tp}: UNKNOWN_TOPIC_OR_PART")
        return topic.partitions[tp.partition]


class FakeClusters:
    """Several fake clusters by alias, and the ``AdminFactory`` that hands them out."""

    def __init__(self, *aliases: str, make: Callable[[str], FakeCluster] = FakeCluster) -> None:
        self.by_alias = {alias: make(alias) for alias in aliases}

    def __getitem__(self, alias: str) -> FakeCluster:
        return self.by_alias[alias]

    def connect(
        self,
        endpoint: ClusterEndpoint,
        /,
        *,
        default_timeout_s: float = 15.0,
        helper: str = "requests",
        stop: threading.Event | None = None,
    ) -> ClusterAdmin:
        """The ``AdminFactory``: the cluster of ``endpoint``'s alias (the options, which tune
        the real adapter's requests, change nothing here)."""
        return self.by_alias[endpoint.alias]


class FakeReplicaRecords:
    """Replica partitions' records by position and their ends, as drkit's TargetRecords
    (drkit/offsets/corroboration.py): the copies a replicator wrote, each carrying the
    ``drkit-src`` of its source record - nothing at any other position (transaction markers,
    compacted-away records, past the end).  ``reads`` counts the positioned reads."""

    def __init__(self) -> None:
        self.records: dict[TopicPartition, dict[int, Record]] = {}
        self._positions: dict[TopicPartition, list[int]] = {}
        self.ends: dict[TopicPartition, int] = {}  # a partition's end past its last record
        self.reads = 0

    def put(
        self, target: TopicPartition, position: int, cluster: str, source: TopicPartition,
        offset: int,
    ) -> None:  # fmt: skip
        """The record at ``position`` of ``target`` is a copy of ``offset`` of ``source`` on
        ``cluster`` (a source alias)."""
        header = Provenance(cluster, source.topic, source.partition, offset).encode()
        records = self.records.setdefault(target, {})
        if position not in records:
            insort(self._positions.setdefault(target, []), position)
        records[position] = Record(
            target.topic, target.partition, position, None, b"", ((SOURCE_HEADER, header),)
        )

    def remove(self, target: TopicPartition, position: int) -> None:
        """The record at ``position`` is gone (compacted away)."""
        if self.records.get(target, {}).pop(position, None) is not None:
            self._positions[target].remove(position)

    def end_offset(self, tp: TopicPartition) -> int:
        """The partition's end: :attr:`ends` when set, else after its last record."""
        if tp in self.ends:
            return self.ends[tp]
        positions = self._positions.get(tp)
        return positions[-1] + 1 if positions else 0

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        self.reads += 1
        if offset < 0:  # librdkafka's logical offsets: -1 is the end (nothing read yet)
            return
        positions = self._positions.get(tp, [])
        records = self.records.get(tp, {})
        for index in range(bisect_left(positions, offset), len(positions)):
            yield records[positions[index]]


def _conforms(fake: FakeCluster, clusters: FakeClusters) -> tuple[ClusterAdmin, AdminFactory]:
    """Never called: mypy checks here that the fake implements the port."""
    return fake, clusters.connect


class FakeChannel:
    """One flow's control channel (drkit.control.channel) held by a fake target cluster: the
    newest directive and each worker's ack, with a growing offset; unreachable while the
    cluster is down."""

    def __init__(self, cluster: FakeCluster, flow: str) -> None:
        self.cluster, self.flow = cluster, flow

    def _state(self) -> dict[str, object]:
        self.cluster._answer("control_channel")
        return self.cluster.channels.setdefault(self.flow, {"directive": None, "acks": {}})

    def publish(self, directive: FlowDirective) -> None:
        self._state()["directive"] = directive

    def ack(self, worker: str, epoch: int, state: DesiredState) -> None:
        acks = self._state()["acks"]
        assert isinstance(acks, dict)
        self.cluster.channel_offset += 1
        acks[worker] = ChannelAck(worker, epoch, state, self.cluster.channel_offset)

    def read(self) -> ChannelView:
        state = self._state()
        directive, acks = state["directive"], state["acks"]
        assert directive is None or isinstance(directive, FlowDirective)
        assert isinstance(acks, dict)
        return ChannelView(directive, dict(acks))

    def close(self) -> None:
        pass


class FakeKeyedTopic:
    """A keyed topic (drkit.kafka.keyed_topic) over a fake cluster's record log: documents
    written with ``sign``'s headers, read back through the real fold (``keep_latest``) - so a
    record another client writes beside them (``FakeCluster.write``) is read as a broker would
    serve it, headers and all."""

    def __init__(self, cluster: FakeCluster, topic: str, sign: Sign, accept: Accept) -> None:
        self.cluster, self.topic = cluster, topic
        self._sign, self._accept = sign, accept
        self._latest: dict[str, KeyedValue] = {}
        self._next = 0  # incremental, as the real topic's tailer reads

    def put(self, key: str, value: dict[str, Any], timeout_s: float = 10.0) -> None:
        key_bytes, value_bytes = key.encode(), encode_document(value)
        headers = tuple(self._sign(key_bytes, value_bytes))
        self.cluster.write(self.topic, key_bytes, value_bytes, headers)  # type: ignore[arg-type]

    def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]:
        records = self.cluster.read(self.topic)[self._next :]
        self._next += len(records)
        keep_latest(records, self._accept, self._latest)
        return dict(self._latest)

    def close(self) -> None:
        pass


def signed_channel(cluster: FakeCluster, flow: FlowConfig, key: bytes) -> ControlChannel:
    """``flow``'s real control channel (signing, verifying) over ``cluster``'s record log."""
    topic = control_topic(flow.source)
    return ControlChannel(
        ClusterEndpoint.plain(cluster.alias, "127.0.0.1:1"),
        flow.name,
        topic,
        lambda: key,
        make_topic=lambda sign, accept: FakeKeyedTopic(cluster, topic, sign, accept),
    )


def fake_channels(clusters: FakeClusters) -> ChannelFactory:
    """Each flow's control channel on its (fake) target."""
    return lambda flow: FakeChannel(clusters[flow.target], flow.name)
