"""What a verification run checks, gathered with drkit's Kafka adapter (small metadata only).

The spec is plain JSON so the same job runs in-process (``drkit verify``) or under
``spark-submit``.  It may contain secrets (SASL passwords for the Kafka source): written to disk
only for spark-submit, with mode 0600.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from drkit.config.model import ClusterConfig, DrkitConfig, FlowConfig, SaslMechanism
from drkit.config.model import SecurityProtocol as Protocol
from drkit.errors import (
    AccountingError,
    ConfigError,
    KafkaError,
    Problem,
    UnreachableClusterError,
)
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.offsets.lookup import translate_groups
from drkit.offsets.mapping_loader import MappingLoader
from drkit.replication import internal_topics
from drkit.replication.policy import build_policy
from drkit.replication.topic_filter import TopicFilter
from drkit.replication.transforms import BUILTIN_TYPES

_LOGIN = {
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def spark_kafka_options(cluster: ClusterConfig) -> dict[str, str]:
    """Options for Spark's Kafka source (Java client names) from drkit's cluster config."""
    security = cluster.security
    options = {
        "kafka.bootstrap.servers": cluster.bootstrap_servers,
        "kafka.security.protocol": security.protocol.value,
    }
    if security.protocol in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL):
        assert security.sasl_mechanism is not None and security.password is not None
        password = security.password.get_secret_value().replace('"', '\\"')
        options["kafka.sasl.mechanism"] = security.sasl_mechanism.value
        options["kafka.sasl.jaas.config"] = (
            f'{_LOGIN[security.sasl_mechanism]} required username="{security.username}" '
            f'password="{password}";'
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
            options["kafka.ssl.keystore.key"] = Path(security.ssl_key_location).read_text()
            if security.ssl_key_password:
                options["kafka.ssl.key.password"] = security.ssl_key_password.get_secret_value()
        if not security.ssl_endpoint_identification:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
    return options


def build_spec(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    topics: list[str] | None = None,
) -> dict[str, Any]:
    """Snapshot the ranges to check (end offsets now) and the groups' positions."""
    source = KafkaAdmin(ClusterEndpoint(flow.source, config.clusters[flow.source]))
    target_endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    target = KafkaAdmin(target_endpoint)
    try:
        source.wait_ready(timeout_s=10)
    except UnreachableClusterError as err:
        raise KafkaError(
            f"{err}: accounting compares the source records with their replicas, so it needs "
            "the source (use 'drkit offsets translate' for the checkpoint view)"
        ) from None
    target.wait_ready(timeout_s=10)
    selects = TopicFilter.of(flow, build_policy(flow.replication_policy)).selects
    listed = source.list_topics()
    chosen = sorted(
        name
        for name in listed
        if selects(name) and name != internal_topics.HEARTBEATS and (not topics or name in topics)
    )
    if topics:
        unknown = sorted(set(topics) - set(chosen))
        if unknown:
            raise ConfigError(
                [Problem("--topics", f"not replicated by {flow.name}: {', '.join(unknown)}")]
            )
    loader = MappingLoader(flow, target_endpoint)
    try:
        replica = {name: loader.target_of(TopicPartition(name, 0)).topic for name in chosen}
    finally:
        loader.close()
    on_target = target.list_topics()
    target_ranges: dict[str, dict[int, tuple[int, int]]] = {}
    for name in set(replica.values()):
        if name in on_target:
            target_ranges[name] = target.topic_offsets(name)
    partitions = []
    records_to_check = 0
    for name in chosen:
        ranges = {
            f"{replica[name]}:{p}": list(bounds)
            for p, bounds in target_ranges.get(replica[name], {}).items()
        }
        for partition, (start, end) in sorted(source.topic_offsets(name).items()):
            records_to_check += end - start
            partitions.append(
                {
                    "source_topic": name,
                    "partition": partition,
                    "source_start": start,
                    "source_end": end,
                    "target_topic": replica[name],
                    "target_ranges": ranges,
                }
            )
    if not records_to_check:
        selected = ", ".join(chosen) or "none"
        raise AccountingError(
            f"flow {flow.name}: nothing to check - no selected topic has records on "
            f"{flow.source} (topics selected: {selected})"
        )
    return {
        "flow": flow.name,
        "source_alias": flow.source,
        "target_cluster_id": target.describe_cluster()[0] or flow.target,
        "offset_syncs_topic": internal_topics.offset_syncs_topic(flow.source),
        "checkpoints_topic": internal_topics.checkpoints_topic(flow.source),
        "source_options": spark_kafka_options(config.clusters[flow.source]),
        "target_options": spark_kafka_options(config.clusters[flow.target]),
        "partitions": partitions,
        "groups": _group_positions(config, flow, groups, set(chosen), target),
        **_filters(flow),
    }


def _filters(flow: FlowConfig) -> dict[str, Any]:
    """The flow's filter rules (records they drop are not missing) and caveats for the rest.

    Built-in transforms other than ``filter`` never drop records; a plugin might, and what it
    drops cannot be told from the data, so it is named in the summary's notes.
    """
    plugins = sorted({t.type for t in flow.transforms if t.type not in BUILTIN_TYPES})
    notes = (
        [
            f"flow {flow.name} has plugin transforms ({', '.join(plugins)}): records they "
            "drop are reported as missing"
        ]
        if plugins
        else []
    )
    return {
        "filters": [dict(t.options) for t in flow.transforms if t.type == "filter"],
        "notes": notes,
    }


def _group_positions(
    config: DrkitConfig, flow: FlowConfig, groups: list[str], topics: set[str], target: KafkaAdmin
) -> list[dict[str, Any]]:
    """Per group and partition: S on the source and T on the target - the group's own commit
    there if it has one (it already moved), else drkit's translation."""
    if not groups:
        return []
    report = translate_groups(config, flow, groups)
    committed_on_target = target.groups_offsets(groups)
    positions = []
    for group, rows in report.groups.items():
        own = committed_on_target.get(group)
        for row in rows:
            if row.source_topic not in topics:
                continue
            replica_tp = TopicPartition(row.target_topic, row.target_partition)
            committed = own.offsets.get(replica_tp) if own is not None else None
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


def write_spec(spec: dict[str, Any], path: Path) -> None:
    """Write ``spec`` for spark-submit: created with mode 0600 (it may hold SASL secrets).

    The file is written next to its final name and renamed, so a reader never sees half a spec.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(spec, handle, indent=1)
    partial.replace(path)


def submit_command(spec_path: Path, out: str) -> list[str]:
    """The spark-submit command line that runs the job for ``spec_path`` on a cluster.

    ``--packages`` resolves Spark's own Kafka connector matching the installed pyspark; add
    ``--master`` and the cluster's deploy options in front of the job file.
    """
    import pyspark

    from drkit.accounting.session import job_file

    package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    return [
        "spark-submit",
        "--packages",
        package,
        str(job_file()),
        "--spec",
        str(spec_path),
        "--out",
        out,
    ]
