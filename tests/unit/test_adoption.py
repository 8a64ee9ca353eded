"""drkit adopt's pure parts: MM2's offset-sync records, the points kept, the rounding down of an
adopted range, and the pairing of MM2's last copies with their source records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.adoption.adopt import TailPairing, moved, pair_tail
from drkit.adoption.adopted import MAX_POINTS, adopted_key, adopted_value, decode_adopted
from drkit.adoption.mm2_syncs import decode_mm2_sync, sync_points
from drkit.records import Record, TopicPartition
from drkit.replication.heartbeat import encode_string
from drkit.replication.offset_sync import OffsetRun
from drkit.translation import (
    Method,
    Mm2Syncs,
    PartitionMapping,
    TargetBounds,
    Translated,
    translate,
)

SOURCE = TopicPartition("orders", 1)
TARGET = TopicPartition("dc1.orders", 1)


def _sync_record(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    """An offset sync as MirrorMaker 2's OffsetSync serializes it."""
    return encode_string(topic) + struct.pack(">i", partition), struct.pack(
        ">qq", upstream, downstream
    )


def test_an_mm2_offset_sync_decodes_and_other_shapes_are_refused() -> None:
    assert decode_mm2_sync(*_sync_record("orders", 1, 4200, 17)) == (SOURCE, 4200, 17)
    key, _value = _sync_record("orders", 1, 1, 1)
    with pytest.raises(ValueError, match="16 bytes"):
        decode_mm2_sync(key, b"\x00" * 12)
    with pytest.raises(ValueError, match="negative"):
        decode_mm2_sync(*_sync_record("orders", 1, -1, 0))


def test_a_sync_after_a_restart_supersedes_the_syncs_at_or_above_it() -> None:
    # 0->0, 40->40, 80->80; MM2 restarts at 50 and copies 50.. again from target offset 100.
    history = [(0, 0), (40, 40), (80, 80), (50, 100), (90, 140)]
    assert sync_points(history) == [(0, 0), (40, 40), (50, 100), (90, 140)]
    assert sync_points([]) == []


def test_the_adopted_range_rounds_down_and_counts_what_is_read_again() -> None:
    syncs = Mm2Syncs((0, 40, 80), (0, 40, 80), 120, 120)
    assert syncs.round_down(40, 0) == (40, 0, False)  # the synced record itself
    assert syncs.round_down(55, 0) == (41, 14, False)  # 41..54 read again
    assert syncs.round_down(119, 0) == (81, 38, False)  # up to the adoption point
    # The source had a gap: 40 records' worth of offsets, 10 records on the target.
    gappy = Mm2Syncs((0, 40), (0, 10), 50, 20)
    assert gappy.round_down(30, 0) == (1, 9, False)  # at most the 9 records between
    # Before the first sync: from the replica's log start, every record before the sync again.
    late = Mm2Syncs((500,), (30,), 600, 130)
    assert late.round_down(100, 5) == (5, 25, True)
    # ... but never more than the records below S: MirrorMaker 2 left no sync below the
    # adoption point at 287 (it happens, CI 2026-12-05) and a group at 123 reads 0..122 again.
    assert Mm2Syncs((), (), 287, 287).round_down(123, 0) == (0, 123, True)
    assert Mm2Syncs((287,), (287,), 299, 299).round_down(201, 0) == (0, 201, True)


def test_mm2_syncs_must_increase_and_lie_below_the_adoption_point() -> None:
    with pytest.raises(ValueError, match="increase"):
        Mm2Syncs((0, 40, 30), (0, 40, 50), 100, 100)
    with pytest.raises(ValueError, match="below"):
        Mm2Syncs((0, 140), (0, 140), 100, 100)


def _mapping(syncs: Mm2Syncs, runs: tuple[OffsetRun, ...]) -> PartitionMapping:
    return PartitionMapping(SOURCE, TARGET, runs, replicated_end=200, adopted=syncs)


def test_translation_uses_mm2_precision_below_the_adoption_point_and_runs_above() -> None:
    mapping = _mapping(Mm2Syncs((0, 40), (0, 40), 80, 80), (OffsetRun(80, 80, 120),))
    bounds = TargetBounds(0, 200)
    below = translate(60, mapping, bounds, 200)
    assert isinstance(below, Translated)
    assert (below.target_offset, below.method, below.expected_rereads) == (41, Method.MM2, 19)
    above = translate(150, mapping, bounds, 200)
    assert isinstance(above, Translated)
    assert (above.target_offset, above.method, above.expected_rereads) == (150, Method.EXACT, 0)
    # The replica's retention took the rounded-down position: clamped, and said so.
    clamped = translate(60, mapping, TargetBounds(45, 200), 200)
    assert isinstance(clamped, Translated)
    assert (clamped.target_offset, clamped.method) == (45, Method.CLAMPED)


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.booleans(), min_size=2, max_size=120),
    every=st.integers(min_value=1, max_value=30),
    data=st.data(),
)
def test_mm2_precision_never_skips_and_counts_rereads_exactly_on_a_contiguous_source(
    gaps: list[bool], every: int, data: st.DataObject
) -> None:
    """MM2 copies every record of a source with gaps (``True``: no record at that offset),
    syncing every ``every`` records and at the last one; the adopted translation of any source
    offset below the adoption point skips no copied record, and its re-read count is exact
    where the source has no gaps (an upper bound otherwise)."""
    offsets = [o for o, gap in enumerate(gaps) if not gap]
    if not offsets:
        return
    copies = dict(zip(offsets, range(len(offsets)), strict=True))  # source -> target
    synced = sorted({o for i, o in enumerate(offsets) if i % every == 0} | {offsets[-1]})
    end = synced[-1]
    if not end:
        return
    points = [(o, copies[o]) for o in synced[:-1]]
    mm2 = Mm2Syncs(tuple(u for u, _ in points), tuple(d for _, d in points), end, copies[end])
    mapping = _mapping(mm2, (OffsetRun(end, copies[end], 1),))
    bounds = TargetBounds(0, len(offsets))
    source_offset = data.draw(st.integers(min_value=0, max_value=end - 1))
    result = translate(source_offset, mapping, bounds, len(gaps))
    assert isinstance(result, Translated) and result.method is Method.MM2
    wanted = [copies[o] for o in offsets if o >= source_offset]
    assert min(wanted) >= result.target_offset  # nothing at or after S is skipped
    reread = sum(1 for o in offsets if o < source_offset and copies[o] >= result.target_offset)
    assert result.expected_rereads >= reread
    if not any(gaps[: end + 1]):
        assert result.expected_rereads == reread


