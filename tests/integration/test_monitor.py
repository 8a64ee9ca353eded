"""Monitoring on real clusters: states, flows, observer quorum, the status page."""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.store import StateStore
from drkit.store.health_repo import HealthRepository
from drkit.store.models import HealthTransition
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import (
    DrkitProcess,
    FlowSetup,
    MetricsSnapshot,
    Replicator,
    flow_setup,
    wait_for_value,
    wait_until,
)

FAST_HEALTH = {
    "health": {
        "probe_interval_s": 1.0,
        "probe_timeout_s": 0.8,
        "failure_threshold": 3,
        "recovery_threshold": 2,
        "observer_quorum": 1,
        "observation_window_s": 10,
    }
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MonitorProcess(DrkitProcess):
    def __init__(self, config: Path, observer: str, log_dir: Path) -> None:
        self.port = free_port()
        super().__init__(
            [
                "monitor",
                "--config",
                str(config),
                "--observer",
                observer,
                "--listen",
                f"127.0.0.1:{self.port}",
            ],
            log_dir,
            f"monitor-{observer}",
        )

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as reply:
            return bytes(reply.read())

    def status(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.get("/api/status")))
        except OSError:
            return None


def cluster_state(monitor: MonitorProcess, alias: str) -> str | None:
    status = monitor.status()
    return None if status is None else str(status["clusters"][alias]["state"])


def test_status_shows_both_clusters_healthy_and_the_flow_caught_up(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("watched")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], document_extra=FAST_HEALTH)
    dc1.admin().create_topics([TopicSpec(topic, 2)])
    produce_batch(setup.source_endpoint, topic, ((b"k", b"v") for _ in range(5000)))
    with Replicator(setup, log_dir=tmp_path), MonitorProcess(setup.path, "o1", tmp_path) as monitor:

        def caught_up() -> dict[str, Any] | None:
            status = monitor.status()
            if status is None:
                return None
            flow = status["flows"][f"{setup.source}->{setup.target}"]
            states = {a: c["state"] for a, c in status["clusters"].items()}
            if (
                set(states.values()) == {"HEALTHY"}
                and flow.get("lag_records") == 0
                and flow.get("heartbeat_age_s") is not None
                # The first checkpoint tick may land a probe after the lag reaches 0.
                and flow.get("checkpoint_age_s") is not None
                and flow.get("drift") is not None  # compared a few seconds after the start
            ):
                return status
            return None

        try:
            status = wait_until(caught_up, 60, 0.5, what="both HEALTHY, lag 0, checkpoints seen")
        except AssertionError as err:  # show what the monitor saw and did
            raise AssertionError(
                f"{err}\nlast status: {monitor.status()}\n"
                f"monitor log ends:\n{monitor.log()[-8000:]}"
            ) from None
        flow_name = f"{setup.source}->{setup.target}"
        flow = status["flows"][flow_name]
        clusters = {setup.source: dc1, setup.target: dc2}
        assert flow["heartbeat_age_s"] < 5
        assert flow["workers"] == 1
        assert (flow["drift"], flow["drift_total"]) == ([], 0)  # the replica matches its source
        assert flow["failover"]["possible"] is True, flow["failover"]
        brokers = {alias: c.admin().describe_cluster()[2] for alias, c in clusters.items()}

        def metrics() -> MetricsSnapshot:
            return MetricsSnapshot.parse(monitor.get("/metrics").decode())

        def headline() -> dict[str, Any]:
            snapshot = metrics()
            return {
                "state": [snapshot.value("drkit_cluster_state", cluster=a) for a in clusters],
                "brokers": [snapshot.value("drkit_cluster_brokers", cluster=a) for a in clusters],
                "lag": snapshot.value("drkit_flow_lag_records", flow=flow_name),
                "workers": snapshot.value("drkit_flow_workers", flow=flow_name),
            }

        wanted = {
            "state": [0.0, 0.0],  # HEALTHY
            "brokers": [float(brokers[a]) for a in clusters],
            "lag": 0.0,
            "workers": 1.0,
        }
        wait_for_value(headline, wanted, 30, 0.5, what="/metrics agreeing with the status")
        snapshot = metrics()
        for alias in clusters:
            assert snapshot.value("drkit_cluster_offline_partitions", cluster=alias) == 0.0
            assert snapshot.value("drkit_cluster_under_min_isr_partitions", cluster=alias) == 0.0
        heartbeat_age = snapshot.value("drkit_flow_heartbeat_age_seconds", flow=flow_name)
        assert heartbeat_age is not None and 0.0 <= heartbeat_age < 5
        assert monitor.get("/healthz") == b"ok\n"
        assert monitor.running, monitor.log()


