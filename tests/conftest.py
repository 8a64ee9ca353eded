"""Shared pytest fixtures: real clusters dc1/dc2, unique names, broker logs on failure.

Integration tests take ``dc1``/``dc2`` (session-scoped, see tests/kafka_backends.py) and
``names`` for topic and group names no other test uses.  Tests that break a cluster take
``scratch`` instead, never dc1/dc2.
"""

from __future__ import annotations

import os
import re
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from drkit.store import StateStore
from tests.kafka_backends import (
    ClusterUnderTest,
    backend,
    claim_run_id,
    clusters,
    scratch_cluster,
    scratch_pool,
    stop_shared_clusters,
)
from tests.machine_load import MachineLoad
from tests.optional_tools import unavailable

# The tests' brokers start and idle on less CPU with the quick JIT only (2 cores share them
# with Spark and drkit's processes); the benchmarks keep the full JIT.
os.environ.setdefault("DRKIT_KAFKA_JVM_OPTIONS", "-XX:TieredStopAtLevel=1")
# The same for Spark: the tests' jobs are small, a cold JVM's full JIT costs more than it wins.
# Given by the caller: used as given (no class archive added, see spark_class_archive); the
# mark tells test processes (pytest-xdist's, which inherit both) the options are this file's.
if "DRKIT_SPARK_JVM_OPTIONS" not in os.environ:
    os.environ["DRKIT_SPARK_JVM_OPTIONS"] = "-XX:TieredStopAtLevel=1"
    os.environ["DRKIT_TEST_SPARK_OPTIONS"] = "default"
SPARK_OPTIONS_GIVEN = os.environ.get("DRKIT_TEST_SPARK_OPTIONS") != "default"


@pytest.fixture(scope="session", autouse=True)
def spark_class_archive(request: pytest.FixtureRequest) -> None:
    """Integration sessions map a class-data-sharing archive of Spark's classes in their Spark
    JVMs (tests/spark_archive.py: ~40% less CPU per driver start), recorded once per machine."""
    if SPARK_OPTIONS_GIVEN or not any(
        "integration" in str(item.path) for item in request.session.items
    ):
        return
    from tests import spark_archive

    base = os.environ["DRKIT_SPARK_JVM_OPTIONS"]
    archive = spark_archive.ensure(base)
    if archive is not None:
        os.environ["DRKIT_SPARK_JVM_OPTIONS"] = f"{base} {spark_archive.flags(archive)}"


@pytest.fixture(scope="session")
def kafka_clusters() -> Iterator[dict[str, ClusterUnderTest]]:
    with clusters(["dc1", "dc2"]) as found:
        yield found


@pytest.fixture(scope="session")
def dc1(kafka_clusters: dict[str, ClusterUnderTest]) -> ClusterUnderTest:
    return kafka_clusters["dc1"]


@pytest.fixture(scope="session")
def dc2(kafka_clusters: dict[str, ClusterUnderTest]) -> ClusterUnderTest:
    return kafka_clusters["dc2"]


@pytest.fixture(scope="session", autouse=True)
def scratch_clusters_stopped() -> Iterator[None]:
    """The pooled scratch clusters (the spare, those being stopped) are gone at the end."""
    yield
    scratch_pool.close()


@pytest.fixture
def scratch() -> Iterator[ClusterUnderTest]:
    """A private single-broker local cluster for tests that stop or kill brokers."""
    if backend() != "local":
        pytest.skip("broker faults need DRKIT_TEST_KAFKA=local")
    with scratch_cluster() as cluster:
        yield cluster


