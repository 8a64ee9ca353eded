"""How long and how often a replication flow retries: patience measured from the last success.

A flow is a long-running loop: it retries transient errors (brokers down, leaders moving,
delivery timeouts, a state store away) with capped exponential backoff for as long as they
last - forever by default.  When ``retry.give_up_after_s`` is set, the flow gives up only after
that long *without a success* (a progress round the target acknowledged), never counted from
the flow's start: a flow that ran for a week and then meets one error gets the whole window.

:class:`WorkerLiveness` is shared by the flow's attempts (a restarted worker keeps it); the
decisions are pure functions of it and the policy, so they are unit-tested without clocks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from tenacity import RetryCallState

from drkit.config.model import RetryPolicy
from drkit.errors import DrkitError, FatalKafkaError, KafkaError, StateStoreError


@dataclass
class WorkerLiveness:
    """When one flow last succeeded, and how many failures followed (monotonic clock)."""

    last_success: float = field(default_factory=time.monotonic)
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def succeeded(self, now: float | None = None) -> None:
        with self._lock:
            self.last_success = time.monotonic() if now is None else now
            self.failures = 0

    def failed(self) -> int:
        """Count one failure; returns the failures since the last success."""
        with self._lock:
            self.failures += 1
            return self.failures

    def idle_s(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.last_success


def backoff_s(failures: int, policy: RetryPolicy) -> float:
    """Seconds to wait before the next attempt after ``failures`` failures in a row."""
    if failures <= 0:
        return 0.0
    return float(min(policy.max_backoff_s, 0.5 * 2 ** min(failures - 1, 30)))


def out_of_patience(
    liveness: WorkerLiveness, policy: RetryPolicy, now: float | None = None
) -> bool:
    """Whether the flow has gone ``give_up_after_s`` without a success (never, by default)."""
    return policy.give_up_after_s is not None and liveness.idle_s(now) > policy.give_up_after_s


def is_transient(error: BaseException) -> bool:
    """Errors a flow retries: Kafka trouble that is not fatal, and a state store away."""
    if isinstance(error, FatalKafkaError):
        return not error.ends_flows
    return isinstance(error, KafkaError | StateStoreError)


def is_fatal(error: BaseException) -> bool:
    return isinstance(error, DrkitError) and not is_transient(error)


class PatienceStop:
    """tenacity ``stop``: give up when the flow has been without success for too long."""

    def __init__(self, liveness: WorkerLiveness, policy: RetryPolicy) -> None:
        self.liveness = liveness
        self.policy = policy

    def __call__(self, _state: RetryCallState) -> bool:
        return out_of_patience(self.liveness, self.policy)


class SuccessBackoff:
    """tenacity ``wait``: capped exponential in the failures since the last success."""

    def __init__(self, liveness: WorkerLiveness, policy: RetryPolicy) -> None:
        self.liveness = liveness
        self.policy = policy

    def __call__(self, _state: RetryCallState) -> float:
        return backoff_s(self.liveness.failed(), self.policy)
