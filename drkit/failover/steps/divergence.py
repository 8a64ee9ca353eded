"""Failback's first step: capture the original primary's divergent tail before anything else.

After a failover from A to B, A may have accepted writes that never reached B: everything at or
after the failover point (the flow A->B's progress when it stopped) that A holds now.  Those
records are counted per partition and exported - to a JSON-lines file or to a topic the
operator names - before replication back from B can make anyone forget them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from drkit.failover.context import StepContext, StepFailed, StepOutcome, deadline_loop
from drkit.failover.results import DivergentTail, Translation, partition_key
from drkit.failover.run_result import Divergence
from drkit.failover.runs import RunRecord
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.io import consume_ranges, produce_batch
from drkit.kafka.ports import ClusterAdmin, wait_for_leaders
from drkit.lag import count_visible
from drkit.private_files import private_file
from drkit.records import Record, TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.topology.flow import FlowTopology

TAIL_WINDOW = 500  # replica records read back per round when looking for held copies
TAIL_HEADER = "drkit-tail"  # on exported records: <cluster>/<topic>/<partition>/<offset>


def failover_point(ctx: StepContext) -> dict[TopicPartition, int]:
    """Per partition of the original primary: the first offset the other side never got."""
    original = ctx.target  # failback returns to it
    previous = ctx.runs.last_completed_move(original, ctx.source)
    if previous is None:
        raise StepFailed(
            f"no completed move from {original} to {ctx.source} is recorded: there is no "
            "failover point to fail back from"
        )
    return past_held_copies(ctx, original, point_of(previous))


def past_held_copies(
    ctx: StepContext, original: str, point: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """``point`` raised past copies the current primary already holds (see
    :func:`raised_past_copies`), for the flow original -> current primary that made them."""
    flow = ctx.reverse_flow  # original -> current primary: the flow that made the copies
    if flow is None or flow.target != ctx.source:
        return dict(point)
    return raised_past_copies(
        ctx.endpoint(ctx.source), ctx.admin(ctx.source), FlowTopology.of(flow), point
    )


def raised_past_copies(
    endpoint: ClusterEndpoint, admin: ClusterAdmin, topology: FlowTopology,
    point: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:  # fmt: skip
    """``point`` raised past copies ``topology``'s target (``endpoint``/``admin``) holds.

    Progress is written after the copies it covers are acknowledged, so a worker killed in
    between leaves copies beyond the recorded progress: they are not divergent.  The
    replica's tail is read back (in growing windows) until a copy below the point is seen;
    each partition's point becomes one past the newest copy of it (by provenance).  The
    failback's capture and the maintenance's divergence report both count from here, so
    they agree.
    """
    replicas = {tp: TopicPartition(topology.target_topic(tp.topic), tp.partition) for tp in point}
    starts = admin.list_offsets(replicas.values(), "earliest")
    ends = admin.list_offsets(replicas.values(), "latest")
    raised = dict(point)
    for tp, start in point.items():
        replica = replicas[tp]
        bounds, end = starts[replica], ends[replica]
        window = TAIL_WINDOW
        while end > bounds:
            low = max(bounds, end - window)
            copies = [
                p.offset
                for record in consume_ranges(endpoint, {replica: (low, end)}, 60.0)
                if (p := _provenance(record)) is not None
                and (p.topic, p.partition) == (tp.topic, tp.partition)
            ]
            if copies:
                raised[tp] = max(raised[tp], max(copies) + 1)
            if (copies and min(copies) < start) or low == bounds:
                break
            end, window = low, window * 2
    return raised


def _provenance(record: Record) -> Provenance | None:
    raw = record.header(SOURCE_HEADER)
    try:
        return Provenance.decode(raw) if raw else None
    except ValueError:
        return None


def point_of(run: RunRecord) -> dict[TopicPartition, int]:
    """The failover point a run recorded: per source partition, the replicated end (progress)
    when it translated offsets - every record from there on never reached the target."""
    # Only the RPO rows are needed: the groups' rows stay in their table.
    return Translation.from_detail(run.detail_head(Translation.STEP)).failover_point()


def divergent_ranges(
    point: dict[TopicPartition, int], ends: dict[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """The offsets ``[point, end)`` the old primary holds beyond the failover point."""
    return {tp: (start, ends[tp]) for tp, start in sorted(point.items()) if ends.get(tp, 0) > start}


def divergence_report(admin: ClusterAdmin, point: dict[TopicPartition, int]) -> Divergence | None:
    """What the old primary holds beyond ``point``, in visible records per ``topic:partition``
    (drkit.lag); None while a transaction is still open in it (its records cannot be counted
    yet)."""
    ends = admin.list_offsets(list(point), "latest")
    counts = count_visible(admin, divergent_ranges(point, ends), limit=None)
    if not all(count.exact for count in counts.values()):
        return None
    return Divergence(
        {partition_key(tp): count.at_most for tp, count in sorted(counts.items()) if count.at_most},
        sum(count.offsets for count in counts.values()),
    )


def capture_divergent_tail(ctx: StepContext, timeout_s: float | None) -> StepOutcome:
    original = ctx.target
    if not ctx.reachable(original):
        raise StepFailed(f"{original} does not answer: its divergent tail cannot be read")
    point = failover_point(ctx)
    _hold(ctx, original, {tp.topic for tp in point}, timeout_s)
    ends = _settled_ends(ctx, original, list(point), timeout_s)
    ranges = {tp: (start, ends[tp]) for tp, start in point.items() if ends.get(tp, 0) > start}
    counts: dict[str, int] = {}
    tail = _counted(ctx, consume_ranges(ctx.endpoint(original), ranges, timeout_s or 300.0),
                    counts)  # fmt: skip
    exported_to = _export(ctx, original, tail)
    captured = DivergentTail(
        {partition_key(tp): offset for tp, offset in sorted(point.items())}, counts, exported_to
    )
    return StepOutcome.done(**captured.to_detail())


# Lease confirmations while a tail is exported: one before the first record leaves, then one
# per this many (the export is the step's side effect; a long one must not outlive the lease).
CONFIRM_EVERY = 5_000


def _counted(ctx: StepContext, records: Iterable[Record], counts: dict[str, int]
             ) -> Iterator[Record]:  # fmt: skip
    """``records`` streamed (never held), counted per partition into ``counts``, the lease
    confirmed before the first and after every :data:`CONFIRM_EVERY`."""
    for index, record in enumerate(records):
        if index % CONFIRM_EVERY == 0:
            ctx.confirm()
        key = partition_key(TopicPartition(record.topic, record.partition))
        counts[key] = counts.get(key, 0) + 1
        yield record


def _hold(ctx: StepContext, original: str, topics: set[str], timeout_s: float | None) -> None:
    """The original primary refuses application writes before its tail is read: this run's
    intent holds it fenced (drkit.failover.protections, openings notwithstanding) - reconciled
    and checked here, else a write after the capture would be lost while the run says the
    tail was captured.  Without ACL fences (``fence_with_acls: false``) the operator's hooks
    fence it; nothing here can check them."""
    if not ctx.config.failover.fence_with_acls:
        return
    report = ctx.reconcile([original], strict=[original], timeout_s=timeout_s)
    open_topics = sorted(topics - set(report.clusters[original].fenced))
    if open_topics:
        raise StepFailed(
            f"{original} still takes application writes on {', '.join(open_topics)}: its "
            "divergent tail cannot be captured while it grows"
        )


def _settled_ends(
    ctx: StepContext, cluster: str, partitions: list[TopicPartition], timeout_s: float | None
) -> dict[TopicPartition, int]:
    """The end offsets of ``partitions`` once no transaction is open below them.

    The tail is read committed: a transaction left open (a producer that died mid-way) hides
    every record after its first one until it ends.  Reading past it silently would export a
    tail with a hole; the step waits for it to end (the broker aborts it at the producer's
    transaction timeout) and fails, naming the partitions, if it does not within half its
    timeout.
    """
    admin = ctx.admin(cluster)
    more = deadline_loop((timeout_s or 300.0) / 2, 1.0)
    blocked: dict[TopicPartition, tuple[int, int]] = {}
    while more():
        ends = admin.list_offsets(partitions, "latest")
        stable = admin.stable_offsets(partitions)
        blocked = {tp: (stable[tp], ends[tp]) for tp in partitions if stable[tp] < ends[tp]}
        if not blocked:
            return ends
        ctx.progress(f"waiting for {len(blocked)} open transaction(s) on {cluster} to end", None)
    listed = ", ".join(
        f"{tp.topic}[{tp.partition}] open from offset {first} (end {end})"
        for tp, (first, end) in sorted(blocked.items())
    )
    raise StepFailed(
        f"{cluster} holds open transactions in the divergent tail ({listed}): its records "
        "cannot be read committed until they end - wait for the producer's transaction "
        "timeout (or abort them), then resume this run"
    )


def _export(ctx: StepContext, cluster: str, records: Iterable[Record]) -> str:
    """Stream ``records`` to the export topic or file.  A resumed step exports again: into a
    topic only what it does not hold yet (by each record's provenance header); a file is
    written whole and renamed over the old one."""
    if ctx.options.export_topic:
        alias, _, topic = ctx.options.export_topic.partition(":")
        if not topic or alias not in ctx.config.clusters:
            raise StepFailed(
                f"--export-topic {ctx.options.export_topic!r}: expected CLUSTER:TOPIC with a "
                f"configured cluster ({', '.join(ctx.config.clusters)})"
            )
        export_to_topic(ctx.endpoint(alias), ctx.admin(alias), topic, cluster, records)
        return f"topic {alias}:{topic}"
    path = Path(
        ctx.options.export_file or ctx.state_dir / "failback" / f"run-{ctx.run.id}-tail.jsonl"
    )
    # Application records: readable by drkit's user only, never a half-written file.
    with private_file(path) as out:
        for record in records:
            out.write(json.dumps(_line(cluster, record)) + "\n")
    return f"file {path}"


def export_to_topic(
    endpoint: ClusterEndpoint, admin: ClusterAdmin, topic: str, cluster: str,
    records: Iterable[Record],
) -> int:  # fmt: skip
    """Append ``records`` (of ``cluster``) to partition 0 of ``topic``, each with its
    provenance header, skipping those the topic holds already - an export cut short and run
    again leaves no duplicate.  Streams: only the held provenances are kept in memory.
    Returns how many were appended.

    Only an export topic is ever written: a topic that exists with more than one partition, or
    holds a record without the provenance header (an application's topic, a typo's look-alike)
    is refused before anything is appended (StepFailed naming it)."""
    partition, first, end = open_export_topic(admin, topic)
    held: set[bytes] = set()
    for record in consume_ranges(endpoint, {partition: (first, end)}, 120.0):
        stamps = [value for name, value in record.headers
                  if name == TAIL_HEADER and isinstance(value, bytes)]  # fmt: skip
        if not stamps:
            why = f"its record at offset {record.offset} has no {TAIL_HEADER} header"
            raise StepFailed(_not_an_export(topic, why))
        held.update(stamps)
    missing = (
        (record.key, record.value, (*record.headers, (TAIL_HEADER, provenance)))
        for record in records
        if (provenance := Provenance(cluster, record.topic, record.partition,
                                     record.offset).encode()) not in held
    )  # fmt: skip
    return produce_batch(endpoint, topic, missing, partition=0, timeout_s=300.0)


def open_export_topic(
    admin: ClusterAdmin, topic: str, wait_s: float = 30.0, pause_s: float = 0.2
) -> tuple[TopicPartition, int, int]:
    """Partition 0 of export topic ``topic`` (created when missing) with its first and end
    offsets.  A topic with more than one partition is refused (StepFailed).  Waits up to
    ``wait_s`` for the partition's leader (a topic just created has none for a moment)."""
    existing = admin.list_topics().get(topic)
    if existing is not None and existing.partition_count != 1:
        raise StepFailed(_not_an_export(topic, f"it has {existing.partition_count} partitions"))
    admin.create_topics([TopicSpec(topic, 1)])
    wait_for_leaders(admin, topic, wait_s, pause_s)
    partition = TopicPartition(topic, 0)
    first = admin.list_offsets([partition], "earliest")[partition]
    end = admin.list_offsets([partition], "latest")[partition]
    return partition, first, end


def _not_an_export(topic: str, why: str) -> str:
    return (
        f"--export-topic {topic}: not a divergent-tail export topic ({why}) - drkit appends "
        "only to a topic it exported to before, or creates it; name a new topic (nothing was "
        "written), then resume this run or abandon it"
    )


def _line(cluster: str, record: Record) -> dict[str, Any]:
    def b64(raw: bytes | None) -> str | None:
        return base64.b64encode(raw).decode() if raw is not None else None

    return {
        "cluster": cluster,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "key_b64": b64(record.key),
        "value_b64": b64(record.value),
        "headers": [[name, b64(value)] for name, value in record.headers],
    }
