"""docker-compose.yml stays valid for users with a Docker engine (it cannot run here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from drkit.config import load_config
from drkit.local import KAFKA_VERSION

REPO = Path(__file__).resolve().parents[2]


def test_compose_file_parses_with_docker_compose() -> None:
    # `docker compose config` and Debian's docker-compose both validate without an engine.
    if shutil.which("docker-compose"):
        command = ["docker-compose", "-f", "docker-compose.yml", "config", "-q"]
    else:
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        assert probe.returncode == 0, "install docker-compose (Debian) to validate the file"
        command = ["docker", "compose", "-f", "docker-compose.yml", "config", "-q"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_compose_clusters_match_the_pinned_kafka_and_the_compose_config() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("dc1", "dc2"):
        assert services[name]["image"] == f"apache/kafka:{KAFKA_VERSION}"
    config = load_config(REPO / "config" / "drkit.compose.yaml")
    published = {name: services[name]["ports"][0].split(":")[0] for name in ("dc1", "dc2")}
    for name, port in published.items():
        assert config.clusters[name].bootstrap_servers == f"127.0.0.1:{port}"


def test_compose_wires_drkit_prometheus_and_grafana() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"drkit-replicate", "drkit-monitor", "prometheus", "grafana", "postgres"} <= set(
        services
    )
    internal = load_config(REPO / "config" / "drkit.compose-internal.yaml", env={})
    assert internal.clusters["dc1"].bootstrap_servers == "dc1:9092"
    scrape = yaml.safe_load((REPO / "config" / "prometheus.yml").read_text())
    targets = {
        t for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]
    }
    assert targets == {"drkit-monitor:9464", "drkit-replicate:9465"}
    dashboard = json.loads(
        (REPO / "config" / "grafana" / "dashboards" / "drkit-overview.json").read_text()
    )
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for metric in (
        "drkit_cluster_quorum_state",
        "drkit_flow_lag_records",
        "drkit_replication_records_total",
        "drkit_checkpoint_age_max_seconds",
    ):
        assert metric in exprs


def test_every_dashboard_metric_exists() -> None:
    import re

    from prometheus_client import CollectorRegistry

    from drkit.health.metrics import MonitorMetrics
    from drkit.offsets.metrics import CheckpointMetrics
    from drkit.replication.metrics import ReplicationMetrics

    registry = CollectorRegistry()
    for family in (ReplicationMetrics, CheckpointMetrics, MonitorMetrics):
        family.create(registry)
    exposed = {
        sample
        for metric in registry.collect()
        for sample in {
            metric.name,
            f"{metric.name}_total",
            f"{metric.name}_bucket",
            f"{metric.name}_count",
        }
    }
    dashboard = (REPO / "config" / "grafana" / "dashboards" / "drkit-overview.json").read_text()
    referenced = set(re.findall(r"drkit_[a-z_]+", dashboard)) - {"drkit_overview"}
    assert referenced and referenced <= exposed, referenced - exposed
