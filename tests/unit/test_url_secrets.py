"""Security review 6, M4: secrets in free strings - a credential in the OAuth token
endpoint's query (``?client_secret=``), OAuth SASL extension values (some providers put API
keys there) and the OTLP endpoint's user info or ``?token=`` - printed in ``config show``,
unwarned by ``config validate``, copied by drills, and put on the Spark JVMs' command line.

Distinctive values, looked for in everything drkit shows or hands on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from click.testing import CliRunner

from drkit.accounting.sparkjob.schema import Spec
from drkit.accounting.spec import (
    ALLOWED_OAUTH_URLS,
    java_options,
    jvm_properties,
    spark_kafka_options,
    submit_command,
)
from drkit.cli import cli
from drkit.config import load_config_text
from drkit.config.secrets import literal_secrets, mask_url, redacted_dump
from drkit.errors import ConfigError

TOKEN_QUERY = "qsecret-5d1e"
EXTENSION = "extsecret-8a2c"
OTLP_QUERY = "otlpq-3b7f"
OTLP_PASSWORD = "otlppw-9c4d"
DISTINCT = (TOKEN_QUERY, EXTENSION, OTLP_QUERY, OTLP_PASSWORD)
TOKEN_URL = f"https://idp.example.com/oauth2/token?audience=kafka&client_secret={TOKEN_QUERY}"


def _document(otlp: str = f"https://collector:4318/v1/traces?token={OTLP_QUERY}") -> dict[str, Any]:
    oauth = {"token_endpoint_url": TOKEN_URL, "client_id": "drkit",
             "client_secret": "${OAUTH_SECRET}",
             "extensions": {"logicalCluster": "lkc-1", "apikey": EXTENSION}}  # fmt: skip
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": oauth}
    return {
        "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1", "security": security},
                     "dc2": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "dc1", "target": "dc2"}],
        "tracing": {"otlp_endpoint": otlp},
    }  # fmt: skip


def test_a_url_keeps_its_scheme_host_and_path_and_loses_its_credentials() -> None:
    assert mask_url(TOKEN_URL) == (
        "https://idp.example.com/oauth2/token?audience=kafka&client_secret=**********"
    )
    assert mask_url("https://u:pw@host:4318/v1/traces?api_key=k&x=1") == (
        "https://**********@host:4318/v1/traces?api_key=**********&x=1"
    )
    assert mask_url("https://idp/token") == "https://idp/token"
    assert mask_url("https://idp/token?access_token") == "https://idp/token?access_token"


def test_config_show_masks_the_token_query_the_extensions_and_the_otlp_token(
    tmp_path: Path,
) -> None:
    path = tmp_path / "drkit.yaml"
    path.write_text(yaml.safe_dump(_document()))
    env = {"OAUTH_SECRET": "env-secret-1"}
    for output in ("text", "json"):
        shown = CliRunner().invoke(cli, ["config", "show", "--config", str(path), "-o", output],
                                   env=env)  # fmt: skip
        assert shown.exit_code == 0, shown.output
        for value in DISTINCT:
            assert value not in shown.output, (value, shown.output)
    data = redacted_dump(load_config_text(yaml.safe_dump(_document()), env=env))
    oauth = data["clusters"]["dc1"]["security"]["oauth"]
    assert oauth["token_endpoint_url"].startswith("https://idp.example.com/oauth2/token?")
    assert oauth["extensions"] == {"logicalCluster": "**********", "apikey": "**********"}
    assert data["tracing"]["otlp_endpoint"] == "https://collector:4318/v1/traces?token=**********"


def test_validate_warns_and_a_drill_refuses_each_literal_one(tmp_path: Path) -> None:
    document = _document()
    found = literal_secrets(document["clusters"], "clusters") + literal_secrets(
        document["tracing"], "tracing"
    )
    assert sorted(found) == [
        "clusters.dc1.security.oauth.extensions.apikey",
        "clusters.dc1.security.oauth.token_endpoint_url",
        "tracing.otlp_endpoint",
    ]
    path = tmp_path / "drkit.yaml"
    path.write_text(yaml.safe_dump(document))
    done = CliRunner().invoke(cli, ["config", "validate", str(path)], env={"OAUTH_SECRET": "x"})
    assert done.exit_code == 0, done.output
    for where in found:
        assert f"warning: {where} is a literal secret" in done.output, done.output
    assert not any(value in done.output for value in DISTINCT)
    # As references they are fine.
    referenced = _document(otlp="https://collector:4318/v1/traces?token=${OTLP_TOKEN}")
    referenced["clusters"]["dc1"]["security"]["oauth"].update(
        token_endpoint_url="https://idp/token?client_secret=${Q}", extensions={"apikey": "${K}"}
    )
    assert literal_secrets(referenced["clusters"], "clusters") == []
    assert literal_secrets(referenced["tracing"], "tracing") == []

    from drkit.drills.environment import refuse_literal_secrets

    with pytest.raises(ConfigError) as refused:
        refuse_literal_secrets(document["clusters"])
    assert "token_endpoint_url" in str(refused.value) and "extensions.apikey" in str(refused.value)
    assert not any(value in str(refused.value) for value in DISTINCT)


def test_user_info_in_the_otlp_endpoint_is_refused_without_echoing_it() -> None:
    text = yaml.safe_dump(_document(otlp=f"https://u:{OTLP_PASSWORD}@collector:4318/v1/traces"))
    with pytest.raises(ConfigError) as refused:
        load_config_text(text, env={"OAUTH_SECRET": "x"})
    assert "tracing.otlp_endpoint" in str(refused.value) and "user" in str(refused.value)
    assert OTLP_PASSWORD not in str(refused.value)


def test_the_spark_command_line_never_holds_the_token_query() -> None:
    """Kafka's Java client fetches only the OAuth URLs the JVM property allows, by exact
    match: the allowed URL goes to the JVMs' command line (``ps`` shows it to every local
    user), so a token URL with a credential in its query is allowed from inside the driver's
    JVM instead (local masters) - and refused for a spark-submit command line."""
    from drkit.accounting.spec import in_jvm_properties, refuse_command_line_secrets

    config = load_config_text(yaml.safe_dump(_document()), env={"OAUTH_SECRET": "x"})
    options = spark_kafka_options(config.clusters["dc1"])
    plain = {"kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "PLAINTEXT"}
    spec = cast(Spec, {"source_options": options, "target_options": plain})
    properties = jvm_properties(spec)
    assert ALLOWED_OAUTH_URLS not in properties and TOKEN_QUERY not in java_options(properties)
    command = submit_command(Path("spec.json"), "out", Path("job.zip"), properties=properties)
    assert not any(TOKEN_QUERY in part for part in command)
    assert in_jvm_properties(spec) == {ALLOWED_OAUTH_URLS: TOKEN_URL}  # set in the JVM itself
    with pytest.raises(ConfigError) as refused:
        refuse_command_line_secrets(spec)
    assert "token_endpoint_url" in str(refused.value) and TOKEN_QUERY not in str(refused.value)
    both = cast(Spec, {"source_options": options,
                       "target_options": spark_kafka_options(_plain_oauth())})  # fmt: skip
    assert jvm_properties(both) == {ALLOWED_OAUTH_URLS: "https://idp.example/token"}
    assert in_jvm_properties(both) == {ALLOWED_OAUTH_URLS: f"{TOKEN_URL},https://idp.example/token"}
    refuse_command_line_secrets(cast(Spec, {"source_options": plain, "target_options": plain}))


def _plain_oauth() -> Any:
    document = _document()
    document["clusters"]["dc1"]["security"]["oauth"].update(
        token_endpoint_url="https://idp.example/token", extensions={}
    )
    return load_config_text(yaml.safe_dump(document), env={"OAUTH_SECRET": "x"}).clusters["dc1"]


@pytest.mark.parametrize(
    "server",
    [
        "admin:{pw}@broker1:9092",  # security review 12, N3: echoed whole
        "admin:{pw}@[::1]:9092",
        "sasl_ssl://admin:{pw}@broker1:9092",
        "broker0:9092, admin:{pw}@broker1:9092",
        "{pw}@broker1",
        "admin:{pw}@broker1:9092;broker2:9092",
        "admin:{pw}@broker1:9092,",
        "broker1:9092?password={pw}",  # review 12's own run: a query credential, echoed too
        "broker1?token={pw}:9092",
        "sasl_ssl://broker1:9092?api_key={pw}",
    ],
)
def test_user_info_in_a_bootstrap_server_is_refused_without_echoing_it(
    server: str, tmp_path: Path
) -> None:
    """Security review 12, N3: ``HostPort.parse`` put the text into its error, so
    ``config validate`` printed ``'admin:PASSWORD@broker1:9092': write an IPv6 address in
    brackets, ...``.  Kafka has no user-info syntax: the value is refused, its user info
    masked."""
    password = "bootpw-7e1a"
    document = _document()
    document["clusters"]["dc2"]["bootstrap_servers"] = server.format(pw=password)
    with pytest.raises(ConfigError) as refused:
        load_config_text(yaml.safe_dump(document), env={"OAUTH_SECRET": "x"})
    assert "clusters.dc2.bootstrap_servers" in str(refused.value), str(refused.value)
    assert password not in str(refused.value), str(refused.value)
    path = tmp_path / "drkit.yaml"
    path.write_text(yaml.safe_dump(document))
    done = CliRunner().invoke(cli, ["config", "validate", str(path)], env={"OAUTH_SECRET": "x"})
    assert done.exit_code != 0
    assert "bootstrap_servers" in done.output and password not in done.output, done.output
