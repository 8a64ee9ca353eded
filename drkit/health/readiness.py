"""Could applications move to a flow's target right now, and what would it cost? (pure)

Inputs: the latest observation of the flow, the target cluster's agreed state, the time, and
the bounds of the config.  The answer is a :class:`FailoverReadiness`: ``possible`` only when
the target is HEALTHY, the flow was observed within ``health.observation_window_s`` and every
bound holds.  The bounds are the observation's fields' own (``Measure.bound`` in
drkit.health.observations, declared there with why), the ``failover`` policy's first (what a
move would cost), then the ``health`` policy's (is replication keeping up).

``failover.max_rpo_s`` is judged on the figure a failover plan judges it on (drkit.lag: 0 for a
partition caught up, else the age of the oldest record it lacks (or, where that span was not read,
the time since its progress last moved) - worst partition first; partitions whose seconds are
unknown fail it too, named beside the known ones' figure, drkit.lag.known_seconds), not on the
heartbeat's age: a fresh heartbeat says the link carries records, not that every partition is
copied.  Ages (a bound's ``age``) are taken *as of now*: the observed age plus the time since the
observation, so a monitor that stopped observing cannot make a stale flow look fresh.  An
unmeasured value (``None``: the cluster holding it did not answer, or nothing replicated yet) fails
its bound - a failover whose cost cannot be stated is not called possible.  ``lag_records`` is in
visible records (drkit.lag); when the observation could only bound it (``lag_exact`` false: too
wide to read, or a transaction open) the bound is checked - on the safe side.  Every failed bound
is named in ``failed_bounds`` (config key paths) and in ``reasons``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from drkit.config.model import FailoverPolicy, HealthPolicy
from drkit.health.evaluation import ClusterState
from drkit.health.observations import Bound, FlowObservation, measures


@dataclass(frozen=True)
class BoundCheck:
    """``measure`` (its value now, None if unknown) against the config bound ``bound``.

    ``unknown_partitions``: set on the check of the partitions whose value is unknown beside a
    known figure (their count; ``value`` None) - the measure keeps its field's name, so a
    reader grouping checks by measure meets one name per measure, never one per count."""

    measure: str
    bound: str
    value: float | None
    limit: float
    unknown_partitions: int | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None and self.value <= self.limit

    def reason(self) -> str:
        of = f" of {self.unknown_partitions} partition(s)" if self.unknown_partitions else ""
        if self.value is None:
            return f"{self.measure}{of} unknown ({self.bound} {self.limit:g} cannot be checked)"
        return f"{self.measure} {self.value:g} exceeds {self.bound} {self.limit:g}"

    def to_json(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "bound": self.bound,
            "value": self.value,
            "limit": self.limit,
            "ok": self.ok,
            **({"unknown_partitions": self.unknown_partitions} if self.unknown_partitions else {}),
        }


@dataclass(frozen=True)
class FailoverReadiness:
    possible: bool
    reasons: tuple[str, ...]
    rpo_records: int | None  # unreplicated records (lag) at the last observation
    rpo_seconds: float | None  # seconds of writes the target lacks now (drkit.lag)
    failed_bounds: tuple[str, ...]
    checks: tuple[BoundCheck, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "possible": self.possible,
            "reasons": list(self.reasons),
            "rpo_records": self.rpo_records,
            "rpo_seconds": self.rpo_seconds,
            "failed_bounds": list(self.failed_bounds),
            "checks": [c.to_json() for c in self.checks],
        }


def _age_now(age: float | None, observation: FlowObservation, now: float) -> float | None:
    return None if age is None else round(age + max(0.0, now - observation.at), 3)


def failover_readiness(
    observation: FlowObservation | None,
    target_state: ClusterState,
    now: float,
    health: HealthPolicy,
    failover: FailoverPolicy,
) -> FailoverReadiness:
    """See the module docstring."""
    reasons: list[str] = []
    if target_state is not ClusterState.HEALTHY:
        reasons.append(f"target is {target_state.value}")
    if observation is None:
        reasons.append("the flow was never observed")
        return FailoverReadiness(False, tuple(reasons), None, None, (), ())
    if now - observation.at > health.observation_window_s:
        reasons.append(
            f"no observation of the flow for {now - observation.at:.0f}s "
            f"(health.observation_window_s {health.observation_window_s:g})"
        )
    checks = tuple(
        check
        for name, bound in _bounds(type(observation))
        for check in _judged(
            name, bound, observation, now, {"health": health, "failover": failover}
        )
    )
    failed = [check for check in checks if not check.ok]
    reasons.extend(check.reason() for check in failed)
    return FailoverReadiness(
        possible=not reasons,
        reasons=tuple(reasons),
        rpo_records=observation.lag_records,
        rpo_seconds=_age_now(observation.rpo_s, observation, now),
        failed_bounds=tuple(dict.fromkeys(check.bound for check in failed)),
        checks=checks,
    )


def _bounds(kind: type[FlowObservation]) -> list[tuple[str, Bound]]:
    """The fields of ``kind`` with a bound: the failover policy's first, then the health
    policy's, each in declaration order."""
    bounded = [(name, known.bound) for name, known in measures(kind) if known.bound is not None]
    return sorted(bounded, key=lambda item: item[1].key.split(".", 1)[0] != "failover")


def _judged(
    name: str,
    bound: Bound,
    observation: FlowObservation,
    now: float,
    policies: dict[str, BaseModel],
) -> list[BoundCheck]:
    """``name``'s check against ``bound`` - and, where partitions' values are unknown
    (``bound.unknown``), theirs besides the known ones' figure, never in its place (as a
    failover plan warns of both)."""
    section, key = bound.key.split(".", 1)
    limit = getattr(policies[section], key)
    raw = getattr(observation, name)
    value = _age_now(raw, observation, now) if bound.age else (None if raw is None else float(raw))
    checks = [BoundCheck(name, bound.key, value, limit)]
    unknown = int(getattr(observation, bound.unknown)) if bound.unknown and value is not None else 0
    if unknown:
        checks.append(BoundCheck(name, bound.key, None, limit, unknown_partitions=unknown))
    return checks
