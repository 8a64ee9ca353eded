"""Invariant 10 believes a rejected offset-sync record's claimed copy only where the target's
data corroborates it (security review 8, R8-M1): the record at the claimed position must carry
the provenance (``drkit-src``) of the claimed source offset.

The target log here is tests/fake_kafka.py's FakeReplicaRecords (a RecordSource): transaction
markers, compacted-away records and positions past the end hold none.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import suppress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.config import load_config_text
from drkit.errors import RetriableKafkaError
from drkit.kafka.partition_reader import PartitionMissing
from drkit.offsets.corroboration import Corroborator
from drkit.offsets.lookup import Report
from drkit.offsets.mapping_loader import doubt
from drkit.offsets.provenance_search import SourcePartition, copy_offset
from drkit.records import Record, TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.offset_sync_store import MALFORMED, RunMaps
from drkit.replication.run_map import RunTable
from drkit.signing import Kind, Signer
from drkit.translation import (
    CLAIMED_LIMIT,
    ClaimedCopies,
    Flag,
    Method,
    PartitionMapping,
    TargetBounds,
    Translated,
    TranslationResult,
    translate,
)
from tests.fake_kafka import FakeReplicaRecords

FLOW = "dc1->dc2"
KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
SOURCE = TopicPartition("orders", 0)
TARGET = TopicPartition("dc1.orders", 0)
ALIAS = "dc1"


def target_log(runs: Iterable[OffsetRun] = ()) -> FakeReplicaRecords:
    """The target partition holding the copies ``runs`` wrote of SOURCE (on ``dc1``)."""
    log = FakeReplicaRecords()
    for run in runs:
        for i in range(run.length):
            log.put(TARGET, run.dst_start + i, ALIAS, SOURCE, run.src_start + i)
    return log


def loaded(maps: RunMaps, replicated_end: int, corroborator: Corroborator) -> PartitionMapping:
    """What the mapping loader builds from ``maps``: doubt, and the claimed copies the target's
    records corroborate."""
    run_map = maps.maps.get(SOURCE)
    table = RunTable.of(run_map.table() if run_map is not None else ())
    doubted = doubt(maps.claims.get(SOURCE, ()), table, replicated_end)
    claimed = corroborator.claimed(
        SOURCE, TARGET, maps.claimed_copies.get(SOURCE, ()), table, doubted
    )
    unchecked = corroborator.unresolved(SOURCE)
    return PartitionMapping(
        SOURCE, TARGET, table, replicated_end, doubt=doubted, claimed=claimed, unchecked=unchecked
    )


def _signed(maps: RunMaps, signer: Signer, run: OffsetRun) -> None:
    sync = OffsetSync(SOURCE, TARGET, run)
    maps.receive(sync.key(), sync.value(), (signer.header(sync.key(), sync.value()),))


def _forged(maps: RunMaps, run: OffsetRun, tombstone: bool = False) -> None:
    sync = OffsetSync(SOURCE, TARGET, run)
    maps.receive(sync.key(), None if tombstone else sync.value(), ())  # no MAC


def _answer(result: TranslationResult) -> tuple[int, Method, frozenset[str]]:
    assert isinstance(result, Translated), result
    return result.target_offset, result.method, frozenset(result.flags)


def test_repro_a_one_forged_claim_at_a_transaction_marker_moves_no_group() -> None:
    """An exactly-once flow: 100 transactions of 10 records, a commit marker after each on the
    target (10, 21, 32, ...).  One forged record claims source 1005 (past the replicated end,
    so its own key doubts it) copied at the marker at 10: no record there names source 1005."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    runs = [OffsetRun(i * 10, i * 11, 10) for i in range(100)]
    for run in runs:
        _signed(maps, signer, run)
    log = target_log(runs)
    base = loaded(maps, 1000, Corroborator(log, ALIAS))
    _forged(maps, OffsetRun(1005, 10, 1))
    corroborator = Corroborator(log, ALIAS)
    forged = loaded(maps, 1000, corroborator)
    bounds = TargetBounds(0, 1100)
    for offset in (15, 500, 999):
        before, after = translate(offset, base, bounds), translate(offset, forged, bounds)
        assert _answer(after) == _answer(before), (offset, before, after)
        assert _answer(after)[1] is Method.EXACT
    assert forged.claimed is None and corroborator.unchecked == 0


def test_repro_b_a_flood_past_the_log_end_moves_no_group() -> None:
    """4,097 forged one-record claims past the verified history, at target positions past the
    log end (review 8, repro B: the overflow answered the log start for every group)."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    _signed(maps, signer, OffsetRun(0, 0, 1000))
    for i in range(CLAIMED_LIMIT + 1):
        _forged(maps, OffsetRun(1000 + i, 10**12 + i, 1))
    log = target_log([OffsetRun(0, 0, 1000)])
    corroborator = Corroborator(log, ALIAS, budget=2)
    mapping = loaded(maps, 1000, corroborator)
    for offset in (10, 500, 999):
        answer = _answer(translate(offset, mapping, TargetBounds(0, 1000)))
        assert answer == (offset, Method.EXACT, frozenset()), (offset, answer)
    # One request (the partition's end) settles them all for this refresh: pending, not
    # unchecked - and not kept (the log fills those positions later: review 9, R9-M1(a)).
    assert (corroborator.reads, log.reads, corroborator.unchecked) == (1, 0, 0)
    assert corroborator.pending_in(SOURCE) == CLAIMED_LIMIT + 1
    corroborator.start_refresh()
    loaded(maps, 1000, corroborator)
    assert (corroborator.reads, log.reads) == (1, 0)  # the end again, no positioned read


def test_a_flood_beyond_the_read_budget_is_reported_and_flagged_until_read_through() -> None:
    """Forged claims at every commit marker of an exactly-once flow, more than the reads of one
    refresh: those not read are counted and lower the answers they could lower, flagged
    ``unchecked`` (review 9, R9-M1(b): not believing them hid a real claim) - then read on the
    next refreshes, lowest position first (the last marker, at the partition's end, costs no
    read and stays pending)."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    runs = [OffsetRun(i * 10, i * 11, 10) for i in range(100)]
    for run in runs:
        _signed(maps, signer, run)
    for i in range(100):
        _forged(maps, OffsetRun(1000 + i, i * 11 + 10, 1))
    log = target_log(runs)
    corroborator = Corroborator(log, ALIAS, budget=41, scan_ahead=0)
    mapping = loaded(maps, 1000, corroborator)
    assert (corroborator.reads, corroborator.unchecked, log.reads) == (41, 59, 40)
    # The lowest claim not read lies at the marker after transaction 40 (450): re-reads.
    target, method, flags = _answer(translate(500, mapping, TargetBounds(0, 1100)))
    assert (target, method) == (450, Method.MAPPED) and Flag.UNCHECKED in flags
    assert _answer(translate(300, mapping, TargetBounds(0, 1100)))[:2] == (330, Method.EXACT)
    corroborator.start_refresh()
    loaded(maps, 1000, corroborator)
    assert (corroborator.reads, corroborator.unchecked) == (41, 19)
    corroborator.start_refresh()
    mapping = loaded(maps, 1000, corroborator)
    assert (corroborator.reads, corroborator.unchecked, mapping.claimed) == (20, 0, None)
    assert corroborator.pending_in(SOURCE) == 1  # the last marker, at the end
    assert _answer(translate(500, mapping, TargetBounds(0, 1100))) == (
        550,
        Method.EXACT,
        frozenset(),
    )
    # Reading on from one position to the next: one positioned read for all 99 markers.
    log = target_log(runs)
    corroborator = Corroborator(log, ALIAS, budget=2)
    assert loaded(maps, 1000, corroborator).claimed is None
    assert (corroborator.reads, corroborator.unchecked, log.reads) == (2, 0, 1)


