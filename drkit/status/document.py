"""The status picture shared by ``/api/status``, the status page and ``drkit status``.

Built only from the state store (what every monitor has written) and the config, so any process
sees the same picture.  :func:`build_status` is pure over those rows and values - the last
failover run as its record (drkit.failover.runs.RunRecord, its result typed) - and returns a
typed :class:`StatusSnapshot`; :meth:`StatusSnapshot.to_json` is the document.

Schema ``drkit.status/v2`` (v1 wrote its moments as epoch seconds; v2 as ISO-8601 UTC
strings, ``2026-11-26T15:02:19.123Z`` - every ``*_at``, ``at`` and ``since``)::

    {"schema", "generated_at", "observers": [str],
     "clusters": {alias: {"state", "down", "down_votes", "quorum", "observers":
                          {name: {"state", "since", "updated_at", "fresh", "probe", "reason"}}}},
     "flows": {name: {"source", "target", "observed_at", <every field of FlowObservation>,
                      "lost_records", "losses": [{"topic", "partition", "first_offset",
                                                  "last_offset", "count", "reason",
                                                  "detected_at", "detected_by"}],
                      "failover": {"possible", "reasons", "rpo_records", "rpo_seconds",
                                   "failed_bounds", "checks": [{"measure", "bound", "value",
                                                                "limit", "ok"}]},
                      "control": {"desired", "epoch", "running": [worker],
                                  "failed": {worker: error}} | null}},
     "active_cluster", "pointer": {"cluster", "epoch", "run", "updated_at"} | null,
     "last_failover": {"id", "kind", "source", "target", "state", "started_at",
                       "finished_at", "divergence": {"at", "records",
                                                     "per_partition": {"topic:p": n}} | null}
                      | null,
     "pending_fences": {cluster: [topic]},
     "automation": {"allowed", "reason", "paused": {"by", "reason", "at"} | null,
                    "unacknowledged_runs": [int],
                    "last_decision": {"observer", "source", "target", "act", "summary",
                                      "at", "run"} | null},
     "transitions": [{"kind", "subject", "observer", "from", "to", "at", "reason"}]}

A flow's observation is every field of :class:`drkit.health.observations.FlowObservation` by
its name (``flow``, ``at``, ``heartbeat_age_s``, ``lag_records``... - its stored form, declared
once there); its fields are ``null`` until a monitor has observed the flow (``observed_at`` null).
``drift`` lists how the replicas differ from their source topics (missing, partitions, topic
configs; the first 20, ``drift_total`` counts them all), compared once a minute; null until
compared.  ``lost_records`` totals the flow's recorded loss events (source records deleted
before they were replicated, see :mod:`drkit.replication.loss`); ``losses`` lists them,
oldest first.  A flow with losses is not OK however healthy its replication is now.
``failover`` is
:mod:`drkit.health.readiness`: ``failed_bounds`` names the config bounds that fail.
``control`` is the flow's directive (drkit.control) and its workers: ``running`` the live ones
that acted on RUNNING at its epoch, ``failed`` those whose flow ended for good, with the error
(null when no directive was written and no worker reported).
``active_cluster`` is the cluster clients should use: the failover engine's active pointer
(drkit.failover.pointer) when one was ever set, else the first flow's source.
``automation`` says whether health-triggered failover may act (config, observers, block
window, ``drkit automation pause``, unacknowledged automatic runs) and the reasons of the
monitor's last stored decision (drkit.automation).
``pending_fences`` lists topics of clusters that could not be fenced when a failover ran
(unreachable then); they are fenced as soon as they answer.

This package sits above drkit.health and drkit.failover: it reads what both wrote.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from drkit.automation.decision import Pause
from drkit.automation.journal import StoredDecision
from drkit.config.model import DrkitConfig
from drkit.failover.model import RunState
from drkit.failover.pointer import Pointer, active_cluster
from drkit.failover.run_result import Divergence
from drkit.failover.runs import RunRecord
from drkit.health.evaluation import ClusterState
from drkit.health.identity import is_vote
from drkit.health.observations import FlowObservation
from drkit.health.quorum import AutomationGate, ObserverReport, automation_gate, verdict
from drkit.health.readiness import FailoverReadiness, failover_readiness
from drkit.replication.loss import LossEvent
from drkit.store.models import FlowStatus, HealthTransition, ObserverState
from drkit.timestamps import iso_or_none, iso_utc

SCHEMA = "drkit.status/v2"


def _divergence_json(divergence: Divergence | None) -> dict[str, Any] | None:
    """The divergence report, its moment (epoch seconds as stored) in ISO-8601 UTC."""
    if divergence is None:
        return None
    return {**divergence.to_json(), "at": iso_utc(divergence.at)}


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


@dataclass(frozen=True)
class ObserverView:
    state: ClusterState
    since: float | None
    updated_at: float
    fresh: bool
    probe: Mapping[str, Any]  # the probe's evidence as stored (ProbeResult.evidence())
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "since": iso_or_none(self.since),
            "updated_at": iso_utc(self.updated_at),
            "fresh": self.fresh,
            "probe": dict(self.probe),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ClusterView:
    state: ClusterState
    down: bool
    down_votes: tuple[str, ...]
    quorum: int
    observers: Mapping[str, ObserverView]

    @property
    def unavailable(self) -> bool:
        """Agreed UNAVAILABLE, or no fresh observer gets an answer from it now (each says
        UNAVAILABLE or its latest probe did not reach it): not a quorum for failover, nor a
        state change before the threshold, but what the operator must hear."""
        if self.state is ClusterState.UNAVAILABLE:
            return True
        fresh = [o for o in self.observers.values() if o.fresh]
        return bool(fresh) and all(
            o.state is ClusterState.UNAVAILABLE or o.probe.get("reachable") is False for o in fresh
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "down": self.down,
            "down_votes": list(self.down_votes),
            "quorum": self.quorum,
            "observers": {name: o.to_json() for name, o in self.observers.items()},
        }


def loss_json(event: LossEvent) -> dict[str, Any]:
    return {
        "topic": event.source.topic,
        "partition": event.source.partition,
        "first_offset": event.first_offset,
        "last_offset": event.last_offset,
        "count": event.count,
        "reason": event.reason.value,
        "detected_at": iso_utc(event.detected_at_ms / 1000),
        "detected_by": event.detected_by,
    }


@dataclass(frozen=True)
class FlowControlView:
    """A flow's directive and what its workers reported (drkit.control)."""

    desired: str
    epoch: int
    running: tuple[str, ...]  # live workers that acted on RUNNING at this epoch
    failed: Mapping[str, str]  # worker -> the error its flow ended on

    @property
    def not_running(self) -> bool:
        """The directive wants the flow running and no live worker runs it."""
        return self.desired == "running" and not self.running

    def to_json(self) -> dict[str, Any]:
        return {
            "desired": self.desired,
            "epoch": self.epoch,
            "running": list(self.running),
            "failed": dict(self.failed),
        }


