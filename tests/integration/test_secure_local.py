"""`drkit local up --secure` on real brokers: SASL_SSL with SCRAM for clients, mutual TLS
between controllers, deny by default - and drkit's generated config connects through it with
secrets it reads from files."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from drkit.access.rules import Operation, Permission
from drkit.config import load_config
from drkit.config.model import ClusterConfig
from drkit.errors import CredentialsRefusedError, KafkaError
from drkit.failover.steps.fencing import fence_companions
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.acls import topic_acl
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.local import LocalKafka
from drkit.local.secure import client_security
from tests.kafka_backends import backend


@pytest.fixture
def secured(tmp_path: Path) -> tuple[LocalKafka, str, Path]:
    if backend() != "local":
        pytest.skip("secured local clusters need DRKIT_TEST_KAFKA=local")
    return LocalKafka(tmp_path / "state"), f"sec-{uuid.uuid4().hex[:6]}", tmp_path / "state"


def test_a_secured_local_cluster_authenticates_authorizes_and_denies_by_default(
    secured: tuple[LocalKafka, str, Path],
) -> None:
    manager, name, state = secured
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "drkit", "--state-dir", str(state), "local", "up",
             "--clusters", name, "--secure"],
            capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        for user in ("admin", "drkit", "app"):
            assert manager.secrets.password(user) not in done.stdout + done.stderr
        config = (state / "drkit.yaml").read_text()
        assert "password_file" in config and manager.secrets.password("drkit") not in config
        checked = subprocess.run(
            [sys.executable, "-m", "drkit", "--state-dir", str(state), "clusters", "check"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr + checked.stdout

        as_drkit = manager.endpoint_as(name, "drkit")
        KafkaAdmin(as_drkit).create_topics([TopicSpec(topic, 1)])
        produce_batch(as_drkit, topic, [(b"k", b"v")])  # drkit's principal is allowed
        # An application principal no ACL names is refused: deny by default.
        with pytest.raises(KafkaError, match="AUTHORIZATION"):
            produce_batch(manager.endpoint_as(name, "app"), topic, [(b"k", b"v")])
        bootstrap = manager.cluster_status(name).bootstrap_servers
        wrong = ClusterConfig.model_validate({
            "bootstrap_servers": bootstrap,
            "security": {**client_security(manager.secrets, "drkit"), "password_file": None,
                         "password": "not-it"},
        })  # fmt: skip
        # A wrong password is refused, and the error says so (librdkafka itself reports only a
        # transport failure to the request).
        with pytest.raises(CredentialsRefusedError, match=r"invalid credentials"):
            KafkaAdmin(ClusterEndpoint(name, wrong)).wait_ready(timeout_s=5)
        # Nor does a PLAINTEXT client.
        with pytest.raises(KafkaError):
            KafkaAdmin(ClusterEndpoint.plain(name, bootstrap)).list_topics(timeout_s=5)
        # Fencing on a deny-by-default cluster: the application principal may write and read
        # its topic; the fence stops its writes and widens nobody's reads (no companion ALLOW
        # for User:*); lifting it gives the writes back.
        as_admin = KafkaAdmin(manager.endpoint_as(name, "admin"))
        as_app = manager.endpoint_as(name, "app")
        app_rights = (Operation.WRITE, Operation.READ, Operation.DESCRIBE)
        as_admin.grant(topic_acl(topic, "User:app", op, Permission.ALLOW) for op in app_rights)
        as_admin.grant([topic_acl(f"{topic}-group", "User:app", Operation.READ,
                                 Permission.ALLOW)])  # fmt: skip
        produce_batch(as_app, topic, [(b"k", b"before the fence")])
        admin = KafkaAdmin(as_drkit)
        cluster = load_config(state / "drkit.yaml").clusters[name]
        assert cluster.allow_everyone_if_no_acl is False  # written so by local up --secure
        companions = fence_companions(admin, cluster, {topic}, set())
        assert companions == set()
        admin.deny_writes([topic], "User:*", companions=companions)
        with pytest.raises(KafkaError, match="AUTHORIZATION"):
            produce_batch(as_app, topic, [(b"k", b"after the fence")])
        widened = [a for a in admin.principal_acls("User:*") if a.resource.name == topic
                   and a.permission is Permission.ALLOW]  # fmt: skip
        assert widened == []
        admin.allow_writes([topic], "User:*", reads_allowed=companions)
        produce_batch(as_app, topic, [(b"k", b"after the fence was lifted")])
        # A restart keeps the same identity and users (settings rewritten, nothing regenerated).
        manager.stop_broker(name)
        manager.start_broker(name)
        assert topic in KafkaAdmin(manager.endpoint_as(name, "drkit")).list_topics()
    finally:
        manager.down([name], purge=True)
