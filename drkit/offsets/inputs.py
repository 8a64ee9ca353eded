"""The one reader of translation inputs: per source partition, one
:class:`~drkit.translation.PartitionInputs` - the offset map, the replica's log bounds, the
source's end and log start (and, for a checkpoint round, how much of the previous round's
answers still hold).

The offset maps come from the flow's :class:`~drkit.offsets.mapping_loader.MappingLoader`
(the target's offset syncs and progress); this module asks both clusters for the rest, once per
call: the checkpointer every round, ``drkit offsets translate`` (and through it the readiness
drill and the monitor's ``/api/translate``) per call, and the failover plan's snapshot
(drkit/failover/snapshot.py ``gather``) - which keeps each partition's inputs in its
``PartitionFacts``.  What differs between them is said by the caller: which partitions, whether
the target's topics were listed (a replica whose topic it lacks has no bounds - no replica), the
source's last ends known when it does not answer, the previous round's inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from drkit.kafka.ports import ClusterAdmin
from drkit.records import TopicPartition
from drkit.topology.flow import FlowTopology
from drkit.translation import PartitionInputs, PartitionMapping, TargetBounds, stable_below


def replica_of(
    tp: TopicPartition, mappings: Mapping[TopicPartition, PartitionMapping], topology: FlowTopology
) -> TopicPartition:
    """Where ``tp`` is replicated: where its offset map says, else the flow's name for it."""
    mapping = mappings.get(tp)
    return mapping.target if mapping is not None else topology.target_partition(tp)


@dataclass(frozen=True)
class InputsRead:
    """One read: each partition's replica and inputs, and the ends the source answered with
    (``live_ends``: empty when it was not asked)."""

    replicas: Mapping[TopicPartition, TopicPartition]
    inputs: Mapping[TopicPartition, PartitionInputs]
    live_ends: Mapping[TopicPartition, int]


def read_inputs(
    partitions: Iterable[TopicPartition],
    mappings: Mapping[TopicPartition, PartitionMapping],
    topology: FlowTopology,
    target: ClusterAdmin,
    source: ClusterAdmin | None,
    *,
    listed: Collection[str] | None = None,
    last_ends: Mapping[TopicPartition, int | None] | None = None,
    previous: Mapping[TopicPartition, PartitionInputs] | None = None,
) -> InputsRead:
    """The inputs of ``partitions`` (source partitions of ``topology``'s flow).

    ``source`` None: it does not answer - no live end or log start.  ``listed``: the target's
    topic names, as just listed - replicas on other topics are not asked and have no bounds;
    None asks for every replica.  ``last_ends``: the source ends to use where the source gave
    none (the failover plan's: what the workers last saw).  ``previous``: the inputs the last
    round translated with (``stable``: how far its answers still hold)."""
    wanted = list(partitions)
    replicas = {tp: replica_of(tp, mappings, topology) for tp in wanted}
    asked = list(dict.fromkeys(r for r in replicas.values() if listed is None or r.topic in listed))
    starts = target.list_offsets(asked, "earliest")
    ends = target.list_offsets(asked, "latest")
    live_ends = source.list_offsets(wanted, "latest") if source is not None else {}
    live_starts = source.list_offsets(wanted, "earliest") if source is not None else {}
    fallback = last_ends or {}
    before = previous or {}
    inputs: dict[TopicPartition, PartitionInputs] = {}
    for tp in wanted:
        replica, mapping = replicas[tp], mappings.get(tp)
        old = before.get(tp)
        inputs[tp] = PartitionInputs(
            mapping,
            TargetBounds(starts[replica], ends[replica])
            if replica in starts and replica in ends
            else None,
            live_ends[tp] if tp in live_ends else fallback.get(tp),
            stable_below(old.mapping, mapping)
            if old is not None and old.mapping is not None and mapping is not None
            else 0,
            live_starts.get(tp),
        )
    return InputsRead(replicas, inputs, live_ends)
