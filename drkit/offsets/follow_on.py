"""The follow-on copy: the part of the lost source's data the promoted cluster holds and the
remaining standby lacks, copied once (issue 48 item 1, docs/three-dc.md).

dc1 lost, dc2 promoted, dc3 to follow dc2.  For one origin partition (dc1's ``orders``-p) whose
:func:`drkit.repoint.repoint` answer is :class:`~drkit.repoint.FollowFrom`, :func:`follow_on`
reads dc2's replica of it read_committed from ``start`` (X) to its end - dc1 is gone and
dc1->dc2 stopped, so that end is fixed: a bounded copy - and writes into dc3's replica of it
(the partition dc1->dc3 wrote) exactly the records :func:`chosen` picks:

* a copy of the origin partition (its ``drkit-src`` names dc1's cluster, topic and partition),
* whose origin offset is ``>= frontier`` (F: dc3 holds everything below), and
* not among the origin offsets this copy already wrote (a set), so dc2's own duplicates past X
  (dc1->dc2 restarts re-copying a range) are written once.  Not a high-water mark: where a
  dc1->dc2 crash re-copy lacks a record compacted away on dc1 in between, that record's only
  copy lies before the re-copies of lower offsets (X is placed there), and a high-water mark
  would skip those re-copies; the set copies them (out of origin order on dc3, as on dc2).
  With copies in origin order, as a worker writes them, the two are the same.

Each is written as it is on dc2 - key, value, timestamp and every header; its ``drkit-src``
stays dc1's provenance - and what was written is recorded as offset syncs of the flow
dc1->dc3 (origin offset -> dc3 position), in dc1->dc3's offset-syncs topic, signed with
dc1->dc3's key as its worker signs its own (drkit/replication/commit.py): dc3's replica stays
one copy of dc1's partition, and every checkpoint or group offset stated in dc1 offsets keeps
translating over dc1->dc3's map.

Per batch, the copies and then their syncs; in one transaction when dc1->dc3 is exactly-once
(:class:`StandbyWriter`).  Without one, a copy killed between its copies and their syncs
leaves copies no run places: the next run's :func:`~drkit.offsets.repoint_inputs.read_repoint`
reads dc3's unmapped positions by provenance and raises F past them, so a re-run never writes
an origin offset twice.  The decisions (:func:`chosen`, :func:`offset_syncs`) are pure; the
reads and writes go through the two ports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from contextlib import closing
from dataclasses import dataclass, replace
from typing import Protocol

from drkit import failpoints
from drkit.config.model import DrkitConfig, Role
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.partition_reader import PartitionReader
from drkit.kafka.ports import AdminFactory
from drkit.kafka.positioned_writer import PositionedWriter
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.provenance_search import RecordSource, SourcePartition, copy_offset
from drkit.offsets.repoint_inputs import RepointReport, read_repoint
from drkit.records import Record, TopicPartition
from drkit.replication.bookkeeping import ensure_bookkeeping_topics
from drkit.replication.offset_sync import OffsetSync, RunTracker
from drkit.replication.progress import Progress
from drkit.repoint import CannotTell, FollowFrom, Replica, StandbyAhead, unplaced
from drkit.repoint import onward as onward_map
from drkit.signing import Kind, Signer
from drkit.topology.flow import FlowTopology
from drkit.translation import PartitionMapping

BATCH = 1000  # records read from the promoted replica per batch (and per transaction)


class StandbyWriter(Protocol):
    """Writes to the standby (dc3): :class:`drkit.kafka.positioned_writer.PositionedWriter`,
    or a test fake.  Between ``begin`` and ``commit`` one transaction when transactional."""

    def begin(self) -> None: ...

    def write(self, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
        """Each record's key, value, headers and timestamp to ``topic``-``partition`` in
        order; the positions they landed at, once all are acknowledged (else raises)."""
        ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


@dataclass(frozen=True)
class Leased:
    """A :class:`StandbyWriter` under its caller's lease: ``confirm`` (raising
    :class:`~drkit.errors.LeaseLost` when the lease is gone) runs before every write and every
    commit.  A failover step's copy can take minutes; an engine frozen in it whose lease a
    resumed run took over must not go on writing beside that run (outside a transaction its
    batches would land twice), nor commit a transaction it began before the freeze."""

    writer: StandbyWriter
    confirm: Callable[[], object]

    def begin(self) -> None:
        self.writer.begin()

    def write(self, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
        self.confirm()
        return self.writer.write(topic, partition, records)

    def commit(self) -> None:
        self.confirm()
        self.writer.commit()

    def abort(self) -> None:
        self.writer.abort()


@dataclass(frozen=True)
class Copied:
    """What the follow-on wrote for one origin partition: ``copied`` records, the lowest origin
    offset ``first`` and one past the highest ``end`` (None when none), having read ``read``
    records of the promoted replica from ``start``."""

    origin: TopicPartition
    promoted: TopicPartition
    standby: TopicPartition
    start: int
    frontier: int
    read: int
    copied: int
    first: int | None
    end: int | None
    placed: int = 0  # earlier copies on the standby no sync placed, placed by this run
    # What this run wrote: (origin offset, standby position), in write order.
    pairs: tuple[tuple[int, int], ...] = ()
    # Promoted positions the onward map (promoted -> standby syncs) gained from this run
    # (None: not written - no onward flow in the config, or the partition's map unknown).
    onward: int | None = None


def chosen(
    records: Iterable[Record], origin: SourcePartition, frontier: int, written: Set[int]
) -> list[tuple[Record, int]]:
    """The records to copy, each with its origin offset (pure): a record is copied exactly when
    it is a copy of ``origin`` whose offset is at least ``frontier`` and neither in ``written``
    (what this copy wrote before) nor copied earlier in ``records``."""
    out: list[tuple[Record, int]] = []
    taken: set[int] = set()
    for record in records:
        offset = copy_offset(record, origin)
        if offset is None or offset < frontier or offset in written or offset in taken:
            continue
        out.append((record, offset))
        taken.add(offset)
    return out


def offset_syncs(
    origin: TopicPartition, standby: TopicPartition, pairs: Iterable[tuple[int, int]]
) -> list[OffsetSync]:
    """The offset-sync runs of ``(origin offset, standby position)`` pairs in write order,
    as the worker's tracker builds them (pure)."""
    tracker = RunTracker(origin, standby)
    for offset, position in pairs:
        tracker.observe(offset, position)
    return tracker.drain()


