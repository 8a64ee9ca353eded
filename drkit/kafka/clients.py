"""Build confluent-kafka clients from drkit's typed cluster config.

Settings are layered: drkit's connection defaults, then drkit's *tuning* for the client's role
(batching, compression, fetch sizes: what an operator may want otherwise), then the cluster's
security, then the cluster's ``client_overrides``, then the caller's *required* settings (what
drkit's correctness rests on - ``acks``, idempotence, no auto-commit, the group - which
therefore win over any override).
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from drkit.config.model import (
    ClusterConfig,
    OAuthConfig,
    SaslMechanism,
    SecurityConfig,
    SecurityProtocol,
)
from drkit.errors import ClientSettingsRefused, UnreachableClusterError

# librdkafka's syslog-style level for its own log lines (it writes them to stderr).  Every
# failure drkit acts on reaches it as an error value or exception, so the default keeps the
# connection-refused chatter of a down cluster off the operator's terminal; ``-v`` raises it.
_CLIENT_LOG_LEVEL = 2

# How long a consumer's fetcher waits before fetching again once its prefetch queue is over
# ``queued.min.messages`` (100,000) or its byte bound.  librdkafka's default is a second: a
# reader of one of drkit's own topics (500,000 checkpoints at 10,000 groups) then stops for a
# second per 100,000 records - 3.2 s to read them, against 0.4 s at 10 ms.  Not 0: librdkafka
# 2.16 retries a full queue in a busy loop then (0.74 of a core in a replication worker).
FETCH_QUEUE_BACKOFF_MS = 10


def set_client_log_level(level: int) -> None:
    """Set librdkafka's log level (0-7) for clients created from now on."""
    global _CLIENT_LOG_LEVEL
    _CLIENT_LOG_LEVEL = level


@dataclass(frozen=True)
class ClusterEndpoint:
    """A cluster alias together with its connection settings."""

    alias: str
    config: ClusterConfig

    @classmethod
    def plain(cls, alias: str, bootstrap_servers: str) -> ClusterEndpoint:
        """A PLAINTEXT endpoint (local clusters, tests)."""
        return cls(alias, ClusterConfig(bootstrap_servers=bootstrap_servers))

    @property
    def bootstrap_servers(self) -> str:
        return self.config.bootstrap_servers


def _security_settings(security: SecurityConfig) -> dict[str, Any]:
    settings: dict[str, Any] = {"security.protocol": security.protocol.value}
    if security.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        assert security.sasl_mechanism is not None
        settings["sasl.mechanism"] = security.sasl_mechanism.value
        if security.oauth is not None and security.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            settings.update(_oidc_settings(security.oauth))
        else:
            assert security.password is not None
            settings["sasl.username"] = security.username
            settings["sasl.password"] = security.password.get_secret_value()
    if security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        optional = {
            "ssl.ca.location": security.ssl_ca_location,
            "ssl.certificate.location": security.ssl_certificate_location,
            "ssl.key.location": security.ssl_key_location,
            "ssl.key.password": (
                security.ssl_key_password.get_secret_value() if security.ssl_key_password else None
            ),
        }
        settings.update({k: v for k, v in optional.items() if v is not None})
        settings["ssl.endpoint.identification.algorithm"] = (
            "https" if security.ssl_endpoint_identification else "none"
        )
    return settings


def _oidc_settings(oauth: OAuthConfig) -> dict[str, Any]:
    """librdkafka's built-in OIDC client (client-credentials grant, renewed before expiry)."""
    assert oauth.client_secret is not None
    settings: dict[str, Any] = {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": oauth.token_endpoint_url,
        "sasl.oauthbearer.client.id": oauth.client_id,
        "sasl.oauthbearer.client.secret": oauth.client_secret.get_secret_value(),
    }
    if oauth.scope:
        settings["sasl.oauthbearer.scope"] = oauth.scope
    if oauth.extensions:
        settings["sasl.oauthbearer.extensions"] = ",".join(
            f"{key}={value}" for key, value in sorted(oauth.extensions.items())
        )
    return settings


@dataclass(frozen=True)
class ClientSettings:
    """What a caller asks of one client, in the two layers around a cluster's
    ``client_overrides`` (see the module docstring): ``tuning`` gives way to them, ``required``
    wins over them."""

    required: Mapping[str, Any] = field(default_factory=dict)
    tuning: Mapping[str, Any] = field(default_factory=dict)


