"""Spark's Kafka source gets the same cluster settings as drkit's own clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.accounting.sparkjob.rules import dropped_by_filters
from drkit.accounting.sparkjob.secrets import MissingSecret, fill_secrets
from drkit.accounting.spec import Secrets, filter_rules, notes, spark_kafka_options
from drkit.accounting.verify import spark_failure
from drkit.config import load_config_text
from drkit.config.model import FlowConfig, TransformConfig
from drkit.errors import AccountingError
from drkit.topology.transforms import OutRecord, build_chain


def test_sasl_scram_and_tls_map_to_java_client_options() -> None:
    config = load_config_text(
        """
clusters:
  dc1:
    bootstrap_servers: "k1:9093"
    security: {protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, username: drkit,
               password: "${PW}", ssl_ca_location: /etc/ca.pem,
               ssl_endpoint_identification: false}
""",
        env={"PW": 'p"w'},
    )
    options = spark_kafka_options(config.clusters["dc1"])
    assert options["kafka.bootstrap.servers"] == "k1:9093"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="drkit" password="p\\"w";'
    )
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""


def test_a_written_spec_names_every_secret_and_the_job_fills_them_back_exactly(
    tmp_path: Path,
) -> None:
    """--write-spec: passwords, OAuth client secrets and private keys become ${DRKIT_...}
    placeholders; the job, given them in its environment, gets the very options an in-process
    run uses (quotes and backslashes escaped where a JAAS string needs it); one missing is an
    error naming it and what it is."""
    key = tmp_path / "client.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n")
    (tmp_path / "client.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    config = load_config_text(
        f"""
clusters:
  dc1:
    bootstrap_servers: "k1:9093"
    security: {{protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, username: drkit,
               password: "${{PW}}", ssl_certificate_location: {tmp_path}/client.pem,
               ssl_key_location: {key}, ssl_key_password: "${{KP}}"}}
