"""librdkafka errors translated into drkit's hierarchy: what Kafka's protocol calls retriable is."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as RdKafkaError

from drkit.errors import FatalKafkaError, RetriableKafkaError
from drkit.kafka.errors import translate

# Answers a broker gives while it restarts or leadership moves (retriable in Kafka's protocol)
# that librdkafka may hand over without its retriable flag: a CI run stopped a flow on
# "list earliest offsets: UNKNOWN_LEADER_EPOCH" seconds after the target broker came back.
LEADERSHIP_MOVING = [
    "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",
    "KAFKA_STORAGE_ERROR",
    "PREFERRED_LEADER_NOT_AVAILABLE",
]

# The rest of what Kafka's protocol calls retriable (RetriableException or
# InvalidMetadataException in the Java client): metadata that is stale, a fetch session or a
# quota to wait out, an offset commit still in a transaction.
PROTOCOL_RETRIABLE = [
    "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    "LISTENER_NOT_FOUND",
    "THROTTLING_QUOTA_EXCEEDED",
    "UNSTABLE_OFFSET_COMMIT",
    "UNKNOWN_TOPIC_ID",
    "INCONSISTENT_TOPIC_ID",
]


@pytest.mark.parametrize("name", LEADERSHIP_MOVING + PROTOCOL_RETRIABLE)
def test_answers_kafka_calls_retriable_are_retriable(name: str) -> None:
    error = RdKafkaError(getattr(RdKafkaError, name))
    assert isinstance(translate(error, "list earliest offsets"), RetriableKafkaError)


def test_an_authorization_failure_stays_fatal() -> None:
    error = RdKafkaError(RdKafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert isinstance(translate(error, "list earliest offsets"), FatalKafkaError)


def test_a_commit_is_tried_again_only_while_the_group_coordinator_is_busy() -> None:
    from drkit.errors import FatalKafkaError, RetriableKafkaError
    from drkit.kafka.io import _coordinator_busy

    loading = "dc1: commit offsets of group g: COORDINATOR_LOAD_IN_PROGRESS: Commit failed"
    assert _coordinator_busy(RetriableKafkaError(loading))
    assert _coordinator_busy(RetriableKafkaError("dc1: commit g: NOT_COORDINATOR"))
    assert not _coordinator_busy(RetriableKafkaError("dc1: commit g: REBALANCE_IN_PROGRESS"))
    assert not _coordinator_busy(FatalKafkaError(loading))


def test_a_flow_outwaits_a_topic_deleted_under_it_but_stops_on_what_an_operator_must_fix() -> None:
    """Issue 52: the reverse flow's only topic deleted while its worker took it over ended the
    flow for good ("list earliest offsets: _NOENT: No leaders found").  Such answers are fatal
    for the call, not for a flow: it starts its session again from the topics that exist."""
    import pickle

    from drkit.replication.supervision import is_transient

    gone = translate(RdKafkaError(RdKafkaError._NOENT), "list earliest offsets")
    assert isinstance(gone, FatalKafkaError) and not gone.ends_flows
    assert is_transient(gone)
    for name in ("TOPIC_AUTHORIZATION_FAILED", "_INVALID_ARG", "INVALID_REPLICATION_FACTOR"):
        refused = translate(RdKafkaError(getattr(RdKafkaError, name)), "create topics")
        assert isinstance(refused, FatalKafkaError) and refused.ends_flows, name
        assert not is_transient(refused), name
    # The flag survives the trip back from an isolated helper process.
    again = pickle.loads(pickle.dumps(gone))
    assert isinstance(again, FatalKafkaError) and not again.ends_flows and str(again) == str(gone)


@pytest.mark.parametrize(
    "name",
    [
        "INVALID_REQUEST",  # "Duplicate topic name" (trial 5, e36): retried for ever
        "INVALID_PARTITIONS",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_REPLICA_ASSIGNMENT",
        "INVALID_CONFIG",
        "POLICY_VIOLATION",
        "TOPIC_EXCEPTION",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
    ],
)
def test_a_topic_creation_the_target_refuses_for_good_ends_the_flow(name: str) -> None:
    from drkit.replication.supervision import is_transient

    refused = translate(RdKafkaError(getattr(RdKafkaError, name)), "create topic t")
    assert isinstance(refused, FatalKafkaError) and refused.ends_flows, name
    assert not is_transient(refused) and name in str(refused)
