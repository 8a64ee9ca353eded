"""The ClusterAdmin port: KafkaAdmin and the in-memory fake both implement it, with the same
parameters and defaults; the fencing policy (drkit.acl.fencing) both follow."""

from __future__ import annotations

import inspect

import pytest

from drkit.acl.fencing import (
    KEPT_READS,
    fence_acls,
    lift_acls,
    topic_acl,
)
from drkit.acl.rules import Operation, Permission
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from tests.fake_kafka import FakeCluster


def _kafka_admin_implements_the_port(admin: KafkaAdmin) -> tuple[ClusterAdmin, AdminFactory]:
    """Never called: mypy (strict, over tests/) checks the assignment here."""
    return admin, KafkaAdmin


PORT_METHODS = sorted(
    name
    for name, member in vars(ClusterAdmin).items()
    if callable(member) and not name.startswith("_")
)


def test_the_port_lists_what_orchestration_uses() -> None:
    # Also guards the parametrized check below against testing nothing.
    assert set(PORT_METHODS) == {
        "wait_ready", "answers", "close", "not_answering", "describe_cluster", "broker_configs",
        "list_topics", "create_topics", "create_partitions", "delete_topics", "topic_configs",
        "set_topic_configs", "topic_ids",
        "list_offsets", "stable_offsets", "visible_records", "topic_offsets",
        "list_groups", "describe_groups", "other_groups", "group_offsets", "groups_offsets",
        "alter_group_offsets",
        "alter_groups_offsets", "delete_groups",
        "authorizer_enabled", "acl_entries", "create_entries", "delete_entries", "grant",
        "allow_everything",
        "topics_with_acls", "deny_writes", "allow_writes", "write_denied",
    }  # fmt: skip


@pytest.mark.parametrize("name", PORT_METHODS)
def test_kafka_admin_and_the_fake_take_the_ports_parameters_with_its_defaults(name: str) -> None:
    """mypy checks types but not default values: a fake whose default differs from the real
    admin's (say ``principal``) would let a unit test pass that fails against a broker."""

    def shape(cls: type) -> list[tuple[str, object]]:
        parameters = inspect.signature(getattr(cls, name)).parameters.values()
        return [(p.name, p.default) for p in parameters]

    assert shape(KafkaAdmin) == shape(ClusterAdmin), name
    assert shape(FakeCluster) == shape(ClusterAdmin), name


def test_fencing_a_bare_topic_keeps_its_reads_and_one_with_acls_gets_no_companions() -> None:
    bare, acls = fence_acls(["orders", "payments"], "User:*", True, topics_with_acls={"payments"})
    assert bare == {"orders"}
    assert set(acls) == {
        topic_acl("orders", "User:*", Operation.WRITE, Permission.DENY),
        topic_acl("payments", "User:*", Operation.WRITE, Permission.DENY),
        *(topic_acl("orders", "User:*", op, Permission.ALLOW) for op in KEPT_READS),
    }
    # Lifting removes exactly what fencing added.
    assert set(lift_acls(["orders", "payments"], "User:*", bare)) == set(acls)
    # Without keep_reads: only the DENYs, and nothing is reported as having companions.
    none, only_denies = fence_acls(["orders"], "User:x", False, topics_with_acls=())
    assert none == frozenset()
    assert only_denies == (topic_acl("orders", "User:x", Operation.WRITE, Permission.DENY),)


def test_fencing_twice_adds_nothing_the_second_time() -> None:
    cluster = FakeCluster()
    assert cluster.deny_writes(["orders"]) == {"orders"}
    before = set(cluster.acls)
    assert cluster.deny_writes(["orders"]) == set()
    assert cluster.acls == before and len(before) == 1 + len(KEPT_READS)
