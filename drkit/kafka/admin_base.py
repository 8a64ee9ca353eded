"""The base of the admin facade: value objects, the client, deadlines and retries.

Every call takes a deadline (``timeout_s``), unwraps the futures, retries retriable broker errors
until the deadline (tenacity) and raises drkit exceptions.  Results are frozen value objects.
Thread-safety: one ``KafkaAdmin`` may be shared by threads (librdkafka's admin client is).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from confluent_kafka import (
    KafkaException,
)
from confluent_kafka.admin import (
    ClusterMetadata,
    ConfigSource,
)
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from drkit.clock import Budget, time_left
from drkit.errors import (
    CredentialsRefusedError,
    RetriableKafkaError,
    Stopped,
)
from drkit.kafka import lifetimes
from drkit.kafka.clients import ClusterEndpoint, client_settings, make_admin_client
from drkit.kafka.errors import error_code_name, is_credentials_error, translate
from drkit.kafka.interruptible import InFlight
from drkit.records import TopicPartition

T = TypeVar("T")


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class ConfigValue:
    """A topic config entry as the broker reports it."""

    value: str | None
    is_default: bool
    is_sensitive: bool
    read_only: bool
    # Where the value comes from: "DYNAMIC_TOPIC_CONFIG" when set on the topic itself.
    source: str = "UNKNOWN_CONFIG"

    @property
    def set_on_topic(self) -> bool:
        return self.source == "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class GroupOffsets:
    """Committed offsets of one consumer group."""

    group: str
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str
    members: int

    @property
    def is_empty(self) -> bool:
        """True when no member is active: the only state in which offsets may be written."""
        return self.state.upper() in ("EMPTY", "DEAD", "UNKNOWN") and self.members == 0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int | None = None  # None: the broker's default
    configs: Mapping[str, str] | None = None


def _source_name(source: object) -> str:
    """confluent-kafka reports a config's source as an int; name it like the enum does."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN_CONFIG"


class _LoginWatch:
    """The admin client's error callback: remembers a refused login (and holds nothing)."""

    __slots__ = ("refused",)

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, error: Any) -> None:
        if is_credentials_error(error):
            self.refused = f"{error_code_name(error)}: {error.str()}"


class AdminBase:
    """Admin operations against one cluster: the client and the retry/deadline machinery."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        default_timeout_s: float = 15.0,
        isolate: bool = True,
        helper: str = "requests",
        stop: threading.Event | None = None,
    ) -> None:
        self.endpoint = endpoint
        # Set when the owner stops (a flow of a replicator that got SIGTERM): a request under
        # way then is given up at once (Stopped) instead of waiting out its timeout on a
        # cluster that does not answer.  Requests made in a helper process are not covered.
        self._stop = stop
        self.default_timeout_s = default_timeout_s
        # Consumer-group requests run in a helper process (see drkit.kafka.isolated) unless
        # this instance *is* that helper.  ``helper`` names which of the endpoint's helpers:
        # bulk work (sampling every group's offsets) gets its own, so small timely requests
        # (a probe's) never queue behind it or share its crashes.
        self.isolate = isolate
        self.helper = helper
        # librdkafka reports a refused login only to error_cb; a request then fails with a
        # bare transport error.  Kept so the failure names its cause - in an object of its own:
        # a bound method of ``self`` would make a cycle (client -> callback -> self -> client),
        # and a client freed by the cyclic collector may be freed on one of librdkafka's own
        # threads, which aborts the process.
        self._login = _LoginWatch()
        settings = client_settings(endpoint)
        settings["error_cb"] = self._login
        self._client = make_admin_client(endpoint, settings)
        # Destroyed by close(), or by the reaper once this object is dropped: never by the
        # cyclic collector on a librdkafka thread (drkit.kafka.lifetimes).
        self._calls: lifetimes.Calls = set()
        self._lifetime = lifetimes.owned_by(self, self._client, self._calls)

    def close(self) -> None:
        """Destroy the admin client (idempotent); this object is unusable after.  Now, unless
        an interrupted metadata call still runs on it: then once that call ended."""
        if self._lifetime.detach() is not None:
            lifetimes.close_when_idle(self._client, self._calls)

    def _metadata(self, timeout_s: float) -> ClusterMetadata:
        """``list_topics`` - a call that blocks in C - waited on so that a Ctrl-C (or the
        owner's stop) acts at once (drkit.kafka.interruptible)."""
        return self._in_flight(
            lambda: self._client.list_topics(timeout=timeout_s), self._stop_to_watch()
        )

    def _stop_to_watch(self) -> threading.Event | None:
        """The owner's stop, unless it is set already: a request made once the stop was asked
        is part of the stopping (final progress, say) and is waited for like any other."""
        return self._stop if self._stop is not None and not self._stop.is_set() else None

    def _in_flight(self, fn: Callable[[], T], stop: threading.Event | None) -> T:
        """``fn()`` on a thread of its own, waited on so that a signal or ``stop`` ends the
        wait; the client outlives a call left running (close_when_idle)."""
        call = InFlight(fn)
        self._calls.add(call.thread)
        try:
            return call.wait(stop)
        finally:
            if not call.running:  # kept only while an interrupted call still runs in C
                self._calls.discard(call.thread)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _isolated(self, method: str, timeout_s: float | None, *args: Any) -> Any:
        from drkit.kafka.isolated import helper_for

        helper = helper_for(type(self), self.endpoint, self.default_timeout_s, self.helper)
        timeout = time_left(timeout_s, f"{self.endpoint.alias}: {method}")
        # A lease's budget crosses whole (CLOCK_MONOTONIC is the host's): the helper checks it
        # again before each of its tries and answers LeaseLost, re-raised here.
        sent = timeout_s if isinstance(timeout_s, Budget) else float(self._deadline(timeout))
        return helper.call(method, *args, timeout_s=sent)

    # -- helpers --------------------------------------------------------------------------

    def _deadline(self, timeout_s: float | None) -> float:
        return self.default_timeout_s if timeout_s is None else timeout_s

    def _call(self, context: str, timeout_s: float | None, fn: Callable[[float], T]) -> T:
        """Run ``fn(per_try_timeout)``, retrying retriable failures until the deadline.  A
        lease's :class:`~drkit.clock.Budget` is checked before every try (LeaseLost: nothing
        sent once the lease may have lapsed) and each try waits only what it has left."""
        what = f"{self.endpoint.alias}: {context}"
        deadline = self._deadline(time_left(timeout_s, what))
        stop = self._stop_to_watch()

        @retry(
            retry=retry_if_exception_type(RetriableKafkaError),
            stop=stop_after_delay(deadline),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            reraise=True,
        )
        def attempt() -> T:
            per_try = max(1.0, deadline)
            if isinstance(timeout_s, Budget):
                per_try = time_left(timeout_s, what) or per_try
            if stop is not None and stop.is_set():  # asked between two tries
                raise Stopped(f"{what}: given up, the process is stopping")
            try:
                if stop is None:
                    return fn(per_try)
                return self._in_flight(lambda: fn(per_try), stop)
            except KafkaException as err:
                self._client.poll(0)  # serve error_cb: was the login refused?
                if self._login.refused is not None:  # retrying cannot help
                    raise CredentialsRefusedError(
                        f"{self.endpoint.alias}: {context}: {self._login.refused}"
                    ) from None
                raise translate(err, f"{self.endpoint.alias}: {context}") from None
            except TimeoutError:
                raise RetriableKafkaError(
                    f"{self.endpoint.alias}: {context}: timed out after {deadline:.0f}s"
                ) from None

        return attempt()
