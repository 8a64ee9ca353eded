"""Where test clusters dc1 and dc2 come from: ``DRKIT_TEST_KAFKA=local|testcontainers|external``.

* ``local`` (default): real brokers from Maven Central jars via :class:`drkit.local.LocalKafka`,
  in ``$DRKIT_TEST_STATE_DIR`` (default ``<repo>/.drkit-test``).  Supports broker faults.
* ``testcontainers``: the official ``apache/kafka`` image, one container per cluster (needs a
  Docker engine).
* ``external``: already running clusters from ``$DRKIT_TEST_DC1_BOOTSTRAP`` and
  ``$DRKIT_TEST_DC2_BOOTSTRAP``.
"""

from __future__ import annotations

import fcntl
import os
import uuid
import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.local import KAFKA_VERSION, LocalKafka
from drkit.local.cluster import OPEN_AUTHORIZER, as_docker_env

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ClusterUnderTest:
    """One running test cluster and, for the local backend, a handle for fault injection."""

    name: str
    bootstrap_servers: str
    local: LocalKafka | None = None
    log_files: list[Path] = field(default_factory=list)

    @property
    def endpoint(self) -> ClusterEndpoint:
        return ClusterEndpoint.plain(self.name, self.bootstrap_servers)

    def admin(self) -> KafkaAdmin:
        return KafkaAdmin(self.endpoint)

    def broker_logs(self, lines: int = 60) -> str:
        out = []
        for path in self.log_files:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path} ---\n" + "\n".join(tail))
        return "\n".join(out)


def backend() -> str:
    return os.environ.get("DRKIT_TEST_KAFKA", "local")


# Left in the shared state dir by a test process that found or started dc1/dc2 there as one
# of several (pytest-xdist): the run's controller takes them down at its end (see conftest).
# The mark names the run (RUN_ID_ENV, set by its controller before the workers start): only
# that run's controller stops them - a pytest started by hand in the same checkout while
# `make test` runs ended by stopping the suite's clusters under its running tests.
SHARED_MARK = "shared-by-test-processes"
RUN_ID_ENV = "DRKIT_TEST_RUN_ID"


def claim_run_id() -> str:
    """This pytest run's id (the controller's, inherited by its xdist workers): made once."""
    return os.environ.setdefault(RUN_ID_ENV, uuid.uuid4().hex)


def state_dir_for_tests() -> Path:
    """Where the local test clusters live: dc1/dc2 and every scratch cluster, one directory for
    the whole run, shared by its test processes (scratch clusters have names of their own; a
    drill's fault injector must find its scratch source and dc2 in one place)."""
    return Path(os.environ.get("DRKIT_TEST_STATE_DIR", REPO / ".drkit-test"))


@contextmanager
def clusters(names: list[str]) -> Iterator[dict[str, ClusterUnderTest]]:
    """Provide the named clusters for a test session."""
    kind = backend()
    if kind == "local":
        yield from _local(names)
    elif kind == "testcontainers":
        yield from _containers(names)
    elif kind == "external":
        yield _external(names)
    else:
        raise RuntimeError(f"DRKIT_TEST_KAFKA={kind!r}: use local, testcontainers or external")