def signed(syncs: Sequence[OffsetSync], topic: str, signer: Signer | None) -> list[Record]:
    """The offset-sync records to write to ``topic`` (partition 0, as the worker writes them),
    each with its ``drkit-mac`` header when there is a key."""
    out: list[Record] = []
    for sync in syncs:
        key, value = sync.key(), sync.value()
        headers = (signer.header(key, value),) if signer is not None else ()
        out.append(Record(topic, 0, -1, key, value, headers))
    return out


def follow_on(
    plan: FollowFrom,
    replicas: tuple[TopicPartition, TopicPartition],
    lost: str,
    reader: RecordSource,
    writer: StandbyWriter,
    syncs_topic: str,
    signer: Signer | None,
    batch: int = BATCH,
) -> Copied:
    """Copy ``plan.origin``'s records from the promoted replica (``replicas[0]``, read from
    ``plan.start`` to its end) into the standby's (``replicas[1]``) by the rule of
    :func:`chosen` from ``plan.frontier``, with their offset syncs in ``syncs_topic`` signed by
    ``signer`` (the standby's flow from ``lost``).  A failure raises after aborting the open
    batch; what earlier batches wrote stays (and is placed by their syncs)."""
    promoted, standby = replicas
    source = SourcePartition(lost, plan.origin)
    at, read = plan.start, 0
    written: set[int] = set()
    pairs: list[tuple[int, int]] = []
    while True:
        records = _batch(reader, promoted, at, batch)
        if not records:
            break
        read += len(records)
        at = records[-1].offset + 1
        picked = chosen(records, source, plan.frontier, written)
        if not picked:
            continue
        pairs.extend(_write(writer, plan.origin, standby, picked, syncs_topic, signer))
        written.update(offset for _record, offset in picked)
    first, end = (min(written), max(written) + 1) if written else (None, None)
    return Copied(
        plan.origin, promoted, standby, plan.start, plan.frontier, read, len(written), first,
        end, pairs=tuple(pairs),
    )  # fmt: skip


@dataclass(frozen=True)
class Onward:
    """Where the onward map goes (the flow promoted->standby, issue 48): its offset-syncs and
    progress topics on the standby, its key, and what its syncs and progress already hold per
    promoted-replica partition (``known``: the flow's verified maps, as translation reads
    them)."""

    target: str
    syncs_topic: str
    progress_topic: str
    signer: Signer | None
    known: Mapping[TopicPartition, PartitionMapping]