@dataclass(frozen=True)
class FlowView:
    name: str
    source: str
    target: str
    observation: FlowObservation | None  # the latest, from any observer
    losses: tuple[LossEvent, ...]
    failover: FailoverReadiness
    control: FlowControlView | None = None
    observed: type[FlowObservation] = FlowObservation  # what its observations are read as

    @property
    def lost_records(self) -> int:
        return sum(event.count for event in self.losses)

    def to_json(self) -> dict[str, Any]:
        observed = (
            self.observation.to_json()
            if self.observation is not None
            else self.observed.unobserved_json(self.name)
        )
        at = iso_or_none(self.observation.at if self.observation is not None else None)
        return {
            **observed,
            "at": at,
            "source": self.source,
            "target": self.target,
            "observed_at": at,
            "lost_records": self.lost_records,
            "losses": [loss_json(event) for event in self.losses],
            "failover": self.failover.to_json(),
            "control": self.control.to_json() if self.control is not None else None,
        }


@dataclass(frozen=True)
class TransitionView:
    kind: str  # a SubjectKind value as stored
    subject: str
    observer: str
    from_state: str | None
    to_state: str
    at: float | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "observer": self.observer,
            "from": self.from_state,
            "to": self.to_state,
            "at": iso_or_none(self.at),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class FailoverRunView:
    id: int
    kind: str
    source: str
    target: str
    state: str
    started_at: float | None
    finished_at: float | None
    # The old primary's records the target never got, once it answered again (maintenance).
    divergence: Divergence | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "source": self.source,
            "target": self.target,
            "state": self.state,
            "started_at": iso_or_none(self.started_at),
            "finished_at": iso_or_none(self.finished_at),
            "divergence": _divergence_json(self.divergence),
        }


