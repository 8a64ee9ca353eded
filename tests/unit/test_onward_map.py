"""The onward map (issue 48 item 1; drkit/repoint.py ``onward``, drkit/offsets/follow_on.py):
after dc3 followed dc2, a group that consumed dc2's ``dc1.orders`` moves onto dc3's by ordinary
translation over the offset syncs of the flow dc2->dc3 the re-point wrote (dc2 position -> dc3
position).  Over in-memory replicas, for every position ``S`` a group can be committed at on
dc2: it resumes on dc3 past no record it did not read (nothing skipped), and re-reads nothing
where it stands past every copy of what it read - in the shared range, at X, in the copied
range, past dc2's duplicates - and never more than it would re-read staying on dc2.  Holes,
idempotence (a second run writes no record) and a run killed at each of its writes and run
again (the same map) are checked too."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from drkit.errors import KafkaError
from drkit.offsets.follow_on import Copied, Onward, follow_all
from drkit.offsets.provenance_search import copy_offset
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.progress import decode_progress
from drkit.replication.run_map import merge_runs
from drkit.repoint import unplaced
from drkit.signing import Kind, Signer
from drkit.translation import PartitionMapping, TargetBounds, Translated, translate
from tests.unit.test_follow_on import (
    DC1,
    DC2_RUNS,
    DC3_RUNS,
    ONWARD_PROGRESS,
    ONWARD_SYNCS,
    ORIGIN,
    REPLICA,
    SIGNER,
    SYNCS,
    Log,
    Standby,
    _copy,
    _dc2,
    _dc3_holding,
    _report,
)

ONWARD_SIGNER = Signer(bytes(range(32, 64)), Kind.OFFSET_SYNC, "dc2->dc3")


def _onward(dc3: Standby) -> Onward:
    """The flow dc2->dc3's side, with what its syncs and progress on dc3 already hold."""
    mapping = _onward_mapping(dc3)
    known = {REPLICA: mapping} if mapping is not None else {}
    return Onward("dc3", ONWARD_SYNCS, ONWARD_PROGRESS, ONWARD_SIGNER, known)


def _onward_mapping(dc3: Standby) -> PartitionMapping | None:
    """dc2->dc3's verified map of dc2's replica as the mapping loader builds it: the merged
    syncs and the progress (None: none written)."""
    syncs = []
    for record in dc3.logs[ONWARD_SYNCS].visible():
        assert ONWARD_SIGNER.accepts(record.key, record.value, record.headers), record
        assert record.key is not None and record.value is not None
        syncs.append(OffsetSync.decode(record.key, record.value))
    progress = None
    for record in dc3.logs[ONWARD_PROGRESS].visible():
        assert record.key is not None
        decoded = decode_progress(record.key, record.value)
        assert decoded is not None and decoded[0] == "dc3"
        progress = decoded[1].next_offset
    if not syncs and progress is None:
        return None
    merged = merge_runs(syncs).get(REPLICA, [])
    return PartitionMapping(REPLICA, REPLICA, [s.run for s in merged], replicated_end=progress)


def _follow(
    dc2: Log,
    dc3: Standby,
    dc3_runs: Sequence[OffsetRun] = DC3_RUNS,
    dc2_runs: Sequence[OffsetRun] = DC2_RUNS,
) -> Copied:
    """One `drkit flows repoint` run with the flow dc2->dc3 configured."""
    report = _report(dc2, list(dc2_runs), dc3, list(dc3_runs))
    return follow_all(report, dc2, dc3, SYNCS, SIGNER, batch=4, onward=_onward(dc3))[ORIGIN]


def _origins(log: Log) -> list[int | None]:
    return [copy_offset(r, DC1) if r is not None else None for r in log.entries]


def _moves(dc2: Log, dc3: Standby) -> dict[int, tuple[int, int, int]]:
    """For every dc2 position S a group can be committed at: (T on dc3, records it skips,
    records it reads again there) - and checks it re-reads at most what staying on dc2 would.
    Skipped: dc3 records below T of an origin offset the group did not read on dc2."""
    mapping = _onward_mapping(dc3)
    assert mapping is not None
    on_dc2 = _origins(dc2)
    on_dc3 = _origins(dc3.logs[REPLICA.topic])
    bounds = TargetBounds(0, len(on_dc3))
    out: dict[int, tuple[int, int, int]] = {}
    for s in range(len(on_dc2) + 1):
        result = translate(s, mapping, bounds, source_end=len(on_dc2))
        assert isinstance(result, Translated), (s, result)
        t = result.target_offset
        read = {o for o in on_dc2[:s] if o is not None}
        skipped = sum(1 for o in on_dc3[:t] if o is not None and o not in read)
        again = {o for o in on_dc3[t:] if o is not None and o in read}
        staying = {o for o in on_dc2[s:] if o is not None and o in read}
        assert again <= staying, (s, t, again, staying)
        assert result.unreplicated in (0, None), (s, result)
        out[s] = (t, skipped, len(again))
    return out


def _past_every_copy(dc2: Log, s: int) -> bool:
    """Whether a group committed at ``s`` read every copy on dc2 of each origin offset it read
    (it stands past the duplicates, not between a first copy and a re-copy)."""
    origins = _origins(dc2)
    read = {o for o in origins[:s] if o is not None}
    return not any(o in read for o in origins[s:])


