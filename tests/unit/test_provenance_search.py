"""The provenance fallback over an in-memory target partition (the search logic, no broker)."""

from __future__ import annotations

from collections.abc import Generator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.offsets.provenance_search import ProvenanceReader, SourcePartition, find_target_offset
from drkit.records import Record, TopicPartition
from drkit.replication.provenance import SOURCE_HEADER
from drkit.translation import TargetBounds

TARGET = TopicPartition("dc1.orders", 0)
P0 = SourcePartition("dc1", TopicPartition("orders", 0))
P1 = SourcePartition("dc1", TopicPartition("orders", 1))


class FakePartition:
    """A target partition: one entry per offset, ``None`` for a record without provenance."""

    def __init__(self, headers: list[str | None], start: int = 0) -> None:
        self.headers = headers
        self.start = start
        self.reads = 0

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        assert tp == TARGET
        self.reads += 1
        for position in range(max(offset, self.start), self.start + len(self.headers)):
            raw = self.headers[position - self.start]
            headers = ((SOURCE_HEADER, raw.encode()),) if raw is not None else ()
            yield Record(tp.topic, tp.partition, position, b"k", b"v", headers)

    @property
    def bounds(self) -> TargetBounds:
        return TargetBounds(self.start, self.start + len(self.headers))


def layout(p1_ahead: int, foreign_every: int) -> list[str | None]:
    headers: list[str | None] = []
    for i in range(200):
        headers += [f"dc1/orders/0/{i}", f"dc1/orders/1/{i + p1_ahead}"]
        if foreign_every and i % foreign_every == 0:
            headers += [f"dc9/orders/0/{i + 5}", f"dc1/payments/0/{i + 7}", None]
    return headers


@pytest.mark.parametrize("source_offset", [0, 1, 10, 77, 199])
def test_interleaved_copies_of_two_source_partitions_find_each_ones_own_copy(
    source_offset: int,
) -> None:
    partition = FakePartition(layout(p1_ahead=30, foreign_every=7))
    reader = ProvenanceReader(partition)
    for source in (P0, P1):
        wanted = f"dc1/orders/{source.tp.partition}/{source_offset}"
        found = find_target_offset(reader, TARGET, source, source_offset, partition.bounds)
        if wanted in partition.headers:
            assert found == (partition.headers.index(wanted), True)
        else:  # partition 1 starts at 30: S below it resumes at its first copy
            assert found == (partition.headers.index("dc1/orders/1/30"), False)


def test_past_every_copy_resumes_right_after_the_last_one_and_none_without_copies() -> None:
    headers = [*layout(p1_ahead=0, foreign_every=0), "dc1/payments/0/999", None]
    partition = FakePartition(headers, start=40)
    reader = ProvenanceReader(partition)
    last = 40 + headers.index("dc1/orders/0/199")
    assert find_target_offset(reader, TARGET, P0, 500, partition.bounds) == (last + 1, False)
    nobody = SourcePartition("dc1", TopicPartition("orders", 7))
    assert find_target_offset(reader, TARGET, nobody, 3, partition.bounds) is None


@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=120),
    st.integers(0, 400),
)
@settings(max_examples=200, deadline=None)
def test_search_finds_the_first_own_copy_at_or_after_s(
    steps: list[tuple[bool, int]], source_offset: int
) -> None:
    """Own copies (source gaps of 1-3) mixed with foreign ones at random."""
    headers: list[str | None] = []
    own: list[tuple[int, int]] = []  # (position, source offset)
    offset = 0
    for mine, gap in steps:
        if mine:
            own.append((len(headers), offset))
            headers.append(f"dc1/orders/0/{offset}")
            offset += gap
        else:
            headers.append(f"dc1/orders/1/{source_offset + gap}")
    partition = FakePartition(headers)
    found = find_target_offset(
        ProvenanceReader(partition), TARGET, P0, source_offset, partition.bounds
    )
    if not own:
        assert found is None
        return
    after = [(position, src) for position, src in own if src >= source_offset]
    if after:
        assert found == (after[0][0], after[0][1] == source_offset)
    else:
        assert found == (own[-1][0] + 1, False)
