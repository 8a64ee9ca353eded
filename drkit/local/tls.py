"""Credentials of secured local clusters (``drkit local up --secure``): a CA, certificates and
SCRAM users, made once per state directory and kept under ``local/secrets/`` (mode 0700).

* ``ca.pem`` - the CA every client trusts (``ssl.ca.location``); its key stays in
  ``ca-key.pem``.
* ``<cluster>-node.p12`` - a node's key and certificate (IP SANs: loopback and the cluster's
  address) with the CA, a PKCS#12 key store encrypted with ``key.password`` (Kafka's PEM key
  store cannot read modern encrypted PKCS#8 keys: "PBES2 SecretKeyFactory not available").
  The controller listener authenticates nodes by it (mTLS, principal
  ``User:CN=<cluster>-node``).
* ``<user>.password`` - one file per SCRAM user (``admin``: the super user, used only to
  bootstrap ACLs; ``drkit``: every drkit role in one principal; ``replicator``,
  ``checkpointer``, ``monitor``, ``engine``, ``verifier``: one least-privilege principal per
  role (drkit.access.roles); ``app``: an application principal), read by drkit through
  ``security.password_file``, never written into a config file.
* ``key.password`` - the password of every node key store.
* ``<user>.pem`` and ``<user>-key.pem`` - a client certificate (CN = the user) and its key, made
  for clusters whose clients authenticate with TLS certificates (``--mtls``); the key file is
  owner-only, referenced by the config (``ssl_key_location``), never copied into it.

Made with the ``cryptography`` library; nothing here is hand-rolled ASN.1.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from drkit.private_files import write_private

ROLE_USERS = ("replicator", "checkpointer", "monitor", "engine", "fencer", "verifier")
USERS = ("admin", "drkit", *ROLE_USERS, "app")
SUPER_USER = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"
_VALID_FOR = datetime.timedelta(days=825)
_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def node_name(cluster: str) -> str:
    """The common name of ``cluster``'s node certificate (its principal: ``User:CN=<name>``)."""
    return f"{cluster}-node"


@dataclass(frozen=True)
class NodeIdentity:
    """One node's TLS identity: a PKCS#12 key store (key + chain) and its password."""

    keystore: Path
    key_password: str
    principal: str  # as the controller listener sees it (mTLS)
    common_name: str


@dataclass(frozen=True)
class ClientCertificate:
    """A user's client certificate (PEM) and its private key (PEM, PKCS#8, owner-only)."""

    certificate: Path
    key: Path


class LocalSecrets:
    """The CA, node certificates and user passwords of the secured local clusters."""

    def __init__(self, local_root: Path) -> None:
        self.directory = local_root / "secrets"

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def password(self, user: str) -> str:
        with self._exclusive():
            return self._secret(self.password_file(user))

    def ensure(self) -> None:
        """Create the directory, the CA and every user's password if missing (idempotent)."""
        with self._exclusive():
            self._ensure()

    def node(self, cluster: str, addresses: list[str]) -> NodeIdentity:
        """The node certificate of ``cluster`` (one per cluster, valid for ``addresses``)."""
        with self._exclusive():
            self._ensure()
            name = node_name(cluster)
            keystore = self.directory / f"{name}.p12"
            key_password = self._secret(self.directory / "key.password")
            if not keystore.exists():
                self._issue(name, addresses, keystore, key_password)
            return NodeIdentity(keystore, key_password, f"User:CN={name}", name)

    def client_certificate(self, user: str) -> ClientCertificate:
        """``user``'s client certificate (CN = ``user``), made once."""
        with self._exclusive():
            return self._client_certificate(user)

    # -- making them ------------------------------------------------------------------------

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One process at a time looks for and makes secrets: two clusters started at once
        (two ``drkit local up --secure``, parallel test processes) would otherwise each make
        a CA or a password, and one cluster would hold what the other's files no longer say.
        Not reentrant: the public methods take it, the private ones assume it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        # owner-only like everything in the directory (an empty file, but the rule is simple)
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _ensure(self) -> None:
        if not self.ca.exists():
            self._make_ca()
        for user in USERS:
            self._secret(self.password_file(user))

    def _client_certificate(self, user: str) -> ClientCertificate:
        self._ensure()
        made = ClientCertificate(self.directory / f"{user}.pem", self.directory / f"{user}-key.pem")
        if not (made.certificate.exists() and made.key.exists()):
            key, cert = self._sign(user, [], [ExtendedKeyUsageOID.CLIENT_AUTH])
            write_private(
                made.key,
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
            made.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return made

    def _secret(self, path: Path) -> str:
        if not path.exists():
            write_private(path, secrets.token_urlsafe(24).encode())
        return path.read_text().strip()

    def _make_ca(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drkit local CA")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .sign(key, hashes.SHA256())
        )
        write_private(
            self.directory / "ca-key.pem",
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        self.ca.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def _issue(self, name: str, addresses: list[str], keystore: Path, password: str) -> None:
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        key, cert = self._sign(name, addresses, usages)
        store = pkcs12.serialize_key_and_certificates(
            name.encode(),
            key,
            cert,
            [self._ca_certificate()],
            serialization.BestAvailableEncryption(password.encode()),
        )
        write_private(keystore, store)

    def _ca_certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.ca.read_bytes())

    def _sign(
        self, name: str, addresses: list[str], usages: list[x509.ObjectIdentifier]
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A new key and its certificate (CN ``name``), signed by the CA; with IP SANs for
        ``addresses`` (nodes) or none (users)."""
        ca_key = serialization.load_pem_private_key(
            (self.directory / "ca-key.pem").read_bytes(), None
        )
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = self._ca_certificate()
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if addresses:
            sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
            sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(addresses)]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())
