"""DrillRepository over a migrated store: reports round-trip, failures close the row."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from drkit.drills.repo import DrillRepository, DrillState
from drkit.drills.report import Verdict
from drkit.store.db import StateStore
from drkit.store.models import Drill
from tests.drill_samples import small_report as report


def test_start_then_finish_round_trips_the_report_exactly(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    drill_id = drills.start("broker-loss", "dc1->dc2")
    running = drills.get(drill_id)
    assert running is not None
    assert (running.state, running.report, running.error, running.finished_at) == (
        DrillState.RUNNING, None, None, None
    )  # fmt: skip

    sent = report()
    drills.finish(drill_id, sent, "/var/drills/broker-loss-1")

    row = drills.get(drill_id)
    assert row is not None
    assert row.report == sent
    assert row.state == "finished"
    assert row.verdict is Verdict.POLICY_MET
    assert sent.rto is not None and row.rto_s == sent.rto.total_s == 8.0
    assert row.rpo_records == 3
    assert row.report_dir == "/var/drills/broker-loss-1"
    assert row.error is None
    assert row.finished_at is not None and row.finished_at >= row.started_at
    with migrated_store.session() as session:
        stored = session.scalars(select(Drill).where(Drill.id == drill_id)).one()
        assert stored.report["schema"] == "drkit.drill/v1"
        assert stored.report["report_dir"] == "/var/drills/broker-loss-1"
        assert stored.failover_run_id is None


def test_a_readiness_report_without_rto_stores_no_rto(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    drill_id = drills.start("ready", "dc1->dc2")
    sent = replace(report(), mode="readiness", rto=None, rpo=(), verdict=Verdict.READY)
    drills.finish(drill_id, sent, "/tmp/r")
    row = drills.get(drill_id)
    assert row is not None
    assert (row.report, row.rto_s, row.rpo_records) == (sent, None, 0)


def test_fail_closes_the_drill_with_its_error(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    drill_id = drills.start("broker-loss", "dc1->dc2")
    drills.fail(drill_id, "cluster dc2 is unreachable")
    row = drills.get(drill_id)
    assert row is not None
    assert row.state == "failed"
    assert row.error == "cluster dc2 is unreachable"
    assert (row.report, row.verdict, row.report_dir) == (None, None, None)
    assert row.finished_at is not None
    assert row.summary()["error"] == "cluster dc2 is unreachable"


def test_get_of_an_unknown_drill_is_none(migrated_store: StateStore) -> None:
    assert DrillRepository(migrated_store).get(42) is None


def test_latest_is_newest_first_and_limited(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    ids = [drills.start(f"s{i}", "dc1->dc2") for i in range(4)]
    assert [row.id for row in drills.latest()] == ids[::-1]
    assert [row.name for row in drills.latest(2)] == ["s3", "s2"]


def test_reports_are_the_finished_ones_oldest_first(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    first, crashed, second, running, third = (
        drills.start(name, "dc1->dc2") for name in ("a", "b", "c", "d", "e")
    )
    drills.finish(first, report("a", execution_s=9.0), "/r/a")
    drills.fail(crashed, "boom")
    drills.finish(second, report("c", Verdict.POLICY_BREACHED, lost=30), "/r/c")
    drills.finish(third, report("e", execution_s=3.0), "/r/e")
    assert running  # left running on purpose: not a report

    assert [r.scenario for r in drills.reports()] == ["a", "c", "e"]
    assert [r.scenario for r in drills.reports(2)] == ["c", "e"]  # the latest two, oldest first
    assert drills.reports()[1].verdict is Verdict.POLICY_BREACHED


def test_finishing_an_unknown_drill_is_an_error(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    with pytest.raises(LookupError, match="no drill 99"):
        drills.fail(99, "x")
    with pytest.raises(LookupError, match="no drill 99"):
        drills.finish(99, report(), "/r")


def test_started_at_is_timezone_aware(migrated_store: StateStore) -> None:
    drills = DrillRepository(migrated_store)
    row = drills.get(drills.start("a", "dc1->dc2"))
    assert row is not None
    assert row.started_at.tzinfo is not None
    assert row.started_at <= datetime.now(UTC)
