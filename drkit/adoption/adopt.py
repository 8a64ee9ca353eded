"""``drkit adopt``: continue a flow MirrorMaker 2 replicated so far, copying nothing again.

For every source partition MM2 replicated, drkit needs what its own worker would have left
behind: progress (where to resume) and offset-sync runs (how to translate).  They come from
MM2's offset syncs and from the records themselves:

1. MM2's last sync ``U -> D`` of a partition pairs a source record with its copy.  Everything MM2
   copied after it lies at ``D..end`` of the replica, in source order: drkit reads those copies
   and the source records from ``U`` on and pairs them one by one (key, value and headers must
   match, or the partition is refused).  The pairs become exact runs, and progress is the
   source offset after the last paired record - so the worker resumes exactly where MM2
   stopped.
2. Below ``U`` only MM2's sparse syncs exist: they are kept as the partition's MirrorMaker 2
   range (drkit.adoption.adopted) and translate rounded down, the re-reads counted
   (drkit.translation.Mm2Syncs).

It refuses, writing nothing, while MM2 is still writing (a replica, MM2's offset syncs or its
checkpoints moved during a quiet window), when drkit already replicates the flow (progress
exists) and when a replica holds records no MM2 sync explains.  Writes go adopted range, then
runs, then progress (the worker's own order): run again after a failure, it writes the same
records and completes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from drkit.adoption.adopted import adopted_key, adopted_value
from drkit.adoption.mm2_syncs import decode_mm2_sync, sync_points
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import DrkitError, ExitCode
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.io import consume_ranges, produce_batch
from drkit.kafka.ports import AdminFactory
from drkit.kafka.tailer import TopicTailer
from drkit.records import Headers, Record, TopicPartition
from drkit.replication.bookkeeping import ensure_bookkeeping_topics
from drkit.replication.offset_sync import OffsetRun, OffsetSync, RunTracker
from drkit.replication.progress import Progress, ProgressStore
from drkit.signing import Kind, Signer
from drkit.topology.flow import FlowTopology
from drkit.translation import Mm2Syncs

log = logging.getLogger(__name__)

ADOPT_WORKER = "adopt-mm2"


class AdoptionRefused(DrkitError):
    """Adopting now would copy records twice, skip some, or race MirrorMaker 2: nothing was
    written."""

    exit_code = ExitCode.BLOCKED


# -- pure decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TailPairing:
    """The records MM2 copied after its last sync, paired: exact runs, and where to resume."""

    runs: tuple[OffsetRun, ...]
    next_offset: int


def pair_tail(source: Sequence[Record], target: Sequence[Record]) -> TailPairing | str:
    """Pair MM2's copies (``target``, from its last sync's downstream offset to the replica's
    end) with the source records read from the sync's upstream offset, one by one.

    Returns the runs and the source offset after the last copied record, or why the copies do
    not match the source (then nothing may be adopted for the partition).  A copy MM2 made
    twice shifts every later pair: unless the shifted records are identical, a comparison fails
    and the partition is refused."""
    if not target:
        return "the replica holds nothing at MirrorMaker 2's last offset sync"
    if len(source) < len(target):
        return (
            f"the replica holds {len(target)} records from the last sync on, the source only "
            f"{len(source)}: MirrorMaker 2 copied some twice"
        )
    # The worker's own rule for cutting runs (a run ends at a gap on either side).
    tracker = RunTracker(
        TopicPartition(source[0].topic, source[0].partition),
        TopicPartition(target[0].topic, target[0].partition),
    )
    for copy, original in zip(target, source, strict=False):
        if (copy.key, copy.value, copy.headers) != (original.key, original.value, original.headers):
            return (
                f"the copy at target offset {copy.offset} is not the source record at "
                f"{original.offset}"
            )
        tracker.observe(original.offset, copy.offset)
    runs = tuple(sync.run for sync in tracker.drain())
    return TailPairing(runs, source[len(target) - 1].offset + 1)


@dataclass(frozen=True)
class PartitionAdoption:
    """What adopting one source partition writes."""

    source: TopicPartition
    target: TopicPartition
    mm2: Mm2Syncs
    runs: tuple[OffsetRun, ...]
    next_offset: int

    @property
    def copied(self) -> int:
        """Records MM2 copied after its last sync (now mapped exactly)."""
        return sum(run.length for run in self.runs)

    def as_json(self) -> dict[str, object]:
        return {
            "source": str(self.source),
            "target": str(self.target),
            "mm2_range": {"below": self.mm2.end, "sync_points": len(self.mm2.upstream)},
            "exact_from": self.mm2.end,
            "resume_at": self.next_offset,
            "runs": [[r.src_start, r.dst_start, r.length] for r in self.runs],
        }


@dataclass(frozen=True)
class Adoption:
    """The outcome of ``drkit adopt`` for one flow (written unless a dry run)."""

    flow: str
    partitions: tuple[PartitionAdoption, ...]
    fresh: tuple[TopicPartition, ...] = ()  # nothing replicated: drkit starts them anew
    ignored_topics: tuple[str, ...] = ()  # MM2 replicated them, this flow does not select them
    written: bool = False
    notes: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, object]:
        return {
            "flow": self.flow,
            "written": self.written,
            "partitions": [p.as_json() for p in self.partitions],
            "fresh": [str(tp) for tp in self.fresh],
            "ignored_topics": list(self.ignored_topics),
            "notes": list(self.notes),
        }


def moved(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """What grew between two samples of end offsets, as ``name +N`` (pure)."""
    return [
        f"{name} +{after[name] - before.get(name, 0)}"
        for name in sorted(after)
        if after[name] != before.get(name, after[name])
    ]


# -- the edges ---------------------------------------------------------------------------------


@dataclass
class Adopter:
    """Reads MM2's traces and the records for one flow and writes drkit's bookkeeping."""

    config: DrkitConfig
    flow: FlowConfig
    mm2_syncs_topic: str
    mm2_syncs_on_source: bool = True
    quiet_s: float = 10.0
    sleep: Callable[[float], None] = time.sleep
    # The flow's offset-sync key (drkit/signing.py): the runs it writes are signed as the
    # worker's are, the adopted ranges with the same key as their own kind; None writes
    # records drkit's readers ignore (and round down around).
    signer: Signer | None = None
    # How it reaches both clusters (drkit.kafka.ports): from its edge, `drkit adopt`.
    connect: AdminFactory = field(kw_only=True)

    def __post_init__(self) -> None:
        self.topology = FlowTopology.of(self.flow)
        self.source_endpoint = ClusterEndpoint(
            self.flow.source, self.config.clusters[self.flow.source]
        )
        self.target_endpoint = ClusterEndpoint(
            self.flow.target, self.config.clusters[self.flow.target]
        )
        self.source = self.connect(self.source_endpoint)
        self.target = self.connect(self.target_endpoint)

    def _headers(self, sync: OffsetSync) -> Headers:
        if self.signer is None:
            return ()
        return (self.signer.header(sync.key(), sync.value()),)

    def run(self, dry_run: bool = False) -> Adoption:
        self.source.wait_ready(timeout_s=15)
        self.target.wait_ready(timeout_s=15)
        history = self._mm2_history()
        selected = {tp: h for tp, h in history.items() if self.topology.selects(tp.topic)}
        ignored = sorted({tp.topic for tp in history} - {tp.topic for tp in selected})
        self._refuse_if_drkit_replicates(selected)
        first = self._ends(selected)
        self.sleep(self.quiet_s)
        second = self._ends(selected)
        self._refuse_if_moving(first, second, f"in the last {self.quiet_s:g} s")
        partitions = tuple(self._adopt(tp, points) for tp, points in sorted(selected.items()))
        fresh = self._fresh_partitions(set(selected))
        self._refuse_if_moving(second, self._ends(selected), "while drkit read the replicas")
        notes = (
            f"MirrorMaker 2's checkpoints stay in {self.topology.checkpoints_topic} until "
            "drkit's checkpointer replaces them (same format)",
        )
        if not dry_run:
            self._write(partitions)
        return Adoption(self.flow.name, partitions, fresh, tuple(ignored), not dry_run, notes)

    # -- reading ------------------------------------------------------------------------------

    def _mm2_history(self) -> dict[TopicPartition, list[tuple[int, int]]]:
        """MM2's syncs per source partition, in write order."""
        endpoint = self.source_endpoint if self.mm2_syncs_on_source else self.target_endpoint
        admin = self.source if self.mm2_syncs_on_source else self.target
        if self.mm2_syncs_topic not in admin.list_topics(include_internal=True):
            # A precondition like the others (exit 4, nothing written), not a failed read.
            raise AdoptionRefused(
                f"no topic {self.mm2_syncs_topic} on {endpoint.alias}: MirrorMaker 2 left no "
                f"offset syncs there for {self.flow.name} - name its topic with "
                "--mm2-syncs-topic and the cluster holding it with --mm2-syncs-on (MM2's "
                "offset-syncs.topic.location); nothing was written"
            )
        tailer = TopicTailer(endpoint, self.mm2_syncs_topic, isolation="read_uncommitted")
        history: dict[TopicPartition, list[tuple[int, int]]] = {}
        skipped = 0
        try:
            for record in tailer.catch_up(60.0):
                if record.key is None or record.value is None:
                    continue
                try:
                    tp, upstream, downstream = decode_mm2_sync(record.key, record.value)
                except (ValueError, UnicodeDecodeError, IndexError) as err:
                    skipped += 1
                    log.warning("skipping an unreadable MM2 offset sync", extra={"err": str(err)})
                    continue
                history.setdefault(tp, []).append((upstream, downstream))
        finally:
            tailer.close()
        if skipped:
            raise AdoptionRefused(
                f"{skipped} records of {self.mm2_syncs_topic} on {endpoint.alias} are not "
                "MirrorMaker 2 offset syncs: is --mm2-syncs-topic the right topic?"
            )
        return history

    def _refuse_if_drkit_replicates(self, selected: Mapping[TopicPartition, object]) -> None:
        store = ProgressStore(self.target_endpoint, self.topology.progress_topic, missing_ok=True)
        try:
            progress = store.refresh(30.0)
        finally:
            store.close()
        mine = sorted(str(tp) for tp in progress if self.topology.selects(tp.topic))
        if mine:
            raise AdoptionRefused(
                f"drkit already replicates {self.flow.name} ({len(mine)} partitions have "
                f"progress in {self.topology.progress_topic}, e.g. {mine[0]}): adopt continues "
                "MirrorMaker 2's work only on a flow drkit has not run"
            )

    def _ends(self, selected: Mapping[TopicPartition, object]) -> dict[str, int]:
        """End offsets of everything MM2 writes: replicas, its offset syncs, checkpoints."""
        ends: dict[str, int] = {}
        replicas = [self.topology.target_partition(tp) for tp in selected]
        present = self.target.list_topics(include_internal=True)
        readable = [tp for tp in replicas if tp.topic in present]
        for tp, end in self.target.list_offsets(readable).items():
            ends[str(tp)] = end
        syncs_admin = self.source if self.mm2_syncs_on_source else self.target
        for partition, (_start, end) in syncs_admin.topic_offsets(self.mm2_syncs_topic).items():
            ends[f"{self.mm2_syncs_topic}-{partition}"] = end
        if self.topology.checkpoints_topic in present:
            for partition, (_start, end) in self.target.topic_offsets(
                self.topology.checkpoints_topic
            ).items():
                ends[f"{self.topology.checkpoints_topic}-{partition}"] = end
        return ends

    def _refuse_if_moving(
        self, before: Mapping[str, int], after: Mapping[str, int], when: str
    ) -> None:
        grew = moved(before, after)
        if grew:
            raise AdoptionRefused(
                f"MirrorMaker 2 is still writing to {self.flow.target} ({', '.join(grew[:5])} "
                f"{when}). Stop its {self.flow.name} flow first - dedicated mode: stop the "
                "connect-mirror-maker process (or set "
                f"{self.flow.source}->{self.flow.target}.enabled=false and restart it); on a "
                "Connect cluster: PUT /connectors/<name>/stop for its MirrorSourceConnector and "
                "MirrorCheckpointConnector - then run drkit adopt again"
            )

    def _adopt(self, source: TopicPartition, history: list[tuple[int, int]]) -> PartitionAdoption:
        target = self.topology.target_partition(source)
        points = sync_points(history)
        upstream, downstream = points[-1]
        (start, end), source_end = self._replica_bounds(target), self._source_end(source)
        if downstream < start:
            raise AdoptionRefused(
                f"{target}: MirrorMaker 2's last sync points at target offset {downstream}, "
                f"below the replica's log start {start}"
            )
        copies = list(
            consume_ranges(
                self.target_endpoint, {target: (downstream, end)}, 120.0, "read_uncommitted"
            )
        )
        originals: list[Record] = []
        for record in consume_ranges(
            self.source_endpoint, {source: (upstream, source_end)}, 120.0, "read_uncommitted"
        ):
            originals.append(record)
            if len(originals) == len(copies):
                break
        paired = pair_tail(originals, copies)
        if isinstance(paired, str):
            raise AdoptionRefused(f"{source} -> {target}: {paired}; nothing was written")
        below = points[:-1]
        mm2 = Mm2Syncs(tuple(u for u, _ in below), tuple(d for _, d in below), upstream, downstream)
        return PartitionAdoption(source, target, mm2, paired.runs, paired.next_offset)

    def _replica_bounds(self, target: TopicPartition) -> tuple[int, int]:
        offsets = self.target.topic_offsets(target.topic)
        if target.partition not in offsets:
            raise AdoptionRefused(
                f"MirrorMaker 2 synced offsets for {target.topic}'s source but {target} does "
                f"not exist on {self.flow.target}: does the flow's replication_policy name "
                "replicas as MirrorMaker 2 did?"
            )
        return offsets[target.partition]

    def _source_end(self, source: TopicPartition) -> int:
        return self.source.list_offsets([source])[source]

    def _fresh_partitions(self, synced: set[TopicPartition]) -> tuple[TopicPartition, ...]:
        """Selected source partitions MM2 never synced: their replicas must be empty."""
        fresh: list[TopicPartition] = []
        present = self.target.list_topics(include_internal=True)
        for topic in sorted(self.source.list_topics()):
            if not self.topology.selects(topic):
                continue
            for partition in sorted(self.source.topic_offsets(topic)):
                tp = TopicPartition(topic, partition)
                if tp in synced:
                    continue
                replica = self.topology.target_partition(tp)
                if replica.topic in present:
                    start, end = self.target.topic_offsets(replica.topic).get(partition, (0, 0))
                    if end > start:
                        raise AdoptionRefused(
                            f"{replica} holds {end - start} records but MirrorMaker 2 left no "
                            f"offset sync for {tp}: drkit cannot tell which source records "
                            "they are"
                        )
                fresh.append(tp)
        return tuple(fresh)

    # -- writing --------------------------------------------------------------------------------

    def _write(self, partitions: Sequence[PartitionAdoption]) -> None:
        """Adopted ranges, then runs, then progress - each durable before the next."""
        ensure_bookkeeping_topics(self.topology, self.source, self.target)
        rf = self.flow.target_replication_factor
        self.target.create_topics(
            [TopicSpec(self.topology.adopted_topic, 1, rf, {"cleanup.policy": "compact"})]
        )
        alias = self.flow.target
        adopted = self.signer.of_kind(Kind.ADOPTED) if self.signer is not None else None
        produce_batch(
            self.target_endpoint,
            self.topology.adopted_topic,
            (
                (key, value, (adopted.header(key, value),) if adopted is not None else ())
                for key, value in (
                    (adopted_key(alias, p.source), adopted_value(p.mm2)) for p in partitions
                )
            ),
        )
        produce_batch(
            self.target_endpoint,
            self.topology.offset_syncs_topic,
            (
                (sync.key(), sync.value(), self._headers(sync))
                for p in partitions
                for sync in (OffsetSync(p.source, p.target, run) for run in p.runs)
            ),
        )
        produce_batch(
            self.target_endpoint,
            self.topology.progress_topic,
            (
                (progress.key(alias), progress.value())
                for progress in (
                    Progress(p.source, p.next_offset, ADOPT_WORKER) for p in partitions
                )
            ),
        )
