"""docker-compose.yml run for real: dc1, dc2, the PostgreSQL store, drkit replicate and drkit
monitor in containers, and drkit on the host driving them through the same store.

The images this machine cannot pull (apache/kafka, postgres) are stood in for by local builds
from Maven Central's Kafka jars and Debian's PostgreSQL (tests/compose/standins.yml, run by
scripts/compose-here, which also puts every service on the host network). The user's
docker-compose.yml and config/drkit.compose.yaml are used unchanged. Prometheus and Grafana are
not started here (Grafana has no Debian package; Prometheus runs against live drkit processes in
test_prometheus.py).

Needs a running Docker engine, docker-compose and debootstrap (root): skipped with a note
without them, required in CI (``DRKIT_TEST_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.io import commit_group_offsets, produce_batch
from drkit.records import TopicPartition
from tests.optional_tools import unavailable
from tests.replication_support import wait_until

ROOT = Path(__file__).resolve().parents[2]
HOST_CONFIG = ROOT / "config" / "drkit.compose.yaml"
SERVICES = ("dc1", "dc2", "postgres", "drkit-replicate", "drkit-monitor")
# The loopback ports the overlay's services listen on (all on the host network).
PORTS = (19092, 19093, 19094, 29092, 29093, 29094, 15432, 9464, 9465)
DC1 = ClusterEndpoint.plain("dc1", "127.0.0.1:19092")
DC2 = ClusterEndpoint.plain("dc2", "127.0.0.1:29092")
RECORDS = 2_000
COMMITTED = 1_500


@dataclass(frozen=True)
class Stack:
    """The running stack: ``compose`` runs docker-compose on it, ``drkit`` a host command."""

    env: dict[str, str]

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / "scripts" / "compose-here"), *args],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def drkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "drkit", *args, "--config", str(HOST_CONFIG)],
            env=self.env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip

    def status(self) -> dict[str, object]:
        done = self.drkit("status", "-o", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=60).stdout[-8000:]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    hint = "apt install docker.io docker-compose debootstrap and start dockerd (root)"
    for binary in ("docker", "docker-compose", "debootstrap"):
        if shutil.which(binary) is None:
            unavailable("DOCKER", f"no {binary}", hint)
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        unavailable("DOCKER", "no running Docker engine", hint)
    taken = [port for port in PORTS if _listening(port)]
    assert not taken, f"the compose stack's loopback ports {taken} are in use on this machine"
    env = os.environ | {
        "DRKIT_DB_PASSWORD": secrets.token_hex(12),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(12),
        "COMPOSE_PROJECT_NAME": "drkit-compose-test",
        "PYTHON": sys.executable,
    }
    stack = Stack(env)
    _clear_leftovers(stack)
    up = stack.compose("up", "-d", "--build", *SERVICES, timeout=1800)
    try:
        assert up.returncode == 0, (up.stdout + up.stderr)[-6000:]
        yield stack
    finally:
        stack.compose("down", "-v", timeout=300)


def _clear_leftovers(stack: Stack) -> None:
    """Remove what an earlier run left of the project: ``down`` for what compose knows, then
    every container named as the project's (one compose no longer lists - an engine
    reinstalled, a run killed mid-``up`` - made ``up`` fail on the name: "Conflict. The
    container name ... is already in use", CI 2026-12-05)."""
    project = stack.env["COMPOSE_PROJECT_NAME"]
    down = stack.compose("down", "-v", "--remove-orphans", timeout=600)
    assert down.returncode == 0, (down.stdout + down.stderr)[-3000:]
    listed = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name=^/{project}_"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    if listed:
        subprocess.run(["docker", "rm", "-f", "-v", *listed], capture_output=True, timeout=120,
                       check=True)  # fmt: skip


def test_the_containers_replicate_and_a_host_side_plan_sees_their_flow(stack: Stack) -> None:
    KafkaAdmin(DC1).create_topics([TopicSpec("orders", 3)])
    produce_batch(DC1, "orders", ((str(i).encode(), b"v") for i in range(RECORDS)))
    per_partition = COMMITTED // 3
    committed = {TopicPartition("orders", p): per_partition for p in range(3)}
    commit_group_offsets(DC1, "billing", committed)

    def replicated() -> int:
        try:
            ends = KafkaAdmin(DC2).topic_offsets("dc1.orders", 5)
        except Exception:  # not created yet
            return 0
        return sum(end for _start, end in ends.values())

    try:
        wait_until(lambda: replicated() == RECORDS, 120, 0.5, what="dc1.orders on dc2")
        # The monitor container's observer and the replicate container's worker, seen by the
        # host through the containers' PostgreSQL.
        wait_until(
            lambda: (status := stack.status())["observers"] == ["compose"]
            and status["flows"]["dc1->dc2"]["workers"] == 1,  # type: ignore[index]
            90, 1.0, what="the containers' observer and worker in the host's status",
        )  # fmt: skip
    except AssertionError as err:
        raise AssertionError(f"{err}\n{stack.logs()}") from None
    plan = stack.drkit("failover", "--from", "dc1", "--to", "dc2", "--plan")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    for p in range(3):
        line = f"billing orders[{p}] S={per_partition} -> dc1.orders[{p}] T={per_partition}"
        assert f"{line} (exact)" in plan.stdout, plan.stdout
    assert "RPO: 0 records not on dc2" in plan.stdout, plan.stdout
    # The records live in the compose file's data volume (a restarted broker keeps them).
    for service in ("dc1", "dc2"):
        listed = stack.compose("exec", "-T", service, "ls", "/var/lib/kafka/data", timeout=60)
        topic = "orders-0" if service == "dc1" else "dc1.orders-0"
        assert topic in listed.stdout.split(), listed.stdout + listed.stderr


def test_a_host_side_switchover_stops_the_containers_replication_and_moves_the_pointer(
    stack: Stack,
) -> None:
    done = stack.drkit("switchover", "--from", "dc1", "--to", "dc2", "--yes")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "switchover dc1 -> dc2: succeeded" in done.stdout, done.stdout
    status = stack.status()
    assert status["pointer"]["cluster"] == "dc2"  # type: ignore[index]
    control = status["flows"]["dc1->dc2"]["control"]  # type: ignore[index]
    assert (control["desired"], control["running"]) == ("stopped", []), control
    # The replicate container obeyed the directive it read from the shared store.
    logs = stack.compose("logs", "--no-color", "drkit-replicate", timeout=60).stdout
    assert "flow stopped by its directive" in logs, logs[-4000:]
    # The group's offsets, translated through the containers' checkpoints, are committed on
    # dc2's replica topic: the applications resume there where they stopped on dc1.
    offsets = KafkaAdmin(DC2).group_offsets("billing", 30).offsets
    assert offsets == {TopicPartition("dc1.orders", p): COMMITTED // 3 for p in range(3)}, offsets
