"""Reads what :func:`drkit.repoint.repoint` decides over, from the two standbys (read-only I/O).

For a lost source with flows into a promoted cluster and a remaining standby (dc1->dc2 and
dc1->dc3, dc2 promoted): each flow's merged offset maps (its :class:`MappingLoader`, verified
with the flow's key), its replicas' log bounds, and - by provenance - every position of a
replica no map run places (:meth:`drkit.repoint.Replica.unmapped`).  Nothing is written, and
the lost source is never asked.

Provenance reads are bounded: at most :data:`READ_LIMIT` records per replica partition.  A
range left unread past it makes that partition's answer ``CannotTell`` (naming the range) - an
answer is never built on a partial read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory
from drkit.offsets.inputs import replica_of
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.provenance_search import RecordSource, SourcePartition, copy_offset
from drkit.records import TopicPartition
from drkit.repoint import CannotTell, Replica, Repointed, Scanned, repoint
from drkit.signing import Kind, Signer
from drkit.topology.flow import FlowTopology
from drkit.translation import PartitionMapping, TargetBounds

READ_LIMIT = 200_000  # records read by provenance per replica partition


@dataclass(frozen=True)
class RepointReport:
    """Per origin partition (the lost source's), where the standby follows from, and which
    replicas those are.  ``unsynced``: per origin partition, the copies the standby's replica
    holds at positions no run of its map places, as ``(position, origin offset)`` in position
    order - read by provenance (a follow-on or a worker killed between its copies and their
    offset syncs); the run writes the syncs that place them."""

    lost: str
    promoted: str
    standby: str
    results: Mapping[TopicPartition, Repointed]
    replicas: Mapping[TopicPartition, tuple[TopicPartition, TopicPartition]]
    unsynced: Mapping[TopicPartition, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # Per origin partition both replicas were read for: (promoted, standby) as read - what
    # the onward map (drkit.repoint.onward) is computed from.
    sides: Mapping[TopicPartition, tuple[Replica, Replica]] = field(default_factory=dict)
    # Why the run wrote no onward map (promoted position -> standby position syncs of the flow
    # promoted->standby); None: written, or a plan.
    onward: str | None = None


def read_repoint(
    config: DrkitConfig,
    lost: str,
    promoted: str,
    standby: str,
    *,
    connect: AdminFactory,
    keys: Callable[[str], bytes] | None,
    records: Callable[[ClusterEndpoint], RecordSource],
) -> RepointReport:
    """Reads both flows out of ``lost`` (``lost->promoted``, ``lost->standby``; a missing one is
    a ``KeyError`` naming it) and decides each partition either map knows.  ``records`` opens a
    positioned reader on a cluster (the adapter's ``PartitionReader``); it is closed here when
    it has a ``close``."""
    flows = (config.flow(f"{lost}->{promoted}"), config.flow(f"{lost}->{standby}"))
    maps = [_mappings(config, flow, keys) for flow in flows]
    origins = sorted(set(maps[0]) | set(maps[1]))
    wheres: list[dict[TopicPartition, TopicPartition]] = []
    sides: list[dict[TopicPartition, Replica]] = []
    missing: dict[TopicPartition, str] = {}  # a replica not on its cluster: nothing to decide
    for flow, mappings in zip(flows, maps, strict=True):
        topology = FlowTopology.of(flow)
        endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
        where = {tp: replica_of(tp, mappings, topology) for tp in origins}
        wheres.append(where)
        admin = connect(endpoint)
        try:
            topics = admin.list_topics()
            asked = [
                r
                for r in dict.fromkeys(where.values())
                if r.topic in topics and r.partition < topics[r.topic].partition_count
            ]
            starts = admin.list_offsets(asked, "earliest")
            ends = admin.list_offsets(asked, "latest")
        finally:
            admin.close()
        reader = records(endpoint)
        try:
            side: dict[TopicPartition, Replica] = {}
            for tp in origins:
                replica = where[tp]
                if replica not in starts or replica not in ends:
                    named = f"{replica.topic}-{replica.partition}"
                    missing.setdefault(tp, f"the replica {named} is not on {flow.target}")
                    continue
                bounds = TargetBounds(starts[replica], ends[replica])
                bare = Replica(replica, bounds, mappings.get(tp))
                side[tp] = _scanned(bare, reader, SourcePartition(lost, tp))
            sides.append(side)
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()
    replicas = {tp: (wheres[0][tp], wheres[1][tp]) for tp in origins}
    results: dict[TopicPartition, Repointed] = {
        tp: CannotTell(tp, missing[tp])
        if tp in missing
        else repoint(tp, sides[0][tp], sides[1][tp])
        for tp in origins
    }
    unsynced = {tp: _copies(side) for tp, side in sides[1].items()}
    both = {tp: (sides[0][tp], sides[1][tp]) for tp in origins if tp in sides[0] and tp in sides[1]}
    return RepointReport(lost, promoted, standby, results, replicas, unsynced, both)


def _copies(replica: Replica) -> tuple[tuple[int, int], ...]:
    """The copies ``replica``'s provenance reads found (every read is of positions no run
    places), in position order."""
    return tuple(sorted(copy for scan in replica.scanned for copy in scan.copies))


def _mappings(
    config: DrkitConfig, flow: FlowConfig, keys: Callable[[str], bytes] | None
) -> dict[TopicPartition, PartitionMapping]:
    signer = Signer(keys(flow.name), Kind.OFFSET_SYNC, flow.name) if keys is not None else None
    endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    loader = MappingLoader(flow, endpoint, signer=signer)
    try:
        return dict(loader.refresh())
    finally:
        loader.close()


def _scanned(
    replica: Replica, reader: RecordSource, origin: SourcePartition, limit: int = READ_LIMIT
) -> Replica:
    """``replica`` with its unmapped positions read by provenance, at most ``limit`` records
    (what is past it stays unread: ``repoint`` then says which range)."""
    budget = limit
    scans: list[Scanned] = []
    for start, end in replica.unmapped():
        if budget <= 0:
            break
        copies: list[tuple[int, int]] = []
        reached, complete = start, True
        with closing(reader.records_from(replica.partition, start)) as found:
            for record in found:
                if record.offset >= end:
                    break
                if budget <= 0:
                    complete = False
                    break
                budget -= 1
                reached = record.offset + 1
                offset = copy_offset(record, origin)
                if offset is not None:
                    copies.append((record.offset, offset))
        # Read to the range's end, or to the partition's as read_committed sees it: markers
        # and aborted records hold no copy (an open transaction's records, not visible yet,
        # are what the follow-on, a read_committed reader too, would not see either).
        scans.append(Scanned(start, end if complete else reached, tuple(copies)))
    return Replica(replica.partition, replica.bounds, replica.mapping, tuple(scans))
