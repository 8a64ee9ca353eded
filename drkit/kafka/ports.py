"""Ports: what orchestration logic asks of a cluster, as a protocol.

:class:`ClusterAdmin` lists the admin operations drkit uses above the adapter - the failover
engine, the monitor, the replicator and checkpointer, the drills, doctor, adopt, verify, the
local clusters.  That code takes a ``ClusterAdmin``, or an :class:`AdminFactory` to make one,
rather than building a :class:`~drkit.kafka.admin.KafkaAdmin`, so its unit tests pass an
in-memory fake (tests/fake_kafka.py ``FakeCluster``) instead of a broker - no attribute
swapping.  ``KafkaAdmin`` satisfies the protocol (checked by mypy in
tests/unit/test_cluster_admin_port.py, with the fake).

Contract of every method (as KafkaAdmin keeps it):

* ``timeout_s`` is a deadline for the whole call (None: the admin's default); transient broker
  errors are retried until then;
* failures raise :class:`drkit.errors.KafkaError` - :class:`~drkit.errors.RetriableKafkaError`
  when trying later may help, :class:`~drkit.errors.FatalKafkaError` when it cannot, and
  ``wait_ready`` raises :class:`~drkit.errors.UnreachableClusterError`;
* results are plain values (drkit.kafka.admin_base, drkit.records), never client types.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from drkit.acl.rules import AclEntry
from drkit.errors import RetriableKafkaError
from drkit.kafka.admin_base import (
    ConfigValue,
    GroupOffsets,
    GroupState,
    TopicInfo,
    TopicSpec,
)
from drkit.kafka.clients import FIRST_ANSWER_S, ClusterEndpoint
from drkit.kafka.interruptible import InFlight
from drkit.records import TopicPartition, VisibleSpan


class ClusterAdmin(Protocol):
    """Admin operations against one cluster (see the module docstring for the contract)."""

    @property
    def endpoint(self) -> ClusterEndpoint:
        """The cluster it reaches, with its settings (for the clients built beside it)."""
        ...

    # -- cluster ----------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 30.0) -> int:
        """Block until the cluster answers; its broker count (UnreachableClusterError)."""
        ...

    def answers(self, timeout_s: float = 3.0) -> bool:
        """Whether the cluster answers now (fast when its brokers refuse connections)."""
        ...

    def close(self) -> None:
        """Release the admin's client (idempotent); the admin is unusable after."""
        ...

    def not_answering(self, timeout_s: float = FIRST_ANSWER_S) -> str | None:
        """Why the cluster does not answer Kafka's first request within ``timeout_s`` -
        refused, unresolvable, hung, TLS or not Kafka, named - or None when it does."""
        ...

    def describe_cluster(self, timeout_s: float | None = None) -> tuple[str | None, int, int]:
        """(cluster id, controller id, broker count)."""
        ...

    def broker_configs(self, timeout_s: float | None = None) -> dict[str, ConfigValue]:
        """Every config entry of one broker (the controller), sensitive values without one."""
        ...

    # -- topics -----------------------------------------------------------------------------

    def list_topics(
        self, timeout_s: float | None = None, include_internal: bool = False
    ) -> dict[str, TopicInfo]:
        """Every topic with its partitions; ``__``-prefixed ones only with include_internal."""
        ...

    def create_topics(self, specs: Iterable[TopicSpec], timeout_s: float | None = None) -> None:
        """Create topics; one that exists already is not an error."""
        ...

    def create_partitions(self, topic: str, total: int, timeout_s: float | None = None) -> None:
        """Grow ``topic`` to ``total`` partitions (never shrinks)."""
        ...

    def delete_topics(self, topics: Iterable[str], timeout_s: float | None = None) -> None:
        """Delete topics (drills and tests only; an absent one is no error)."""
        ...

    def topic_configs(
        self, topics: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, dict[str, ConfigValue]]:
        """Config entries of each topic."""
        ...

    def set_topic_configs(
        self, topic: str, configs: Mapping[str, str], timeout_s: float | None = None
    ) -> None:
        """Set the given configs of ``topic`` (incrementally: the others are untouched)."""
        ...

    def topic_ids(self, topics: Iterable[str], timeout_s: float | None = None) -> dict[str, str]:
        """The topic id of each existing topic (a recreated topic gets a new one)."""
        ...

    # -- offsets ----------------------------------------------------------------------------

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        which: str = "latest",
        timeout_s: float | None = None,
        isolation: str = "read_uncommitted",
    ) -> dict[TopicPartition, int]:
        """Log start ("earliest") or end ("latest": the high watermark, or the last stable
        offset with ``isolation="read_committed"``) of each partition."""
        ...

    def stable_offsets(
        self, partitions: Iterable[TopicPartition], timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """The last stable offset: below the high watermark while a transaction is open."""
        ...

    def visible_records(
        self,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, VisibleSpan]:
        """Per partition, the committed records at offsets ``[start, end)`` - what a
        read_committed consumer gets: aborted records and transaction markers are not records -
        and the first one's timestamp.  Reads them; bound ``end`` by the stable offset (an open
        transaction hides the rest)."""
        ...

    def topic_offsets(
        self, topic: str, timeout_s: float | None = None, isolation: str = "read_uncommitted"
    ) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: (log start, end); FatalKafkaError if it does not exist."""
        ...

    # -- consumer groups --------------------------------------------------------------------

    def list_groups(self, timeout_s: float | None = None, complete: bool = False) -> dict[str, str]:
        """Every consumer group with its state name (``complete``: only a listing every broker
        answered)."""
        ...

    def describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        """State and member count of each group (an unknown group is DEAD with no members)."""
        ...

    def other_groups(self, timeout_s: float | None = None) -> tuple[str, ...]:
        """Groups that are not consumer groups (share, streams): nothing to translate."""
        ...

    def group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        """The committed offsets of ``group`` (partitions without a commit left out)."""
        ...

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        """Committed offsets of many groups (groups gone meanwhile are left out)."""
        ...

    def alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        """Commit ``offsets`` for ``group``; the broker refuses while the group has members."""
        ...

    def alter_groups_offsets(
        self, requests: Mapping[str, Mapping[TopicPartition, int]], timeout_s: float | None = None
    ) -> dict[str, str | None]:
        """Commit many groups' offsets concurrently; per group None, or why it was refused."""
        ...

    def delete_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> tuple[str, ...]:
        """Delete ``groups`` (absent ones count as deleted); those refused for their members."""
        ...

    # -- ACLs of any kind (drkit.access) -------------------------------------------------------

    def authorizer_enabled(self, timeout_s: float | None = None) -> bool:
        """Whether the brokers run an authorizer (other failures, a refusal too, raise)."""
        ...

    def acl_entries(self, timeout_s: float | None = None) -> set[AclEntry]:
        """Every ACL on the cluster drkit can reason about."""
        ...

    def create_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Create these ACLs (idempotent)."""
        ...

    def delete_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Delete exactly these ACLs (an absent one is no error)."""
        ...

    def grant(self, wanted: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Create literal topic ACLs of the fencing kinds (idempotent); done once shown."""
        ...

    def allow_everything(self, principal: str, timeout_s: float | None = None) -> None:
        """ALLOW ALL on every resource for ``principal`` (the local secured clusters only)."""
        ...

    # -- write fencing ----------------------------------------------------------------------

    def topics_with_acls(self, timeout_s: float | None = None) -> set[str]:
        """Topics that have any literal ACL, for any principal."""
        ...

    def deny_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        keep_reads: bool = True,
        timeout_s: float | None = None,
        companions: Iterable[str] | None = None,
    ) -> set[str]:
        """Fence ``topics`` (drkit.acl.fencing); returns the topics that got companion ALLOWs.

        ``companions``: exactly these topics get them (decided and recorded by the caller
        before the fence is applied); None: the topics without any ACL now."""
        ...

    def allow_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        reads_allowed: Iterable[str] = (),
        timeout_s: float | None = None,
    ) -> None:
        """Lift the fence of ``deny_writes`` (and the companions of ``reads_allowed``)."""
        ...

    def write_denied(self, principal: str = "User:*", timeout_s: float | None = None) -> set[str]:
        """Topics with a DENY WRITE ACL for ``principal``."""
        ...


def read_group_offsets(
    admin: ClusterAdmin,
    known: Iterable[str],
    wanted: Callable[[str], bool],
    timeout_s: float | None = None,
) -> dict[str, GroupOffsets]:
    """The committed offsets of every wanted group listed and of every wanted group the caller
    already knows of (from checkpoints, an earlier round).

    Kafka's group listing is best effort: a broker that has just started lists no group -
    without an error - until it leads ``__consumer_offsets`` (0 groups listed, 3,306 one second
    later, on a real broker).  Asking the known groups too keeps such a listing from dropping
    them.  A known group the listing left out and with no committed offset left was deleted or
    expired: it is left out of the answer (a listed group without offsets is kept, as the
    listing says it exists)."""
    listed = set(admin.list_groups(timeout_s))
    names = sorted(g for g in {*listed, *known} if wanted(g))
    answers = admin.groups_offsets(names, timeout_s)
    return {g: o for g, o in answers.items() if g in listed or o.offsets}


class AdminFactory(Protocol):
    """How code below the edges reaches a cluster's admin API - the one seam for cluster access.

    The edges pass the adapter's :class:`~drkit.kafka.admin.KafkaAdmin` (the class is a
    factory): the CLI commands (drkit/cli/ - ``drkit monitor``'s start among them), and the
    replication process's start (drkit/replication_service.py: its flow workers and
    checkpoint workers).  Everything below takes a factory (or a ``ClusterAdmin``) and calls
    it; unit tests pass tests/fake_kafka.py ``FakeClusters.connect``, which hands out
    in-memory clusters.  tests/unit/test_cluster_seam.py fails on a ``KafkaAdmin(`` outside
    drkit/kafka/ and drkit/cli/, and lists the few modules below that still name the adapter
    (and why).

    ``default_timeout_s``: the deadline of a call given none (the adapter's own default when
    left out); ``helper``: which of the endpoint's helper processes runs its group requests
    (bulk work - the monitor's group sampling - has its own); ``stop``: the owner's stop event,
    which gives a request under way up (``Stopped``)."""

    def __call__(
        self,
        endpoint: ClusterEndpoint,
        /,
        *,
        default_timeout_s: float = ...,
        helper: str = ...,
        stop: threading.Event | None = ...,
    ) -> ClusterAdmin: ...


def wait_for_leaders(admin: ClusterAdmin, topic: str, wait_s: float, pause_s: float = 0.2) -> None:
    """Return once the metadata names a leader for every partition of ``topic``.

    A topic just created has none for a moment (longer on a loaded broker), and librdkafka
    refuses offsets of a partition whose leader its metadata lacks with the answer a topic
    deleted under the read gets - fatal.  Raises RetriableKafkaError naming the topic when
    ``wait_s`` passes without one."""
    deadline = time.monotonic() + wait_s
    while True:
        info = admin.list_topics().get(topic)
        if info is not None and info.partitions and not any(p.offline for p in info.partitions):
            return
        if time.monotonic() >= deadline:
            raise RetriableKafkaError(
                f"topic {topic}: no leader for its partitions {wait_s:g} s after it was created"
            )
        time.sleep(pause_s)


def prewarm(connect: AdminFactory, endpoint: ClusterEndpoint) -> None:
    """Start ``endpoint``'s helper process for group requests (drkit.kafka.isolated) in the
    background when ``connect`` has one to start - the adapter does (``KafkaAdmin.prewarm``);
    in-memory clusters have none, and nothing happens.  Nothing is built, nothing waited for."""
    start = getattr(connect, "prewarm", None)
    if callable(start):
        start(endpoint)


def admins_not_answering(admins: Mapping[str, ClusterAdmin]) -> dict[str, str]:
    """Each cluster of ``admins`` (by alias) that does not answer Kafka's first request, with
    why (:meth:`ClusterAdmin.not_answering`) - asked at once, each on a daemon thread so a
    Ctrl-C acts at once: two hung clusters cost one FIRST_ANSWER_S, not two."""
    asked = [(alias, InFlight(admin.not_answering)) for alias, admin in admins.items()]
    return {alias: why for alias, call in asked if (why := call.wait()) is not None}
