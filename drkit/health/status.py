"""The status picture shared by ``/api/status``, the status page and ``drkit status``.

Built only from the state store (what every monitor has written) and the config, so any process
sees the same picture.  ``build_status`` is pure over those rows.

Schema ``drkit.status/v1``::

    {"schema", "generated_at", "observers": [str],
     "clusters": {alias: {"state", "down", "down_votes", "quorum", "observers":
                          {name: {"state", "since", "updated_at", "probe"}}}},
     "flows": {name: {"source", "target", "observed_at", "heartbeat_age_s", "lag_records",
                      "lag_by_topic", "checkpoint_age_s", "workers", "groups", "errors",
                      "failover": {"possible", "reasons", "rpo_records", "rpo_seconds"}}},
     "active_cluster", "last_failover", "automation": {"allowed", "reason"},
     "transitions": [{"kind", "subject", "observer", "from", "to", "at", "reason"}]}
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from drkit.config.model import DrkitConfig
from drkit.health.evaluation import ClusterState
from drkit.health.quorum import ObserverReport, automation_gate, verdict
from drkit.store.models import FailoverRun, FlowStatus, HealthTransition, ObserverState

SCHEMA = "drkit.status/v1"


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def build_status(
    config: DrkitConfig,
    states: Sequence[ObserverState],
    flows: Sequence[FlowStatus],
    transitions: Sequence[HealthTransition],
    last_failover: FailoverRun | None,
    now: float | None = None,
) -> dict[str, Any]:
    now = time.time() if now is None else now
    policy = config.health
    reports = [
        ObserverReport(s.observer, s.cluster, ClusterState(s.state), s.updated_at.timestamp())
        for s in states
    ]
    fresh_observers = sorted(
        {r.observer for r in reports if now - r.at <= policy.observation_window_s}
    )
    clusters: dict[str, Any] = {}
    for alias in sorted(config.clusters):
        decided = verdict(alias, reports, policy, now)
        clusters[alias] = {
            "state": decided.state.value,
            "down": decided.down,
            "down_votes": list(decided.down_votes),
            "quorum": decided.quorum,
            "observers": {
                s.observer: {
                    "state": s.state,
                    "since": _ts(s.since),
                    "updated_at": _ts(s.updated_at),
                    "fresh": now - s.updated_at.timestamp() <= policy.observation_window_s,
                    "probe": (s.evidence or {}).get("probe", {}),
                    "reason": (s.evidence or {}).get("reason"),
                }
                for s in states
                if s.cluster == alias
            },
        }
    latest_flow: dict[str, FlowStatus] = {}
    for candidate in flows:
        known = latest_flow.get(candidate.flow)
        if known is None or candidate.observed_at > known.observed_at:
            latest_flow[candidate.flow] = candidate
    flow_view: dict[str, Any] = {}
    for flow in config.flows:
        row = latest_flow.get(flow.name)
        data = dict(row.data) if row is not None else {}
        data.update(
            {
                "source": flow.source,
                "target": flow.target,
                "observed_at": _ts(row.observed_at) if row else None,
            }
        )
        data["failover"] = _readiness(data, clusters.get(flow.target, {}), now, policy)
        flow_view[flow.name] = data
    return {
        "schema": SCHEMA,
        "generated_at": now,
        "observers": fresh_observers,
        "clusters": clusters,
        "flows": flow_view,
        "active_cluster": _active_cluster(config, last_failover),
        "last_failover": _failover(last_failover),
        "automation": vars(automation_gate(config.failover, policy, len(fresh_observers))),
        "transitions": [
            {
                "kind": t.subject_kind,
                "subject": t.subject,
                "observer": t.observer,
                "from": t.from_state,
                "to": t.to_state,
                "at": _ts(t.at),
                "reason": (t.evidence or {}).get("reason"),
            }
            for t in transitions
        ],
    }


def _readiness(
    flow: dict[str, Any], target: dict[str, Any], now: float, policy: Any
) -> dict[str, Any]:
    """Could applications move to this flow's target right now, and what would it cost?"""
    reasons: list[str] = []
    if target.get("state") != ClusterState.HEALTHY.value:
        reasons.append(f"target is {target.get('state', 'UNKNOWN')}")
    observed = flow.get("observed_at")
    if observed is None or now - observed > policy.observation_window_s:
        reasons.append("no recent observation of the flow")
    if flow.get("checkpoint_age_s") is None:
        reasons.append("no checkpoints yet")
    heartbeat = flow.get("heartbeat_age_s")
    if heartbeat is None:
        reasons.append("no replicated heartbeat yet")
    return {
        "possible": not reasons,
        "reasons": reasons,
        "rpo_records": flow.get("lag_records"),
        "rpo_seconds": heartbeat,
    }


def _active_cluster(config: DrkitConfig, last: FailoverRun | None) -> str | None:
    if last is not None and last.state == "completed":
        return last.target
    return config.flows[0].source if config.flows else None


def _failover(run: FailoverRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": run.id,
        "kind": run.kind,
        "source": run.source,
        "target": run.target,
        "state": run.state,
        "started_at": _ts(run.started_at),
        "finished_at": _ts(run.finished_at),
    }