def onward_records(
    sides: tuple[Replica, Replica],
    copies: Sequence[tuple[int, int]],
    onward: Onward,
) -> tuple[list[Record], int]:
    """The records that complete the onward map of one origin partition (pure but for the
    progress record's timestamp, the time it is built, as a worker stamps its own): the offset
    syncs of :func:`drkit.repoint.onward`'s runs its known map lacks (:func:`~drkit.repoint.
    unplaced`), signed as the flow's worker signs, and - when it lacks it - the progress that
    says the promoted replica is done up to its end (it gets no new writes while its flow from
    the lost cluster is stopped: translation then counts nothing past the map as unreplicated).
    With them, how many promoted positions the map gains.  None written twice: a second run
    finds them known."""
    promoted, standby = sides
    runs = onward_map(promoted, standby, copies)
    if isinstance(runs, str):  # repoint told this partition, so its holdings are known
        raise ValueError(runs)
    known = onward.known.get(promoted.partition)
    missing = unplaced(runs, known.table if known is not None else ())
    syncs = [OffsetSync(promoted.partition, standby.partition, run) for run in missing]
    out = signed(syncs, onward.syncs_topic, onward.signer)
    end = promoted.bounds.end
    if known is None or known.replicated_end != end:
        done = Progress(promoted.partition, end, "repoint", source_end=end)
        out.append(Record(onward.progress_topic, 0, -1, done.key(onward.target), done.value()))
    return out, sum(run.length for run in missing)


def follow_standby(
    config: DrkitConfig,
    lost: str,
    promoted: str,
    standby: str,
    *,
    connect: AdminFactory,
    keys: Callable[[str], bytes] | None,
    confirm: Callable[[], object] | None = None,
) -> tuple[RepointReport, dict[TopicPartition, Copied]]:
    """``standby`` follows ``promoted`` after ``lost`` - what ``drkit flows repoint`` runs once
    it has checked the pointer, and the three-dc drill: where each partition follows from
    (:func:`~drkit.offsets.repoint_inputs.read_repoint`, the clusters reached through
    ``connect``, offset syncs verified and signed with ``keys``) and :func:`follow_all` over it,
    written as the standby flow's replicator (the standby guard lets only it write there) - in
    transactions when that flow is exactly-once.  Nothing is copied (``{}``) when a partition
    cannot be told: the report says why.  ``confirm``: every write and commit first confirms
    the caller's lease (:class:`Leased`; a failover step's)."""
    flow = config.flow(f"{lost}->{standby}")
    topology = FlowTopology.of(flow)
    writing = config.as_role(Role.REPLICATOR).clusters[standby]
    writer = PositionedWriter(
        ClusterEndpoint(standby, writing),
        topology.transactional_id("follow-on") if flow.exactly_once else None,
    )
    try:
        # Before the plan reads the standby: a killed run's open transaction is settled
        # (committed or aborted) first, so the plan sees what stays.
        writer.init()
        report = read_repoint(
            config, lost, promoted, standby, connect=connect, keys=keys, records=PartitionReader
        )
        if any(isinstance(r, CannotTell) for r in report.results.values()):
            return report, {}
        signer = Signer(keys(flow.name), Kind.OFFSET_SYNC, flow.name) if keys else None
        ahead = _onward(config, promoted, standby, connect=connect, keys=keys)
        report = replace(report, onward=ahead if isinstance(ahead, str) else None)
        reader = PartitionReader(ClusterEndpoint(promoted, config.clusters[promoted]))
        try:
            copied = follow_all(
                report, reader, writer if confirm is None else Leased(writer, confirm),
                topology.offset_syncs_topic, signer,
                onward=ahead if isinstance(ahead, Onward) else None,
            )  # fmt: skip
            return report, copied
        finally:
            reader.close()
    finally:
        writer.close()


def _onward(
    config: DrkitConfig,
    promoted: str,
    standby: str,
    *,
    connect: AdminFactory,
    keys: Callable[[str], bytes] | None,
) -> Onward | str:
    """The flow promoted->standby's side of the onward map: its bookkeeping topics created
    when absent (the flow may not have run yet), its key, its verified maps; or why there is
    none (no such flow in the config)."""
    name = f"{promoted}->{standby}"
    flow = next((f for f in config.flows if f.name == name), None)
    if flow is None:
        return (
            f"no flow {name} in the config: add it (below) and run this command again - it "
            "then writes the onward map, copying nothing"
        )
    topology = FlowTopology.of(flow)
    source = connect(ClusterEndpoint(promoted, config.clusters[promoted]))
    target = connect(ClusterEndpoint(standby, config.clusters[standby]))
    try:
        ensure_bookkeeping_topics(topology, source, target)
    finally:
        source.close()
        target.close()
    signer = Signer(keys(name), Kind.OFFSET_SYNC, name) if keys else None
    loader = MappingLoader(
        flow, ClusterEndpoint(standby, config.clusters[standby]), topology, signer=signer
    )
    try:
        known = dict(loader.refresh())
    finally:
        loader.close()
    return Onward(standby, topology.offset_syncs_topic, topology.progress_topic, signer, known)


