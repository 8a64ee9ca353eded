"""A realistic drill report for tests of what reads or renders ``DrillReport``.

The story: a full failover drill, dc1 -> dc2.  A producer writes ~500 records/s to ``orders``
(6 partitions) from t=5 s; at t=60 s all of dc1's brokers are stopped; the monitor declares dc1
unavailable at 69.5 s, automation starts the failover at 81.5 s, it finishes at 99.75 s, and the
last of two consumer groups processes on dc2 at 106.5 s.  73 records were acknowledged by dc1
and never copied.  Every figure below agrees with that story (the RTO parts with the timeline,
the failover steps with the execution time, the series with the events).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from drkit.drills.report import (
    DrillCheck,
    DrillReport,
    Event,
    GroupOutcome,
    RtoBreakdown,
    Series,
    Targets,
    UnreplicatedPartition,
    Verdict,
    WriteCondition,
)

SAMPLE_INTERVAL_S = 3.0
SAMPLES = 120
FAULT_AT_S = 60.0
FAILOVER_FINISHED_AT_S = 99.75
CLIENTS_RESUMED_AT_S = 106.5
LOAD = (5.0, 300.0)  # the producer runs from .. to
LOST = (12, 0, 31, 7, 19, 4)  # records per partition of ``orders``; 73 in all
LOST_AGE_S = (0.8, 0.0, 1.6, 0.4, 1.1, 0.3)
RECORD_BYTES = 512

TIMELINE = (
    Event(0.0, "drill_started", "scenario dc1-total-loss"),
    Event(5.0, "load_started", "producer: 500 records/s to orders; groups billing, shipping"),
    Event(FAULT_AT_S, "fault_injected", "stopped all 3 brokers of dc1"),
    Event(69.5, "source_unavailable", "2 of 2 observers declared dc1 UNAVAILABLE"),
    Event(81.5, "failover_started", "automation started failover run fo-7c1e (dc1 -> dc2)"),
    Event(FAILOVER_FINISHED_AT_S, "pointer_moved", "active cluster pointer now dc2"),
    Event(101.2, "group_resumed", "billing processed its first record on dc2"),
    Event(CLIENTS_RESUMED_AT_S, "clients_resumed", "shipping resumed on dc2; every group has"),
    Event(LOAD[1], "load_stopped", "producer stopped"),
    Event(330.0, "verification_finished", "drkit verify: positions exact for 2 groups"),
)

FAILOVER_STEPS = (
    ("snapshot", 0.85),
    ("fence source", 2.40),
    ("stop replication", 1.10),
    ("wait for checkpoints", 3.60),
    ("translate offsets", 4.25),
    ("sync consumer groups", 2.95),
    ("move pointer", 0.65),
    ("notify", 2.45),
)


def _series() -> Series:
    """~500 records/s while the load runs; copying stops at the fault with 73 records behind;
    from the failover on the producer writes to dc2 directly."""
    t: list[float] = []
    source_end: list[int] = []
    target_end: list[int] = []
    lag: list[int] = []
    produced_per_s: list[float] = []
    copied_per_s: list[float] = []
    on_source = on_target = 0
    lost = sum(LOST)
    for index in range(SAMPLES):
        now = index * SAMPLE_INTERVAL_S
        loaded = LOAD[0] <= now < LOAD[1]
        rate = round(500 + 40 * math.sin(index * 0.7), 1) if loaded else 0.0
        written = round(rate * SAMPLE_INTERVAL_S)
        if now < FAULT_AT_S:
            behind = 40 + round(25 * math.sin(index * 1.3)) if loaded else 0
            on_source += written
            target_end_now = max(on_target, on_source - behind)
            copied = (target_end_now - on_target) / SAMPLE_INTERVAL_S
            on_target = target_end_now
            lag_now, produced, copied_now = on_source - on_target, rate, copied
        elif now < CLIENTS_RESUMED_AT_S:
            on_target = on_source - lost
            lag_now = lost if now < FAILOVER_FINISHED_AT_S else 0
            produced, copied_now = 0.0, 0.0
        else:
            on_target += written
            lag_now, produced, copied_now = 0, rate, 0.0
        t.append(now)
        source_end.append(on_source)
        target_end.append(on_target)
        lag.append(lag_now)
        produced_per_s.append(produced)
        copied_per_s.append(round(copied_now, 1))
    return Series(
        t=tuple(t),
        source_end=tuple(source_end),
        target_end=tuple(target_end),
        lag=tuple(lag),
        produced_per_s=tuple(produced_per_s),
        copied_per_s=tuple(copied_per_s),
    )


def sample_report(**overrides: Any) -> DrillReport:
    """The sample drill (verdict PolicyMet, RTO 46.5 s, RPO 73 records / 37,376 B / 1.6 s);
    ``overrides`` replace fields by name (``dataclasses.replace``)."""
    report = DrillReport(
        id="drill-20250314-0900-a1b2",
        scenario="dc1-total-loss",
        title="Quarterly DR drill: lose dc1",
        mode="full",
        procedure="failover",
        source="dc1",
        target="dc2",
        started_at="2025-03-14T09:00:00+00:00",
        finished_at="2025-03-14T09:06:10+00:00",
        fault={
            "kind": "broker_stop",
            "at_s": FAULT_AT_S,
            "how": "docker stop on dc1's 3 brokers",
            "note": "",
        },
        targets=Targets(rto_s=120.0, rpo_records=1000, rpo_s=5.0, reread_records=500),
        rto=RtoBreakdown(detection_s=9.5, decision_s=12.0, execution_s=18.25, client_resume_s=6.75),
        rpo=tuple(
            UnreplicatedPartition("orders", partition, records, records * RECORD_BYTES, age)
            for partition, (records, age) in enumerate(zip(LOST, LOST_AGE_S, strict=True))
        ),
        groups=(
            GroupOutcome("billing", 27_450, 96_790, 0, 42, 1.45, True),
            GroupOutcome("shipping", 27_380, 96_790, 0, 118, 6.75, True),
        ),
        checks=(
            DrillCheck("replica topics exist", True, "orders: 6 partitions on dc2"),
            DrillCheck("replication caught up before the fault", True, "lag 58 records at t=57 s"),
            DrillCheck("failover run succeeded", True, "fo-7c1e SUCCEEDED in 18.25 s"),
            DrillCheck("pointer on target", True, "active cluster dc2"),
            DrillCheck("every group resumed", True, "billing 1.45 s, shipping 6.75 s"),
            DrillCheck("no record skipped", True, "0 skipped in 2 groups"),
            DrillCheck("accounting reconciles", True, "produced = copied + lost + written on dc2"),
        ),
        verdict=Verdict.POLICY_MET,
        reasons=(),
        timeline=TIMELINE,
        series=_series(),
        failover_run={
            "id": "fo-7c1e",
            "procedure": "failover",
            "state": "SUCCEEDED",
            "steps": [{"name": name, "seconds": seconds} for name, seconds in FAILOVER_STEPS],
            "translations": [
                {
                    "group": "billing",
                    "partition": 0,
                    "source_offset": 912,
                    "target_offset": 874,
                    "method": "exact",
                },
                {
                    "group": "billing",
                    "partition": 1,
                    "source_offset": 55,
                    "target_offset": None,
                    "method": "unmapped",
                },
            ],
        },
        accounting={
            "method": "copy-runs",
            "elapsed_s": 41.2,
            "totals": {
                "records": 124_313,
                "replicated_once": 124_240,
                "duplicated_records": 0,
                "missing": 0,
                "unreplicated_tail": sum(LOST),
                "skipped_by_groups": 0,
                "read_again_by_groups": 160,
            },
            "groups": [
                {
                    "group": "billing",
                    "src_topic": "orders",
                    "src_partition": 0,
                    "s": 912,
                    "t": 874,
                    "t_kind": "checkpoint",
                    "skipped": 0,
                    "read_again": 42,
                },
            ],
        },
        notes=(
            "dc1's brokers were stopped, not killed: their logs survive for the recount.",
            "Sample interval 3 s.",
        ),
        # Asked 500/s; the writers reached a little less (2 of 6 partitions' leaders were busy).
        conditions=(WriteCondition("orders", 6, 500.0, 487.5, 124_313, 0),),
    )
    return replace(report, **overrides)


def small_report(
    scenario: str = "broker-loss",
    verdict: Verdict = Verdict.POLICY_MET,
    lost: int = 3,
    execution_s: float = 4.25,
) -> DrillReport:
    """A full-mode report with every part filled in."""
    return DrillReport(
        id=f"{scenario}-20240501T100000Z",
        scenario=scenario,
        title=f"Lose {scenario}",
        mode="full",
        procedure="failover",
        source="dc1",
        target="dc2",
        started_at="2024-05-01T10:00:00+00:00",
        finished_at="2024-05-01T10:01:30+00:00",
        fault={"kind": "kill-brokers", "at_s": 10.5, "how": "killed 3 brokers", "note": ""},
        targets=Targets(rto_s=60.0, rpo_records=10, rpo_s=5.0),
        rto=RtoBreakdown(
            detection_s=1.5, decision_s=0.25, execution_s=execution_s, client_resume_s=2.0
        ),
        rpo=(
            UnreplicatedPartition("orders", 0, lost, 300, 0.75),
            UnreplicatedPartition("orders", 1, 0, 0, 0.0),
        ),
        groups=(
            GroupOutcome("billing", 100, 50, 0, 7, 1.25, True),
            GroupOutcome("audit", 40, 0, 2, 0, None, None),
        ),
        checks=(
            DrillCheck("pointer-moved", True, "dc2"),
            DrillCheck("no-skips", False, "audit skipped 2"),
        ),
        verdict=verdict,
        reasons=() if verdict is Verdict.POLICY_MET else ("RPO 30 records over the target 10",),
        timeline=(Event(0.0, "start"), Event(10.5, "fault", "kill-brokers")),
        series=Series(
            t=(0.0, 1.0),
            source_end=(10, 20),
            target_end=(9, 18),
            lag=(1, 2),
            produced_per_s=(10.0, 10.0),
            copied_per_s=(9.0, 9.0),
        ),
        failover_run={"id": 1, "procedure": "failover", "state": "succeeded", "steps": []},
        accounting=None,
        notes=("a note",),
    )