def test_repro_c_one_forged_claim_over_5000_source_gaps_moves_no_group() -> None:
    """Runs of 9 with a one-offset source gap after each (commit markers on the source); one
    forged record claims [0, 60000) at 10^12 - 5,000 pieces, once the overflow."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    runs = [OffsetRun(i * 10, i * 9, 9) for i in range(5000)]
    for run in runs:
        _signed(maps, signer, run)
    log = target_log(runs)
    base = loaded(maps, 50000, Corroborator(log, ALIAS))
    _forged(maps, OffsetRun(0, 10**12, 60000))
    corroborator = Corroborator(log, ALIAS)
    forged = loaded(maps, 50000, corroborator)
    bounds = TargetBounds(0, 5000 * 9)
    for offset in (10, 25000, 49990):
        before, after = translate(offset, base, bounds), translate(offset, forged, bounds)
        assert _answer(after)[:2] == _answer(before)[:2], (offset, before, after)
    assert _answer(translate(10, forged, bounds))[:2] == (9, Method.EXACT)
    assert corroborator.reads == 1  # one read refutes the claim, whatever it spans


def test_a_genuine_old_key_copy_below_a_re_replication_still_caps_the_answer() -> None:
    """Invariant 10's purpose: 0..9 copied at 0..9 under a key the store lost, then 3..5
    re-copied at 10..12 under the new one.  The old copies of 6..9 are real (their records
    name them), so a group at 4 or 6 resumes no later than 6; a target whose positions 6..9
    hold no such records (a forged claim) moves nobody."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))  # the new key
    old, new = OffsetRun(0, 0, 10), OffsetRun(3, 10, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)  # rejected: the lost key
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    bounds = TargetBounds(0, 13)
    mapping = loaded(maps, 10, Corroborator(target_log([old, new]), ALIAS))
    for offset, most in ((0, 0), (4, 6), (6, 6), (9, 9), (10, 13)):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated) and result.target_offset <= most, (offset, result)
    # The same claim over a target where 6..9 are transaction markers: not believed.
    bare = target_log([OffsetRun(0, 0, 6), new])
    assert _answer(translate(4, loaded(maps, 10, Corroborator(bare, ALIAS)), bounds))[0] == 11
    # ... nor where the records at 6..9 are copies of another cluster's partition.
    other = target_log([OffsetRun(0, 0, 6), new])
    for i in range(6, 10):
        other.put(TARGET, i, "dc3", SOURCE, i)
    assert _answer(translate(4, loaded(maps, 10, Corroborator(other, ALIAS)), bounds))[0] == 11


def test_a_claim_whose_first_records_were_compacted_away_is_believed_from_the_next() -> None:
    """Compaction on the target removed the old copies of 6 and 7: the claim is corroborated
    by the first record after its position (a copy of 8 at 8), and caps from there."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old, new = OffsetRun(0, 0, 10), OffsetRun(3, 10, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    log = target_log([old, new])
    log.remove(TARGET, 6)
    log.remove(TARGET, 7)
    mapping = loaded(maps, 10, Corroborator(log, ALIAS))
    assert _answer(translate(4, mapping, TargetBounds(0, 13)))[0] == 8


def test_a_forged_piece_anchored_at_a_real_copy_is_checked_where_it_starts() -> None:
    """A forger anchors a claim at a real superseded copy (a crash re-replicated everything)
    and stretches it over a source gap it doubts itself: the piece's own first position holds
    a copy of another record, so the piece is not believed."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    # The source has no offset 3.  0..7 copied at 0..6, then a crash: again at 20..26.
    runs = [OffsetRun(0, 0, 3), OffsetRun(4, 3, 4), OffsetRun(0, 20, 3), OffsetRun(4, 23, 4)]
    for run in runs:
        _signed(maps, signer, run)
    log = target_log(runs)
    _forged(maps, OffsetRun(3, 50, 1), tombstone=True)  # doubts the gap [3, 4)
    _forged(maps, OffsetRun(0, 0, 10))  # anchored at the real (superseded) copy of 0 at 0
    mapping = loaded(maps, 8, Corroborator(log, ALIAS))
    assert mapping.doubt == ((3, 4), (8, 10))
    # Believing the anchor alone, the piece [3, 4) at 3 would cap a group at 1 (exact: 21).
    assert _answer(translate(1, mapping, TargetBounds(0, 27)))[:2] == (21, Method.EXACT)


FATES = ("verified", "unsigned", "forged value", "forged tombstone")
Stream = tuple[list[OffsetRun], list[str], list[int], list[tuple[int, int, int, bool]], int]


