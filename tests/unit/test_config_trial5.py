"""Issue 45, trial 5: config inputs `drkit config validate` accepted that failed later or
misled.  Each is now one line naming the key path and the cause (exit 2), or - legal but
surely unintended - a warning (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.config_checks import CONFIG_CHECKS
from drkit.errors import ConfigError

_CLUSTERS = """\
clusters:
  dc1: {bootstrap_servers: 'h1:9092'}
  dc2: {bootstrap_servers: 'h2:9092'}
"""
_FLOW = "flows: [{source: dc1, target: dc2}]\n"


def _validate(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["config", "validate", str(path)])
    return done.exit_code, [line for line in done.output.splitlines() if line.strip()]


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, checks=CONFIG_CHECKS)
    return [str(problem) for problem in caught.value.problems]


def _warnings(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["config", "validate", str(path), "-o", "json"])
    assert done.exit_code == 0, done.output
    warnings: list[str] = json.loads(done.stdout)["warnings"]
    return warnings


# --- misleading (must fix) -------------------------------------------------------------------


def test_c21_fence_principal_without_a_type_is_refused(tmp_path: Path) -> None:
    code, lines = _validate(tmp_path, _CLUSTERS + "failover: {fence_principal: admin}\n")
    assert code == 2
    assert lines == [
        f"error: {tmp_path / 'c.yaml'}: failover.fence_principal: 'admin' is not a principal "
        "(Type:name, e.g. User:admin)"
    ]
    load_config_text(_CLUSTERS + "failover: {fence_principal: 'User:fencer'}\n")  # still fine


@pytest.mark.parametrize(
    ("security", "expected"),
    [
        ("{protocol: PLAINTEXT, username: u, password: p}", "SASL_PLAINTEXT or SASL_SSL?"),
        ("{username: u}", "SASL_PLAINTEXT or SASL_SSL?"),  # PLAINTEXT is the default
        ("{protocol: SSL, username: u, password: p}", "SASL_SSL?"),
    ],
)
def test_d19_credentials_unused_without_sasl_are_a_warning(
    tmp_path: Path, security: str, expected: str
) -> None:
    text = f"clusters:\n  dc1: {{bootstrap_servers: 'h1:9092', security: {security}}}\n"
    protocol = "SSL" if "SSL" in security else "PLAINTEXT"
    assert (
        f"clusters.dc1.security: username/password are unused with {protocol} ({expected})"
        in _warnings(tmp_path, text)
    )


def test_d37_role_security_credentials_unused_are_a_warning(tmp_path: Path) -> None:
    text = (
        "clusters:\n  dc1:\n    bootstrap_servers: 'h1:9092'\n"
        "    role_security: {monitor: {protocol: PLAINTEXT, username: u}}\n"
    )
    assert (
        "clusters.dc1.role_security.monitor: username/password are unused with PLAINTEXT "
        "(SASL_PLAINTEXT or SASL_SSL?)"
    ) in _warnings(tmp_path, text)


@pytest.mark.parametrize(
    ("setting", "path", "bound"),
    [
        ("flows: [{source: dc1, target: dc2, retry: {delivery_timeout_s: 1e12}}]",
         "flows[0].retry.delivery_timeout_s", "2147483.647"),
        ("flows: [{source: dc1, target: dc2, topic_refresh_interval_s: 4000}]",
         "flows[0].topic_refresh_interval_s", "3600"),
        ("health: {probe_timeout_s: 1e12, probe_interval_s: 2e12, observation_window_s: 4e12}",
         "health.probe_timeout_s", "2147483.647"),
    ],
)  # fmt: skip
def test_e27_seconds_that_become_librdkafka_ms_settings_are_bounded(
    setting: str, path: str, bound: str
) -> None:
    (problem,) = _problems(_CLUSTERS + setting + "\n")
    assert problem.startswith(f"{path}: at most {bound} (seconds: "), problem


def test_e27_the_largest_delivery_timeout_fits_message_timeout_ms() -> None:
    from drkit.config.model import MAX_MS_SETTING_S

    assert int(MAX_MS_SETTING_S * 1000) == 2**31 - 1
    flow = "flows: [{source: dc1, target: dc2, retry: {delivery_timeout_s: 2147483.647}}]\n"
    load_config_text(_CLUSTERS + flow, checks=CONFIG_CHECKS)


def _route(pattern: str, replacement: str) -> str:
    return (
        _CLUSTERS + "flows:\n- source: dc1\n  target: dc2\n  transforms:\n  - type: route\n"
        f"    options: {{pattern: '{pattern}', replacement: '{replacement}'}}\n"
    )


def test_e36_route_internal_names() -> None:
    problems = _problems(_route("^(.*)$", "__consumer_offsets"))
    assert problems == [
        "flows[0].transforms[0].options.replacement: '__consumer_offsets' routes topics onto an "
        "internal name (a name Kafka or drkit keeps for itself): Kafka's __* topics and drkit's "
        "own are never a replica's name"
    ]
    for replacement in ("__\\1", "_drkit_x", "\\1.internal"):
        (problem,) = _problems(_route("^(.*)$", replacement))
        assert problem.startswith("flows[0].transforms[0].options.replacement:"), problem
    load_config_text(_route("^(.*)$", "copy.\\1"), checks=CONFIG_CHECKS)
    load_config_text(_route("^orders$", "billing-orders"), checks=CONFIG_CHECKS)


def test_e36_many_topics_routed_onto_one_literal_name_is_a_warning(tmp_path: Path) -> None:
    warned = _warnings(tmp_path, _route("^(.*)$", "everything"))
    assert any(
        w.startswith("flows[0].transforms[0].options.replacement: no group reference")
        for w in warned
    ), warned
    for quiet in (_route("^(.*)$", "copy.\\1"), _route("^orders$", "billing-orders")):
        assert not any("group reference" in w for w in _warnings(tmp_path, quiet))


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite://", "sqlite:///:memory:"])
def test_f10_an_in_memory_state_store_is_refused(tmp_path: Path, url: str) -> None:
    code, lines = _validate(tmp_path, _CLUSTERS + f"state_store: {{url: '{url}'}}\n")
    assert code == 2
    (line,) = lines
    assert "state_store.url: an in-memory SQLite store" in line
    assert "a path may be a typo" in line


def test_f14b_a_directory_as_the_sqlite_store_is_refused(tmp_path: Path) -> None:
    assert _problems(_CLUSTERS + f"state_store: {{url: 'sqlite:///{tmp_path}'}}\n") == [
        f"state_store.url: {tmp_path} is a directory: give the SQLite store's file in it, e.g. "
        f"sqlite:///{tmp_path / 'drkit.db'}"
    ]


def test_f10_a_sqlite_file_store_is_still_fine(tmp_path: Path) -> None:
    load_config_text(_CLUSTERS + f"state_store: {{url: 'sqlite:///{tmp_path}/drkit.db'}}\n")


# --- weak ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_CLUSTERS + "failover: {hooks: [{when: before, command: 'echo hi'}]}",
         "failover.hooks[0].command: must be a list, e.g. [prog, arg]"),
        (_CLUSTERS + "failover: {hooks: [{when: before, command: [a], pass_env: PATH}]}",
         "failover.hooks[0].pass_env: must be a list, e.g. [KUBECONFIG, AWS_PROFILE]"),
        ("clusters: {dc1: {bootstrap_servers: 'h:1', super_users: 'User:admin'}}",
         "clusters.dc1.super_users: must be a list, e.g. ['User:admin']"),
        (_CLUSTERS + "flows: {source: dc1, target: dc2}",
         "flows: must be a list, e.g. [{source: dc1, target: dc2}]"),
        ("clusters: {dc1: {bootstrap_servers: [a, b]}}",
         "clusters.dc1.bootstrap_servers: must be one comma-separated string "
         "'host:port,host:port'"),
        ("clusters: {dc1: {bootstrap_servers: 'h:1', schema_registry: 'http://r:8080'}}",
         "clusters.dc1.schema_registry: must be a mapping with url: "
         "http://host:8080/apis/ccompat/v7"),
        ("clusters: {dc1: {bootstrap_servers: 'h:1', schema_registry: {url: 'ftp://r'}}}",
         "clusters.dc1.schema_registry.url: must be an http(s):// URL, e.g. "
         "https://host:8080/path"),
        (_CLUSTERS + "flows: [{source: dc1, target: dc2, replication_policy: {separator: /}}]",
         "flows[0].replication_policy.separator: may hold only letters, digits, '.', '_' or '-'"),
        (_CLUSTERS + "flows: [{source: dc1, target: dc2, kafka_streams: ['']}]",
         "flows[0].kafka_streams[0]: may hold only letters, digits, '.', '_' or '-'"),
        (_CLUSTERS + "health: {observer_quorum: 1000000000000000000000000000000}",
         "health.observer_quorum: at most 1000"),
        (_CLUSTERS + "failover: {lease_ttl_s: 0.001}", "failover.lease_ttl_s: at least 1"),
    ],
)  # fmt: skip
def test_shapes_and_bounds_in_words(text: str, expected: str) -> None:
    problems = _problems(text)
    assert expected in problems, problems
    assert not any("valid tuple" in p or "pattern" in p or "instance of" in p for p in problems)


def test_e20_an_invalid_filter_regex_names_its_key() -> None:
    text = _CLUSTERS + (
        "flows: [{source: dc1, target: dc2, transforms: [{type: filter, "
        "options: {key_regex: '('}}]}]\n"
    )
    assert _problems(text) == [
        "flows[0].transforms[0].options.key_regex: invalid regex: missing ), unterminated "
        "subpattern at position 0"
    ]


def test_e31_a_duplicate_flow_is_said_once(tmp_path: Path) -> None:
    code, lines = _validate(tmp_path, _CLUSTERS + "flows: [{source: dc1, target: dc2}, "
                                                  "{source: dc1, target: dc2}]\n")  # fmt: skip
    assert code == 2
    assert lines == [f"error: {tmp_path / 'c.yaml'}: flows[1]: duplicate flow dc1->dc2"]


def test_f32_no_cluster_is_one_line() -> None:
    assert _problems("clusters: {}\n" + _FLOW) == ["clusters: at least one cluster is needed"]


@pytest.mark.parametrize(
    "topics", ["{include: []}", "{exclude: ['.*']}", "{include: ['orders'], exclude: ['.+']}"]
)
def test_e05_a_flow_selecting_no_topic_is_a_warning(tmp_path: Path, topics: str) -> None:
    text = _CLUSTERS + f"flows: [{{source: dc1, target: dc2, topics: {topics}}}]\n"
    assert any(w.endswith("flow dc1->dc2 selects no topic") for w in _warnings(tmp_path, text))
    text = _CLUSTERS + "flows: [{source: dc1, target: dc2, topics: {exclude: ['tmp.*']}}]\n"
    assert not any("selects no topic" in w for w in _warnings(tmp_path, text))


def test_f03_a_webhook_without_events_is_a_warning(tmp_path: Path) -> None:
    text = _CLUSTERS + "notifications: {webhooks: [{url: 'https://h/x', events: []}]}\n"
    assert "notifications.webhooks[0].events: empty - the webhook never fires" in _warnings(
        tmp_path, text
    )


def test_f05_a_webhook_url_with_a_password_is_a_literal_secret(tmp_path: Path) -> None:
    text = _CLUSTERS + "notifications: {webhooks: [{url: 'https://user:s3cret@h/x'}]}\n"
    warned = _warnings(tmp_path, text)
    assert any(w.startswith("notifications.webhooks[0].url is a literal secret") for w in warned)
    assert not any("s3cret" in w for w in warned)
    text = _CLUSTERS + "notifications: {webhooks: [{url: 'https://user:${HOOK_PW:-x}@h/x'}]}\n"
    assert not any("literal secret" in w for w in _warnings(tmp_path, text))


def test_f23_tracing_file_in_a_missing_directory_or_a_directory_is_a_warning(
    tmp_path: Path,
) -> None:
    """Said by validate on the machine it runs on; not a load-time refusal (the example config
    names /var/log/drkit, there on the engine's host only)."""
    missing = tmp_path / "nope" / "spans.jsonl"
    assert (
        f"tracing.file: {missing}: its directory {missing.parent} does not exist (a relative "
        "path from where drkit runs) - no span would be written"
    ) in _warnings(tmp_path, _CLUSTERS + f"tracing: {{file: '{missing}'}}\n")
    assert (
        f"tracing.file: {tmp_path} is a directory: give a file for the spans (JSON lines)"
    ) in _warnings(tmp_path, _CLUSTERS + f"tracing: {{file: '{tmp_path}'}}\n")
    fine = _CLUSTERS + f"tracing: {{file: '{tmp_path / 'spans.jsonl'}'}}\n"
    assert not any(w.startswith("tracing.file") for w in _warnings(tmp_path, fine))
