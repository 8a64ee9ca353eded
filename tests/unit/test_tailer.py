"""The bookkeeping-topic reader's decision: which partitions to read, or why it cannot (pure)."""

from __future__ import annotations

import pytest

from drkit.errors import FatalKafkaError, RetriableKafkaError
from drkit.kafka.tailer import TopicMetadata, readable_partitions

TOPIC, CLUSTER = "drkit-progress.dc1.internal", "dc2"


@pytest.mark.parametrize(
    "answer",
    [None, TopicMetadata((), "UNKNOWN_TOPIC_OR_PART")],
    ids=["absent from the answer", "unknown topic"],
)
def test_a_missing_topic_raises_naming_topic_and_cluster(answer: TopicMetadata | None) -> None:
    with pytest.raises(RetriableKafkaError) as raised:
        readable_partitions(answer, TOPIC, CLUSTER, missing_ok=False)
    assert TOPIC in str(raised.value) and CLUSTER in str(raised.value)


def test_absence_reads_as_empty_only_by_explicit_opt_in() -> None:
    assert readable_partitions(None, TOPIC, CLUSTER, missing_ok=True) == ()
    unknown = TopicMetadata((), "UNKNOWN_TOPIC_OR_PART")
    assert readable_partitions(unknown, TOPIC, CLUSTER, missing_ok=True) == ()


@pytest.mark.parametrize("missing_ok", [False, True])
def test_a_metadata_error_raises_even_for_callers_that_tolerate_absence(missing_ok: bool) -> None:
    leaderless = TopicMetadata((0,), "LEADER_NOT_AVAILABLE", retriable=True)
    with pytest.raises(RetriableKafkaError) as raised:
        readable_partitions(leaderless, TOPIC, CLUSTER, missing_ok=missing_ok)
    assert TOPIC in str(raised.value) and "LEADER_NOT_AVAILABLE" in str(raised.value)
    denied = TopicMetadata((), "TOPIC_AUTHORIZATION_FAILED", retriable=False)
    with pytest.raises(FatalKafkaError) as fatal:
        readable_partitions(denied, TOPIC, CLUSTER, missing_ok=missing_ok)
    assert CLUSTER in str(fatal.value)


def test_a_topic_without_partitions_is_not_read_as_empty() -> None:
    with pytest.raises(RetriableKafkaError):
        readable_partitions(TopicMetadata(()), TOPIC, CLUSTER, missing_ok=True)


def test_a_healthy_topic_gives_its_partitions() -> None:
    answer = TopicMetadata((0, 1, 2))
    assert readable_partitions(answer, TOPIC, CLUSTER, missing_ok=False) == (0, 1, 2)
