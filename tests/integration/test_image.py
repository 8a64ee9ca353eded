"""drkit's image, built with Docker and run: the same Dockerfile users build, on a base made
from Debian packages (public registries cannot be reached here: scripts/debian-base-image).

The image must start as a non-root user, print its version, validate a config, and replicate
between the local clusters - on a read-only root filesystem, as deploy/kubernetes runs it - and
answer /healthz.
Needs a running Docker engine and debootstrap (root): skipped with a note without them,
required in CI (``DRKIT_TEST_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.optional_tools import unavailable
from tests.replication_support import flow_setup, free_ports, wait_until

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 3_000


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """drkit's image built from this checkout (removed at the end)."""
    hint = "apt install docker.io debootstrap and start dockerd (root)"
    if shutil.which("docker") is None or _docker("info").returncode != 0:
        unavailable("DOCKER", "no running Docker engine", hint)
    if shutil.which("debootstrap") is None:
        unavailable("DOCKER", "no debootstrap to build a base image", hint)
    base = subprocess.run(
        [str(ROOT / "scripts" / "debian-base-image")],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert base.returncode == 0, base.stderr[-4000:]
    tag = f"drkit-test:{uuid.uuid4().hex[:8]}"
    built = _docker(
        "build", "--network", "host", "--build-arg", f"BASE={base.stdout.strip()}",
        "-t", tag, str(ROOT), timeout=1200,
    )  # fmt: skip
    assert built.returncode == 0, (built.stdout + built.stderr)[-6000:]
    try:
        yield tag
    finally:
        _docker("image", "rm", "-f", tag)


def test_the_image_runs_drkit_as_a_non_root_user(image: str) -> None:
    version = _docker("run", "--rm", image, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("drkit, version "), version.stdout
    uid = _docker("run", "--rm", "--entrypoint", "id", image, "-u")
    assert uid.returncode == 0 and uid.stdout.strip() not in ("", "0"), uid.stdout + uid.stderr


def test_the_image_validates_a_config_and_refuses_a_broken_one(image: str, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}}}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  dc1:\n    bootstrap: x\n")
    for path in (good, bad):
        path.chmod(0o644)
    ok = _docker("run", "--rm", "-v", f"{good}:/etc/drkit/drkit.yaml:ro", image,
                 "config", "validate", "/etc/drkit/drkit.yaml")  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    refused = _docker("run", "--rm", "-v", f"{bad}:/etc/drkit/drkit.yaml:ro", image,
                      "config", "validate", "/etc/drkit/drkit.yaml")  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "bootstrap_servers: required key is missing" in refused.stdout + refused.stderr


def test_the_image_replicates_between_the_local_clusters_and_stops_cleanly(
    image: str, dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("imaged")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    document = yaml.safe_load(setup.path.read_text())
    del document["state_store"]  # the container's own state dir (its user's home)
    config = tmp_path / "container.yaml"
    config.write_text(yaml.safe_dump(document))
    config.chmod(0o644)
    dc1.admin().create_topics([TopicSpec(topic, 3)])
    produce_batch(setup.source_endpoint, topic, ((str(i).encode(), b"v") for i in range(RECORDS)))
    name = f"drkit-replicate-{uuid.uuid4().hex[:8]}"
    port = free_ports()
    # As deploy/kubernetes runs it: a read-only root filesystem, the state dir writable.
    started = _docker(
        "run", "-d", "--name", name, "--network", "host", "--read-only",
        "--tmpfs", "/var/lib/drkit:uid=10001,gid=10001,mode=0700",
        "-v", f"{config}:/etc/drkit/drkit.yaml:ro", image,
        "replicate", "--config", "/etc/drkit/drkit.yaml", "--metrics-port", str(port),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    replica = f"{setup.source}.{topic}"
    try:

        def copied() -> int:
            try:
                ends = dc2.admin().topic_offsets(replica, 5)
            except Exception:  # not created yet
                return 0
            return sum(end for _start, end in ends.values())

        try:
            wait_until(lambda: copied() == RECORDS, 120, 0.5, what=f"{RECORDS} on {replica}")
        except AssertionError as err:
            logs = _docker("logs", name)
            raise AssertionError(f"{err}\n{(logs.stdout + logs.stderr)[-4000:]}") from None
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            assert (reply.status, reply.read()) == (200, b"ok\n")
        stopped = _docker("stop", "--time", "60", name, timeout=90)
        assert stopped.returncode == 0, stopped.stderr
        code = _docker("inspect", "--format", "{{.State.ExitCode}}", name)
        logs = _docker("logs", name)
        assert code.stdout.strip() == "0", (logs.stdout + logs.stderr)[-4000:]
        assert copied() == RECORDS  # nothing more after the stop: every record once
    finally:
        _docker("rm", "-f", name)
