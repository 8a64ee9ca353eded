"""Least privilege on secured clusters (deny by default): each drkit role runs as its own SCRAM
principal holding only the ACLs ``drkit acls`` computes for it, and the whole move works -
replication, checkpoints, a failover that fences the old primary - while ``drkit doctor``
names an ACL that goes missing and the role that needs it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from drkit.access.rules import AclEntry, Operation, PatternType, Resource, ResourceType
from drkit.config import load_config
from drkit.errors import KafkaError
from drkit.kafka import KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, produce_batch
from drkit.local import LocalKafka
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    assert_groups_resume_exactly,
    drkit,
    fill,
    groups_at_positions,
    wait_replicated,
)
from tests.kafka_backends import backend
from tests.replication_support import DrkitProcess, FlowSetup, Replicator


@dataclass(frozen=True)
class SecuredPair:
    manager: LocalKafka
    state: Path
    source: str
    target: str

    def run(self, *args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "drkit", "--state-dir", str(self.state), *args],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip

    def as_user(self, user: str, directory: Path) -> FlowSetup:
        """The generated config, connecting as ``user`` (its own password file)."""
        document = yaml.safe_load((self.state / "drkit.yaml").read_text())
        for cluster in document["clusters"].values():
            cluster["security"]["username"] = user
            cluster["security"]["password_file"] = str(self.manager.secrets.password_file(user))
        path = directory / f"drkit-{user}.yaml"
        path.write_text(yaml.safe_dump(document))
        return FlowSetup(path, load_config(path), self.source, self.target)


@pytest.fixture(scope="module")
def secured_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    if backend() != "local":
        pytest.skip("secured local clusters need DRKIT_TEST_KAFKA=local")
    state = tmp_path_factory.mktemp("least-privilege") / "state"
    tag = uuid.uuid4().hex[:4]
    pair = SecuredPair(LocalKafka(state), state, f"lpa{tag}", f"lpb{tag}")
    try:
        up = pair.run("local", "up", "--clusters", f"{pair.source},{pair.target}", "--secure")
        assert up.returncode == 0, up.stderr + up.stdout
        assert "least-privilege ACL(s)" in up.stdout
        yield pair
    finally:
        pair.manager.down([pair.source, pair.target], purge=True)


def test_every_role_runs_as_its_own_least_privilege_principal_through_a_failover(
    secured_pair: SecuredPair, tmp_path: Path, names: Names
) -> None:
    pair = secured_pair
    doctor = pair.run("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "FAIL" not in doctor.stdout
    for role in ("replicator", "checkpointer", "monitor", "engine", "verifier"):
        assert f"{role} ACLs: User:{role} holds all" in doctor.stdout, doctor.stdout

    app, admin = pair.as_user("app", tmp_path), pair.as_user("admin", tmp_path)
    topic = names.topic("orders")
    # Topics are the operator's: created by the super user; the application writes and
    # commits with its own principal.
    KafkaAdmin(admin.source_endpoint).create_topics([TopicSpec(topic, PARTITIONS)])
    fill(app.source_endpoint, topic, PER_PARTITION)
    groups = groups_at_positions(topic, names)
    for group, offsets in groups.items():
        commit_group_offsets(app.source_endpoint, group, offsets)

    replicator = Replicator(pair.as_user("replicator", tmp_path), "--no-checkpoints",
                            log_dir=tmp_path)  # fmt: skip
    checkpointer = DrkitProcess(
        ["checkpoint", "--config", str(pair.as_user("checkpointer", tmp_path).path)],
        tmp_path, "checkpoint",
    )  # fmt: skip
    with replicator, checkpointer:
        wait_replicated(admin, topic, groups)
        engine = pair.as_user("engine", tmp_path)
        done = drkit(engine, "failover", "--from", pair.source, "--to", pair.target, "--yes",
                     "-o", "json")  # fmt: skip
        assert done.code == 0, done.err + done.out
    for process in (replicator, checkpointer):
        log = process.log_path.read_text()
        assert "AUTHORIZATION_FAILED" not in log, log[-3000:]
    run = done.json()
    assert run["state"] == "succeeded", run
    assert run["plan"]["translation_mode"] == "live"  # the source answers: read it directly
    # The old primary is fenced for the application principal ...
    with pytest.raises(KafkaError, match="AUTHORIZATION"):
        produce_batch(app.source_endpoint, topic, [(None, b"late")], partition=0, timeout_s=10)
    # ... and every group resumes on the standby where it stopped.
    replica = f"{pair.source}.{topic}"
    assert_groups_resume_exactly(admin, replica, groups)


def test_the_doctor_names_a_missing_acl_and_its_role_and_drkit_acls_apply_restores_it(
    secured_pair: SecuredPair,
) -> None:
    pair = secured_pair
    as_admin = KafkaAdmin(pair.manager.endpoint_as(pair.target, "admin"))
    replicas = Resource(ResourceType.TOPIC, f"{pair.source}.", PatternType.PREFIXED)
    dropped = AclEntry("User:replicator", replicas, Operation.WRITE)
    assert dropped in as_admin.acl_entries()
    as_admin.delete_entries([dropped])

    doctor = pair.run("doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    failed = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, doctor.stdout
    assert failed[0].startswith(f"FAIL {pair.target}: replicator ACLs: User:replicator lacks "
                                f"ALLOW WRITE on topics prefixed '{pair.source}.'")  # fmt: skip
    assert "replicas of" in failed[0]

    shown = pair.run("acls", "--role", "replicator", "--cluster", pair.target)
    assert shown.returncode == 0, shown.stderr
    assert f"ALLOW User:replicator WRITE on topics prefixed '{pair.source}.'" in shown.stdout
    applied = pair.run("acls", "--role", "replicator", "--cluster", pair.target, "--apply")
    assert applied.returncode == 0, applied.stderr
    again = pair.run("doctor")
    assert again.returncode == 0, again.stdout + again.stderr
