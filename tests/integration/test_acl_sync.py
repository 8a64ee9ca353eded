"""flows[].acl_sync on real brokers: the consumers' topic ACLs reach the replicas (READ and
DESCRIBE, DENY too, never WRITE, principals mapped), and until they do ``drkit status`` shows
each missing one as drift."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from drkit.acl.rules import AclEntry, Operation, PatternType, Permission, Resource, ResourceType
from drkit.kafka import KafkaAdmin
from drkit.replication.acl_sync import AclSynchronizer
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.integration.test_monitor import FAST_HEALTH, MonitorProcess
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until


def _topic(name: str, pattern: PatternType = PatternType.LITERAL) -> Resource:
    return Resource(ResourceType.TOPIC, name, pattern)


def test_consumers_acls_reach_the_replicas_and_status_shows_them_missing_until_then(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    # ACLs on names no test reads or writes: on these open clusters an ACL on a topic closes
    # it to everyone else (allow.everyone.if.no.acl.found applies to topics without ACLs).
    base = names.topic("acl")
    sync = {
        "enabled": True,
        "interval_s": 1,
        "principals": {"User:bob": "User:bob-dr", "User:nobody": None},
    }
    setup = flow_setup(tmp_path, dc1, dc2, [f"{re.escape(base)}\\..*"],
                       document_extra=FAST_HEALTH, acl_sync=sync)  # fmt: skip
    topology = FlowTopology.of(setup.config.flows[0])
    literal, prefix = f"{base}.a", f"{base}.p"
    on_source = {
        AclEntry("User:alice", _topic(literal), Operation.READ),
        AclEntry("User:bob", _topic(literal), Operation.ALL),
        AclEntry("User:carol", _topic(literal), Operation.WRITE),
        AclEntry("User:mallory", _topic(literal), Operation.READ, Permission.DENY),
        AclEntry("User:dave", _topic(prefix, PatternType.PREFIXED), Operation.DESCRIBE),
        AclEntry("User:nobody", _topic(literal), Operation.READ),
        AclEntry("User:zed", _topic(f"other-{base}"), Operation.READ),
    }
    replica, replicas = topology.target_topic(literal), topology.target_topic(prefix)
    wanted = {
        AclEntry("User:alice", _topic(replica), Operation.READ),
        AclEntry("User:bob-dr", _topic(replica), Operation.READ),
        AclEntry("User:bob-dr", _topic(replica), Operation.DESCRIBE),
        AclEntry("User:mallory", _topic(replica), Operation.READ, Permission.DENY),
        AclEntry("User:dave", _topic(replicas, PatternType.PREFIXED), Operation.DESCRIBE),
    }
    source, target = KafkaAdmin(setup.source_endpoint), KafkaAdmin(setup.target_endpoint)
    source.create_entries(on_source)
    try:
        with MonitorProcess(setup.path, "o1", tmp_path) as monitor:

            def drift() -> dict[str, Any] | None:
                status = monitor.status()
                flow = (status or {}).get("flows", {}).get(topology.name, {})
                return flow if flow.get("drift") is not None else None

            flow = wait_until(drift, 60, 0.5, what="the monitor compared the flow")
            # (the heartbeats replica is missing too: no worker has run yet)
            acl_lines = [line for line in flow["drift"] if line.startswith("ACL missing")]
            assert acl_lines == [f"ACL missing on {setup.target}: {e}" for e in sorted(wanted)]
        with Replicator(setup, log_dir=tmp_path):
            wait_until(lambda: wanted <= target.acl_entries(), 60, 0.5, what="ACLs copied")
        mine = {e for e in target.acl_entries() if e.resource.name.startswith(setup.source)}
        assert {e for e in mine if base in e.resource.name} == wanted  # nothing else, no WRITE
        assert AclSynchronizer(topology, source, target).compare() == ()
    finally:
        source.delete_entries(on_source)
        target.delete_entries(wanted)
