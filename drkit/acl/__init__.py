"""Kafka ACLs as values, below the adapter and everything that decides with them (pure).

``rules`` (:class:`~drkit.acl.rules.AclEntry`, resources, operations, :class:`Need` and
:func:`authorized`: how Kafka's authorizer decides) and ``fencing`` (which ACLs fence a topic
against writes and which lift it).  One ACL vocabulary for the adapter (drkit.kafka turns these
values into librdkafka bindings), the role checks (drkit.access), the protections reconciler
(drkit.failover) and the in-memory clusters of the tests.
"""
