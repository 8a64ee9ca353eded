"""A flow's names and shape - the vocabulary every layer above the configuration speaks.

``flow`` (:class:`~drkit.topology.flow.FlowTopology`: replica names, bookkeeping topics,
groups and transactional ids of one flow - the one place they are computed), ``policy`` (the
replication policy: target topic names), ``topic_filter`` (which topics a flow selects),
``transforms`` (record transforms and routes), ``streams`` (Kafka Streams' own topics),
``internal_topics`` (drkit's and MirrorMaker 2's bookkeeping names, ``is_internal``).  Pure:
no I/O, no Kafka client; the data plane (drkit.replication), access, control, health and
failover all build on it.
"""
