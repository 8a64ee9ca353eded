"""The typed config model and loader: good files load, bad ones name every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.config import load_config, load_config_text
from drkit.config.model import NameFilter, SecurityProtocol
from drkit.config_checks import CONFIG_CHECKS
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
    """What an edge's load (the model's rules and every component check) says of ``text``."""
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, env=env or {}, checks=CONFIG_CHECKS)
    return {p.path: p.reason for p in caught.value.problems}


EXAMPLE_SECRETS = {
    "DRKIT_DC1_PASSWORD": "p1",
    "DRKIT_DC2_PASSWORD": "p2",
    "DRKIT_DB_PASSWORD": "p3",
}


def test_example_config_is_valid() -> None:
    config = load_config(REPO / "config" / "drkit.example.yaml", env=EXAMPLE_SECRETS)
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
    assert config.clusters["dc1"].schema_registry is None
    assert not config.flows[0].schema_sync.enabled
    # With a registry per cluster (drkit local up --schema-registry) the flow syncs schemas;
    # with one only, it cannot.
    urls = {dc: f"http://127.0.0.1:{port}/apis/ccompat/v7" for dc, port in (("dc1", 5), ("dc2", 6))}
    both = load_config(write_local_config(tmp_path / "c", two, registries=urls), env={})
    assert both.clusters["dc2"].schema_registry is not None
    assert both.clusters["dc2"].schema_registry.url == urls["dc2"]
    assert both.flows[0].schema_sync.enabled
    half = {"dc1": urls["dc1"]}
    assert (
        not load_config(write_local_config(tmp_path / "d", two, registries=half), env={})
        .flows[0]
        .schema_sync.enabled
    )


ROUTE = MINIMAL.replace(
    "  - {source: dc1, target: dc2}",
    "  - source: dc1\n    target: dc2\n    transforms:\n"
    "      - {type: filter, options: {key_regex: '^test-'}}\n"
    "      - {type: route, options: {pattern: '%s', replacement: '%s'}}",
)


@pytest.mark.parametrize(
    ("pattern", "replacement", "named"),
    [
        (r"^dc1\.(.*)$", r"backup.\3", "3"),
        (r"^dc1\.(?P<name>.*)$", r"backup.\g<nom>", "nom"),
    ],
)
def test_route_replacement_naming_a_group_the_pattern_lacks_fails_at_load(
    pattern: str, replacement: str, named: str
) -> None:
    found = problems_of(ROUTE % (pattern, replacement))
    assert named in found["flows[0].transforms[1].options.replacement"]


def test_route_replacement_using_the_patterns_groups_loads() -> None:
    config = load_config_text(ROUTE % (r"^dc1\.(?P<name>.*)$", r"backup.\g<name>.\1"), env={})
    assert [t.type for t in config.flows[0].transforms] == ["filter", "route"]


def test_contradictory_health_settings_are_reported_with_their_key_paths() -> None:
    found = problems_of(
        MINIMAL + "health: {probe_interval_s: 2, probe_timeout_s: 3, observation_window_s: 4}\n"
    )
    assert set(found) == {"health.probe_timeout_s", "health.observation_window_s"}
    assert "2" in found["health.probe_timeout_s"]  # names the interval it must stay below
    assert "5" in found["health.observation_window_s"]  # interval + timeout
    found = problems_of(MINIMAL + "health: {canary_topic: 'no spaces'}\n")
    assert set(found) == {"health.canary_topic"}


def test_automatic_failover_that_could_never_act_is_a_config_error() -> None:
    found = problems_of(MINIMAL + "failover: {automatic: true}\n")
    assert list(found) == ["failover.automatic"]
    assert "observer_quorum" in found["failover.automatic"]
    single = MINIMAL + "failover: {automatic: true, allow_single_observer: true}\n"
    assert load_config_text(single, env={}).failover.automatic is True


@pytest.mark.parametrize(
    ("servers", "hosts"),
    [
        ("[::1]:9092", [("::1", 9092)]),
        ("[::1]:9092, 127.0.0.1:9093", [("::1", 9092), ("127.0.0.1", 9093)]),
        ("[2001:db8::7]:19092,kafka-1.example.net:9092", [("2001:db8::7", 19092),
                                                          ("kafka-1.example.net", 9092)]),
    ],
)  # fmt: skip
def test_ipv6_bootstrap_servers_are_accepted_in_brackets(
    servers: str, hosts: list[tuple[str, int]]
) -> None:
    config = load_config_text(MINIMAL.replace('"127.0.0.1:9092"', f'"{servers}"'), env={})
    cluster = config.clusters["dc1"]
    assert [(a.host, a.port) for a in cluster.bootstrap_addresses] == hosts
    # librdkafka parses "[v6]:port" and "host:port", comma-separated, no blanks.
    assert cluster.bootstrap_servers == ",".join(
        f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts
    )


@pytest.mark.parametrize(
    ("servers", "hint"),
    [
        ("::1:9092", "[::1]:9092"),
        ("[::1]", "port"),
        ("[not-v6]:9092", "IPv6"),
        ("PLAINTEXT://kafka:9092", "scheme"),
    ],
)
def test_bad_bootstrap_servers_are_reported(servers: str, hint: str) -> None:
    found = problems_of(MINIMAL.replace('"127.0.0.1:9092"', f'"{servers}"'))
    assert hint in found["clusters.dc1.bootstrap_servers"]


def test_example_config_requires_its_secrets_from_the_environment() -> None:
    # No "${VAR:-change-me}" fallbacks: an unset secret is a problem, never a default password.
    found = problems_of((REPO / "config" / "drkit.example.yaml").read_text())
    assert found == {
        "clusters.dc1.security.password": "environment variable DRKIT_DC1_PASSWORD is not set",
        "clusters.dc2.security.password": "environment variable DRKIT_DC2_PASSWORD is not set",
        "state_store.url": "environment variable DRKIT_DB_PASSWORD is not set",
    }


def test_client_override_secrets_are_masked_by_name() -> None:
    from drkit.config.secrets import MASK, redacted_dump

    text = MINIMAL.replace(
        '{bootstrap_servers: "127.0.0.1:9092"}',
        '{bootstrap_servers: "127.0.0.1:9092", allow_insecure_overrides: true, client_overrides: {'
        '"sasl.oauthbearer.client.secret": s3cr3t-a, "ssl.key.password": s3cr3t-b,'
        ' "ssl.key.pem": s3cr3t-c, "sasl.oauthbearer.token.endpoint.url": s3cr3t-d,'
        ' "socket.keepalive.enable": true, "linger.ms": 7}}',
    )
    shown = redacted_dump(load_config_text(text, env={}))
    overrides = shown["clusters"]["dc1"]["client_overrides"]
    assert overrides == {
        "sasl.oauthbearer.client.secret": MASK,
        "ssl.key.password": MASK,
        "ssl.key.pem": MASK,
        "sasl.oauthbearer.token.endpoint.url": MASK,
        "socket.keepalive.enable": True,
        "linger.ms": 7,
    }


def test_what_validated_before_but_misled_is_refused_with_its_cause() -> None:
    """Each validated once and then misled: a ';'-separated list got an IPv6 hint, an alias
    given twice dropped the first definition unseen, a hook on a misspelt step never ran."""
    semi = problems_of(MINIMAL.replace('"127.0.0.1:9092"', '"a:9092;b:9092"'))
    assert "separate bootstrap servers with ',', not ';'" in semi["clusters.dc1.bootstrap_servers"]
    twice = problems_of("clusters:\n  dc1: {bootstrap_servers: 'a:1'}\n"
                        "  dc1: {bootstrap_servers: 'b:1'}\n")  # fmt: skip
    assert twice == {"line 3, column 3": "invalid YAML: 'dc1' is given twice in one mapping"}, twice
    hooked = problems_of(MINIMAL + "failover:\n  hooks: [{when: before, step: move_pointr, "
                         "command: ['true']}]\n")  # fmt: skip
    assert "no runbook has a step 'move_pointr'" in hooked["failover.hooks[0].step"]
    assert "move_pointer" in hooked["failover.hooks[0].step"]
    good = "[{when: after, step: move_pointer, command: ['true']}, {when: before, command: [x]}]"
    load_config_text(MINIMAL + f"failover:\n  hooks: {good}\n", env={})


def test_a_flow_is_named_on_a_command_line_with_or_without_shell_quoting() -> None:
    """``dc1->dc2`` unquoted is a redirection: the command got ``dc1-`` and the shell wrote a
    file ``dc2``.  ``dc1:dc2`` names the same flow without quoting; a cut name says why."""
    from drkit.config.loader import canonical_flow, known_flow

    config = load_config_text(MINIMAL, env={})
    for typed in ("dc1->dc2", "dc1:dc2", " dc1 -> dc2 "):
        assert canonical_flow(typed) == "dc1->dc2"
        assert known_flow(config, typed, "--flow").name == "dc1->dc2"
    with pytest.raises(ConfigError) as cut:
        known_flow(config, "dc1-", "--flow")
    assert "the shell cut it at '>'" in str(cut.value) and "dc1:TARGET" in str(cut.value)


def test_a_registry_url_holding_credentials_is_refused_without_echoing_them() -> None:
    """Issue 46, medium 5: ``user:password@`` in a registry URL reached ``config show``,
    validation errors and the status page's drift lines; the password field is masked."""
    text = (
        "clusters:\n  dc1:\n    bootstrap_servers: 127.0.0.1:1\n"
        "    schema_registry: {url: 'http://alice:Sup3rS3cret@reg:8080/apis/ccompat/v7'}\n"
        "  dc2: {bootstrap_servers: 127.0.0.1:2}\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config_text(text, env={})
    assert "schema_registry.url" in str(refused.value) and "username and password" in str(
        refused.value
    )
    assert "Sup3rS3cret" not in str(refused.value)
    fine = text.replace("alice:Sup3rS3cret@", "")
    registry = load_config_text(fine, env={}).clusters["dc1"].schema_registry
    assert registry is not None and registry.url == "http://reg:8080/apis/ccompat/v7"


@pytest.mark.parametrize(
    ("follows", "policy", "key", "cause"),
    [
        ('["dc9"]', "prefix", "flows[0].follows", "unknown cluster 'dc9'"),
        ('["dc1"]', "prefix", "flows[0]", "an end of the flow itself"),
        ('["dc2", "dc2"]', "prefix", "flows[0]", "lists a cluster twice"),
        ('["dc2"]', "identity", "flows[0]", "identity names do not"),
    ],
)
def test_follows_names_other_clusters_of_a_policy_that_names_origins(
    follows: str, policy: str, key: str, cause: str
) -> None:
    text = f"""
clusters:
  dc1: {{bootstrap_servers: "127.0.0.1:9092"}}
  dc2: {{bootstrap_servers: "127.0.0.1:9093"}}
  dc3: {{bootstrap_servers: "127.0.0.1:9094"}}
flows:
  - {{source: dc1, target: dc3, follows: {follows}, replication_policy: {{kind: {policy}}}}}
"""
    found = problems_of(text)
    assert key in found and cause in found[key], found
    good = text.replace(f"follows: {follows}", 'follows: ["dc2"]').replace("identity", "prefix")
    assert load_config_text(good).flows[0].follows == ("dc2",)
