"""What the Kafka clients would refuse in a config, found before any command builds one.

``drkit config validate`` checks the model (drkit.config); this checks what only the client
library knows: librdkafka itself is given each cluster's settings - as drkit itself and as each
role of ``role_security`` - and asked to build a client (nothing is sent: a refusal happens at
construction), and the files the settings point to must be there to read.  Each refusal is one
:class:`~drkit.errors.Problem` naming the config key.
"""

from __future__ import annotations

import os
from pathlib import Path

from drkit.config.model import ClusterConfig, DrkitConfig, SecurityConfig
from drkit.errors import ClientSettingsRefused, Problem
from drkit.kafka.clients import ClusterEndpoint, make_producer

_FILES = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location")


def client_problems(config: DrkitConfig) -> list[Problem]:
    """Every refusal, per cluster: unreadable files first, then librdkafka's own verdict on
    the settings (which would only repeat a missing file less clearly)."""
    problems: list[Problem] = []
    for alias, cluster in config.clusters.items():
        files = _file_problems(alias, cluster)
        problems += files
        if not files:
            problems += _library_problems(config, alias, cluster)
    return problems


def _securities(cluster: ClusterConfig) -> list[tuple[str, SecurityConfig]]:
    roles = [(f"role_security.{role.value}", s) for role, s in cluster.role_security.items()]
    return [("security", cluster.security), *roles]


def _file_problems(alias: str, cluster: ClusterConfig) -> list[Problem]:
    out = []
    for where, security in _securities(cluster):
        for name in _FILES:
            value = getattr(security, name)
            if value is None:
                continue
            path = Path(value)
            if not path.is_file():
                why = "does not exist" if not path.exists() else "is not a file"
                out.append(Problem(f"clusters.{alias}.{where}.{name}", f"{value} {why}"))
            elif not os.access(path, os.R_OK):
                out.append(Problem(f"clusters.{alias}.{where}.{name}", f"{value} is not readable"))
    return out


def _library_problems(config: DrkitConfig, alias: str, cluster: ClusterConfig) -> list[Problem]:
    out: list[Problem] = []
    seen: set[str] = set()
    for role in (None, *cluster.role_security):
        as_role = config if role is None else config.as_role(role)
        try:
            # No bootstrap servers: a client built with them connects at once, and validating a
            # config must send nothing anywhere (drkit checks the addresses' form itself).
            make_producer(
                ClusterEndpoint(alias, as_role.clusters[alias]), extra={"bootstrap.servers": ""}
            )
        except ClientSettingsRefused as err:
            reason = err.reason + (f" (as role {role.value})" if role is not None else "")
            if reason not in seen:
                seen.add(reason)
                out.append(Problem(err.key, reason))
    return out
