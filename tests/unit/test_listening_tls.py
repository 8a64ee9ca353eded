"""The monitor's HTTP ports and the workers' metrics port over TLS (issue 46, item 5): with a
certificate and key the listener speaks HTTPS only; bad files are bad input before anything
listens."""

from __future__ import annotations

import datetime
import ssl
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from drkit.cli import cli
from drkit.errors import ConfigError
from drkit.listening import TlsFiles, serve_wsgi
from drkit.local.ports import free_port


def _self_signed(directory: Path, name: str = "cert") -> TlsFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return TlsFiles(str(cert_path), str(key_path))


def _hello(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello over " + environ["wsgi.url_scheme"].encode()]


def test_a_tls_listener_answers_https_and_refuses_plain_http(tmp_path: Path) -> None:
    files = _self_signed(tmp_path)
    listener = serve_wsgi(_hello, "127.0.0.1", 0, "--listen", files)
    try:
        trusted = ssl.create_default_context(cafile=files.certificate)
        url = f"https://localhost:{listener.server_port}/"
        with urllib.request.urlopen(url, context=trusted, timeout=10) as answer:
            assert answer.read() == b"hello over https"
        with pytest.raises(OSError):  # no clear-text answer on the same port
            urllib.request.urlopen(f"http://localhost:{listener.server_port}/", timeout=10).read()
        stranger = ssl.create_default_context()  # the system's CAs do not know this one
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(url, context=stranger, timeout=10)
    finally:
        listener.shutdown()


def test_a_key_that_is_not_the_certificates_is_bad_input_naming_both(tmp_path: Path) -> None:
    one, other = _self_signed(tmp_path, "one"), _self_signed(tmp_path, "other")
    with pytest.raises(ConfigError, match=r"--tls-cert/--tls-key.*cannot serve TLS"):
        serve_wsgi(_hello, "127.0.0.1", 0, "--listen", TlsFiles(one.certificate, other.key))
    with pytest.raises(ConfigError, match="No such file"):
        serve_wsgi(_hello, "127.0.0.1", 0, "--listen", TlsFiles(str(tmp_path / "none"), one.key))


def test_the_monitor_refuses_a_certificate_without_its_key(tmp_path: Path) -> None:
    files = _self_signed(tmp_path)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "s"), "monitor",
                                    "--tls-cert", files.certificate])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "--tls-key: --tls-cert needs --tls-key" in done.output
    assert not (tmp_path / "s" / "drkit.db").exists()


def test_replicate_refuses_a_certificate_without_its_key(tmp_path: Path) -> None:
    files = _self_signed(tmp_path)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "s"), "replicate",
                                    "--metrics-port", "9", "--tls-key", files.key])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "--tls-cert: --tls-key needs --tls-cert" in done.output


def test_replicate_refuses_a_key_that_is_not_the_certificates_before_anything_starts(
    tmp_path: Path,
) -> None:
    one, other = _self_signed(tmp_path, "one"), _self_signed(tmp_path, "other")
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "s"), "replicate", "--config",
                                    str(config), "--metrics-port", "9", "--tls-cert",
                                    one.certificate, "--tls-key", other.key])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "cannot serve TLS with" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "s" / "drkit.db").exists()


def test_replicate_tls_without_a_metrics_port_is_refused(tmp_path: Path) -> None:
    files = _self_signed(tmp_path)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "s"), "replicate", "--tls-cert",
                                    files.certificate, "--tls-key", files.key])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "--tls-cert: serves --metrics-port over HTTPS; without --metrics-port" in done.output


def test_the_workers_metrics_endpoint_speaks_https_only_with_tls(tmp_path: Path) -> None:
    """``drkit replicate --metrics-port P --tls-cert C --tls-key K``: /metrics over HTTPS."""
    from drkit.replication.metrics import default_metrics
    from drkit.replication_service import ServiceOptions, metrics_listener

    default_metrics()  # a worker's metrics, registered as replicate's start registers them
    files = _self_signed(tmp_path)
    options = ServiceOptions(metrics_port=free_port(), tls=files)
    listener = metrics_listener(options)
    assert listener is not None
    try:
        trusted = ssl.create_default_context(cafile=files.certificate)
        url = f"https://localhost:{listener.server_port}/metrics"
        with urllib.request.urlopen(url, context=trusted, timeout=10) as answer:
            assert b"drkit_" in answer.read()
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://localhost:{listener.server_port}/metrics", timeout=10)
    finally:
        listener.shutdown()
