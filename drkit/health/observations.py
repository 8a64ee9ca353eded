"""What one probe of a flow found: a value object, stored as JSON and read back for status.

Built by :class:`drkit.health.probes.FlowProber` (I/O) - each of its checks
(:mod:`drkit.health.flow_checks`) measures the fields it owns -, persisted by the monitor
(``flow_status.data``) and turned into the status document by :mod:`drkit.status`;
``to_json``/``from_json`` are inverse, so the stored form is the schema's form.

Each field is declared once, here, with what the rest of drkit needs to know of it (a
:class:`Measure` in its metadata): how its stored form reads back (``decode``), the monitor's
gauge of it (``gauge``: drkit.health.metrics), the config bound readiness judges it on
(``bound``: drkit.health.readiness) and how status shows it (``shown``: the page's flows table
and ``drkit status``).  Those modules read the fields, never a list of their own.

``None`` means "not measured" (the cluster holding it did not answer, or nothing exists yet to
measure), never zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Self

DRIFT_LINES = 20  # config drift lines a flow observation keeps (the total is kept too)
MEASURE = "drkit.measure"  # the metadata key of a field's Measure


@dataclass(frozen=True)
class FlowGauge:
    """The monitor's gauge of a measure, labelled ``flow``; set while the measure is known."""

    name: str
    help: str


@dataclass(frozen=True)
class Bound:
    """The config bound readiness judges a measure on (``key``: the config key path, the
    ``failover`` or ``health`` policy's).  ``age``: the measure grows with time, so it is judged
    as of now (the observed value plus the time since).  ``unknown``: the field counting the
    partitions whose value is unknown - they fail the bound too, named beside the known ones'
    figure."""

    key: str
    age: bool = False
    unknown: str | None = None


@dataclass(frozen=True)
class Cell:
    """A measure as status shows it: ``text``, a ``note`` in small print after it, and on the
    page a ``state`` colour (a cluster state's: ``DEGRADED``...) around the text, on a
    terminal an ``alarm`` word in red before it."""

    text: str
    note: str = ""
    state: str | None = None
    alarm: str | None = None


# A measure's stored form (a flow of the status document, or the unobserved form) -> its cell.
Show = Callable[[Mapping[str, Any]], Cell]


@dataclass(frozen=True)
class Shown:
    """How status shows a measure: a column (``column``, its header) of the page's flows table
    (``page``); on ``drkit status`` ``label`` and the text on the flow's line, or - ``label``
    None - a line of its own below it (``terminal``).  Both read the stored form, so a flow
    nobody observed shows the same way everywhere."""

    column: str
    page: Show
    terminal: Show
    label: str | None = None


@dataclass(frozen=True)
class Measure:
    """What drkit knows of one field of an observation besides its value (each part optional:
    a field without a gauge has none, one without a bound is not judged by readiness...)."""

    decode: Callable[[Any], Any] | None = None  # stored form -> value, where they differ
    gauge: FlowGauge | None = None
    bound: Bound | None = None
    shown: Shown | None = None


_PLAIN = Measure()


