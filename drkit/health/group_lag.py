"""Burrow-style consumer-group lag status (pure).

Input: for one group partition, a window of samples (time, committed offset, log end offset),
oldest first.  Rules, in Burrow's order:

* OK     - the lag was zero at some point in the window, or the group is making progress;
* STOP   - the last commit is older than the window span: the consumer stopped committing;
* REWIND - the committed offset went backwards;
* STALL  - the committed offset did not move while there was lag;
* WARN   - the offset moves but the lag grew across the whole window (falling behind).

A group's status is its worst partition's status (STOP > STALL > REWIND > WARN > OK).  A
sample's lag, and a row's of ``drkit groups lag``, is drkit.lag's rule (``group_lag``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from drkit.lag import group_lag


class LagStatus(StrEnum):
    OK = "OK"
    WARN = "WARN"
    REWIND = "REWIND"
    STALL = "STALL"
    STOP = "STOP"


_SEVERITY = {
    LagStatus.OK: 0,
    LagStatus.WARN: 1,
    LagStatus.REWIND: 2,
    LagStatus.STALL: 3,
    LagStatus.STOP: 4,
}


@dataclass(frozen=True)
class LagSample:
    at: float
    committed: int
    end: int
    commit_at: float | None = None  # when the committed offset last changed, if known

    @property
    def lag(self) -> int:
        return group_lag(self.committed, self.end)


def partition_status(samples: Sequence[LagSample], now: float) -> LagStatus:
    if not samples:
        return LagStatus.OK
    if any(s.lag == 0 for s in samples):
        return LagStatus.OK
    span = samples[-1].at - samples[0].at
    last_commit = samples[-1].commit_at
    if last_commit is not None and span > 0 and now - last_commit > span:
        return LagStatus.STOP
    offsets = [s.committed for s in samples]
    if any(b < a for a, b in itertools.pairwise(offsets)):
        return LagStatus.REWIND
    if len(samples) > 1 and offsets[0] == offsets[-1]:
        return LagStatus.STALL
    lags = [s.lag for s in samples]
    if len(lags) > 2 and all(b > a for a, b in itertools.pairwise(lags)):
        return LagStatus.WARN
    return LagStatus.OK


def group_status(statuses: Iterable[LagStatus]) -> LagStatus:
    return max(statuses, key=lambda s: _SEVERITY[s], default=LagStatus.OK)


@dataclass(frozen=True)
class GroupPartitionLag:
    """One row of ``drkit groups lag`` (``kafka-consumer-groups --describe``'s view)."""

    group: str
    state: str  # the coordinator's: Stable, Empty, PreparingRebalance, ...
    members: int
    topic: str
    partition: int
    committed: int
    end: int | None  # the last stable offset (what read_committed consumers reach); None: unknown
    # end - committed, in offsets: an upper bound on records (markers and aborted records take
    # offsets too); None when the end is unknown - never a made-up 0.
    lag_offsets: int | None

    def to_json(self) -> dict[str, object]:
        return {
            "group": self.group, "state": self.state, "members": self.members,
            "topic": self.topic, "partition": self.partition, "committed": self.committed,
            "end": self.end, "lag_offsets": self.lag_offsets,
        }  # fmt: skip


def lag_rows(
    committed: Mapping[str, Mapping[tuple[str, int], int]],
    ends: Mapping[tuple[str, int], int],
    states: Mapping[str, tuple[str, int]],
) -> list[GroupPartitionLag]:
    """Per group and partition with a commit: committed, end and lag; sorted by group, topic,
    partition.  ``states``: group -> (state, members)."""
    rows = []
    for group in sorted(committed):
        state, members = states.get(group, ("Unknown", 0))
        for (topic, partition), offset in sorted(committed[group].items()):
            end = ends.get((topic, partition))
            rows.append(
                GroupPartitionLag(
                    group, state, members, topic, partition, offset, end, group_lag(offset, end)
                )
            )
    return rows


# How many groups a person-facing listing (drkit status, the status page) shows per flow.
LISTED_GROUPS = 20
_UNKNOWN = "unknown"  # a group with checkpoints the monitor has not judged yet


@dataclass(frozen=True)
class GroupListing:
    """A flow's groups as a person reads them: counts per lag status, then the groups to show
    - all of them up to ``LISTED_GROUPS``, else the worst first - and how many are left out."""

    total: int
    counts: Mapping[str, int]  # lag status (or "unknown") -> groups
    shown: tuple[str, ...]

    @property
    def left_out(self) -> int:
        return self.total - len(self.shown)


def group_listing(lag: Mapping[str, str], others: Iterable[str] = ()) -> GroupListing:
    """``lag``: group -> Burrow status; ``others``: groups known without one (unknown).  Beyond
    ``LISTED_GROUPS`` the worst come first: STOP, STALL, REWIND, WARN, unknown, OK, then by
    name."""
    names = sorted(set(lag) | set(others))
    statuses = [lag.get(name, _UNKNOWN) for name in names]
    counts = dict(sorted(Counter(statuses).items()))
    if len(names) <= LISTED_GROUPS:
        return GroupListing(len(names), counts, tuple(names))
    worst = sorted(names, key=lambda name: (_display_rank(lag.get(name, _UNKNOWN)), name))
    return GroupListing(len(names), counts, tuple(worst[:LISTED_GROUPS]))


# Worst first: stopped, stalled, rewinding, falling behind, not judged yet, fine.
_DISPLAY_ORDER = (
    LagStatus.STOP.value,
    LagStatus.STALL.value,
    LagStatus.REWIND.value,
    LagStatus.WARN.value,
    _UNKNOWN,
    LagStatus.OK.value,
)


def _display_rank(status: str) -> int:
    """0 for the worst; a status this version does not know ranks before all (-1)."""
    return _DISPLAY_ORDER.index(status) if status in _DISPLAY_ORDER else -1
