"""Which source ACLs become which replica ACLs (flows[].acl_sync), pure."""

from __future__ import annotations

import pytest
import yaml

from drkit.acl.rules import AclEntry, Operation, PatternType, Permission, Resource, ResourceType
from drkit.config.loader import load_config_text
from drkit.replication.acl_sync import desired_entries, drift_lines, missing
from drkit.topology.flow import FlowTopology

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "localhost:9092"}
  dc2: {bootstrap_servers: "localhost:9093"}
flows:
  - source: dc1
    target: dc2
    topics: {include: ["orders.*"]}
    acl_sync:
      enabled: true
      principals: {"User:bob": "User:bob-dr", "User:nobody": null}
"""


def _topic(name: str, pattern: PatternType = PatternType.LITERAL) -> Resource:
    return Resource(ResourceType.TOPIC, name, pattern)


def _topology() -> FlowTopology:
    return FlowTopology.of(load_config_text(CONFIG).flows[0])


def test_read_access_is_copied_to_the_replicas_and_write_access_never() -> None:
    source = [
        AclEntry("User:alice", _topic("orders"), Operation.READ),
        AclEntry("User:bob", _topic("orders"), Operation.ALL),  # mapped, ALL -> READ+DESCRIBE
        AclEntry("User:carol", _topic("orders"), Operation.WRITE),  # never copied
        AclEntry("User:mallory", _topic("orders"), Operation.READ, Permission.DENY),
        AclEntry("User:dave", _topic("orders-", PatternType.PREFIXED), Operation.DESCRIBE),
        AclEntry("User:nobody", _topic("orders"), Operation.READ),  # mapped to null
        AclEntry("User:zed", _topic("payments"), Operation.READ),  # not in the flow
        AclEntry("User:erin", _topic("*"), Operation.READ),  # the wildcard stays home
        AclEntry("User:alice", Resource(ResourceType.GROUP, "orders"), Operation.READ),
    ]
    assert desired_entries(
        source, _topology(), {"User:bob": "User:bob-dr", "User:nobody": None}
    ) == {
        AclEntry("User:alice", _topic("dc1.orders"), Operation.READ),
        AclEntry("User:bob-dr", _topic("dc1.orders"), Operation.READ),
        AclEntry("User:bob-dr", _topic("dc1.orders"), Operation.DESCRIBE),
        AclEntry("User:mallory", _topic("dc1.orders"), Operation.READ, Permission.DENY),
        AclEntry("User:dave", _topic("dc1.orders-", PatternType.PREFIXED), Operation.DESCRIBE),
    }


def test_drift_is_what_the_target_lacks_and_is_named() -> None:
    wanted = {
        AclEntry("User:alice", _topic("dc1.orders"), Operation.READ),
        AclEntry("User:bob-dr", _topic("dc1.orders"), Operation.READ),
    }
    present = {AclEntry("User:alice", _topic("dc1.orders"), Operation.READ)}
    (gap,) = missing(wanted, present)
    assert drift_lines([gap], "dc2") == [
        "ACL missing on dc2: ALLOW User:bob-dr READ on topic 'dc1.orders'"
    ]
    assert missing(wanted, wanted) == ()


def test_a_mapping_to_something_that_is_not_a_principal_is_refused() -> None:
    with pytest.raises(Exception, match="not a principal"):
        load_config_text(CONFIG.replace('"User:bob-dr"', '"bob-dr"'))


def test_the_copy_writes_the_target_acls_as_the_fencer_never_as_the_replicator() -> None:
    """Security review 6, M3: ALTER on the cluster (Kafka's grant for CreateAcls) also lets its
    holder rewrite every ACL and SCRAM credential - the replicator must not hold it for
    acl_sync: the copy connects to the target with the fencer's credentials."""
    from drkit.access.roles import role_needs
    from drkit.config.model import Role
    from drkit.kafka import KafkaAdmin
    from drkit.kafka.clients import ClusterEndpoint
    from drkit.replication.acl_sync import AclSynchronizer
    from drkit.replication.background import side_syncs

    def login(user: str) -> dict[str, str]:
        return {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                "username": user, "password": "x"}  # fmt: skip

    document = yaml.safe_load(CONFIG)
    for cluster in document["clusters"].values():
        cluster["role_security"] = {"replicator": login("repl"), "fencer": login("fence")}
    config = load_config_text(yaml.safe_dump(document)).as_role(Role.REPLICATOR)
    flow = config.flows[0]
    source = KafkaAdmin(ClusterEndpoint("dc1", config.clusters["dc1"]))
    try:
        (side,) = side_syncs(
            FlowTopology.of(flow), source, config.clusters["dc2"], None, KafkaAdmin
        )
        synchronizer = getattr(side.run, "__self__", None)
        assert isinstance(synchronizer, AclSynchronizer)
        assert synchronizer.source is source  # reading the source's ACLs: the replicator's
        assert isinstance(synchronizer.target, KafkaAdmin)
        assert synchronizer.target.endpoint.config.security.login == "fence"
        synchronizer.target.close()
    finally:
        source.close()
    for alias in ("dc1", "dc2"):
        replicator = role_needs(Role.REPLICATOR, alias, config).needs
        assert not any(n.operation is Operation.ALTER and n.resource == Resource.cluster()
                       for n in replicator), alias  # fmt: skip
    source_needs = role_needs(Role.REPLICATOR, "dc1", config).needs
    assert any(n.operation is Operation.DESCRIBE and n.resource == Resource.cluster()
               for n in source_needs)  # fmt: skip
    fencer = role_needs(Role.FENCER, "dc2", config).needs
    assert any(n.operation is Operation.ALTER and n.resource == Resource.cluster()
               and "acl_sync" in n.why for n in fencer)  # fmt: skip
