"""The automation's audit trail: pause/resume, acks of automatic runs, decisions stored on
change - on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from drkit.automation.decision import Check, CheckName, Decision
from drkit.automation.journal import AutomationJournal
from drkit.errors import ConfigError
from drkit.failover.model import RunState
from drkit.store import StateStore
from drkit.store.models import FailoverRun


def _run(store: StateStore, requested_by: str, state: RunState, kind: str = "failover") -> int:
    with store.session() as session:
        row = FailoverRun(
            kind=kind, source="dc1", target="dc2", state=state.value, requested_by=requested_by
        )
        session.add(row)
        session.flush()
        return row.id


def _decision(*failed: CheckName, at: float = 1000.0) -> Decision:
    checks = tuple(Check(name, name not in failed, f"detail of {name.value}") for name in CheckName)
    return Decision("dc1", "dc2", at, checks)


def test_pause_and_resume_say_who_and_why(migrated_store: StateStore) -> None:
    journal = AutomationJournal(migrated_store)
    assert journal.paused() is None
    journal.pause("cli:ana", "datacenter maintenance")
    paused = journal.paused()
    assert paused is not None and (paused.by, paused.reason) == (
        "cli:ana",
        "datacenter maintenance",
    )
    journal.resume("cli:bo", "")
    assert journal.paused() is None


def test_only_ended_automatic_failovers_wait_for_an_ack(migrated_store: StateStore) -> None:
    journal = AutomationJournal(migrated_store)
    manual = _run(migrated_store, "cli:ana", RunState.SUCCEEDED)
    running = _run(migrated_store, "automation:east", RunState.RUNNING)
    done = _run(migrated_store, "automation:east", RunState.SUCCEEDED)
    failed = _run(migrated_store, "automation:west", RunState.FAILED)
    assert journal.unacknowledged() == (done, failed)
    journal.ack(done, "cli:ana", "apps checked")
    assert journal.unacknowledged() == (failed,)
    with pytest.raises(ConfigError, match=f"no automatic failover run {manual}"):
        journal.ack(manual, "cli:ana", "")
    with pytest.raises(ConfigError, match="still running"):
        journal.ack(running, "cli:ana", "")
    with pytest.raises(ConfigError, match="no automatic failover run 999"):
        journal.ack(999, "cli:ana", "")


def test_decisions_are_stored_when_they_act_or_their_reasons_change(
    migrated_store: StateStore,
) -> None:
    journal = AutomationJournal(migrated_store)
    held = _decision(CheckName.SOURCE_DOWN, CheckName.SUSTAINED)
    assert journal.record("east", held)
    assert not journal.record("east", replace(held, at=1005.0))  # same reasons: logged only
    assert journal.record("west", held)  # another observer's own trail
    assert journal.record("east", _decision(CheckName.SUSTAINED, at=1010.0))
    assert journal.record("east", _decision(at=1015.0), run_id=7)
    assert journal.record("east", _decision(at=1020.0), run_id=8)  # every action is stored
    latest = journal.decisions(10)
    assert [(d.observer, d.act, d.run_id) for d in latest] == [
        ("east", True, 8),
        ("east", True, 7),
        ("east", False, None),
        ("west", False, None),
        ("east", False, None),
    ]
    assert latest[2].summary == "sustained: detail of sustained"
    assert latest[2].evidence["checks"][0] == {
        "name": "enabled",
        "passed": True,
        "detail": "detail of enabled",
        "ticking": False,
    }


def test_a_new_detail_is_a_new_reason_but_a_clock_is_not(migrated_store: StateStore) -> None:
    journal = AutomationJournal(migrated_store)

    def held(votes: str, silent_s: int) -> Decision:
        return Decision(
            "dc1",
            "dc2",
            float(silent_s),
            (
                Check(CheckName.SOURCE_DOWN, False, f"{votes} observers report dc1 unavailable"),
                Check(CheckName.SUSTAINED, False, f"no answer for {silent_s}s", ticking=True),
            ),
        )

    assert journal.record("east", held("0/2", 0))
    assert not journal.record("east", held("0/2", 3))
    assert journal.record("east", held("1/2", 4))  # a vote changed: the audit trail shows it
    assert not journal.record("east", held("1/2", 9))
    assert [d.summary.split(";")[0] for d in journal.decisions()] == [
        "source_down: 1/2 observers report dc1 unavailable",
        "source_down: 0/2 observers report dc1 unavailable",
    ]
