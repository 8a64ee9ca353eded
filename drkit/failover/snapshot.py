"""Reading both clusters into the planner's snapshot (drkit.failover.facts).

:func:`gather` is the only I/O: it asks the target (and the source, when it answers) for the
flow's offset map and progress, each partition's translation inputs (drkit.offsets.inputs, the
reader the checkpointer and ``drkit offsets translate`` use: the replicas' log bounds, the
source's end and log start - with the source gone, the end its workers last saw), the visible
records of the span the target lacks (drkit.lag), the groups' committed offsets (live) or
checkpoints (source gone), the groups' states on the target, open transactions and the active
pointer.  The planner (drkit.failover.plan) and the translation step work on the result
only, the way Patroni's HA loop decides over a snapshot of the DCS.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import (
    KafkaError,
    RetriableKafkaError,
    SchemaRegistryError,
    UnreachableClusterError,
)
from drkit.failover.facts import GroupFacts, PartitionFacts, SchemaFacts, Snapshot
from drkit.failover.model import Procedure
from drkit.kafka.clients import ClusterEndpoint, tcp_unreachable
from drkit.kafka.interruptible import InFlight
from drkit.kafka.io import consume_ranges
from drkit.kafka.ports import (
    AdminFactory,
    ClusterAdmin,
    admins_not_answering,
    read_group_offsets,
)
from drkit.lag import count_visible, lacking_span, progress_age, record_age
from drkit.offsets.checkpoint_store import CheckpointSnapshot, CheckpointStore
from drkit.offsets.inputs import read_inputs
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.provenance_search import SourcePartition, copy_offset
from drkit.records import TopicPartition, shared_partition
from drkit.replication.progress import Progress, ProgressStore
from drkit.schemas.sync import SchemaSynchronizer
from drkit.signing import Kind, Signer
from drkit.topology.fan_in import other_standbys, sources_left_behind
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import HEARTBEATS, is_own_group
from drkit.topology.topic_filter import NameMatcher
from drkit.translation import PartitionMapping

log = logging.getLogger(__name__)


class TargetReaders:
    """drkit's three topics of one flow on its target (progress, offset syncs, checkpoints),
    read by tailers kept open between snapshots.

    A failover reads them twice - for the plan, then in ``translate_offsets`` once replication
    stopped - and at 10,000 groups the checkpoint topic alone holds 500,000 records: kept open,
    the second read costs only what was appended since the first.  Each refresh returns the
    whole state, exactly what a fresh reader would.  Not thread-safe per topic: one snapshot
    at a time.
    """

    # Reading to the end may take a while at scale (500,000 checkpoints at 10,000 groups x 50
    # partitions, decoded one by one): bounded, but not by the 30 s a small flow would need.
    READ_TIMEOUT_S = 180.0

    def __init__(
        self, flow: FlowConfig, target: ClusterEndpoint, signer: Signer | None = None
    ) -> None:
        """``signer``: the flow's offset-sync key (drkit/signing.py); offset syncs that fail it
        are ignored and counted (:attr:`unverified_syncs`).  None (no store) verifies none."""
        self.signer = signer
        self.flow, self.target = flow, target
        self.topology = FlowTopology.of(flow)
        self._progress: ProgressStore | None = None
        self._mappings: MappingLoader | None = None
        self._checkpoints: CheckpointStore | None = None

    # A busy target may drop a connection or answer metadata late (its controller stalled 5 s
    # under 10,000 groups here): a read that fails retriably is tried again, from where the
    # reader got to, for up to a minute - the refresh is cumulative.
    _retrying = retry(
        retry=retry_if_exception_type(RetriableKafkaError),
        stop=stop_after_delay(60),
        wait=wait_exponential(multiplier=0.2, max=5.0),
        reraise=True,
    )

    @_retrying
    def progress(self) -> dict[TopicPartition, Progress]:
        if self._progress is None:
            self._progress = ProgressStore(
                self.target, self.topology.progress_topic, missing_ok=True
            )
        return self._progress.refresh(self.READ_TIMEOUT_S)

    @_retrying
    def mappings(self) -> dict[TopicPartition, PartitionMapping]:
        if self._mappings is None:
            self._mappings = MappingLoader(self.flow, self.target, signer=self.signer)
        return dict(self._mappings.refresh(self.READ_TIMEOUT_S))

    @_retrying
    def checkpoints(self) -> CheckpointSnapshot:
        if self._checkpoints is None:
            self._checkpoints = CheckpointStore(self.target, self.topology.checkpoints_topic)
        return self._checkpoints.refresh(self.READ_TIMEOUT_S)

    @property
    def unverified_syncs(self) -> int:
        """Offset-sync records read that failed verification (ignored)."""
        return self._mappings.rejected if self._mappings is not None else 0

    @property
    def verified_syncs(self) -> int:
        """Offset-sync records read that verified (0 without a signer)."""
        return self._mappings.accepted if self._mappings is not None else 0

    @property
    def unchecked_claims(self) -> int:
        """Claimed copies of rejected records not checked against the replica yet."""
        return self._mappings.unchecked_claims if self._mappings is not None else 0

    def close(self) -> None:
        for reader in (self._progress, self._mappings, self._checkpoints):
            if reader is not None:
                reader.close()
        self._progress = self._mappings = self._checkpoints = None


def gather(
    config: DrkitConfig,
    flow: FlowConfig,
    procedure: Procedure,
    pointer: str | None,
    force: bool = False,
    groups: list[str] | None = None,
    source_timeout_s: float = 3.0,
    readers: TargetReaders | None = None,
    target_states: Mapping[str, str] | None = None,
    keys: Callable[[str], bytes] | None = None,
    *,
    connect: AdminFactory,
) -> Snapshot:
    """Read everything the planner needs; never raises for an unreachable source.

    ``readers``: the flow's target topics as read by an earlier snapshot (left open); without
    them, read from the start and closed here.  ``target_states``: the groups' states on the
    target as the plan saw them, instead of asking the target again (a group it lacks is
    ``unchecked``) - for a step that writes nothing and before one that checks again.
    ``keys``: each flow's offset-sync key by name (drkit/store/flow_keys.py ``key_for``) for
    the readers made here - the reverse flow's included; None verifies nothing.  ``connect``:
    how it reaches both clusters (the run's factory, drkit.kafka.ports)."""
    own = readers is None
    readers = readers or TargetReaders(
        flow,
        ClusterEndpoint(flow.target, config.clusters[flow.target]),
        sync_signer(keys, flow.name),
    )
    try:
        return _gather(
            config, flow, procedure, pointer, force, groups, source_timeout_s, readers,
            target_states, keys, connect,
        )  # fmt: skip
    finally:
        if own:
            readers.close()


def _gather(
    config: DrkitConfig,
    flow: FlowConfig,
    procedure: Procedure,
    pointer: str | None,
    force: bool,
    groups: list[str] | None,
    source_timeout_s: float,
    readers: TargetReaders,
    target_states: Mapping[str, str] | None,
    keys: Callable[[str], bytes] | None,
    connect: AdminFactory,
) -> Snapshot:
    topology = FlowTopology.of(flow)
    source_ep = ClusterEndpoint(flow.source, config.clusters[flow.source])
    target_ep = ClusterEndpoint(flow.target, config.clusters[flow.target])
    source, target = connect(source_ep), connect(target_ep)
    reverse = f"{flow.target}->{flow.source}"
    reverse_flow = reverse if any(f.name == reverse for f in config.flows) else None
    now_ms = int(time.time() * 1000)
    empty = Snapshot(
        procedure, flow.name, flow.source, flow.target, reverse_flow, False, False, None,
        {}, (), (), (), (), (), pointer, config.failover, force, now_ms,
    )  # fmt: skip
    # The source's answer and drkit's three topics on the target are independent reads, each
    # on its own client: in parallel they cost the slowest one, not their sum (a failover's
    # wall time is read twice from here: for the plan, and for the exact translation).
    # Daemon threads waited on here: a Ctrl-C acts at once (drkit.kafka.interruptible).
    # The source is asked first, whatever the target does: a target that is down must not
    # read as a source that is down (issue 45, M3).
    # Both are first asked at once whether they answer Kafka at all (FIRST_ANSWER_S): a hung,
    # TLS-only or non-Kafka target is named in seconds - not after a 10 s metadata wait as
    # "does not answer" - and a source that does not answer is not waited for again.
    down = admins_not_answering({flow.target: target, flow.source: source})
    answers = None if flow.source in down else InFlight(partial(source.answers, source_timeout_s))

    def source_answer() -> tuple[bool, str | None]:
        up = answers.wait() if answers is not None else False
        why = None if up else down.get(flow.source) or _source_error(source_ep, source_timeout_s)
        return up, why

    try:
        if (why := down.get(flow.target)) is not None:
            raise UnreachableClusterError(flow.target, target_ep.bootstrap_servers, why)
        target.wait_ready(timeout_s=10)
    except KafkaError as err:
        log.error("target unreachable", extra={"cluster": flow.target, "error": str(err)})
        up, source_why = source_answer()
        cause = err.detail if isinstance(err, UnreachableClusterError) else str(err)
        return replace(empty, source_reachable=up, source_error=source_why, target_error=cause)
    reading_progress = InFlight(readers.progress)
    reading_mappings = InFlight(readers.mappings)
    reading_checkpoints = InFlight(readers.checkpoints)
    reachable, source_error = source_answer()
    progress = reading_progress.wait()
    mappings = reading_mappings.wait()
    checkpoints = reading_checkpoints.wait()
    source_parts = _source_partitions(source, topology, progress, mappings, reachable)
    listed = target.list_topics()
    # With the source gone, a partition's end is the last one its workers saw (progress).
    read = read_inputs(
        source_parts, mappings, topology, target, source if reachable else None, listed=listed,
        last_ends={tp: p.source_end for tp, p in progress.items()},
    )  # fmt: skip
    newest_ms = max((p.timestamp_ms for p in progress.values() if p.timestamp_ms), default=0)
    evidence_age = progress_age(now_ms / 1000, newest_ms)
    partitions: dict[TopicPartition, PartitionFacts] = {}
    for tp in source_parts:
        stored = progress.get(tp)
        partitions[tp] = PartitionFacts.of(
            tp,
            read.replicas[tp],
            read.inputs[tp],
            tp in read.live_ends,
            stored.next_offset if stored else None,
            progress_age(now_ms / 1000, stored.timestamp_ms) if stored else None,
            evidence_age,
        )
    # The replicas the target has (a route that merges two partitions names one twice).
    existing = [
        (p.target, p.target_bounds.end) for p in partitions.values() if p.target_bounds is not None
    ]
    stable = target.stable_offsets([replica for replica, _end in existing])
    partitions = count_unreplicated(source, partitions, now_ms) if reachable else partitions
    returning = (
        _returning(config, reverse_flow, source_ep, keys) if reachable and reverse_flow else {}
    )
    group_facts, without = _groups(
        flow, source, target, checkpoints, source_parts, reachable, groups, target_states,
        returning,
    )  # fmt: skip
    held = _held_copies(source_ep, reverse_flow, returning, group_facts) if returning else {}
    source_topics = {tp.topic for tp in source_parts}
    known = {tp.topic for tp in (*progress, *mappings) if tp.topic != HEARTBEATS}
    unlisted = sorted(t for t in known - source_topics if topology.selects(t)) if reachable else []
    missing = sorted(t for t in source_topics if topology.target_topic(t) not in listed)
    short = sorted(
        t
        for t in source_topics
        if topology.target_topic(t) in listed
        and listed[topology.target_topic(t)].partition_count
        < 1 + max(tp.partition for tp in source_parts if tp.topic == t)
    )
    open_txns = sorted(
        f"{tp.topic}[{tp.partition}] (stable {stable[tp]} < end {end})"
        for tp, end in existing
        if tp in stable and stable[tp] < end
    )
    others = other_standbys(config.flows, flow.source, flow.target)
    return Snapshot(
        procedure,
        flow.name,
        flow.source,
        flow.target,
        reverse_flow,
        reachable,
        True,
        source_error,
        partitions,
        tuple(group_facts),
        tuple(without),
        tuple(missing),
        tuple(short),
        tuple(open_txns),
        pointer,
        config.failover,
        force,
        now_ms,
        requested_groups=tuple(groups) if groups is not None else None,
        untranslatable_groups=_other_groups(flow, source) if reachable else (),
        returning=returning,
        returning_held=held,
        fan_in=sources_left_behind(config.flows, flow.source, flow.target),
        other_standbys=others,
        onward_flows=tuple(
            f"{flow.target}->{standby}"
            for standby in others
            if any(f.source == flow.target and f.target == standby for f in config.flows)
        ),
        unlisted_topics=tuple(unlisted),
        unverified_syncs=readers.unverified_syncs,
        verified_syncs=readers.verified_syncs,
        unchecked_claims=readers.unchecked_claims,
    )


def sync_signer(keys: Callable[[str], bytes] | None, flow: str) -> Signer | None:
    """``flow``'s offset-sync signer from ``keys`` (None: nothing is verified)."""
    return Signer(keys(flow), Kind.OFFSET_SYNC, flow) if keys is not None else None


def _returning(
    config: DrkitConfig,
    reverse_flow: str,
    source: ClusterEndpoint,
    keys: Callable[[str], bytes] | None,
) -> dict[TopicPartition, PartitionMapping]:
    """The reverse flow's offset maps, read where it writes (this move's source), by their
    replica partitions there: how a group that read them resumes on their origin, the move's
    target (drkit.translation.translate_back).  Unreadable: empty, and said - those groups
    keep the positions they had on the target."""
    back = next(f for f in config.flows if f.name == reverse_flow)
    loader = MappingLoader(back, source, signer=sync_signer(keys, back.name))
    try:
        mappings = loader.refresh(30.0)
    except KafkaError as err:
        log.warning("the reverse flow's offset map could not be read: groups are not carried "
                    "back", extra={"flow": reverse_flow, "error": str(err)})  # fmt: skip
        return {}
    finally:
        loader.close()
    return {m.target: m for m in mappings.values()}


HELD_READ_LIMIT = 10_000  # records read past a reverse flow's map, per replica partition


def _held_copies(
    source: ClusterEndpoint,
    reverse_flow: str | None,
    returning: Mapping[TopicPartition, PartitionMapping],
    groups: list[GroupFacts],
) -> dict[TopicPartition, dict[int, int]]:
    """Per replica partition of the reverse flow on the source: its copies past the map's last
    one, below the furthest position a group read there (at most HELD_READ_LIMIT records),
    by position - the source offset each one's provenance names.  A worker killed between a
    copy and its offset sync leaves such copies; a group that read them must not read them
    again on their origin (drkit.translation.translate_back).  Unreadable: none, and said -
    the groups then read them again, nothing is skipped."""
    ranges: dict[TopicPartition, tuple[int, int]] = {}
    for facts in groups:
        for replica, offset in facts.returning.items():
            mapping = returning.get(replica)
            if mapping is None or not len(mapping.table):
                continue
            table = mapping.table
            start = table.dst[-1] + table.length[-1]
            stop = min(offset, start + HELD_READ_LIMIT)
            if stop > max(start, ranges.get(replica, (start, start))[1]):
                ranges[replica] = (start, stop)
    if not ranges or reverse_flow is None:
        return {}
    origin = reverse_flow.split("->")[0]
    held: dict[TopicPartition, dict[int, int]] = {}
    try:
        for record in consume_ranges(source, ranges, 30.0):
            replica = TopicPartition(record.topic, record.partition)
            names = SourcePartition(origin, returning[replica].source)
            copied = copy_offset(record, names)
            if copied is not None:
                held.setdefault(replica, {})[record.offset] = copied
    except KafkaError as err:
        log.warning("copies past the reverse flow's offset map could not be read: groups "
                    "that read them read them again", extra={"error": str(err)})  # fmt: skip
        return {}
    return held


def _source_error(source: ClusterEndpoint, timeout_s: float) -> str:
    return tcp_unreachable(source, 1.0) or f"no answer within {timeout_s}s"


def _other_groups(flow: FlowConfig, source: ClusterAdmin) -> tuple[str, ...]:
    """The flow's groups that are not consumer groups (share groups ...): no offsets to move."""
    matcher = NameMatcher.of(flow.groups)
    try:
        names = source.other_groups()
    except KafkaError as err:  # a listing, not a step: the plan goes on without it
        log.warning("could not list groups of other types", extra={"error": str(err)})
        return ()
    return tuple(g for g in names if matcher.matches(g) and not is_own_group(g))


VISIBLE_COUNT_LIMIT = 100_000  # offsets read at most to count the RPO in visible records


def count_unreplicated(
    source: ClusterAdmin, partitions: dict[TopicPartition, PartitionFacts], now_ms: int
) -> dict[TopicPartition, PartitionFacts]:
    """The live source's span the target lacks per partition (drkit.lag.lacking_span)
    counted in visible records, when it is small enough to read and no transaction is open
    in it - with the age, as of ``now_ms``, of the first record it holds (the oldest write the
    target lacks)."""
    spans = {
        tp: span
        for tp, f in partitions.items()
        if f.source_end_live
        and (span := lacking_span(f.replicated_end, f.source_end, log_start=f.source_start))
        is not None
    }
    try:
        counts = count_visible(source, spans, VISIBLE_COUNT_LIMIT)
    except KafkaError as err:
        log.warning("could not count unreplicated records", extra={"error": str(err)})
        return partitions
    out = dict(partitions)
    for tp, count in counts.items():
        if count.exact:
            age = record_age(now_ms / 1000, count.first_timestamp_ms)
            out[tp] = replace(
                partitions[tp], unreplicated_visible=count.records, unreplicated_age_s=age
            )
    return out


def _source_partitions(
    source: ClusterAdmin,
    topology: FlowTopology,
    progress: Mapping[TopicPartition, Progress],
    mappings: Mapping[TopicPartition, PartitionMapping],
    reachable: bool,
) -> list[TopicPartition]:
    """The flow's data partitions: from the live source, else from what the target knows.

    The shared values (drkit.records.shared_partition), as the checkpoints' decoder names them:
    a plan looks each group's partitions up here, and a key that is the very object is found
    without a comparison (1,000,000 look-ups at 10,000 groups x 50 partitions)."""
    if reachable:
        return sorted(
            shared_partition(info.name, p.partition)
            for info in source.list_topics().values()
            if topology.translates(info.name) and info.name != HEARTBEATS
            for p in info.partitions
        )
    known = set(progress) | set(mappings)
    return sorted(
        shared_partition(tp.topic, tp.partition)
        for tp in known
        if tp.topic != HEARTBEATS and topology.translates(tp.topic)
    )


def _groups(
    flow: FlowConfig,
    source: ClusterAdmin,
    target: ClusterAdmin,
    checkpoints: CheckpointSnapshot,
    source_parts: list[TopicPartition],
    reachable: bool,
    only: list[str] | None,
    known_states: Mapping[str, str] | None = None,
    returning: Mapping[TopicPartition, PartitionMapping] | None = None,
) -> tuple[list[GroupFacts], list[str]]:
    """Every group the flow translates: (facts, groups with offsets but no checkpoint).
    ``returning``: the reverse flow's maps by replica partition on the source, whose offsets a
    group also carries back (live only) - with its offsets on their origins on the target."""
    matcher = NameMatcher.of(flow.groups)
    replicated = set(source_parts)
    back_parts = set(returning or {})
    origins = {m.source for m in (returning or {}).values()}
    checkpointed = checkpoints.committed_by_group
    committed: dict[str, dict[TopicPartition, int]] = {}
    returned: dict[str, dict[TopicPartition, int]] = {}
    if reachable:
        # The groups the checkpoints name are asked too: a listing taken right after the
        # source's broker started names none (read_group_offsets).
        answers = (
            source.groups_offsets(only)
            if only
            else read_group_offsets(
                source, checkpointed, lambda g: matcher.matches(g) and not is_own_group(g)
            )
        )
        for group, offsets in answers.items():
            mine = {tp: o for tp, o in offsets.offsets.items() if tp in replicated}
            back = {tp: o for tp, o in offsets.offsets.items() if tp in back_parts}
            if mine or back:
                committed[group], returned[group] = mine, back
    else:
        committed = {
            g: offsets
            for g, offsets in checkpointed.items()
            if (only is None or g in only) and matcher.matches(g)
        }
    without = sorted(g for g, mine in committed.items() if mine and g not in checkpointed)
    if known_states is not None:
        states = {g: (known_states.get(g, "unchecked"), 0) for g in committed}
    else:
        described = target.describe_groups(sorted(committed)) if committed else {}
        states = {g: (d.state.lower(), d.members) for g, d in described.items()}
    back_groups = sorted(g for g, back in returned.items() if back)
    read = target.groups_offsets(back_groups) if back_groups else {}
    on_origin = {
        g: {tp: o for tp, o in found.offsets.items() if tp in origins} for g, found in read.items()
    }
    facts = [
        GroupFacts(
            group,
            offsets,
            not reachable,
            *states.get(group, ("absent", 0)),
            returning=returned.get(group, {}),
            returning_origin=on_origin.get(group, {}),
        )
        for group, offsets in sorted(committed.items())
    ]
    return facts, without


def schema_facts(config: DrkitConfig, flow: FlowConfig) -> SchemaFacts | None:
    """The flow's two schema registries compared (one short try each: part of a failover's
    wall time); None when the flow has no ``schema_sync``."""
    if not flow.schema_sync.enabled:
        return None
    try:
        _source, plan = SchemaSynchronizer.of(config, flow, quick=True).plan()
    except SchemaRegistryError as err:
        return SchemaFacts((), 0, (), str(err))
    return SchemaFacts(plan.missing_ids(), len(plan.missing), plan.conflicts, None)
