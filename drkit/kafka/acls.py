"""Write fencing with ACLs, as values: which ACLs fence a topic and which lift the fence (pure).

Kafka's ``allow.everyone.if.no.acl.found`` holds only for topics without any ACL: the first ACL
on a topic denies everything it does not allow.  A fence is therefore a DENY WRITE ACL per topic
plus - for topics that had no ACL before ("bare" topics) - companion ALLOW READ / DESCRIBE /
DESCRIBE_CONFIGS ACLs, so that only writes stop.  Lifting removes exactly what fencing added.

The Kafka adapter (drkit.kafka.admin_acls) turns these values into librdkafka bindings; the
in-memory fake of the tests stores them as they are, so both follow one policy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class AclOperation(StrEnum):
    WRITE = "write"
    READ = "read"
    DESCRIBE = "describe"
    DESCRIBE_CONFIGS = "describe_configs"


class AclPermission(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True, order=True)
class TopicAcl:
    """A literal ACL on one topic for one principal, from any host."""

    topic: str
    principal: str
    operation: AclOperation
    permission: AclPermission


# What a fenced topic still allows everyone, when it had no ACL before.
KEPT_READS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)


def deny_write(topic: str, principal: str) -> TopicAcl:
    return TopicAcl(topic, principal, AclOperation.WRITE, AclPermission.DENY)


def fence_acls(
    topics: Iterable[str], principal: str, keep_reads: bool, topics_with_acls: Iterable[str]
) -> tuple[frozenset[str], tuple[TopicAcl, ...]]:
    """(the bare topics that get companion ALLOWs, every ACL to create) for fencing ``topics``.

    Idempotent by construction: once fenced, a topic has an ACL, so fencing it again adds no
    companions (and creating an existing ACL changes nothing).
    """
    names = sorted(set(topics))
    bare = frozenset(names) - set(topics_with_acls) if keep_reads else frozenset()
    acls = [deny_write(topic, principal) for topic in names] + [
        TopicAcl(topic, principal, operation, AclPermission.ALLOW)
        for topic in sorted(bare)
        for operation in KEPT_READS
    ]
    return bare, tuple(acls)


def fence_acls_with(
    topics: Iterable[str], principal: str, companions: Iterable[str]
) -> tuple[frozenset[str], tuple[TopicAcl, ...]]:
    """Like :func:`fence_acls`, with the companion topics decided by the caller (those of
    ``companions`` among ``topics``)."""
    names = sorted(set(topics))
    bare = frozenset(names) & set(companions)
    return fence_acls(names, principal, True, set(names) - bare)


def lift_acls(
    topics: Iterable[str], principal: str, reads_allowed: Iterable[str]
) -> tuple[TopicAcl, ...]:
    """Every ACL fencing added to ``topics``; ``reads_allowed``: the topics that got companions."""
    return tuple(
        [deny_write(topic, principal) for topic in sorted(set(topics))]
        + [
            TopicAcl(topic, principal, operation, AclPermission.ALLOW)
            for topic in sorted(set(reads_allowed))
            for operation in KEPT_READS
        ]
    )
