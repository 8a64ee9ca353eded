"""Spark's Kafka source gets the same cluster settings as drkit's own clients."""

from __future__ import annotations

from drkit.accounting.spec import spark_kafka_options
from drkit.config import load_config_text


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


def test_plaintext_needs_only_the_servers() -> None:
    config = load_config_text("clusters: {dc1: {bootstrap_servers: 'k1:9092'}}\n", env={})
    assert spark_kafka_options(config.clusters["dc1"]) == {
        "kafka.bootstrap.servers": "k1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