@st.composite
def _streams(draw: st.DrawFn) -> Stream:
    """tests/unit/test_signing.py's streams (real runs in source order with gaps on both sides,
    each found verified, unsigned, or compacted away under a forgery of its key), plus forged
    claims at free target positions - a gap between runs (a transaction marker) or past the
    log end - over any source range."""
    runs: list[OffsetRun] = []
    src = draw(st.integers(0, 5))
    dst = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(1, 6))):
        length = draw(st.integers(1, 8))
        runs.append(OffsetRun(src, dst, length))
        src += length + draw(st.integers(0, 3))
        dst += length + draw(st.integers(0, 3))
    fates = draw(st.lists(st.sampled_from(FATES), min_size=len(runs), max_size=len(runs)))
    lengths = draw(st.lists(st.integers(1, 10), min_size=len(runs), max_size=len(runs)))
    occupied = {run.dst_start + i for run in runs for i in range(run.length)}
    free = [p for p in range(runs[-1].dst_end + 3) if p not in occupied]
    forged = draw(
        st.lists(
            st.tuples(
                st.integers(0, runs[-1].src_end + 5),
                st.sampled_from(free),
                st.integers(1, 30),
                st.booleans(),
            ),
            max_size=4,
        )
    )
    progress = draw(st.integers(0, runs[-1].src_end))
    return runs, fates, lengths, forged, progress


def _receive_stream(maps: RunMaps, signer: Signer, stream: Stream) -> None:
    runs, fates, lengths, _forged_claims, _progress = stream
    for run, fate, length in zip(runs, fates, lengths, strict=True):
        real = OffsetSync(SOURCE, TARGET, run)
        key, value = real.key(), real.value()
        if fate == "verified":
            maps.receive(key, value, (signer.header(key, value),))
        elif fate == "unsigned":
            maps.receive(key, value, ())
        elif fate == "forged value":
            claim = OffsetSync(SOURCE, TARGET, OffsetRun(run.src_start, run.dst_start, length))
            maps.receive(key, claim.value(), ())
        else:
            maps.receive(key, None, ())


@settings(max_examples=400, deadline=None)
@given(_streams())
def test_forged_claims_at_free_positions_change_no_exact_answer_and_skip_nothing(
    stream: Stream,
) -> None:
    """Invariant 9's property (tests/unit/test_signing.py) with forged claims added at target
    positions no record occupies: every answer that was exact without them is unchanged, and
    no replicated record at or after S lies before T."""
    runs, _fates, _lengths, forged, progress = stream
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    log = target_log(runs)
    honest = RunMaps(signer)
    _receive_stream(honest, signer, stream)
    attacked = RunMaps(signer)
    _receive_stream(attacked, signer, stream)
    for start, dst, length, tombstone in forged:
        _forged(attacked, OffsetRun(start, dst, length), tombstone)
    base = loaded(honest, progress, Corroborator(log, ALIAS))
    mapping = loaded(attacked, progress, Corroborator(log, ALIAS))
    bounds = TargetBounds(0, runs[-1].dst_end)
    copies = {run.src_start + i: run.dst_start + i for run in runs for i in range(run.length)}
    for offset in range(runs[-1].src_end + 2):
        before, result = translate(offset, base, bounds), translate(offset, mapping, bounds)
        assert isinstance(result, Translated), (offset, result)
        skipped = [o for o, copy in copies.items() if o >= offset and copy < result.target_offset]
        assert not skipped, (offset, result)
        if isinstance(before, Translated) and before.method is Method.EXACT:
            assert _answer(result) == _answer(before), (offset, before, result)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10), st.integers(0, 60)), max_size=12),
    st.integers(0, 50),
)
def test_the_piece_index_answers_as_a_walk_over_every_piece(
    drawn: list[tuple[int, int, int]], log_start: int
) -> None:
    """``first_at_or_after`` (two binary searches over an index) equals the linear walk it
    replaced (review 7, N2) - overlapping pieces, pieces below the log start included."""
    pieces = [(lo, lo + n, dst) for lo, n, dst in drawn]
    copies = ClaimedCopies.believing(pieces)
    bounds = TargetBounds(log_start, 100)
    for offset in range(55):
        walk = bounds.end
        for lo, hi, dst in pieces:
            if hi > offset and dst + (hi - lo) > bounds.start:
                walk = min(walk, dst + max(0, offset - lo))
        found = copies.first_at_or_after(offset, bounds) if copies else bounds.end
        assert found == walk, (offset, pieces)