def _records(topic: str, pairs: list[tuple[int, bytes]]) -> list[Record]:
    return [Record(topic, 1, offset, None, value) for offset, value in pairs]


def test_mm2_copies_pair_with_their_source_records_into_exact_runs() -> None:
    source = _records("orders", [(100, b"a"), (101, b"b"), (103, b"c"), (104, b"d"), (105, b"e")])
    target = _records("dc1.orders", [(7, b"a"), (8, b"b"), (9, b"c"), (10, b"d")])
    paired = pair_tail(source, target)
    assert paired == TailPairing((OffsetRun(100, 7, 2), OffsetRun(103, 9, 2)), 105)


def test_copies_that_do_not_match_the_source_are_refused_with_the_offsets() -> None:
    source = _records("orders", [(100, b"a"), (101, b"b")])
    assert "target offset 8 is not the source record at 101" in str(
        pair_tail(source, _records("dc1.orders", [(7, b"a"), (8, b"x")]))
    )
    assert "copied some twice" in str(
        pair_tail(source, _records("dc1.orders", [(7, b"a"), (8, b"b"), (9, b"b")]))
    )
    assert "holds nothing" in str(pair_tail(source, []))


def test_the_adopted_record_round_trips_and_keeps_the_latest_points() -> None:
    many = Mm2Syncs(
        tuple(range(0, 2 * (MAX_POINTS + 5), 2)),
        tuple(range(MAX_POINTS + 5)),
        2 * (MAX_POINTS + 5),
        MAX_POINTS + 5,
    )
    decoded = decode_adopted(adopted_key("dc2", SOURCE), adopted_value(many, 1))
    assert decoded is not None
    alias, source, syncs = decoded
    assert (alias, source, syncs.end, syncs.end_target) == ("dc2", SOURCE, many.end, 5 + MAX_POINTS)
    assert syncs.upstream == many.upstream[-MAX_POINTS:]
    assert decode_adopted(b"dc2/orders/1", b"{not json") is None
    assert decode_adopted(b"dc2/orders/1", None) is None


def test_what_moved_between_two_samples_is_named_with_its_growth() -> None:
    assert moved({"a-0": 5, "b-0": 3}, {"a-0": 9, "b-0": 3}) == ["a-0 +4"]
    assert moved({"a-0": 5}, {"a-0": 5}) == []


@pytest.mark.parametrize(("on", "where"), [([], "dc1"), (["--mm2-syncs-on", "target"], "dc2")])
def test_adopt_without_mm2_offset_syncs_is_refused_with_the_plan_blockers_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on: list[str], where: str
) -> None:
    """W6 (issue 45): a missing offset-syncs topic (MM2 never ran there, or another
    --mm2-syncs-topic/--mm2-syncs-on) exited 1, "the operation failed"; adopt's other refusals
    of a precondition exit 4, nothing written - so does this one, naming what to fix."""
    from click.testing import CliRunner

    import drkit.kafka
    import drkit.kafka.clients
    from drkit.cli import cli
    from tests.fake_kafka import FakeClusters

    fakes = FakeClusters("dc1", "dc2")
    monkeypatch.setattr(drkit.kafka, "KafkaAdmin", fakes.connect)  # adopt's edge builds it
    monkeypatch.setattr(drkit.kafka.clients, "require_answering", lambda *_a, **_k: None)
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters: {dc1: {bootstrap_servers: '127.0.0.1:1'}, dc2: {bootstrap_servers: "
        "'127.0.0.1:2'}}\nflows: [{source: dc1, target: dc2}]\n"
    )
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "adopt", "--config",
                                    str(config), "--flow", "dc1:dc2", *on])  # fmt: skip
    assert done.exit_code == 4, done.output
    assert f"no topic mm2-offset-syncs.dc2.internal on {where}" in done.output
    assert "--mm2-syncs-topic" in done.output and "Traceback" not in done.output
    assert not fakes["dc2"].topics  # nothing written