def cluster_transitions(setup: FlowSetup, alias: str) -> list[HealthTransition]:
    """Every recorded state change of cluster ``alias``, oldest first."""
    url = setup.config.state_store.url
    assert url is not None
    rows = HealthRepository(StateStore(url.get_secret_value())).recent_transitions(10_000)
    mine = [r for r in rows if r.subject_kind == "cluster" and r.subject == alias]
    return sorted(mine, key=lambda r: (r.at, r.id))


def test_stopped_broker_becomes_unavailable_then_healthy_after_recovery(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup = flow_setup(tmp_path, scratch, dc2, [names.topic("x")], document_extra=FAST_HEALTH)
    policy = setup.config.health

    def state_gauge(monitor: MonitorProcess) -> float | None:
        try:
            text = monitor.get("/metrics").decode()
        except OSError:
            return None
        return MetricsSnapshot.parse(text).value("drkit_cluster_state", cluster=setup.source)

    with MonitorProcess(setup.path, "o1", tmp_path) as monitor:
        wait_until(lambda: cluster_state(monitor, setup.source) == "HEALTHY", 30, 0.2)
        # Start-up (UNKNOWN -> HEALTHY, possibly through a failing first canary) is not what
        # this test is about; everything from here on is.
        start_up = cluster_transitions(setup, setup.source)
        assert start_up and start_up[-1].to_state == "HEALTHY"
        assert scratch.local is not None
        stopping = time.monotonic()
        scratch.local.stop_broker(scratch.name)  # returns once the broker process has exited
        stopped = time.monotonic()
        wait_until(
            lambda: cluster_state(monitor, setup.source) == "UNAVAILABLE",
            15,
            0.1,
            what="UNAVAILABLE",
        )
        detected = time.monotonic() - stopping  # reported, not asserted (issue 51): that it
        # flipped at the first chance shows in its evidence below - after exactly
        # failure_threshold failed probes, none more.
        wait_for_value(lambda: state_gauge(monitor), 2.0, 5, 0.1, what="state gauge (down)")
        scratch.local.start_broker(scratch.name)
        back = time.monotonic()
        wait_until(
            lambda: cluster_state(monitor, setup.source) == "HEALTHY", 60, 0.1, what="HEALTHY again"
        )
        recovered = time.monotonic() - back
        wait_for_value(lambda: state_gauge(monitor), 0.0, 5, 0.1, what="state gauge (healthy)")
    # Exactly one outage: no flapping on the way down, during the outage or on the way back.
    changes = cluster_transitions(setup, setup.source)
    assert [r.id for r in changes[: len(start_up)]] == [r.id for r in start_up]
    outage = changes[len(start_up) :]
    # A broker that just started may answer before it can take writes: its first answering
    # probes' canary fails (more likely on a loaded machine), and the way back then passes
    # through DEGRADED - once, and only on the way up.
    steps = [(r.from_state, r.to_state) for r in outage]
    assert steps in (
        [("HEALTHY", "UNAVAILABLE"), ("UNAVAILABLE", "HEALTHY")],
        [("HEALTHY", "UNAVAILABLE"), ("UNAVAILABLE", "DEGRADED"), ("DEGRADED", "HEALTHY")],
    ), steps
    if len(outage) == 3:
        assert outage[1].evidence["probe"]["reachable"] is True
        assert outage[1].evidence["probe"]["outcome"] == "degraded"
    down, up = outage[0], outage[-1]
    assert down.evidence["consecutive_failed"] == policy.failure_threshold
    assert down.evidence["probe"]["reachable"] is False
    assert up.evidence["consecutive_ok"] == policy.recovery_threshold
    # The other cluster's state did not move because of this one's outage.
    moved = [
        (r.from_state, r.to_state, r.evidence)
        for r in cluster_transitions(setup, setup.target)
        if r.at >= down.at
    ]
    assert moved == [], f"{setup.target} changed state during {setup.source}'s outage: {moved}"
    print(
        f"UNAVAILABLE {detected:.1f}s after the stop began (it took {stopped - stopping:.1f}s), "
        f"HEALTHY {recovered:.1f}s after restart"
    )


def test_one_observer_losing_sight_is_not_a_quorum_but_two_are(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    quorum = {"health": {**FAST_HEALTH["health"], "observer_quorum": 2}}
    setup = flow_setup(tmp_path, scratch, dc2, [names.topic("q")], document_extra=quorum)
    # Observer "far" reaches dc1 through a route that goes nowhere (a port nobody listens on).
    blind = yaml.safe_load(setup.path.read_text())
    blind["clusters"][setup.source]["bootstrap_servers"] = f"127.0.0.1:{free_port()}"
    blind_path = tmp_path / "blind.yaml"
    blind_path.write_text(yaml.safe_dump(blind))
    with (
        MonitorProcess(setup.path, "near", tmp_path) as near,
        MonitorProcess(blind_path, "far", tmp_path),
    ):

        def verdict() -> dict[str, Any] | None:
            status = near.status()
            if status is None or len(status["observers"]) < 2:
                return None
            return dict(status["clusters"][setup.source])

        def split() -> dict[str, Any] | None:
            current = verdict()
            if current is None:
                return None
            views = {name: o["state"] for name, o in current["observers"].items()}
            return current if views == {"near": "HEALTHY", "far": "UNAVAILABLE"} else None

        seen = wait_until(split, 30, 0.3, what="near HEALTHY while far lost sight")
        assert seen["down_votes"] == ["far"]
        time.sleep(3)  # several more rounds: still not down
        current = verdict()
        assert current is not None and current["down"] is False
        assert current["state"] != "UNAVAILABLE"
        assert scratch.local is not None
        scratch.local.stop_broker(scratch.name)
        down = wait_until(
            lambda: (v := verdict()) and v["down"] and v, 20, 0.3, what="both observers agreeing"
        )
        assert sorted(down["down_votes"]) == ["far", "near"]
        assert down["state"] == "UNAVAILABLE"


@pytest.mark.browser
def test_status_page_renders_in_headless_chromium(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    from tests.browser import open_page

    setup: FlowSetup = flow_setup(
        tmp_path, dc1, dc2, [names.topic("page")], document_extra=FAST_HEALTH
    )
    with MonitorProcess(setup.path, "o1", tmp_path) as monitor:
        wait_until(lambda: cluster_state(monitor, setup.source) == "HEALTHY", 30, 0.3)
        shot = tmp_path / "status.png"
        with open_page(f"http://127.0.0.1:{monitor.port}/", shot) as page:
            assert page.title() == "drkit status"
            for selector in (
                "h1",
                "#clusters",
                "#flows",
                "#transitions",
                f"[data-testid='cluster-state-{setup.source}']",
                f"[data-testid='cluster-state-{setup.target}']",
            ):
                assert page.locator(selector).first.is_visible(), selector
            state = page.locator(f"[data-testid='cluster-state-{setup.source}']").inner_text()
            assert state == "HEALTHY"
        assert shot.stat().st_size > 10_000
        shutil.copy(shot, tmp_path.parent / "status-page.png")