def test_a_failed_read_is_not_a_verdict() -> None:
    """A read of the target that fails leaves the claim unchecked (not believed, counted) and
    is made again on the next refresh - never taken for "no record there"."""

    class Failing(FakeReplicaRecords):
        failures = 1

        def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
            for record in super().records_from(tp, offset):
                if self.failures:
                    self.failures -= 1
                    raise RetriableKafkaError("broker gone")
                yield record

    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old, new = OffsetRun(0, 0, 10), OffsetRun(3, 10, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    log = Failing()
    for run in (old, new):
        for i in range(run.length):
            log.put(TARGET, run.dst_start + i, ALIAS, SOURCE, run.src_start + i)
    corroborator = Corroborator(log, ALIAS)
    bounds = TargetBounds(0, 13)
    first = loaded(maps, 10, corroborator)
    assert corroborator.unchecked == 1
    # Not checked yet: it lowers the answer all the same, flagged (never a skip: review 9).
    assert _answer(translate(4, first, bounds)) == (6, Method.MAPPED, UNCHECKED)
    corroborator.start_refresh()
    again = loaded(maps, 10, corroborator)
    assert corroborator.unchecked == 0
    assert _answer(translate(4, again, bounds)) == (6, Method.MAPPED, frozenset({Flag.UNVERIFIED}))


UNCHECKED = frozenset({Flag.UNVERIFIED, Flag.UNCHECKED})


def _lost_keys(flood: int) -> tuple[RunMaps, list[OffsetRun]]:
    """An exactly-once flow (transactions of 10, a commit marker after each: 10, 21, ...) whose
    store lost its key: the old-key run copied 100..109 at 110..119 (rejected, real), then a
    re-replication under the new key copied 103..105 at 120..122.  A group at 104 must resume
    no later than 116 (the only copies of 106..109).  ``flood`` forged claims at the markers."""
    new_signer = Signer(OTHER, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(new_signer)
    eos = [OffsetRun(i * 10, i * 11, 10) for i in range(10)]
    for run in eos:
        _signed(maps, new_signer, run)
    old, new = OffsetRun(100, 110, 10), OffsetRun(103, 120, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, new_signer, new)
    for i in range(flood):
        _forged(maps, OffsetRun(5000 + i, i * 11 + 10, 1))
    return maps, [*eos, old, new]


def test_r9_m1a_a_claim_past_the_end_is_read_again_once_the_copies_land() -> None:
    """Review 9, R9-M1(a): forged claims at the positions just past the end, then the old-key
    worker's real copies land there and their (rejected) record arrives.  A long-lived loader
    (the checkpoint worker, the monitor's /api/translate) kept "no record there" as refuted
    and answered EXACT past the only copies; it must read those positions again."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old_key = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    log = target_log([OffsetRun(0, 0, 6)])
    _signed(maps, old_key, OffsetRun(0, 0, 6))
    for position in range(6, 10):
        _forged(maps, OffsetRun(1000 + position, position, 1))
    corroborator = Corroborator(log, ALIAS)
    loaded(maps, 6, corroborator)
    for i in range(6, 10):
        log.put(TARGET, i, ALIAS, SOURCE, i)
    _signed(maps, old_key, OffsetRun(0, 0, 10))
    for i in range(3):
        log.put(TARGET, 10 + i, ALIAS, SOURCE, 3 + i)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), OffsetRun(3, 10, 3))
    corroborator.start_refresh()
    mapping = loaded(maps, 10, corroborator)
    assert _answer(translate(4, mapping, TargetBounds(0, 13))) == (
        6,
        Method.MAPPED,
        frozenset({Flag.UNVERIFIED}),
    )


def test_r9_m1b_a_flood_beyond_the_budget_flags_the_answer_never_a_silent_skip() -> None:
    """Review 9, R9-M1(b): forged claims at the commit markers below the real claim spend a
    fresh loader's reads (a plan, ``offsets translate``); the real claim is not read.  The
    answer must not be EXACT past the only copies: it is lowered, flagged ``unchecked``."""
    bounds = TargetBounds(0, 123)
    maps, runs = _lost_keys(0)
    clean = loaded(maps, 110, Corroborator(target_log(runs), ALIAS, budget=4, scan_ahead=0))
    assert _answer(translate(104, clean, bounds)) == (
        116,
        Method.MAPPED,
        frozenset({Flag.UNVERIFIED}),
    )
    maps, runs = _lost_keys(8)
    corroborator = Corroborator(target_log(runs), ALIAS, budget=4, scan_ahead=0)
    flooded = loaded(maps, 110, corroborator)
    assert corroborator.unchecked > 0
    target, method, flags = _answer(translate(104, flooded, bounds))
    assert target <= 116 and method is Method.MAPPED and Flag.UNCHECKED in flags
    # Answers no claim could lower stay exact: only what lies above a claim not read moves.
    assert _answer(translate(20, flooded, bounds)) == (22, Method.EXACT, frozenset())


def test_the_read_budget_is_per_partition() -> None:
    """A flood on one partition spends that partition's reads, not another's: the real claim on
    orders-0, checked after a flooded orders-1, is read and believed (unflagged 'unchecked')."""
    other_source, other_target = TopicPartition("orders", 1), TopicPartition("dc1.orders", 1)
    maps, runs = _lost_keys(0)
    log = target_log(runs)
    for position in range(0, 200):
        log.put(other_target, position, ALIAS, other_source, position)
    # The real claim's reads: the partition's end, each of its two pieces' first and last.
    corroborator = Corroborator(log, ALIAS, budget=5, scan_ahead=0)
    flood = [(5000 + i, 5001 + i, i * 2) for i in range(50)]  # each a read, all refuted
    corroborator.claimed(other_source, other_target, flood, RunTable.of(()), ((0, 10**9),))
    assert corroborator.unchecked_in(other_source) > 0
    mapping = loaded(maps, 110, corroborator)
    assert corroborator.unchecked_in(SOURCE) == 0
    assert _answer(translate(104, mapping, TargetBounds(0, 123))) == (
        116,
        Method.MAPPED,
        frozenset({Flag.UNVERIFIED}),
    )


def test_the_translate_report_counts_unchecked_claims() -> None:
    """``offsets translate`` JSON and /api/translate (the same Report) give the count and warn
    (review 9, R9-M1: they said nothing of unchecked claims)."""
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    report = Report(config.flows[0], "live", True, 9, unverified_offset_syncs=90,
                    verified_offset_syncs=7, unchecked_offset_sync_claims=80)  # fmt: skip
    out = report.to_json()
    assert out["unchecked_offset_sync_claims"] == 80
    assert any("80 copies claimed" in warning for warning in out["warnings"])
    assert Report(config.flows[0], "live", True).to_json()["unchecked_offset_sync_claims"] == 0


def test_r10_m1_a_forged_claim_at_a_negative_position_moves_no_group() -> None:
    """Security review 10, R10-M1: one forged record claiming target position -1 - librdkafka's
    "the end" - read nothing there, stayed pending on every refresh, and pending claims lower
    answers: every group of the partition went back to the log start, counted nowhere.  No copy
    lies below position 0: such a claim is false, never read."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    runs = [OffsetRun(0, 0, 1000)]
    for run in runs:
        _signed(maps, signer, run)
    log = target_log(runs)
    base = loaded(maps, 1000, Corroborator(log, ALIAS))
    _forged(maps, OffsetRun(1005, -1, 1))
    corroborator = Corroborator(log, ALIAS)
    forged = loaded(maps, 1000, corroborator)
    bounds = TargetBounds(0, 1000)
    for offset in (15, 500, 999):
        before, after = translate(offset, base, bounds), translate(offset, forged, bounds)
        assert _answer(after) == _answer(before), (offset, before, after)
        assert _answer(after)[1] is Method.EXACT
    assert forged.claimed is None and forged.unchecked is None
    assert corroborator.unchecked == 0 and corroborator.pending_in(SOURCE) == 0


def _unsynced_tail(forged: list[OffsetRun]) -> PartitionMapping:
    """An at-least-once flow: 0..999 copied at 0..999 and signed with the deployment's own key;
    1000..5999 copied at 1000..5999 but not synced yet (the worker died before its next commit
    round).  ``forged``: a foreign writer's claims, each under a distinct key (its ``dst_start``
    varies: claims ignore it, and compaction keeps them all)."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    synced, tail = OffsetRun(0, 0, 1000), OffsetRun(1000, 1000, 5000)
    _signed(maps, signer, synced)
    for k, run in enumerate(forged):
        key = OffsetSync(SOURCE, TARGET, OffsetRun(run.src_start, 10**9 + k, 1)).key()
        maps.receive(key, OffsetSync(SOURCE, TARGET, run).value(), ())  # no MAC
    return loaded(maps, 1000, Corroborator(target_log([synced, tail]), ALIAS))


def test_r11_m1_a_flood_anchored_at_one_unsynced_copy_moves_no_exact_answer() -> None:
    """Security review 11, R11-M1: CLAIMED_LIMIT + 1 forged claims "1000 copied at 1000, length
    1 + k", all corroborated by the one real copy of 1000 (not synced yet), overflowed the
    believed pieces: every group below the forger's reach resumed at the replica's log start,
    exact ones included (4,096 claims: S=500 exact; 4,097: S=500 -> 0).  One record
    corroborates one piece (the longest claimed from it), and exact answers stay exact."""
    bounds = TargetBounds(0, 6000)
    for flood in (CLAIMED_LIMIT + 1, 3 * CLAIMED_LIMIT, CLAIMED_LIMIT):
        mapping = _unsynced_tail([OffsetRun(1000, 1000, 1 + k) for k in range(flood)])
        for offset in (0, 500, 999):
            assert _answer(translate(offset, mapping, bounds)) == (
                offset,
                Method.EXACT,
                frozenset(),
            ), (flood, offset)
        # Past the replicated end: no later than the first unsynced copy, never the log start.
        assert _answer(translate(1005, mapping, bounds))[0] == 1000
        assert mapping.claimed is not None and len(mapping.claimed.pieces) == 1


def test_r11_m1_more_real_copies_than_the_limit_collapse_above_every_exact_answer() -> None:
    """The same flood spread over distinct real unsynced copies - one forged claim at each of
    the tail's 5,000 copies, more than CLAIMED_LIMIT believed pieces: the pieces past the limit
    collapse into one at their lowest position (above every synced copy), never the overflow's
    log start."""
    bounds = TargetBounds(0, 6000)
    mapping = _unsynced_tail([OffsetRun(1000 + i, 1000 + i, 50) for i in range(5000)])
    for offset in (0, 500, 999):
        assert _answer(translate(offset, mapping, bounds)) == (offset, Method.EXACT, frozenset())
    for offset in (1000, 1005, 5500):  # past the replicated end: at the first unsynced copy
        assert _answer(translate(offset, mapping, bounds))[0] == 1000


def _skipped(runs: Iterable[OffsetRun], offset: int, target: int) -> list[int]:
    """Source offsets at or after ``offset`` whose every copy in ``runs`` lies below
    ``target``: what a group resuming at ``target`` skips."""
    highest: dict[int, int] = {}
    for run in runs:
        for i in range(run.length):
            source = run.src_start + i
            highest[source] = max(highest.get(source, -1), run.dst_start + i)
    return [source for source, copy in highest.items() if source >= offset and copy < target]


def test_r11_l2_a_real_lost_key_history_past_the_limit_skips_nothing() -> None:
    """Security review 11, R11-L2: an exactly-once flow whose store lost its key, 6,000 old
    runs (2i..2i+1 at 3i..3i+1) - more believed pieces than CLAIMED_LIMIT - then 0..9 and
    12000.. re-copied under the new key after them.  The claims past the limit were dropped
    whole: a group at 11,800 resumed at 18,010, past the only copies of 200 records.  Every
    claim counts now; those past the limit collapse (re-reads, never a skip)."""
    n = 6000
    old = [OffsetRun(2 * i, 3 * i, 2) for i in range(n)]
    new = [OffsetRun(0, 3 * n, 10), OffsetRun(2 * n, 3 * n + 10, 5)]
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))  # the new store's key
    for run in old:
        _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), run)  # rejected: the lost key
    for run in new:
        _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), run)
    corroborator = Corroborator(target_log([*old, *new]), ALIAS)
    mapping = loaded(maps, 2 * n + 5, corroborator)
    assert corroborator.unchecked == 0
    bounds = TargetBounds(0, 3 * n + 15)
    for offset in (4, 100, 8000, 11800, 11999, 12000, 12004):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated), (offset, result)
        assert not _skipped([*old, *new], offset, result.target_offset), (offset, result)
    # Below the limit the old copies are kept one by one: a group at 100 resumes at 150.
    assert _answer(translate(100, mapping, bounds))[0] == 150


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10), st.integers(0, 60)), max_size=12),
    st.integers(0, 50),
    st.integers(1, 5),
)
def test_pieces_past_the_limit_collapse_without_a_skip(
    drawn: list[tuple[int, int, int]], log_start: int, limit: int
) -> None:
    """Past the limit (here a small one) the pieces at the highest positions collapse: an answer
    is never later than the walk over every piece (never a skip), and with no more pieces than
    the limit it is the walk's (review 11, R11-M1: the overflow answered the log start)."""
    import drkit.translation as translation

    pieces = [(lo, lo + n, dst) for lo, n, dst in drawn]
    saved = translation.CLAIMED_LIMIT
    translation.CLAIMED_LIMIT = limit
    try:
        copies = ClaimedCopies.believing(pieces)
    finally:
        translation.CLAIMED_LIMIT = saved
    bounds = TargetBounds(log_start, 100)
    for offset in range(55):
        walk = bounds.end
        for lo, hi, dst in pieces:
            if hi > offset and dst + (hi - lo) > bounds.start:
                walk = min(walk, dst + max(0, offset - lo))
        found = copies.first_at_or_after(offset, bounds) if copies else bounds.end
        assert max(found, bounds.start) <= max(walk, bounds.start), (offset, pieces)
        if len(pieces) < limit:
            assert found == walk, (offset, pieces)


def test_r11_l1_an_undecodable_value_under_a_real_runs_key_is_doubted() -> None:
    """Security review 11, R11-L1: the signed runs 0..49, 50..149 and 150..199 (at 160..209);
    the middle run's record compacted away under a foreign record with its key whose value does
    not decode.  The record raised before its claim was kept (the store logs and skips a
    malformed record): 50..149 read as a plain gap and a group at 100 resumed at 160, past
    the real copies at 100..149, unflagged.  The key's claim is kept before the value is read,
    as a tombstone's."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    runs = [OffsetRun(0, 0, 50), OffsetRun(50, 50, 100), OffsetRun(150, 160, 50)]
    bounds = TargetBounds(0, 210)
    for value in (b"\x00", b"", b"\x00" * 7):
        maps = RunMaps(signer)
        _signed(maps, signer, runs[0])
        with suppress(*MALFORMED):  # what OffsetSyncStore.refresh does: logs it, reads on
            maps.receive(OffsetSync(SOURCE, TARGET, runs[1]).key(), value, ())
        _signed(maps, signer, runs[2])
        assert maps.rejected == 1
        mapping = loaded(maps, 200, Corroborator(target_log(runs), ALIAS))
        target, method, flags = _answer(translate(100, mapping, bounds))
        assert target <= 100 and Flag.UNVERIFIED in flags, (value, target, method, flags)


class _Broker(FakeReplicaRecords):
    """As PartitionReader on a broker: the end of a partition the target does not have is
    :class:`PartitionMissing`; ``failing``: partitions whose end cannot be asked (a broker
    down)."""

    def __init__(self, failing: frozenset[TopicPartition] = frozenset()) -> None:
        super().__init__()
        self.failing = failing

    def end_offset(self, tp: TopicPartition) -> int:
        if tp in self.failing:
            raise RetriableKafkaError(f"watermarks of {tp}: Local: Timed out")
        if tp not in self._positions:
            raise PartitionMissing(f"watermarks of {tp}: Local: Unknown partition")
        return super().end_offset(tp)


def test_r11_l3_a_claim_on_a_partition_the_target_does_not_have_is_refuted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Security review 11, R11-L3: one forged record naming a source partition whose replica
    does not exist left a claim whose read failed on every refresh - unchecked for ever, and
    ``offset_sync_claims_unchecked`` blocked every planned move.  A partition the target does
    not have holds no copy: the claim is refuted (and logged); an empty partition's claims are
    pending (not counted); a read that fails is still no verdict."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    _signed(maps, signer, OffsetRun(0, 0, 100))
    bogus = TopicPartition("orders", 999)
    forged = OffsetSync(bogus, TopicPartition("dc1.orders", 999), OffsetRun(0, 0, 1))
    maps.receive(forged.key(), forged.value(), ())
    replica = TopicPartition("dc1.orders", 999)

    def check(records: FakeReplicaRecords) -> Corroborator:
        for i in range(100):
            records.put(TARGET, i, ALIAS, SOURCE, i)
        corroborator = Corroborator(records, ALIAS)
        for source, target in ((SOURCE, TARGET), (bogus, replica)):  # as MappingLoader.refresh
            run_map = maps.maps.get(source)
            table = RunTable.of(run_map.table() if run_map is not None else ())
            doubted = doubt(maps.claims.get(source, ()), table)
            corroborator.claimed(
                source, target, maps.claimed_copies.get(source, ()), table, doubted
            )
        return corroborator

    with caplog.at_level("WARNING"):
        missing = check(_Broker())
    assert (missing.unchecked, missing.pending_in(bogus)) == (0, 0)
    assert missing.unresolved(bogus) is None
    assert any("does not have" in record.getMessage() for record in caplog.records)
    empty = check(FakeReplicaRecords())  # an empty answer: pending, not unchecked
    assert (empty.unchecked, empty.pending_in(bogus)) == (0, 1)
    failing = check(_Broker(failing=frozenset({replica})))  # no verdict: unchecked
    assert failing.unchecked_in(bogus) == 1


def _retained(log: FakeReplicaRecords, start: int) -> None:
    """Retention: the records below ``start`` are gone."""
    for position in [p for p in log._positions.get(TARGET, []) if p < start]:
        log.remove(TARGET, position)


def test_r11_follow_up_a_stretched_claim_at_an_unsynced_copy_moves_nothing_after_retention() -> (
    None
):
    """Issue 46, R11 follow-up (the R11-M1 fixer's doubt): an at-least-once flow, 0..999
    synced at 0..999 and 1000..1009 copied at 1000..1009 but not synced; a forger stretches a
    claim anchored at the real unsynced copy of 1000 to a million records the replica never
    held, then retention moves the log start past 1000.  The tail lies above every synced copy,
    so every group that still has a copy is not exact: the answers are the same as without the
    forger, for a loader that believed the claim before retention too, and nothing is skipped."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    synced, tail = OffsetRun(0, 0, 1000), OffsetRun(1000, 1000, 10)
    plain, forged = RunMaps(signer), RunMaps(signer)
    for maps in (plain, forged):
        _signed(maps, signer, synced)
    _forged(forged, OffsetRun(1000, 1000, 10**6))
    log = target_log([synced, tail])
    corroborator = Corroborator(log, ALIAS)
    before = loaded(forged, 1000, corroborator)  # believed while the copy of 1000 is there
    assert before.claimed is not None
    for start in (1001, 1005, 1009, 1010):
        _retained(log, start)
        bounds = TargetBounds(start, 1010)
        after = loaded(forged, 1000, corroborator)  # a long-lived loader: its verdicts kept
        fresh = loaded(forged, 1000, Corroborator(log, ALIAS))
        base = loaded(plain, 1000, Corroborator(log, ALIAS))
        for offset in (0, 500, 999, 1000, 1004, 1009, 1010, 5000):
            want = _answer(translate(offset, base, bounds))
            for mapping in (before, after, fresh):
                got = translate(offset, mapping, bounds)
                assert isinstance(got, Translated), (start, offset, got)
                assert got.target_offset <= want[0], (start, offset, got, want)
                lost = _skipped([tail], offset, got.target_offset)  # copies of s lie at s
                assert all(source < start for source in lost), (start, offset, got)
                if want[1] is Method.EXACT:
                    assert _answer(got) == want, (start, offset, got)


def _stretched(forged: bool) -> tuple[RunMaps, FakeReplicaRecords]:
    """A store that lost its key: 0..99 copied at 0..99 under the old key (rejected, real),
    an aborted transaction at 100..199 (no committed record), then 30..49 re-copied at
    200..219 under the new key.  ``forged``: a foreign writer stretches the old copies' claim
    from 50 at 50 over the aborted positions, to 200 (no verified copy lies there)."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old, new = OffsetRun(0, 0, 100), OffsetRun(30, 200, 20)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    if forged:
        _forged(maps, OffsetRun(50, 50, 150))
    return maps, target_log([old, new])


def test_r11_follow_up_a_stretched_old_copy_moves_no_exact_answer_once_it_is_gone() -> None:
    """Issue 46, R11 follow-up: a forger stretches the claim of a real old-key copy (50..99
    at 50..99) over positions holding no copy (100..199).  Before retention a group at 40
    (exact: 210) rightly resumes at 50 - the only copies of 50..99 lie there.  Once retention
    moved the log start to 150 those copies are gone, and the group resumes at 210 again; a
    loader that believed the stretched piece before kept it alive by its claimed length and
    sent the group to the log start, 150 (before the fix): an exact answer moved where the
    replica holds no copy of a doubted record.  A piece's extent is what the replica's records
    corroborate: the claimed range's last copy is checked too."""
    for forged in (False, True):
        maps, log = _stretched(forged)
        corroborator = Corroborator(log, ALIAS)
        before = loaded(maps, 250, corroborator)
        assert _answer(translate(40, before, TargetBounds(0, 220)))[0] == 50, forged
        _retained(log, 150)
        bounds = TargetBounds(150, 220)
        after = loaded(maps, 250, corroborator)  # a long-lived loader: its verdicts kept
        fresh = loaded(maps, 250, Corroborator(log, ALIAS))
        for mapping in (before, after, fresh):  # before: the loader's cached mapping
            for offset, copy in ((30, 200), (40, 210), (49, 219)):
                assert _answer(translate(offset, mapping, bounds)) == (
                    copy,
                    Method.EXACT,
                    frozenset(),
                ), (forged, offset)


class _OpenTransaction(FakeReplicaRecords):
    """read_committed with a transaction open on the replica from ``lso``: reads stop there,
    below the end (the high watermark: committed copies lie above the open transaction)."""

    lso = 10**18

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        for record in super().records_from(tp, offset):
            if record.offset >= self.lso:
                return
            yield record


def test_r13_l1_a_stretched_piece_whose_last_read_stops_at_an_open_transaction_is_unchecked() -> (
    None
):
    """Issue 46, security review 13, R13-L1: the stretched history above, with a transaction
    open on the replica from 180 (below the copies at 200..219 and the end, 220).  The read at
    the stretched piece's last position (199) stops at the last stable offset and finds
    nothing; that is not "past the end" - verified copies lie between the LSO and the end -
    and a loader that kept the piece whole sent exact groups 30/40/49 (200/210/219) to the log
    start, 150, flagged only 'unverified' once retention passed the old copies (before the
    fix).  The piece is not read there: believed at its first copy, the rest unresolved -
    counted, and what it lowers flagged 'unchecked' - until the transaction ends."""
    maps, plain = _stretched(True)
    log = _OpenTransaction()
    log.records, log._positions = plain.records, plain._positions
    log.lso = 180
    corroborator = Corroborator(log, ALIAS)
    before = loaded(maps, 250, corroborator)
    _retained(log, 150)
    bounds = TargetBounds(150, 220)
    corroborator.start_refresh()
    after = loaded(maps, 250, corroborator)  # a long-lived loader: its verdicts kept
    fresh_corroborator = Corroborator(log, ALIAS)
    fresh = loaded(maps, 250, fresh_corroborator)
    for mapping in (after, fresh):
        for offset, copy in ((30, 200), (40, 210), (49, 219)):
            target, method, flags = _answer(translate(offset, mapping, bounds))
            assert (target, method) == (copy, Method.EXACT) or Flag.UNCHECKED in flags, (
                offset,
                target,
                method,
                flags,
            )
    assert corroborator.unchecked > 0  # counted; a fresh loader's first read is pending
    assert fresh_corroborator.pending_in(SOURCE) > 0  # (at the LSO too: flagged, R9-M1(a))
    assert before.claimed is not None and (50, 200, 50) not in before.claimed.pieces
    # The transaction ends: the next refresh reads the piece through, and the answers are
    # exact again.
    log.lso = 10**18
    corroborator.start_refresh()
    after = loaded(maps, 250, corroborator)
    assert corroborator.unchecked == 0
    for offset, copy in ((30, 200), (40, 210), (49, 219)):
        assert _answer(translate(offset, after, bounds)) == (copy, Method.EXACT, frozenset())


def test_a_claim_whose_last_records_were_compacted_away_keeps_the_copies_left() -> None:
    """Compaction on the target removed the old copies of 8 and 9 (the claim's last): the
    piece is not corroborated where it ends, and a search between finds the last copy left (7
    at 7) - a group at 4 still resumes no later than 6, and one at 7 at 7 (no skip).  The
    same records compacted away and the rest of the claim past them gone too: nothing more."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old, new = OffsetRun(0, 0, 10), OffsetRun(3, 10, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    log = target_log([old, new])
    log.remove(TARGET, 8)
    log.remove(TARGET, 9)
    corroborator = Corroborator(log, ALIAS, scan_ahead=0)
    mapping = loaded(maps, 10, corroborator)
    assert corroborator.unchecked == 0
    assert mapping.claimed is not None and mapping.claimed.pieces == ((0, 3, 0), (6, 8, 6))
    bounds = TargetBounds(0, 13)
    for offset, most in ((4, 6), (6, 6), (7, 7)):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated) and result.target_offset <= most, (offset, result)
        assert not _skipped([OffsetRun(0, 0, 8), new], offset, result.target_offset)
    # Retention past the copies left: the piece is gone, the group at 4 resumes at its copy.
    _retained(log, 8)
    assert _answer(translate(4, mapping, TargetBounds(8, 13))) == (11, Method.EXACT, frozenset())


def test_a_piece_whose_last_record_was_not_read_is_unchecked_past_its_first() -> None:
    """The reads ran out before a believed piece's last record was read: its first copy is
    believed, the rest is unresolved - counted, and it lowers answers flagged 'unchecked' (re-
    reads, never a skip), until the next refresh reads it."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    old, new = OffsetRun(0, 0, 10), OffsetRun(3, 10, 3)
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    # The end, the first pieces' records (0, 6), the first's last (2): none left for 9.
    corroborator = Corroborator(target_log([old, new]), ALIAS, budget=4, scan_ahead=0)
    mapping = loaded(maps, 10, corroborator)
    assert corroborator.unchecked == 1
    assert mapping.claimed is not None and mapping.claimed.pieces == ((0, 3, 0), (6, 7, 6))
    bounds = TargetBounds(0, 13)
    target, method, flags = _answer(translate(7, mapping, bounds))  # 7 past the synced end
    assert (target, method) == (7, Method.MAPPED) and Flag.UNCHECKED in flags, flags
    corroborator.start_refresh()
    mapping = loaded(maps, 10, corroborator)
    assert corroborator.unchecked == 0
    assert mapping.claimed is not None and mapping.claimed.pieces == ((0, 3, 0), (6, 10, 6))
    target, method, flags = _answer(translate(7, mapping, bounds))
    assert (target, method) == (7, Method.MAPPED) and Flag.UNCHECKED not in flags, flags


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 30),
    st.integers(0, 20),
    st.data(),
)
def test_stretched_claims_skip_nothing_and_move_exact_answers_only_to_a_copy_left(
    old_length: int, aborted: int, data: st.DataObject
) -> None:
    """A lost-key history (0..n-1 at 0..n-1 under the old key; an aborted transaction; a range
    re-copied under the new key after it), some old copies compacted away, forged claims
    stretched from old copies, then retention; a loader that read everything before retention
    (verdicts kept) answers no group past a copy still in the log, and moves an exact answer
    only below a copy still in the log of a doubted record at or after the group's offset."""
    old = OffsetRun(0, 0, old_length)
    first = data.draw(st.integers(0, old_length - 1))
    new = OffsetRun(first, old_length + aborted, data.draw(st.integers(1, old_length - first)))
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    _signed(maps, Signer(KEY, Kind.OFFSET_SYNC, FLOW), old)
    _signed(maps, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    for src in data.draw(st.lists(st.integers(0, old_length - 1), max_size=3)):
        _forged(maps, OffsetRun(src, src, data.draw(st.integers(1, old_length + aborted - src))))
    log = target_log([old, new])
    for position in data.draw(st.lists(st.integers(0, old_length - 1), max_size=4)):
        log.remove(TARGET, position)
    corroborator = Corroborator(log, ALIAS)
    loaded(maps, first + new.length, corroborator)
    start = data.draw(st.integers(0, old_length + aborted))
    _retained(log, start)
    mapping = loaded(maps, first + new.length, corroborator)
    plain = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))
    _signed(plain, Signer(OTHER, Kind.OFFSET_SYNC, FLOW), new)
    exact = loaded(plain, first + new.length, Corroborator(log, ALIAS))
    end = old_length + aborted + new.length
    bounds = TargetBounds(start, end)
    left = log.records.get(TARGET, {})
    copies = [OffsetRun(_source_of(record), position, 1) for position, record in left.items()]
    verified = range(new.src_start, new.src_start + new.length)
    for offset in range(old_length + 2):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated), (offset, result)
        assert not _skipped(copies, offset, result.target_offset), (offset, result)
        want = translate(offset, exact, bounds)
        moved = (
            isinstance(want, Translated)
            and want.method is Method.EXACT
            and result.target_offset < want.target_offset
        )
        if moved:  # only below a copy left of a doubted record at or after the offset
            assert isinstance(want, Translated)
            assert any(
                run.src_start >= offset
                and run.src_start not in verified
                and run.dst_start < want.target_offset
                for run in copies
            ), (offset, result, want)


