"""What in a valid config is weaker than it looks: warnings, never refusals (pure).

``drkit config validate`` prints them (and lists them in its JSON). Each names the setting by
its key path and says why; none repeats a secret's value.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from drkit.config.model import (
    ClusterConfig,
    DrkitConfig,
    Role,
    SaslMechanism,
    SecurityConfig,
    SecurityProtocol,
    security_override,
    tracing_file_problem,
)


def security_warnings(config: DrkitConfig) -> list[str]:
    """One line per weakness, ``key.path: why``."""
    out: list[str] = []
    for alias, cluster in config.clusters.items():
        out += _cluster(f"clusters.{alias}", cluster)
    out += _one_cluster_two_aliases(config)
    out += _acl_sync_as_replicator(config)
    for index, hook in enumerate(config.notifications.webhooks):
        if _plain_http(hook.url.get_secret_value()):
            out.append(
                f"notifications.webhooks[{index}].url: http:// - the URL (often a token) "
                "and every message travel in clear"
            )
    return out + unintended_warnings(config)


def unintended_warnings(config: DrkitConfig) -> list[str]:
    """Settings that are legal but surely not meant: a flow that selects no topic, a webhook
    that never fires, a route sending many topics onto one name."""
    from drkit.config.loader import route_merges

    out: list[str] = []
    for index, flow in enumerate(config.flows):
        path = f"flows[{index}]"
        if not flow.topics.include:
            out.append(f"{path}.topics.include: empty - flow {flow.name} selects no topic")
        elif any(_matches_everything(pattern) for pattern in flow.topics.exclude):
            out.append(f"{path}.topics.exclude: excludes every name - flow {flow.name} "
                       "selects no topic")  # fmt: skip
        elif set(flow.topics.include) <= set(flow.topics.exclude):
            out.append(f"{path}.topics.exclude: repeats every include pattern - flow "
                       f"{flow.name} selects no topic")  # fmt: skip
        for place, transform in enumerate(flow.transforms):
            if transform.type == "route" and route_merges(transform):
                out.append(
                    f"{path}.transforms[{place}].options.replacement: no group reference "
                    "(\\1) while the pattern matches many topics - every topic it matches is "
                    "routed onto one name, their partitions' records mixed"
                )
    if (why := tracing_file_problem(config.tracing)) is not None:
        out.append(f"tracing.file: {why}")
    for index, hook in enumerate(config.notifications.webhooks):
        if not hook.events:
            out.append(f"notifications.webhooks[{index}].events: empty - the webhook never fires")
    out.extend(_schedules_that_never_fire(config))
    return out


def _schedules_that_never_fire(config: DrkitConfig) -> list[str]:
    """A scheduled drill whose cron names no real date (``0 3 31 2 *``, February 31st) is a
    valid crontab that never runs (issue 45, sixth trial: validated without a word)."""
    if not config.drills.schedule:
        return []
    from datetime import UTC, datetime

    from apscheduler.triggers.cron import CronTrigger

    now = datetime.now(UTC)
    out: list[str] = []
    for index, drill in enumerate(config.drills.schedule):
        trigger = CronTrigger.from_crontab(drill.cron, timezone="UTC")
        if trigger.get_next_fire_time(None, now) is None:
            out.append(f"drills.schedule[{index}].cron: {drill.cron!r} never fires (no such "
                       "date): the drill never runs")  # fmt: skip
    return out


_SAMPLE_NAMES = ("orders", "a", "x.y-z_1", "__consumer_offsets", "dc1.payments")


def _matches_everything(pattern: str) -> bool:
    """Whether an exclude pattern (matched against whole names) excludes any name at all."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False
    return all(compiled.fullmatch(name) for name in _SAMPLE_NAMES)


def _cluster(path: str, cluster: ClusterConfig) -> list[str]:
    out = _security(f"{path}.security", cluster.security) + _oauth_principal(path, cluster)
    for role, security in cluster.role_security.items():
        out += _security(f"{path}.role_security.{role}", security)
    overridden = [k for k in cluster.client_overrides if security_override(k)]
    for key in sorted(overridden) if cluster.allow_insecure_overrides else ():  # else refused
        out.append(
            f"{path}.client_overrides.{key}: overrides the connection's security "
            "(allowed by allow_insecure_overrides)"
        )
    registry = cluster.schema_registry
    if registry is not None and registry.password is not None and _plain_http(registry.url):
        out.append(f"{path}.schema_registry.url: http:// with a password - sent in clear")
    return out