def follow_all(
    report: RepointReport,
    reader: RecordSource,
    writer: StandbyWriter,
    syncs_topic: str,
    signer: Signer | None,
    batch: int = BATCH,
    onward: Onward | None = None,
) -> dict[TopicPartition, Copied]:
    """For every partition of ``report`` that follows, in origin order: the syncs that place
    the standby's unsynced copies (:func:`place_unsynced`), then :func:`follow_on`, then - with
    ``onward`` - what the onward map still lacks (:func:`onward_records`, in one transaction
    when the writer is transactional).  The onward map comes after the copy on purpose: it is
    a function of what both replicas hold, so a run killed before it (or in the copy) leaves
    nothing wrong, and the next run, reading the killed run's copies, writes it whole.  A
    partition where the standby is ahead gets its onward map (what both hold) and no copy;
    one that cannot be told is left alone: the caller refuses a report with one before
    copying any."""
    out: dict[TopicPartition, Copied] = {}
    for tp, result in report.results.items():
        if isinstance(result, StandbyAhead) and onward is not None and tp in report.sides:
            _write_onward(writer, report.sides[tp], (), onward)
        if not isinstance(result, FollowFrom):
            continue
        replicas = report.replicas[tp]
        copies = report.unsynced.get(tp, ())
        placed = place_unsynced(tp, replicas[1], copies, writer, syncs_topic, signer)
        copied = follow_on(
            result, replicas, report.lost, reader, writer, syncs_topic, signer, batch
        )
        gained = None
        if onward is not None and tp in report.sides:
            gained = _write_onward(writer, report.sides[tp], copied.pairs, onward)
        out[tp] = replace(copied, placed=placed, onward=gained)
    return out


def _write_onward(
    writer: StandbyWriter,
    sides: tuple[Replica, Replica],
    copies: Sequence[tuple[int, int]],
    onward: Onward,
) -> int:
    """Write :func:`onward_records` - the syncs, then the progress - as one transaction when
    the writer is transactional; how many promoted positions the map gained."""
    records, gained = onward_records(sides, copies, onward)

    def work() -> None:
        for topic in dict.fromkeys(record.topic for record in records):
            writer.write(topic, 0, [record for record in records if record.topic == topic])

    if records:
        _atomically(writer, work)
    return gained


def place_unsynced(
    origin: TopicPartition,
    standby: TopicPartition,
    copies: Sequence[tuple[int, int]],
    writer: StandbyWriter,
    syncs_topic: str,
    signer: Signer | None,
) -> int:
    """Write the offset syncs of the standby's copies no sync places (``(position, origin
    offset)`` read by provenance; how many).  A follow-on run killed between a batch's copies
    and their syncs leaves such copies; the next run's plan raises F past them (so they are
    never written twice) and this places them, so the standby flow's map places every copy -
    a group checkpointed among them translates onto them instead of past them.  True of
    whoever wrote them (by their ``drkit-src``): a worker's unsynced copies get the syncs it
    would have written."""
    if not copies:
        return 0
    pairs = [(offset, position) for position, offset in copies]
    records = signed(offset_syncs(origin, standby, pairs), syncs_topic, signer)
    _atomically(writer, lambda: writer.write(syncs_topic, 0, records))
    return len(copies)


def _batch(reader: RecordSource, tp: TopicPartition, at: int, size: int) -> list[Record]:
    """Up to ``size`` records of ``tp`` from ``at`` (none: its end)."""
    out: list[Record] = []
    with closing(reader.records_from(tp, at)) as found:
        for record in found:
            out.append(record)
            if len(out) >= size:
                break
    return out


def _write(
    writer: StandbyWriter,
    origin: TopicPartition,
    standby: TopicPartition,
    picked: Sequence[tuple[Record, int]],
    syncs_topic: str,
    signer: Signer | None,
) -> list[tuple[int, int]]:
    """One batch: its copies, then the syncs that place them (one transaction when the writer
    is transactional); what was written, ``(origin offset, standby position)``."""

    pairs: list[tuple[int, int]] = []

    def work() -> None:
        positions = writer.write(standby.topic, standby.partition, [r for r, _o in picked])
        failpoints.reach("follow_on.before_syncs")
        pairs[:] = zip((offset for _r, offset in picked), positions, strict=True)
        syncs = signed(offset_syncs(origin, standby, pairs), syncs_topic, signer)
        writer.write(syncs_topic, 0, syncs)

    _atomically(writer, work)
    return pairs


def _atomically(writer: StandbyWriter, work: Callable[[], object]) -> None:
    """``work`` between ``begin`` and ``commit``; aborted on any failure (then raised)."""
    writer.begin()
    try:
        work()
        writer.commit()
    except BaseException:
        writer.abort()
        raise
