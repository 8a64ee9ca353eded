"""What makes a local cluster secured (``drkit local up --secure``): its broker settings, its
SCRAM users, the client settings of each local principal and the ACLs the super user
bootstraps.

The client listener is SASL_SSL with SCRAM-SHA-512 - or, created with ``--mtls``, SSL with
client certificates (:data:`MTLS`): each user's certificate has the user as its CN and the
listener maps ``CN=<user>`` to ``User:<user>``, so the same principals hold the same ACLs either
way.  The controller listener is SSL with client certificates (KRaft controllers cannot
authenticate SCRAM users: the credentials live in the metadata they serve), so nodes are
``User:CN=<cluster>-node`` there.  StandardAuthorizer denies whatever no ACL allows.  ``admin``
is the only super user besides the nodes; it is used to create the ACLs of the other
principals and for nothing else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkit.config.model import ClusterConfig, Role
from drkit.local.tls import SCRAM_MECHANISM, SUPER_USER, USERS, LocalSecrets, NodeIdentity

CLIENT_LISTENER = "SASL_SSL"
SCRAM = "scram"  # how clients of a secured local cluster authenticate: SCRAM-SHA-512 ...
MTLS = "mtls"  # ... or TLS client certificates
CLIENT_AUTH = (SCRAM, MTLS)
# CN=<user> -> User:<user> on the mTLS client listener (the controller listener keeps the DN).
_CN_TO_USER = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
# The JVM system property that lists the OAuth URLs a Kafka 4 process may fetch.
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
_OAUTH = "org.apache.kafka.common.security.oauthbearer"


@dataclass(frozen=True)
class OidcValidation:
    """How a secured local cluster validates OAUTHBEARER tokens: against the signing keys at
    ``jwks_url`` (an OpenID provider's JWKS endpoint), requiring ``audience`` when given.  The
    principal is the token's ``sub`` claim (``User:<sub>``)."""

    jwks_url: str
    audience: str | None = None
    issuer: str | None = None  # the iss claim tokens must carry (any issuer when None)


def broker_settings(
    address: str,
    port: int,
    controller_port: int,
    node: NodeIdentity,
    secrets: LocalSecrets,
    client_auth: str = SCRAM,
) -> dict[str, Any]:
    """server.properties entries of a secured node (they replace the PLAINTEXT ones)."""
    if client_auth == MTLS:
        return _mtls_settings(address, port, controller_port, node, secrets)
    listeners = f"SASL_SSL://{address}:{port},CONTROLLER://127.0.0.1:{controller_port}"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{SUPER_USER}" password="{secrets.password(SUPER_USER)}";'
    )
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": CLIENT_LISTENER,
        "listener.security.protocol.map": "CONTROLLER:SSL,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
        **_node_tls(node, secrets),
        "super.users": ";".join(super_users(node.common_name)),
        "allow.everyone.if.no.acl.found": "false",
    }


def _node_tls(node: NodeIdentity, secrets: LocalSecrets) -> dict[str, Any]:
    """The node's key store and the CA it trusts; controllers require each other's certificate."""
    return {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": node.keystore,
        "ssl.keystore.password": node.key_password,
        "ssl.key.password": node.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": secrets.ca,
        "listener.name.controller.ssl.client.auth": "required",
    }


def _mtls_settings(
    address: str, port: int, controller_port: int, node: NodeIdentity, secrets: LocalSecrets
) -> dict[str, Any]:
    """An SSL client listener that requires a certificate (brokers use it among themselves
    too, as their node identity, mapped to ``User:<cluster>-node``)."""
    listeners = f"SSL://{address}:{port},CONTROLLER://127.0.0.1:{controller_port}"
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "SSL",
        "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SSL",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": _CN_TO_USER,
        **_node_tls(node, secrets),
        "super.users": ";".join(super_users(node.common_name, MTLS)),
        "allow.everyone.if.no.acl.found": "false",
    }


