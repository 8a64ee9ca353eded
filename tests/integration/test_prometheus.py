"""Prometheus itself scrapes a live monitor and replication worker and evaluates drkit's rules.

The unit cases (tests/data/prometheus/alerts_test.yml) give every rule synthetic series; this
test shows the same rules work on what the real processes export: Prometheus (Debian's package)
scrapes both, no alert fires while everything is healthy, and stopping the source cluster's
broker and the worker fire the matching alerts. The only change to the shipped rules is that
every ``for:`` is dropped (a test cannot wait minutes), so an alert fires on its first
evaluation that holds its expression.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from tests.conftest import Names
from tests.integration.test_monitor import FAST_HEALTH, MonitorProcess
from tests.kafka_backends import ClusterUnderTest
from tests.optional_tools import tool
from tests.processes import stop_gracefully
from tests.replication_support import Replicator, flow_setup, free_ports, wait_until

RULES = Path(__file__).resolve().parents[2] / "config" / "prometheus-alerts.yml"


class Prometheus:
    """A Prometheus server on loopback (its HTTP API) scraping the given targets every second."""

    def __init__(self, port: int) -> None:
        self.port = port

    def get(self, path: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=5) as reply:
            return json.loads(reply.read())["data"]

    def targets_up(self) -> dict[str, bool]:
        try:
            active = self.get("/api/v1/targets")["activeTargets"]
        except OSError:
            return {}
        return {t["labels"]["job"]: t["health"] == "up" for t in active}

    def alerts(self, state: str = "firing") -> list[tuple[str, dict[str, str]]]:
        """(alert name, labels) of every alert in ``state``, without the labels Prometheus adds
        to every scraped series (``job``, ``instance``)."""
        found = [a["labels"] for a in self.get("/api/v1/alerts")["alerts"] if a["state"] == state]
        own = [
            {k: v for k, v in labels.items() if k not in ("job", "instance")} for labels in found
        ]
        return sorted(((labels["alertname"], labels) for labels in own), key=lambda a: repr(a))


def _rules_without_for(directory: Path) -> Path:
    document = yaml.safe_load(RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("for", None)
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump(document))
    return path


@contextmanager
def prometheus(directory: Path, targets: dict[str, int]) -> Iterator[Prometheus]:
    binary = tool("prometheus", "PROMETHEUS", "apt install prometheus to load drkit's rules")
    port = free_ports()
    config = {
        # A scrape may not outlast its interval: 1 s timed out on a loaded CI machine (the
        # series went stale and the query found nothing); 3 s leaves room, rules still
        # evaluate every second.
        "global": {"scrape_interval": "3s", "scrape_timeout": "3s", "evaluation_interval": "1s"},
        "rule_files": [str(_rules_without_for(directory))],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{p}"]}]}
            for job, p in targets.items()
        ],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    with (directory / "prometheus.log").open("ab") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Prometheus(port)
    finally:
        stop_gracefully(process, 10)


def test_prometheus_scrapes_drkit_and_pages_for_a_lost_cluster_and_a_stopped_flow(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("scraped")
    setup = flow_setup(tmp_path, scratch, dc2, [topic], document_extra=FAST_HEALTH)
    scratch.admin().create_topics([TopicSpec(topic, 2)])
    produce_batch(setup.source_endpoint, topic, ((b"k", b"v") for _ in range(100)))
    flow = f"{setup.source}->{setup.target}"
    metrics_port = free_ports()
    replicator = Replicator(setup, "--metrics-port", str(metrics_port), log_dir=tmp_path)
    with (
        replicator,
        MonitorProcess(setup.path, "o1", tmp_path) as monitor,
        prometheus(
            tmp_path, {"drkit-monitor": monitor.port, "drkit-replicate": metrics_port}
        ) as server,
    ):
        wanted = {"drkit-monitor": True, "drkit-replicate": True}
        wait_until(lambda: server.targets_up() == wanted, 60, 0.5, what="both targets scraped")

        def healthy_and_quiet() -> bool:
            status = monitor.status() or {}
            caught_up = (status.get("flows", {}).get(flow) or {}).get("lag_records") == 0
            return caught_up and not server.alerts("firing") and not server.alerts("pending")

        try:
            wait_until(healthy_and_quiet, 90, 0.5, what="caught up and no alert")
        except AssertionError as err:
            raise AssertionError(f"{err}\nfiring: {server.alerts()}") from None
        # The series the rules read are there, with drkit's labels, as Prometheus sees them.
        query = urllib.parse.quote(f'drkit_flow_workers{{flow="{flow}"}}')

        def workers() -> list[float]:
            found = server.get(f"/api/v1/query?query={query}")["result"]
            return [float(r["value"][1]) for r in found]

        assert wait_until(workers, 30, 0.5, what="the flow's workers in Prometheus") == [1.0]

        stop_gracefully(replicator.process, 30)
        idle = {"alertname": "DrkitFlowWithoutWorkers", "flow": flow, "severity": "critical"}
        try:
            wait_until(
                lambda: ("DrkitFlowWithoutWorkers", idle) in server.alerts(),
                60,
                0.5,
                what="DrkitFlowWithoutWorkers firing",
            )
        except AssertionError as err:
            seen = (monitor.status() or {}).get("flows", {}).get(flow)
            raise AssertionError(f"{err}\nthe monitor's flow: {seen}") from None

        assert scratch.local is not None
        scratch.local.stop_broker(scratch.name)
        down = {"alertname": "DrkitClusterDown", "cluster": setup.source, "severity": "critical"}
        wait_until(
            lambda: ("DrkitClusterDown", down) in server.alerts(),
            60,
            0.5,
            what="DrkitClusterDown firing",
        )
        # Only the lost cluster pages as down: the standby stays quiet.
        assert [a for a in server.alerts() if a[0] == "DrkitClusterDown"] == [
            ("DrkitClusterDown", down)
        ]
        scratch.local.start_broker(scratch.name)
        wait_until(
            lambda: not [a for a in server.alerts() if a[0] == "DrkitClusterDown"],
            90,
            0.5,
            what="DrkitClusterDown resolved after the broker came back",
        )
