"""Load what translation needs for one flow from the target cluster.

Combines the merged offset-sync runs, the stored progress and - for a flow ``drkit adopt`` took
over from MirrorMaker 2 - MM2's syncs below the adoption point of every source partition into
:class:`drkit.translation.PartitionMapping` values.  Works with the source cluster gone: all of
it lives on the target.

Copies only rejected offset-sync records place (translation, invariant 10) are believed only
where the target partition's records corroborate them (drkit/offsets/corroboration.py): the
loader reads the target at those positions, through an injectable reader (by default a
:class:`~drkit.kafka.partition_reader.PartitionReader`, opened on the first such read).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Mapping, Sequence

from drkit.adoption.adopted import AdoptedStore
from drkit.config.model import FlowConfig
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.partition_reader import PartitionReader
from drkit.offsets.corroboration import Corroborator, TargetRecords
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetSync
from drkit.replication.offset_sync_store import OffsetSyncStore
from drkit.replication.progress import Progress, ProgressStore
from drkit.replication.run_map import RunMap, RunTable
from drkit.signing import Kind, Signer
from drkit.topology.flow import FlowTopology
from drkit.translation import Mm2Syncs, PartitionMapping

log = logging.getLogger(__name__)


class MappingLoader:
    """Incrementally reads a flow's offset syncs and progress; not thread-safe.

    Both topics must exist: a missing one raises (drkit/kafka/tailer.py) rather than reading as
    "nothing replicated", which would translate every group as if the flow had just started.
    """

    def __init__(
        self,
        flow: FlowConfig,
        target: ClusterEndpoint,
        topology: FlowTopology | None = None,
        *,
        signer: Signer | None,
        records: TargetRecords | None = None,
    ) -> None:
        """``signer``: the flow's offset-sync key (drkit/store/flow_keys.py); offset syncs and
        adopted ranges that fail it (each verified as its own kind) are ignored, counted
        (:attr:`rejected`) and their ranges doubted (translation, invariant 9).  None only for
        readers without a store that say so (bench, tests).  ``records``: the target's records
        by position, to corroborate the copies rejected records claim (invariant 10); by
        default a read_committed PartitionReader on ``target``, opened when first needed."""
        self.flow = flow
        self.topology = topology or FlowTopology.of(flow)
        # A reader: a flow that never ran has no bookkeeping topics yet, which means no mapping.
        self._syncs = OffsetSyncStore(
            target, self.topology.offset_syncs_topic, missing_ok=True, signer=signer
        )
        self._progress = ProgressStore(target, self.topology.progress_topic, missing_ok=True)
        self._adopted = AdoptedStore(
            target,
            self.topology.adopted_topic,
            signer=signer.of_kind(Kind.ADOPTED) if signer is not None else None,
        )
        self._cache: dict[TopicPartition, tuple[object, PartitionMapping]] = {}
        # Rejected records' claims on topics the flow does not replicate (as last refreshed):
        # refuted unread, never unchecked (security review 12, N1).
        self.unselected_claims = 0
        self._reader: PartitionReader | None = None

        def opener() -> TargetRecords:
            self._reader = PartitionReader(target)
            return self._reader

        self.corroborator = Corroborator(records, flow.source, opener=opener)

    def target_of(self, source: TopicPartition) -> TopicPartition:
        """Where the flow writes ``source`` (the topology's name, same partition)."""
        return self.topology.target_partition(source)

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, PartitionMapping]:
        """Catch up with both topics; mappings of unchanged partitions are the same objects.

        A partition's mapping is rebuilt only when its runs (the store's per-partition
        ``version``) or its progress changed, and its run table is shared with the store's
        snapshot: a refresh after one commit costs the partitions that commit touched.
        """
        runs = self._syncs.refresh(timeout_s)
        self.unselected_claims = 0
        progress = self._progress.refresh(timeout_s)
        adopted = self._adopted.refresh(timeout_s)
        self.corroborator.start_refresh()
        out: dict[TopicPartition, PartitionMapping] = {}
        # A partition only rejected records claim has a mapping too: its doubt (invariant 9) -
        # on the topics the flow replicates.  The flow translates no other, so claims on them
        # are refuted unread (security review 12, N1: a forger naming another flow's topic
        # made the loader spend the reads of that flow's replica and leave claims unchecked,
        # which block every planned move).
        rejected_syncs = self._selected(self._syncs.claims)
        rejected_adoptions = self._selected(self._adopted.claims)
        sources = runs.keys() | progress.keys() | rejected_syncs.keys()
        for source in sources | rejected_adoptions.keys():
            run_map = runs.get(source)
            stored = progress.get(source)
            mm2 = adopted.get(source)
            claims: Sequence[tuple[int, int]] = rejected_syncs.get(source, ())
            if source in rejected_adoptions:
                claims = [*claims, *rejected_adoptions[source]]
            signature = (
                len(claims),
                run_map.version if run_map is not None else None,
                stored.next_offset if stored else None,
                stored.hashed if stored else None,
                id(mm2),
            )
            cached = self._cache.get(source)
            if (
                cached is not None
                and cached[0] == signature
                # Checked further each refresh; pending ones once the end moves past them.
                and not self.corroborator.unchecked_in(source)
                and not self.corroborator.pending_in(source)
            ):
                out[source] = cached[1]
                continue
            copies = self._syncs.claimed_copies.get(source, ()) if source in rejected_syncs else ()
            mapping = self._build(source, run_map, stored, mm2, claims, copies)
            self._cache[source] = (signature, mapping)
            out[source] = mapping
        return out

    def _selected(
        self, claims: Mapping[TopicPartition, Sequence[tuple[int, int]]]
    ) -> Mapping[TopicPartition, Sequence[tuple[int, int]]]:
        """``claims`` on the topics the flow replicates; the others are counted
        (:attr:`unselected_claims`) and logged, as refuted."""
        kept = {tp: ranges for tp, ranges in claims.items() if self.topology.translates(tp.topic)}
        if len(kept) == len(claims):
            return claims
        dropped = sum(len(ranges) for tp, ranges in claims.items() if tp not in kept)
        self.unselected_claims += dropped
        log.warning(
            "offset-sync claims name a topic the flow does not replicate: refuted unread (a "
            "foreign writer of the offset-sync topic?)",
            extra={
                "topics": sorted({tp.topic for tp in claims if tp not in kept})[:10],
                "claims": dropped,
            },
        )
        return kept

    def _build(
        self,
        source: TopicPartition,
        run_map: RunMap | None,
        stored: Progress | None,
        adopted: Mm2Syncs | None,
        claims: Sequence[tuple[int, int]] = (),
        copies: Sequence[tuple[int, int, int]] = (),
    ) -> PartitionMapping:
        """``claims``: the source ranges rejected records may hide (``doubt``); ``copies``:
        where rejected values say they copied them - believed where the target's records
        corroborate them (translation, invariant 10)."""
        targets = run_map.targets() if run_map is not None else frozenset()
        split = len(targets) > 1
        target = next(iter(targets)) if len(targets) == 1 else self.target_of(source)
        # A split partition cannot be translated: its runs are not merged for nothing.
        table = run_map.table() if run_map is not None and not split else ()
        replicated_end = stored.next_offset if stored else None
        runs = RunTable.of(table)
        doubted = doubt(claims, runs, replicated_end) if claims else ()
        return PartitionMapping(
            source=source,
            target=target,
            runs=table,
            replicated_end=stored.next_offset if stored else None,
            hashed=stored.hashed if stored else False,
            split=split,
            adopted=adopted,
            doubt=doubted,
            claimed=self.corroborator.claimed(source, target, copies, runs, doubted),
            unchecked=self.corroborator.unresolved(source),
        )

    @property
    def rejected(self) -> int:
        """Offset-sync and adopted-range records read so far that failed verification
        (ignored): plans and reports name them together."""
        return self._syncs.rejected + self._adopted.rejected

    @property
    def accepted(self) -> int:
        """Offset-sync and adopted-range records read so far that verified (0 without a
        signer)."""
        return self._syncs.accepted + self._adopted.accepted

    def run_partitions(self) -> dict[TopicPartition, frozenset[TopicPartition]]:
        """Source partitions with stored runs and their target partitions (as last refreshed)."""
        return self._syncs.partitions()

    def expired_runs(
        self,
        source_starts: Mapping[TopicPartition, int],
        target_starts: Mapping[TopicPartition, int],
    ) -> list[OffsetSync]:
        """Runs with no record left on either cluster (see OffsetSyncStore.expired)."""
        return self._syncs.expired(source_starts, target_starts)

    def stored_runs(self) -> int:
        return self._syncs.stored_runs()

    @property
    def offset_syncs_topic(self) -> str:
        return self._syncs.topic

    @property
    def unchecked_claims(self) -> int:
        """Claimed copies of rejected records not yet checked against the target (as last
        refreshed): they lower the answers they could lower, flagged ``unchecked``, until a
        later refresh checks them."""
        return self.corroborator.unchecked

    def close(self) -> None:
        self._syncs.close()
        self._progress.close()
        self._adopted.close()
        if self._reader is not None:
            self._reader.close()


