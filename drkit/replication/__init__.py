"""The replication data plane (MirrorMaker-class) and what it records for failover.

A flow's names and shape (policy, topic filter, transforms, drkit's own topic names) are
drkit.topology, below this package.  Pure parts here: ``provenance`` (the per-record origin
header), ``heartbeat`` and ``offset_sync`` (record formats and the dense run-length offset
map), ``topic_sync`` (what to create or change on the target).
I/O parts: ``progress`` and ``offset_sync_store`` (state kept on the target cluster),
``worker`` (the consume→produce loop of one flow), ``service`` (flows across worker processes).
"""
