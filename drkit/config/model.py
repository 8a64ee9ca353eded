"""The typed configuration model: clusters, flows, health and failover policy, state store.

All classes are frozen and reject unknown keys, so a typo in the YAML is a reported problem rather
than a silently ignored setting.  Secrets are :class:`pydantic.SecretStr`: their ``repr`` and
``str`` never show the value.  Cross-field rules (a flow names known clusters, regexes compile, the
state-store URL parses) are checked here so that every consumer of a :class:`DrkitConfig` can rely
on them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError


class _Frozen(BaseModel):
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


class SecurityConfig(_Frozen):
    """How drkit authenticates to one cluster.  SASL settings are required for SASL_*."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    username: str | None = None
    password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification: bool = True

    @model_validator(mode="after")
    def _sasl_complete(self) -> SecurityConfig:
        if self.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            missing = [
                name
                for name in ("sasl_mechanism", "username", "password")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(f"{self.protocol} needs {', '.join(missing)}")
        return self


class ClusterConfig(_Frozen):
    """One Kafka cluster (a data center) drkit talks to."""

    bootstrap_servers: str = Field(min_length=1)
    security: SecurityConfig = SecurityConfig()
    # librdkafka properties applied to every client of this cluster, after drkit's own.
    client_overrides: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server.strip()!r} is not host:port")
        return value


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"invalid regex {pattern!r}: {err}") from None
    return pattern


Regex = Annotated[str, Field(min_length=1)]


class NameFilter(_Frozen):
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


class ReplicationPolicyConfig(_Frozen):
    """How a source topic name maps to its target name.

    ``prefix`` (MirrorMaker 2's default) names the replica ``<source alias><separator><topic>``;
    ``identity`` keeps the name.  ``class`` selects a plugin registered under the
    ``drkit.replication_policies`` entry point instead.
    """

    kind: ReplicationPolicyKind | str = ReplicationPolicyKind.PREFIX
    separator: str = Field(default=".", min_length=1)


class TransformConfig(_Frozen):
    """One step of a flow's transform chain (see drkit.replication.transforms)."""

    type: str = Field(min_length=1)
    options: dict[str, object] = Field(default_factory=dict)


class FlowConfig(_Frozen):
    """Replication from one source cluster to one target cluster."""

    source: str
    target: str
    topics: NameFilter = NameFilter()
    groups: NameFilter = NameFilter()
    replication_policy: ReplicationPolicyConfig = ReplicationPolicyConfig()
    exactly_once: bool = False
    target_replication_factor: int = Field(default=-1, description="-1: broker default")
    sync_topic_configs: bool = True
    sync_group_offsets: bool = False
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    checkpoint_interval_s: float = Field(default=1.0, gt=0)
    topic_refresh_interval_s: float = Field(default=5.0, gt=0)
    transforms: tuple[TransformConfig, ...] = ()

    @property
    def name(self) -> str:
        """The flow's name as used on the CLI and in metrics: ``source->target``."""
        return f"{self.source}->{self.target}"

    @model_validator(mode="after")
    def _distinct(self) -> FlowConfig:
        if self.source == self.target:
            raise ValueError(f"source and target are both {self.source!r}")
        return self


class HealthPolicy(_Frozen):
    """When the monitor calls a cluster DEGRADED or UNAVAILABLE (see drkit.health)."""

    probe_interval_s: float = Field(default=5.0, gt=0)
    probe_timeout_s: float = Field(default=4.0, gt=0)
    failure_threshold: int = Field(default=3, ge=1)
    recovery_threshold: int = Field(default=2, ge=1)
    observer_quorum: int = Field(default=1, ge=1)
    observation_window_s: float = Field(default=30.0, gt=0)
    max_replication_lag_s: float = Field(default=30.0, gt=0)
    canary_topic: str = "__drkit_canary"


class FailoverPolicy(_Frozen):
    """Limits the failover engine must respect."""

    automatic: bool = False
    allow_single_observer: bool = False
    max_rpo_records: int = Field(default=0, ge=0)
    max_rpo_s: float = Field(default=60.0, ge=0)
    switchover_timeout_s: float = Field(default=120.0, gt=0)
    block_window_s: float = Field(default=3600.0, ge=0)


class StateStoreConfig(_Frozen):
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
            make_url(value.get_secret_value())
        except ArgumentError:
            raise ValueError("not a SQLAlchemy database URL") from None
        return value


class DrkitConfig(_Frozen):
    """The whole configuration of one drkit deployment."""

    version: Literal[1] = 1
    clusters: dict[str, ClusterConfig] = Field(min_length=1)
    flows: tuple[FlowConfig, ...] = ()
    health: HealthPolicy = HealthPolicy()
    failover: FailoverPolicy = FailoverPolicy()
    state_store: StateStoreConfig = StateStoreConfig()

    @field_validator("clusters")
    @classmethod
    def _alias_names(cls, value: dict[str, ClusterConfig]) -> dict[str, ClusterConfig]:
        for alias in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", alias):
                raise ValueError(f"cluster alias {alias!r} may hold only letters, digits, _ and -")
        return value

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


def reference_problems(config: DrkitConfig) -> list[tuple[str, str]]:
    """Cross-references that single fields cannot check: (key path, reason) pairs."""
    return flow_reference_problems(
        set(config.clusters), [(flow.source, flow.target) for flow in config.flows]
    )


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
        if (source, target) in seen:
            problems.append((f"flows[{index}]", f"duplicate flow {source}->{target}"))
        seen.add((source, target))
    return problems
