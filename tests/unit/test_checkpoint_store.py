"""The checkpoint snapshot answers per group from an index, with the same answers as a scan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from drkit.offsets.checkpoint import Checkpoint
from drkit.offsets.checkpoint_store import CheckpointSnapshot, CheckpointStore
from drkit.records import TopicPartition


def test_for_group_returns_exactly_that_groups_latest_checkpoints() -> None:
    latest = {
        (group, TopicPartition("dc1.orders", p)): Checkpoint(
            group, TopicPartition("dc1.orders", p), 100 + p, 90 + p
        )
        for group in ("a", "b", "a.b")
        for p in range(3)
    }
    snapshot = CheckpointSnapshot(latest, None)
    for group in ("a", "b", "a.b"):
        found = snapshot.for_group(group)
        assert found == {tp: c for (g, tp), c in latest.items() if g == group}
        found.clear()  # callers get their own dict
        assert len(snapshot.for_group(group)) == 3
    assert snapshot.for_group("unknown") == {}


def test_unchecked_names_each_group_not_yet_checkpointed_in_order() -> None:
    """What a drill waits on before it breaks the source: a tick alone is not a checkpoint."""
    tp = TopicPartition("dc1.orders", 0)
    snapshot = CheckpointSnapshot({("billing", tp): Checkpoint("billing", tp, 5, 5)}, 1_000)
    assert snapshot.unchecked(["analytics", "billing", "audit"]) == [
        "analytics",
        "audit",
    ]
    assert snapshot.unchecked(["billing"]) == []
    assert CheckpointSnapshot({}, 1_000).unchecked(["billing"]) == ["billing"]


def _headers(checkpoint: Checkpoint) -> tuple[tuple[str, bytes | None], ...]:
    """A checkpoint's headers as a consumer hands them over (values as bytes)."""
    return tuple(
        (name, value.encode() if isinstance(value, str) else value)
        for name, value in checkpoint.headers()
    )


def test_checkpoints_decoded_with_a_header_seen_before_carry_the_same_info() -> None:
    """Decoded headers are kept by their bytes (a round stamps its checkpoints alike): a
    checkpoint decodes to what it was encoded from whether its header was seen or not, and the
    kept headers stay bounded however many distinct ones arrive."""
    from drkit.offsets import checkpoint as module

    tp = TopicPartition("dc1.orders", 0)
    infos = [{"source_topic": "orders", "rereads": n % 3, "at_ms": 1_000} for n in range(9)]
    for n, info in enumerate(infos):
        written = Checkpoint(f"g{n}", tp, 100 + n, 90 + n, "", info)
        for _twice in range(2):
            read = Checkpoint.decode(written.key(), written.value(), _headers(written))
            assert (read, read.info) == (written, info)
    for n in range(module._INFO_CACHE_SIZE + 10):
        written = Checkpoint("g", tp, n, n, "", {"at_ms": n})
        read = Checkpoint.decode(written.key(), written.value(), _headers(written))
        assert read.info == {"at_ms": n}
    assert len(module._INFO_CACHE) <= module._INFO_CACHE_SIZE


def test_committed_by_group_maps_each_checkpoint_back_to_its_source_partition() -> None:
    """S per source partition, named by each checkpoint's ``source_topic`` header and its
    replica's partition; a checkpoint without the header is left out, ticks are not groups."""
    info = {"source_topic": "orders"}
    latest = {
        ("a", TopicPartition("dc1.orders", 0)): Checkpoint(
            "a", TopicPartition("dc1.orders", 0), 5, 4, "", info
        ),
        ("a", TopicPartition("dc1.orders", 1)): Checkpoint(
            "a", TopicPartition("dc1.orders", 1), 7, 7, "", info
        ),
        ("b", TopicPartition("dc1.orders", 0)): Checkpoint(
            "b", TopicPartition("dc1.orders", 0), 9, 9
        ),
    }
    snapshot = CheckpointSnapshot(latest, 1_000)
    assert snapshot.committed_by_group == {
        "a": {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 7}
    }
    assert snapshot.committed_by_group is snapshot.committed_by_group  # built once


class _Payloads:
    """A tailer that hands over fixed ``(key, value, headers)`` records once."""

    def __init__(self, records: list[tuple[bytes | None, bytes | None, tuple[Any, ...]]]) -> None:
        self.records = records

    def catch_up_payloads(self, timeout_s: float) -> Iterator[Any]:
        yield from self.records
        self.records = []

    def close(self) -> None:
        pass


def test_a_truncated_checkpoint_record_is_skipped_and_the_rest_are_read() -> None:
    """A record on the checkpoints topic that is not a checkpoint - here a key cut short, which
    the decoder reports as struct.error - is skipped like any undecodable record, not the end of
    the read (before, it failed every plan that read the topic).  Nothing appended since: the
    same snapshot comes back."""
    tp = TopicPartition("dc1.orders", 0)
    good = Checkpoint("billing", tp, 5, 4, "", {"source_topic": "orders"})
    store = CheckpointStore.__new__(CheckpointStore)
    store._latest, store._tick, store._snapshot = {}, None, None
    store._tailer = _Payloads(  # type: ignore[assignment]
        [(good.key()[:3], good.value(), ()), (good.key(), good.value()[:5], ()),
         (good.key(), good.value(), _headers(good))]
    )  # fmt: skip
    first = store.refresh()
    assert first.latest == {("billing", tp): good}
    assert first.committed_by_group == {"billing": {TopicPartition("orders", 0): 5}}
    assert store.refresh() is first
