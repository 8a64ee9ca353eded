"""The commits the group coordinator logs on ``__consumer_offsets``, decoded and followed
(drkit.offsets.commit_log): the byte layouts are the ones a Kafka 4.1 broker wrote here (a
classic consumer's commit, a KIP-848 group's records, a tombstone), and following the log from
a snapshot taken after the capture point converges on the log's own answer."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drkit.offsets.commit_log import CommittedOffsets, OffsetCommit, decode
from drkit.records import TopicPartition

# Recorded from a Kafka 4.1.2 broker: group "g-peek" committed 3 on peek-0.
COMMIT_KEY = b"\x00\x01\x00\x06g-peek\x00\x04peek\x00\x00\x00\x00"
COMMIT_VALUE_V4 = struct.pack(">hqi", 4, 3, -1) + b"\x01" + struct.pack(">q", 1) + b"\x00"
KIP848_KEYS = [
    b"\x00\x03\x00\x05g-new",  # consumer group metadata
    b"\x00\x05\x00\x05g-new\x00\x164HXLKraUQnOoXCwL/wHYMQ",  # a member
    b"\x00\x02\x00\x05g-new",  # classic group metadata
]


def test_an_offset_commit_a_tombstone_and_group_metadata_decode_as_the_broker_wrote_them() -> None:
    peek = TopicPartition("peek", 0)
    assert decode(COMMIT_KEY, COMMIT_VALUE_V4) == OffsetCommit("g-peek", peek, 3)
    assert decode(COMMIT_KEY, struct.pack(">hq", 0, 17) + b"\x00\x00") == OffsetCommit(
        "g-peek", peek, 17
    )  # version 0 values: the offset first too
    assert decode(COMMIT_KEY, None) == OffsetCommit("g-peek", peek, None)
    for key in KIP848_KEYS:
        assert decode(key, b"\x00\x00") is None
        assert decode(key, None) is None


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (None, b"", "without a key version"),
        (COMMIT_KEY[:-2], COMMIT_VALUE_V4, "malformed offset-commit key"),
        (b"\x00\x01\x00\x40g", COMMIT_VALUE_V4, "malformed offset-commit key"),
        (COMMIT_KEY, b"\x00\x04\x00", "malformed offset-commit value of group g-peek on peek-0"),
    ],
)
def test_a_malformed_offset_commit_is_an_error_naming_it(
    key: bytes | None, value: bytes, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        decode(key, value)


def test_followed_offsets_index_groups_by_partition_and_name_what_changed() -> None:
    a, b = TopicPartition("orders", 0), TopicPartition("orders", 1)
    state = CommittedOffsets(lambda group: not group.startswith("skip"))
    state.load({"g1": {a: 5}, "skip-me": {a: 1}})
    assert state.take_changed() == {"g1"}
    state.apply([OffsetCommit("g1", a, 5), OffsetCommit("skip-me", b, 9)])  # nothing moved
    assert state.take_changed() == set()
    state.apply([OffsetCommit("g2", b, 7), OffsetCommit("g1", a, None)])
    assert state.take_changed() == {"g1", "g2"}
    assert state.by_group == {"g2": {b: 7}}  # g1 lost its only commit: gone
    assert state.on(a) == set() and state.on(b) == {"g2"} and state.partitions() == {b}
    state.apply([OffsetCommit("g2", b, -1), OffsetCommit("g3", a, None)])
    assert state.by_group == {} and state.take_changed() == {"g2"}  # g3 never had one


GROUPS = st.sampled_from(["g1", "g2", "g3"])
PARTS = st.sampled_from([TopicPartition("t", 0), TopicPartition("t", 1)])
COMMITS = st.lists(st.builds(OffsetCommit, GROUPS, PARTS, st.none() | st.integers(-1, 50)))


def _replayed(log: list[OffsetCommit]) -> dict[str, dict[TopicPartition, int]]:
    state = CommittedOffsets(lambda group: True)
    state.apply(log)
    return state.by_group


@given(COMMITS, st.data())
@settings(max_examples=300, deadline=None)
def test_a_snapshot_taken_after_the_capture_then_the_log_from_it_equals_the_whole_log(
    log: list[OffsetCommit], data: st.DataObject
) -> None:
    capture = data.draw(st.integers(0, len(log)))
    taken = data.draw(st.integers(capture, len(log)))  # the admin read comes after the capture
    state = CommittedOffsets(lambda group: True)
    state.load(_replayed(log[:taken]))
    state.apply(log[capture:])
    assert state.by_group == _replayed(log)
    for tp in (TopicPartition("t", 0), TopicPartition("t", 1)):
        assert state.on(tp) == {g for g, offsets in state.by_group.items() if tp in offsets}
