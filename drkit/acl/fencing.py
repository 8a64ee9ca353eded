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

from drkit.acl.rules import AclEntry, Operation, PatternType, Permission, Resource, ResourceType


def topic_acl(
    topic: str, principal: str, operation: Operation, permission: Permission = Permission.ALLOW
) -> AclEntry:
    """A literal ACL on one topic for one principal, from any host - in drkit's one ACL
    vocabulary (drkit.acl.rules), which fencing shares with the role checks."""
    return AclEntry(principal, Resource(ResourceType.TOPIC, topic), operation, permission)


def is_topic_acl(entry: AclEntry) -> bool:
    """A literal ACL on one topic from any host, of a kind fencing writes (or lifts)."""
    resource = entry.resource
    return (
        resource.type is ResourceType.TOPIC
        and resource.pattern is PatternType.LITERAL
        and entry.host == "*"
        and entry.operation in FENCING_OPERATIONS
    )


# What a fenced topic still allows everyone, when it had no ACL before.
KEPT_READS = (Operation.READ, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)
FENCING_OPERATIONS = frozenset({Operation.WRITE, *KEPT_READS})


def deny_write(topic: str, principal: str) -> AclEntry:
    return topic_acl(topic, principal, Operation.WRITE, Permission.DENY)


def fence_acls(
    topics: Iterable[str], principal: str, keep_reads: bool, topics_with_acls: Iterable[str]
) -> tuple[frozenset[str], tuple[AclEntry, ...]]:
    """(the bare topics that get companion ALLOWs, every ACL to create) for fencing ``topics``.

    Idempotent by construction: once fenced, a topic has an ACL, so fencing it again adds no
    companions (and creating an existing ACL changes nothing).
    """
    names = sorted(set(topics))
    bare = frozenset(names) - set(topics_with_acls) if keep_reads else frozenset()
    acls = [deny_write(topic, principal) for topic in names] + [
        topic_acl(topic, principal, operation) for topic in sorted(bare) for operation in KEPT_READS
    ]
    return bare, tuple(acls)


def fence_acls_with(
    topics: Iterable[str], principal: str, companions: Iterable[str]
) -> tuple[frozenset[str], tuple[AclEntry, ...]]:
    """Like :func:`fence_acls`, with the companion topics decided by the caller (those of
    ``companions`` among ``topics``)."""
    names = sorted(set(topics))
    bare = frozenset(names) & set(companions)
    return fence_acls(names, principal, True, set(names) - bare)


def lift_acls(
    topics: Iterable[str], principal: str, reads_allowed: Iterable[str]
) -> tuple[AclEntry, ...]:
    """Every ACL fencing added to ``topics``; ``reads_allowed``: the topics that got companions."""
    return tuple(
        [deny_write(topic, principal) for topic in sorted(set(topics))]
        + [
            topic_acl(topic, principal, operation)
            for topic in sorted(set(reads_allowed))
            for operation in KEPT_READS
        ]
    )
