"""``offsets translate --verify``: is T exactly where a consumer at S would go on? (pure)

A translation (S on the source, T on the target) is right when the first record a consumer at T
reads on the target is the copy of the first record a consumer at S would read on the source and
the flow replicates.  The edges read both records (read_committed on both sides, records the
flow leaves out on purpose - filtered, or loops - skipped on the source); :func:`verify` decides.

Checking "the record at T comes from S or later" is not enough: it passes a T that skips
records.  Here a T whose record is a later copy than expected is :attr:`PositionVerdict.SKIPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from drkit.records import Record
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, is_loop
from drkit.topology.transforms import OutRecord, TransformChain


class PositionVerdict(StrEnum):
    MATCH = "match"  # the record at T is the copy of the record a consumer at S reads next
    SKIPS = "skips"  # the record at T is a later copy: a consumer at T skips records
    REREADS = "rereads"  # the record at T is an earlier copy (or the source has nothing left)
    FOREIGN = "foreign"  # the record at T is not a copy of this source partition
    UNVERIFIABLE = "unverifiable"  # the inputs cannot decide (see verify)


@dataclass(frozen=True)
class AtTarget:
    """The first record a consumer at T reads: its offset and what it is a copy of."""

    offset: int
    copy_of: int | None  # source offset from drkit-src, None when not a copy of this partition


def verify(
    expected: int | None,
    at_target: AtTarget | None,
    replicated_end: int | None,
) -> PositionVerdict:
    """Compare the first records after S (source) and after T (target).

    ``expected`` is the source offset of the first record at ``>= S`` the flow replicates, None
    when the source has none (up to its end); ``at_target`` the first record at ``>= T``, None
    when the target has none; ``replicated_end`` the flow's progress (first source offset not
    yet on the target), None when unknown.  An expected record the flow has not replicated yet
    has no copy to find: reading nothing at T is then right.
    """
    if at_target is None:
        if expected is None:
            return PositionVerdict.MATCH
        if replicated_end is None:
            return PositionVerdict.UNVERIFIABLE
        return PositionVerdict.MATCH if expected >= replicated_end else PositionVerdict.SKIPS
    if at_target.copy_of is None:
        return PositionVerdict.FOREIGN
    if expected is None or at_target.copy_of < expected:
        return PositionVerdict.REREADS
    return PositionVerdict.MATCH if at_target.copy_of == expected else PositionVerdict.SKIPS


def replicated_by(
    chain: TransformChain, source_cluster_id: str, target_cluster_id: str
) -> Callable[[Record], bool]:
    """Whether the flow replicates a source record: not a loop, not dropped by a transform.

    The same decisions the worker takes (drkit/replication/provenance.py ``is_loop``, then the
    transform chain); a transform that raises stops the flow there, so it counts as replicated
    (the record is where the flow stands).
    """

    def replicated(record: Record) -> bool:
        if is_loop(
            record.header(ORIGIN_HEADER),
            source_cluster_id,
            record.topic,
            target_cluster_id,
            record.header(SOURCE_HEADER),
        ):
            return False
        if not chain.steps:
            return True
        # The worker hands the chain the headers without the source's own drkit-src.
        headers = tuple((k, v) for k, v in record.headers if k != SOURCE_HEADER)
        try:
            return chain.apply(OutRecord(record.key, record.value, headers)) is not None
        except Exception:  # a plugin that fails stops the flow at this record
            return True

    return replicated
