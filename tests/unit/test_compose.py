"""docker-compose.yml stays valid and consistent with drkit's configs, checked statically (the
stack itself runs in tests/integration/test_compose_stack.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from drkit.config import load_config
from drkit.local import KAFKA_VERSION
from drkit.local.cluster import OPEN_AUTHORIZER, as_docker_env
from tests.metrics_catalog import exported_metrics
from tests.optional_tools import unavailable

REPO = Path(__file__).resolve().parents[2]


def compose_command() -> list[str]:
    """``docker-compose`` (Debian) or ``docker compose``; both validate without an engine.

    Optional on a developer's machine (the test skips and says how to get it); CI installs it
    and sets DRKIT_TEST_REQUIRE_COMPOSE=1, which turns its absence into a failure.
    """
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return unavailable("COMPOSE", "no docker-compose", "apt install docker-compose to validate it")


REQUIRED_SECRETS = ("DRKIT_DB_PASSWORD", "GRAFANA_ADMIN_PASSWORD")


def test_compose_file_parses_with_docker_compose() -> None:
    command = [*compose_command(), "-f", "docker-compose.yml", "config", "-q"]
    unset = {k: v for k, v in os.environ.items() if k not in REQUIRED_SECRETS}
    given = unset | dict.fromkeys(REQUIRED_SECRETS, "s3cret")
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=given, check=False)
    assert done.returncode == 0, done.stderr
    # Without the secrets compose refuses, naming what to set (no built-in passwords).
    refused = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, env=unset, check=False
    )
    assert refused.returncode != 0
    assert any(name in refused.stderr for name in REQUIRED_SECRETS), refused.stderr


def test_compose_publishes_on_loopback_only_and_ships_no_credentials() -> None:
    text = (REPO / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert len(published) == 6  # dc1, dc2, the store, monitor, Prometheus, Grafana
    assert all(p.startswith("127.0.0.1:") for p in published), published
    # Every password comes from a required variable (${VAR:?message}), never a default.
    passwords = {
        name: value
        for service in services.values()
        for name, value in (service.get("environment") or {}).items()
        if "PASSWORD" in name
    }
    assert set(passwords) == {
        "POSTGRES_PASSWORD",
        "GF_SECURITY_ADMIN_PASSWORD",
        "DRKIT_DB_PASSWORD",
    }
    for name, value in passwords.items():
        assert value.startswith("${") and ":?" in value, (name, value)
    assert ":-" not in text
    for config in ("drkit.compose-internal.yaml", "drkit.example.yaml"):
        assert ":-" not in (REPO / "config" / config).read_text().split("\nversion:", 1)[1]


def test_compose_clusters_match_the_pinned_kafka_and_the_compose_config() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("dc1", "dc2"):
        assert services[name]["image"] == f"apache/kafka:{KAFKA_VERSION}"
    config = load_config(REPO / "config" / "drkit.compose.yaml", env={"DRKIT_DB_PASSWORD": "x"})
    # "127.0.0.1:19092:19092": host address, host port, container port.
    published = {name: services[name]["ports"][0].split(":")[1] for name in ("dc1", "dc2")}
    for name, port in published.items():
        assert config.clusters[name].bootstrap_servers == f"127.0.0.1:{port}"
    # An authorizer, as drkit local up runs: without one a broker refuses the fence's ACLs.
    for name in ("dc1", "dc2"):
        assert as_docker_env(OPEN_AUTHORIZER).items() <= services[name]["environment"].items()


def test_compose_wires_drkit_prometheus_and_grafana() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"drkit-replicate", "drkit-monitor", "prometheus", "grafana", "postgres"} <= set(
        services
    )
    internal = load_config(
        REPO / "config" / "drkit.compose-internal.yaml", env={"DRKIT_DB_PASSWORD": "s3cret"}
    )
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
    dashboard = (REPO / "config" / "grafana" / "dashboards" / "drkit-overview.json").read_text()
    referenced = set(re.findall(r"drkit_[a-z_]+", dashboard)) - {"drkit_overview"}
    exposed = exported_metrics()
    assert referenced and referenced <= set(exposed), referenced - set(exposed)


def test_the_dashboard_takes_its_datasource_and_clusters_and_flows_as_variables() -> None:
    """No hard-coded datasource (it imports into any Grafana), and every panel follows the
    cluster and flow pickers wherever its metric has that label."""
    import re

    dashboard = json.loads(
        (REPO / "config" / "grafana" / "dashboards" / "drkit-overview.json").read_text()
    )
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"cluster", "flow"} <= set(variables)
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            for metric, selector in re.findall(r"(drkit_[a-z_]+)(\{[^}]*\})?", target["expr"]):
                if metric.startswith("drkit_cluster_"):
                    assert 'cluster=~"$cluster"' in selector, target["expr"]
                if metric.startswith(("drkit_flow_", "drkit_replication_")):
                    assert 'flow=~"$flow"' in selector, target["expr"]


def test_the_host_side_config_uses_the_containers_state_store() -> None:
    """A failover run from the host must coordinate with the containers' replicate and monitor
    (one lease, one pointer, the same acks): the same PostgreSQL database, through the port
    compose publishes for it - not a SQLite file of its own."""
    from sqlalchemy.engine import make_url

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = {"DRKIT_DB_PASSWORD": "s3cret"}
    internal = load_config(REPO / "config" / "drkit.compose-internal.yaml", env=env)
    host = load_config(REPO / "config" / "drkit.compose.yaml", env=env)
    assert internal.state_store.url is not None and host.state_store.url is not None
    inside = make_url(internal.state_store.url.get_secret_value())
    outside = make_url(host.state_store.url.get_secret_value())
    assert (outside.drivername, outside.username, outside.password, outside.database) == (
        inside.drivername, inside.username, inside.password, inside.database,
    )  # fmt: skip
    # "127.0.0.1:15432:5432": the host's address and port lead to the container's port.
    [published] = compose["services"][inside.host]["ports"]
    address, host_port, container_port = published.split(":")
    assert (outside.host, outside.port) == (address, int(host_port))
    assert int(container_port) == (inside.port or 5432)
