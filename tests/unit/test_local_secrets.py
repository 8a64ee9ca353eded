"""Secured local clusters' credentials (drkit.local.tls, drkit.local.secure) and the config
drkit writes for them: secrets in owner-only files, referenced, never inlined."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from drkit.config import load_config
from drkit.config.model import Role, SecurityConfig, connects_as
from drkit.errors import ConfigError
from drkit.kafka.clients import ClusterEndpoint, client_settings
from drkit.local.cluster import ClusterStatus
from drkit.local.config_writer import write_local_config
from drkit.local.secure import (
    MTLS,
    argument_file,
    broker_settings,
    redact_scram,
    scram_format_arguments,
)
from drkit.local.tls import USERS, LocalSecrets


def test_secrets_are_made_once_owner_only_and_the_node_certificate_fits_its_addresses(
    tmp_path: Path,
) -> None:
    secrets = LocalSecrets(tmp_path)
    node = secrets.node("dc1", ["127.0.0.1", "10.200.1.2"])
    passwords = {user: secrets.password(user) for user in USERS}
    assert len(set(passwords.values())) == len(USERS) and all(
        len(p) >= 24 for p in passwords.values()
    )
    assert stat.S_IMODE(secrets.directory.stat().st_mode) == 0o700
    for path in secrets.directory.iterdir():
        if path.name != "ca.pem":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    again = LocalSecrets(tmp_path)  # idempotent: nothing is regenerated
    assert again.node("dc1", ["127.0.0.1"]) == node
    assert {user: again.password(user) for user in USERS} == passwords

    store = node.keystore.read_bytes()
    with pytest.raises(ValueError):  # the key store is encrypted ...
        pkcs12.load_key_and_certificates(store, b"wrong")
    key, cert, chain = pkcs12.load_key_and_certificates(store, node.key_password.encode())
    assert key is not None and cert is not None
    ca = x509.load_pem_x509_certificate(secrets.ca.read_bytes())
    assert chain == [ca]
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.200.1.2"),
    }
    assert node.principal == "User:CN=dc1-node"


def test_a_secured_node_denies_by_default_and_names_its_super_users(tmp_path: Path) -> None:
    secrets = LocalSecrets(tmp_path)
    node = secrets.node("dc1", ["127.0.0.1"])
    settings = broker_settings("127.0.0.1", 9092, 9093, node, secrets)
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["super.users"] == "User:admin;User:CN=dc1-node"
    assert settings["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
    assert settings["listener.name.controller.ssl.client.auth"] == "required"
    arguments = scram_format_arguments(secrets)
    assert arguments.count("--add-scram") == len(USERS)


def test_the_written_config_references_secrets_by_file_and_holds_none(tmp_path: Path) -> None:
    secrets = LocalSecrets(tmp_path / "local")
    secrets.ensure()
    clusters = [
        ClusterStatus("dc1", "127.0.0.1:1", (), secure=True),
        ClusterStatus("dc2", "127.0.0.1:2", (), secure=True),
    ]
    path = write_local_config(tmp_path, clusters, secrets)
    text = path.read_text()
    for user in USERS:
        assert secrets.password(user) not in text
    config = load_config(path, env={})
    security = config.clusters["dc1"].security
    assert security.username == "drkit" and security.password is not None
    assert security.password.get_secret_value() == secrets.password("drkit")
    settings = client_settings(ClusterEndpoint("dc1", config.clusters["dc1"]))
    assert settings["security.protocol"] == "SASL_SSL"
    # Each role's process connects as its own principal, password by file too.
    for role, user in ((Role.REPLICATOR, "replicator"), (Role.MONITOR, "monitor"),
                       (Role.APP_PRODUCER, "app")):  # fmt: skip
        as_role = config.as_role(role).clusters["dc1"].security
        assert as_role.username == user and as_role.password is not None
        assert as_role.password.get_secret_value() == secrets.password(user)
    assert connects_as(config.as_role(Role.ENGINE), ["dc2", "dc1"]) == (
        "dc1=User:engine,dc2=User:engine"
    )
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512"
    assert settings["ssl.ca.location"] == str(secrets.ca)


def test_a_password_file_that_is_missing_or_given_with_a_password_is_a_config_error(
    tmp_path: Path,
) -> None:
    base = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "u"}
    with pytest.raises(ValueError, match="No such file"):
        SecurityConfig.model_validate({**base, "password_file": str(tmp_path / "nope")})
    (tmp_path / "pw").write_text("s3cret\nignored\n")
    loaded = SecurityConfig.model_validate({**base, "password_file": str(tmp_path / "pw")})
    assert loaded.password is not None and loaded.password.get_secret_value() == "s3cret"
    with pytest.raises(ValueError, match="not both"):
        SecurityConfig.model_validate(
            {**base, "password": "x", "password_file": str(tmp_path / "pw")}
        )
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1:\n    bootstrap_servers: '127.0.0.1:1'\n    security:\n"
        "      protocol: SASL_SSL\n      sasl_mechanism: SCRAM-SHA-512\n      username: u\n"
        f"      password_file: {tmp_path / 'missing'}\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(config, env={})
    assert "clusters.dc1.security" in str(raised.value) and "No such file" in str(raised.value)


def test_a_secured_nodes_properties_file_is_owner_only(tmp_path: Path) -> None:
    """server.properties holds the super user's password (inter-broker SCRAM)."""
    from drkit.kafka import KafkaAdmin
    from drkit.local.cluster import BrokerState, LocalClusterState, LocalKafka

    manager = LocalKafka(tmp_path, connect=KafkaAdmin)
    state = LocalClusterState("dc1", "id", [BrokerState(1, 1, 2)], secure=True)
    manager._write_properties(state, state.brokers[0])
    written = tmp_path / "local" / "dc1" / "broker-1" / "server.properties"
    assert manager.secrets.password("admin") in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_scram_passwords_reach_kafka_storage_through_an_owner_only_argument_file(
    tmp_path: Path,
) -> None:
    """The format step's SCRAM arguments go through a Java @argfile: the command line (which
    any local user can read in /proc) names the file, the file is 0600 and gone afterwards.
    After the main class the launcher splits on whitespace and keeps quotes, so arguments go
    one per line as they are, and one that holds whitespace or a quote is refused."""
    secrets = LocalSecrets(tmp_path / "local")
    secrets.ensure()
    arguments = scram_format_arguments(secrets)
    path = tmp_path / "format.args"
    with argument_file(path, arguments) as words:
        assert words == [f"@{path}"]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        lines = path.read_text().splitlines()
        assert all(secrets.password(user) not in " ".join(words) for user in USERS)
    assert not path.exists()
    assert lines == arguments
    with argument_file(path, []) as words:  # nothing secret: no file, no word
        assert words == [] and not path.exists()
    with pytest.raises(ValueError, match="whitespace, a quote"), argument_file(path, ['a "b"']):
        pass
    assert not path.exists()


