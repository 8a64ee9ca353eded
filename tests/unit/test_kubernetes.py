"""deploy/kubernetes, checked offline: every resource against Kubernetes' own schemas (strict,
kubernetes-validate from PyPI), and against drkit itself - the config parses, each container's
arguments parse as its drkit command, probes reach the port that command listens on, the pods
run as the image's user, and the monitors are distinct observers.

Not tested: a real cluster (none here) - scheduling, the image pull, Secrets, networking.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml

from drkit.cli import cli
from drkit.config import load_config_text

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KUBERNETES = "1.30"  # the oldest version still supported upstream when this was written


def _documents() -> list[dict[str, Any]]:
    documents = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return documents


def _resources() -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d
        for d in _documents()
        if d["kind"] != "Kustomization"
    }


def _workloads() -> dict[str, dict[str, Any]]:
    return {k: d for k, d in _resources().items() if d["kind"] in ("Deployment", "StatefulSet")}


def test_every_resource_is_valid_for_kubernetes_and_kustomize_lists_each_file() -> None:
    for name, document in _resources().items():
        try:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{name}: {err.message} at {list(err.path)}")
    [kustomization] = [d for d in _documents() if d["kind"] == "Kustomization"]
    files = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_the_config_map_is_a_valid_drkit_config_with_two_observers() -> None:
    document = _resources()["ConfigMap/drkit-config"]
    config = load_config_text(document["data"]["drkit.yaml"], env={"DRKIT_DB_PASSWORD": "x"})
    assert config.health.observer_quorum == 2
    url = config.state_store.url
    assert url is not None and url.get_secret_value().startswith("postgresql")


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    [container] = workload["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _parsed(args: list[str]) -> click.Context:
    """``args`` parsed by the drkit command they name (raises on an unknown option)."""
    root = click.Context(cli)
    command = cli.get_command(root, args[0])
    assert command is not None, args[0]
    return command.make_context(args[0], list(args[1:]), parent=root)


@pytest.mark.parametrize("name", sorted(_workloads()))
def test_each_container_runs_a_drkit_command_as_the_images_user(name: str) -> None:
    workload = _workloads()[name]
    pod = workload["spec"]["template"]["spec"]
    container = _container(workload)
    params = _parsed(container["args"]).params
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert str(Path(params["config_file"]).parent) in mounts  # the ConfigMap is where it reads
    assert "/var/lib/drkit" in mounts  # the state dir, writable (the root filesystem is not)
    dockerfile = (ROOT / "Dockerfile").read_text()
    uid = re.search(r"useradd .*--uid (\d+)", dockerfile)
    assert uid is not None and pod["securityContext"]["runAsUser"] == int(uid.group(1))
    assert pod["securityContext"]["runAsNonRoot"] is True
    env = {e["name"] for e in container.get("env", ())}
    assert "DRKIT_DB_PASSWORD" in env  # the config's ${DRKIT_DB_PASSWORD}
    for reference in re.findall(r"\$\((\w+)\)", " ".join(container["args"])):
        assert reference in env, f"$({reference}) is not in the container's env"


def _port_of(container: dict[str, Any], probe: dict[str, Any]) -> int:
    port = probe["httpGet"]["port"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    return int(named.get(port, port))


def test_probes_ask_healthz_on_the_port_each_command_serves() -> None:
    workloads = _workloads()
    replicate = _container(workloads["Deployment/drkit-replicate"])
    monitor = _container(workloads["StatefulSet/drkit-monitor"])
    served = {
        "replicate": int(_parsed(replicate["args"]).params["metrics_port"]),
        "monitor": int(_parsed(monitor["args"]).params["listen"].rsplit(":", 1)[1]),
    }
    for container, port in ((replicate, served["replicate"]), (monitor, served["monitor"])):
        for kind in ("livenessProbe", "readinessProbe"):
            probe = container[kind]
            assert probe["httpGet"]["path"] == "/healthz"
            assert _port_of(container, probe) == port, (container["name"], kind)


def test_monitors_are_distinct_observers_and_workers_stop_within_their_grace() -> None:
    workloads = _workloads()
    monitor = workloads["StatefulSet/drkit-monitor"]
    assert monitor["spec"]["replicas"] >= 2
    observer = _parsed(_container(monitor)["args"]).params["observer"]
    assert observer == "$(POD_NAME)"  # drkit-monitor-0, -1, ...: stable and distinct
    env = {e["name"]: e for e in _container(monitor)["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    replicate = workloads["Deployment/drkit-replicate"]
    # drkit forces a hanging stop after 50 s: Kubernetes must not kill it before.
    assert replicate["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 50
    assert _parsed(_container(replicate)["args"]).params["checkpoints"] is False
    assert "Deployment/drkit-checkpoint" in workloads  # ... so the checkpointer runs apart