class Names:
    """Unique, readable topic and group names for one test."""

    def __init__(self, test_name: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", test_name).strip("-")[:40]
        self.prefix = f"{slug}-{uuid.uuid4().hex[:6]}"

    def topic(self, label: str = "t") -> str:
        return f"{self.prefix}.{label}"

    def group(self, label: str = "g") -> str:
        return f"{self.prefix}.{label}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    # The controller of several test processes (pytest-xdist) stops the dc1/dc2 they shared,
    # after the last of them finished; a worker never does (see tests/kafka_backends.py).
    if not hasattr(session.config, "workerinput"):
        stop_shared_clusters()


def pytest_configure(config: pytest.Config) -> None:
    worker = hasattr(config, "workerinput")  # an xdist worker: its controller keeps the rows
    if not worker:
        claim_run_id()  # before the workers start: they inherit it (tests/kafka_backends.py)
    config.pluginmanager.register(MachineLoad(keeps_rows=not worker), "drkit-machine-load")


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    return Names(request.node.name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the tail of the broker logs of every cluster a failed test used."""
    report = yield
    if report.failed and call.when == "call":
        funcargs = getattr(item, "funcargs", {})
        for value in funcargs.values():
            if isinstance(value, ClusterUnderTest):
                logs = value.broker_logs()
                if logs:
                    report.sections.append((f"broker logs {value.name}", logs))
    return report


# Parallel integration runs (scripts/test) hand whole files to the test processes in collection
# order: the longest files go first, so that no process is left alone with one at the end.
# Longest first as measured in CI43 (2026-11-29: drills 347 s ... demo 72 s); the other files
# follow in their usual order.
LONGEST_FILES = (
    "test_drills.py",
    "test_failover_faults.py",
    "test_replication_faults.py",
    "test_failover.py",
    "test_least_privilege.py",
    "test_accounting_faults.py",
    "test_accounting.py",
    "test_protection_history.py",
    "test_replication.py",
    "test_flow_control.py",
    "test_kafka_adapter.py",
    "test_demo.py",
    "test_translation.py",
    "test_secure_local.py",
    "test_spark_standalone.py",
    "test_checkpoint_election.py",
)


# Files whose tests judge live clusters by 1-second probes (monitors, automatic failover):
# scripts/test runs them after the others, in one process with nothing beside it.  Beside
# another test process, a monitor starved of CPU saw its own probes overrun their budget and
# judged a live primary down (CI37: two blind observers and a starved near one failed over a
# healthy primary) - a starved monitor voting "down" is a gap of the monitor, not of the test.
ALONE_FILES = ("test_automatic_failover.py", "test_monitor.py", "test_monitor_edges.py")


def _file_rank(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Integration tests need the real clusters; mark them so `-m "not integration"` is quick.
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        if item.path.name in ALONE_FILES:
            item.add_marker(pytest.mark.alone)
    items.sort(key=_file_rank)  # stable: a file's tests keep their order


@pytest.fixture(autouse=True)
def armed_failpoints() -> Iterator[None]:
    """Each test meets failpoints armed afresh (each fires once per process otherwise)."""
    from drkit import failpoints

    failpoints.reset()
    yield
    failpoints.reset()


@pytest.fixture(autouse=True)
def reap_replicators() -> Iterator[None]:
    """Kill any ``drkit`` child process a test started and left running."""
    yield
    from tests.replication_support import DrkitProcess

    DrkitProcess.reap()


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A PostgreSQL URL for store tests (``$DRKIT_TEST_PG_URL``, set by scripts/test)."""
    url = os.environ.get("DRKIT_TEST_PG_URL")
    if not url:
        unavailable(
            "PG", "DRKIT_TEST_PG_URL is not set", "scripts/test sets it when PostgreSQL runs"
        )
    return url


@pytest.fixture
def fresh_pg_database(pg_url: str) -> Iterator[str]:
    """A new PostgreSQL database for one test; its URL (dropped afterwards)."""
    name = f"drkit_t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield pg_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        _drop_database(admin, name)
        admin.dispose()


def _drop_database(admin: Engine, name: str) -> None:
    """Drop a test database.  ``WITH (FORCE)`` ends its other sessions, but a backend it may
    not signal (an autovacuum worker that just started on it) makes the drop fail: that one
    ends by itself, so try again; a database still left after that is only litter."""
    for attempt in range(10):
        try:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except DBAPIError:
            time.sleep(0.2 * (attempt + 1))
    warnings.warn(f"test database {name} could not be dropped", stacklevel=1)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """A state store with no schema yet: a SQLite file, and a fresh database on the PostgreSQL
    server of ``pg_url`` (skipped without one; dropped after the test)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'drkit.db'}"
    else:
        url = request.getfixturevalue("fresh_pg_database")
    fresh = StateStore(url)
    yield fresh
    fresh.engine.dispose()


@pytest.fixture
def migrated_store(empty_store: StateStore) -> StateStore:
    """:func:`empty_store` upgraded to the newest schema."""
    empty_store.upgrade()
    return empty_store
