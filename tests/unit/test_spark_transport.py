"""A Spark cluster on another host gets the job's Kafka credentials (issue 46, low): drkit
warns unless Spark's own authentication and RPC encryption are on (set in
``$SPARK_CONF_DIR/spark-defaults.conf``, which the driver drkit starts reads)."""

from __future__ import annotations

from drkit.accounting.session import transport_warning

SECURED = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}


def test_a_remote_master_without_authentication_or_encryption_is_warned_about() -> None:
    said = transport_warning("spark://spark.example:7077", {})
    assert said is not None
    assert "spark.authenticate, spark.network.crypto.enabled" in said
    assert "spark-defaults.conf" in said
    only_auth = transport_warning("spark://10.0.0.5:7077", {"spark.authenticate": "true"})
    assert only_auth is not None and "spark.network.crypto.enabled" in only_auth
    assert "spark.authenticate," not in only_auth


def test_a_secured_remote_master_local_spark_and_loopback_masters_are_not() -> None:
    assert transport_warning("spark://spark.example:7077", SECURED) is None
    assert transport_warning("spark://spark.example:7077", dict.fromkeys(SECURED, "TRUE")) is None
    assert transport_warning(None, {}) is None
    assert transport_warning("local[2]", {}) is None
    assert transport_warning("spark://127.0.0.1:7077", {}) is None
    assert transport_warning("spark://localhost:7077,[::1]:7078", {}) is None


def test_standby_masters_count_if_any_is_remote() -> None:
    assert transport_warning("spark://127.0.0.1:7077,spark.example:7077", {}) is not None