def client_settings(
    endpoint: ClusterEndpoint,
    extra: Mapping[str, Any] | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """librdkafka settings for a client of ``endpoint``: ``tuning`` below the cluster's
    security and ``client_overrides``, ``extra`` (required settings) above them."""
    settings: dict[str, Any] = {
        "bootstrap.servers": endpoint.bootstrap_servers,
        "client.id": f"drkit-{endpoint.alias}",
        # Fail fast on dead clusters instead of librdkafka's default of retrying forever quietly.
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 2000,
        "log_level": _CLIENT_LOG_LEVEL,
        "log.connection.close": False,
    }
    settings.update(tuning or {})
    settings.update(_security_settings(endpoint.config.security))
    settings.update(endpoint.config.client_overrides)
    settings.update(extra or {})
    return settings


def tcp_unreachable(endpoint: ClusterEndpoint, timeout_s: float) -> str | None:
    """Why no bootstrap server of ``endpoint`` accepts a TCP connection, or None if one does.

    A cheap first step: a stopped broker refuses at once, where the Kafka client would keep
    retrying until its timeout.
    """
    errors = []
    for address in endpoint.config.bootstrap_addresses:  # bare hosts: "::1", not "[::1]"
        try:
            with socket.create_connection((address.host, address.port), timeout=timeout_s):
                return None
        except OSError as err:
            errors.append(f"{address}: {err.strerror or err}")
    return "no bootstrap server accepts connections (" + "; ".join(errors) + ")"


# Kafka's first request, ApiVersions v0: size, api key 18, version 0, correlation id, client id.
_CORRELATION = 0x6472_6B74  # "drkt"
_CLIENT_ID = b"drkit-probe"
_API_VERSIONS = (
    (2 + 2 + 4 + 2 + len(_CLIENT_ID)).to_bytes(4, "big") + (18).to_bytes(2, "big")
    + (0).to_bytes(2, "big") + _CORRELATION.to_bytes(4, "big")
    + len(_CLIENT_ID).to_bytes(2, "big") + _CLIENT_ID
)  # fmt: skip


def not_kafka(endpoint: ClusterEndpoint, timeout_s: float) -> str | None:
    """Why the first bootstrap server that accepts a TCP connection is not answering as a
    Kafka broker - it sends nothing back, speaks HTTP or TLS, closes the connection - or None
    when it answers Kafka's first request (or none accepts).  An endpoint set up for TLS is
    named only when a plain broker answers there (TLS asked of a PLAINTEXT listener); anything
    else a plain probe cannot judge there.  For the failure path only: it tells a hung or wrong
    listener from a slow broker after librdkafka said "Broker transport failure"."""
    tls = endpoint.config.security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
    for address in endpoint.config.bootstrap_addresses:
        if tls:
            # Plain bytes only where a TLS handshake found no TLS: a TLS listener would count
            # them as a failed authentication (and log it) on every drkit command.
            speaks = _speaks_tls(endpoint.config.security, address.host, address.port, timeout_s)
            if speaks is None:
                continue
            if speaks:
                return None
        try:
            connection = socket.create_connection((address.host, address.port), timeout_s)
        except OSError:
            continue
        with connection:
            try:
                connection.sendall(_API_VERSIONS)
                head = connection.recv(8)
            except TimeoutError:
                if tls:
                    return None
                return (f"{address} accepts connections but does not answer Kafka's first "
                        f"request within {timeout_s:g}s (a hung broker, or a proxy or firewall "
                        "holding the connection)")  # fmt: skip
            except OSError as err:
                if tls:
                    return None
                return f"{address} dropped the connection ({err.strerror or err})"
        if tls:
            return _plain_broker_for_tls(str(address), endpoint.config.security.protocol, head)
        return _what_answered(str(address), head)
    return None


FIRST_ANSWER_S = 1.5  # refused, unresolvable or not Kafka: told within this, the command - its
# own ~1 s start on a loaded machine included - within 3 s (issue 45); a healthy broker answers
# ApiVersions in milliseconds, even on a loaded machine


def not_answering(endpoint: ClusterEndpoint, timeout_s: float = FIRST_ANSWER_S) -> str | None:
    """Why ``endpoint`` is not a Kafka cluster answering now, told within ``timeout_s``: no
    bootstrap server takes a TCP connection (:func:`tcp_unreachable`: refused, unresolvable), or
    the one that does is not a broker answering Kafka's first request (:func:`not_kafka`: hung,
    HTTP, TLS expected).  None: worth asking with a Kafka client (it may still be slow)."""
    deadline = time.monotonic() + timeout_s
    refused = tcp_unreachable(endpoint, timeout_s)
    if refused is not None:
        return refused
    return not_kafka(endpoint, max(0.1, round(deadline - time.monotonic(), 1)))  # "within 1.5s"


def require_answering(endpoint: ClusterEndpoint, timeout_s: float = FIRST_ANSWER_S) -> None:
    """Raise :class:`UnreachableClusterError` (exit 3) when :func:`not_answering` says why: the
    pre-probe a command runs before a Kafka call that would wait out its whole timeout."""
    why = not_answering(endpoint, timeout_s)
    if why is not None:
        raise UnreachableClusterError(endpoint.alias, endpoint.bootstrap_servers, why)


def all_not_answering(
    endpoints: Sequence[ClusterEndpoint], timeout_s: float = FIRST_ANSWER_S
) -> dict[str, str]:
    """:func:`not_answering` for several clusters at once (each on a daemon thread of its own,
    so Ctrl-C acts at once): two hung clusters cost one ``timeout_s``, not two.  Each alias
    that does not answer, with why, in the order of ``endpoints``."""
    from drkit.kafka.interruptible import InFlight

    asked = [(e.alias, InFlight(partial(not_answering, e, timeout_s))) for e in endpoints]
    return {alias: why for alias, call in asked if (why := call.wait()) is not None}


def require_all_answering(
    endpoints: Sequence[ClusterEndpoint], needed_for: str = "", timeout_s: float = FIRST_ANSWER_S
) -> None:
    """:func:`require_answering` for several clusters at once (:func:`all_not_answering`): the
    first of ``endpoints`` that does not answer is raised, ``needed_for`` added to why."""
    down = all_not_answering(endpoints, timeout_s)
    for endpoint in endpoints:
        why = down.get(endpoint.alias)
        if why is not None:
            detail = f"{why}; {needed_for}" if needed_for else why
            raise UnreachableClusterError(endpoint.alias, endpoint.bootstrap_servers, detail)


# What a TLS client reads from a peer that answers its ClientHello with no TLS: closed, reset,
# or bytes that are no TLS record.  Any other TLS error (an alert, a certificate) is TLS.
_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
            "UNEXPECTED_EOF_WHILE_READING", "UNKNOWN_PROTOCOL", "HTTP_REQUEST")  # fmt: skip


