"""Committed offsets as the group coordinator logs them on ``__consumer_offsets`` (pure).

Every offset commit - a consumer's, a transactional producer's once its transaction commits, an
admin's ``alterConsumerGroupOffsets`` - is a record on the source's ``__consumer_offsets`` topic
(the same log Burrow follows):

* key ``int16 version`` 0 or 1: an offset commit; then ``group`` (int16 length + UTF-8),
  ``topic`` (same) and ``partition`` (int32);
* value ``int16 version`` then the committed ``offset`` (int64) first in every version (0-4; the
  later fields - leader epoch, metadata, timestamps - are not needed here); a null value is a
  tombstone: the commit was deleted (offsets expired, the group or its offsets deleted);
* every other key version is group metadata (classic group metadata, KIP-848 consumer and
  share group records): not an offset, skipped.

:class:`CommittedOffsets` keeps the latest commit of every followed group as such records are
applied in log order, and which groups changed since the changes were last taken - so a
checkpoint round translates only the groups that moved instead of reading every group's
offsets through the admin API.  Applying a record twice, or a record older than a snapshot
taken after it, converges on the same state once the log is applied to its end (the last
record of a key wins): that is how a follower starts from an admin snapshot without a gap
(drkit.offsets.commit_follower).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from drkit.records import TopicPartition

_OFFSET_COMMIT_KEYS = (0, 1)
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hq")


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One logged commit; ``offset`` None when the commit was deleted (a tombstone)."""

    group: str
    partition: TopicPartition
    offset: int | None


def decode(key: bytes | None, value: bytes | None) -> OffsetCommit | None:
    """The offset commit a ``__consumer_offsets`` record carries; None for group metadata.

    Raises ValueError naming what is malformed when a record with an offset-commit key cannot
    be read (never seen from a broker; a wrong number would be worse than a failed round).
    """
    if key is None or len(key) < 2:
        raise ValueError("a record without a key version")
    (version,) = _INT16.unpack_from(key, 0)
    if version not in _OFFSET_COMMIT_KEYS:
        return None
    try:
        group, at = _string(key, 2)
        topic, at = _string(key, at)
        (partition,) = _INT32.unpack_from(key, at)
    except (struct.error, UnicodeDecodeError) as err:
        raise ValueError(f"a malformed offset-commit key ({err})") from None
    if value is None:
        return OffsetCommit(group, TopicPartition(topic, partition), None)
    try:
        _, offset = _VALUE_HEAD.unpack_from(value, 0)
    except struct.error:
        raise ValueError(
            f"a malformed offset-commit value of group {group} on {topic}-{partition}"
        ) from None
    return OffsetCommit(group, TopicPartition(topic, partition), offset)


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, at)
    start = at + 2
    if length < 0 or start + length > len(data):
        raise struct.error(f"a string of {length} bytes at {at} in a {len(data)}-byte key")
    return data[start : start + length].decode(), start + length


class CommittedOffsets:
    """The latest committed offset of every followed group, and the groups changed since taken.

    Invariants: ``by_group[g]`` holds exactly g's live commits (a deleted or negative one is
    absent; a group with none is absent); ``on(tp)`` is the set of groups with a commit on
    ``tp``; a group whose commits changed - or were replaced by :meth:`load` - is in the changed
    set until :meth:`take_changed`.  Not thread-safe.
    """

    def __init__(self, follows: Callable[[str], bool]) -> None:
        self.follows = follows
        self.by_group: dict[str, dict[TopicPartition, int]] = {}
        self._on: dict[TopicPartition, set[str]] = {}
        self._changed: set[str] = set()
        self._interned: dict[TopicPartition, TopicPartition] = {}

    def load(self, snapshot: Mapping[str, Mapping[TopicPartition, int]]) -> None:
        """Replace the groups in ``snapshot`` with its offsets (an admin read's answer)."""
        for group, offsets in snapshot.items():
            if not self.follows(group):
                continue
            for tp in list(self.by_group.get(group, ())):
                self._set(group, tp, None)
            for tp, offset in offsets.items():
                self._set(group, tp, offset)

    def apply(self, commits: Iterable[OffsetCommit]) -> None:
        """Apply logged commits in log order (a key's last record wins)."""
        for commit in commits:
            if self.follows(commit.group):
                self._set(commit.group, commit.partition, commit.offset)

    def on(self, tp: TopicPartition) -> set[str]:
        """The groups with a commit on ``tp`` (a live view: do not change it)."""
        return self._on.get(tp, set())

    def partitions(self) -> set[TopicPartition]:
        """Every partition some followed group committed on."""
        return set(self._on)

    def take_changed(self) -> set[str]:
        """The groups whose commits changed since the last call (some may have none left)."""
        changed, self._changed = self._changed, set()
        return changed

    def _set(self, group: str, tp: TopicPartition, offset: int | None) -> None:
        tp = self._interned.setdefault(tp, tp)  # 500,000 commits name a few hundred partitions
        offsets = self.by_group.get(group)
        live = offset is not None and offset >= 0
        held = offsets.get(tp) if offsets is not None else None
        if held == (offset if live else None):
            return
        self._changed.add(group)
        if live:
            assert offset is not None
            if offsets is None:
                offsets = self.by_group[group] = {}
            offsets[tp] = offset
            self._on.setdefault(tp, set()).add(group)
            return
        assert offsets is not None  # held was not None
        del offsets[tp]
        if not offsets:
            del self.by_group[group]
        groups = self._on[tp]
        groups.discard(group)
        if not groups:
            del self._on[tp]