def oauthbearer_settings(validation: OidcValidation) -> dict[str, Any]:
    """server.properties entries that add OAUTHBEARER (Kafka's own JWT validator) beside
    SCRAM on the client listener; brokers still talk to each other with SCRAM."""
    prefix = "listener.name.sasl_ssl.oauthbearer."
    settings: dict[str, Any] = {
        "sasl.enabled.mechanisms": f"{SCRAM_MECHANISM},OAUTHBEARER",
        f"{prefix}sasl.jaas.config": f"{_OAUTH}.OAuthBearerLoginModule required ;",
        f"{prefix}sasl.server.callback.handler.class": (
            f"{_OAUTH}.OAuthBearerValidatorCallbackHandler"
        ),
        "sasl.oauthbearer.jwks.endpoint.url": validation.jwks_url,
    }
    if validation.audience:
        settings["sasl.oauthbearer.expected.audience"] = validation.audience
    if validation.issuer:
        settings["sasl.oauthbearer.expected.issuer"] = validation.issuer
    return settings


def scram_format_arguments(secrets: LocalSecrets) -> list[str]:
    """``kafka-storage format`` arguments that create every local SCRAM user.

    They hold passwords: pass them through :func:`argument_file`, never on a command line
    (any local user can read a process's arguments while it runs).
    """
    out: list[str] = []
    for user in USERS:
        out += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={secrets.password(user)}]"]
    return out


def redact_scram(text: str, secrets: LocalSecrets) -> str:
    """``text`` (a tool's output that may echo its SCRAM arguments) without any password: every
    ``password=...`` up to its ``]`` - across the line breaks a tool wraps long lines with - and
    every local password wherever else it appears."""
    text = re.sub(r"password=[^\]]*", "password=***", text)
    for user in USERS:
        text = text.replace(secrets.password(user), "***")
    return text


@contextmanager
def argument_file(path: Path, arguments: list[str]) -> Iterator[list[str]]:
    """A Java ``@argfile`` holding ``arguments`` (owner-only, removed on exit); yields the
    words to put on the command line instead of them: ``["@path"]``, or ``[]`` (and no file)
    when there are none.

    The java launcher expands it in-process, after the main class too, so the secrets never
    appear in ``/proc/<pid>/cmdline``.  After the main class it splits on whitespace and keeps
    quotes as they are, so an argument holding either is refused (drkit's own passwords are
    URL-safe tokens).
    """
    if not arguments:
        yield []
        return
    unsafe = [i for i, a in enumerate(arguments) if not a or re.search(r"[\s\"'\\]", a)]
    if unsafe:
        raise ValueError(f"arguments {unsafe} hold whitespace, a quote or a backslash")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write("".join(f"{a}\n" for a in arguments))
        yield [f"@{path}"]
    finally:
        path.unlink(missing_ok=True)


def client_security(secrets: LocalSecrets, user: str, client_auth: str = SCRAM) -> dict[str, Any]:
    """The ``security`` section of drkit's config for ``user``: password, or certificate and
    key, by file."""
    if client_auth == MTLS:
        made = secrets.client_certificate(user)
        return {
            "protocol": "SSL",
            "ssl_ca_location": str(secrets.ca),
            "ssl_certificate_location": str(made.certificate),
            "ssl_key_location": str(made.key),
        }
    return {
        "protocol": CLIENT_LISTENER,
        "sasl_mechanism": SCRAM_MECHANISM,
        "username": user,
        "password_file": str(secrets.password_file(user)),
        "ssl_ca_location": str(secrets.ca),
    }


def client_config(
    secrets: LocalSecrets, bootstrap: str, user: str, client_auth: str = SCRAM
) -> ClusterConfig:
    """A ClusterConfig that connects as ``user``."""
    security = dict(client_security(secrets, user, client_auth))
    if "password_file" in security:
        security["password"] = Path(security.pop("password_file")).read_text().strip()
    return ClusterConfig.model_validate({"bootstrap_servers": bootstrap, "security": security})


def super_users(node: str, client_auth: str = SCRAM) -> list[str]:
    """The ``super.users`` of a secured node whose certificate's common name is ``node``
    (drkit.local.tls.node_name): the operator's admin and the node's own identity - as the
    controller listener sees it, and with mTLS clients also as the client listener maps it."""
    users = [f"User:{SUPER_USER}", f"User:CN={node}"]
    return [*users, f"User:{node}"] if client_auth == MTLS else users


def role_principals() -> dict[str, str]:
    """The ``principals`` section of a secured local cluster: one SCRAM user per drkit role
    (drkit.local.tls.ROLE_USERS), ``app`` for applications."""
    out = {role.value: f"User:{role.value}" for role in Role if not role.value.startswith("app")}
    out.update({Role.APP_PRODUCER.value: "User:app", Role.APP_CONSUMER.value: "User:app"})
    return out