def _speaks_tls(security: SecurityConfig, host: str, port: int, timeout_s: float) -> bool | None:
    """Whether ``host:port`` answers a TLS handshake (certificates not checked: only whether
    TLS is spoken); None: no connection, or no answer within ``timeout_s``."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if security.ssl_certificate_location and security.ssl_key_location:
        password = security.ssl_key_password
        with contextlib.suppress(OSError, ssl.SSLError, ValueError):  # mTLS: shown if it loads
            context.load_cert_chain(
                security.ssl_certificate_location,
                security.ssl_key_location,
                password.get_secret_value() if password is not None else None,
            )
    try:
        with (
            socket.create_connection((host, port), timeout_s) as raw,
            context.wrap_socket(raw, do_handshake_on_connect=False) as wrapped,
        ):
            wrapped.do_handshake()
        return True
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError):
        return False
    except ssl.SSLError as err:
        return (err.reason or "") not in _NOT_TLS
    except OSError:
        return None


def _plain_broker_for_tls(address: str, protocol: SecurityProtocol, head: bytes) -> str | None:
    if len(head) >= 8 and int.from_bytes(head[4:8], "big") == _CORRELATION:
        plain = "PLAINTEXT" if protocol == SecurityProtocol.SSL else "SASL_PLAINTEXT"
        return (f"{address} answers Kafka without TLS, but security.protocol is "
                f"{protocol.value}: the listener is {plain} (set security.protocol {plain}, "
                "or give the brokers' TLS listener)")  # fmt: skip
    return None


def _what_answered(address: str, head: bytes) -> str | None:
    if len(head) >= 8 and int.from_bytes(head[4:8], "big") == _CORRELATION:
        return None  # a Kafka broker
    if not head:
        return (f"{address} closed the connection on Kafka's first request (not Kafka, or a "
                "listener that expects TLS)")  # fmt: skip
    if head.startswith(b"HTTP/"):
        return f"{address} answers HTTP, not Kafka"
    if head[:2] in (b"\x15\x03", b"\x16\x03"):
        return f"{address} speaks TLS: set security.protocol to SSL or SASL_SSL"
    return f"{address} answers, but not as Kafka (first bytes {head!r})"


def redacted(settings: dict[str, Any]) -> dict[str, Any]:
    """A copy of client settings safe to log: every password-like value masked."""
    return {
        key: ("***" if "password" in key or "secret" in key else value)
        for key, value in settings.items()
    }


def producer_config(
    endpoint: ClusterEndpoint,
    extra: Mapping[str, Any] | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`make_producer`'s settings (pure)."""
    tuned: dict[str, Any] = {"linger.ms": 5, "compression.type": "lz4", **(tuning or {})}
    required: dict[str, Any] = {"acks": "all", "enable.idempotence": True, **(extra or {})}
    return client_settings(endpoint, required, tuned)


