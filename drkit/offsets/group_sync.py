"""Write translated offsets into consumer groups on the target (optional, continuous).

Rules (``decide_group_sync`` is the pure part):

* only into groups that are EMPTY or absent on the target - an active group owns its offsets;
* only forward: a partition whose target commit is already at or past T is left alone;
* emptiness is re-checked right before writing (the broker also refuses commits for groups with
  members, which closes the remaining race);
* idempotent: writing the same offsets twice changes nothing;
* a group not written (active, or its write failed) is tried again by every later round until
  it is (:attr:`GroupOffsetSync.unsynced`), though its answers do not change meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Mapping
from dataclasses import dataclass

from drkit.errors import KafkaError
from drkit.kafka.ports import ClusterAdmin
from drkit.records import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupSyncDecision:
    group: str
    write: Mapping[TopicPartition, int]
    skipped_active: bool = False
    failed: str | None = None  # why the write failed (nothing was written)


def decide_group_sync(
    group: str,
    translated: Mapping[TopicPartition, int],
    target_committed: Mapping[TopicPartition, int],
    target_group_empty: bool,
) -> GroupSyncDecision:
    """Which target offsets to write for ``group`` (pure)."""
    if not target_group_empty:
        return GroupSyncDecision(group, {}, skipped_active=True)
    forward = {
        tp: offset for tp, offset in translated.items() if offset > target_committed.get(tp, -1)
    }
    return GroupSyncDecision(group, forward)


class GroupOffsetSync:
    """Applies :func:`decide_group_sync` against the target cluster."""

    def __init__(self, target: ClusterAdmin) -> None:
        self.target = target
        self.active_skips: set[str] = set()
        self.failed: set[str] = set()

    @property
    def unsynced(self) -> set[str]:
        """The groups whose last sync wrote nothing it should have: to try again."""
        return self.active_skips | self.failed

    def retain(self, groups: Container[str]) -> None:
        """Retry only the unsynced groups among ``groups`` (the others are gone from the source:
        nothing left to sync)."""
        self.active_skips = {g for g in self.active_skips if g in groups}
        self.failed = {g for g in self.failed if g in groups}

    def sync(self, group: str, translated: Mapping[TopicPartition, int]) -> GroupSyncDecision:
        """Write what :func:`decide_group_sync` decides; a refused or failed write is reported
        in the decision (never raised) and leaves ``group`` in :attr:`unsynced`.  Errors
        reading the target's group state are raised: the caller's round fails as a whole."""
        self.failed.discard(group)
        states = self.target.describe_groups([group])
        state = states.get(group)
        empty = state is None or state.is_empty
        committed = self.target.group_offsets(group).offsets if empty else {}
        decision = decide_group_sync(group, translated, committed, empty)
        if decision.skipped_active:
            if group not in self.active_skips:
                log.warning(
                    "not syncing offsets of a group active on the target", extra={"group": group}
                )
            self.active_skips.add(group)
            return decision
        self.active_skips.discard(group)
        if not decision.write:
            return decision
        recheck = self.target.describe_groups([group]).get(group)
        if recheck is not None and not recheck.is_empty:
            self.active_skips.add(group)
            return GroupSyncDecision(group, {}, skipped_active=True)
        try:
            self.target.alter_group_offsets(group, decision.write)
        except KafkaError as err:
            # The broker refuses commits for a group that gained members meanwhile; a timeout
            # or a coordinator still loading fails the same way.  Either way: try again later.
            log.warning("group offset sync refused", extra={"group": group, "error": str(err)})
            self.failed.add(group)
            return GroupSyncDecision(group, {}, failed=str(err))
        return decision