def _source_of(record: Record) -> int:
    offset = copy_offset(record, SourcePartition(ALIAS, SOURCE))
    assert offset is not None
    return offset


def test_r12_n1_claims_on_a_topic_the_flow_does_not_replicate_are_refuted_unread(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Security review 12, N1: the loader built a mapping for every source partition a rejected
    record names, the flow's topics or not, and read the replica the topology names for it.  A
    forger naming ``payments`` - whose ``dc1.payments`` is another flow's replica on the target,
    a record at every position - spent the partition's reads on it (1,100 claims, 2,000 apart:
    one request each) and left claims unchecked, which blocks every planned move, on an
    at-least-once flow with no free positions of its own.  A flow translates only the topics it
    selects, so claims on the others are refuted unread: counted and logged, never unchecked."""
    import drkit.adoption.adopted as adopted_module
    import drkit.replication.offset_sync_store as sync_store_module
    import drkit.replication.progress as progress_module
    from drkit.kafka.clients import ClusterEndpoint
    from drkit.offsets.mapping_loader import MappingLoader
    from drkit.topology.internal_topics import offset_syncs_topic
    from tests.fake_kafka import FakeCluster
    from tests.unit.test_adopted_signing import _FakeTailer

    cluster = FakeCluster("dc2")
    for module in (adopted_module, sync_store_module, progress_module):
        monkeypatch.setattr(
            module, "TopicTailer", lambda _e, topic, **_k: _FakeTailer(cluster, topic)
        )
    syncs = offset_syncs_topic("dc1")
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    real = OffsetSync(SOURCE, TARGET, OffsetRun(0, 0, 100))
    cluster.write(syncs, real.key(), real.value(), (signer.header(real.key(), real.value()),))
    payments, replica = TopicPartition("payments", 0), TopicPartition("dc1.payments", 0)
    log = target_log([OffsetRun(0, 0, 100)])
    claims = 1_100
    for k in range(claims):
        log.put(replica, k * 2_000, ALIAS, payments, k * 2_000)  # the other flow's copies
        forged = OffsetSync(payments, replica, OffsetRun(10**9 + k, k * 2_000, 1))
        cluster.write(syncs, forged.key(), forged.value())  # no MAC
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2, topics: {include: [orders]}}]\n",
        env={},
    )
    loader = MappingLoader(config.flows[0], ClusterEndpoint("dc2", config.clusters["dc2"]),
                           signer=signer, records=log)  # fmt: skip
    with caplog.at_level("WARNING"):
        mappings = loader.refresh()
    assert loader.rejected == claims
    assert (loader.unchecked_claims, log.reads) == (0, 0)
    assert loader.unselected_claims == claims
    assert payments not in mappings
    assert any("does not replicate" in record.getMessage() for record in caplog.records)
    exact = translate(50, mappings[SOURCE], TargetBounds(0, 100))
    assert _answer(exact) == (50, Method.EXACT, frozenset())