def make_producer(
    endpoint: ClusterEndpoint,
    extra: Mapping[str, Any] | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> Producer:
    """A producer with acks=all and idempotence on unless ``extra`` says otherwise; batching
    and compression are tuning (a cluster's ``client_overrides`` change them)."""
    try:
        return Producer(producer_config(endpoint, extra, tuning))
    except KafkaException as err:
        raise _client_error(err, endpoint, "producer") from None


def consumer_config(
    endpoint: ClusterEndpoint,
    group_id: str,
    extra: Mapping[str, Any] | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`make_consumer`'s settings (pure)."""
    tuned: dict[str, Any] = {"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, **(tuning or {})}
    required: dict[str, Any] = {
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **(extra or {}),
    }
    return client_settings(endpoint, required, tuned)


def make_consumer(
    endpoint: ClusterEndpoint,
    group_id: str,
    extra: Mapping[str, Any] | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> Consumer:
    """A consumer that never auto-commits (drkit stores progress itself) and reads from the
    earliest offset where it has none; how it fetches is tuning."""
    try:
        return Consumer(consumer_config(endpoint, group_id, extra, tuning))
    except KafkaException as err:
        raise _client_error(err, endpoint, "consumer") from None


# librdkafka property -> where a drkit config sets it (under ``clusters.<alias>``).
_CONFIG_KEYS = {
    "ssl.ca.location": "security.ssl_ca_location",
    "ssl.certificate.location": "security.ssl_certificate_location",
    "ssl.key.location": "security.ssl_key_location",
    "ssl.key.password": "security.ssl_key_password",
    "sasl.username": "security.username",
    "sasl.password": "security.password",
    "sasl.mechanisms": "security.sasl_mechanism",
    "security.protocol": "security.protocol",
    "bootstrap.servers": "bootstrap_servers",
}
_PROPERTY = re.compile(r'"([A-Za-z0-9._-]+)"|^(?:Failed to create [\w ]+: )?([a-z0-9._]+) ')


# librdkafka names a property by its own alias in its errors: the name an operator wrote
# (Java client style) -> librdkafka's.
_ALIASES = {
    "linger.ms": "queue.buffering.max.ms",
    "retries": "message.send.max.retries",
    "acks": "request.required.acks",
    "compression.type": "compression.codec",
    "delivery.timeout.ms": "message.timeout.ms",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "metadata.broker.list": "bootstrap.servers",
    "batch.num.messages": "batch.num.messages",
}
_ALIASED = {
    librdkafka: written for written, librdkafka in _ALIASES.items() if written != librdkafka
}


def settings_key(endpoint: ClusterEndpoint, detail: str) -> str:
    """The config key behind librdkafka's complaint ``detail`` - the client_overrides entry
    or security setting it names - or just the cluster's section when it names none."""
    base = f"clusters.{endpoint.alias}"
    overrides = endpoint.config.client_overrides
    for quoted, leading in _PROPERTY.findall(detail):
        prop = quoted or leading
        if prop in overrides:
            return f"{base}.client_overrides.{prop}"
        if _ALIASED.get(prop) in overrides:  # written as linger.ms, refused as its alias
            return f"{base}.client_overrides.{_ALIASED[prop]}"
        # 'Invalid value "x" for configuration property "<librdkafka's own alias>"'
        valued = [key for key, value in overrides.items() if str(value) == prop]
        if valued:
            return f"{base}.client_overrides.{valued[0]}"
        if prop in _CONFIG_KEYS:
            return f"{base}.{_CONFIG_KEYS[prop]}"
    return base


def _client_error(
    err: KafkaException, endpoint: ClusterEndpoint, kind: str
) -> ClientSettingsRefused:
    """Client construction fails only on invalid settings: say which key, never retry."""
    detail = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
    detail = detail.strip()
    key = settings_key(endpoint, detail)
    written = key.rsplit("client_overrides.", 1)[-1] if "client_overrides." in key else None
    if written in _ALIASES:
        detail += f" ({_ALIASES[written]} is librdkafka's name for {written})"
    reason = f"librdkafka refuses the {kind} settings for cluster {endpoint.alias!r}: {detail}"
    return ClientSettingsRefused(f"{key}: {reason}", key=key, reason=reason)


def make_admin_client(endpoint: ClusterEndpoint, settings: Mapping[str, Any]) -> AdminClient:
    """An AdminClient from ``settings`` built for ``endpoint`` (ClientSettingsRefused names
    the key librdkafka refuses)."""
    try:
        return AdminClient(dict(settings))
    except KafkaException as err:
        raise _client_error(err, endpoint, "admin client") from None