def _local(names: list[str]) -> Iterator[dict[str, ClusterUnderTest]]:
    """dc1/dc2 for this process.  One of several test processes (pytest-xdist) shares them:
    the first to get here starts them (the others wait on a file lock and find them running),
    and none stops them - the controller does, once every process has finished."""
    base = state_dir_for_tests()
    base.mkdir(parents=True, exist_ok=True)
    manager = LocalKafka(base, connect=KafkaAdmin)
    shared = "PYTEST_XDIST_WORKER" in os.environ
    with (base / "clusters.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        statuses = manager.up(names)
        if shared:
            (base / SHARED_MARK).write_text(" ".join([claim_run_id(), *names]))
    try:
        yield {
            s.name: ClusterUnderTest(
                s.name, s.bootstrap_servers, manager, manager.log_files(s.name)
            )
            for s in statuses
        }
    finally:
        if not shared and os.environ.get("DRKIT_TEST_KEEP_CLUSTERS") != "1":
            manager.down(names)


def stop_shared_clusters() -> None:
    """Take down the dc1/dc2 that test processes shared (the run's controller, at its end);
    nothing when no process shared them, or when the clusters are to be kept."""
    base = state_dir_for_tests()
    mark = base / SHARED_MARK
    if backend() != "local" or not mark.exists():
        return
    run, *names = mark.read_text().split() or [""]
    if run != claim_run_id():
        return  # another run's clusters (it is still running, or its controller will stop them)
    if os.environ.get("DRKIT_TEST_KEEP_CLUSTERS") != "1":
        LocalKafka(base, connect=KafkaAdmin).down(names)
    mark.unlink()


def _containers(names: list[str]) -> Iterator[dict[str, ClusterUnderTest]]:
    from testcontainers.kafka import KafkaContainer

    image = os.environ.get("DRKIT_TEST_KAFKA_IMAGE", f"apache/kafka:{KAFKA_VERSION}")
    started: list[KafkaContainer] = []
    try:
        out: dict[str, ClusterUnderTest] = {}
        for name in names:
            container = KafkaContainer(image).with_kraft()
            container.with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")
            container.with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
            for key, value in as_docker_env(OPEN_AUTHORIZER).items():  # fencing works there too
                container.with_env(key, value)
            container.start()
            started.append(container)
            out[name] = ClusterUnderTest(name, container.get_bootstrap_server())
        yield out
    finally:
        for container in started:
            container.stop()


def _external(names: list[str]) -> dict[str, ClusterUnderTest]:
    out: dict[str, ClusterUnderTest] = {}
    for name in names:
        variable = f"DRKIT_TEST_{name.upper()}_BOOTSTRAP"
        servers = os.environ.get(variable)
        if not servers:
            raise RuntimeError(f"DRKIT_TEST_KAFKA=external needs {variable}")
        out[name] = ClusterUnderTest(name, servers)
    return out


class ScratchPool:
    """Single-broker scratch clusters started one ahead and taken down behind, per test process.

    A test that breaks a cluster needs a fresh one; starting a broker and stopping it again
    took ~10 s of each such test's wall time.  Once a test has taken one, the next is started
    in the background (its start overlaps that test), and a used one is stopped and purged in
    the background too.  :meth:`close` (end of the session) waits for both.  Only plain
    single-broker clusters are pooled; a namespaced or multi-broker one starts on demand."""

    def __init__(self) -> None:
        self._work = ThreadPoolExecutor(max_workers=2, thread_name_prefix="scratch")
        self._spare: Future[ClusterUnderTest] | None = None
        self._pending: list[Future[None]] = []

    @staticmethod
    def start(brokers: int = 1, namespaced: bool = False) -> ClusterUnderTest:
        manager = LocalKafka(state_dir_for_tests(), connect=KafkaAdmin)
        name = f"scratch-{uuid.uuid4().hex[:6]}"
        try:
            status = manager.up([name], brokers=brokers, namespaced=namespaced)[0]
        except BaseException:
            manager.down([name], purge=True)
            raise
        return ClusterUnderTest(name, status.bootstrap_servers, manager, manager.log_files(name))

    def take(self) -> ClusterUnderTest:
        """A running single-broker cluster no test has used; the spare when it started."""
        spare, self._spare = self._spare, None
        cluster = None
        if spare is not None:
            try:
                cluster = spare.result()
            except Exception as err:  # a spare that failed to start: start one here instead
                warnings.warn(f"the spare scratch cluster did not start: {err}", stacklevel=2)
        if cluster is None:
            cluster = self.start()
        self._spare = self._work.submit(self.start)
        return cluster

    def release(self, cluster: ClusterUnderTest) -> None:
        assert cluster.local is not None
        self._pending.append(self._work.submit(cluster.local.down, [cluster.name], purge=True))

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            with suppress(Exception):
                self.release(spare.result())
        for future in self._pending:
            with suppress(Exception):
                future.result()
        self._work.shutdown(wait=True)


scratch_pool = ScratchPool()


@contextmanager
def scratch_cluster(brokers: int = 1, namespaced: bool = False) -> Iterator[ClusterUnderTest]:
    """A throw-away local cluster that a test may stop, kill or cut off (local backend only);
    ``namespaced``: in its own network namespace (needs root)."""
    pooled = brokers == 1 and not namespaced
    cluster = scratch_pool.take() if pooled else ScratchPool.start(brokers, namespaced)
    try:
        yield cluster
    finally:
        scratch_pool.release(cluster)