UNBOUNDED = 2**63  # a doubted range with no verified run after it: to the partition's end


def doubt(
    claims: Sequence[tuple[int, int]], table: RunTable, replicated_end: int | None = None
) -> tuple[tuple[int, int], ...]:
    """The source ranges rejected records may hide that no verified run covers - sorted and
    disjoint (pure; translation, invariant 9).

    A claim ``(start, end)`` is a rejected record's key and what its value claims (a
    tombstone's: ``(start, start)``); what it may hide reaches from ``start`` to the next
    verified run's start (:data:`UNBOUNDED` past the last), or to its claimed end if that lies
    further.  Not the claimed length alone: a foreign writer picks it, and once compaction
    removed the real record under that key the real run's range would read as a plain gap
    (translation skips gaps).  A forged record beside intact runs hides nothing they cover; a
    real record that is not trusted (written before signing, or compacted away under a
    forgery of its key) leaves its range uncovered, and translation rounds down there.

    ``replicated_end`` (progress) bounds nothing: progress is unsigned, and a forged low one
    would clip the doubt away (accepted for callers that pass it)."""
    del replicated_end
    if not claims:
        return ()
    src, length = table.src, table.length
    runs = len(src)
    # Each claim widened to the next verified run, then one sorted union of them all: many
    # claims over one range cost a sort, not a walk over the runs each (review 6, M6).
    union: list[tuple[int, int]] = []
    for start, end in sorted(
        (start, max(end, src[i] if (i := bisect_right(src, start)) < runs else UNBOUNDED))
        for start, end in claims
    ):
        if union and start <= union[-1][1]:
            if end > union[-1][1]:
                union[-1] = (union[-1][0], end)
        else:
            union.append((start, end))
    # One pass over the runs the union spans: what no verified run covers.
    out: list[tuple[int, int]] = []
    index = 0
    for start, end in union:
        index = max(index, bisect_right(src, start, index) - 1)
        at = start
        while index < runs and src[index] < end:
            run_end = src[index] + length[index]
            if run_end > at:
                if src[index] > at:
                    out.append((at, src[index]))
                at = run_end
            if at >= end:
                break  # this run may cover the next range of the union too
            index += 1
        if at < end:
            out.append((at, end))
    return tuple(out)
