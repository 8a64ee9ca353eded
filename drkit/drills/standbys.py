"""A drill's other standbys (three data centers): the recount of what each holds once it was
re-pointed onto the promoted cluster, and the checks judged on it (pure functions).

After the source is lost and the target promoted, every other standby of the source follows
the promoted cluster: the records of the source the promoted cluster holds and the standby
lacked are copied once (drkit.offsets.follow_on, docs/three-dc.md).  The recount reads both
replicas of a source partition by the ``drkit-src`` provenance every copy carries - the origin
cluster, topic, partition and offset - and counts origin offsets, not positions, so a record
copied twice is seen twice whatever its position.

The checks:

* standby_chosen: the failover promoted the scenario's target - the standby the choice was
  meant to pick (drills make the others lag so the choice is known in advance);
* standby_has_every_record: every other standby was re-pointed and holds every origin offset
  the promoted cluster holds (nothing missing);
* standby_each_once: no origin offset is on a standby twice;
* repoint_counted: what the re-point says it copied is what it planned to copy and what the
  standby's replica took after its end before the re-point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from drkit.drills.report import DrillCheck, Recounted, RepointedStandby, StandbyChosen
from drkit.offsets.provenance_search import SourcePartition, copy_offset
from drkit.records import Record, TopicPartition


def origin_offsets(records: Iterable[Record], cluster: str, origin: TopicPartition) -> list[int]:
    """The origin offset of every record that is a copy of ``origin`` on ``cluster`` (by its
    ``drkit-src``), in the records' order; records copied from elsewhere, or without a
    readable provenance, are not counted."""
    source = SourcePartition(cluster, origin)
    return [o for record in records if (o := copy_offset(record, source)) is not None]


def recount(
    cluster: str,
    origin: TopicPartition,
    promoted: Sequence[Record],
    standby: Sequence[Record],
    standby_end_before: int,
) -> Recounted:
    """``origin`` (a partition of the lost ``cluster``) on the promoted replica's records and on
    the standby replica's, the latter's end before the re-point being ``standby_end_before``
    (records at or past it were written by the re-point)."""
    held = set(origin_offsets(promoted, cluster, origin))
    copies = Counter(origin_offsets(standby, cluster, origin))
    after = [r for r in standby if r.offset >= standby_end_before]
    return Recounted(
        promoted_holds=len(held),
        standby_holds=len(copies),
        missing=len(held - set(copies)),
        duplicated=sum(count - 1 for count in copies.values()),
        only_on_standby=len(set(copies) - held),
        written_after=len(origin_offsets(after, cluster, origin)),
    )


def standby_chosen(choice: StandbyChosen, target: str) -> DrillCheck:
    """The failover promoted the scenario's ``target``, and the choice among the standbys
    picked it (a drill that moved to its target although the choice named another fails)."""
    chosen = choice.chosen or "none"
    ok = choice.chosen == target and choice.promoted == target
    moved = "" if choice.promoted == chosen else f"; the run promoted {choice.promoted}"
    return DrillCheck(
        "standby_chosen",
        ok,
        f"{choice.decision} choice: {chosen} (the scenario's target: {target}){moved} - "
        f"{choice.summary}",
    )


def has_every_record(others: Sequence[RepointedStandby]) -> DrillCheck:
    """Every other standby was re-pointed and holds every origin offset the promoted cluster
    holds."""
    bad: list[str] = []
    said: list[str] = []
    for other in others:
        if other.error is not None or other.repoint_s is None:
            bad.append(f"{other.cluster}: {other.error or 'not re-pointed'}")
            continue
        untold = [
            f"{p.topic}[{p.partition}]" for p in other.partitions if p.outcome == "cannot_tell"
        ]
        if untold:
            bad.append(f"{other.cluster}: cannot tell {', '.join(untold)}")
        missing = other.total("missing")
        if missing:
            where = ", ".join(
                f"{p.topic}[{p.partition}] {p.missing}" for p in other.partitions if p.missing
            )
            bad.append(
                f"{other.cluster}: {missing} records of the promoted cluster missing ({where})"
            )
        said.append(
            f"{other.cluster} holds {other.total('standby_holds')} records, every one of the "
            f"promoted cluster's {other.total('promoted_holds')}"
            + (
                f" and {other.total('only_on_standby')} it never had"
                if other.total("only_on_standby")
                else ""
            )
        )
    if not others:
        bad.append("no other standby in the report")
    return DrillCheck("standby_has_every_record", not bad, "; ".join(bad or said))


def each_once(others: Sequence[RepointedStandby]) -> DrillCheck:
    """No origin offset is on a standby twice (the re-point copies by origin offset)."""
    bad = [
        f"{other.cluster}: {other.total('duplicated')} duplicated ("
        + ", ".join(
            f"{p.topic}[{p.partition}] {p.duplicated}" for p in other.partitions if p.duplicated
        )
        + ")"
        for other in others
        if other.total("duplicated")
    ]
    held = ", ".join(f"{o.cluster}: {o.total('standby_holds')}" for o in others)
    return DrillCheck(
        "standby_each_once", not bad, "; ".join(bad) or f"each origin offset once ({held})"
    )


def repoint_counted(others: Sequence[RepointedStandby]) -> DrillCheck:
    """Per partition that followed: copied = planned to copy = records the standby took past
    its end before the re-point; a partition that did not follow took none."""
    bad: list[str] = []
    for other in others:
        for p in other.partitions:
            where = f"{other.cluster} {p.topic}[{p.partition}]"
            if p.outcome == "follow":
                if not p.copied == p.to_copy == p.written_after:
                    bad.append(
                        f"{where}: copied {p.copied}, planned {p.to_copy}, written "
                        f"{p.written_after}"
                    )
            elif p.written_after:
                bad.append(f"{where}: {p.outcome}, yet {p.written_after} written")
    total = ", ".join(f"{o.cluster}: {o.total('copied')} copied" for o in others)
    return DrillCheck("repoint_counted", not bad, "; ".join(bad) or total)


def standby_checks(
    choice: StandbyChosen, target: str, others: Sequence[RepointedStandby]
) -> list[DrillCheck]:
    """Every check of a drill with other standbys, in report order."""
    return [
        standby_chosen(choice, target),
        has_every_record(others),
        each_once(others),
        repoint_counted(others),
    ]