def _acl_sync_as_replicator(config: DrkitConfig) -> list[str]:
    """``acl_sync`` writes the target's ACLs with the fencer's credentials, so that the
    replicator needs no ALTER on the cluster (which lets its holder rewrite every ACL and SCRAM
    credential): said when the fencer's credentials here are the replicator's though the
    config names them as two principals."""
    out = []
    for index, flow in enumerate(config.flows):
        if not flow.acl_sync.enabled:
            continue
        target = config.clusters[flow.target]
        fencer = target.principal(Role.FENCER)
        if target.for_role(Role.FENCER).security != target.for_role(Role.REPLICATOR).security:
            continue
        login = target.for_role(Role.REPLICATOR).security.login
        used = f"User:{login}" if login is not None else "its identity"
        if fencer is None or fencer in (target.principal(Role.REPLICATOR), used):
            continue  # one principal doing both: it holds the fencer's grant anyway
        out.append(
            f"flows[{index}].acl_sync: the copy writes {flow.target}'s ACLs with the fencer's "
            f"credentials, which are the replicator's here ({used}, not {fencer}): it would "
            "need ALTER on the cluster, which lets it rewrite every ACL and SCRAM credential - "
            f"give the replicator's process clusters.{flow.target}.role_security.fencer"
        )
    return out


def _one_cluster_two_aliases(config: DrkitConfig) -> list[str]:
    """Aliases that name the same brokers: a flow between them copies a cluster into itself,
    a failover between them fences the brokers it then sends the applications to."""
    out = []
    seen: dict[tuple[str, int], str] = {}
    for alias, cluster in config.clusters.items():
        for address in cluster.bootstrap_addresses:
            key = (address.host.lower(), address.port)
            other = seen.setdefault(key, alias)
            if other != alias:
                out.append(f"clusters.{alias}.bootstrap_servers: {address} is also "
                           f"clusters.{other}'s - one cluster under two aliases? A flow or a "
                           "failover between them acts on the same brokers")  # fmt: skip
                break
    return out


def _oauth_principal(path: str, cluster: ClusterConfig) -> list[str]:
    """OAUTHBEARER without ``principals``: drkit's guess at the brokers' name for it."""
    oauth = cluster.security.oauth
    if cluster.security.sasl_mechanism is not SaslMechanism.OAUTHBEARER or oauth is None:
        return []
    if cluster.principals:
        return []
    return [f"{path}.principals: not set - with OAUTHBEARER drkit takes its principal to be "
            f"User:{oauth.client_id} (the client id); brokers name it by the token's subject "
            "claim, which some providers set to another id: set principals so the doctor, the "
            "fences and `drkit acls` name the right one"]  # fmt: skip


def _security(path: str, security: SecurityConfig) -> list[str]:
    out = []
    sasl = security.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
    if not sasl and (security.username is not None or security.password is not None):
        instead = ("SASL_PLAINTEXT or SASL_SSL" if security.protocol is SecurityProtocol.PLAINTEXT
                   else "SASL_SSL")  # fmt: skip
        out.append(f"{path}: username/password are unused with {security.protocol} "
                   f"({instead}?)")  # fmt: skip
    if (
        security.protocol is SecurityProtocol.SASL_PLAINTEXT
        and security.sasl_mechanism is SaslMechanism.PLAIN
    ):
        out.append(f"{path}: SASL PLAIN over SASL_PLAINTEXT - the password crosses the network "
                   "in clear (use SASL_SSL, or SCRAM)")  # fmt: skip
    uses_tls = security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
    if uses_tls and not security.ssl_endpoint_identification:
        out.append(f"{path}.ssl_endpoint_identification: false - a certificate the CA signed "
                   "for any host is accepted for every broker")  # fmt: skip
    oauth = security.oauth
    if oauth is not None and _plain_http(oauth.token_endpoint_url):
        out.append(f"{path}.oauth.token_endpoint_url: http:// - the client secret is sent in "
                   "clear")  # fmt: skip
    return out


def _plain_http(url: str) -> bool:
    return urlsplit(url).scheme.lower() == "http"
