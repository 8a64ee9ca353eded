"""Where a checkpoint round gets the source's committed offsets from.

Three sources, chosen per flow by ``checkpoint_commits_from`` (drkit.config.model.CommitSource):

* :class:`AdminCommits`: every round lists the groups and reads every group's offsets through
  the admin API - a full pass, ~1.9 s at 10,000 groups x 50 partitions here
  (bench/RESULTS.md) - and names the groups whose offsets differ from the pass before;
* :class:`CommitFollower`: one admin pass at the start, then only the commits logged on the
  source's ``__consumer_offsets`` since (drkit.offsets.commit_log) - a round reads what changed
  and names the groups that moved.  Needs READ and DESCRIBE on that topic;
* :class:`AutoCommits` (the default): the follower while the source lets this principal read
  its log and every record there decodes, the admin API otherwise - a least-privilege
  principal gets correct checkpoints without the extra grant, a trusted one fresh ones at
  thousands of groups.  It tries the log again every :data:`LOG_RETRY_S`.

Starting without a gap: the follower first captures the end of every ``__consumer_offsets``
partition (the last stable offset: a transaction's offset commits written before it and
committed after must not be skipped), then takes the admin snapshot, then applies the log from
the captured ends.  Commits between the capture and the snapshot are applied twice - the
snapshot then the log, in log order - and end as their last record says.

Every switch of source (a follower's start, a fall-back to the admin API, a return to the log)
begins with a read that names every group (``changed`` None): a round never judges one
source's answers by another's "what moved".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass

from drkit.errors import CommitLogUnreadable, FatalKafkaError
from drkit.kafka.ports import ClusterAdmin, read_group_offsets
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.commit_log import CommittedOffsets, OffsetCommit, decode
from drkit.records import Record, TopicPartition
from drkit.topology.internal_topics import OFFSETS_TOPIC

log = logging.getLogger(__name__)

# How long AutoCommits reads through the admin API before it tries the log again (an ACL
# granted meanwhile, or a drkit that learnt a new record format, is picked up by then).
LOG_RETRY_S = 600.0

# A follower whose last read is older than this starts again from a snapshot.  The log's
# tombstones (a group deleted, its offsets expired) are compacted away after the broker's
# delete.retention.ms - a day by default - and a follower frozen (SIGSTOP, a suspended host)
# or failing for that long would never see them: it would keep a group that no longer exists.
# Judged by the wall clock, which - unlike the monotonic one - goes on while a host sleeps, as
# the broker's retention does; a clock that jumps ahead only costs one more snapshot.
STALE_AFTER_S = 3600.0


@dataclass(frozen=True)
class CommitsRead:
    """The source's committed offsets as one round sees them.

    ``changed`` is None when every group must be looked at (the admin API's full pass, a
    follower's first read or a round after a failed one); otherwise the groups whose commits
    moved since the previous read - a group in it may have no commits left.  ``on(tp)`` names
    the groups with a commit on ``tp``.
    """

    committed: Mapping[str, Mapping[TopicPartition, int]]
    partitions: Set[TopicPartition]
    changed: Set[str] | None
    on: Callable[[TopicPartition], Set[str]]


def compared_read(
    committed: Mapping[str, Mapping[TopicPartition, int]],
    before: Mapping[str, Mapping[TopicPartition, int]] | None,
) -> CommitsRead:
    """A full pass's read, naming the groups whose commits differ from the pass ``before`` it
    (pure; every group when there is none to compare with).

    A group is changed when its offsets differ from the earlier pass's in any partition, or it
    is new, or it is gone (then it has no commits here).  Comparing a group's offsets is one
    dict comparison in C; translating them again checked each offset in Python (~3.5 us each,
    1.7 s a round at 10,000 groups x 50 partitions).  ``on(tp)`` indexes the groups by
    partition the first time it is asked (a round asks only for partitions whose offset map did
    more than grow).
    """
    partitions: set[TopicPartition] = set().union(*(o.keys() for o in committed.values()))
    changed: set[str] | None = None
    if before is not None:
        changed = {g for g, offsets in committed.items() if before.get(g) != offsets}
        changed.update(g for g in before if g not in committed)
    index: dict[TopicPartition, set[str]] = {}

    def on(tp: TopicPartition) -> Set[str]:
        if not index and partitions:
            for group, offsets in committed.items():
                for key in offsets:
                    index.setdefault(key, set()).add(group)
        return index.get(tp, set())

    return CommitsRead(committed, partitions, changed, on)


class AdminCommits:
    """Every followed group's offsets through the admin API, every round; a round is told
    which groups' offsets differ from the read before it (:func:`compared_read`).

    The groups of the previous read are asked as well as those listed: a listing right after
    the source's broker started names none, and a round would have dropped every group's
    answers (drkit.kafka.ports.read_group_offsets)."""

    using = "admin_api"

    def __init__(self, source: ClusterAdmin, follows: Callable[[str], bool]) -> None:
        self.source = source
        self.follows = follows
        self._known: list[str] = []
        # The previous read; None when the next one must name every group.
        self._before: dict[str, Mapping[TopicPartition, int]] | None = None

    def read(self, timeout_s: float | None = None) -> CommitsRead:
        answers = read_group_offsets(self.source, self._known, self.follows, timeout_s)
        committed = {group: offsets.offsets for group, offsets in answers.items()}
        read = compared_read(committed, self._before)
        self._known, self._before = list(committed), committed
        return read

    def restart(self) -> None:
        """The next read names every group: the round that used the last one did not finish."""
        self._before = None

    def forget(self) -> None:
        """Drop the groups known from earlier reads."""
        self._known, self._before = [], None

    def close(self) -> None:
        pass


class CommitFollower:
    """Committed offsets from one admin pass, then from ``__consumer_offsets`` only.

    The admin pass asks the groups ``known()`` names (the flow's checkpoints) as well as those
    listed: a follower that started right after the source's broker, whose listing named no
    group, would otherwise follow an idle group only once it committed again
    (drkit.kafka.ports.read_group_offsets)."""

    using = "offsets_topic"

    def __init__(
        self,
        source: ClusterAdmin,
        follows: Callable[[str], bool],
        known: Callable[[], Iterable[str]] = tuple,
        *,
        stale_after_s: float = STALE_AFTER_S,
        clock: Callable[[], float] = time.time,
        tailer: Callable[[Mapping[int, int]], TopicTailer] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """``tailer``: how the log is read from given positions per partition (a TopicTailer
        of the source's ``__consumer_offsets`` by default; tests put a fault in its way);
        ``stop``: the owner's stop event - the default tailer's read under way gives up
        (``Stopped``) when it is set, as ``source``'s requests do."""
        self.source = source
        self.stop = stop
        self.follows = follows
        self.known = known
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._tailer_at = tailer or self._log_tailer
        self.state = CommittedOffsets(follows)
        self._tailer: TopicTailer | None = None
        self._full = True
        # When the last read that reached the log's end began (the start's snapshot counts).
        self._read_at: float | None = None

    def read(self, timeout_s: float = 30.0) -> CommitsRead:
        """The offsets as of now: the log applied to its end (its last stable offsets).

        Raises :class:`CommitLogUnreadable` when the log cannot be followed, having forgotten
        what it followed: the next read starts again from a snapshot."""
        now = self.clock()
        if self._read_at is not None and now - self._read_at > self.stale_after_s:
            log.info(
                "the source's log was last read to its end too long ago: following it again "
                "from a fresh snapshot",
                extra={"cluster": self.source.endpoint.alias, "ago_s": round(now - self._read_at)},
            )
            self.forget()
        try:
            if self._tailer is None:
                self._start(timeout_s)
                self._read_at = now
            assert self._tailer is not None
            self.state.apply(_commits(self._tailer.catch_up(timeout_s), self.source.endpoint.alias))
        except CommitLogUnreadable:
            # The record it stopped at is behind the tailer now: reading on would skip it - a
            # commit never applied.  The next read starts again from a snapshot.
            self.forget()
            raise
        except FatalKafkaError as err:
            if "AUTHORIZATION" not in str(err).upper():
                raise
            self.forget()
            raise CommitLogUnreadable(
                f"{err} - following commits needs READ and DESCRIBE on {OFFSETS_TOPIC}"
            ) from None
        self._read_at = now
        changed: Set[str] | None = self.state.take_changed()
        if self._full:
            changed, self._full = None, False
        return CommitsRead(self.state.by_group, self.state.partitions(), changed, self.state.on)

    def restart(self) -> None:
        """The next read names every group: the round that used the last one did not finish."""
        self._full = True

    def forget(self) -> None:
        """Drop what was followed: the next read starts again from an admin snapshot (a
        checkpoint worker that stood by for a while must not resume from an old position -
        the log may have dropped the tombstones of groups deleted meanwhile)."""
        if self._tailer is not None:
            self._tailer.close()
            self._tailer = None
        self.state = CommittedOffsets(self.follows)
        self._full = True
        self._read_at = None

    def _start(self, timeout_s: float) -> None:
        topics = self.source.list_topics(timeout_s, include_internal=True)
        found = topics.get(OFFSETS_TOPIC)
        parts = (
            [TopicPartition(OFFSETS_TOPIC, p.partition) for p in found.partitions] if found else []
        )
        ends = self.source.list_offsets(parts, "latest", timeout_s, isolation="read_committed")
        tailer = self._tailer_at({tp.partition: offset for tp, offset in ends.items()})
        try:
            # The log from the captured ends is read once before the admin pass - a principal
            # that may not read it learns so here, not after a full read of every group - and
            # applied after it, as every later record is.
            early = list(_commits(tailer.catch_up(timeout_s), self.source.endpoint.alias))
            self.state.load(self._snapshot(timeout_s))
            self.state.apply(early)
        except BaseException:
            tailer.close()
            raise
        self._tailer = tailer
        log.info(
            "following committed offsets on the source's log",
            extra={"cluster": self.source.endpoint.alias, "groups": len(self.state.by_group)},
        )

    def _log_tailer(self, start: Mapping[int, int]) -> TopicTailer:
        return TopicTailer(
            self.source.endpoint, OFFSETS_TOPIC, missing_ok=True, start=start, stop=self.stop
        )

    def _snapshot(self, timeout_s: float) -> dict[str, Mapping[TopicPartition, int]]:
        """The admin pass: the offsets of the followed groups listed or known."""
        answers = read_group_offsets(self.source, self.known(), self.follows, timeout_s)
        return {group: offsets.offsets for group, offsets in answers.items()}

    def close(self) -> None:
        if self._tailer is not None:
            self._tailer.close()


class AutoCommits:
    """The log while it can be followed, the admin API otherwise (``checkpoint_commits_from:
    auto``).

    A read that finds the log unreadable (:class:`drkit.errors.CommitLogUnreadable`: not
    authorized, or a record that does not decode) is answered through the admin API in the
    same round - no round fails for it - and the log is tried again after ``retry_s``.  Any
    other error (the source down, a timeout) fails the round as with either source alone.
    ``using`` names the source of the last read (``offsets_topic`` or ``admin_api``) and
    ``why`` the reason the log is not used, for the metrics and the logs.
    """

    def __init__(
        self,
        follower: CommitFollower,
        admin: AdminCommits,
        cluster: str,
        *,
        retry_s: float = LOG_RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.follower, self.admin, self.cluster = follower, admin, cluster
        self.retry_s = retry_s
        self.clock = clock
        self.why: str | None = None  # why the log is not followed; None while it is
        self._log_again_at = 0.0

    @property
    def using(self) -> str:
        return "offsets_topic" if self.why is None else "admin_api"

    def read(self, timeout_s: float = 30.0) -> CommitsRead:
        if self.why is not None and self.clock() >= self._log_again_at:
            self.why = None  # try the log again; the follower starts with a full read
        if self.why is None:
            try:
                return self.follower.read(timeout_s)
            except CommitLogUnreadable as err:
                self._fall_back(str(err))
        return self.admin.read(timeout_s)

    def _fall_back(self, why: str) -> None:
        self.why = why  # the follower has forgotten what it followed: a return starts afresh
        self._log_again_at = self.clock() + self.retry_s
        self.admin.restart()  # the first admin read names every group
        log.warning(
            "cannot follow commits on the source's log: reading every group's offsets "
            "through the admin API instead",
            extra={
                "cluster": self.cluster,
                "reason": why,
                "retry_in_s": self.retry_s,
            },
        )

    def restart(self) -> None:
        self.follower.restart()
        self.admin.restart()

    def forget(self) -> None:
        self.follower.forget()
        self.admin.forget()

    def close(self) -> None:
        self.follower.close()
        self.admin.close()


def _commits(records: Iterable[Record], cluster: str) -> Iterable[OffsetCommit]:
    for record in records:
        try:
            commit = decode(record.key, record.value)
        except ValueError as err:
            raise CommitLogUnreadable(
                f"{cluster}: {OFFSETS_TOPIC}-{record.partition} at offset {record.offset}: "
                f"{err}; set checkpoint_commits_from: admin_api (or auto) to read commits "
                "another way"
            ) from None
        if commit is not None:
            yield commit
