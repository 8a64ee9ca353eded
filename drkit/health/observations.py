"""What one probe of a flow found: a value object, stored as JSON and read back for status.

Built by :class:`drkit.health.probes.FlowProber` (I/O), persisted by the monitor
(``flow_status.data``) and turned into the status document by :mod:`drkit.status`;
``to_json``/``from_json`` are inverse, so the stored form is the schema's form.

``None`` means "not measured" (the cluster holding it did not answer, or nothing exists yet to
measure), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

DRIFT_LINES = 20  # config drift lines a flow observation keeps (the total is kept too)


@dataclass(frozen=True)
class GroupCheckpoints:
    """The latest checkpoints of one consumer group: how many partitions, and what moving the
    group now would cost (records read again, records not yet replicated)."""

    partitions: int = 0
    rereads: int = 0
    unreplicated: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "partitions": self.partitions,
            "rereads": self.rereads,
            "unreplicated": self.unreplicated,
        }


@dataclass(frozen=True)
class FlowObservation:
    """One probe of a flow: replication latency, lag, checkpoints, workers, errors.

    ``lag_records`` counts every record of a replicated source partition that is still readable on
    the source and not yet on the target - including partitions that have no progress yet (all their
    records) - in visible records (drkit.lag: aborted records and transaction markers are not
    records).  ``lag_exact`` is False when some partition's span was too wide to read or had a
    transaction open: its share is then the offset width, an upper bound.  ``lag_by_topic`` splits
    it per source topic.  ``rpo_s``: the seconds of writes the target lacks, its worst partition's
    (drkit.lag.rpo_seconds: 0 where caught up, else the age of the oldest record it lacks, or of its
    last progress where that was not read) among those whose seconds are known, and
    ``rpo_s_unknown`` how many partitions' seconds are not (drkit.lag.known_seconds) - what
    readiness judges ``failover.max_rpo_s`` on, as a failover plan does; ``heartbeat_age_s`` says
    whether the link carries records.
    """

    flow: str
    at: float
    heartbeat_age_s: float | None = None
    lag_records: int | None = None
    lag_by_topic: Mapping[str, int] = field(default_factory=dict)
    lag_exact: bool | None = None  # None: no lag measured
    rpo_s: float | None = None
    rpo_s_unknown: int = 0  # partitions whose seconds are unknown (not in rpo_s)
    checkpoint_age_s: float | None = None
    groups: Mapping[str, GroupCheckpoints] = field(default_factory=dict)
    workers: int | None = None
    errors: tuple[str, ...] = ()
    group_lag: Mapping[str, str] = field(default_factory=dict)  # group -> Burrow status
    # Config drift: how the replicas differ from their source topics (topic_sync.differences),
    # at most DRIFT_LINES of them; None: not compared (yet, or a cluster did not answer).
    drift: tuple[str, ...] | None = None
    drift_total: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field by its name (drkit.status's flow keys)."""
        return {f.name: _encode(getattr(self, f.name)) for f in fields(self)}

    @staticmethod
    def unobserved_json(flow: str) -> dict[str, Any]:
        """The stored form's keys for a flow no monitor has observed yet: nothing measured."""
        return FlowObservation(flow, at=0.0).to_json() | {"at": None}

    @classmethod
    def from_json(cls, flow: str, at: float, data: Mapping[str, Any]) -> FlowObservation:
        """The observation stored as ``data`` for ``flow`` at ``at`` (the row's columns); a
        key an older monitor did not write gets the field's default."""
        kept = {
            f.name: _DECODE.get(f.name, _same)(data[f.name])
            for f in fields(cls)
            if f.name not in ("flow", "at") and data.get(f.name) is not None
        }
        return cls(flow=flow, at=at, **kept)


def _encode(value: Any) -> Any:
    """A field's JSON form: mappings as dicts (their values' own forms), tuples as lists."""
    if isinstance(value, GroupCheckpoints):
        return value.to_json()
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


def _same(value: Any) -> Any:
    return value


# How a stored value becomes a field's again, where its JSON form differs (the rest as stored).
_DECODE: dict[str, Any] = {
    "lag_by_topic": dict,
    "rpo_s_unknown": int,
    "groups": lambda raw: {name: GroupCheckpoints(**values) for name, values in raw.items()},
    "errors": tuple,
    "group_lag": dict,
    "drift": tuple,
}
