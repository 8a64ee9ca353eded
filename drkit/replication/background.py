"""The threads beside a flow's data path: topic sync, heartbeats, side syncs.

* Topic sync (every ``topic_refresh_interval_s``): create/grow replica topics and copy configs
  (drkit.replication.topic_sync), hand the worker the new set of source topics, and watch the
  source topics' ids - a topic deleted and recreated under the same name gets a new id, which
  the worker must treat as a possible loss (drkit.replication.loss) and resume from scratch.
* Heartbeats (every ``heartbeat_interval_s``): MirrorMaker 2-format records on the source's
  ``heartbeats`` topic, replicated like data so the target can measure the flow's latency.
  None while the flow is paused or stopped (drkit.control): such a worker writes nothing.
* Side syncs (:class:`SideSync`, each in its own thread, so a slow one - a schema registry
  that does not answer waits out its HTTP timeouts - never delays the topic sync): with
  ``acl_sync`` on the consumers' topic ACLs (drkit.replication.acl_sync; written as the
  fencer), with ``schema_sync`` on the schema registry (drkit.schemas.sync).  Like heartbeats,
  none while paused.

All end when ``quit`` is set and never raise: failures are counted and logged, then retried -
except the topic sync's that no retry cures (a replica the target refuses to create for good,
one named like an internal topic): those are handed to the worker, which ends the flow on them
as it would have at its start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from drkit.config.model import ClusterConfig, Role
from drkit.errors import DrkitError, KafkaError, SchemaRegistryError, Stopped
from drkit.kafka.clients import ClientSettings, ClusterEndpoint
from drkit.kafka.flow_clients import TargetProducer
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.replication.acl_sync import AclSynchronizer
from drkit.replication.heartbeat import Heartbeat
from drkit.replication.metrics import ReplicationMetrics
from drkit.replication.supervision import is_transient
from drkit.replication.topic_sync import TopicSynchronizer
from drkit.topology.flow import FlowTopology

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SideSync:
    """A copy beside the topic sync, every ``interval_s`` (the first right away); its failures
    are counted as ``kind`` and logged, never raised (:func:`side_sync_loop`)."""

    kind: str  # the errors metric's label: acl_sync, schema_sync
    interval_s: float
    run: Callable[[], object]


def side_sync_loop(
    side: SideSync,
    flow: str,
    metrics: ReplicationMetrics,
    quit_: threading.Event,
    active: Callable[[], bool] = lambda: True,
) -> None:
    """Run ``side`` now and then every ``interval_s`` until ``quit_`` is set - only while
    ``active()`` says so: a paused worker (a standby flow, drkit.control) writes nothing, and a
    standby flow's registry copy would write into the primary's registry."""
    while True:
        if not active():
            if quit_.wait(side.interval_s):
                return
            continue
        try:
            side.run()
            metrics.side_sync_success.labels(flow, side.kind).set_to_current_time()
        except Stopped:
            return  # the flow stops: a request under way was given up
        except (KafkaError, SchemaRegistryError) as err:
            metrics.errors.labels(flow, side.kind).inc()
            log.warning(
                f"{side.kind.replace('_', ' ')} failed; will retry",
                extra={"flow": flow, "error": str(err)},
            )
        if quit_.wait(side.interval_s):
            return


def side_syncs(
    topology: FlowTopology,
    source_admin: ClusterAdmin,
    target: ClusterConfig,
    schemas: Callable[[], object] | None,
    connect: AdminFactory,
    stop: threading.Event | None = None,
) -> list[SideSync]:
    """The side syncs a flow's config turns on (``schemas``: its registry copy, if any;
    ``connect``: how it reaches the target as the fencer).

    The ACL copy reads the source's ACLs as the replicator (DESCRIBE on the cluster) but
    writes the target's as the fencer (``role_security.fencer``): creating an ACL takes ALTER
    on the cluster, which also lets its holder rewrite every ACL and SCRAM credential - only
    the fencer holds it (drkit.access.roles), never the replicator."""
    flow = topology.flow
    syncs: list[SideSync] = []
    if flow.acl_sync.enabled:
        fencer = ClusterEndpoint(flow.target, target.for_role(Role.FENCER))
        acls = AclSynchronizer(topology, source_admin, connect(fencer, stop=stop))
        syncs.append(SideSync("acl_sync", flow.acl_sync.interval_s, acls.sync))
    if schemas is not None:
        syncs.append(SideSync("schema_sync", flow.schema_sync.interval_s, schemas))
    return syncs


class TopicWatcher:
    """Keeps the worker's topic set and the source topics' ids current."""

    def __init__(
        self,
        topology: FlowTopology,
        sync: TopicSynchronizer,
        source_admin: ClusterAdmin,
        metrics: ReplicationMetrics,
        lock: threading.Lock,
        on_topics: Callable[[frozenset[str], dict[str, str]], None],
        on_fatal: Callable[[DrkitError], None] = lambda _error: None,
    ) -> None:
        self.topology = topology
        self.sync = sync
        self.source_admin = source_admin
        self.metrics = metrics
        self.lock = lock
        self.on_topics = on_topics
        self.on_fatal = on_fatal  # an error no retry cures: the worker ends the flow on it

    def once(self) -> None:
        """One round: sync topics, then publish the topic set with the topics' current ids."""
        with self.lock:
            plan = self.sync.sync()
            topics = frozenset(self.sync.source_partitions)
        self.metrics.drift.labels(self.topology.name).set(len(plan.drift))
        self.on_topics(topics, self.source_admin.topic_ids(topics))

    def loop(self, quit_: threading.Event) -> None:
        interval = self.topology.flow.topic_refresh_interval_s
        while not quit_.wait(interval):
            try:
                self.once()
            except Stopped:
                return  # the flow stops: a request under way was given up
            except DrkitError as err:
                self.metrics.errors.labels(self.topology.name, "topic_sync").inc()
                if not is_transient(err):
                    # A new source topic whose replica the target refuses for good (or that a
                    # route maps onto an internal name): retrying sends the same request for
                    # ever, and the topic would never be copied - the flow ends, naming it.
                    self.on_fatal(err)
                    return
                log.warning(
                    "topic sync failed; will retry",
                    extra={"flow": self.topology.name, "error": str(err)},
                )


def heartbeat_loop(
    topology: FlowTopology,
    source: ClusterEndpoint,
    metrics: ReplicationMetrics,
    quit_: threading.Event,
    active: Callable[[], bool] = lambda: True,
) -> None:
    """Write heartbeats to the source until ``quit_`` is set, while ``active()`` says so."""
    producer = TargetProducer(
        source,
        ClientSettings({"linger.ms": 0}, {"client.id": f"drkit-heartbeat-{topology.name}"}),
        False,
    )
    key = Heartbeat(topology.source, topology.target, 0).key()
    interval = topology.flow.heartbeat_interval_s
    try:
        while not quit_.is_set():
            if not active():
                quit_.wait(interval)
                continue
            beat = Heartbeat(topology.source, topology.target, int(time.time() * 1000))
            problem = producer.try_produce(topology.heartbeats_topic, beat.value(), key, 0)
            if problem is not None:
                metrics.errors.labels(topology.name, "heartbeat").inc()
                log.debug("heartbeat not sent", extra={"flow": topology.name, "error": problem})
            producer.poll(0)
            quit_.wait(interval)
    finally:
        producer.flush(5)
