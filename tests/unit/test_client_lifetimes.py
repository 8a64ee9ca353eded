"""Admin clients are destroyed on a drkit thread, never by the cyclic collector wherever it runs.

librdkafka aborts the process ("rd_kafka_destroy() called from librdkafka owned thread") when
a client is destroyed on one of its own threads.  A client caught in a reference cycle is
destroyed by Python's cyclic collector, which runs in whichever thread allocates next - and
librdkafka's background thread runs Python code (the admin API's futures).  A monitor starved
of CPU died this way: every groups round made a KafkaAdmin that an error retried through
tenacity (and its own error callback) kept in a cycle (drkit.kafka.lifetimes).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from drkit.config.model import ClusterConfig
from drkit.errors import KafkaError
from drkit.health.jobs import BudgetedRunner
from drkit.kafka import lifetimes
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint

ENDPOINT = ClusterEndpoint("dc1", ClusterConfig(bootstrap_servers="127.0.0.1:9"))


@pytest.fixture
def no_cyclic_collection() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def test_a_dropped_admin_client_is_freed_at_once(no_cyclic_collection: None) -> None:
    admin = KafkaAdmin(ENDPOINT, default_timeout_s=0.1)
    gone = weakref.ref(admin)
    del admin
    assert gone() is None, "a KafkaAdmin outlives its last reference (a reference cycle)"


class _Held:
    """Stands for a client a job's frame holds when the job raises."""


def test_an_error_raised_through_a_budgeted_job_keeps_nothing_alive(
    no_cyclic_collection: None,
) -> None:
    refs: list[weakref.ref[_Held]] = []

    def work() -> None:
        held = _Held()
        refs.append(weakref.ref(held))
        raise ValueError("the job failed")

    with pytest.raises(ValueError, match="the job failed"):
        BudgetedRunner().run(work, 5.0, "job")
    assert refs and refs[0]() is None, "the failed job's frame is kept alive by a cycle"


@pytest.fixture
def destroyed_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each admin client is destroyed on."""
    threads: list[str] = []
    real = lifetimes.destroy

    def recording(client: object) -> None:
        threads.append(threading.current_thread().name)
        real(client)  # type: ignore[arg-type]

    monkeypatch.setattr(lifetimes, "destroy", recording)
    return threads


def test_an_admin_left_in_a_cycle_is_destroyed_by_the_reaper(
    no_cyclic_collection: None, destroyed_on: list[str]
) -> None:
    admin = KafkaAdmin(ENDPOINT, default_timeout_s=0.3)
    with pytest.raises(KafkaError):  # retried through tenacity: its frames hold the admin
        admin.list_topics(timeout_s=0.3)
    gone = weakref.ref(admin)
    del admin
    assert gone() is not None  # the error's cycle keeps it (no destroy on any thread yet)
    gc.collect()  # stands for the collector running on whatever thread allocates next
    assert gone() is None
    deadline = time.monotonic() + 5
    while not destroyed_on and time.monotonic() < deadline:
        time.sleep(0.01)
    assert destroyed_on == ["drkit-client-reaper"]


def test_close_destroys_the_client_at_once_and_only_once(destroyed_on: list[str]) -> None:
    with KafkaAdmin(ENDPOINT, default_timeout_s=0.3) as admin:
        pass
    assert destroyed_on == [threading.current_thread().name]
    admin.close()
    del admin
    gc.collect()
    time.sleep(0.1)
    assert destroyed_on == [threading.current_thread().name]  # the reaper got nothing
