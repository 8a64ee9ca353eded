"""What a verification run checks, gathered with drkit's Kafka adapter (small metadata only).

The spec is plain JSON so the same job runs in-process (``drkit verify``) or under
``spark-submit``.  In process it holds the clusters' secrets inline; written to disk for
spark-submit it names them instead (``${DRKIT_SOURCE_PASSWORD}``...), and the job reads them
from its environment (sparkjob/secrets.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from drkit.accounting.losses import lost_before_replication
from drkit.accounting.sparkjob.schema import GroupSpec, PartitionSpec, Spec
from drkit.accounting.sparkjob.secrets import jaas_escaped, placeholder
from drkit.config.model import ClusterConfig, DrkitConfig, FlowConfig, OAuthConfig, SaslMechanism
from drkit.config.model import SecurityProtocol as Protocol
from drkit.config.secrets import url_credentials
from drkit.errors import (
    AccountingError,
    ConfigError,
    KafkaError,
    Problem,
    UnreachableClusterError,
)
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.ports import AdminFactory, ClusterAdmin
from drkit.offsets.lookup import translate_groups
from drkit.private_files import write_private
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent
from drkit.replication.progress import ProgressStore
from drkit.topology.flow import FlowTopology
from drkit.topology.transforms import BUILTIN_TYPES

# Ranges end at the last stable offset: the job reads committed data only, and a read_committed
# reader asked for offsets behind an open transaction waits for it (Spark: its whole poll timeout,
# 2 minutes by default, then moves on).
_COMMITTED = "read_committed"

_OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_TOKEN_ENDPOINT = "kafka.sasl.oauthbearer.token.endpoint.url"
_OAUTH_LOGIN_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
)
_LOGIN = {
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quoted(value: str) -> str:
    return f'"{jaas_escaped(value)}"'


class Secrets:
    """How a secret goes into a Kafka option: inline (in process), or as a placeholder named
    ``DRKIT_<SIDE>_<WHAT>`` that the job fills from its environment (a spec written to disk).

    ``named`` collects the placeholders used (name -> what it is) for the spec's ``secret_env``.
    """

    def __init__(self, side: str | None = None, cluster: str = "") -> None:
        self.side, self.cluster = side, cluster
        self.named: dict[str, str] = {}

    def text(self, what: str, description: str, secret: str) -> str:
        if self.side is None:
            return secret
        name = f"DRKIT_{self.side.upper()}_{what}"
        self.named[name] = f"the {self.side} cluster {self.cluster}'s {description}"
        return placeholder(name)


INLINE = Secrets()


def _oauth_options(oauth: OAuthConfig, secrets: Secrets) -> dict[str, str]:
    """The Java client's OIDC login (client-credentials grant, Kafka 3.4+ class names)."""
    assert oauth.client_secret is not None
    secret = secrets.text(
        "OAUTH_CLIENT_SECRET", "OAuth client secret", oauth.client_secret.get_secret_value()
    )
    fields = {"clientId": oauth.client_id, "clientSecret": secret}
    if oauth.scope:
        fields["scope"] = oauth.scope
    fields.update({f"extension_{key}": value for key, value in sorted(oauth.extensions.items())})
    jaas = " ".join(f"{key}={_jaas_quoted(value)}" for key, value in fields.items())
    return {
        "kafka.sasl.login.callback.handler.class": _OAUTH_LOGIN_HANDLER,
        _TOKEN_ENDPOINT: oauth.token_endpoint_url,
        "kafka.sasl.jaas.config": f"{_OAUTH_LOGIN} required {jaas};",
    }


# Kafka's Java client (3.9.1+, 4.x) fetches only the OAuth URLs this JVM property allows.
ALLOWED_OAUTH_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def _token_urls(spec: Spec) -> list[str]:
    return sorted(
        {
            url
            for options in (spec["source_options"], spec["target_options"])
            if (url := options.get(_TOKEN_ENDPOINT))
        }
    )