@dataclass(frozen=True)
class DrillView:
    """The latest ended drill of one kind (``drill`` or ``readiness``)."""

    id: int
    name: str
    flow: str
    state: str
    verdict: str | None
    finished_at: float
    rto_s: float | None
    rpo_records: int | None
    passed: bool  # drkit.drills.figures.passed: the one rule, for status and the gauges

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "flow": self.flow,
            "state": self.state,
            "verdict": self.verdict,
            "passed": self.passed,
            "finished_at": iso_utc(self.finished_at),
            "rto_s": self.rto_s,
            "rpo_records": self.rpo_records,
        }


@dataclass(frozen=True)
class StatusSnapshot:
    generated_at: float
    observers: tuple[str, ...]  # observers with a fresh report
    clusters: Mapping[str, ClusterView]
    flows: Mapping[str, FlowView]
    active_cluster: str | None
    pointer: Pointer | None
    last_failover: FailoverRunView | None
    pending_fences: Mapping[str, tuple[str, ...]]
    automation: AutomationView
    transitions: tuple[TransitionView, ...]
    # The latest ended drill of each kind (drill, readiness): scheduled or by hand.
    drills: Mapping[str, DrillView] = field(default_factory=dict)

    @property
    def active_unavailable(self) -> bool:
        """The cluster applications use now is unavailable (``drkit status`` exits 3)."""
        active = self.clusters.get(self.active_cluster) if self.active_cluster else None
        return active is not None and active.unavailable

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "generated_at": iso_utc(self.generated_at),
            "observers": list(self.observers),
            "clusters": {alias: c.to_json() for alias, c in self.clusters.items()},
            "flows": {name: f.to_json() for name, f in self.flows.items()},
            "active_cluster": self.active_cluster,
            "pointer": (
                {
                    "cluster": self.pointer.cluster,
                    "epoch": self.pointer.epoch,
                    "run": self.pointer.run_id,
                    "updated_at": iso_utc(self.pointer.updated_at),
                }
                if self.pointer is not None
                else None
            ),
            "last_failover": self.last_failover.to_json() if self.last_failover else None,
            "pending_fences": {c: list(t) for c, t in sorted(self.pending_fences.items())},
            "automation": self.automation.to_json(),
            "transitions": [t.to_json() for t in self.transitions],
            "drills": {kind: view.to_json() for kind, view in sorted(self.drills.items())},
        }


@dataclass(frozen=True)
class AutomationView:
    """Automatic failover as the status shows it: may it act, and what it decided last."""

    gate: AutomationGate
    paused: Pause | None = None
    unacknowledged: tuple[int, ...] = ()
    last_decision: StoredDecision | None = None

    @property
    def allowed(self) -> bool:
        return self.gate.allowed and self.paused is None and not self.unacknowledged

    @property
    def reason(self) -> str:
        """Every reason it may not act (all of them: each needs its own remedy)."""
        reasons = []
        if self.paused is not None:
            reasons.append(f"paused by {self.paused.by}: {self.paused.reason or 'no reason given'}")
        if self.unacknowledged:
            reasons.append(f"blocked until 'drkit automation ack {self.unacknowledged[0]}'")
        if not self.gate.allowed or not reasons:
            reasons.append(self.gate.reason)
        return "; ".join(reasons)

    def to_json(self) -> dict[str, Any]:
        last = self.last_decision
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "paused": (
                {"by": self.paused.by, "reason": self.paused.reason, "at": iso_utc(self.paused.at)}
                if self.paused is not None
                else None
            ),
            "unacknowledged_runs": list(self.unacknowledged),
            "last_decision": (
                {
                    "observer": last.observer,
                    "source": last.source,
                    "target": last.target,
                    "act": last.act,
                    "summary": last.summary,
                    "at": iso_utc(last.at),
                    "run": last.run_id,
                }
                if last is not None
                else None
            ),
        }


