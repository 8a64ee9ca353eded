"""Load what translation needs for one flow from the target cluster.

Combines the merged offset-sync runs and the stored progress of every source partition into
:class:`drkit.translation.PartitionMapping` values.  Works with the source cluster gone: all of
it lives on the target.
"""

from __future__ import annotations

from drkit.config.model import FlowConfig
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.replication import internal_topics
from drkit.replication.offset_sync import OffsetSync
from drkit.replication.offset_sync_store import OffsetSyncStore
from drkit.replication.policy import build_policy
from drkit.replication.progress import Progress, ProgressStore
from drkit.replication.transforms import build_chain
from drkit.translation import PartitionMapping


class MappingLoader:
    """Incrementally reads a flow's offset syncs and progress; not thread-safe."""

    def __init__(self, flow: FlowConfig, target: ClusterEndpoint) -> None:
        self.flow = flow
        self.policy = build_policy(flow.replication_policy)
        self.chain = build_chain(flow.transforms)
        self._syncs = OffsetSyncStore(target, internal_topics.offset_syncs_topic(flow.source))
        self._progress = ProgressStore(target, internal_topics.progress_topic(flow.source))
        self._cache: dict[TopicPartition, tuple[object, PartitionMapping]] = {}

    def target_of(self, source: TopicPartition) -> TopicPartition:
        name = self.chain.rename(self.policy.target_topic(self.flow.source, source.topic))
        return TopicPartition(name, source.partition)

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, PartitionMapping]:
        runs = self._syncs.refresh(timeout_s)
        progress = self._progress.refresh(timeout_s)
        out: dict[TopicPartition, PartitionMapping] = {}
        for source in set(runs) | set(progress):
            synced = runs.get(source, [])
            stored = progress.get(source)
            signature = (len(synced), synced[-1] if synced else None, stored)
            cached = self._cache.get(source)
            if cached is not None and cached[0] == signature:
                out[source] = cached[1]
                continue
            mapping = self._build(source, synced, stored)
            self._cache[source] = (signature, mapping)
            out[source] = mapping
        return out

    def _build(
        self, source: TopicPartition, synced: list[OffsetSync], stored: Progress | None
    ) -> PartitionMapping:
        targets = {sync.target for sync in synced}
        target = next(iter(targets)) if len(targets) == 1 else self.target_of(source)
        return PartitionMapping(
            source=source,
            target=target,
            runs=tuple(sync.run for sync in synced),
            replicated_end=stored.next_offset if stored else None,
            hashed=stored.hashed if stored else False,
            split=len(targets) > 1,
        )

    def close(self) -> None:
        self._syncs.close()
        self._progress.close()
