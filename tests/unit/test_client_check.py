"""What librdkafka would refuse is found by ``config validate`` and named by every command.

Found as a new user would: configs ``config validate`` called ok ended in a Python traceback
from the Kafka client as soon as a command built one - an unknown ``client_overrides``
property, a CA file that is not there, a secret from an empty ``${VAR}``.  None of these needs
a broker: librdkafka refuses them while building the client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.kafka.client_check import client_problems

BASE = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"%s}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
flows: [{source: dc1, target: dc2}]
"""

CASES = {
    "unknown-property": (", client_overrides: {linger.msx: 5}",
                         'clusters.dc1.client_overrides.linger.msx: librdkafka refuses'),
    "bad-value": (", client_overrides: {compression.type: zstandard}",
                  "clusters.dc1.client_overrides.compression.type: librdkafka refuses"),
    # Refused under librdkafka's own alias (queue.buffering.max.ms): named as written (issue 45).
    "aliased": (", client_overrides: {linger.ms: -5}",
                "clusters.dc1.client_overrides.linger.ms: librdkafka refuses"),
    "missing-ca": (", security: {protocol: SSL, ssl_ca_location: /nonexistent/ca.pem}",
                   "clusters.dc1.security.ssl_ca_location: /nonexistent/ca.pem does not exist"),
    "not-a-ca": (", security: {protocol: SSL, ssl_ca_location: " + __file__ + "}",
                 "clusters.dc1.security.ssl_ca_location: librdkafka refuses"),
    "empty-secret": (", security: {protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN, "
                     'username: u, password: "${EMPTY_SECRET}"}',
                     "clusters.dc1.security: password empty"),
}  # fmt: skip


def _write(tmp_path: Path, case: str) -> Path:
    path = tmp_path / f"{case}.yaml"
    path.write_text(BASE % CASES[case][0])
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_validate_names_what_the_client_library_would_refuse(
    case: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, case)
    runner = CliRunner()
    env = {"EMPTY_SECRET": ""}
    done = runner.invoke(cli, ["config", "validate", str(path)], env=env)
    assert done.exit_code == 2, done.output
    assert CASES[case][1] in done.output and "Traceback" not in done.output, done.output
    as_json = runner.invoke(cli, ["config", "validate", str(path), "-o", "json"], env=env)
    assert as_json.exit_code == 2
    document = json.loads(as_json.stdout)
    assert document["ok"] is False and document["schema"] == "drkit.config.validate/v1"
    assert any(CASES[case][1] in line for line in document["problems"]), document


@pytest.mark.parametrize("case", ["unknown-property", "bad-value", "missing-ca", "not-a-ca"])
def test_a_command_that_builds_a_client_names_the_refused_key_in_one_line(
    case: str, tmp_path: Path
) -> None:
    """Past validation (the model alone accepts these): the command's client is refused at
    construction; the error is one line naming the key, exit 2 - not a traceback."""
    path = _write(tmp_path, case)
    done = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "state"), "clusters", "check", "--config", str(path)]
    )
    assert done.exit_code == 2, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    key = CASES[case][1].split(":")[0]
    assert key in done.output, done.output


def test_good_settings_and_role_credentials_pass(tmp_path: Path) -> None:
    config = load_config_text(
        BASE % (", client_overrides: {linger.ms: 20}, role_security: {replicator: "
                "{protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN, username: r, password: p}}"),
        env={},
    )  # fmt: skip
    assert client_problems(config) == []
