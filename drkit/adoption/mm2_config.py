"""MirrorMaker 2 configuration (``mm2.properties``) read into a drkit config (pure).

Every key of the file ends up in exactly one of two lists: *mapped* (where it went in the drkit
config) or *unsupported* (why drkit has no equivalent, and what to do instead).  Secrets never
travel: a password, a client secret or a key-store password becomes a ``${ENV}`` reference whose
variable is listed for the operator to set.

MM2 keys read (``A``/``B`` are cluster aliases; a ``A->B.`` prefix overrides a key for one
flow):

* ``clusters``, ``<alias>.bootstrap.servers``, ``<alias>.security.protocol``,
  ``<alias>.sasl.mechanism``, ``<alias>.sasl.jaas.config`` (PLAIN/SCRAM username, OAUTHBEARER
  clientId/scope), ``<alias>.sasl.oauthbearer.token.endpoint.url``, PEM trust stores and
  ``ssl.endpoint.identification.algorithm``;
* ``A->B.enabled``, ``topics``/``topics.exclude`` (``topics.blacklist``), ``groups``/
  ``groups.exclude`` (``groups.blacklist``), ``replication.policy.class``/``.separator``,
  ``replication.factor``, ``sync.topic.configs.enabled``, ``sync.group.offsets.enabled``,
  ``emit.heartbeats.interval.seconds``, ``emit.checkpoints.interval.seconds``,
  ``refresh.topics.interval.seconds``, ``exactly.once.source.support``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from drkit.errors import ConfigError, Problem

_POLICIES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "prefix",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}
_JAAS_FIELD = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_FLOW_KEY = re.compile(r"^([A-Za-z0-9_-]+)->([A-Za-z0-9_-]+)\.(.+)$")

# Keys that tune MirrorMaker's Connect machinery, which drkit does not have.
_CONNECT_INTERNALS = {
    "offset.storage.replication.factor", "status.storage.replication.factor",
    "config.storage.replication.factor", "offset.storage.topic", "status.storage.topic",
    "config.storage.topic", "key.converter", "value.converter", "header.converter",
    "dedicated.mode.enable.internal.rest", "listeners", "rest.advertised.host.name",
    "offset.flush.interval.ms", "offset.flush.timeout.ms",
}  # fmt: skip
_OWN_TOPIC_FACTORS = {
    "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
}  # fmt: skip


@dataclass
class Imported:
    """The drkit config built from an MM2 file, and what happened to each of its keys."""

    document: dict[str, Any]
    mapped: list[tuple[str, str]] = field(default_factory=list)  # (MM2 key, drkit key)
    unsupported: list[tuple[str, str]] = field(default_factory=list)  # (MM2 key, why / do)
    env: dict[str, str] = field(default_factory=dict)  # variable -> what to put in it


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text: ``key=value``, ``key: value`` or ``key value`` lines, ``#``
    and ``!`` comments, backslash line continuations and escapes.  Later keys win."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        out[key] = value
        logical = ""
    if logical:
        key, value = _split(logical)
        out[key] = value
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\" and index + 1 < len(line):
            key_chars.append(_unescape(line[index + 1]))
            index += 2
            continue
        if char in "=: \t":
            break
        key_chars.append(char)
        index += 1
    rest = line[index:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return "".join(key_chars), _unescape_all(rest)


def _unescape(char: str) -> str:
    return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(char, char)


def _unescape_all(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _unescape(m.group(1)), value).strip()


def import_mm2(text: str) -> Imported:
    """A drkit config document for the clusters and enabled flows of the MM2 file ``text``."""
    props = parse_properties(text)
    aliases = [a.strip() for a in props.get("clusters", "").split(",") if a.strip()]
    imported = Imported({"version": 1, "clusters": {}, "flows": []})
    if "clusters" in props:
        imported.mapped.append(("clusters", "clusters"))
    used: set[str] = {"clusters"}
    for alias in aliases:
        imported.document["clusters"][alias] = _cluster(alias, props, imported, used)
    for source in aliases:
        for target in aliases:
            if source != target:
                flow = _flow(source, target, props, imported, used)
                if flow is not None:
                    imported.document["flows"].append(flow)
    undefined = _flows_to_undefined_clusters(props, aliases)
    if undefined:
        raise ConfigError(undefined)
    for key in sorted(set(props) - used):
        imported.unsupported.append((key, _why_not(key, props[key], aliases)))
    return imported


def _flows_to_undefined_clusters(props: dict[str, str], aliases: list[str]) -> list[Problem]:
    """A ``A->B.*`` key whose A or B is not in ``clusters``: MM2 would not run that flow
    either, and an import that silently dropped it (exit 0, ``flows: []``) misleads."""
    problems = []
    for key in sorted(props):
        match = _FLOW_KEY.match(key)
        if match is None:
            continue
        missing = [alias for alias in match.group(1, 2) if alias not in aliases]
        if missing:
            problems.append(Problem(key, f"cluster {missing[0]!r} is not in clusters "
                                         f"({', '.join(aliases) or 'none'})"))  # fmt: skip
    return problems


def _env_name(alias: str, what: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", f"DRKIT_{alias}_{what}".upper())


def _cluster(alias: str, props: dict[str, str], out: Imported, used: set[str]) -> dict[str, Any]:
    def take(suffix: str) -> str | None:
        key = f"{alias}.{suffix}"
        if key in props:
            used.add(key)
            return props[key]
        return None

    cluster: dict[str, Any] = {}
    servers = take("bootstrap.servers")
    if servers is not None:
        cluster["bootstrap_servers"] = ",".join(s.strip() for s in servers.split(","))
        out.mapped.append((f"{alias}.bootstrap.servers", f"clusters.{alias}.bootstrap_servers"))
    security: dict[str, Any] = {}
    protocol = take("security.protocol")
    if protocol is not None:
        security["protocol"] = protocol.upper()
        out.mapped.append((f"{alias}.security.protocol", f"clusters.{alias}.security.protocol"))
    mechanism = take("sasl.mechanism")
    if mechanism is not None:
        security["sasl_mechanism"] = mechanism.upper()
        out.mapped.append((f"{alias}.sasl.mechanism", f"clusters.{alias}.security.sasl_mechanism"))
    jaas = take("sasl.jaas.config")
    if jaas is not None:
        _jaas(alias, jaas, security, props, out, used)
    _tls(alias, take, security, out)
    if security:
        cluster["security"] = security
    return cluster


def _jaas(
    alias: str, jaas: str, security: dict[str, Any], props: dict[str, str], out: Imported,
    used: set[str],
) -> None:  # fmt: skip
    """Username (or OIDC client id) from the JAAS line; its secret as an ``${ENV}`` reference."""
    fields = dict(_JAAS_FIELD.findall(jaas))
    key = f"{alias}.sasl.jaas.config"
    if "OAuthBearerLoginModule" in jaas:
        variable = _env_name(alias, "oauth_client_secret")
        oauth: dict[str, Any] = {
            "client_id": fields.get("clientId", ""),
            "client_secret": f"${{{variable}}}",
        }
        if "scope" in fields:
            oauth["scope"] = fields["scope"]
        endpoint = f"{alias}.sasl.oauthbearer.token.endpoint.url"
        if endpoint in props:
            used.add(endpoint)
            oauth["token_endpoint_url"] = props[endpoint]
            out.mapped.append((endpoint, f"clusters.{alias}.security.oauth.token_endpoint_url"))
        handler = f"{alias}.sasl.login.callback.handler.class"
        if handler in props:
            used.add(handler)
            out.mapped.append((handler, f"clusters.{alias}.security.oauth (librdkafka's oidc "
                                        "method; the Java handler in drkit verify)"))  # fmt: skip
        security["oauth"] = oauth
        out.env[variable] = f"the OIDC client secret of {fields.get('clientId', '?')} on {alias}"
        out.mapped.append((key, f"clusters.{alias}.security.oauth (secret: ${{{variable}}})"))
        return
    variable = _env_name(alias, "sasl_password")
    if "username" in fields:
        security["username"] = fields["username"]
    else:  # a config-provider reference (${file:...}) or an unusual login module
        user_variable = _env_name(alias, "sasl_username")
        security["username"] = f"${{{user_variable}}}"
        out.env[user_variable] = f"the SASL username on {alias} (not in the JAAS line)"
    security["password"] = f"${{{variable}}}"
    out.env[variable] = f"the SASL password of {fields.get('username', '?')} on {alias}"
    out.mapped.append((key, f"clusters.{alias}.security.username/password (${{{variable}}})"))


def _tls(alias: str, take: Any, security: dict[str, Any], out: Imported) -> None:
    given_kind = take("ssl.truststore.type")
    kind = (given_kind or "JKS").upper()
    location = take("ssl.truststore.location")
    if given_kind is not None:
        key = f"{alias}.ssl.truststore.type"
        if kind == "PEM":
            out.mapped.append((key, f"clusters.{alias}.security.ssl_ca_location (PEM)"))
        else:
            out.unsupported.append((key, f"{kind}: drkit (librdkafka) reads PEM"))
    if location is not None:
        key = f"{alias}.ssl.truststore.location"
        if kind == "PEM":
            security["ssl_ca_location"] = location
            out.mapped.append((key, f"clusters.{alias}.security.ssl_ca_location"))
        else:
            out.unsupported.append(
                (key, f"a {kind} trust store: drkit (librdkafka) reads PEM - export the CA with "
                      "'keytool -exportcert -rfc' and set security.ssl_ca_location")
            )  # fmt: skip
    password = take("ssl.truststore.password")
    if password is not None:
        out.unsupported.append(
            (f"{alias}.ssl.truststore.password", "a PEM CA file needs no password")
        )
    identification = take("ssl.endpoint.identification.algorithm")
    if identification is not None:
        security["ssl_endpoint_identification"] = bool(identification.strip())
        out.mapped.append(
            (f"{alias}.ssl.endpoint.identification.algorithm",
             f"clusters.{alias}.security.ssl_endpoint_identification")
        )  # fmt: skip


def _flow(
    source: str, target: str, props: dict[str, str], out: Imported, used: set[str]
) -> dict[str, Any] | None:
    prefix = f"{source}->{target}."

    def take(key: str) -> tuple[str, str] | None:
        """(the MM2 key that set ``key`` for this flow, its value): the flow's own, else the
        top-level one."""
        for candidate in (prefix + key, key):
            if candidate in props:
                used.add(candidate)
                return candidate, props[candidate]
        return None

    enabled = take("enabled")
    name = f"{source}->{target}"
    if enabled is None:
        return None
    if enabled[1].strip().lower() != "true":
        out.mapped.append((enabled[0], f"no flow {name} (disabled)"))
        return None
    out.mapped.append((enabled[0], f"flows[{name}]"))
    flow: dict[str, Any] = {"source": source, "target": target}

    def mapped(found: tuple[str, str] | None, where: str) -> str | None:
        if found is None:
            return None
        out.mapped.append((found[0], f"flows[{name}].{where}"))
        return found[1]

    topics: dict[str, Any] = {}
    groups: dict[str, Any] = {}
    if (value := mapped(take("topics"), "topics.include")) is not None:
        topics["include"] = _patterns(value)
    for legacy in ("topics.exclude", "topics.blacklist"):
        if (value := mapped(take(legacy), "topics.exclude")) is not None:
            topics["exclude"] = _patterns(value)
    if (value := mapped(take("groups"), "groups.include")) is not None:
        groups["include"] = _patterns(value)
    for legacy in ("groups.exclude", "groups.blacklist"):
        if (value := mapped(take(legacy), "groups.exclude")) is not None:
            groups["exclude"] = _patterns(value)
    if topics:
        flow["topics"] = topics
    if groups:
        flow["groups"] = groups
    policy: dict[str, Any] = {}
    found = take("replication.policy.class")
    if found is not None:
        kind = _POLICIES.get(found[1].strip())
        if kind is None:
            out.unsupported.append(
                (found[0], f"replication policy {found[1].strip()}: write it as a drkit policy "
                           "plugin (entry point drkit.replication_policies)")
            )  # fmt: skip
        else:
            policy["kind"] = kind
            out.mapped.append((found[0], f"flows[{name}].replication_policy.kind"))
    if value := mapped(take("replication.policy.separator"), "replication_policy.separator"):
        policy["separator"] = value
    if policy:
        flow["replication_policy"] = policy
    if (value := mapped(take("replication.factor"), "target_replication_factor")) is not None:
        flow["target_replication_factor"] = int(value)
    for key, where in (
        ("sync.topic.configs.enabled", "sync_topic_configs"),
        ("sync.group.offsets.enabled", "sync_group_offsets"),
    ):
        if (value := mapped(take(key), where)) is not None:
            flow[where] = value.strip().lower() == "true"
    for key, where in (
        ("emit.heartbeats.interval.seconds", "heartbeat_interval_s"),
        ("emit.checkpoints.interval.seconds", "checkpoint_interval_s"),
        ("refresh.topics.interval.seconds", "topic_refresh_interval_s"),
    ):
        if (value := mapped(take(key), where)) is not None:
            flow[where] = float(value)
    if (value := mapped(take("exactly.once.source.support"), "exactly_once")) is not None:
        flow["exactly_once"] = value.strip().lower() == "enabled"
    return flow


def _patterns(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def _why_not(key: str, value: str, aliases: list[str]) -> str:
    """Why ``key`` has no drkit equivalent, and what to do instead."""
    flow = _FLOW_KEY.match(key)
    bare = flow.group(3) if flow else key
    for alias in aliases:
        if bare.startswith(f"{alias}."):
            bare = bare[len(alias) + 1 :]
            break
    if bare in _CONNECT_INTERNALS:
        return "a Kafka Connect setting: drkit runs no Connect cluster (workers share a group)"
    if bare in _OWN_TOPIC_FACTORS:
        return ("drkit's own topics (heartbeats, offset syncs, checkpoints) take the target's "
                "default replication factor")  # fmt: skip
    if bare == "tasks.max":
        return "drkit scales with 'drkit replicate --workers N' (one consumer group per flow)"
    if bare == "sync.topic.acls.enabled":
        return "ACL sync is coming (opt-in); until then create the replicas' ACLs yourself"
    if bare in ("emit.heartbeats.enabled", "emit.checkpoints.enabled"):
        return "drkit always emits heartbeats and checkpoints: health and failover need them"
    if bare == "sync.group.offsets.interval.seconds":
        return "drkit syncs group offsets with each checkpoint round (checkpoint_interval_s)"
    if bare == "offset-syncs.topic.location":
        if value.strip() == "target":
            return "drkit keeps offset syncs on the target already"
        return "drkit keeps offset syncs on the target only"
    if bare.startswith(("consumer.", "producer.", "admin.")) or ".consumer." in key:
        return ("a Java client property: set its librdkafka equivalent in "
                "clusters.<alias>.client_overrides")  # fmt: skip
    if bare.startswith("config.providers") or "${" in value:
        return "Kafka config providers: use ${ENV} references or *_file keys in drkit's config"
    if bare.startswith(("ssl.keystore", "ssl.key.")):
        return ("a client key store: drkit (librdkafka) reads PEM - set "
                "security.ssl_certificate_location and ssl_key_location")  # fmt: skip
    return "no drkit equivalent"


def render(imported: Imported, source: str, generated_at: str) -> str:
    """The imported config as commented YAML: what to set, what was mapped, what was not."""
    import yaml

    lines = [f"# drkit config imported from {source} ({generated_at}) by 'drkit config import'."]
    if imported.env:
        lines.append(
            "# Set these environment variables before use (secrets never leave MM2's file):"
        )
        lines += [f"#   {name}: {what}" for name, what in sorted(imported.env.items())]
    lines.append("# MirrorMaker 2 keys mapped (MM2 key -> drkit key):")
    lines += [f"#   {key} -> {where}" for key, where in imported.mapped]
    if imported.unsupported:
        lines.append("# MirrorMaker 2 keys not carried over (MM2 key: why, and what to do):")
        lines += [f"#   {key}: {why}" for key, why in imported.unsupported]
    body = yaml.safe_dump(imported.document, sort_keys=False, default_flow_style=False)
    return "\n".join(lines) + "\n" + body
