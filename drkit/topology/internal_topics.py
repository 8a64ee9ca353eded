"""Names of the topics drkit (and MirrorMaker 2) use for their own bookkeeping.

All of them end in ``.internal`` (or are ``heartbeats``) so that topic filters can recognise
and skip them; ``heartbeats`` is the exception that *is* replicated, as in MirrorMaker 2.
"""

from __future__ import annotations

HEARTBEATS = "heartbeats"
OFFSETS_TOPIC = "__consumer_offsets"  # Kafka's own: where groups' commits are logged


def offset_syncs_topic(source: str) -> str:
    """drkit's dense offset-sync runs for flows from ``source`` (lives on the target)."""
    return f"drkit-offset-syncs.{source}.internal"


def progress_topic(source: str) -> str:
    """Replication progress for flows from ``source`` (lives on the target, compacted)."""
    return f"drkit-progress.{source}.internal"


def control_topic(source: str) -> str:
    """Flow directives and workers' acks for flows from ``source``, beside the state store
    (lives on the target, compacted; drkit.control.channel)."""
    return f"drkit-control.{source}.internal"


def adopted_topic(source: str) -> str:
    """MirrorMaker 2's offset syncs below the point ``drkit adopt`` took a flow from ``source``
    over at (lives on the target, compacted; drkit.adoption.adopted)."""
    return f"drkit-adopted.{source}.internal"


def checkpoints_topic(source: str) -> str:
    """MirrorMaker 2-compatible consumer-group checkpoints from ``source`` (on the target)."""
    return f"{source}.checkpoints.internal"


POINTER_TOPIC = "drkit-pointer.internal"
"""The active pointer as clients read it when the state store or a data center is gone: one
signed record per pointer, written by the failover engine to every cluster that answers
(compacted; drkit.client.pointer_record, docs/client-pointer.md) - the default of
``failover.pointer_topic`` (a deployment sharing its clusters, a drill, names its own)."""


def is_internal(topic: str) -> bool:
    """Topics never replicated as data: Kafka's own (``__*``) and any ``*.internal`` topic."""
    return topic.startswith("__") or topic.endswith(".internal") or topic.startswith("_drkit")


OWN_GROUP_PREFIXES = ("drkit-", "__drkit")


def is_own_group(group: str) -> bool:
    """Consumer groups drkit itself uses (replication, checkpoint elections, readers): never
    translated, checkpointed or watched as applications' groups."""
    return group.startswith(OWN_GROUP_PREFIXES)