def build_status(
    config: DrkitConfig,
    states: Sequence[ObserverState],
    flows: Sequence[FlowStatus],
    transitions: Sequence[HealthTransition],
    last_failover: RunRecord | None,
    losses: Mapping[str, Sequence[LossEvent]] | None = None,
    now: float | None = None,
    pointer: Pointer | None = None,
    pending_fences: Mapping[str, Sequence[str]] | None = None,
    automation: AutomationView | None = None,
    control: Mapping[str, FlowControlView] | None = None,
    drills: Mapping[str, DrillView] | None = None,
    observed: type[FlowObservation] = FlowObservation,
) -> StatusSnapshot:
    """The picture (pure over the store's rows, each flow's read as ``observed``; ``now``
    defaults to the clock)."""
    now = time.time() if now is None else now
    policy = config.health
    reports = [
        ObserverReport(s.observer, s.cluster, ClusterState(s.state), s.updated_at.timestamp())
        for s in states
    ]
    fresh_observers = tuple(
        sorted({r.observer for r in reports if now - r.at <= policy.observation_window_s})
    )
    clusters = {alias: _cluster(alias, states, reports, config, now) for alias in config.clusters}
    latest = _latest_observations(flows, observed)
    flow_views = {
        flow.name: FlowView(
            flow.name,
            flow.source,
            flow.target,
            latest.get(flow.name),
            tuple((losses or {}).get(flow.name, ())),
            failover_readiness(
                latest.get(flow.name),
                clusters[flow.target].state,
                now,
                policy,
                config.failover,
            ),
            (control or {}).get(flow.name),
            observed,
        )
        for flow in config.flows
    }
    run = _failover_run(last_failover)
    return StatusSnapshot(
        generated_at=now,
        observers=fresh_observers,
        clusters=dict(sorted(clusters.items())),
        flows=flow_views,
        active_cluster=active_cluster(pointer, config),
        pointer=pointer,
        last_failover=run,
        pending_fences={c: tuple(sorted(t)) for c, t in (pending_fences or {}).items()},
        automation=replace(
            automation or AutomationView(AutomationGate(False, "")),
            gate=automation_gate(
                config.failover,
                policy,
                len(fresh_observers),
                run.finished_at if run is not None and run.state == RunState.SUCCEEDED else None,
                now,
            ),
        ),
        transitions=tuple(
            TransitionView(
                t.subject_kind,
                t.subject,
                t.observer,
                t.from_state,
                t.to_state,
                _ts(t.at),
                (t.evidence or {}).get("reason"),
            )
            for t in transitions
        ),
        drills=dict(drills or {}),
    )


def _cluster(
    alias: str,
    states: Sequence[ObserverState],
    reports: Sequence[ObserverReport],
    config: DrkitConfig,
    now: float,
) -> ClusterView:
    # The agreed state is the monitors' quorum; drkit status's own probes are shown, not counted.
    decided = verdict(alias, [r for r in reports if is_vote(r.observer)], config.health, now)
    return ClusterView(
        state=decided.state,
        down=decided.down,
        down_votes=decided.down_votes,
        quorum=decided.quorum,
        observers={
            s.observer: ObserverView(
                state=ClusterState(s.state),
                since=_ts(s.since),
                updated_at=s.updated_at.timestamp(),
                fresh=now - s.updated_at.timestamp() <= config.health.observation_window_s,
                probe=(s.evidence or {}).get("probe") or {},
                reason=(s.evidence or {}).get("reason"),
            )
            for s in states
            if s.cluster == alias
        },
    )


def _latest_observations(
    rows: Sequence[FlowStatus], observed: type[FlowObservation]
) -> dict[str, FlowObservation]:
    """Per flow, the newest observation any observer stored."""
    newest: dict[str, FlowStatus] = {}
    for row in rows:
        known = newest.get(row.flow)
        if known is None or row.observed_at > known.observed_at:
            newest[row.flow] = row
    return {
        flow: observed.from_json(flow, row.observed_at.timestamp(), row.data or {})
        for flow, row in newest.items()
    }


def _failover_run(run: RunRecord | None) -> FailoverRunView | None:
    if run is None:
        return None
    return FailoverRunView(
        run.id,
        run.procedure.value,
        run.source,
        run.target,
        run.state.value,
        _ts(run.started_at),
        _ts(run.finished_at),
        run.result.divergence,
    )