def jvm_properties(spec: Spec) -> dict[str, str]:
    """System properties the job's JVMs (driver and executors) need for ``spec``, for their
    command line: the token endpoints of OAUTHBEARER clusters, allowed; nothing for other
    clusters - nor for a token URL carrying a credential (``?client_secret=``): every local
    user may read a command line (see :func:`in_jvm_properties`)."""
    urls = [url for url in _token_urls(spec) if not url_credentials(url)]
    return {ALLOWED_OAUTH_URLS: ",".join(urls)} if urls else {}


def in_jvm_properties(spec: Spec) -> dict[str, str]:
    """The properties a local job's JVM sets on itself once started (not on its command
    line) when a token URL carries a credential: Kafka's Java client allows a URL only by
    exact match, query included.  Empty when no token URL carries one."""
    urls = _token_urls(spec)
    if not any(url_credentials(url) for url in urls):
        return {}
    return {ALLOWED_OAUTH_URLS: ",".join(urls)}


def refuse_command_line_secrets(spec: Spec) -> None:
    """Raise ConfigError when ``spec``'s JVMs could only be allowed their token endpoint on
    their command line (spark-submit, a non-local master) because its URL holds a credential."""
    if in_jvm_properties(spec):
        raise ConfigError([Problem(
            "security.oauth.token_endpoint_url",
            "holds a credential in its query: Spark's JVMs on other machines must be allowed "
            "its exact URL on their command line, which every local user may read - give the "
            "credential as client_secret (or client_secret_file), or verify with a local master",
        )])  # fmt: skip


def java_options(properties: Mapping[str, str]) -> str:
    """``properties`` as JVM ``-D`` options (one string, Spark's extraJavaOptions form)."""
    return " ".join(f"-D{key}={value}" for key, value in sorted(properties.items()))


def spark_kafka_options(cluster: ClusterConfig, secrets: Secrets = INLINE) -> dict[str, str]:
    """Options for Spark's Kafka source (Java client names) from drkit's cluster config;
    ``secrets`` says how passwords and keys go in (inline unless a placeholder is asked for)."""
    security = cluster.security
    options = {
        "kafka.bootstrap.servers": cluster.bootstrap_servers,
        "kafka.security.protocol": security.protocol.value,
    }
    if security.protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL):
        assert security.sasl_mechanism is not None
        options["kafka.sasl.mechanism"] = security.sasl_mechanism.value
        if security.sasl_mechanism is SaslMechanism.OAUTHBEARER and security.oauth is not None:
            options.update(_oauth_options(security.oauth, secrets))
        else:
            assert security.password is not None
            password = secrets.text(
                "PASSWORD", "SASL password", security.password.get_secret_value()
            )
            username = _jaas_quoted(security.username or "")
            options["kafka.sasl.jaas.config"] = (
                f"{_LOGIN[security.sasl_mechanism]} required "
                f"username={username} password={_jaas_quoted(password)};"
            )
    if security.protocol in (Protocol.SSL, Protocol.SASL_SSL):
        if security.ssl_ca_location:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = security.ssl_ca_location
        if security.ssl_certificate_location and security.ssl_key_location:
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = Path(
                security.ssl_certificate_location
            ).read_text()
            options["kafka.ssl.keystore.key"] = secrets.text(
                "SSL_KEY",
                f"private key (PEM, the contents of {security.ssl_key_location})",
                Path(security.ssl_key_location).read_text(),
            )
            if security.ssl_key_password:
                options["kafka.ssl.key.password"] = secrets.text(
                    "SSL_KEY_PASSWORD", "private key password",
                    security.ssl_key_password.get_secret_value(),
                )  # fmt: skip
        if not security.ssl_endpoint_identification:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
    return options


