"""SASL/OAUTHBEARER with OIDC client credentials: the config, librdkafka's settings and the
Spark job's Java client options - and the client secret kept out of everything shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from pydantic import ValidationError

from drkit.accounting.sparkjob.schema import Spec
from drkit.accounting.spec import (
    ALLOWED_OAUTH_URLS,
    jvm_properties,
    spark_kafka_options,
    submit_command,
)
from drkit.config.model import ClusterConfig, DrkitConfig, Role
from drkit.config.secrets import redacted_dump
from drkit.kafka import ClusterEndpoint
from drkit.kafka.clients import client_settings
from drkit.local.secure import OidcValidation, oauthbearer_settings

SECRET = 's3cr3t-"quoted"-value'


def _cluster(**oauth: object) -> ClusterConfig:
    return ClusterConfig.model_validate(_raw(**oauth))


def _raw(**oauth: object) -> dict[str, object]:
    return {
        "bootstrap_servers": "kafka:9093",
        "security": {
            "protocol": "SASL_SSL",
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": {
                "token_endpoint_url": "https://idp.example/oauth2/token",
                "client_id": "drkit-replicator",
                "client_secret": SECRET,
                **oauth,
            },
        },
    }


def test_librdkafka_gets_its_oidc_method_and_no_username() -> None:
    settings = client_settings(ClusterEndpoint("dc1", _cluster(scope="kafka", extensions={
        "logicalCluster": "lkc-1", "identityPoolId": "pool-2"})))  # fmt: skip
    assert settings["sasl.mechanism"] == "OAUTHBEARER"
    assert settings["sasl.oauthbearer.method"] == "oidc"
    assert settings["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/oauth2/token"
    assert settings["sasl.oauthbearer.client.id"] == "drkit-replicator"
    assert settings["sasl.oauthbearer.client.secret"] == SECRET
    assert settings["sasl.oauthbearer.scope"] == "kafka"
    assert settings["sasl.oauthbearer.extensions"] == "identityPoolId=pool-2,logicalCluster=lkc-1"
    assert "sasl.username" not in settings and "sasl.password" not in settings


def test_the_spark_job_logs_in_with_the_java_clients_oidc_handler() -> None:
    options = spark_kafka_options(_cluster(scope="kafka"))
    assert options["kafka.sasl.mechanism"] == "OAUTHBEARER"
    assert options["kafka.sasl.login.callback.handler.class"].endswith(
        "oauthbearer.OAuthBearerLoginCallbackHandler"
    )
    assert options["kafka.sasl.oauthbearer.token.endpoint.url"].startswith("https://idp.example")
    jaas = options["kafka.sasl.jaas.config"]
    assert jaas.startswith("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule")
    assert 'clientId="drkit-replicator"' in jaas and 'scope="kafka"' in jaas
    assert 'clientSecret="s3cr3t-\\"quoted\\"-value"' in jaas and jaas.endswith(";")


def test_the_secret_can_live_in_a_file_and_is_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "client.secret"
    path.write_text(SECRET + "\n")
    cluster = _cluster(client_secret=None, client_secret_file=str(path))
    assert cluster.security.oauth is not None
    assert cluster.security.oauth.client_secret is not None
    assert cluster.security.oauth.client_secret.get_secret_value() == SECRET
    raw = _raw(client_secret=None, client_secret_file=str(path))
    shown = json.dumps(redacted_dump(DrkitConfig.model_validate({"clusters": {"dc1": raw}})))
    assert SECRET not in shown and "s3cr3t" not in repr(cluster)


def test_bad_oauth_settings_name_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match="needs an oauth section"):
        ClusterConfig.model_validate({"bootstrap_servers": "k:1", "security": {
            "protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}})  # fmt: skip
    with pytest.raises(ValidationError, match="client_secret"):
        _cluster(client_secret=None)
    with pytest.raises(ValidationError, match="token_endpoint_url"):
        _cluster(token_endpoint_url="idp.example/token")
    with pytest.raises(ValidationError, match=r"client_secret_file .* No such file"):
        _cluster(client_secret=None, client_secret_file="/nonexistent/secret")


def test_the_principal_of_an_oidc_client_is_its_client_id() -> None:
    assert _cluster().principal(Role.REPLICATOR) == "User:drkit-replicator"


def test_the_spark_jvms_may_fetch_the_token_endpoints_and_nothing_is_added_for_scram() -> None:
    """Kafka's Java client (3.9.1+) refuses an OAuth URL no JVM property allows."""
    oauth = spark_kafka_options(_cluster())
    plain = {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "PLAINTEXT"}
    spec = cast(Spec, {"source_options": oauth, "target_options": plain})
    properties = jvm_properties(spec)
    assert properties == {ALLOWED_OAUTH_URLS: "https://idp.example/oauth2/token"}
    command = submit_command(Path("spec.json"), "out", Path("job.zip"), properties=properties)
    allowed = f"-D{ALLOWED_OAUTH_URLS}=https://idp.example/oauth2/token"
    assert f"spark.driver.extraJavaOptions={allowed}" in command
    assert f"spark.executor.extraJavaOptions={allowed}" in command
    assert jvm_properties(cast(Spec, {"source_options": plain, "target_options": plain})) == {}


def test_a_local_cluster_validates_tokens_with_kafkas_own_validator() -> None:
    settings = oauthbearer_settings(OidcValidation("http://127.0.0.1:1/jwks", "kafka"))
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,OAUTHBEARER"
    handler = settings["listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"]
    assert handler.endswith("oauthbearer.OAuthBearerValidatorCallbackHandler")
    assert settings["sasl.oauthbearer.jwks.endpoint.url"] == "http://127.0.0.1:1/jwks"
    assert settings["sasl.oauthbearer.expected.audience"] == "kafka"
    assert "sasl.oauthbearer.expected.audience" not in oauthbearer_settings(
        OidcValidation("http://127.0.0.1:1/jwks")
    )