""",
        env={"PW": 'p"w\\x', "KP": "k3y"},
    )
    cluster = config.clusters["dc1"]
    inline = spark_kafka_options(cluster)
    named = Secrets("source", "dc1")
    options = spark_kafka_options(cluster, named)
    written = json.dumps(options)
    for secret in ('p\\"w', "k3y", "abc"):
        assert secret not in written
    assert set(named.named) == {
        "DRKIT_SOURCE_PASSWORD", "DRKIT_SOURCE_SSL_KEY", "DRKIT_SOURCE_SSL_KEY_PASSWORD",
    }  # fmt: skip
    assert "dc1" in named.named["DRKIT_SOURCE_PASSWORD"]
    spec: Any = {"source_options": options, "target_options": {}, "secret_env": named.named}
    environ = {
        "DRKIT_SOURCE_PASSWORD": 'p"w\\x',
        "DRKIT_SOURCE_SSL_KEY": key.read_text(),
        "DRKIT_SOURCE_SSL_KEY_PASSWORD": "k3y",
    }
    assert fill_secrets(spec, environ)["source_options"] == inline
    with pytest.raises(
        MissingSecret, match=r"DRKIT_SOURCE_SSL_KEY_PASSWORD .*private key password"
    ):
        fill_secrets(spec, {**environ, "DRKIT_SOURCE_SSL_KEY_PASSWORD": ""})
    # A spec written before secrets were named holds them inline: unchanged.
    old: Any = {"source_options": inline, "target_options": {}}
    assert fill_secrets(old, {}) == old


def test_plaintext_needs_only_the_servers() -> None:
    config = load_config_text("clusters: {dc1: {bootstrap_servers: 'k1:9092'}}\n", env={})
    assert spark_kafka_options(config.clusters["dc1"]) == {
        "kafka.bootstrap.servers": "k1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }


_RULES = [
    {"key_regex": "^test-"},
    {"key_regex": "a+", "action": "keep"},
    {"header": "env", "header_regex": "^prod$", "action": "keep"},
    {"header": "trace"},
    {"key_regex": "b", "header": "env", "header_regex": "t"},
]
_keys = st.one_of(st.none(), st.binary(max_size=6), st.sampled_from([b"test-1", b"aa", b"b"]))
_headers = st.lists(
    st.tuples(
        st.sampled_from(["env", "trace", "other"]),
        st.one_of(st.none(), st.sampled_from([b"prod", b"test", b"t", b""])),
    ),
    max_size=3,
)


@given(rules=st.lists(st.sampled_from(_RULES), max_size=3), key=_keys, headers=_headers)
def test_the_jobs_filter_rule_drops_exactly_what_the_replicator_drops(
    rules: list[dict[str, Any]], key: bytes | None, headers: list[tuple[str, bytes | None]]
) -> None:
    chain = build_chain([TransformConfig(type="filter", options=rule) for rule in rules])
    dropped_by_worker = chain.apply(OutRecord(key, b"v", tuple(headers))) is None
    assert dropped_by_filters(rules, key, headers) is dropped_by_worker


def test_plugin_transforms_are_named_in_the_notes_and_filters_are_carried() -> None:
    # A flow as loaded with a plugin installed (the loader checks that plugins exist).
    flow = FlowConfig(
        source="dc1",
        target="dc2",
        transforms=(
            TransformConfig(type="filter", options={"key_regex": "^x"}),
            TransformConfig(type="mask_json_fields", options={"fields": ["card"]}),
            TransformConfig(type="my_dedupe"),
        ),
    )
    assert filter_rules(flow) == [{"key_regex": "^x"}]
    assert notes(flow) == [
        "flow dc1->dc2 has plugin transforms (my_dedupe): records they drop are reported as missing"
    ]


def test_a_failed_spark_job_is_reported_by_its_root_cause() -> None:
    flow = FlowConfig(source="dc1", target="dc2")
    py4j = Exception(
        "An error occurred while calling o97.parquet.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(...)\n"
        "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms "
        "expired before the position for partition orders-3 could be determined\n"
        "\tat org.apache.kafka.clients.consumer.internals.Fetcher.position(...)\n"
    )
    error = spark_failure(flow, Path("/tmp/out"), py4j)
    assert isinstance(error, AccountingError)
    assert str(error).startswith(
        "flow dc1->dc2: the Spark accounting job failed: org.apache.kafka.common.errors."
        "TimeoutException: Timeout of 60000ms expired before the position for partition "
        "orders-3 could be determined. Nothing was recorded"
    )
    assert "\n" not in str(error)
    plain = spark_failure(flow, Path("/tmp/out"), SystemExit("nothing to check: empty"))
    assert "failed: nothing to check: empty." in str(plain)


def test_the_py_files_archive_holds_everything_the_job_imports(tmp_path: Path) -> None:
    """Without site-packages (-S: no drkit, no pyspark), the job file and every stage import
    from the archive alone - what spark-submit on a cluster without drkit relies on."""
    import subprocess
    import sys
    import zipfile

    from drkit.accounting.session import job_archive, job_file

    archive = job_archive(tmp_path)
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"drkit/__init__.py", "drkit/accounting/__init__.py"} <= names
    assert "drkit/accounting/sparkjob/read.py" in names
    assert not any(n.startswith(("drkit/kafka", "drkit/config")) for n in names)
    probe = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); "
        "job = runpy.run_path(sys.argv[2]); "
        "import drkit.accounting.sparkjob.read as read; "
        "assert read.__file__.startswith(sys.argv[1]), read.__file__; "
        "print(job['SCHEMA'])"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(archive), str(job_file())],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "drkit.verify/v2"


def test_the_cli_names_every_lost_range_and_unmapped_replica_set() -> None:
    from drkit.cli.verify_cmd import _problems

    summary: Any = {
        "partitions": [
            {"src_topic": "orders", "src_partition": 3, "missing": 0, "duplicated_records": 0,
             "order_violations": 0, "unmapped_replicas": 5},
        ],
        "lost_before_replication": [
            {"src_topic": "orders", "src_partition": 1, "records": 1600, "recorded": 0,
             "unrecorded": 1600, "reasons": ["unrecorded"],
             "ranges": [{"from_offset": 400, "to_offset": 1999, "records": 1600}]},
        ],
        "unmapped": [
            {"src_topic": "orders", "src_partition": 3, "dst_topic": "dc1.orders",
             "dst_partition": 4, "replicas": 5, "first_src_offset": 10, "last_src_offset": 14},
        ],
        "missing_ranges": [],
    }  # fmt: skip
    lines = _problems(summary)
    (lost,) = [line for line in lines if "orders-1" in line]
    assert "1600" in lost and "400..1999" in lost
    (unmapped,) = [line for line in lines if "dc1.orders-4" in line]
    assert "5" in unmapped and "orders-3" in unmapped and "10..14" in unmapped
    assert "unmapped 5" in next(line for line in lines if line.startswith("orders-3"))
