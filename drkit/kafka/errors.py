"""Translate librdkafka errors into drkit's exception hierarchy."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError as _RdKafkaError
from confluent_kafka import KafkaException as _RdKafkaException

from drkit.errors import FatalKafkaError, KafkaError, RetriableKafkaError

# Error codes that say "try again later" even when librdkafka does not flag them retriable.
_RETRIABLE_CODES = {
    _RdKafkaError._TRANSPORT,
    _RdKafkaError._TIMED_OUT,
    _RdKafkaError._ALL_BROKERS_DOWN,
    _RdKafkaError.REQUEST_TIMED_OUT,
    _RdKafkaError.NOT_LEADER_FOR_PARTITION,
    _RdKafkaError.LEADER_NOT_AVAILABLE,
    # A broker restarting or leadership moving: the client's leader epoch is ahead of or behind
    # the broker's, or the new leader cannot answer yet (retriable in Kafka's protocol).
    _RdKafkaError.UNKNOWN_LEADER_EPOCH,
    _RdKafkaError.FENCED_LEADER_EPOCH,
    _RdKafkaError.OFFSET_NOT_AVAILABLE,
    _RdKafkaError.KAFKA_STORAGE_ERROR,
    _RdKafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
    _RdKafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    # The rest of the protocol's retriable answers: stale metadata, a fetch session or a quota
    # to wait out, an offset commit behind a pending transaction.
    _RdKafkaError.LISTENER_NOT_FOUND,
    _RdKafkaError.UNKNOWN_TOPIC_ID,
    _RdKafkaError.INCONSISTENT_TOPIC_ID,
    _RdKafkaError.FETCH_SESSION_ID_NOT_FOUND,
    _RdKafkaError.INVALID_FETCH_SESSION_EPOCH,
    _RdKafkaError.THROTTLING_QUOTA_EXCEEDED,
    _RdKafkaError.UNSTABLE_OFFSET_COMMIT,
    _RdKafkaError.NOT_COORDINATOR,
    _RdKafkaError.COORDINATOR_NOT_AVAILABLE,
    _RdKafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    _RdKafkaError.NETWORK_EXCEPTION,
    _RdKafkaError.UNKNOWN_TOPIC_OR_PART,
    _RdKafkaError.NOT_ENOUGH_REPLICAS,
    _RdKafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    _RdKafkaError.REBALANCE_IN_PROGRESS,
    _RdKafkaError.NOT_CONTROLLER,
}


# Errors a long-running replication flow cannot outwait: the operator must act (grant an ACL,
# fix a config, deal with a record the target refuses).  Everything else - timeouts, brokers
# down, leaders moving, coordinators loading - is transient for a flow, however long it lasts.
_FATAL_FOR_FLOW = {
    _RdKafkaError.TOPIC_AUTHORIZATION_FAILED,
    _RdKafkaError.GROUP_AUTHORIZATION_FAILED,
    _RdKafkaError.CLUSTER_AUTHORIZATION_FAILED,
    _RdKafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    _RdKafkaError.SASL_AUTHENTICATION_FAILED,
    _RdKafkaError._AUTHENTICATION,
    _RdKafkaError.INVALID_RECORD,
    _RdKafkaError.INVALID_MSG,
    _RdKafkaError.INVALID_TIMESTAMP,
    _RdKafkaError.POLICY_VIOLATION,
    _RdKafkaError.INVALID_CONFIG,
    _RdKafkaError.UNSUPPORTED_VERSION,
    _RdKafkaError.UNSUPPORTED_COMPRESSION_TYPE,
    _RdKafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    _RdKafkaError._INVALID_ARG,
    _RdKafkaError._UNSUPPORTED_FEATURE,
    # Creating a replica topic the target cannot hold as configured, or refuses to create:
    # the same request gets the same answer however often it is sent (INVALID_REQUEST:
    # "Duplicate topic name" for two topics routed onto one name, or onto an internal one).
    _RdKafkaError.INVALID_REPLICATION_FACTOR,
    _RdKafkaError.INVALID_REPLICA_ASSIGNMENT,
    _RdKafkaError.INVALID_PARTITIONS,
    _RdKafkaError.INVALID_REQUEST,
    _RdKafkaError.TOPIC_EXCEPTION,
}


def is_fatal_for_flow(error: Any) -> bool:
    """Whether a librdkafka error must stop a replication flow (else it retries, forever)."""
    return error is not None and error.code() in _FATAL_FOR_FLOW


_CREDENTIALS = {_RdKafkaError._AUTHENTICATION, _RdKafkaError.SASL_AUTHENTICATION_FAILED}


def is_credentials_error(error: Any) -> bool:
    """Whether a client-level error says the cluster refused drkit's login (wrong password,
    unknown user, mechanism not enabled) - never cured by retrying."""
    return error is not None and error.code() in _CREDENTIALS


def is_retriable(error: Any) -> bool:
    """Whether a ``confluent_kafka.KafkaError`` may succeed if retried."""
    if error is None:
        return False
    return bool(error.retriable()) or error.code() in _RETRIABLE_CODES


def error_code_name(error: Any) -> str:
    """The symbolic name of a librdkafka error (``"MSG_SIZE_TOO_LARGE"``)."""
    return str(error.name()) if error is not None else "UNKNOWN"


def is_code(error: Any, name: str) -> bool:
    """Whether ``error`` carries the librdkafka error code named ``name``."""
    return error is not None and error.code() == getattr(_RdKafkaError, name)


def callback_failure(error: BaseException) -> _RdKafkaException | None:
    """The librdkafka error behind ``error`` raised by a client call that serves callbacks
    (poll, flush): confluent-kafka sets a fatal error (e.g. CLUSTER_AUTHORIZATION_FAILED for
    an idempotent producer) as the pending exception and then runs the delivery callbacks, so
    the first C call inside one turns it into a SystemError whose cause is the real error."""
    if isinstance(error, _RdKafkaException):
        return error
    if isinstance(error, SystemError) and isinstance(error.__cause__, _RdKafkaException):
        return error.__cause__
    return None


def translate(error: Any, context: str) -> KafkaError:
    """A drkit exception for a librdkafka error (or an exception wrapping one)."""
    if isinstance(error, _RdKafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, _RdKafkaError):
        text = f"{context}: {error_code_name(error)}: {error.str()}"
        if is_retriable(error):
            return RetriableKafkaError(text)
        return FatalKafkaError(text, ends_flows=error.code() in _FATAL_FOR_FLOW)
    return KafkaError(f"{context}: {error}")