def test_groups_on_dc2_move_to_dc3_skipping_nothing_and_past_duplicates_exactly() -> None:
    # dc2: origin 0..11 at 0..11, a dc1->dc2 restart re-copied 8..15 at 12..19, another
    # partition's copy at 20, 16..17 at 21..22; dc3 holds 0..5: F = X = 6.
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    copied = _follow(dc2, dc3)
    assert (copied.start, copied.frontier, copied.copied) == (6, 6, 12)
    moves = _moves(dc2, dc3)
    assert all(skipped == 0 for _t, skipped, _again in moves.values())
    for s, (_t, _skipped, again) in moves.items():
        if _past_every_copy(dc2, s):
            assert again == 0, (s, moves[s])
    on_dc3 = _origins(dc3.logs[REPLICA.topic])
    assert moves[3][0] == on_dc3.index(3)  # the shared range: exact
    assert moves[6][0] == on_dc3.index(6)  # at X: the first copied record
    assert moves[7][0] == on_dc3.index(7)  # the copied range: exact
    assert moves[16][0] == on_dc3.index(12)  # past the duplicates of 8..11: exact
    assert moves[20][:2] == (on_dc3.index(16), 0)  # past another partition's copy
    assert moves[23] == (len(on_dc3), 0, 0)  # at dc2's end: dc3's end
    assert copied.onward == 23 - 1 - 4  # every dc2 position but the other partition's, dups


def test_holes_only_dc2_holds_are_passed_over() -> None:
    # dc1->dc3 filtered origin 3: dc3 holds 0, 1, 2, 4, 5 (F = 6); dc2 holds 0..11 in order.
    dc2 = Log([_copy(p, o) for p, o in enumerate(range(12))])
    dc3 = Standby(_dc3_holding([0, 1, 2, 4, 5]))
    _follow(dc2, dc3, [OffsetRun(0, 0, 3), OffsetRun(4, 3, 2)], dc2_runs=[OffsetRun(0, 0, 12)])
    moves = _moves(dc2, dc3)
    assert all(skipped == 0 and again == 0 for _t, skipped, again in moves.values())
    assert moves[3][0] == moves[4][0] == 3  # at the hole: dc3's copy of origin 4


def test_a_second_run_writes_nothing_onward() -> None:
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    _follow(dc2, dc3)
    lengths = {topic: len(log.entries) for topic, log in dc3.logs.items()}
    again = _follow(dc2, dc3)
    assert (again.copied, again.onward) == (0, 0)
    assert {topic: len(log.entries) for topic, log in dc3.logs.items()} == lengths


def _clean_run_writes() -> int:
    dc3 = Standby(_dc3_holding(range(6)))
    _follow(_dc2(), dc3)
    return dc3.writes


@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("fail_at", range(1, _clean_run_writes() + 1))
def test_a_run_killed_at_any_write_and_run_again_leaves_the_same_onward_map(
    transactional: bool, fail_at: int
) -> None:
    # Batches of copies and their syncs, then the onward syncs, then the onward progress:
    # killed at each (without transactions after writing, as a kill between a copy and its
    # syncs - failpoint follow_on.before_syncs - leaves it), then run again.
    clean = Standby(_dc3_holding(range(6)), transactional)
    _follow(_dc2(), clean)
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)), transactional)
    dc3.fail_at = fail_at
    with pytest.raises(KafkaError):
        _follow(dc2, dc3)
    dc3.fail_at = None
    _follow(dc2, dc3)
    # The same records (markers of aborted transactions apart) ...
    assert [o for o in _origins(dc3.logs[REPLICA.topic]) if o is not None] == [
        o for o in _origins(clean.logs[REPLICA.topic]) if o is not None
    ]
    moves = _moves(dc2, dc3)
    assert all(skipped == 0 for _t, skipped, _again in moves.values())
    # ... and the same answer as after a clean run for every group position (by origin).
    on_dc3 = _origins(dc3.logs[REPLICA.topic])
    on_clean = _origins(clean.logs[REPLICA.topic])
    for s, (t, _skipped, again) in moves.items():
        t_clean, _x, again_clean = _moves(dc2, clean)[s]
        assert (next((o for o in on_dc3[t:] if o is not None), None), again) == (
            next((o for o in on_clean[t_clean:] if o is not None), None), again_clean,
        ), s  # fmt: skip
    final = _follow(dc2, dc3)
    assert (final.copied, final.onward) == (0, 0)


def test_without_the_onward_flow_nothing_is_written_onward() -> None:
    dc2, dc3 = _dc2(), Standby(_dc3_holding(range(6)))
    report = _report(dc2, DC2_RUNS, dc3, DC3_RUNS)
    copied = follow_all(report, dc2, dc3, SYNCS, SIGNER, batch=4)[ORIGIN]
    assert copied.copied == 12 and copied.onward is None
    assert not dc3.logs[ONWARD_SYNCS].entries and not dc3.logs[ONWARD_PROGRESS].entries


def test_unplaced_is_what_the_known_runs_do_not_map_identically() -> None:
    wanted = [OffsetRun(0, 10, 5), OffsetRun(8, 20, 4)]
    assert unplaced(wanted, wanted) == []
    assert unplaced(wanted, []) == wanted
    assert unplaced(wanted, [OffsetRun(1, 11, 2)]) == [
        OffsetRun(0, 10, 1), OffsetRun(3, 13, 2), OffsetRun(8, 20, 4),
    ]  # fmt: skip
    # Mapped elsewhere (another delta): written again.
    assert unplaced([OffsetRun(8, 20, 4)], [OffsetRun(8, 30, 4)]) == [OffsetRun(8, 20, 4)]
