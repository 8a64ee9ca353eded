"""Recount a drill from the records themselves (pure functions).

Inputs are what the clusters hold after the drill - the source topic read with read_committed
once the source is back, the replica on the target - plus each group's committed positions on
the source and the ledger of what it processed on the target.  Records are recognised by the
writer's sequence number in the value (``workload.decode_seq``), not by drkit's headers, so the
recount does not trust the thing it checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from drkit.drills.numbered import Processed, decode_seq
from drkit.drills.report import GroupOutcome, UnreplicatedPartition
from drkit.records import Record, TopicPartition


def rpo_of(
    source: Sequence[Record], replica: Sequence[Record], replica_topic: Mapping[str, str]
) -> tuple[UnreplicatedPartition, ...]:
    """Per source partition: records the source holds that the replica does not.

    ``seconds`` is the span of writes lost: the newest lost record's timestamp minus the
    newest copied record's in that partition (0 when nothing was lost); ``read_to`` the offset
    after the last source record read - the recount's horizon.
    """
    copied: dict[str, set[int]] = {}
    for record in replica:
        seq = decode_seq(record.value)
        if seq is not None:
            copied.setdefault(record.topic, set()).add(seq)
    by_partition: dict[TopicPartition, list[Record]] = {}
    for record in source:
        by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    out: list[UnreplicatedPartition] = []
    for tp, records in sorted(by_partition.items()):
        present = copied.get(replica_topic[tp.topic], set())
        lost = [r for r in records if decode_seq(r.value) not in present]
        kept = [r for r in records if decode_seq(r.value) in present]
        seconds = 0.0
        if lost:
            newest_lost = max(r.timestamp_ms or 0 for r in lost)
            reference = max((r.timestamp_ms or 0 for r in kept), default=None)
            if reference is None:
                reference = min(r.timestamp_ms or 0 for r in lost)
            seconds = max(0.0, (newest_lost - reference) / 1000)
        out.append(
            UnreplicatedPartition(
                tp.topic,
                tp.partition,
                len(lost),
                sum(r.size for r in lost),
                seconds,
                max(r.offset for r in records) + 1,
            )
        )
    return tuple(out)


def group_outcome(
    group: str,
    topic: str,
    source: Sequence[Record],
    replica: Sequence[Record],
    committed_on_source: Mapping[int, int],
    on_target: Sequence[Processed],
    resumed_after_s: float | None,
    verified_exact: bool | None = None,
) -> GroupOutcome:
    """What ``group`` (reading ``topic``) did across the move.

    processed on the source: every visible record below its committed offset there;
    re-read: records it processed on the target that it had processed on the source, plus
    records processed twice on the target;
    skipped: records the replica holds that it processed on neither cluster (meaningful once
    the group has drained the replica, which the drill waits for).
    """
    done_on_source = {
        seq
        for r in source
        if r.topic == topic
        and r.offset < committed_on_source.get(r.partition, 0)
        and (seq := decode_seq(r.value)) is not None
    }
    target_counts = Counter(p.seq for p in on_target if p.seq is not None)
    reread = sum(c for s, c in target_counts.items() if s in done_on_source) + sum(
        c - 1 for s, c in target_counts.items() if s not in done_on_source and c > 1
    )
    on_replica = {seq for r in replica if (seq := decode_seq(r.value)) is not None}
    skipped = len(on_replica - done_on_source - set(target_counts))
    return GroupOutcome(
        group=group,
        processed_on_source=len(done_on_source),
        processed_on_target=sum(target_counts.values()),
        skipped=skipped,
        reread=reread,
        resumed_after_s=resumed_after_s,
        verified_exact=verified_exact,
    )


def placed_or_reset(
    translated: Mapping[str, Mapping[TopicPartition, int]],
    wanted: Mapping[str, Sequence[TopicPartition]],
    log_starts: Mapping[TopicPartition, int],
) -> dict[str, dict[TopicPartition, int]]:
    """Per group and replica partition in ``wanted``: where the group starts on the target.

    ``translated`` is what the failover committed; a partition it left out (nothing to
    translate from) starts where a consumer with ``auto.offset.reset=earliest`` (the drill's
    workload) starts: the replica's log start.  Translated partitions outside ``wanted`` stay."""
    out = {group: dict(positions) for group, positions in translated.items()}
    for group, partitions in wanted.items():
        placed = out.setdefault(group, {})
        for tp in partitions:
            placed.setdefault(tp, log_starts[tp])
    return out
