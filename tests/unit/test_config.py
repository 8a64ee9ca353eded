"""The typed config model and loader: good files load, bad ones name every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.config import load_config, load_config_text
from drkit.config.model import NameFilter, SecurityProtocol
from drkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9092"}
  dc2: {bootstrap_servers: "127.0.0.1:9093"}
flows:
  - {source: dc1, target: dc2}
"""


def problems_of(text: str, env: dict[str, str] | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, env=env or {})
    return {p.path: p.reason for p in caught.value.problems}


def test_example_config_is_valid() -> None:
    config = load_config(REPO / "config" / "drkit.example.yaml", env={})
    assert set(config.clusters) == {"dc1", "dc2"}
    assert config.clusters["dc1"].security.protocol is SecurityProtocol.SASL_SSL
    assert config.flows[0].name == "dc1->dc2"
    assert config.health.observer_quorum == 2


def test_minimal_config_gets_defaults() -> None:
    config = load_config_text(MINIMAL, env={})
    flow = config.flow("dc1->dc2")
    assert flow.replication_policy.kind == "prefix"
    assert flow.topics.include == (".*",)
    assert config.failover.automatic is False
    assert config.state_store.url is None


def test_secret_is_resolved_from_env_and_never_rendered() -> None:
    text = MINIMAL.replace(
        '{bootstrap_servers: "127.0.0.1:9092"}',
        '{bootstrap_servers: "127.0.0.1:9092", security: {protocol: SASL_PLAINTEXT, '
        'sasl_mechanism: SCRAM-SHA-256, username: u, password: "${DC1_PW}"}}',
    )
    config = load_config_text(text, env={"DC1_PW": "hunter2"})
    password = config.clusters["dc1"].security.password
    assert password is not None and password.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(config)
    assert "hunter2" not in config.model_dump_json()


def test_env_default_is_used_when_variable_unset() -> None:
    text = MINIMAL.replace('"127.0.0.1:9093"', '"${DC2_SERVERS:-10.0.0.2:9092}"')
    assert load_config_text(text, env={}).clusters["dc2"].bootstrap_servers == "10.0.0.2:9092"


def test_every_problem_is_reported_with_its_key_path() -> None:
    text = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9092"
    security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, username: u, password: "${MISSING}"}
  dc2: {bootstrap_servers: "no-port", colour: blue}
flows:
  - source: dc1
    target: dc9
    topics: {include: ["orders("]}
state_store: {url: "not a url"}
"""
    found = problems_of(text)
    assert found["clusters.dc1.security.password"] == "environment variable MISSING is not set"
    assert "host:port" in found["clusters.dc2.bootstrap_servers"]
    assert found["clusters.dc2.colour"] == "unknown key"
    assert found["flows[0].target"].startswith("unknown cluster 'dc9'")
    assert "invalid regex" in found["flows[0].topics.include"]
    assert "SQLAlchemy" in found["state_store.url"]


def test_sasl_without_credentials_is_rejected() -> None:
    text = MINIMAL.replace(
        '{bootstrap_servers: "127.0.0.1:9092"}',
        '{bootstrap_servers: "127.0.0.1:9092", security: {protocol: SASL_SSL}}',
    )
    found = problems_of(text)
    assert "sasl_mechanism" in found["clusters.dc1.security"]


def test_flow_between_same_cluster_and_duplicates_are_rejected() -> None:
    text = MINIMAL + "  - {source: dc1, target: dc2}\n  - {source: dc2, target: dc2}\n"
    found = problems_of(text)
    assert "source and target are both" in found["flows[2]"]


def test_duplicate_flow_is_rejected() -> None:
    found = problems_of(MINIMAL + "  - {source: dc1, target: dc2}\n")
    assert found["flows[1]"] == "duplicate flow dc1->dc2"


def test_invalid_yaml_names_the_line() -> None:
    found = problems_of("clusters:\n  dc1: [unclosed\n")
    ((path, reason),) = found.items()
    assert path.startswith("line ") and reason.startswith("invalid YAML")


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_mm1_comma_form_is_split_but_quantifiers_are_not() -> None:
    topics = NameFilter(include=("orders,payments.*", "a{1,3}"))
    assert topics.include == ("orders", "payments.*", "a{1,3}")


def test_bad_transform_and_policy_are_reported_at_load() -> None:
    text = MINIMAL.replace(
        "  - {source: dc1, target: dc2}",
        "  - {source: dc1, target: dc2, replication_policy: {kind: nope},"
        " transforms: [{type: filter, options: {}}]}",
    )
    found = problems_of(text)
    assert found["flows[0].replication_policy.kind"] == "unknown policy 'nope'"
    assert "key_regex" in found["flows[0].transforms[0]"]


def test_local_config_replicates_first_to_second_or_has_no_flow(tmp_path: Path) -> None:
    from drkit.local.cluster import ClusterStatus
    from drkit.local.config_writer import write_local_config

    two = [ClusterStatus("dc1", "127.0.0.1:1", ()), ClusterStatus("dc2", "127.0.0.1:2", ())]
    config = load_config(write_local_config(tmp_path / "a", two), env={})
    assert [f.name for f in config.flows] == ["dc1->dc2"]
    assert config.state_store.url is not None
    one = [ClusterStatus("solo", "127.0.0.1:1", ())]
    assert load_config(write_local_config(tmp_path / "b", one), env={}).flows == ()
