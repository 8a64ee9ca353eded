"""`drkit local up --secure` on real brokers: SASL_SSL with SCRAM for clients, mutual TLS
between controllers, deny by default - and drkit's generated config connects through it with
secrets it reads from files."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from drkit.acl.fencing import topic_acl
from drkit.acl.rules import Operation, Permission
from drkit.config import load_config
from drkit.config.model import ClusterConfig
from drkit.errors import CredentialsRefusedError, KafkaError
from drkit.failover.protections import fence_entries
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.local import LocalKafka
from drkit.local.secure import client_security
from tests.kafka_backends import backend
from tests.replication_support import DrkitProcess, wait_until


@pytest.fixture
def secured(tmp_path: Path) -> tuple[LocalKafka, str, Path]:
    if backend() != "local":
        pytest.skip("secured local clusters need DRKIT_TEST_KAFKA=local")
    return (
        LocalKafka(tmp_path / "state", connect=KafkaAdmin),
        f"sec-{uuid.uuid4().hex[:6]}",
        tmp_path / "state",
    )


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
        # The fence the reconciler places on a deny-by-default cluster: the DENY alone, no
        # companion ALLOW READ for User:* (that would open the topic to every principal).
        fence = fence_entries([topic], "User:*", companions=())
        admin.create_entries(fence)
        wait_until(lambda: fence <= admin.acl_entries(), 15, what="the fence visible")
        with pytest.raises(KafkaError, match="AUTHORIZATION"):
            produce_batch(as_app, topic, [(b"k", b"after the fence")])
        widened = [a for a in admin.principal_acls("User:*") if a.resource.name == topic
                   and a.permission is Permission.ALLOW]  # fmt: skip
        assert widened == []
        admin.delete_entries(fence)
        wait_until(lambda: not fence & admin.acl_entries(), 15, what="the fence gone")
        produce_batch(as_app, topic, [(b"k", b"after the fence was lifted")])
        # A restart keeps the same identity and users (settings rewritten, nothing regenerated).
        manager.stop_broker(name)
        manager.start_broker(name)
        assert topic in KafkaAdmin(manager.endpoint_as(name, "drkit")).list_topics()
    finally:
        manager.down([name], purge=True)


def test_mtls_clients_authenticate_by_certificate_as_the_same_least_privilege_principals(
    tmp_path: Path,
) -> None:
    """``local up --secure --mtls``: no SASL anywhere; each principal has a client certificate
    (CN = its user) that the brokers map to ``User:<user>`` - so the least-privilege ACLs of
    the SCRAM setup apply unchanged: the doctor finds every role's ACLs, a user no ACL names is
    refused until one does, and the replicator copies a topic as itself."""
    if backend() != "local":
        pytest.skip("secured local clusters need DRKIT_TEST_KAFKA=local")
    state = tmp_path / "state"
    manager = LocalKafka(state, connect=KafkaAdmin)
    tag = uuid.uuid4().hex[:4]
    source, target, topic = f"mta{tag}", f"mtb{tag}", f"orders-{tag}"

    def drkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "drkit", "--state-dir", str(state), *args],
                              capture_output=True, text=True, timeout=240, check=False)  # fmt: skip

    try:
        up = drkit("local", "up", "--clusters", f"{source},{target}", "--secure", "--mtls")
        assert up.returncode == 0, up.stderr + up.stdout
        assert "TLS client certificate" in up.stdout and "least-privilege ACL(s)" in up.stdout
        config_text = (state / "drkit.yaml").read_text()
        assert "ssl_key_location" in config_text and "PRIVATE KEY" not in config_text
        doctor = drkit("doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        for role in ("replicator", "checkpointer", "monitor", "engine", "fencer", "verifier"):
            assert f"{role} ACLs: User:{role} holds all" in doctor.stdout, doctor.stdout

        as_admin = KafkaAdmin(manager.endpoint_as(source, "admin"))
        as_admin.create_topics([TopicSpec(topic, 2)])
        # A certificate the CA signed for a user no ACL names: authenticated, then refused ...
        stranger = manager.endpoint_as(source, "stranger")
        with pytest.raises(KafkaError, match="AUTHORIZATION"):
            produce_batch(stranger, topic, [(b"k", b"v")], partition=0, timeout_s=10)
        # ... until an ACL names User:stranger: the certificate's CN is the principal.
        as_admin.grant([topic_acl(topic, "User:stranger", Operation.WRITE, Permission.ALLOW)])
        produce_batch(stranger, topic, [(b"k", b"v")], partition=0, timeout_s=10)
        as_app = manager.endpoint_as(source, "app")  # the application role's grants (local up)
        for partition in (0, 1):
            produce_batch(as_app, topic, [(b"k", b"v")] * 20, partition=partition, timeout_s=10)

        replica = f"{source}.{topic}"
        target_admin = KafkaAdmin(manager.endpoint_as(target, "admin"))
        with DrkitProcess(["--state-dir", str(state), "replicate", "--no-checkpoints"],
                          tmp_path, "replicate") as replicating:  # fmt: skip
            wait_until(
                lambda: replica in target_admin.list_topics()
                and sum(end for _, end in target_admin.topic_offsets(replica).values()) == 41,
                90, 1.0, what="41 records copied as the replicator",
            )  # fmt: skip
        log = replicating.log()
        assert f"{source}=certificate replicator.pem" in log, log[-3000:]
        assert "AUTHORIZATION_FAILED" not in log, log[-3000:]

        # The other delivery mode: exactly-once needs transactional ids the at-least-once flow
        # did not; `drkit acls --apply` grants them for the changed config.
        document = yaml.safe_load(config_text)
        document["flows"][0]["exactly_once"] = True
        exactly_once = state / "drkit-exactly-once.yaml"
        exactly_once.write_text(yaml.safe_dump(document))
        applied = drkit("acls", "--role", "replicator", "--cluster", target, "--apply",
                        "--config", str(exactly_once))  # fmt: skip
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "transactional" in applied.stdout.lower(), applied.stdout
        for partition in (0, 1):
            produce_batch(as_app, topic, [(b"k", b"w")] * 10, partition=partition, timeout_s=10)
        as_target = manager.endpoint_as(target, "admin")
        command = ["--state-dir", str(state), "replicate", "--config", str(exactly_once),
                   "--no-checkpoints"]  # fmt: skip
        with DrkitProcess(command, tmp_path, "replicate-eos") as transactional:
            wait_until(lambda: len(consume_all(as_target, replica, timeout_s=10)) == 61, 90, 1.0,
                       what="61 records visible on the replica")  # fmt: skip
        log = transactional.log()
        assert "AUTHORIZATION_FAILED" not in log, log[-3000:]
        # Written in transactions: their commit markers take offsets too.
        assert sum(end for _, end in target_admin.topic_offsets(replica).values()) > 61
        # Spark's Java client with the verifier's certificate (a PEM key store) proves it all.
        verified = drkit("verify", "--flow", f"{source}->{target}", "--topics", topic,
                         "--out", str(tmp_path / "verify"), "-o", "json")  # fmt: skip
        assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
        totals = json.loads(verified.stdout)["totals"]
        assert totals["records"] == 61 and totals["missing"] == 0, totals
        # The private keys went to the clients, and nowhere else: not into a log, an output,
        # the verify directory or the store.
        keys = {user: _key_body(manager.secrets.client_certificate(user).key)
                for user in ("drkit", "replicator", "verifier")}  # fmt: skip
        texts = [up.stdout, up.stderr, doctor.stdout, verified.stdout, verified.stderr,
                 replicating.log(), transactional.log()]  # fmt: skip
        brokers = state / "local"  # the clusters' own data and the key files themselves
        files = [p for p in tmp_path.rglob("*") if p.is_file() and brokers not in p.parents]
        for user, body in keys.items():
            assert not any(body in text for text in texts), f"{user}'s key printed"
            for path in files:
                if path.suffix != ".pem":
                    assert body.encode() not in path.read_bytes(), f"{user}'s key in {path}"
    finally:
        manager.down([source, target], purge=True)


def _key_body(path: Path) -> str:
    """The base64 body of a PEM private key, on one line as it would leak into a log."""
    lines = path.read_text().strip().splitlines()
    return "".join(line for line in lines if not line.startswith("-----"))[:64]
