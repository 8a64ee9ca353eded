"""drkit.lag: the one definition of lag, RPO and divergence - visible records in a span."""

from __future__ import annotations

from drkit.lag import SpanCount, count_visible
from drkit.records import TopicPartition
from tests.fake_kafka import FakeCluster

A, B = TopicPartition("orders", 0), TopicPartition("orders", 1)


def _cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.add_topic("orders", 2)
    cluster.append("orders", 0, 10)
    cluster.append_invisible("orders", 0, 3)  # an aborted batch and its marker
    cluster.append("orders", 0, 2)
    cluster.append("orders", 1, 4)
    return cluster


def test_aborted_records_and_markers_are_not_records() -> None:
    counts = count_visible(_cluster(), {A: (5, 15), B: (0, 4)}, limit=None)
    assert counts == {A: SpanCount(10, 7), B: SpanCount(4, 4)}
    assert counts[A].exact and counts[A].at_most == 7


def test_an_empty_or_inverted_span_is_zero_without_a_read() -> None:
    cluster = _cluster()
    counts = count_visible(cluster, {A: (15, 15), B: (4, 2)}, limit=0)
    assert counts == {A: SpanCount(0, 0), B: SpanCount(0, 0)}
    assert "visible_records" not in cluster.calls and "stable_offsets" not in cluster.calls


def test_spans_wider_than_the_limit_are_bounded_not_counted() -> None:
    counts = count_visible(_cluster(), {A: (0, 15), B: (0, 4)}, limit=18)
    assert counts == {A: SpanCount(15), B: SpanCount(4)}
    assert not counts[A].exact and counts[A].at_most == 15


def test_a_span_with_an_open_transaction_is_not_counted_the_others_are() -> None:
    cluster = _cluster()
    cluster.open_transaction("orders", 1)
    cluster.append("orders", 1, 5)  # inside the open transaction: may still abort
    counts = count_visible(cluster, {A: (0, 15), B: (0, 9)}, limit=None)
    assert counts == {A: SpanCount(15, 12), B: SpanCount(9)}
