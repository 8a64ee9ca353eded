"""A flow observation's stored form follows its fields, declared once: every field is a key,
the form reads back equal, a row an older monitor wrote (keys missing) reads with the fields'
defaults, and a flow nobody observed has the same keys, nothing measured."""

from __future__ import annotations

from dataclasses import fields

from drkit.health.observations import FlowObservation, GroupCheckpoints

SEEN = FlowObservation(
    "dc1->dc2",
    at=1_800_000_000.5,
    heartbeat_age_s=0.8,
    lag_records=12,
    lag_by_topic={"orders": 12},
    lag_exact=False,
    rpo_s=3.5,
    rpo_s_unknown=2,
    checkpoint_age_s=4.0,
    groups={"billing": GroupCheckpoints(3, 10, 2)},
    workers=2,
    errors=("dc1: timed out",),
    group_lag={"billing": "OK"},
    drift=("orders: partitions 3 != 6",),
    drift_total=1,
)


def test_every_field_is_a_key_and_the_form_reads_back_equal() -> None:
    stored = SEEN.to_json()
    assert list(stored) == [f.name for f in fields(FlowObservation)]
    assert stored["groups"] == {"billing": {"partitions": 3, "rereads": 10, "unreplicated": 2}}
    assert stored["errors"] == ["dc1: timed out"] and stored["drift"] == [
        "orders: partitions 3 != 6"
    ]
    assert FlowObservation.from_json(SEEN.flow, SEEN.at, stored) == SEEN


def test_an_older_row_reads_with_defaults_and_an_unobserved_flow_has_every_key() -> None:
    older = {"heartbeat_age_s": 0.8, "lag_records": 5, "lag_exact": True, "retired_key": 1}
    read = FlowObservation.from_json("f", 1.0, older)
    assert (read.rpo_s, read.rpo_s_unknown, read.groups, read.errors, read.drift) == (
        None, 0, {}, (), None,
    )  # fmt: skip
    unobserved = FlowObservation.unobserved_json("f")
    assert list(unobserved) == list(SEEN.to_json())
    assert unobserved["at"] is None and unobserved["lag_records"] is None
    assert unobserved["lag_by_topic"] == {} and unobserved["errors"] == []
