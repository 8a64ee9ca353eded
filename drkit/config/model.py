"""The typed configuration model: clusters, flows, health and failover policy, state store.

All classes are frozen and reject unknown keys, so a typo in the YAML is a reported problem rather
than a silently ignored setting.  Secrets are :class:`pydantic.SecretStr`: their ``repr`` and
``str`` never show the value.  Cross-field rules (a flow names known clusters, regexes compile, the
state-store URL parses) are checked here so that every consumer of a :class:`DrkitConfig` can rely
on them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from drkit.config.secrets import mask_user_info


class FrozenModel(BaseModel):
    """Every typed document drkit reads (config, runbooks, drill scenarios): immutable, and a
    key the model does not know is an error, never ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


def _read_secret_file(path: Path, what: str) -> SecretStr:
    """The first line of ``path``, as a secret; ValueError naming the file (never its text)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ValueError(f"{what} {path}: {err.strerror}") from None
    if not lines or not lines[0]:
        raise ValueError(f"{what} {path} is empty")
    return SecretStr(lines[0])


class OAuthConfig(FrozenModel):
    """OIDC client credentials for SASL/OAUTHBEARER: drkit's clients fetch a token from
    ``token_endpoint_url`` (the client-credentials grant) and renew it before it expires -
    librdkafka's ``oidc`` method, and the Java client's login callback in the Spark job."""

    token_endpoint_url: str = Field(pattern=r"^https?://\S+$")
    client_id: str = Field(min_length=1)
    client_secret: SecretStr | None = None
    # A file holding the secret (its first line): keeps it out of the config file.
    client_secret_file: Path | None = None
    scope: str | None = None
    # SASL extensions sent with the token (some providers need e.g. logicalCluster).
    extensions: dict[str, str] = Field(default_factory=dict)

    @field_validator("token_endpoint_url")
    @classmethod
    def _splits(cls, value: str) -> str:
        try:
            urlsplit(value)
        except ValueError as err:  # an unclosed '[': every later reader of the URL would fail
            raise ValueError(f"not a valid URL ({err})") from None
        return value

    @model_validator(mode="after")
    def _secret(self) -> OAuthConfig:
        if self.client_secret_file is not None:
            if self.client_secret is not None:
                raise ValueError("give client_secret or client_secret_file, not both")
            secret = _read_secret_file(self.client_secret_file, "client_secret_file")
            object.__setattr__(self, "client_secret", secret)
        if self.client_secret is None:
            raise ValueError("OAUTHBEARER needs client_secret (or client_secret_file)")
        return self


class SecurityConfig(FrozenModel):
    """How drkit authenticates to one cluster.  SASL settings are required for SASL_*."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    username: str | None = None
    password: SecretStr | None = None
    # A file holding the password (its first line): keeps the secret out of the config file.
    password_file: Path | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification: bool = True
    # sasl_mechanism OAUTHBEARER: the OIDC client instead of username/password.
    oauth: OAuthConfig | None = None

    @model_validator(mode="after")
    def _sasl_complete(self) -> SecurityConfig:
        if self.password_file is not None:
            if self.password is not None:
                raise ValueError("give password or password_file, not both")
            object.__setattr__(
                self, "password", _read_secret_file(self.password_file, "password_file")
            )
        if self.protocol not in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            return self
        if self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            if self.oauth is None:
                raise ValueError("sasl_mechanism OAUTHBEARER needs an oauth section")
            return self
        needed = ("sasl_mechanism", "username", "password")
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{self.protocol} needs {', '.join(missing)}")
        password = self.password.get_secret_value() if self.password is not None else ""
        empty = [name for name, value in (("username", self.username), ("password", password))
                 if not value]  # fmt: skip
        if empty:
            raise ValueError(f"{' and '.join(empty)} empty (an unset or empty ${{VAR}}, or an "
                             "empty password_file?): librdkafka would refuse it")  # fmt: skip
        return self

    @property
    def login(self) -> str | None:
        """Who drkit logs in as: the SASL user, or the OIDC client id (brokers map a token's
        ``sub`` claim to the principal; for the client-credentials grant that is usually the
        client id)."""
        if self.sasl_mechanism is SaslMechanism.OAUTHBEARER and self.oauth is not None:
            return self.oauth.client_id
        return self.username


_HOSTNAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class HostPort:
    """One bootstrap server.  ``host`` is bare (no brackets), ready for a socket call;
    ``str()`` is the form librdkafka parses: ``host:port`` or ``[ipv6]:port``."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, port_zero: bool = False) -> HostPort:
        """``host:port`` or ``[ipv6]:port``; raises ValueError saying what is wrong.

        ``port_zero`` admits port 0 (a listening socket's "any free port").  User info
        (``user:password@``) and a query (``?password=``) are refused, masked: the error would
        echo a password (security review 12, N3); Kafka takes credentials from the security
        settings, not the address."""
        text = text.strip()
        if "@" in text or "?" in text:
            raise ValueError(
                f"{mask_user_info(text)!r}: give host:port, without user info (user:password@)"
                " or a query (?...) - credentials go in the cluster's security settings"
            )
        if ";" in text:
            raise ValueError(f"{text!r}: separate bootstrap servers with ',', not ';'")
        if len(text.split()) > 1:  # not an IPv6 address without brackets
            raise ValueError(f"{text!r}: separate bootstrap servers with ',', not spaces")
        if "://" in text:
            raise ValueError(f"{text!r}: give host:port, without a scheme")
        if text.startswith("["):
            host, closed, rest = text[1:].partition("]")
            sep, port = rest[:1], rest[1:]
            if not closed or sep != ":":
                raise ValueError(f"{text!r} is not [IPv6 address]:port")
            try:
                ipaddress.IPv6Address(host.split("%", 1)[0])
            except ValueError:
                raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
        else:
            host, sep, port = text.rpartition(":")
            if ":" in host:
                raise ValueError(f"{text!r}: write an IPv6 address in brackets, [{host}]:{port}")
            if host and not _HOSTNAME.fullmatch(host):
                raise ValueError(f"{text!r}: {host!r} is not a host name or address")
        lowest = 0 if port_zero else 1
        if sep and host and port.isdigit() and not lowest <= int(port) < 65536:
            raise ValueError(f"{text!r}: port {int(port)} is outside {lowest}..65535")
        if not sep or not host or not port.isdigit() or not lowest <= int(port) < 65536:
            raise ValueError(f"{text!r} is not host:port")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class Role(StrEnum):
    """The jobs a principal does on a cluster (drkit.access.roles says what each needs);
    ``app-*`` are applications (tests, drills)."""

    REPLICATOR = "replicator"
    CHECKPOINTER = "checkpointer"
    MONITOR = "monitor"
    ENGINE = "engine"
    # Changes ACLs - fences, standby guards, replicator fences - and nothing else: Kafka lets
    # only ALTER on the cluster create or delete ACLs, which also allows rewriting every ACL
    # and SCRAM credential, so no other role holds it.
    FENCER = "fencer"
    VERIFIER = "verifier"
    APP_PRODUCER = "app-producer"
    APP_CONSUMER = "app-consumer"


_PRINCIPAL = re.compile(r"[A-Za-z]+:.+")

# The longest duration a librdkafka ``*.ms`` setting holds (a signed 32-bit count of
# milliseconds): a seconds setting drkit turns into one is bounded by it at load, or librdkafka
# refuses the overflowed (negative) value only when a client is built.
MAX_MS_SETTING_S = 2_147_483.647


_APICURIO_CCOMPAT = re.compile(r"/apis/ccompat/v[67]$")


class SchemaRegistryConfig(FrozenModel):
    """A cluster's schema registry (drkit.schemas): read through its Confluent-compatible API
    (``url`` is that API's root, e.g. ``http://host:8080/apis/ccompat/v7`` for Apicurio).

    ``kind`` says how schemas are written with their ids kept: ``apicurio`` (Apicurio Registry
    2.x: its export/import API beside the Confluent one) is the only kind drkit writes today."""

    url: str = Field(pattern=r"^https?://\S+$")
    kind: Literal["apicurio"] = "apicurio"
    # HTTP basic authentication, when the registry asks for it.
    username: str | None = None
    password: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        # Credentials in the URL would be shown wherever the URL is (config show, errors, the
        # status page): refused, without echoing them.
        if "@" in urlsplit(value).netloc:
            raise ValueError(
                "holds credentials (user:password@): give them as username and password, "
                "which drkit masks"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _api_root(self) -> SchemaRegistryConfig:
        if self.kind == "apicurio" and not _APICURIO_CCOMPAT.search(self.url):
            raise ValueError(
                f"{self.url} is not Apicurio's Confluent-compatible API: give its root, "
                "ending in /apis/ccompat/v7 (or v6)"
            )
        return self

    @property
    def registry_api(self) -> str:
        """Apicurio's own API root beside the Confluent-compatible one (export, import)."""
        return _APICURIO_CCOMPAT.sub("/apis/registry/v2", self.url)


# librdkafka settings drkit sets itself on the clients that need them, because its guarantees
# rest on them; a cluster's ``client_overrides`` naming one is refused at load (it would be
# silently outvoted: drkit.kafka.clients layers overrides below what a client requires).
RESERVED_CLIENT_SETTINGS = {
    "bootstrap.servers": "set bootstrap_servers",
    "acks": "every write waits for all in-sync replicas",
    "enable.idempotence": "replication and drkit's own topics write without duplicates",
    "transactional.id": "exactly_once flows name their transactions per worker",
    "enable.auto.commit": "drkit stores its progress itself",
    "group.id": "each reader has its own group",
    "group.instance.id": "replication workers choose static membership themselves",
    "isolation.level": "replication reads committed records only",
    "auto.offset.reset": "a missing position is a loss to record, never a silent jump",
    "partition.assignment.strategy": "replication workers rebalance cooperatively",
    "enable.partition.eof": "drkit's readers find a partition's end themselves",
}


# client_overrides keys that change how a connection is secured - its protocol, its identity,
# its certificate and hostname checks: refused unless the cluster sets allow_insecure_overrides
# (security belongs in ``security``, where drkit validates it and masks its secrets).
# (``enable.sasl.oauthbearer.unsecure.jwt``: a token librdkafka signs itself, for any principal.)
_SECURITY_OVERRIDE_PREFIXES = (
    "security.", "sasl.", "ssl.", "enable.ssl.", "enable.sasl.", "https.",
)  # fmt: skip


def security_override(key: str) -> bool:
    """Whether librdkafka setting ``key`` changes a connection's security."""
    return key.startswith(_SECURITY_OVERRIDE_PREFIXES)


class ClusterConfig(FrozenModel):
    """One Kafka cluster (a data center) drkit talks to."""

    # Comma-separated host:port / [ipv6]:port list, normalised (no blanks) at load.
    bootstrap_servers: str = Field(min_length=1)
    security: SecurityConfig = SecurityConfig()
    # librdkafka properties applied to every client of this cluster, after drkit's tuning
    # (batching, compression, fetch sizes, client ids); never the settings drkit's correctness
    # rests on (RESERVED_CLIENT_SETTINGS: refused at load).
    client_overrides: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Lets client_overrides change security settings (protocol, SASL identity, certificate and
    # hostname checks) - knowingly: each such key is a warning in config validate.
    allow_insecure_overrides: bool = False
    # What the brokers' allow.everyone.if.no.acl.found says (drkit cannot read it: brokers
    # report it as sensitive).  true: a topic without ACLs is open to everyone, so a fence adds
    # companion ALLOW READ/DESCRIBE ACLs to keep it readable; false (deny by default): the
    # DENY WRITE alone, widening nobody's reads.
    allow_everyone_if_no_acl: bool = True
    # The principal (``User:name``) doing each role on this cluster, for ``drkit doctor`` and
    # ``drkit acls``; a role not named here is drkit's own SASL user (:meth:`principal`).
    principals: dict[Role, str] = Field(default_factory=dict)
    # Credentials per role, for processes of different roles that share this config file (one
    # host, a drill): each connects with its role's (``drkit replicate`` as the replicator, its
    # checkpoint worker as the checkpointer, ``drkit monitor`` as the monitor, the failover
    # commands as the engine, ``drkit verify`` as the verifier; see DrkitConfig.as_role).
    # A role not listed connects with ``security``.
    role_security: dict[Role, SecurityConfig] = Field(default_factory=dict)
    # The schema registry the cluster's applications use (flows' ``schema_sync`` copies it).
    schema_registry: SchemaRegistryConfig | None = None
    # The brokers' ``super.users``, for ``drkit doctor`` (Kafka checks no ACL for them, so no
    # fence or standby guard stops them). Kafka 4 does not return it over DescribeConfigs; None:
    # not known here.
    super_users: tuple[str, ...] | None = None

    @field_validator("client_overrides", mode="before")
    @classmethod
    def _scalar_values(cls, value: object) -> object:
        # One line per key (pydantic says it once per type the value may have: four lines).
        if isinstance(value, dict):
            for key, item in value.items():
                if item is None or not isinstance(item, str | int | float | bool):
                    got = "no value" if item is None else f"a {type(item).__name__}"
                    raise ValueError(f"{key}: {got}: give a string, a number or true/false")
        return value

    @field_validator("client_overrides")
    @classmethod
    def _not_reserved(
        cls, value: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        for key in value:
            if key in RESERVED_CLIENT_SETTINGS:
                raise ValueError(
                    f"{key} cannot be overridden: drkit sets it per client "
                    f"({RESERVED_CLIENT_SETTINGS[key]})"
                )
        return value

    @model_validator(mode="after")
    def _security_overrides(self) -> ClusterConfig:
        touching = sorted(k for k in self.client_overrides if security_override(k))
        if touching and not self.allow_insecure_overrides:
            raise ValueError(
                f"client_overrides {', '.join(touching)} change the connection's security "
                "(protocol, identity or certificate checks): set it under security - or, "
                "knowingly, allow_insecure_overrides: true"
            )
        return self

    @field_validator("principals")
    @classmethod
    def _principal_names(cls, value: dict[Role, str]) -> dict[Role, str]:
        for role, principal in value.items():
            if not _PRINCIPAL.fullmatch(principal):
                raise ValueError(f"{role}: {principal!r} is not a principal (User:name)")
        return value

    @field_validator("super_users")
    @classmethod
    def _super_user_names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for principal in value or ():
            if not _PRINCIPAL.fullmatch(principal):
                raise ValueError(f"{principal!r} is not a principal (User:name)")
        return value

    def principal(self, role: Role) -> str | None:
        """Who does ``role`` here: the configured principal, else ``User:<login>`` of the
        role's credentials (``role_security``, else drkit's own); None when unknown
        (PLAINTEXT or TLS-certificate identities)."""
        if role in self.principals:
            return self.principals[role]
        login = self.for_role(role).security.login
        return f"User:{login}" if login is not None else None

    def for_role(self, role: Role) -> ClusterConfig:
        """This cluster as a process doing ``role`` connects to it (its ``role_security``)."""
        chosen = self.role_security.get(role)
        return self if chosen is None else self.model_copy(update={"security": chosen})

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        if len(value.split(",")) > 1 and any(not s.strip() for s in value.split(",")):
            raise ValueError(f"{mask_user_info(value)!r}: an empty entry (a ',' too many?)")
        return ",".join(str(HostPort.parse(server)) for server in value.split(","))

    @property
    def bootstrap_addresses(self) -> tuple[HostPort, ...]:
        """The bootstrap servers, parsed (hosts without brackets, for sockets)."""
        return tuple(HostPort.parse(server) for server in self.bootstrap_servers.split(","))


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"invalid regex {pattern!r}: {err}") from None
    return pattern


Regex = Annotated[str, Field(min_length=1)]


class NameFilter(FrozenModel):
    """Include/exclude lists of regexes matched against whole names.

    A list item may also be MirrorMaker 1's comma form (``"orders,payments.*"``); it is split.
    A name is selected when it matches an include pattern and no exclude pattern.
    """

    include: tuple[Regex, ...] = (".*",)
    exclude: tuple[Regex, ...] = ()

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            out: list[object] = []
            for item in value:
                if isinstance(item, str) and "," in item and not _is_quantifier(item):
                    out.extend(part.strip() for part in item.split(",") if part.strip())
                else:
                    out.append(item)
            return tuple(out)
        return value

    @field_validator("include", "exclude")
    @classmethod
    def _compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            _check_regex(pattern)
        return value


def _is_quantifier(pattern: str) -> bool:
    """True when the commas in ``pattern`` belong to a ``{m,n}`` quantifier, not a list."""
    return re.search(r"\{\d*,\d*\}", pattern) is not None


class ReplicationPolicyKind(StrEnum):
    IDENTITY = "identity"
    PREFIX = "prefix"


class ReplicationPolicyConfig(FrozenModel):
    """How a source topic name maps to its target name.

    ``prefix`` (MirrorMaker 2's default) names the replica ``<source alias><separator><topic>``;
    ``identity`` keeps the name.  ``class`` selects a plugin registered under the
    ``drkit.replication_policies`` entry point instead.
    """

    kind: ReplicationPolicyKind | str = ReplicationPolicyKind.PREFIX
    # Part of every replica's name: Kafka's topic characters only (letters, digits, . _ -).
    separator: str = Field(default=".", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")


class TransformConfig(FrozenModel):
    """One step of a flow's transform chain (see drkit.topology.transforms)."""

    type: str = Field(min_length=1)
    options: dict[str, object] = Field(default_factory=dict)


class TruncationPolicy(StrEnum):
    """What a flow does once it has recorded a loss event (see drkit.replication.loss)."""

    CONTINUE = "continue"  # resume at the source log start; the loss stays recorded
    STOP = "stop"  # stop the flow with an error naming the loss


class CommitSource(StrEnum):
    """Where the checkpoint worker reads the source's commits (drkit.offsets.commit_follower)."""

    AUTO = "auto"  # offsets_topic where the principal may read the log, else admin_api
    ADMIN_API = "admin_api"  # every group's offsets, every round (no extra ACL)
    OFFSETS_TOPIC = "offsets_topic"  # once, then the commits on __consumer_offsets (READ on it)


class RetryPolicy(FrozenModel):
    """How a flow rides out transient errors (brokers down, leaders moving, timeouts).

    Patience is measured from the flow's last success, never from its start (see
    drkit.replication.supervision).
    """

    max_backoff_s: float = Field(default=30.0, gt=0)
    give_up_after_s: float | None = Field(default=None, gt=0)  # None: retry for as long as it lasts
    # How long a record may wait for the target's acknowledgement before the session is
    # restarted from stored progress (the record is sent again; nothing is skipped).
    # Becomes the producer's message.timeout.ms (a 32-bit count of milliseconds).
    delivery_timeout_s: float = Field(default=120.0, gt=0, le=MAX_MS_SETTING_S)


class AclSyncConfig(FrozenModel):
    """Copying consumers' topic ACLs to the replicas (opt-in; drkit.replication.acl_sync).

    ``principals`` maps a source principal to its name on the target (``null``: not copied);
    unmapped principals are copied as they are."""

    enabled: bool = False
    principals: dict[str, str | None] = Field(default_factory=dict)
    interval_s: float = Field(default=60.0, gt=0)

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for source, target in value.items():
            for principal in (source, target):
                if principal is not None and not _PRINCIPAL.fullmatch(principal):
                    raise ValueError(f"{principal!r} is not a principal (User:name)")
        return value


class SchemaSyncConfig(FrozenModel):
    """Copying the source's schema registry to the target's, ids kept (opt-in;
    drkit.schemas).  Both clusters need a ``schema_registry``."""

    enabled: bool = False
    interval_s: float = Field(default=30.0, gt=0)


class FlowConfig(FrozenModel):
    """Replication from one source cluster to one target cluster."""

    source: str
    target: str
    topics: NameFilter = NameFilter()
    groups: NameFilter = NameFilter()
    replication_policy: ReplicationPolicyConfig = ReplicationPolicyConfig()
    exactly_once: bool = False
    # None: the broker's default; Kafka's clients accept at most 10,000.
    target_replication_factor: int | None = Field(default=None, ge=1, le=10_000)
    sync_topic_configs: bool = True
    sync_group_offsets: bool = False
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    checkpoint_interval_s: float = Field(default=1.0, gt=0)
    checkpoint_commits_from: CommitSource = CommitSource.AUTO
    # Becomes librdkafka's topic.metadata.refresh.interval.ms, which is at most an hour.
    topic_refresh_interval_s: float = Field(default=5.0, gt=0, le=3600)
    transforms: tuple[TransformConfig, ...] = ()
    on_source_truncation: TruncationPolicy = TruncationPolicy.CONTINUE
    retry: RetryPolicy = RetryPolicy()
    acl_sync: AclSyncConfig = AclSyncConfig()
    schema_sync: SchemaSyncConfig = SchemaSyncConfig()
    # Kafka Streams application ids: their changelogs are replicated under their own names,
    # their repartition topics never (drkit.topology.streams, docs/kafka-streams.md).
    kafka_streams: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")], ...] = ()
    # A standby flow (e.g. the reverse direction of an active/passive pair) is PAUSED until a
    # directive in the state store starts it (drkit.control).
    standby: bool = False
    # Origin clusters whose replicas on the source this flow carries over by name (issue 48,
    # docs/three-dc.md): after dc1 is lost and dc2 promoted, the flow dc2->dc3 with
    # ``follows: [dc1]`` treats dc2's ``dc1.orders`` as dc3's ``dc1.orders`` - its checkpoints
    # and a failover dc2->dc3 translate groups on it through the offset syncs `drkit flows
    # repoint` writes - while its workers never copy it (the re-point did).
    follows: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The flow's name as used on the CLI and in metrics: ``source->target``."""
        return f"{self.source}->{self.target}"

    @model_validator(mode="after")
    def _distinct(self) -> FlowConfig:
        if self.source == self.target:
            raise ValueError(f"source and target are both {self.source!r}")
        return self

    @model_validator(mode="after")
    def _follows(self) -> FlowConfig:
        for origin in self.follows:
            if origin in (self.source, self.target):
                raise ValueError(
                    f"follows names {origin!r}, an end of the flow itself: it lists the origin "
                    "clusters whose replicas on the source are carried over by name"
                )
        if len(set(self.follows)) != len(self.follows):
            raise ValueError(f"follows lists a cluster twice: {list(self.follows)}")
        if self.follows and self.replication_policy.kind == ReplicationPolicyKind.IDENTITY:
            raise ValueError(
                "follows needs a policy whose replica names carry their origin (identity "
                "names do not: the replicas of another cluster cannot be told apart)"
            )
        return self


TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's legal topic names


class HealthPolicy(FrozenModel):
    """When the monitor calls a cluster DEGRADED or UNAVAILABLE (see drkit.health).

    Invariants (checked here, so every HealthPolicy obeys them): a probe's timeout is below the
    probe interval (a probe must end before the next one is due), and an observer's report
    stays fresh from one probe to the next (``observation_window_s`` covers an interval plus a
    probe's timeout), else observers drop in and out of the quorum between their own probes.
    """

    probe_interval_s: float = Field(default=5.0, gt=0)
    # Also the canary's message.timeout.ms (a 32-bit count of milliseconds).
    probe_timeout_s: float = Field(default=4.0, gt=0, le=MAX_MS_SETTING_S)
    failure_threshold: int = Field(default=3, ge=1)
    recovery_threshold: int = Field(default=2, ge=1)
    # Observers that must agree; above 1000 is a typo, never a deployment.
    observer_quorum: int = Field(default=1, ge=1, le=1000)
    observation_window_s: float = Field(default=30.0, gt=0)
    max_replication_lag_s: float = Field(default=30.0, gt=0)
    canary_topic: str = "__drkit_canary"

    @field_validator("canary_topic")
    @classmethod
    def _topic_name(cls, value: str) -> str:
        if not TOPIC_NAME.fullmatch(value) or value in (".", ".."):
            raise ValueError(f"{value!r} is not a Kafka topic name")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> HealthPolicy:
        problems = health_problems(self)
        if problems:
            raise PydanticCustomError(
                "references",
                "{count} contradictory setting(s)",
                {"count": len(problems), "problems": problems},
            )
        return self


def health_problems(policy: HealthPolicy) -> list[tuple[str, str]]:
    """Contradictory health settings as (key path relative to ``health``, reason) pairs."""
    problems: list[tuple[str, str]] = []
    if policy.probe_timeout_s >= policy.probe_interval_s:
        problems.append(
            (
                "probe_timeout_s",
                f"{policy.probe_timeout_s:g} must be below probe_interval_s "
                f"({policy.probe_interval_s:g})",
            )
        )
    fresh_for = policy.probe_interval_s + policy.probe_timeout_s
    if policy.observation_window_s < fresh_for:
        problems.append(
            (
                "observation_window_s",
                f"{policy.observation_window_s:g} must be at least probe_interval_s + "
                f"probe_timeout_s ({fresh_for:g}), or observers go stale between their probes",
            )
        )
    return problems


class HookConfig(FrozenModel):
    """A command the failover engine runs before or after a step, with the run's JSON context
    on stdin.  A failing ``before`` hook vetoes the step; a failing ``after`` hook is reported."""

    when: Literal["before", "after"]
    step: str = Field(default="*", min_length=1)  # a step name (runbooks/*.yaml) or *
    command: tuple[str, ...] = Field(min_length=1)
    timeout_s: float = Field(default=30.0, gt=0)
    # Variables set for this hook's process only (its secrets: NAME: ${VAR}); masked when the
    # config is shown, never in the command line, the run's record or a log.
    env: dict[str, SecretStr] = Field(default_factory=dict)
    # Names of drkit's own environment variables this hook also gets (KUBECONFIG, ...): by
    # default a hook sees only PATH, HOME, locale, TZ, TMPDIR and its user - not the
    # store's password or a cloud key drkit happens to run with.
    pass_env: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...] = ()


class FailoverPolicy(FrozenModel):
    """Limits the failover engine, the status document's readiness and the automation gate
    respect."""

    automatic: bool = False
    allow_single_observer: bool = False
    # Automatic failover acts only after a quorum of observers has had no answer at all from
    # the source for this long (a flapping cluster answers now and then and never qualifies).
    after_s: float = Field(default=60.0, ge=0)
    max_rpo_records: int = Field(default=0, ge=0)
    max_rpo_s: float = Field(default=60.0, ge=0)
    # Automatic failover ignores the two RPO bounds above (the operator's explicit override).
    accept_any_rpo: bool = False
    block_window_s: float = Field(default=3600.0, ge=0)
    # How long a switchover, cutover or failback waits for replication to reach the fence point
    # before it rolls back (overrides the runbook's drain timeout).
    switchover_timeout_s: float = Field(default=120.0, gt=0)
    # Fence the old primary with DENY WRITE ACLs for this principal on its replicated topics.
    fence_with_acls: bool = True
    # Replicas on a standby refuse application writes until promotion (drkit.access.standby);
    # applied by move_pointer and the monitor, needs an authorizer and known principals.
    read_only_standby: bool = True
    fence_principal: str = Field(default="User:*", min_length=1)
    # One failover at a time: the lease an engine holds (drkit.failover.lease), renewed every
    # third of it and before every side effect on a cluster; expiry by the store's clock.  At
    # least 1 s: below that a renewal (a store round trip, every third of the TTL, trusted for
    # the TTL less a margin of at least 0.05 s) cannot land before the lease runs out.
    lease_ttl_s: float = Field(default=60.0, ge=1)
    # A replication worker that can read neither the state store nor its flow's control
    # channel this long stops writing (its epoch may be stale); the engine waits this long for
    # a worker silent on both.  null: never.
    worker_silence_s: float | None = Field(default=30.0, gt=0)
    # The topic on every cluster where move_pointer (and the monitor, for a cluster that was
    # away) writes the signed pointer record applications following it read (drkit.client,
    # docs/client-pointer.md).  A deployment sharing its clusters with another - a drill - names
    # its own.  Ends in .internal: drkit's own, never replicated.
    pointer_topic: str = "drkit-pointer.internal"
    hooks: tuple[HookConfig, ...] = ()
    runbooks_dir: str | None = None  # default: the runbooks shipped with drkit

    @field_validator("pointer_topic")
    @classmethod
    def _pointer_topic(cls, value: str) -> str:
        if not TOPIC_NAME.fullmatch(value) or not value.endswith(".internal"):
            raise ValueError(f"{value!r}: a Kafka topic name ending in .internal")
        return value

    @field_validator("fence_principal")
    @classmethod
    def _fence_principal(cls, value: str) -> str:
        if not _PRINCIPAL.fullmatch(value):
            raise ValueError(f"{value!r} is not a principal (Type:name, e.g. User:admin)")
        return value


# The databases drkit's migrations and its fencing-token writes are tested on.
STORE_BACKENDS = ("sqlite", "postgresql")


class StateStoreConfig(FrozenModel):
    """Where drkit keeps its durable state.  ``None``: a SQLite file in the state directory."""

    url: SecretStr | None = None

    @field_validator("url")
    @classmethod
    def _parses(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(value.get_secret_value())
        except ArgumentError:
            raise ValueError("not a SQLAlchemy database URL") from None
        if url.get_backend_name() not in STORE_BACKENDS:
            raise ValueError(
                f"{url.get_backend_name()} is not supported: drkit's store runs on "
                + " or ".join(STORE_BACKENDS)
            )
        if url.get_backend_name() == "sqlite" and _in_memory(url.database, url.query):
            raise ValueError(
                "an in-memory SQLite store: everything stored is gone when the command exits; "
                "drkit does not start a new, empty store where a path may be a typo (it would "
                "hold no pointer, lease or runs) - give a file, sqlite:////path/to/drkit.db"
            )
        if url.get_backend_name() == "sqlite" and Path(str(url.database)).is_dir():
            raise ValueError(
                f"{url.database} is a directory: give the SQLite store's file in it, e.g. "
                f"sqlite:///{Path(str(url.database)) / 'drkit.db'}"
            )
        return value


def _in_memory(database: str | None, query: Mapping[str, object]) -> bool:
    """Whether a SQLite URL's database is in memory (no file, ``:memory:``, ``mode=memory``)."""
    name = (database or "").strip()
    return (
        not name
        or name == ":memory:"
        or name.startswith("file::memory:")
        or "mode=memory" in name
        or query.get("mode") == "memory"
    )


class NotificationEvent(StrEnum):
    """What drkit tells webhooks about (drkit.notifications)."""

    DECISION = "decision"  # an automatic-failover decision changed its reasons (or acted)
    BLOCKED = "blocked"  # the source is gone for a quorum, but a rule keeps automation back
    FAILOVER_STARTED = "failover_started"
    FAILOVER_FINISHED = "failover_finished"
    DIVERGENCE = "divergence"  # an old primary came back with records the target never got


class WebhookConfig(FrozenModel):
    """POST an Alertmanager-webhook-compatible JSON body to ``url`` for ``events``.

    The URL is a secret: receivers (Slack, PagerDuty, Opsgenie) put their token in it."""

    url: SecretStr
    events: tuple[NotificationEvent, ...] = tuple(NotificationEvent)
    timeout_s: float = Field(default=5.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http(cls, value: SecretStr) -> SecretStr:
        if not re.match(r"^https?://", value.get_secret_value()):
            raise ValueError("must be an http:// or https:// URL")
        try:
            urlsplit(value.get_secret_value())
        except ValueError as err:  # an unclosed '[': every later reader of the URL would fail
            raise ValueError(f"not a valid URL ({err})") from None
        return value


class NotificationsConfig(FrozenModel):
    webhooks: tuple[WebhookConfig, ...] = ()


class TracingConfig(FrozenModel):
    """OpenTelemetry traces of failover runs (drkit.tracing); off unless a destination is set."""

    file: Path | None = None  # JSON lines, one finished span per line
    otlp_endpoint: str | None = None  # OTLP/HTTP traces URL: http://collector:4318/v1/traces
    service_name: str = Field(default="drkit", min_length=1)

    @field_validator("otlp_endpoint")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be an http:// or https:// URL (OTLP over HTTP)")
        if value is not None and "@" in urlsplit(value).netloc:
            # Shown wherever the URL is (config show, errors): refused, without echoing it.
            raise ValueError(
                "holds credentials (user:password@): give the collector's credentials in "
                "OTEL_EXPORTER_OTLP_HEADERS (the exporter reads it), never in the URL"
            )
        return value


def tracing_file_problem(tracing: TracingConfig) -> str | None:
    """Why spans cannot be written to ``tracing.file`` on this machine (a directory, or in a
    directory that does not exist), or None.  Not a load-time rule: the file is on the machine
    that runs the failover, which the one validating may not be."""
    file = tracing.file
    if file is None:
        return None
    if file.is_dir():
        return f"{file} is a directory: give a file for the spans (JSON lines)"
    if not file.parent.is_dir():
        return (
            f"{file}: its directory {file.parent} does not exist (a relative path from where "
            "drkit runs) - no span would be written"
        )
    return None


class ScheduledDrill(FrozenModel):
    """A drill the monitor runs on a cron schedule (UTC): a readiness check of the flow
    ``source`` -> ``target`` (nothing moves) or a full drill ``scenario`` (local clusters)."""

    cron: str
    scenario: str | None = None
    source: str | None = None
    target: str | None = None

    @field_validator("cron")
    @classmethod
    def _crontab(cls, value: str) -> str:
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as err:
            raise ValueError(f"not a crontab expression ({err})") from None
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ScheduledDrill:
        pair = self.source is not None and self.target is not None
        if (self.scenario is not None) != pair:
            return self
        raise ValueError("give either scenario, or source and target (a readiness check)")


class DrillsConfig(FrozenModel):
    schedule: tuple[ScheduledDrill, ...] = ()


MAX_ALIAS_LENGTH = 64  # a cluster alias prefixes topic names (249 characters at most)


# A signing secret shorter than this is refused: the flow keys derived from it are only as
# strong as it is (``openssl rand -hex 32`` gives 64 characters).
MIN_SIGNING_SECRET = 32


class SigningConfig(FrozenModel):
    """Where the keys that sign drkit's offset syncs and flow directives come from
    (drkit/signing.py).  With a ``secret`` every process derives each flow's key from it, so
    the keys survive a lost or replaced state store; without one each flow's key is random and
    kept only in the state store (back it up with the store)."""

    secret: SecretStr | None = None
    # A file holding the secret (its first line): keeps it out of the config file.
    secret_file: Path | None = None

    @model_validator(mode="after")
    def _secret(self) -> SigningConfig:
        if self.secret_file is not None:
            if self.secret is not None:
                raise ValueError("give secret or secret_file, not both")
            object.__setattr__(self, "secret", _read_secret_file(self.secret_file, "secret_file"))
        if self.secret is not None and len(self.secret.get_secret_value()) < MIN_SIGNING_SECRET:
            raise ValueError(
                f"secret: at least {MIN_SIGNING_SECRET} characters (the flow keys are derived "
                "from it; 'openssl rand -hex 32' makes one)"
            )
        return self

    @property
    def secret_bytes(self) -> bytes | None:
        """The secret as bytes, or None when the keys live in the state store."""
        return self.secret.get_secret_value().encode() if self.secret is not None else None


class DrkitConfig(FrozenModel):
    """The whole configuration of one drkit deployment."""

    version: Literal[1] = 1
    clusters: dict[str, ClusterConfig] = Field(min_length=1)
    flows: tuple[FlowConfig, ...] = ()
    health: HealthPolicy = HealthPolicy()
    failover: FailoverPolicy = FailoverPolicy()
    state_store: StateStoreConfig = StateStoreConfig()
    notifications: NotificationsConfig = NotificationsConfig()
    drills: DrillsConfig = DrillsConfig()
    tracing: TracingConfig = TracingConfig()
    signing: SigningConfig = SigningConfig()

    @field_validator("version", mode="before")
    @classmethod
    def _version_one(cls, value: object) -> object:
        if value == "1":
            raise ValueError("write 1 unquoted (a number, not the string '1')")
        if value != 1 or isinstance(value, bool):
            raise ValueError(f"{value!r}: this drkit reads version 1")
        return value

    @field_validator("clusters")
    @classmethod
    def _alias_names(cls, value: dict[str, ClusterConfig]) -> dict[str, ClusterConfig]:
        for alias in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
                raise ValueError(f"cluster alias {alias!r} may hold only letters, digits, _ and -")
            if len(alias) > MAX_ALIAS_LENGTH:
                raise ValueError(
                    f"cluster alias {alias[:20]!r}... is {len(alias)} characters: at most "
                    f"{MAX_ALIAS_LENGTH} characters (it prefixes replica and drkit topic names, "
                    "249 characters at most, and labels metrics)"
                )
        return value

    @model_validator(mode="after")
    def _drill_clusters(self) -> DrkitConfig:
        for index, entry in enumerate(self.drills.schedule):
            for name in (entry.source, entry.target):
                if name is not None and name not in self.clusters:
                    raise ValueError(f"drills.schedule[{index}]: unknown cluster {name!r}")
        return self

    @model_validator(mode="after")
    def _references(self) -> DrkitConfig:
        problems = reference_problems(self)
        if problems:
            # The loader expands ``ctx["problems"]`` into one reported line per (path, reason).
            raise PydanticCustomError(
                "references",
                "{count} invalid reference(s)",
                {"count": len(problems), "problems": problems},
            )
        return self

    def flow(self, name: str) -> FlowConfig:
        """The flow called ``source->target``; raises ``KeyError`` for an unknown name."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise KeyError(name)

    def cluster(self, alias: str) -> ClusterConfig:
        """The cluster with this alias; raises ``KeyError`` for an unknown alias."""
        return self.clusters[alias]

    def as_role(self, role: Role) -> DrkitConfig:
        """This config as a process doing ``role`` sees it: every cluster connects with the
        role's credentials (``role_security``), everything else unchanged."""
        if not any(role in cluster.role_security for cluster in self.clusters.values()):
            return self
        clusters = {alias: cluster.for_role(role) for alias, cluster in self.clusters.items()}
        return self.model_copy(update={"clusters": clusters})


def connects_as(config: DrkitConfig, aliases: Iterable[str]) -> str:
    """Who a process logs in as on each of ``aliases`` (``dc1=User:replicator,...``; the
    certificate file for TLS client authentication; ``-`` for neither) - for its start-up log
    line; never a secret."""

    def who(security: SecurityConfig) -> str:
        if security.login:
            return f"User:{security.login}"
        if security.ssl_certificate_location:
            return f"certificate {Path(security.ssl_certificate_location).name}"
        return "-"

    return ",".join(f"{alias}={who(config.clusters[alias].security)}" for alias in sorted(aliases))


def reference_problems(config: DrkitConfig) -> list[tuple[str, str]]:
    """Cross-references that single fields cannot check: (key path, reason) pairs."""
    problems = flow_reference_problems(
        set(config.clusters), [(flow.source, flow.target) for flow in config.flows]
    )
    for index, flow in enumerate(config.flows):
        for origin in flow.follows:
            if origin not in config.clusters:
                known = ", ".join(sorted(config.clusters))
                problems.append(
                    (f"flows[{index}].follows", f"unknown cluster {origin!r} (known: {known})")
                )
    failover, health = config.failover, config.health
    if failover.automatic and health.observer_quorum < 2 and not failover.allow_single_observer:
        problems.append(
            (
                "failover.automatic",
                "automatic failover can never act with health.observer_quorum "
                f"{health.observer_quorum}: set observer_quorum >= 2 or "
                "failover.allow_single_observer",
            )
        )
    flows = {flow.name for flow in config.flows}
    for index, drill in enumerate(config.drills.schedule):
        pair = f"{drill.source}->{drill.target}"
        if drill.source is not None and pair not in flows:
            problems.append((f"drills.schedule[{index}]", (
                f"readiness of {pair}: no such flow (flows: {', '.join(sorted(flows)) or 'none'})"
            )))  # fmt: skip
    for index, flow in enumerate(config.flows):
        if not flow.schema_sync.enabled:
            continue
        for end in (flow.source, flow.target):
            cluster = config.clusters.get(end)
            if cluster is not None and cluster.schema_registry is None:
                problems.append(
                    (
                        f"flows[{index}].schema_sync",
                        f"cluster {end!r} has no schema_registry to sync with",
                    )
                )
    return problems


def flow_reference_problems(
    clusters: set[str], flows: list[tuple[object, object]]
) -> list[tuple[str, str]]:
    """Flows naming unknown clusters, and duplicate flows, as (key path, reason) pairs.

    Works on plain values so the loader can report these even when other fields are invalid.
    """
    problems: list[tuple[str, str]] = []
    seen: set[tuple[object, object]] = set()
    known = ", ".join(sorted(clusters))
    for index, (source, target) in enumerate(flows):
        for end, alias in (("source", source), ("target", target)):
            if isinstance(alias, str) and alias not in clusters:
                problems.append(
                    (f"flows[{index}].{end}", f"unknown cluster {alias!r} (known: {known})")
                )
        if not (isinstance(source, str) and isinstance(target, str)):
            continue  # not names at all: the model reports their type
        if (source, target) in seen:
            problems.append((f"flows[{index}]", f"duplicate flow {source}->{target}"))
        seen.add((source, target))
    return problems
