"""Configs that *pass* validation, fed to every command that builds Kafka clients or opens the
state store (issue 45, item 11): hypothesis draws clusters, flows, security and policies an
operator could write; the clusters are addresses nobody listens on.  Every command must answer
with an exit code of the table and a sentence - no traceback - and must not wait out a
client's timeout for a cluster that refuses connections: a refused port is known at once, so
no command asks a Kafka client anything (each such request would sit out its timeout, 10 s
the shortest; issue 51: a count, not a clock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.errors import ExitCode
from tests.kafka_requests import record_kafka_requests

ALIASES = ["dc1", "dc2", "east", "west-2", "c_3"]


def _cluster(port: int, sasl: bool) -> dict[str, Any]:
    cluster: dict[str, Any] = {"bootstrap_servers": f"127.0.0.1:{port},localhost:{port + 1}"}
    if sasl:
        cluster["security"] = {
            "protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "username": "drkit", "password": "not-logged",
        }  # fmt: skip
    return cluster


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    aliases = draw(st.lists(st.sampled_from(ALIASES), min_size=2, max_size=3, unique=True))
    ports = draw(st.lists(st.integers(1, 9), min_size=len(aliases), max_size=len(aliases),
                          unique=True))  # fmt: skip
    ports = [2 * p for p in ports]  # each cluster its own two ports
    clusters = {a: _cluster(p, draw(st.booleans())) for a, p in zip(aliases, ports, strict=True)}
    source, target = aliases[0], aliases[1]
    topics = draw(st.lists(st.sampled_from(["orders.*", "payments", r"a\.b", "[a-z]+-v[0-9]"]),
                           min_size=1, max_size=2, unique=True))  # fmt: skip
    flow: dict[str, Any] = {"source": source, "target": target, "topics": {"include": topics}}
    if draw(st.booleans()):
        flow["groups"] = {"include": [".*"], "exclude": ["console-.*"]}
    flows = [flow]
    if draw(st.booleans()):
        flows.append({"source": target, "target": source, "topics": {"include": topics}})
    return {
        "clusters": clusters,
        "flows": flows,
        "health": {
            "probe_interval_s": 10,
            "probe_timeout_s": draw(st.sampled_from([0.5, 2.0, 8.0])),
            "observer_quorum": draw(st.sampled_from([1, 2])),
        },
        "failover": {
            "max_rpo_records": draw(st.sampled_from([0, 100])),
            "lease_ttl_s": draw(st.sampled_from([10.0, 60.0])),
        },
    }


def _commands(source: str, target: str, path: str) -> list[list[str]]:
    return [
        ["config", "validate", path],
        ["clusters", "check"],
        ["status"],
        ["status", "--no-probe", "-o", "json"],
        ["failover", "--from", source, "--to", target, "--plan"],
        ["switchover", "--from", source, "--to", target, "--plan", "-o", "json"],
        ["offsets", "translate", "--group", "billing", "--from", source, "--to", target],
        ["doctor"],
        ["acls", "--role", "replicator", "--cluster", target],
        ["fences", "list"],
    ]


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(document=configs())  # fmt: skip
def test_a_valid_config_with_clusters_that_refuse_gets_answers_not_tracebacks(
    tmp_path_factory: Any, monkeypatch: pytest.MonkeyPatch, document: dict[str, Any]
) -> None:
    directory: Path = tmp_path_factory.mktemp("valid")
    document = {**document, "state_store": {"url": f"sqlite:///{directory / 'drkit.db'}"}}
    text = yaml.safe_dump(document)
    load_config_text(text, env={})  # valid by construction: the premise of this test
    path = directory / "drkit.yaml"
    path.write_text(text)
    source, target = document["flows"][0]["source"], document["flows"][0]["target"]
    codes = {int(code) for code in ExitCode}
    requests = record_kafka_requests(monkeypatch)
    for command in _commands(source, target, str(path)):
        requests.clear()
        result = CliRunner().invoke(
            cli, ["--state-dir", str(directory / "state"), *command],
            env={"DRKIT_CONFIG": str(path)}, catch_exceptions=True,
        )  # fmt: skip
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{command}: traceback") from result.exception
        assert "Traceback" not in result.output, (command, result.output[-2000:])
        assert result.exit_code in codes, (command, result.exit_code, result.output[-500:])
        assert "not-logged" not in result.output, (command, "a password was printed")
        assert requests == [], (command, requests, result.output[-500:])