def test_a_format_failure_names_no_password_even_when_the_tool_wraps_its_lines(
    tmp_path: Path,
) -> None:
    """kafka-storage echoes unrecognised arguments and wraps long lines - inside a password
    too: the error drkit raises carries none of it."""
    secrets = LocalSecrets(tmp_path / "local")
    secrets.ensure()
    password = secrets.password("app")
    echoed = (f'unrecognized arguments: "SCRAM-SHA-512=[name=app,password={password[:10]}-\n'
              f'{password[10:]}]" and {secrets.password("admin")}')  # fmt: skip
    said = redact_scram(echoed, secrets)
    assert password[:10] not in said and password[10:] not in said
    assert secrets.password("admin") not in said and "password=***]" in said


def test_mtls_clients_get_a_certificate_named_after_their_user_and_the_broker_maps_it(
    tmp_path: Path,
) -> None:
    """--mtls: an SSL client listener that requires a certificate and maps CN=<user> to
    User:<user> (the same principals, so the same ACLs, as SCRAM); no SASL at all; the nodes
    are super users under both names (mapped on the client listener, the DN on the
    controllers')."""
    secrets = LocalSecrets(tmp_path)
    node = secrets.node("dc1", ["127.0.0.1"])
    settings = broker_settings("127.0.0.1", 9092, 9093, node, secrets, MTLS)
    assert settings["listeners"] == "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert settings["listener.name.ssl.ssl.client.auth"] == "required"
    assert settings["listener.name.ssl.ssl.principal.mapping.rules"].startswith("RULE:^CN=")
    assert settings["super.users"] == "User:admin;User:CN=dc1-node;User:dc1-node"
    assert not any("sasl" in key for key in settings)

    made = secrets.client_certificate("replicator")
    assert stat.S_IMODE(made.key.stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(made.certificate.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(secrets.ca.read_bytes()))
    common = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    assert [a.value for a in common] == ["replicator"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    first = made.certificate.read_bytes()
    assert secrets.client_certificate("replicator") == made  # made once, not again
    assert made.certificate.read_bytes() == first


def test_the_written_mtls_config_names_each_roles_certificate_and_holds_no_key(
    tmp_path: Path,
) -> None:
    secrets = LocalSecrets(tmp_path / "local")
    secrets.ensure()
    clusters = [
        ClusterStatus("dc1", "127.0.0.1:1", (), secure=True, client_auth=MTLS),
        ClusterStatus("dc2", "127.0.0.1:2", (), secure=True, client_auth=MTLS),
    ]
    path = write_local_config(tmp_path, clusters, secrets)
    text = path.read_text()
    assert "PRIVATE KEY" not in text and "password" not in text
    config = load_config(path, env={})
    settings = client_settings(ClusterEndpoint("dc1", config.clusters["dc1"]))
    assert settings["security.protocol"] == "SSL"
    drkit_certificate = secrets.client_certificate("drkit").certificate
    assert settings["ssl.certificate.location"] == str(drkit_certificate)
    replicator = config.as_role(Role.REPLICATOR).clusters["dc2"].security
    assert replicator.ssl_key_location == str(secrets.client_certificate("replicator").key)
    assert connects_as(config.as_role(Role.REPLICATOR), ["dc1"]) == "dc1=certificate replicator.pem"