def build_spec(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: list[str] | None = None,
    loss_events: Sequence[LossEvent] = (),
    positions: Mapping[str, Mapping[TopicPartition, int]] | None = None,
    secrets_by_name: bool = False,
    keys: Callable[[str], bytes] | None = None,
    *,
    connect: AdminFactory,
) -> Spec:
    """Snapshot the ranges to check (log start to last stable offset, now), the groups'
    positions and the records lost before replication (``loss_events``: the flow's recorded
    ones, plus any verify finds itself; drkit/accounting/losses.py).

    ``positions`` gives a group's T per replica partition to judge instead of its live commit
    on the target: a cutover checks what it committed, while the group may already be
    consuming there.  ``secrets_by_name``: name the clusters' secrets (a spec to write to
    disk, see :class:`Secrets`) instead of holding them.  ``keys``: each flow's offset-sync
    key (drkit/store/flow_keys.py), for the groups' translation; None verifies no sync.
    ``connect``: how it reaches both clusters (drkit.kafka.ports) - no default, every caller
    passes one.

    Raises AccountingError when there is nothing to check: no selected source partition holds
    a record and nothing was lost.
    """
    topology = FlowTopology.of(flow)
    source = connect(ClusterEndpoint(flow.source, config.clusters[flow.source]))
    target_endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    target = connect(target_endpoint)
    try:
        source.wait_ready(timeout_s=10)
    except UnreachableClusterError as err:
        raise KafkaError(
            f"{err}: accounting compares the source records with their replicas, so it needs "
            "the source (use 'drkit offsets translate' for the checkpoint view)"
        ) from None
    target.wait_ready(timeout_s=10)
    chosen = _chosen_topics(topology, source.list_topics(), topics)
    partitions = _partitions(topology, chosen, source, target)
    lost = lost_before_replication(
        # Every recorded loss of the flow counts, unless --topics narrowed the check.
        [e for e in loss_events if not topics or e.source.topic in chosen],
        _progress(topology, target_endpoint),
        {TopicPartition(p["source_topic"], p["partition"]): p["source_start"] for p in partitions},
        source.topic_ids(chosen),
    )
    source_secrets, target_secrets = (
        (Secrets("source", flow.source), Secrets("target", flow.target))
        if secrets_by_name
        else (Secrets(), Secrets())
    )
    if not lost and not any(p["source_end"] > p["source_start"] for p in partitions):
        selected = ", ".join(chosen) or "none"
        raise AccountingError(
            f"flow {flow.name}: nothing to check - no selected topic has records on "
            f"{flow.source} (topics selected: {selected})"
        )
    return {
        "flow": flow.name,
        "source_alias": flow.source,
        # Cluster ids, as in drkit-origin (an alias only if a broker reports no id).
        "source_cluster_id": source.describe_cluster()[0] or flow.source,
        "target_cluster_id": target.describe_cluster()[0] or flow.target,
        "offset_syncs_topic": topology.offset_syncs_topic,
        "checkpoints_topic": topology.checkpoints_topic,
        "source_options": spark_kafka_options(config.clusters[flow.source], source_secrets),
        "target_options": spark_kafka_options(config.clusters[flow.target], target_secrets),
        "partitions": partitions,
        "groups": _group_positions(
            config, flow, groups, set(chosen), target, positions or {}, keys, connect
        ),
        "filters": filter_rules(flow),
        "notes": notes(flow),
        "lost_before_replication": [loss.as_record() for loss in lost],
        "secret_env": {**source_secrets.named, **target_secrets.named},
    }


def _chosen_topics(
    topology: FlowTopology, listed: Iterable[str], topics: list[str] | None
) -> list[str]:
    """The source topics to check: the flow's (heartbeats aside), narrowed by ``--topics``."""
    chosen = sorted(
        name
        for name in listed
        if topology.selects(name)
        and name != topology.heartbeats_topic
        and (not topics or name in topics)
    )
    unknown = sorted(set(topics or ()) - set(chosen))
    if unknown:
        raise ConfigError(
            [Problem("--topics", f"not replicated by {topology.name}: {', '.join(unknown)}")]
        )
    return chosen


def _partitions(
    topology: FlowTopology, chosen: list[str], source: ClusterAdmin, target: ClusterAdmin
) -> list[PartitionSpec]:
    """Per source partition of ``chosen``: its range and every partition of its replica."""
    on_target = target.list_topics()
    replica_ranges: dict[str, dict[str, list[int]]] = {}
    for name in sorted({topology.target_topic(t) for t in chosen}):
        if name in on_target:
            bounds = target.topic_offsets(name, isolation=_COMMITTED)
            replica_ranges[name] = {f"{name}:{p}": list(r) for p, r in sorted(bounds.items())}
    partitions: list[PartitionSpec] = []
    for name in chosen:
        replica = topology.target_topic(name)
        bounds = source.topic_offsets(name, isolation=_COMMITTED)
        for partition, (start, end) in sorted(bounds.items()):
            partitions.append(
                {
                    "source_topic": name,
                    "partition": partition,
                    "source_start": start,
                    "source_end": end,
                    "target_topic": replica,
                    "target_ranges": replica_ranges.get(replica, {}),
                }
            )
    return partitions


