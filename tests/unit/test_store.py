"""The state store migrates and round-trips rows on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from drkit.errors import StateStoreError
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason
from drkit.replication.loss_repo import LossRepository
from drkit.store import StateStore
from drkit.store.models import FailoverRun, FailoverStep, HealthObservation

EXPECTED_TABLES = {
    "alembic_version",
    "automation_decisions",
    "automation_events",
    "clusters_seen",
    "drills",
    "failover_runs",
    "failover_steps",
    "flows",
    "health_observations",
    "health_transitions",
    "loss_events",
    "verifications",
}


@pytest.fixture
def store(empty_store: StateStore) -> StateStore:
    return empty_store


def test_upgrade_creates_every_table_and_reports_head(store: StateStore) -> None:
    assert store.current_revision() is None
    with pytest.raises(StateStoreError, match="drkit db upgrade"):
        store.require_current()
    store.upgrade()
    assert store.current_revision() == store.head_revision()
    assert set(store.table_names()) >= EXPECTED_TABLES
    store.upgrade()  # idempotent
    store.require_current()


def test_failover_run_with_steps_round_trips(store: StateStore) -> None:
    store.upgrade()
    with store.session() as session:
        run = FailoverRun(kind="switchover", source="dc1", target="dc2", plan={"groups": ["g"]})
        run.steps = [
            FailoverStep(seq=1, name="freeze", state="done"),
            FailoverStep(seq=2, name="translate", state="pending", detail={"n": 3}),
        ]
        session.add(run)
    with store.session() as session:
        loaded = session.scalars(select(FailoverRun)).one()
        assert loaded.plan == {"groups": ["g"]}
        assert [s.name for s in loaded.steps] == ["freeze", "translate"]
        assert loaded.steps[1].detail == {"n": 3}
        assert loaded.started_at.tzinfo is not None


def test_observations_are_queryable_by_cluster(store: StateStore) -> None:
    store.upgrade()
    with store.session() as session:
        session.add_all(
            HealthObservation(observer="o1", cluster=c, probe="metadata", ok=ok, latency_ms=3.0)
            for c, ok in [("dc1", True), ("dc1", False), ("dc2", True)]
        )
    with store.session() as session:
        rows = session.scalars(
            select(HealthObservation).where(HealthObservation.cluster == "dc1")
        ).all()
        assert sorted(r.ok for r in rows) == [False, True]


def test_loss_events_round_trip_and_record_once(store: StateStore) -> None:
    store.upgrade()
    repo = LossRepository(store)
    event = LossEvent(
        "dc1->dc2", TopicPartition("orders", 3), 400, 1999, LossReason.TRUNCATED, 1_700_000_000_000
    )
    assert repo.record(event) is True
    assert repo.record(event) is False  # a re-detected range is not counted twice
    assert repo.list("dc1->dc2") == [event]
    assert repo.list("dc2->dc1") == []
    assert repo.totals("dc1->dc2") == {TopicPartition("orders", 3): 1600}


def test_unreachable_database_is_a_clear_error() -> None:
    store = StateStore("postgresql+psycopg://u:secretpw@127.0.0.1:1/none")
    with pytest.raises(StateStoreError) as caught:
        store.current_revision()
    assert "127.0.0.1:1" in str(caught.value)
    assert "secretpw" not in str(caught.value)


def test_migrations_create_exactly_what_the_models_declare(store: StateStore) -> None:
    """A model changed without a migration (or the reverse) fails here, not in production."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from drkit.store.models import Base

    store.upgrade()
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_a_postgresql_transaction_left_idle_by_a_frozen_process_ends_and_frees_its_locks(
    fresh_pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process frozen inside a transaction (SIGSTOP mid-renewal) holds the lease row's lock.
    The server must end that transaction, so another engine's takeover waits a bounded time
    instead of for ever; the frozen process's commit then fails instead of landing late."""

    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from drkit.store import db

    monkeypatch.setattr(db, "IDLE_TRANSACTION_TIMEOUT_S", 1)
    frozen, other = StateStore(fresh_pg_database), StateStore(fresh_pg_database)
    frozen.upgrade()
    with frozen.session() as session:
        session.execute(text("INSERT INTO leases (name, owner, token, acquired_at, expires_at) "
                             "VALUES ('failover', 'a', 1, now(), now())"))  # fmt: skip
    held = frozen.engine.connect()
    held.begin()
    held.execute(text("UPDATE leases SET token = token WHERE name = 'failover'"))  # the lock
    with other.session() as session:  # blocks until the server ends the idle transaction
        session.execute(text("UPDATE leases SET token = token + 1 WHERE name = 'failover'"))
    # It returned at all: without the server's 1 s idle timeout it blocks for ever (pytest's
    # timeout fails it); that the server ended the transaction shows below (issue 51: no
    # wall-clock threshold).
    with pytest.raises(SQLAlchemyError):
        held.commit()  # the woken process finds its transaction gone
    held.close()
    with other.session() as session:
        assert session.execute(text("SELECT token FROM leases")).scalar() == 2
    frozen.engine.dispose()
    other.engine.dispose()
