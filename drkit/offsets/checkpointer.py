"""The checkpoint worker of one flow: follow source groups, translate, write checkpoints.

Every ``flow.checkpoint_interval_s`` it reads the source groups' committed offsets (new groups
are seen on the next round), reads the translation inputs (drkit.offsets.inputs), translates
each group on the partitions of replicated topics with :func:`drkit.translation.translate_group`
and writes a checkpoint when S or T changed, then a tick record.  With
``flow.sync_group_offsets`` it also moves empty target groups forward.

Rounds are incremental where that changes nothing: a group whose committed offset did not move,
on a partition whose runs only grew after it (the replicator copied on), keeps the previous
round's answer (:func:`drkit.translation.carry_over`, equal to a fresh translation - a
hypothesis test checks it); everything else is translated again.  How the commits are read
(drkit.offsets.commit_follower): through the admin API, every group every round - a full pass,
the admin API has no "what changed since" - or, with ``checkpoint_commits_from:
offsets_topic``, from the commits the source logs on ``__consumer_offsets``; then a round does
not even look at a group that did not move while its partitions' inputs only widened (its
answers are settled, :func:`drkit.translation.settled`; tests/unit/test_checkpoint_rounds.py
checks every round against fresh translations).  A failed round makes the next one look at
every group again.

The latest checkpoints on the target are what an unplanned failover uses once the source is
gone, so they are written in MirrorMaker 2's format (:mod:`drkit.offsets.checkpoint`).

Every ``trim_interval_s`` (and on the first round) it also trims the offset-sync map
(:meth:`Checkpointer.trim`): runs with no record left on the source *or* the target - both log
starts read now - are tombstoned on the offset-sync topic, and every reader drops them when it
reads the tombstones.  This keeps the map (in memory and on the topic) bounded by retention
instead of growing with every commit (drkit/replication/run_map.py has the argument why
translation stays "never skip").
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from drkit.config.model import ClusterConfig, CommitSource, FlowConfig
from drkit.errors import KafkaError, Stopped, UnreachableClusterError
from drkit.kafka.acked_writer import AckedWriter
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpoint import TICK_GROUP, Checkpoint, group_of, tick
from drkit.offsets.commit_follower import (
    AdminCommits,
    AutoCommits,
    CommitFollower,
    CommitsRead,
)
from drkit.offsets.group_sync import GroupOffsetSync
from drkit.offsets.inputs import read_inputs
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.metrics import CheckpointMetrics, default_metrics
from drkit.records import TopicPartition
from drkit.signing import Signer
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import is_own_group
from drkit.topology.topic_filter import NameMatcher
from drkit.translation import (
    CannotTranslate,
    PartitionInputs,
    Translated,
    only_widened,
    settled,
    translate_group,
    unreplicated_total,
)

log = logging.getLogger(__name__)

TRIM_INTERVAL_S = 60.0


@dataclass
class GroupView:
    """What the rounds found for one group (the checkpointer's own bookkeeping).

    ``verified_at`` is the last round that confirmed the answers.  A group that did not move is
    not translated again when its partitions' inputs only widened (drkit.translation.settled):
    its results keep the ``unreplicated`` count of the round that translated them, so that
    count is never read from a view - the rounds count it per partition.
    """

    group: str
    verified_at: float
    results: dict[TopicPartition, Translated | CannotTranslate] = field(default_factory=dict)
    rereads: int = 0
    untranslatable: int = 0
    pending: bool = False  # some answer is not settled: translate it again every round

    @classmethod
    def of(
        cls,
        group: str,
        now: float,
        results: dict[TopicPartition, Translated | CannotTranslate],
        inputs: Mapping[TopicPartition, PartitionInputs],
    ) -> GroupView:
        rereads = untranslatable = 0
        pending = False
        for tp, result in results.items():
            if isinstance(result, CannotTranslate):
                untranslatable += 1
                pending = True
                continue
            rereads += result.expected_rereads
            given = inputs.get(tp)
            pending = pending or given is None or not settled(result, given.mapping)
        return cls(group, now, results, rereads, untranslatable, pending)


def commit_source(
    kind: CommitSource,
    source: ClusterAdmin,
    follows: Callable[[str], bool],
    known: Callable[[], Iterable[str]],
    *,
    stop: threading.Event | None = None,
) -> AdminCommits | CommitFollower | AutoCommits:
    """The reader of the source's commits ``checkpoint_commits_from`` asks for; ``stop``: the
    worker's stop event, under which a read of the source's log under way gives up."""
    if kind is CommitSource.ADMIN_API:
        return AdminCommits(source, follows)
    follower = CommitFollower(source, follows, known, stop=stop)
    if kind is CommitSource.OFFSETS_TOPIC:
        return follower
    return AutoCommits(follower, AdminCommits(source, follows), source.endpoint.alias)


class Checkpointer:
    def __init__(
        self,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        metrics: CheckpointMetrics | None = None,
        trim_interval_s: float = TRIM_INTERVAL_S,
        stop: threading.Event | None = None,
        signer: Signer | None = None,
        *,
        connect: AdminFactory,
    ) -> None:
        """``signer``: the flow's offset-sync key (drkit/signing.py): the runs it translates
        with are verified, its tombstones signed; None (no state store) verifies nothing;
        ``connect``: how it reaches the clusters' admin API (drkit.kafka.ports) - no default,
        every caller passes one."""
        self.flow = flow
        self.signer = signer
        self.name = flow.name
        # ``stop``: requests under way when it is set are given up (errors.Stopped).
        self.source = connect(ClusterEndpoint(flow.source, source), stop=stop)
        self.target_endpoint = ClusterEndpoint(flow.target, target)
        self.target = connect(self.target_endpoint, stop=stop)
        self.metrics = metrics or default_metrics()
        self.topology = FlowTopology.of(flow)
        self.groups = NameMatcher.of(flow.groups)
        self.topic = self.topology.checkpoints_topic
        self.loader = MappingLoader(flow, self.target_endpoint, self.topology, signer=signer)
        self.group_sync = GroupOffsetSync(self.target) if flow.sync_group_offsets else None
        self._writer = AckedWriter(self.target_endpoint, {"linger.ms": 5})
        self._written: dict[tuple[str, TopicPartition], tuple[int, int]] = {}
        self.commits = commit_source(
            flow.checkpoint_commits_from,
            self.source,
            self.follows,
            self.checkpointed_groups,
            stop=stop,
        )
        self.views: dict[str, GroupView] = {}
        # The inputs the last round translated with: a partition whose runs only grew since
        # keeps the answers of groups that did not move (translate_group's ``previous``), and
        # with the commits followed on the log those groups are not even looked at (_todo).
        self._inputs: dict[TopicPartition, PartitionInputs] = {}
        # Totals and indexes over self.views, kept as views come and go (_count).
        self._translated_on: dict[TopicPartition, dict[str, int]] = {}
        self._pending: set[str] = set()
        self._rereads = self._untranslatable = self._results = 0
        self.trim_interval_s = trim_interval_s
        self._next_trim = 0.0  # monotonic; the first round trims
        self._rejected = 0  # offset-sync records that failed verification, counted so far

    def checkpointed_groups(self) -> list[str]:
        """Every group the flow's checkpoints name (keys only: nothing else is decoded)."""
        tailer = TopicTailer(self.target_endpoint, self.topic, missing_ok=True)
        groups: set[str] = set()
        try:
            for record in tailer.catch_up(30.0):
                if record.key is None or record.value is None:  # a tombstone names no group
                    continue
                try:
                    groups.add(group_of(record.key))
                except (ValueError, UnicodeDecodeError, struct.error):
                    continue
        finally:
            tailer.close()
        groups.discard(TICK_GROUP)
        return sorted(groups)

    def prepare(self) -> None:
        self.target.create_topics(
            [
                TopicSpec(
                    self.topic,
                    1,
                    self.flow.target_replication_factor,
                    {"cleanup.policy": "compact"},
                )
            ]
        )

    def follows(self, group: str) -> bool:
        return not is_own_group(group) and self.groups.matches(group)

    def run(self, stop: threading.Event, leading: Callable[[], bool] = lambda: True) -> None:
        """Checkpoint until ``stop`` is set; a failed round is logged and retried next time.

        Rounds run only while ``leading()`` (one checkpoint worker per flow at a time, elected
        by drkit.kafka.election); the others stand by and take over when it goes.
        """
        self.prepare()
        while not stop.is_set():
            started = time.monotonic()
            if not leading():
                # A standby's followed commits would go stale (the log's tombstones are
                # removed after a day): whoever leads next starts from a fresh snapshot.
                self.commits.forget()
                stop.wait(min(1.0, self.flow.checkpoint_interval_s))
                continue
            try:
                # A source that does not answer (refused at once, or silent for 3 s) has no
                # group offsets to give: skip the round instead of waiting out every call's
                # timeout, which would also hold up a shutdown.
                if not self.source.answers(timeout_s=3.0):
                    endpoint = self.source.endpoint
                    raise UnreachableClusterError(endpoint.alias, endpoint.bootstrap_servers)
                self.round()
            except Stopped:
                break  # a request under way was given up: on to the final round below
            except KafkaError as err:
                self.metrics.errors.labels(self.name).inc()
                log.warning("checkpoint round failed", extra={"flow": self.name, "error": str(err)})
            self._observe_ages()
            stop.wait(max(0.0, self.flow.checkpoint_interval_s - (time.monotonic() - started)))
        # Flows stop before their checkpoint workers and store final progress on the way out:
        # one last round leaves checkpoints that match it (an unplanned failover right after
        # a shutdown must not resume from a checkpoint taken mid-catch-up).  With the source
        # gone there are no group offsets to read: stop now rather than wait out timeouts.
        if not leading():
            pass  # the elected worker keeps checkpointing
        elif self.source.answers(timeout_s=3.0):
            try:
                self.round()
            except KafkaError as err:
                log.warning(
                    "final checkpoint round failed", extra={"flow": self.name, "error": str(err)}
                )
        else:
            log.warning(
                "source does not answer: no final checkpoint round", extra={"flow": self.name}
            )
        self._writer.confirm(10, self.topic)

    def round(self) -> None:
        """One checkpoint round (see the module docstring).  After a failed round the next one
        looks at every group again: what this one changed may be half-applied."""
        try:
            self._round()
        except BaseException:
            self.commits.restart()
            raise

    def _round(self) -> None:
        read = self.commits.read()
        for source in ("admin_api", "offsets_topic"):
            self.metrics.commit_source.labels(self.name, source).set(source == self.commits.using)
        mappings = self.loader.refresh()
        # The replicated partitions some group committed on: the topic filter (regexes, some
        # microseconds) is asked once per partition, not once per group's commit - 500,000
        # times at 10,000 groups.  Only committed ones: a mapping can outlive its topic.
        wanted = {
            tp for tp in read.partitions if tp in mappings and self.topology.translates(tp.topic)
        }
        # What each wanted partition translates with (a replica whose log bounds are unknown:
        # its groups get "no replica"), and how far the last round's answers still hold.
        inputs = dict(
            read_inputs(
                wanted, mappings, self.topology, self.target, self.source, previous=self._inputs
            ).inputs
        )
        todo = self._todo(read, wanted, inputs)
        now = time.time()
        updates: dict[str, GroupView | None] = {}
        translated = 0
        for group in read.committed if todo is None else todo:
            offsets = read.committed.get(group)
            if offsets is None:  # no commit left (deleted, expired)
                updates[group] = None
                continue
            mine = {tp: offset for tp, offset in offsets.items() if tp in wanted}
            before = self.views.get(group)
            results = translate_group(mine, inputs, before.results if before else {})
            translated += results.fresh
            updates[group] = GroupView.of(group, now, results, inputs)
            for result in results.values():
                if isinstance(result, Translated):
                    self._emit(group, result, now)
        if self.group_sync is not None:
            self._sync_groups(updates)
        # Answers and the inputs they were computed with change together: a round cut short
        # above (a failed group sync) leaves both as the last whole round had them, so the next
        # one never judges one round's answers against another round's runs.
        self._apply(updates, inputs, full=todo is None, now=now)
        if self.group_sync is not None:  # a group gone from the source has nothing to sync
            self.group_sync.retain(self.views)
        self.metrics.translations.labels(self.name).inc(translated)
        self.metrics.translations_kept.labels(self.name).inc(self._results - translated)
        self._writer.send(
            self.topic, tick(int(now * 1000), len(read.committed)).value(), tick(0, 0).key()
        )
        self._confirm_checkpoints(10)
        if time.monotonic() >= self._next_trim:
            self._next_trim = time.monotonic() + self.trim_interval_s
            try:
                self.trim()
            except KafkaError as err:  # the checkpoints are written: only the trim waits
                self.metrics.errors.labels(self.name).inc()
                log.warning("offset-sync trim failed", extra={"flow": self.name, "error": str(err)})
        unreplicated = sum(
            unreplicated_total(self._translated_on.get(tp, {}).values(), given)
            for tp, given in inputs.items()
        )
        self.metrics.offset_sync_runs.labels(self.name).set(self.loader.stored_runs())
        if self.loader.rejected > self._rejected:
            self.metrics.unverified.labels(self.name, "offset_sync").inc(
                self.loader.rejected - self._rejected
            )
            self._rejected = self.loader.rejected
        self.metrics.groups.labels(self.name).set(len(read.committed))
        self.metrics.rereads.labels(self.name).set(self._rereads)
        self.metrics.unreplicated.labels(self.name).set(unreplicated)
        self.metrics.untranslatable.labels(self.name).set(self._untranslatable)
        if self.group_sync is not None:
            self.metrics.active_skips.labels(self.name).set(len(self.group_sync.active_skips))

    def _todo(
        self,
        read: CommitsRead,
        wanted: set[TopicPartition],
        inputs: Mapping[TopicPartition, PartitionInputs],
    ) -> set[str] | None:
        """The groups this round must translate again; None for every group.

        With the commits followed on the log: the groups that moved, the groups with an answer
        that is not settled, and every group on a partition whose inputs did more than widen
        (or that joined or left the wanted partitions).  Every other group's answers are what
        translating again would give, but for the unreplicated counts (translation.settled).
        """
        if read.changed is None:
            return None
        todo = set(read.changed) | self._pending
        for tp in wanted | self._inputs.keys():
            new, old = inputs.get(tp), self._inputs.get(tp)
            if new is None or old is None or not only_widened(old, new):
                todo |= read.on(tp)
        return todo

    def _apply(
        self,
        updates: Mapping[str, GroupView | None],
        inputs: dict[TopicPartition, PartitionInputs],
        *,
        full: bool,
        now: float,
    ) -> None:
        """Make this round's answers the checkpointer's, with the inputs they came from."""
        if full:  # groups not seen this round are gone from the source
            self.views, self._translated_on, self._pending = {}, {}, set()
            self._rereads = self._untranslatable = self._results = 0
        for group, view in updates.items():
            old = self.views.pop(group, None)
            if old is not None:
                self._count(old, -1)
            if view is not None:
                self.views[group] = view
                self._count(view, +1)
        for view in self.views.values():  # the commits were read to their end: all current
            view.verified_at = now
        self._inputs = inputs

    def _count(self, view: GroupView, sign: int) -> None:
        """Add (+1) or remove (-1) a view's share of the per-flow totals and indexes."""
        self._rereads += sign * view.rereads
        self._untranslatable += sign * view.untranslatable
        self._results += sign * len(view.results)
        for tp, result in view.results.items():
            if isinstance(result, Translated):
                on = self._translated_on.setdefault(tp, {})
                if sign > 0:
                    on[view.group] = result.source_offset
                else:
                    on.pop(view.group, None)
        if sign > 0 and view.pending:
            self._pending.add(view.group)
        elif sign < 0:
            self._pending.discard(view.group)

    def trim(self) -> int:
        """Tombstone offset-sync runs with no record left on either cluster; returns how many.

        Uses the map as of the last refresh and both clusters' log starts read now.  Partitions
        whose topic is gone on either side keep their runs (no log start to compare with).
        """
        partitions = self.loader.run_partitions()
        if not partitions:
            return 0
        source_topics = self.source.list_topics()
        target_topics = self.target.list_topics()
        sources = [
            tp
            for tp in partitions
            if tp.topic in source_topics and tp.partition < source_topics[tp.topic].partition_count
        ]
        targets = [
            tp
            for found in partitions.values()
            for tp in found
            if tp.topic in target_topics and tp.partition < target_topics[tp.topic].partition_count
        ]
        expired = self.loader.expired_runs(
            self.source.list_offsets(sources, "earliest"),
            self.target.list_offsets(targets, "earliest"),
        )
        for sync in expired:
            # Partition 0, as the worker writes them: a tombstone must meet its key.
            key = sync.key()
            headers = [self.signer.header(key, None)] if self.signer is not None else None
            self._writer.send(self.loader.offset_syncs_topic, None, key, 0, headers)
        confirmed = self._writer.confirm(30, self.loader.offset_syncs_topic)
        confirmed.raise_unless_all(f"{self.name}: offset-sync tombstones")
        if expired:
            self.metrics.offset_sync_trimmed.labels(self.name).inc(len(expired))
            log.info(
                "trimmed offset-sync runs",
                extra={"flow": self.name, "runs": len(expired)},
            )
        return len(expired)

    def _emit(self, group: str, result: Translated, now: float) -> None:
        key = (group, result.target)
        pair = (result.source_offset, result.target_offset)
        if self._written.get(key) == pair:
            return
        checkpoint = Checkpoint(
            group,
            result.target,
            result.source_offset,
            result.target_offset,
            "",
            {
                "source_topic": result.source.topic,
                "method": result.method.value,
                "flags": sorted(flag.value for flag in result.flags),
                "rereads": result.expected_rereads,
                "unreplicated": result.unreplicated,
                "at_ms": int(now * 1000),
            },
        )
        # Remembered as written once the broker acknowledged it (_confirm_checkpoints): one
        # whose delivery failed is written again next round, not believed on the target.
        self._writer.send(
            self.topic, checkpoint.value(), checkpoint.key(), 0, checkpoint.headers(), (key, pair)
        )

    def _confirm_checkpoints(self, timeout_s: float) -> None:
        """Wait for this round's checkpoints; remember the acknowledged ones as written."""
        confirmed = self._writer.confirm(timeout_s, self.topic)
        written = [
            cast(tuple[tuple[str, TopicPartition], tuple[int, int]], token)
            for token in confirmed.acknowledged
            if token is not None
        ]
        for key, pair in written:
            self._written[key] = pair
        self.metrics.written.labels(self.name).inc(len(written))
        confirmed.raise_unless_all(f"{self.name}: checkpoints")

    def _sync_groups(self, updates: Mapping[str, GroupView | None]) -> None:
        """Move the target groups of this round's answers forward - and retry the groups an
        earlier round did not write (active on the target, or the write failed), though their
        answers did not change."""
        assert self.group_sync is not None
        retry = [
            self.views[g] for g in self.group_sync.unsynced if g in self.views and g not in updates
        ]
        for view in [*(v for v in updates.values() if v is not None), *retry]:
            translated = {
                r.target: r.target_offset
                for r in view.results.values()
                if isinstance(r, Translated)
            }
            if translated and self.group_sync.sync(view.group, translated).failed:
                self.metrics.errors.labels(self.name).inc()

    def _observe_ages(self) -> None:
        now = time.time()
        ages = [now - view.verified_at for view in self.views.values()]
        for age in ages:
            self.metrics.age.labels(self.name).observe(age)
        self.metrics.age_max.labels(self.name).set(max(ages, default=0.0))

    def close(self) -> None:
        self.commits.close()
        self.loader.close()