def measure(
    default: Any = None,
    *,
    default_factory: Callable[[], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
    gauge: FlowGauge | None = None,
    bound: Bound | None = None,
    shown: Shown | None = None,
) -> Any:
    """A field of an observation, declared once with its :class:`Measure`."""
    metadata = {MEASURE: Measure(decode, gauge, bound, shown)}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def measures(kind: type[FlowObservation] | None = None) -> list[tuple[str, Measure]]:
    """Every measured field of ``kind`` (FlowObservation by default) in declaration order,
    with its :class:`Measure` - the one list status, readiness and the metrics read."""
    return [
        (f.name, f.metadata.get(MEASURE, _PLAIN))
        for f in fields(kind or FlowObservation)
        if f.name not in ("flow", "at")
    ]


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


def _age(name: str, suffix: str = "", spaced: bool = True) -> Show:
    def show(stored: Mapping[str, Any]) -> Cell:
        value = stored.get(name)
        gap = " " if spaced else ""
        return Cell("-" if value is None else f"{value:.1f}{gap}s{suffix}")

    return show


def _lag_cell(stored: Mapping[str, Any]) -> Cell:
    """The lag as measured: "unknown" when not, "at most N" when only bounded."""
    lag = stored.get("lag_records")
    if lag is None:
        return Cell("unknown")
    return Cell(f"at most {lag}" if stored.get("lag_exact") is False else str(lag))


def _checkpoints_cell(stored: Mapping[str, Any]) -> Cell:
    return replace(
        _age("checkpoint_age_s", " old")(stored), note=f"{len(stored.get('groups') or {})} groups"
    )


def _workers_cell(stored: Mapping[str, Any]) -> Cell:
    workers = stored.get("workers")
    return Cell("-" if workers is None else str(workers))


def _drift_listed(stored: Mapping[str, Any]) -> str:
    lines, more = stored["drift"], (stored.get("drift_total") or 0) - len(stored["drift"])
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")


def _drift_cell(stored: Mapping[str, Any]) -> Cell:
    if stored.get("drift") is None:
        return Cell("", "not compared yet")
    if not stored["drift"]:
        return Cell("", "none")
    return Cell(str(stored.get("drift_total")), _drift_listed(stored), state="DEGRADED")


def _drift_line(stored: Mapping[str, Any]) -> Cell:
    """Config drift as the monitor last compared it: none, the differences, or not known."""
    if stored.get("drift") is None:
        return Cell("config drift: not compared yet")
    if not stored["drift"]:
        return Cell("config drift: none (replicas match their source topics)")
    return Cell(f"{stored.get('drift_total')}: {_drift_listed(stored)}", alarm="CONFIG DRIFT")


def _groups(raw: Mapping[str, Any]) -> dict[str, GroupCheckpoints]:
    return {name: GroupCheckpoints(**values) for name, values in raw.items()}


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

    The order of the fields is the order of the page's columns and of ``drkit status``'s flow
    line; readiness judges the ``failover`` bounds first, then the ``health`` ones.
    """

    flow: str
    at: float
    heartbeat_age_s: float | None = measure(
        gauge=FlowGauge(
            "drkit_flow_heartbeat_age_seconds", "Age of the newest replicated heartbeat"
        ),
        bound=Bound("health.max_replication_lag_s", age=True),  # replication keeps up
        shown=Shown(
            "replication latency",
            _age("heartbeat_age_s"),
            _age("heartbeat_age_s", spaced=False),
            label="latency",
        ),
    )
    lag_records: int | None = measure(
        gauge=FlowGauge("drkit_flow_lag_records", "Source records not yet replicated"),
        bound=Bound("failover.max_rpo_records"),  # records not yet on the target: lost
        shown=Shown("lag (records)", _lag_cell, _lag_cell, label="lag"),
    )
    lag_by_topic: Mapping[str, int] = measure(default_factory=dict, decode=dict)
    lag_exact: bool | None = None  # None: no lag measured
    rpo_s: float | None = measure(  # seconds of writes not yet replicated
        bound=Bound("failover.max_rpo_s", age=True, unknown="rpo_s_unknown")
    )
    # partitions whose seconds are unknown (not in rpo_s)
    rpo_s_unknown: int = measure(0, decode=int)
    checkpoint_age_s: float | None = measure(
        gauge=FlowGauge("drkit_flow_checkpoint_age_seconds", "Since the last checkpoint round"),
        bound=Bound("health.max_replication_lag_s", age=True),  # group positions are fresh
        shown=Shown(
            "checkpoints",
            _checkpoints_cell,
            _age("checkpoint_age_s", " old", spaced=False),
            label="checkpoints",
        ),
    )
    groups: Mapping[str, GroupCheckpoints] = measure(default_factory=dict, decode=_groups)
    workers: int | None = measure(
        gauge=FlowGauge("drkit_flow_workers", "Replication workers in the group"),
        shown=Shown("workers", _workers_cell, _workers_cell, label="workers"),
    )
    errors: tuple[str, ...] = measure((), decode=tuple)
    # group -> Burrow status (the monitor's group sampling, not a check of the probe)
    group_lag: Mapping[str, str] = measure(default_factory=dict, decode=dict)
    # Config drift: how the replicas differ from their source topics (topic_sync.differences),
    # at most DRIFT_LINES of them; None: not compared (yet, or a cluster did not answer).
    drift: tuple[str, ...] | None = measure(
        decode=tuple, shown=Shown("config drift", _drift_cell, _drift_line)
    )
    drift_total: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field by its name (drkit.status's flow keys)."""
        return {f.name: _encode(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def unobserved_json(cls, flow: str) -> dict[str, Any]:
        """The stored form's keys for a flow no monitor has observed yet: nothing measured."""
        return cls(flow, at=0.0).to_json() | {"at": None}

    @classmethod
    def from_json(cls, flow: str, at: float, data: Mapping[str, Any]) -> Self:
        """The observation stored as ``data`` for ``flow`` at ``at`` (the row's columns); a
        key an older monitor did not write gets the field's default."""
        kept = {
            name: (known.decode or _same)(data[name])
            for name, known in measures(cls)
            if data.get(name) is not None
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