def _progress(topology: FlowTopology, target: ClusterEndpoint) -> dict[TopicPartition, int]:
    """The flow's stored replication progress (next source offset) per source partition."""
    store = ProgressStore(target, topology.progress_topic, missing_ok=True)
    try:
        return {tp: progress.next_offset for tp, progress in store.refresh().items()}
    finally:
        store.close()


def filter_rules(flow: FlowConfig) -> list[dict[str, Any]]:
    """The flow's filter rules: records they drop are ``filtered``, not missing."""
    return [dict(t.options) for t in flow.transforms if t.type == "filter"]


def notes(flow: FlowConfig) -> list[str]:
    """Caveats of the check.  Built-in transforms other than ``filter`` never drop records; a
    plugin might, and what it drops cannot be told from the data, so it is named."""
    plugins = sorted({t.type for t in flow.transforms if t.type not in BUILTIN_TYPES})
    if not plugins:
        return []
    return [
        f"flow {flow.name} has plugin transforms ({', '.join(plugins)}): records they "
        "drop are reported as missing"
    ]


def _group_positions(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: set[str],
    target: ClusterAdmin,
    given: Mapping[str, Mapping[TopicPartition, int]],
    keys: Callable[[str], bytes] | None,
    connect: AdminFactory,
) -> list[GroupSpec]:
    """Per group and partition: S on the source and T on the target - ``given`` (what a run
    committed), else the group's own commit there if it has one (it already moved), else
    drkit's translation."""
    if not groups:
        return []
    report = translate_groups(config, flow, groups, keys=keys, connect=connect)
    committed_on_target = target.groups_offsets(groups)
    positions: list[GroupSpec] = []
    for group, rows in report.groups.items():
        own = committed_on_target.get(group)
        for row in rows:
            if row.source_topic not in topics:
                continue
            replica_tp = TopicPartition(row.target_topic, row.target_partition)
            committed = own.offsets.get(replica_tp) if own is not None else None
            if group in given and replica_tp in given[group]:
                committed = given[group][replica_tp]
            positions.append(
                {
                    "group": group,
                    "source_topic": row.source_topic,
                    "partition": row.source_partition,
                    "target_topic": row.target_topic,
                    "source_offset": row.source_offset,
                    "target_offset": committed if committed is not None else row.target_offset,
                    "target_kind": "target-commit" if committed is not None else "translated",
                }
            )
    return positions


def write_spec(spec: Spec, path: Path) -> None:
    """Write ``spec`` for spark-submit: created with mode 0600 (build it with
    ``secrets_by_name``: it then names the clusters' secrets and holds none).

    The file is written next to its final name and renamed, so a reader never sees half a spec.
    """
    write_private(path, json.dumps(spec, indent=1))


def submit_command(
    spec_path: Path,
    out: str,
    archive: Path,
    per_record: bool = False,
    properties: Mapping[str, str] | None = None,
) -> list[str]:
    """The spark-submit command line that runs the job for ``spec_path`` on a cluster.

    ``--packages`` resolves Spark's own Kafka connector matching the installed pyspark;
    ``--py-files`` ships the job's stages (``archive``, from session.job_archive);
    ``properties`` (jvm_properties) go to the driver's and the executors' JVMs.  Add
    ``--master`` and the cluster's deploy options in front of the job file.
    """
    import pyspark

    from drkit.accounting.session import job_file

    package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    confs: list[str] = []
    if properties:
        for side in ("driver", "executor"):
            confs += ["--conf", f"spark.{side}.extraJavaOptions={java_options(properties)}"]
    return [
        "spark-submit",
        "--packages",
        package,
        *confs,
        "--py-files",
        str(archive),
        str(job_file()),
        "--spec",
        str(spec_path),
        "--out",
        out,
        *(["--per-record"] if per_record else []),
    ]
